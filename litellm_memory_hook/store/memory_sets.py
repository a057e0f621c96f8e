"""Reads and writes of memory sets: pinned and extracted memories, tombstones, the version.

Key names come from :mod:`litellm_memory_hook.store.keys` (:class:`MemoryKeys`). Every change of a
memory set bumps ``mstate.version`` in the same script, so the extraction job can commit only if
nothing changed since it read (a compare-and-set on the version and the cursor, in Lua), and lists
the set in the user's index again with the retention TTL (a set must never outlive the index
that forget and export find it through). All keys of a set, and the conversation keys the job
commits with them, share the user's hash tag.

Values are plain text (readable with ``HGETALL``); field names are creation-ordered ids
(``<epoch ms, 13 digits>-<6 hex>``), so sorting the fields gives the oldest first.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.store.forgets import FORGOTTEN_LUA
from litellm_memory_hook.store.keys import CURSOR_COPY_FIELD, ConversationKeys, MemoryKeys

PIN = """
-- Add a pinned memory unless the set holds the maximum already.
-- KEYS[1] pinned hash, KEYS[2] mstate hash, KEYS[3] memories hash, KEYS[4] tombs hash,
-- KEYS[5] the user's index set
-- ARGV[1] id, ARGV[2] text, ARGV[3] most pinned memories, ARGV[4] TTL seconds,
-- ARGV[5] the set's member in the user's index (its scope)
-- Returns the new version, or -1 when the set is full.
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SADD', KEYS[5], ARGV[5])
local v = redis.call('HINCRBY', KEYS[2], 'version', 1)
for k = 1, #KEYS do redis.call('EXPIRE', KEYS[k], ARGV[4]) end
return v
"""

EDIT = """
-- Replace the text of an existing item.
-- KEYS[1] the hash (pinned), KEYS[2] mstate hash, KEYS[3] the user's index set
-- ARGV[1] id, ARGV[2] text, ARGV[3] TTL seconds, ARGV[4] the set's member in the user's index
-- Returns the new version, or -1 when the id is not there.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SADD', KEYS[3], ARGV[4])
local v = redis.call('HINCRBY', KEYS[2], 'version', 1)
for k = 1, #KEYS do redis.call('EXPIRE', KEYS[k], ARGV[3]) end
return v
"""

DELETE = """
-- Delete an item; for an extracted memory, leave a tombstone so it is not extracted again.
-- KEYS[1] the hash (pinned or memories), KEYS[2] mstate hash, KEYS[3] tombs hash,
-- KEYS[4] the user's index set
-- ARGV[1] id, ARGV[2] tombstone field ("" = none), ARGV[3] now (epoch ms), ARGV[4] TTL seconds,
-- ARGV[5] the set's member in the user's index
-- Returns the new version, or -1 when the id is not there.
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return -1 end
redis.call('SADD', KEYS[4], ARGV[5])
if ARGV[2] ~= '' then redis.call('HSET', KEYS[3], ARGV[2], ARGV[3]) end
local v = redis.call('HINCRBY', KEYS[2], 'version', 1)
for k = 1, #KEYS do redis.call('EXPIRE', KEYS[k], ARGV[4]) end
return v
"""


COMMIT = (
    """
-- Replace extracted memories, summary and cursor if nothing changed them since the job read.
-- KEYS[1] mstate hash, KEYS[2] conversation meta hash, KEYS[3] memories hash,
-- KEYS[4] pinned hash, KEYS[5] tombs hash (the last two only get the TTL again),
-- KEYS[6] the user's forgets hash (store/forgets.py; no TTL given), KEYS[7] the user's index
-- set (the memory set's member, ARGV[10], is added again and the set gets the TTL),
-- KEYS[8] the memory set's history list (store/memory_history.py), KEYS[9] the conversation's
-- calls hash (its field ARGV[12] keeps a copy of the cursor: an evicted meta hash gets it back)
-- ARGV[1] version read, ARGV[2] cursor read, ARGV[3] TTL seconds, ARGV[4] new cursor,
-- ARGV[5] now (epoch ms), ARGV[6] "1" to write the summary, ARGV[7] the summary,
-- ARGV[8] the conversation's forgets field, ARGV[9] the forget token the job read,
-- ARGV[10] the memory set's member in the user's index, ARGV[11] most history entries kept,
-- ARGV[12] the calls hash's field of the cursor's copy,
-- then the number of ids to delete and the ids, then the number of items to add and for each
-- its id and text, then the number of history entries and the entries (JSON, oldest first:
-- each is pushed at the head, so the newest ends first).
-- Returns 1 when written, 0 when the version or the cursor changed or a forget came after the
-- job's read (a first extraction reads version and cursor 0, as a forgotten conversation
-- has them): nothing written.
"""
    + FORGOTTEN_LUA
    + """
