"""The memory inspector page, the read-only JSON routes it uses, and the metrics scrape.

Served by the proxy itself (:func:`litellm_memory_hook.proxy.mounting.mount` adds :data:`router`):

==========  ====================================  ==================================================
method      path                                  answer
==========  ====================================  ==================================================
GET         /memory/ui                            the inspector page (static HTML, no data in it;
                                                  it asks for a LiteLLM key and calls the JSON API
                                                  below with it)
GET         /memory/ui/inspector.js, .css         its script and style sheet
GET         /memory/v1/preview?user&model         200 the messages exactly as the model would
            [&conversation][&message]             receive them for the next message (``message``,
                                                  default ``(next message)``), characters per
                                                  layer, the recalled lines; read-only
GET         /memory/v1/conversations?user&model   200 the user's conversations (every alias), newest
                                                  first: raw id, alias, namespace, seq, turns, times
GET         /memory/v1/users[?search][&offset]    200 one page of the tenant's stored users, by id:
            [&limit]                              ``{"users": [{"user", "key", "conversations",
                                                  "memory_sets", "updated_ms"}], "total",
                                                  "offset", "next_offset"}`` (SCAN, never KEYS)
GET         /memory/v1/turns?user&model           200 the newest stored turns (``limit``, default
            [&conversation][&limit]               20, at most 200), oldest first, and the total
GET         /memory/v1/queue?user&model           200 the conversation's place in the extraction
            [&conversation]                       due set: due time, position, queue length,
                                                  overdue entries, whether a job holds its lease
GET         /memory/v1/models                     200 the proxy's memory-enabled aliases
GET         /memory/metrics                       200 Prometheus text format
                                                  (:mod:`litellm_memory_hook.proxy.metrics`);
                                                  proxy-admin keys only (403 otherwise)
==========  ====================================  ==================================================

Auth and tenants: the JSON routes use the memory API's dependency
(:func:`litellm_memory_hook.proxy.routes.memory_auth`: LiteLLM's own key check, 401 for a missing
or wrong key) and its tenant scope: a key sees only its own tenant's users, whatever ``user`` it
names. The page and its two static files carry no data and need no key: the page asks for the
key, keeps it in the tab's ``sessionStorage`` (never in the URL, gone when the tab closes) and
sends it as ``Authorization: Bearer``. Everything users or the model wrote is put into the page
as text (``textContent``), never as HTML, and the page's Content-Security-Policy allows only its
own script and style (no inline script, no other origin).

The preview runs :func:`litellm_memory_hook.engine.rebuild.prepare`, the function the hook runs
for every request, with the alias's options: its reads are the hook's reads and it writes
nothing (no turn, no TTL refresh, no due time).

Examples::

    H='Authorization: Bearer sk-memory-demo'; API=http://127.0.0.1:4000/memory/v1
    curl -s -H "$H" "$API/preview?user=alice&model=demo&message=What%20is%20my%20cat%20called%3F"
    curl -s -H "$H" "$API/conversations?user=alice&model=demo"
    curl -s -H "$H" "$API/queue?user=alice&model=demo"
    curl -s -H "$H" http://127.0.0.1:4000/memory/metrics
    # the page: open http://127.0.0.1:4000/memory/ui and paste the key
"""

from __future__ import annotations

import html
import sys
import time
import weakref
from functools import cache
from importlib import resources
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request, Response
from pydantic import BaseModel, Field
from redis.exceptions import RedisError

from litellm_memory_hook.core.messages import content_text
from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.engine.options import ContextOptions
from litellm_memory_hook.engine.rebuild import prepare
from litellm_memory_hook.errors import ConfigError, StoreError
from litellm_memory_hook.memory_api import MemoryInputError, MemoryTarget
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.proxy.identity import MASTER_KEY_TOKEN
from litellm_memory_hook.proxy.metrics import HookMetrics
from litellm_memory_hook.proxy.routes import (
    PREFIX,
    Auth,
    ConversationQuery,
    Hook,
    ModelQuery,
    UserQuery,
    _answers,
    _target,
    caller_tenant,
    memory_api,
)
from litellm_memory_hook.store import directory
from litellm_memory_hook.store.workers import read_workers

