"""Which users and conversations are stored: lists for the memory API, the CLI and the inspector.

Users of a tenant are found by SCAN over their index keys (``<prefix>:{<tenant>:*}:index``,
:func:`~litellm_memory_hook.store.keys.user_index_match`; every primary of a Cluster), never
``KEYS``; a user's conversations come from the user's index set. A page is cut from the sorted,
filtered list, so each page costs one SCAN of the key space (Redis walks every key of the
database for it: about 1 s per 10 million keys) plus one pipelined round trip for the page's
users.

A user's id is shown as chat requests send it: the key form when it is plain
(``[A-Za-z0-9_.@-]``, at most 64 characters), else the raw id kept in one of the user's
conversations' meta hash (a hashed user with no conversation left, only memories, shows its
``h-...`` key form).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.store.keys import (
    UserKeys,
    key_id,
    user_index_match,
    user_of_index_key,
)

T = TypeVar("T")

#: users or conversations a page holds at most.
MAX_PAGE = 500
#: the COUNT hint of each SCAN call (keys Redis looks at per call).
SCAN_COUNT = 1000
#: the meta fields a conversation's listing reads.
CONVERSATION_FIELDS = (
    "conversation",
    "alias",
    "namespace",
    "seq",
    "cursor",
    "created_ms",
    "updated_ms",
)


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def _int(value: object) -> int | None:
    try:
        return int(_text(value))
    except ValueError:
        return None


@dataclass(frozen=True)
class UserEntry:
    """One stored user of a tenant.

    Attributes:
        user: the id as chat requests send it (see the module docstring).
        key: its form inside key names.
        conversations: conversations in the user's index.
        memory_sets: alias-namespace memory sets in the user's index.
        updated_ms: the newest ``updated_ms`` of the user's conversations (epoch ms), ``None``
            when none has one.
    """

    user: str
    key: str
    conversations: int = 0
    memory_sets: int = 0
    updated_ms: int | None = None


@dataclass(frozen=True)
class ConversationEntry:
    """One stored conversation of a user (its meta hash and turn count)."""

    id: str
    key: str
    alias: str
    namespace: str
    seq: int
    cursor: int
    turns: int
    created_ms: int | None
    updated_ms: int | None


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a sorted, filtered list.

    Attributes:
        items: the page, at most ``limit`` items.
        total: items matching the search in all.
        offset: where the page starts in that list.
        next_offset: the next page's ``offset``; ``None`` on the last page.
    """

    items: list[T] = field(default_factory=list)
    total: int = 0
    offset: int = 0
    next_offset: int | None = None


def _page(items: Sequence[T], offset: int, limit: int) -> Page[T]:
    offset = max(0, offset)
    limit = max(1, min(limit, MAX_PAGE))
    chunk = list(items[offset : offset + limit])
    more = offset + limit < len(items)
    return Page(chunk, len(items), offset, offset + limit if more else None)


def _matches(search: str, *values: str) -> bool:
    needle = search.strip().casefold()
    return not needle or any(needle in value.casefold() for value in values)


async def user_keys_of_tenant(redis: aioredis.Redis, prefix: str, tenant: str) -> list[str]:
    """Every user (key form) with an index in the tenant (raw id), sorted; one SCAN.

    Raises:
        StoreError: Redis failed.
    """
    tenant_key = key_id(tenant)
    found: set[str] = set()
    try:
        async for raw in redis.scan_iter(
            match=user_index_match(prefix, tenant_key), count=SCAN_COUNT
        ):
            user = user_of_index_key(prefix, tenant_key, _text(raw))
            if user is not None:
                found.add(user)
    except RedisError as exc:
        raise StoreError(f"scan the users of tenant {tenant!r}: {exc}") from exc
    return sorted(found)


async def _members(redis: aioredis.Redis, users: Sequence[UserKeys]) -> list[list[str]]:
    if not users:
        return []
    async with redis.pipeline(transaction=False) as pipe:
        for user in users:
            pipe.smembers(user.index)
        replies: list[Any] = await pipe.execute()
    return [sorted(_text(m) for m in reply) for reply in replies]


async def _raw_ids(
    redis: aioredis.Redis, users: Sequence[UserKeys], members: Sequence[Sequence[str]]
) -> list[str]:
    """Each user's raw id: the key form when plain, else ``user`` of a conversation's meta."""
    asks = [
        (number, user.conversation(m[2:]).meta)
        for number, (user, held) in enumerate(zip(users, members, strict=True))
        if user.user.startswith("h-")
        for m in held[:1]
        if m.startswith("c:")
    ]
    ids = [user.user for user in users]
    if asks:
        async with redis.pipeline(transaction=False) as pipe:
            for _, meta in asks:
                pipe.hget(meta, "user")
            replies: list[Any] = await pipe.execute()
        for (number, _), raw in zip(asks, replies, strict=True):
            if raw:
                ids[number] = _text(raw)
    return ids