if forgotten(KEYS[6], ARGV[8], ARGV[9]) then return 0 end
local version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
local cursor = tonumber(redis.call('HGET', KEYS[2], 'cursor') or '0')
if version ~= tonumber(ARGV[1]) or cursor ~= tonumber(ARGV[2]) then return 0 end
local i = 13
local n_delete = tonumber(ARGV[i]); i = i + 1
for _ = 1, n_delete do redis.call('HDEL', KEYS[3], ARGV[i]); i = i + 1 end
local n_add = tonumber(ARGV[i]); i = i + 1
for _ = 1, n_add do redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1]); i = i + 2 end
local n_history = tonumber(ARGV[i]); i = i + 1
for _ = 1, n_history do redis.call('LPUSH', KEYS[8], ARGV[i]); i = i + 1 end
if n_history > 0 then redis.call('LTRIM', KEYS[8], 0, tonumber(ARGV[11]) - 1) end
redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('HSET', KEYS[2], 'cursor', ARGV[4], 'extracted_ms', ARGV[5])
redis.call('HSET', KEYS[9], ARGV[12], ARGV[4])
if ARGV[6] == '1' then redis.call('HSET', KEYS[2], 'summary', ARGV[7]) end
redis.call('SADD', KEYS[7], ARGV[10])
for _, k in ipairs({1, 2, 3, 4, 5, 7, 8, 9}) do redis.call('EXPIRE', KEYS[k], ARGV[3]) end
return 1
"""
)


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
        forget_token: the conversation's forget tokens as the job read them
            (:mod:`litellm_memory_hook.store.forgets`; ``""`` checks nothing).
        history: the removed memories' history entries, oldest first
            (:meth:`~litellm_memory_hook.store.memory_history.HistoryEntry.encode`), pushed in
            the same script.
        history_max: most entries the set's history keeps (older ones are dropped).
    """

    read_version: int
    read_cursor: int
    delete_ids: Sequence[str]
    add: Sequence[str]
    summary: str | None
    cursor: int
    forget_token: str = ""
    history: Sequence[str] = ()
    history_max: int = 200


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
        self._commit = redis.register_script(COMMIT)

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
                keys=[
                    memory.pinned,
                    memory.state,
                    memory.memories,
                    memory.tombs,
                    memory.user_keys.index,
                ],
                args=[item_id, text, max_items, self.ttl_s, memory.scope],
            )
        except RedisError as exc:
            raise StoreError(f"pin {memory.scope}: {exc}") from exc
        return item_id if int(version) >= 0 else ""

    async def edit_pinned(self, memory: MemoryKeys, item_id: str, text: str) -> bool:
        """Replace a pinned memory's text; False when the id is not there."""
        try:
            version = await self._edit(
                keys=[memory.pinned, memory.state, memory.user_keys.index],
                args=[item_id, text, self.ttl_s, memory.scope],
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
                keys=[target, memory.state, memory.tombs, memory.user_keys.index],
                args=[item_id, "" if pinned else tomb, now_ms, self.ttl_s, memory.scope],
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
        """Replace memories, summary and cursor atomically (and push the removed memories to the
        set's history), only if the memory set's ``version``
        and the conversation's ``cursor`` are still those the job read, and no forget of the
        user or the conversation came since (``commit.forget_token``).

        One Lua script (:data:`COMMIT`) compares the two field values and writes; all keys are
        in the user's slot. Comparing the values, not WATCHing whole keys, means that turns
        stored meanwhile (they write the meta hash and refresh TTLs) do not void the job; only a
        real change of the memories (a user's edit, another job) or of the cursor does. Returns
        False when one of them changed (the caller re-reads once or gives up); nothing is
        written then.
        """
        args: list[Any] = [
            commit.read_version,
            commit.read_cursor,
            self.ttl_s,
            commit.cursor,
            now_ms,
            "1" if commit.summary is not None else "0",
            commit.summary or "",
            conversation.index_member,
            commit.forget_token,
            memory.scope,
            commit.history_max,
            CURSOR_COPY_FIELD,
            len(commit.delete_ids),
            *commit.delete_ids,
            len(commit.add),
        ]
        for offset, text in enumerate(commit.add):
            args.extend((new_item_id(now_ms + offset), text))
        args.extend((len(commit.history), *commit.history))
        try:
            done = await self._commit(
                keys=[
                    memory.state,
                    conversation.meta,
                    memory.memories,
                    memory.pinned,
                    memory.tombs,
                    conversation.user_keys.forgets,
                    conversation.user_keys.index,
                    memory.history,
                    conversation.calls,
                ],
                args=args,
            )
        except RedisError as exc:
            raise StoreError(f"commit extraction {conversation.ref}: {exc}") from exc
        return bool(int(done))
