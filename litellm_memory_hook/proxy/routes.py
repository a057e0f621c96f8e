"""HTTP API for users' memories, served by the LiteLLM proxy itself under ``/memory/v1``.

What it serves (JSON in and out; the proxy's ``/openapi.json`` documents every shape, tag
``memory``):

==========  ====================================  ==================================================
method      path                                  answer
==========  ====================================  ==================================================
GET         /memory/v1/memories?user&model        200 ``{"pinned": [item], "memories": [item],
            [&conversation]                       "version": int}``; item = ``{"id", "text",
                                                  "created_ms"}`` (epoch ms), oldest first
POST        /memory/v1/pinned                     201 item; body ``{"user", "model", "text"
                                                  [, "conversation"]}``
PATCH       /memory/v1/pinned/{id}                200 item; body ``{"user", "model", "text"}``
DELETE      /memory/v1/pinned/{id}?user&model     204
DELETE      /memory/v1/memories/{id}?user&model   204 (an extracted memory; it is not extracted
                                                  again from old messages)
GET         /memory/v1/summary?user&model         200 ``{"summary", "cursor", "seq", "due_ms"}``
            [&conversation]                       (404 when the conversation holds nothing)
POST        /memory/v1/flush                      202 ``{"due_ms": int}``: the conversation is due
                                                  for extraction now; body ``{"user", "model"
                                                  [, "conversation"]}``; 404 when it has no
                                                  stored turns
DELETE      /memory/v1/users/{user}?model         200 ``{"user", "conversation", "deleted_keys",
            [&conversation]                       "conversations", "memory_sets"}``: forget the
                                                  user (every conversation and memory set in the
                                                  caller's tenant), or one conversation
GET         /memory/v1/export?user&model          200 the export document (``ExportDocument``,
            [&conversation]                       ``"format": "litellm-memory-export"``,
                                                  ``"version": 1``): the user, or one
                                                  conversation (404 when it holds nothing)
==========  ====================================  ==================================================

The history of a memory set (``GET /memory/v1/history``, ``POST
/memory/v1/history/{id}/restore``: what extraction jobs replaced or deleted, and putting one
back) is served by :mod:`litellm_memory_hook.proxy.history_routes` on the same router.

Configuration: none of its own. It uses the memory hook's settings (``callback_settings.memory``:
Redis URL, key prefix, ``pinned_item_chars``, ``max_pinned``) and the aliases'
``model_info.memory`` blocks, exactly as chat requests do. :func:`mount` adds the routes to the
running proxy (``litellm_memory_hook/proxy_callback.py`` calls it when LiteLLM loads the callback).

Auth and tenants: every route runs LiteLLM's own key check (``user_api_key_auth``), so any key
that may call the proxy's chat API may call these routes, and the caller's tenant comes from that
key (``team-<id>``, ``user-<id>``, ``key-<hash>``, or ``master`` for the master key; see
:func:`litellm_memory_hook.proxy.identity.tenant_from_auth`), never from the request; a caller
whose authentication has no team, user or key id has no tenant and gets 403. A key
therefore only ever sees and edits the memories that its own chat requests read: the id of
another tenant's memory is simply not found (404). ``user`` is the same id a chat request sends
in its OpenAI ``user`` field; ``model`` names a memory-enabled alias (its memory namespace and
scope apply); ``conversation`` is only needed for aliases with ``memory_scope: conversation`` and
for the summary and flush of a conversation other than the default one. With a LiteLLM database,
virtual keys that are not proxy admins need LiteLLM's route permission for ``/memory/v1/*``
(``allowed_routes``), as for any route that is not an LLM route.

Status codes: 400 bad input (empty or too long ``text``, unknown ``user`` or ``model``; the
``detail`` names the problem), 401 missing or wrong key (LiteLLM itself answers 500 or 400
"No connected db." there without a database, BerriAI/litellm#35457), 403 / 429 when LiteLLM
refuses a valid key (403 also for a caller without team, user or key id), 404 no such memory
for this caller, 422 a malformed body, 503 Redis is unreachable. The routes never answer 500.

Examples (the demo config's master key)::

    H='Authorization: Bearer sk-memory-demo'
    curl -s -H "$H" 'http://127.0.0.1:4000/memory/v1/memories?user=alice&model=demo'
    curl -s -H "$H" -H 'content-type: application/json' http://127.0.0.1:4000/memory/v1/pinned \\
      -d '{"user": "alice", "model": "demo", "text": "My birthday is on 3 March."}'
    curl -s -X PATCH -H "$H" -H 'content-type: application/json' \\
      http://127.0.0.1:4000/memory/v1/pinned/1718000000000-a1b2c3 \\
      -d '{"user": "alice", "model": "demo", "text": "My birthday is on 4 March."}'
    curl -s -X DELETE -H "$H" \\
      'http://127.0.0.1:4000/memory/v1/pinned/1718000000000-a1b2c3?user=alice&model=demo'
    curl -s -H "$H" 'http://127.0.0.1:4000/memory/v1/summary?user=alice&model=demo'
    curl -s -H "$H" -H 'content-type: application/json' http://127.0.0.1:4000/memory/v1/flush \\
      -d '{"user": "alice", "model": "demo"}'
    curl -s -H "$H" 'http://127.0.0.1:4000/memory/v1/export?user=alice&model=demo' > alice.json
    curl -s -X DELETE -H "$H" 'http://127.0.0.1:4000/memory/v1/users/alice?model=demo'

Forget and export: ``model`` names a memory-enabled alias as on every route (it resolves
``conversation``); without ``conversation`` they cover everything of the user in the caller's
tenant, whatever the alias. Forgetting one conversation keeps the memories the user's other
conversations share. Both go through the user's index (no ``KEYS``); forgetting twice answers
200 with zero counts.
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Path, Query, Request, Response
from litellm.proxy._types import SpecialHeaders
from litellm.proxy.auth.user_api_key_auth import user_api_key_auth
from pydantic import BaseModel, ConfigDict, Field
from redis.exceptions import RedisError

from litellm_memory_hook.errors import ConfigError, InvalidIdError, StoreError
from litellm_memory_hook.memory_api import (
    ExportDocument,
    MemoryAPI,
    MemoryInputError,
    MemoryNotFoundError,
    MemoryTarget,
    resolve_target,
    resolve_user,
)
from litellm_memory_hook.proxy.hook import MemoryHook, memory_hook
from litellm_memory_hook.proxy.identity import tenant_from_auth
from litellm_memory_hook.store.memory_sets import MemoryItem

logger = logging.getLogger("litellm_memory_hook")

PREFIX = "/memory/v1"


# -- request and response shapes --------------------------------------------------------------


class MemoryItemOut(BaseModel):
    """One memory: its id, its text and its creation time (epoch milliseconds)."""

    id: str = Field(description="Creation-ordered id, e.g. 1718000000000-a1b2c3.")
    text: str = Field(description="The memory as stored (pinned: exactly as typed, trimmed).")
    created_ms: int = Field(description="Creation time, epoch milliseconds.")

    @classmethod
    def of(cls, item: MemoryItem) -> MemoryItemOut:
        """The response shape of a stored item."""
        return cls(id=item.id, text=item.text, created_ms=item.created_ms)


class MemoryListOut(BaseModel):
    """A user's memory set: pinned (user-written) and extracted (model-written) memories."""

    pinned: list[MemoryItemOut] = Field(description="User-written memories, oldest first.")
    memories: list[MemoryItemOut] = Field(description="Model-extracted memories, oldest first.")
    version: int = Field(description="Bumped by every change of the set.")