UI_PATH = "/memory/ui"
METRICS_PATH = "/memory/metrics"
NEXT_MESSAGE = "(next message)"
TURNS_LIMIT = 200
CONVERSATIONS_LIMIT = 500
ADMIN_ROLES = frozenset({"proxy_admin", "proxy_admin_viewer"})
_PROXY_MODULE = "litellm.proxy.proxy_server"
_STATIC = {
    "inspector.js": "text/javascript; charset=utf-8",
    "inspector.css": "text/css; charset=utf-8",
}
#: The page's Content-Security-Policy: its own script and style only, API calls to itself.
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_PAGE_HEADERS = {
    "Content-Security-Policy": PAGE_CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

router = APIRouter(tags=["memory"])


# -- response shapes ----------------------------------------------------------------------------


class TurnOut(BaseModel):
    """One stored turn."""

    seq: int = Field(description="Position in the conversation, from 1.")
    role: str = Field(description="user, assistant or tool.")
    name: str = Field(description="The speaker's name, when one was sent ('' otherwise).")
    text: str = Field(description="The stored text (images as placeholders such as [image]).")
    ts_ms: int = Field(description="When it was stored, epoch milliseconds.")
    partial: bool = Field(description="A reply cut short by the client (never replayed).")
    tool_calls: int = Field(description="How many tool calls an assistant turn made.")

    @classmethod
    def of(cls, turn: Turn) -> TurnOut:
        """The response shape of a stored turn."""
        return cls(
            seq=turn.seq,
            role=turn.role,
            name=turn.name,
            text=turn.text,
            ts_ms=turn.ts_ms,
            partial=turn.partial,
            tool_calls=len(turn.tool_calls),
        )


class PreviewMessage(BaseModel):
    """One message of the rebuilt request."""

    role: str = Field(description="system, user, assistant or tool.")
    text: str = Field(description="Its text (parts joined, media as placeholders).")
    message: dict[str, Any] = Field(description="The message exactly as the model receives it.")


class PreviewOut(BaseModel):
    """The next request as the model would receive it."""

    messages: list[PreviewMessage] = Field(description="In order: system message(s), window.")
    layers: dict[str, int] = Field(description="Characters per layer (and 'window').")
    total_chars: int = Field(description="Characters of all messages' text together.")
    recalled: list[TurnOut] = Field(description="The recalled older lines, time order.")
    message: str = Field(description="The next message the preview was built for.")
    placeholder: bool = Field(description="True when no message was given.")
    stored_turns: int = Field(description="Turns stored in the conversation.")


class ConversationOut(BaseModel):
    """One of the user's conversations."""

    id: str = Field(description="The conversation id as chat requests send it.")
    alias: str = Field(description="The alias that started it ('' when unknown).")
    namespace: str = Field(description="Its alias namespace ('' when unknown).")
    seq: int = Field(description="The last stored message's seq.")
    cursor: int = Field(description="The seq extraction has covered.")
    turns: int = Field(description="Turns stored.")
    created_ms: int | None = Field(description="First write, epoch ms.")
    updated_ms: int | None = Field(description="Last write, epoch ms.")


class ConversationsOut(BaseModel):
    """The user's conversations, most recently written first."""

    conversations: list[ConversationOut]


class UserOut(BaseModel):
    """One stored user of the caller's tenant."""

    user: str = Field(description="The id as chat requests send it ('h-...' when unknown).")
    key: str = Field(description="Its form inside Redis key names.")
    conversations: int = Field(description="Stored conversations.")
    memory_sets: int = Field(description="Memory sets shared by an alias namespace.")
    updated_ms: int | None = Field(description="Newest write to a conversation, epoch ms.")


class UsersOut(BaseModel):
    """One page of the tenant's users, sorted by id."""

    users: list[UserOut]
    total: int = Field(description="Users matching the search.")
    offset: int = Field(description="The page's first user in that list.")
    next_offset: int | None = Field(description="The next page's offset; null on the last.")


class TurnsOut(BaseModel):
    """The newest turns of a conversation."""

    turns: list[TurnOut] = Field(description="Oldest first.")
    total: int = Field(description="Turns stored in the conversation.")


class QueueOut(BaseModel):
    """The conversation's place in the extraction due set (``mem:due``)."""

    due_ms: int | None = Field(description="When its job is due, epoch ms; null: not queued.")
    position: int | None = Field(
        description="1 = the next job to run; null when not queued (the set is shared by all "
        "tenants, so it counts other tenants' conversations without naming them)."
    )
    queued: int = Field(description="Conversations in the due set.")
    overdue: int = Field(description="Conversations whose due time has come.")
    leased: bool = Field(description="A worker holds its lease (a job is running).")
    workers: int = Field(
        description="Extraction workers alive (all tenants share them); 0 while conversations "
        "are queued: their jobs wait until a worker runs."
    )
    now_ms: int = Field(description="The server's time, epoch ms.")


class ModelOut(BaseModel):
    """A memory-enabled alias."""

    name: str
    namespace: str
    memory_scope: str
    mode: str


class ModelsOut(BaseModel):
    """The proxy's memory-enabled aliases (empty outside a proxy)."""

    models: list[ModelOut]


# -- helpers ------------------------------------------------------------------------------------


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def _int(value: object) -> int | None:
    try:
        return int(_text(value))
    except ValueError:
        return None


def proxy_model_names() -> list[str]:
    """FastAPI dependency: the model aliases of the running proxy's router (none outside a
    proxy); tests override it."""
    proxy_server = sys.modules.get(_PROXY_MODULE)
    router_ = getattr(proxy_server, "llm_router", None)
    if router_ is None:
        return []
    names = router_.get_model_names() or []
    return sorted({str(n) for n in names})


ModelNames = Annotated[list[str], Depends(proxy_model_names)]

_fallback_metrics: weakref.WeakKeyDictionary[MemoryHook, HookMetrics] = weakref.WeakKeyDictionary()


def hook_metrics(hook: MemoryHook) -> HookMetrics:
    """The hook's metrics: ``hook.metrics`` when the hook has them, else one registry per hook
    built on its counters (the histograms then stay empty)."""
    own = getattr(hook, "metrics", None)
    if isinstance(own, HookMetrics):
        return own
    metrics = _fallback_metrics.get(hook)
    if metrics is None:
        metrics = HookMetrics(hook.counters)
        _fallback_metrics[hook] = metrics
    return metrics


def is_admin(auth: object) -> bool:
    """Whether a ``UserAPIKeyAuth`` is a proxy admin (the master key or an admin role)."""
    role = getattr(auth, "user_role", None)
    role = getattr(role, "value", role)
    if isinstance(role, str) and role in ADMIN_ROLES:
        return True
    return MASTER_KEY_TOKEN in (getattr(auth, "token", None), getattr(auth, "api_key", None))


@cache
def _static(name: str) -> str:
    return (resources.files("litellm_memory_hook.proxy") / "static" / name).read_text("utf-8")


def _root(request: Request) -> str:
    return str(request.scope.get("root_path") or "").rstrip("/")


# -- the page -----------------------------------------------------------------------------------


@router.get(UI_PATH, include_in_schema=False)
async def inspector_page(request: Request) -> Response:
    """The inspector page (no data in it: it asks for a key and calls the JSON API)."""
    root = html.escape(_root(request), quote=True)
    page = _static("inspector.html").replace("{{ROOT}}", root)
    return Response(page, media_type="text/html; charset=utf-8", headers=_PAGE_HEADERS)


@router.get(UI_PATH + "/{name}", include_in_schema=False)
async def inspector_asset(name: str) -> Response:
    """The page's script and style sheet."""
    media_type = _STATIC.get(name)
    if media_type is None:
        raise HTTPException(status_code=404, detail="not found")
    return Response(_static(name), media_type=media_type, headers=_PAGE_HEADERS)


# -- read-only JSON routes ----------------------------------------------------------------------

_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "Bad input; the detail names the problem."},
    401: {"description": "Missing or wrong API key."},
    503: {"description": "The memory store (Redis) is unavailable."},
}