async def list_users(
    redis: aioredis.Redis,
    prefix: str,
    tenant: str,
    *,
    search: str = "",
    offset: int = 0,
    limit: int = 50,
) -> Page[UserEntry]:
    """A page of the tenant's users, sorted by id (case-insensitive), whose id contains
    ``search`` (case-insensitive; ``""`` lists all).

    Args:
        tenant: the raw tenant id (``master``, ``team-<id>``, ...).
        offset: the first user of the page in the filtered list.
        limit: users per page, 1 to :data:`MAX_PAGE`.

    Raises:
        StoreError: Redis failed.
    """
    tenant_key = key_id(tenant)
    keys = [
        UserKeys(prefix, tenant_key, u) for u in await user_keys_of_tenant(redis, prefix, tenant)
    ]
    try:
        hashed = [k for k in keys if k.user.startswith("h-")]
        hashed_ids = dict(
            zip(hashed, await _raw_ids(redis, hashed, await _members(redis, hashed)), strict=True)
        )
        named = [(hashed_ids.get(k, k.user), k) for k in keys]
        named = [(raw, k) for raw, k in named if _matches(search, raw, k.user)]
        named.sort(key=lambda pair: (pair[0].casefold(), pair[0]))
        page = _page(named, offset, limit)
        members = await _members(redis, [k for _, k in page.items])
        updated = await _newest_updates(redis, [k for _, k in page.items], members)
    except RedisError as exc:
        raise StoreError(f"list the users of tenant {tenant!r}: {exc}") from exc
    entries = [
        UserEntry(
            user=raw,
            key=k.user,
            conversations=sum(m.startswith("c:") for m in held),
            memory_sets=sum(m.startswith("ns:") for m in held),
            updated_ms=newest,
        )
        for (raw, k), held, newest in zip(page.items, members, updated, strict=True)
    ]
    return Page(entries, page.total, page.offset, page.next_offset)


async def _newest_updates(
    redis: aioredis.Redis, users: Sequence[UserKeys], members: Sequence[Sequence[str]]
) -> list[int | None]:
    asks = [
        (number, user.conversation(m[2:]).meta)
        for number, (user, held) in enumerate(zip(users, members, strict=True))
        for m in held
        if m.startswith("c:")
    ]
    newest: list[int | None] = [None] * len(users)
    if not asks:
        return newest
    async with redis.pipeline(transaction=False) as pipe:
        for _, meta in asks:
            pipe.hget(meta, "updated_ms")
        replies: list[Any] = await pipe.execute()
    for (number, _), value in zip(asks, replies, strict=True):
        ms = _int(value)
        current = newest[number]
        if ms is not None and (current is None or ms > current):
            newest[number] = ms
    return newest


async def conversations_of(redis: aioredis.Redis, user: UserKeys) -> list[ConversationEntry]:
    """Every stored conversation of the user (index members whose keys are still there), most
    recently written first (then by id).

    Raises:
        StoreError: Redis failed.
    """
    try:
        members = (await _members(redis, [user]))[0]
        ids = [m[2:] for m in members if m.startswith("c:")]
        if not ids:
            return []
        async with redis.pipeline(transaction=False) as pipe:
            for cid in ids:
                keys = user.conversation(cid)
                pipe.hmget(keys.meta, list(CONVERSATION_FIELDS))
                pipe.zcard(keys.turns)
            replies: list[Any] = await pipe.execute()
    except RedisError as exc:
        raise StoreError(f"conversations of {user.hash_tag}: {exc}") from exc
    found: list[ConversationEntry] = []
    for cid, meta, turns in zip(ids, replies[0::2], replies[1::2], strict=True):
        raw, alias, namespace, seq, cursor, created, updated = (_text(v) for v in meta)
        if not any((raw, seq, turns)):
            continue  # expired: only the index entry is left
        found.append(
            ConversationEntry(
                id=raw or cid,
                key=cid,
                alias=alias,
                namespace=namespace,
                seq=_int(seq) or 0,
                cursor=_int(cursor) or 0,
                turns=int(turns),
                created_ms=_int(created),
                updated_ms=_int(updated),
            )
        )
    found.sort(key=lambda c: (c.updated_ms or 0, c.id), reverse=True)
    return found


async def list_conversations(
    redis: aioredis.Redis,
    user: UserKeys,
    *,
    search: str = "",
    offset: int = 0,
    limit: int = 50,
) -> Page[ConversationEntry]:
    """A page of :func:`conversations_of`, those whose id or alias contains ``search``
    (case-insensitive).

    Raises:
        StoreError: Redis failed.
    """
    found = [c for c in await conversations_of(redis, user) if _matches(search, c.id, c.alias)]
    return _page(found, offset, limit)


async def has_user(redis: aioredis.Redis, user: UserKeys) -> bool:
    """Whether anything is stored for the user (the user's index exists).

    Raises:
        StoreError: Redis failed.
    """
    try:
        return bool(await redis.exists(user.index))
    except RedisError as exc:
        raise StoreError(f"read {user.index}: {exc}") from exc