class SummaryOut(BaseModel):
    """A conversation's rolling summary and extraction state."""

    summary: str = Field(description="The summary so far ('' before the first extraction).")
    cursor: int = Field(description="The message seq the summary and memories cover.")
    seq: int = Field(description="The last stored message seq.")
    due_ms: int | None = Field(
        description="When the next extraction is due (epoch ms); null when none is scheduled."
    )


class FlushOut(BaseModel):
    """When the flushed conversation is due for extraction."""

    due_ms: int = Field(description="Epoch milliseconds (now).")


class ForgetOut(BaseModel):
    """What a forget deleted."""

    user: str = Field(description="The user id.")
    conversation: str | None = Field(
        description="The conversation forgotten; null when the whole user was."
    )
    deleted_keys: int = Field(description="Redis keys deleted.")
    conversations: int = Field(description="Conversations that held data.")
    memory_sets: int = Field(description="Memory sets (pinned and extracted memories) deleted.")


class ErrorOut(BaseModel):
    """An error: ``detail`` names the problem."""

    detail: str


_UserField = Field(description="The user id, as chat requests send it in 'user'.")
_ModelField = Field(description="A memory-enabled model alias, e.g. demo.")
_ConversationField = Field(
    default=None,
    description="Conversation id (default: the alias's default conversation).",
)