@router.get(PREFIX + "/preview", response_model=PreviewOut, responses=_ERRORS)
async def preview(
    hook: Hook,
    auth: Auth,
    user: UserQuery,
    model: ModelQuery,
    conversation: ConversationQuery = None,
    message: Annotated[
        str | None,
        Query(max_length=32_000, description="The next user message (default: a placeholder)."),
    ] = None,
) -> PreviewOut:
    """The next request as the model would receive it: the system message(s) with every layer,
    the recent window and the new message, characters per layer, the recalled lines. Runs the
    hook's own rebuild, read-only: nothing is written."""
    text = message if message is not None and message.strip() else NEXT_MESSAGE
    with _answers(hook):
        target = _target(hook, auth, user, model, conversation)
        alias = hook.alias_config(model)
        if alias is None:  # resolve_target checked it; the cache may have expired since
            raise MemoryInputError(f"model {model!r} is not a memory-enabled alias")
        store = hook.store
        options = ContextOptions.for_alias(hook.settings, alias)
        # the turns this proxy holds for it while Redis refuses writes: the next request has them
        buffered, superseded = hook.engine.buffered_turns(target.conversation)
        prepared = await prepare(
            store,
            target.conversation,
            target.memory,
            [{"role": "user", "content": text}],
            options,
            buffered=buffered,
            superseded=superseded,
        )
        stored = await store.count_turns(target.conversation)
    if prepared is None:
        raise HTTPException(status_code=400, detail="nothing to preview for this message")
    messages = [
        PreviewMessage(
            role=str(m.get("role", "")), text=content_text(m.get("content")), message=dict(m)
        )
        for m in prepared.messages
    ]
    return PreviewOut(
        messages=messages,
        layers=dict(prepared.layer_chars),
        total_chars=sum(len(m.text) for m in messages),
        recalled=[TurnOut.of(t) for t in prepared.recalled],
        message=text,
        placeholder=text == NEXT_MESSAGE,
        stored_turns=stored,
    )


