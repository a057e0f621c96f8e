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
from litellm_memory_hook.store import scripts
from litellm_memory_hook.store.keys import CURSOR_COPY_FIELD, ConversationKeys, MemoryKeys


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
        self._pin = scripts.register(redis, "memory_pin")
        self._edit = scripts.register(redis, "memory_edit")
        self._delete = scripts.register(redis, "memory_delete")
        self._commit = scripts.register(redis, "memory_commit")

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

        One Lua script (``store/lua/memory_commit.lua``) compares the two field values and writes;
        all keys are in the user's slot. Comparing the values, not WATCHing whole keys, means that
        turns stored meanwhile (they write the meta hash and refresh TTLs) do not void the job; only
        a real change of the memories (a user's edit, another job) or of the cursor does. Returns
        False when one of them changed (the caller re-reads once or gives up); nothing is written
        then.
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