class _TextIn(BaseModel):
    """A body that names a memory set and carries a memory's text (:class:`PinIn`,
    :class:`EditIn`; each sets its own ``text`` description and example)."""

    model_config = ConfigDict(extra="forbid")

    user: str = _UserField
    model: str = _ModelField
    text: str
    conversation: str | None = _ConversationField


def _example(text: str) -> ConfigDict:
    """The config a :class:`_TextIn` body adds to its base's: an OpenAPI example with ``text``."""
    return ConfigDict(
        json_schema_extra={"examples": [{"user": "alice", "model": "demo", "text": text}]}
    )


class PinIn(_TextIn):
    """Body of ``POST /memory/v1/pinned``."""

    model_config = _example("My cat is called Miso.")

    text: str = Field(description="The memory, as the user wrote it (trimmed; length-limited).")


class EditIn(_TextIn):
    """Body of ``PATCH /memory/v1/pinned/{id}``."""

    model_config = _example("My cat is called Mochi.")

    text: str = Field(description="The new text (trimmed; length-limited).")


class FlushIn(BaseModel):
    """Body of ``POST /memory/v1/flush``."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"user": "alice", "model": "demo"}]}
    )

    user: str = _UserField
    model: str = _ModelField
    conversation: str | None = _ConversationField


UserQuery = Annotated[str, Query(description="The user id, as chat requests send it in 'user'.")]
ModelQuery = Annotated[str, Query(description="A memory-enabled model alias, e.g. demo.")]
ForgetModelQuery = Annotated[
    str | None,
    Query(
        description="A memory-enabled model alias, e.g. demo; used with 'conversation' only "
        "(a whole user is forgotten whatever the alias)."
    ),
]
ConversationQuery = Annotated[
    str | None, Query(description="Conversation id (default: the alias's default conversation).")
]
ItemId = Annotated[str, Path(alias="id", max_length=128, description="The memory's id.")]
UserPath = Annotated[
    str, Path(max_length=512, description="The user id, as chat requests send it in 'user'.")
]


# -- auth ---------------------------------------------------------------------------------------

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


# -- the hook and its API -----------------------------------------------------------------------

_mounted: list[MemoryHook] = []
_apis: weakref.WeakKeyDictionary[MemoryHook, MemoryAPI] = weakref.WeakKeyDictionary()


def current_hook() -> MemoryHook:
    """FastAPI dependency: the hook the routes serve (the one given to :func:`mount`, else the
    proxy's ``memory_hook``); tests override it."""
    return _mounted[-1] if _mounted else memory_hook


Hook = Annotated[MemoryHook, Depends(current_hook)]


def memory_api(hook: MemoryHook) -> MemoryAPI:
    """The hook's :class:`MemoryAPI`, built once per hook on its Redis client and settings.

    Raises:
        ConfigError: the hook's settings are invalid.
    """
    api = _apis.get(hook)
    if api is None:
        api = MemoryAPI(hook.store.redis, hook.settings)
        _apis[hook] = api
    return api


@contextmanager
def _answers(hook: MemoryHook) -> Iterator[None]:
    """Turn the memory API's errors into HTTP answers (never a 500)."""
    try:
        yield
    except HTTPException:
        raise
    except MemoryNotFoundError as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from exc
    except (MemoryInputError, InvalidIdError) as exc:
        raise HTTPException(status_code=400, detail=str(exc)) from exc
    except ConfigError as exc:
        hook.counters["api_config_errors"] += 1
        logger.error("memory API: bad configuration: %s", exc)
        raise HTTPException(status_code=400, detail=f"memory configuration error: {exc}") from exc
    except (StoreError, RedisError, OSError) as exc:
        hook.counters["api_store_errors"] += 1
        logger.warning("memory API: Redis failed: %s", exc)
        raise HTTPException(
            status_code=503, detail="memory store unavailable, try again later"
        ) from exc
    except Exception as exc:
        hook.counters["api_errors"] += 1
        logger.exception("memory API: unexpected error")
        raise HTTPException(
            status_code=503, detail="memory API failed unexpectedly (logged on the proxy)"
        ) from exc


def caller_tenant(auth: object) -> str:
    """The caller's tenant (:func:`tenant_from_auth`).

    Raises:
        HTTPException: 403 when the authentication carries no team, user or key id (a
            ``custom_auth`` returning a bare ``UserAPIKeyAuth()``): such a caller has no memory.
    """
    tenant = tenant_from_auth(auth)
    if tenant is None:
        raise HTTPException(
            status_code=403,
            detail="no memory for this caller: its authentication has no team, user or key id",
        )
    return tenant


def _target(
    hook: MemoryHook, auth: object, user: str, model: str, conversation: str | None
) -> MemoryTarget:
    return resolve_target(
        hook.settings,
        hook.alias_config,
        tenant=caller_tenant(auth),
        user=user,
        model=model,
        conversation=conversation,
    )


# -- routes -------------------------------------------------------------------------------------

_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "Bad input; the detail names the problem."},
    401: {"model": ErrorOut, "description": "Missing or wrong API key."},
    403: {"model": ErrorOut, "description": "The key may not be used, or has no identity."},
    503: {"model": ErrorOut, "description": "The memory store (Redis) is unavailable."},
}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    **_ERRORS,
    404: {"model": ErrorOut, "description": "No such memory or conversation for this caller."},
}