async def _conversations(hook: MemoryHook, target: MemoryTarget) -> list[ConversationOut]:
    found = await directory.conversations_of(hook.store.redis, target.conversation.user_keys)
    shown = found[:CONVERSATIONS_LIMIT]
    return [ConversationOut(**{k: v for k, v in vars(c).items() if k != "key"}) for c in shown]


@router.get(PREFIX + "/conversations", response_model=ConversationsOut, responses=_ERRORS)
async def list_conversations(
    hook: Hook, auth: Auth, user: UserQuery, model: ModelQuery
) -> ConversationsOut:
    """The user's conversations (with every alias), most recently written first."""
    with _answers(hook):
        target = _target(hook, auth, user, model, None)
        conversations = await _conversations(hook, target)
    return ConversationsOut(conversations=conversations)


@router.get(PREFIX + "/users", response_model=UsersOut, responses=_ERRORS)
async def list_users(
    hook: Hook,
    auth: Auth,
    search: Annotated[
        str, Query(description="Only users whose id contains this (case-insensitive).")
    ] = "",
    offset: Annotated[int, Query(ge=0, description="The page's first user.")] = 0,
    limit: Annotated[int, Query(ge=1, le=directory.MAX_PAGE, description="Page size.")] = 50,
) -> UsersOut:
    """The caller's tenant's stored users, sorted by id, one page (found by SCAN, never KEYS)."""
    with _answers(hook):
        page = await memory_api(hook).users(
            caller_tenant(auth), search=search, offset=offset, limit=limit
        )
    return UsersOut(
        users=[UserOut(**vars(u)) for u in page.items],
        total=page.total,
        offset=page.offset,
        next_offset=page.next_offset,
    )


@router.get(PREFIX + "/turns", response_model=TurnsOut, responses=_ERRORS)
async def last_turns(
    hook: Hook,
    auth: Auth,
    user: UserQuery,
    model: ModelQuery,
    conversation: ConversationQuery = None,
    limit: Annotated[int, Query(ge=1, le=TURNS_LIMIT, description="How many turns.")] = 20,
) -> TurnsOut:
    """The newest stored turns of a conversation, oldest first, and how many are stored."""
    with _answers(hook):
        target = _target(hook, auth, user, model, conversation)
        keys = target.conversation
        try:
            async with hook.store.redis.pipeline(transaction=False) as pipe:
                pipe.zrange(keys.turns, -limit, -1)
                pipe.zcard(keys.turns)
                members, total = await pipe.execute()
        except RedisError as exc:
            raise StoreError(f"turns of {keys.ref}: {exc}") from exc
    turns = []
    for member in members:
        try:
            turns.append(TurnOut.of(Turn.from_member(member)))
        except ValueError:
            continue
    return TurnsOut(turns=turns, total=int(total))


