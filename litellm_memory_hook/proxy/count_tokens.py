"""``/v1/messages/count_tokens`` with memory: the count of what the model will receive.

LiteLLM 1.108.7 runs no hook for this route: its handler counts the body as sent (it asks the
provider's ``count_tokens`` endpoint, else its own tokenizer). Claude Code asks it how full its
context is, so a count without the memory the hook adds reads low. :func:`mount` puts a route of
ours in front of LiteLLM's (the same path, matched first): it runs the memory hook's
pre-call on a copy of the body, read-only (``memory_mode: read_only``: no turn stored, no epoch
recorded), and hands LiteLLM's own handler the body with the memory in ``system`` and
``messages``, so the provider counts it. A body the hook does not rebuild (no memory for the
alias or the user, malformed input, Redis down) and any error of ours: LiteLLM's handler counts
the body as sent, as without the hook.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from fastapi import Depends, FastAPI, Request

from litellm_memory_hook.protocols.anthropic_messages import session_user
from litellm_memory_hook.proxy.hook import MemoryHook

logger = logging.getLogger("litellm_memory_hook")

PATH = "/v1/messages/count_tokens"
_MARK = "_litellm_memory_count_tokens"


async def body_with_memory(
    hook: MemoryHook, body: dict[str, Any], auth: Any, headers: dict[str, str]
) -> dict[str, Any] | None:
    """``body`` with the memory a ``/v1/messages`` request of it would get (a new dict; the
    ``system`` and ``messages`` the model would receive), ``None`` when it gets none.

    Anthropic's count takes no ``metadata``: the user is the body's ``metadata.user_id`` when
    a client sends one anyway, else the one this process last saw with the request's Claude
    Code session header (:func:`~litellm_memory_hook.protocols.anthropic_messages.
    session_user`), else the configured user header's."""
    sent_body, sent_metadata = body, body.get("metadata")
    if not (isinstance(sent_metadata, dict) and sent_metadata.get("user_id")):
        user = session_user(headers)
        if user is not None:
            body = {**body, "metadata": {"user_id": user}}
    data: dict[str, Any] = {
        **body,
        "litellm_metadata": {"headers": headers, "memory_mode": "read_only"},
        "litellm_call_id": f"count-tokens-{uuid.uuid4().hex}",
    }
    sent = (body.get("system"), body.get("messages"))
    out = await hook.async_pre_call_hook(auth, None, data, "anthropic_messages")
    if not isinstance(out, dict) or (out.get("system"), out.get("messages")) == sent:
        return None
    counted = {k: v for k, v in body.items() if k != "metadata" or k in sent_body}
    counted["messages"] = out.get("messages")
    if out.get("system") is not None:
        counted["system"] = out["system"]
    return counted


def mount(app: FastAPI, hook: MemoryHook) -> bool:
    """Put our ``/v1/messages/count_tokens`` route on the app, once, before LiteLLM's.

    LiteLLM 1.108.7 registers its Anthropic routes lazily, at the first request under
    ``/v1/messages``, after every route already on the app (the feature has no reserved slot):
    ours, added while the proxy starts, stays in front. Where LiteLLM's is on the app already
    (``LITELLM_DISABLE_LAZY_ROUTES``), ours goes just before it. The Claude Code gateway's
    prefixed route is left to LiteLLM.

    Returns:
        True (ours is on the app, now or from an earlier call).
    """
    from fastapi.routing import APIRoute
    from litellm.proxy.anthropic_endpoints import endpoints
    from litellm.proxy.auth.user_api_key_auth import user_api_key_auth
    from litellm.proxy.common_utils.http_parsing_utils import read_request_body

    litellm_count = endpoints.count_tokens

    async def count_tokens(request: Request, auth: Any = Depends(user_api_key_auth)) -> Any:  # noqa: B008
        try:
            body = await read_request_body(request)
            headers = {k.lower(): v for k, v in request.headers.items()}
            counted = await body_with_memory(hook, dict(body), auth, headers)
            if counted is not None:
                request.scope["parsed_body"] = (tuple(counted), counted)
        except Exception:  # counted as sent, as without the hook
            hook.counters["count_tokens_errors"] += 1
            logger.exception("memory hook: count_tokens with memory failed; counting as sent")
        return await litellm_count(request=request, user_api_key_dict=auth)

    setattr(count_tokens, _MARK, True)
    routes = app.router.routes
    if any(getattr(getattr(r, "endpoint", None), _MARK, False) for r in routes):
        return True
    app.add_api_route(PATH, count_tokens, methods=["POST"], include_in_schema=False)
    ours = routes.pop()
    theirs = [
        i for i, r in enumerate(routes) if isinstance(r, APIRoute) and r.endpoint is litellm_count
    ]
    routes.insert(theirs[0] if theirs else len(routes), ours)
    return True


__all__ = ["body_with_memory", "mount"]