router = APIRouter(prefix=PREFIX, tags=["memory"])


@router.get("/memories", response_model=MemoryListOut, responses=_ERRORS)
async def list_memories(
    hook: Hook,
    auth: Auth,
    user: UserQuery,
    model: ModelQuery,
    conversation: ConversationQuery = None,
) -> MemoryListOut:
    """List a user's pinned and extracted memories (oldest first) and the set's version."""
    with _answers(hook):
        target = _target(hook, auth, user, model, conversation)
        listing = await memory_api(hook).list(target)
    return MemoryListOut(
        pinned=[MemoryItemOut.of(i) for i in listing.pinned],
        memories=[MemoryItemOut.of(i) for i in listing.memories],
        version=listing.version,
    )


@router.post("/pinned", status_code=201, response_model=MemoryItemOut, responses=_ERRORS)
async def pin_memory(hook: Hook, auth: Auth, body: PinIn) -> MemoryItemOut:
    """Pin a memory: the model sees it in every chat of this user and alias and never changes
    it. Stored exactly as typed (trimmed); at most ``pinned_item_chars`` characters."""
    with _answers(hook):
        target = _target(hook, auth, body.user, body.model, body.conversation)
        item = await memory_api(hook).pin(target, body.text)
    return MemoryItemOut.of(item)


@router.patch("/pinned/{id}", response_model=MemoryItemOut, responses=_NOT_FOUND)
async def edit_pinned(hook: Hook, auth: Auth, item_id: ItemId, body: EditIn) -> MemoryItemOut:
    """Replace the text of a pinned memory (the id and creation time stay)."""
    with _answers(hook):
        target = _target(hook, auth, body.user, body.model, body.conversation)
        item = await memory_api(hook).edit(target, item_id, body.text)
    return MemoryItemOut.of(item)


@router.delete("/pinned/{id}", status_code=204, response_class=Response, responses=_NOT_FOUND)
async def delete_pinned(
    hook: Hook,
    auth: Auth,
    item_id: ItemId,
    user: UserQuery,
    model: ModelQuery,
    conversation: ConversationQuery = None,
) -> Response:
    """Delete a pinned memory."""
    with _answers(hook):
        target = _target(hook, auth, user, model, conversation)
        await memory_api(hook).delete_pinned(target, item_id)
    return Response(status_code=204)


@router.delete("/memories/{id}", status_code=204, response_class=Response, responses=_NOT_FOUND)
async def delete_memory(
    hook: Hook,
    auth: Auth,
    item_id: ItemId,
    user: UserQuery,
    model: ModelQuery,
    conversation: ConversationQuery = None,
) -> Response:
    """Delete an extracted memory; the same fact is not extracted again from old messages."""
    with _answers(hook):
        target = _target(hook, auth, user, model, conversation)
        await memory_api(hook).delete_memory(target, item_id)
    return Response(status_code=204)


