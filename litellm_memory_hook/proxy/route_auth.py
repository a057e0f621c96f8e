"""LiteLLM's own key check for the memory routes, with answers a client can act on.

:func:`memory_auth` (the routes' ``Auth`` dependency) checks the body first (a body that is not
a JSON object would crash LiteLLM's check), then calls ``user_api_key_auth`` with the headers
LiteLLM's own routes read; :func:`auth_failure` turns its failures into 401 (missing or wrong
key), 403 (a valid key refused) or 429 (a budget or rate limit).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from litellm.proxy._types import SpecialHeaders
from litellm.proxy.auth.user_api_key_auth import user_api_key_auth

logger = logging.getLogger("litellm_memory_hook")

_KEY_HEADERS = {
    "api_key": SpecialHeaders.openai_authorization.value,
    "azure_api_key_header": SpecialHeaders.azure_authorization.value,
    "anthropic_api_key_header": SpecialHeaders.anthropic_authorization.value,
    "google_ai_studio_api_key_header": SpecialHeaders.google_ai_studio_authorization.value,
    "azure_apim_header": SpecialHeaders.azure_apim_authorization.value,
    "custom_litellm_key_header": SpecialHeaders.custom_litellm_api_key.value,
}
_NO_DB_QUIRK = "no connected db"


def _status_of(exc: Exception) -> int | None:
    """The HTTP status an auth exception carries (``HTTPException.status_code`` or LiteLLM's
    ``ProxyException.code``), or ``None``."""
    for name in ("status_code", "code"):
        value = getattr(exc, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.isdigit():
            return int(value)
    return None


def _message_of(exc: Exception) -> str:
    for name in ("message", "detail"):
        value = getattr(exc, name, None)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return str(exc).strip()


def auth_failure(exc: Exception, *, key_sent: bool) -> HTTPException:
    """The answer to a failed LiteLLM key check.

    Args:
        exc: what ``user_api_key_auth`` raised (``ProxyException``, ``HTTPException`` or other).
        key_sent: whether the request carried a key in any header LiteLLM reads.

    Returns:
        401 for a missing or wrong key (also for LiteLLM's 500 / 400 "No connected db." answers
        without a database, BerriAI/litellm#35457); 403 when LiteLLM refuses a valid key (e.g.
        route permissions); 429 for LiteLLM's budget and rate limits. The detail is one clear
        sentence.
    """
    if not key_sent:
        return HTTPException(
            status_code=401,
            detail="missing API key: send 'Authorization: Bearer <your LiteLLM key>'",
            headers={"WWW-Authenticate": "Bearer"},
        )
    status = _status_of(exc)
    message = _message_of(exc)
    if status == 403:
        return HTTPException(
            status_code=403, detail=f"this key may not use the memory API: {message}"
        )
    if status == 429:
        return HTTPException(status_code=429, detail=message or "rate or budget limit reached")
    detail = "invalid API key"
    if status == 401 and message and _NO_DB_QUIRK not in message.lower():
        detail = f"invalid API key: {message}"
    return HTTPException(status_code=401, detail=detail, headers={"WWW-Authenticate": "Bearer"})


def body_error(raw: bytes) -> str | None:
    """Why a request body cannot be a memory route's body, or ``None`` when it can be (or is
    empty: FastAPI then names the missing fields).

    LiteLLM's key check reads the body and crashes on one that is not a JSON object, which
    would come back as "invalid API key"; so a body must be JSON (UTF-8), an object, and hold
    no lone surrogate (``"\\ud800"``: valid JSON, but not encodable text).
    """
    if not raw.strip():
        return None
    try:
        body = json.loads(raw)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        return f"the request body is not JSON: {exc}"
    if not isinstance(body, dict):
        return f"the request body must be a JSON object, not {type(body).__name__}"
    try:
        json.dumps(body, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return "the request body holds a lone surrogate escape (\\ud800-\\udfff): not text"
    return None


async def memory_auth(request: Request) -> Any:
    """FastAPI dependency: LiteLLM's key check for the memory routes.

    Checks the body first (:func:`body_error`: 422 for a body that is not a JSON object), then
    calls ``user_api_key_auth`` with the same headers LiteLLM's own routes read and returns its
    ``UserAPIKeyAuth``; tests override this dependency (``app.dependency_overrides``).

    Raises:
        HTTPException: 422 for a bad body; 401, 403 or 429, see :func:`auth_failure`.
    """
    if request.method in ("POST", "PUT", "PATCH"):
        problem = body_error(await request.body())
        if problem is not None:
            raise HTTPException(status_code=422, detail=problem)
    headers = {name: request.headers.get(header) for name, header in _KEY_HEADERS.items()}
    key_sent = any(isinstance(v, str) and v.strip() for v in headers.values())
    try:
        return await user_api_key_auth(request=request, **headers)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        failure = auth_failure(exc, key_sent=key_sent)
        logger.info(
            "memory API: auth failed (%s %s): %s", failure.status_code, type(exc).__name__, exc
        )
        raise failure from exc


Auth = Annotated[Any, Depends(memory_auth)]
