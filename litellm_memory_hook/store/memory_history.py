"""The history of a memory set: extracted memories that extraction jobs replaced or deleted.

One Redis list per memory set (:attr:`MemoryKeys.history`, in the user's hash tag, so a Redis
Cluster keeps it in the slot of the set it belongs to), newest first, at most
``memories.max_history_items`` entries (the job's commit pushes and trims it in the same script that
removes the memories: :data:`~litellm_memory_hook.store.memory_sets.COMMIT`), with the retention
TTL, deleted by a forget with the set's other keys. Each entry is one JSON object
(:class:`HistoryEntry`)::

    {"id": "1718000000000-a1b2c3", "memory_id": "1717000000000-d4e5f6",
     "text": "Lives in Pune", "removed_ms": 1718000000000, "reason": "update",
     "by": "Lives in Mumbai now", "conversation": "demo", "from_seq": 13, "through_seq": 26}

``reason`` is ``update`` (``by`` holds the new text), ``delete`` (``by`` holds the fact the
model gave as contradicting it) or ``cap`` (room made for a new memory past ``memories.max_items``;
``by`` holds that memory); ``conversation`` (its id in key form) and the seq range name the job.

:meth:`MemoryHistory.restore` puts an entry's memory back with its id and text exactly, removes the
entry, and clears a tombstone of the same fact, in one script (``store/lua/memory_restore.lua``).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.store import scripts
from litellm_memory_hook.store.keys import MemoryKeys

#: why a memory left the set (:attr:`HistoryEntry.reason`).
REASONS = ("update", "delete", "cap")

#: longest ``by`` text kept in an entry (characters).
BY_CHARS = 500


def new_entry_id(now_ms: int) -> str:
    """A time-ordered entry id: ``<epoch ms, 13 digits>-<6 random hex>``."""
    return f"{now_ms:013d}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class HistoryEntry:
    """A memory an extraction job removed.

    Attributes:
        id: the entry's id (``<epoch ms>-<hex>``), what a restore names.
        memory_id: the memory's id in the set (creation-ordered), given back on restore.
        text: the memory's text, exactly as it was stored.
        removed_ms: when the job removed it (epoch ms).
        reason: ``update``, ``delete`` or ``cap`` (see the module docstring).
        by: the new text (update), the contradicting fact (delete) or the memory it made room
            for (cap); at most :data:`BY_CHARS` characters.
        conversation: the id (key form) of the conversation whose job removed it.
        from_seq: the first message seq that job read.
        through_seq: the last message seq that job read.
    """

    id: str
    memory_id: str
    text: str
    removed_ms: int
    reason: str
    by: str
    conversation: str
    from_seq: int
    through_seq: int

    def as_json(self) -> dict[str, Any]:
        """The entry as a JSON object (the stored and the API shape)."""
        return asdict(self)

    def encode(self) -> str:
        """The stored form: compact JSON, non-ASCII kept."""
        return json.dumps(self.as_json(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def decode(cls, raw: bytes | str) -> HistoryEntry | None:
        """An entry from its stored form; ``None`` for anything that is not one."""
        try:
            data = json.loads(raw)
            return cls(
                id=str(data["id"]),
                memory_id=str(data["memory_id"]),
                text=str(data["text"]),
                removed_ms=int(data["removed_ms"]),
                reason=str(data["reason"]),
                by=str(data.get("by", "")),
                conversation=str(data.get("conversation", "")),
                from_seq=int(data.get("from_seq", 0)),
                through_seq=int(data.get("through_seq", 0)),
            )
        except (ValueError, TypeError, KeyError):
            return None


class Restored(Enum):
    """What a restore did."""

    DONE = "done"
    NO_ENTRY = "no_entry"  # no such entry (restored already, trimmed, expired, or never)
    STORED = "stored"  # the memory's id is in the set already
    FULL = "full"  # the set holds ``memories.max_items`` already


class MemoryHistory:
    """Reads a memory set's history and restores its entries.

    Args:
        redis: an asyncio client (``decode_responses`` either way).
        ttl_s: retention TTL in seconds, set again on every restore.

    Every method raises :class:`StoreError` (wrapping the Redis error) on failure.
    """

    def __init__(self, redis: aioredis.Redis, *, ttl_s: int) -> None:
        self.redis = redis
        self.ttl_s = ttl_s
        self._restore = scripts.register(redis, "memory_restore")

    async def _raw(self, memory: MemoryKeys) -> list[bytes | str]:
        try:
            return list(await self.redis.lrange(memory.history, 0, -1))
        except RedisError as exc:
            raise StoreError(f"read history {memory.scope}: {exc}") from exc

    async def entries(self, memory: MemoryKeys) -> list[HistoryEntry]:
        """Every entry of the set's history, newest first (malformed ones are skipped)."""
        decoded = (HistoryEntry.decode(raw) for raw in await self._raw(memory))
        return [entry for entry in decoded if entry is not None]

    async def find(self, memory: MemoryKeys, entry_id: str) -> tuple[HistoryEntry, str] | None:
        """The entry with this id and its stored form, or ``None``."""
        for raw in await self._raw(memory):
            entry = HistoryEntry.decode(raw)
            if entry is not None and entry.id == entry_id:
                return entry, raw.decode("utf-8") if isinstance(raw, bytes) else raw
        return None

    async def restore(
        self, memory: MemoryKeys, entry_id: str, *, fact_hash: str, max_items: int
    ) -> tuple[Restored, HistoryEntry | None]:
        """Put the entry's memory back in the set (its id and text exactly), take the entry out
        of the history and remove a tombstone ``fact_hash`` (the memory's fact hash), atomically.

        Returns:
            What was done, and the entry (``None`` when there is no such entry).
        """
        found = await self.find(memory, entry_id)
        if found is None:
            return Restored.NO_ENTRY, None
        entry, stored = found
        try:
            version = int(
                await self._restore(
                    keys=[
                        memory.history,
                        memory.memories,
                        memory.state,
                        memory.tombs,
                        memory.pinned,
                        memory.user_keys.index,
                    ],
                    args=[
                        stored,
                        entry.memory_id,
                        entry.text,
                        fact_hash,
                        max_items,
                        self.ttl_s,
                        memory.scope,
                    ],
                )
            )
        except RedisError as exc:
            raise StoreError(f"restore {memory.scope}: {exc}") from exc
        outcome = {-1: Restored.NO_ENTRY, -2: Restored.STORED, -3: Restored.FULL}
        return outcome.get(version, Restored.DONE), entry


__all__ = [
    "BY_CHARS",
    "REASONS",
    "HistoryEntry",
    "MemoryHistory",
    "Restored",
    "new_entry_id",
]