@router.get("/summary", response_model=SummaryOut, responses=_NOT_FOUND)
async def read_summary(
    hook: Hook,
    auth: Auth,
    user: UserQuery,
    model: ModelQuery,
    conversation: ConversationQuery = None,
) -> SummaryOut:
    """A conversation's rolling summary, the seq it covers, the last seq and the next due time."""
    with _answers(hook):
        target = _target(hook, auth, user, model, conversation)
        state = await memory_api(hook).summary(target)
    return SummaryOut.model_validate(state)


@router.post("/flush", status_code=202, response_model=FlushOut, responses=_NOT_FOUND)
async def flush(hook: Hook, auth: Auth, body: FlushIn) -> FlushOut:
    """Ask for extraction now (e.g. the app went to the background); the in-proxy worker is
    woken, separate workers pick it up at their next poll."""
    with _answers(hook):
        target = _target(hook, auth, body.user, body.model, body.conversation)
        due_ms = await memory_api(hook).flush(target)
    hook.ensure_worker()
    if hook.worker is not None:
        hook.worker.wake()
    return FlushOut(due_ms=due_ms)


@router.delete("/users/{user:path}", response_model=ForgetOut, responses=_ERRORS)
async def forget(
    hook: Hook,
    auth: Auth,
    user: UserPath,
    model: ForgetModelQuery = None,
    conversation: ConversationQuery = None,
) -> ForgetOut:
    """Forget a user: delete every conversation (turns, summary, recall index) and memory set
    of theirs in the caller's tenant, whatever the alias (``model`` may be left out); with
    ``conversation`` (and ``model``), only that conversation (memories shared with the user's
    other conversations stay). Idempotent."""
    with _answers(hook):
        whole_user = not (conversation and conversation.strip())
        if whole_user:  # whatever the alias: ``model`` is not used (it may have left the config)
            target = resolve_user(hook.settings, tenant=caller_tenant(auth), user=user)
        else:
            target = _target(hook, auth, user, model or "", conversation)
        # its turns waiting in this proxy's outage buffer are not written after the forget
        async with hook.forgetting(target.conversation, whole_user=whole_user):
            result = await memory_api(hook).forget(target, whole_user=whole_user)
    logger.info(
        "memory API: forgot %s (%d keys)",
        target.conversation.user_keys.hash_tag if whole_user else target.conversation.ref,
        result.deleted_keys,
    )
    return ForgetOut(
        user=target.user,
        conversation=None if whole_user else target.conversation.conversation,
        deleted_keys=result.deleted_keys,
        conversations=result.conversations,
        memory_sets=result.memory_sets,
    )


@router.get("/export", response_model=ExportDocument, responses=_NOT_FOUND)
async def export(
    hook: Hook,
    auth: Auth,
    user: UserQuery,
    model: ModelQuery,
    conversation: ConversationQuery = None,
) -> ExportDocument:
    """Everything stored for a user in the caller's tenant (or one ``conversation``): turns,
    summaries, pinned and extracted memories, as a versioned JSON document that
    ``litellm-memory import --format export`` reads back."""
    with _answers(hook):
        target = _target(hook, auth, user, model, conversation)
        whole_user = not (conversation and conversation.strip())
        return await memory_api(hook).export(target, whole_user=whole_user)


# -- mounting on the proxy ----------------------------------------------------------------------


def _has_routes(app: FastAPI) -> bool:
    """Whether the memory routes are on ``app`` already: as routes, or (FastAPI >= 0.16x) as an
    included router object holding ours (also a second copy of this module's router)."""
    for route in app.routes:
        if str(getattr(route, "path", "")).startswith(PREFIX + "/"):
            return True
        included = getattr(route, "original_router", None)
        if included is router or getattr(included, "prefix", None) == PREFIX:
            return True
    return False


__all__ = [
    "PREFIX",
    "EditIn",
    "FlushIn",
    "FlushOut",
    "ForgetOut",
    "MemoryItemOut",
    "MemoryListOut",
    "PinIn",
    "SummaryOut",
    "auth_failure",
    "current_hook",
    "memory_api",
    "memory_auth",
    "router",
]

# The history routes (``/history``, ``/history/{id}/restore``) live in their own module, which
# adds them to ``router`` (with the dependencies defined above) when imported here.
from litellm_memory_hook.proxy import history_routes as _history_routes  # noqa: E402, F401
