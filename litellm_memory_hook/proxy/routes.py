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

The bodies and answers are in :mod:`litellm_memory_hook.proxy.route_shapes`, the key check in
:mod:`litellm_memory_hook.proxy.route_auth`. The history of a memory set (``GET
/memory/v1/history``, ``POST /memory/v1/history/{id}/restore``: what extraction jobs replaced
or deleted, and putting one back) is served by :mod:`litellm_memory_hook.proxy.history_routes`
on the same router.

Configuration: none of its own. It uses the memory hook's settings (``callback_settings.memory``:
Redis URL, key prefix, ``memories.max_pinned_item_chars``, ``memories.max_pinned_items``) and the
aliases' ``model_info.memory`` blocks, exactly as chat requests do. :func:`mount` adds the routes to
the running proxy (``litellm_memory_hook/proxy_callback.py`` calls it when LiteLLM loads the
callback).

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

import logging
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Response
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
from litellm_memory_hook.proxy.route_auth import Auth, auth_failure, memory_auth
from litellm_memory_hook.proxy.route_shapes import (
    _ERRORS,
    ConversationQuery,
    EditIn,
    FlushIn,
    FlushOut,
    ForgetModelQuery,
    ForgetOut,
    ItemId,
    MemoryItemOut,
    MemoryListOut,
    ModelQuery,
    PinIn,
    SummaryOut,
    UserPath,
    UserQuery,
)

# history_routes imports these from here (the fields its bodies share with ours).
from litellm_memory_hook.proxy.route_shapes import _NOT_FOUND as _NOT_FOUND
from litellm_memory_hook.proxy.route_shapes import _ConversationField as _ConversationField
from litellm_memory_hook.proxy.route_shapes import _ModelField as _ModelField
from litellm_memory_hook.proxy.route_shapes import _UserField as _UserField

logger = logging.getLogger("litellm_memory_hook")

PREFIX = "/memory/v1"


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
    it. Stored exactly as typed (trimmed); at most ``memories.max_pinned_item_chars`` characters."""
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
    "Auth",
    "ConversationQuery",
    "EditIn",
    "FlushIn",
    "FlushOut",
    "ForgetOut",
    "Hook",
    "ItemId",
    "MemoryItemOut",
    "MemoryListOut",
    "ModelQuery",
    "PinIn",
    "SummaryOut",
    "UserQuery",
    "auth_failure",
    "current_hook",
    "memory_api",
    "memory_auth",
    "router",
]

# The history routes (``/history``, ``/history/{id}/restore``) live in their own module, which
# adds them to ``router`` (with the dependencies defined above) when imported here.
from litellm_memory_hook.proxy import history_routes as _history_routes  # noqa: E402, F401