@router.get(PREFIX + "/queue", response_model=QueueOut, responses=_ERRORS)
async def queue_place(
    hook: Hook,
    auth: Auth,
    user: UserQuery,
    model: ModelQuery,
    conversation: ConversationQuery = None,
) -> QueueOut:
    """The conversation's place in the extraction due set, and how many extraction workers
    are alive to run it."""
    now = int(time.time() * 1000)
    with _answers(hook):
        target = _target(hook, auth, user, model, conversation)
        keys = target.conversation
        due = hook.queue.due
        redis = hook.store.redis
        try:
            async with redis.pipeline(transaction=False) as pipe:  # the global due set
                pipe.zscore(due, keys.ref)
                pipe.zrank(due, keys.ref)
                pipe.zcard(due)
                pipe.zcount(due, "-inf", now)
                score, rank, queued, overdue = await pipe.execute()
            leased = bool(await redis.exists(keys.lease))  # the user's slot
            workers = await read_workers(redis, hook.queue.prefix)  # {workers} slot
        except RedisError as exc:
            raise StoreError(f"due set: {exc}") from exc
    return QueueOut(
        due_ms=None if score is None else int(score),
        position=None if rank is None else int(rank) + 1,
        queued=int(queued),
        overdue=int(overdue),
        leased=leased,
        workers=len(workers),
        now_ms=now,
    )


@router.get(PREFIX + "/models", response_model=ModelsOut, responses=_ERRORS)
async def memory_models(hook: Hook, auth: Auth, names: ModelNames) -> ModelsOut:
    """The proxy's memory-enabled aliases, by name (aliases with a bad memory block are left
    out; the proxy log names them)."""
    del auth
    models = []
    for name in names:
        try:
            alias = hook.alias_config(name)
        except ConfigError:
            continue
        if alias is not None:
            models.append(
                ModelOut(
                    name=name,
                    namespace=alias.namespace or name,
                    memory_scope=alias.memory_scope,
                    mode=alias.mode,
                )
            )
    return ModelsOut(models=models)


# -- metrics ------------------------------------------------------------------------------------


@router.get(
    METRICS_PATH,
    response_class=Response,
    responses={
        200: {"content": {"text/plain": {}}, "description": "Prometheus text format."},
        401: {"description": "Missing or wrong API key."},
        403: {"description": "Not a proxy-admin key."},
    },
)
async def metrics(request: Request, hook: Hook, auth: Auth) -> Response:
    """The memory hook's metrics in Prometheus text format (proxy-admin keys only: the figures
    cover every tenant). Reads the extraction counters, the due set and the extraction workers'
    heartbeats from Redis, publishes
    this process's snapshot and renders every live proxy process's per-process series (label
    ``process``: this one's live, the others' last snapshots, at most 5 s old); when Redis does
    not answer, ``litellm_memory_store_up`` is 0 and this process's series are still served."""
    if not is_admin(auth):
        raise HTTPException(
            status_code=403,
            detail="the memory metrics cover every tenant: use the master key or a proxy-admin key",
        )
    from prometheus_client.exposition import choose_encoder

    scraped = hook_metrics(hook)
    try:
        queue = hook.queue
    except ConfigError:  # bad settings: memory is off (counted as fail-open, reason config)
        queue = None
    await scraped.refresh(queue)
    encoder, content_type = choose_encoder(request.headers.get("accept", ""))
    return Response(encoder(scraped.registry), media_type=content_type)


# -- mounting -----------------------------------------------------------------------------------


def include_once(app: FastAPI, extra: APIRouter = router) -> bool:
    """Add ``extra`` to ``app`` unless its first route's path is served already.

    Returns:
        True when the routes were added now.
    """
    paths = {str(getattr(r, "path", "")) for r in extra.routes}
    for route in app.routes:
        if getattr(route, "original_router", None) is extra or (
            str(getattr(route, "path", "")) in paths
        ):
            return False
    app.include_router(extra)
    app.openapi_schema = None
    return True


__all__ = [
    "METRICS_PATH",
    "PAGE_CSP",
    "UI_PATH",
    "hook_metrics",
    "include_once",
    "is_admin",
    "proxy_model_names",
    "router",
]
