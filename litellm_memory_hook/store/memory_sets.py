"""Reads and writes of memory sets: pinned and extracted memories, tombstones, the version.

Key names come from :mod:`litellm_memory_hook.store.keys` (:class:`MemoryKeys`). Every change of a
memory set bumps ``mstate.version`` in the same script or transaction, so the extraction job can
commit only if nothing changed since it read (a compare-and-set on the version). All keys of a
set, and the conversation keys the job commits with them, share the user's hash tag.

Values are plain text (readable with ``HGETALL``); field names are creation-ordered ids
(``<epoch ms, 13 digits>-<6 hex>``), so sorting the fields gives the oldest first.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import redis.asyncio as aioredis
from redis.exceptions import RedisError, WatchError

from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.store.keys import ConversationKeys, MemoryKeys

PIN = """
-- Add a pinned memory unless the set holds the maximum already.
-- KEYS[1] pinned hash, KEYS[2] mstate hash, KEYS[3] memories hash, KEYS[4] tombs hash
-- ARGV[1] id, ARGV[2] text, ARGV[3] most pinned memories, ARGV[4] TTL seconds
-- Returns the new version, or -1 when the set is full.
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local v = redis.call('HINCRBY', KEYS[2], 'version', 1)
for k = 1, #KEYS do redis.call('EXPIRE', KEYS[k], ARGV[4]) end
return v
"""

EDIT = """
-- Replace the text of an existing item.
-- KEYS[1] the hash (pinned), KEYS[2] mstate hash
-- ARGV[1] id, ARGV[2] text, ARGV[3] TTL seconds
-- Returns the new version, or -1 when the id is not there.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local v = redis.call('HINCRBY', KEYS[2], 'version', 1)
for k = 1, #KEYS do redis.call('EXPIRE', KEYS[k], ARGV[3]) end
return v
"""

DELETE = """
-- Delete an item; for an extracted memory, leave a tombstone so it is not extracted again.
-- KEYS[1] the hash (pinned or memories), KEYS[2] mstate hash, KEYS[3] tombs hash
-- ARGV[1] id, ARGV[2] tombstone field ("" = none), ARGV[3] now (epoch ms), ARGV[4] TTL seconds
-- Returns the new version, or -1 when the id is not there.
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return -1 end
if ARGV[2] ~= '' then redis.call('HSET', KEYS[3], ARGV[2], ARGV[3]) end
local v = redis.call('HINCRBY', KEYS[2], 'version', 1)
for k = 1, #KEYS do redis.call('EXPIRE', KEYS[k], ARGV[4]) end
return v
"""


def new_item_id(now_ms: int) -> str:
    """A creation-ordered item id: ``<epoch ms, 13 digits>-<6 random hex>``."""
    return f"{now_ms:013d}-{secrets.token_hex(3)}"


def item_time_ms(item_id: str) -> int:
    """The creation time encoded in an item id (epoch ms; 0 when the id is not ours)."""
    head = item_id.split("-", 1)[0]
    return int(head) if head.isdigit() else 0


@dataclass(frozen=True)
class MemoryItem:
    """One memory: its id (creation-ordered), its text and its creation time (epoch ms)."""

    id: str
    text: str

    @property
    def created_ms(self) -> int:
        """Creation time from the id (epoch ms)."""
        return item_time_ms(self.id)


@dataclass
class MemorySetState:
    """A memory set as read: items oldest first, tombstone hashes, version."""

    pinned: list[MemoryItem] = field(default_factory=list)
    memories: list[MemoryItem] = field(default_factory=list)
    tombs: set[str] = field(default_factory=set)
    version: int = 0


@dataclass(frozen=True)
class ExtractionCommit:
    """What an extraction job writes, guarded by the versions it read.

    Attributes:
        read_version: the memory set's ``version`` the job read.
        read_cursor: the conversation's ``cursor`` the job read.
        delete_ids: extracted memories the model's reply replaced or merged away.
        add: new memory texts (new ids are given at commit time).
        summary: the new summary; ``None`` keeps the stored one.
        cursor: the seq extracted through.
    """

    read_version: int
    read_cursor: int
    delete_ids: Sequence[str]
    add: Sequence[str]
    summary: str | None
    cursor: int


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _items(raw: Mapping[bytes | str, bytes | str]) -> list[MemoryItem]:
    pairs = sorted((_text(k), _text(v)) for k, v in raw.items())
    return [MemoryItem(k, v) for k, v in pairs]


class MemorySetStore:
    """Reads and writes memory sets.

    Args:
        redis: an asyncio client (``decode_responses`` either way).
        ttl_s: retention TTL in seconds, set again on every write.

    Every method raises :class:`StoreError` (wrapping the Redis error) on failure.
    """

    def __init__(self, redis: aioredis.Redis, *, ttl_s: int):
        self.redis = redis
        self.ttl_s = ttl_s
        self._pin = redis.register_script(PIN)
        self._edit = redis.register_script(EDIT)
        self._delete = redis.register_script(DELETE)

    async def read(self, memory: MemoryKeys) -> MemorySetState:
        """The whole memory set in one round trip."""
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.hgetall(memory.pinned)
                pipe.hgetall(memory.memories)
                pipe.hkeys(memory.tombs)
                pipe.hget(memory.state, "version")
                pinned, memories, tombs, version = await pipe.execute()
        except RedisError as exc:
            raise StoreError(f"read memories {memory.scope}: {exc}") from exc
        return MemorySetState(
            pinned=_items(pinned),
            memories=_items(memories),
            tombs={_text(t) for t in tombs},
            version=int(version or 0),
        )

    async def pin(self, memory: MemoryKeys, text: str, *, now_ms: int, max_items: int) -> str:
        """Add a pinned memory; returns its id, or "" when the set already has ``max_items``."""
        item_id = new_item_id(now_ms)
        try:
            version = await self._pin(
                keys=[memory.pinned, memory.state, memory.memories, memory.tombs],
                args=[item_id, text, max_items, self.ttl_s],
            )
        except RedisError as exc:
            raise StoreError(f"pin {memory.scope}: {exc}") from exc
        return item_id if int(version) >= 0 else ""

    async def edit_pinned(self, memory: MemoryKeys, item_id: str, text: str) -> bool:
        """Replace a pinned memory's text; False when the id is not there."""
        try:
            version = await self._edit(
                keys=[memory.pinned, memory.state], args=[item_id, text, self.ttl_s]
            )
        except RedisError as exc:
            raise StoreError(f"edit {memory.scope}: {exc}") from exc
        return int(version) >= 0

    async def delete(
        self, memory: MemoryKeys, item_id: str, *, pinned: bool, tomb: str, now_ms: int
    ) -> bool:
        """Delete a pinned (``pinned=True``) or extracted memory; an extracted one leaves the
        tombstone ``tomb`` (its fact hash). False when the id is not there."""
        target = memory.pinned if pinned else memory.memories
        try:
            version = await self._delete(
                keys=[target, memory.state, memory.tombs],
                args=[item_id, "" if pinned else tomb, now_ms, self.ttl_s],
            )
        except RedisError as exc:
            raise StoreError(f"delete {memory.scope}: {exc}") from exc
        return int(version) >= 0

    async def commit_extraction(
        self,
        conversation: ConversationKeys,
        memory: MemoryKeys,
        commit: ExtractionCommit,
        *,
        now_ms: int,
    ) -> bool:
        """Replace memories, summary and cursor in one transaction, only if the memory set's
        version and the conversation's cursor are still those the job read.

        WATCH/MULTI on one connection (``async with pipeline``; case C29); all keys are in the
        user's slot. Returns False when another writer changed them (the caller re-reads once
        or gives up); nothing is written then.
        """
        try:
            async with self.redis.pipeline(transaction=True) as pipe:
                await pipe.watch(memory.state, conversation.meta)
                version = int(await pipe.hget(memory.state, "version") or 0)
                cursor = int(await pipe.hget(conversation.meta, "cursor") or 0)
                if version != commit.read_version or cursor != commit.read_cursor:
                    return False  # leaving the block resets the connection (UNWATCH)
                pipe.multi()  # type: ignore[no-untyped-call]
                if commit.delete_ids:
                    pipe.hdel(memory.memories, *commit.delete_ids)
                for offset, text in enumerate(commit.add):
                    pipe.hset(memory.memories, new_item_id(now_ms + offset), text)
                pipe.hincrby(memory.state, "version", 1)
                pipe.hset(conversation.meta, "cursor", commit.cursor)
                pipe.hset(conversation.meta, "extracted_ms", now_ms)
                if commit.summary is not None:
                    pipe.hset(conversation.meta, "summary", commit.summary)
                for key in (*memory.all(), conversation.meta):
                    pipe.expire(key, self.ttl_s)
                await pipe.execute()
        except WatchError:
            return False
        except RedisError as exc:
            raise StoreError(f"commit extraction {conversation.ref}: {exc}") from exc
        return True
