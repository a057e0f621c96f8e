"""A memory set through the API: list, pin, edit, correct and delete memories, and read and restore
what extraction jobs replaced or deleted.

Pinned memories are stored exactly as the user typed them (trimmed at the ends) and reach the
model escaped as data; the model never changes them. Deleting an extracted memory leaves a
tombstone (its fact hash), so the same fact is not extracted again from old messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from redis.exceptions import RedisError

from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.extraction.parse import fact_hash, fact_key
from litellm_memory_hook.memory_api.base import APIBase, now_ms
from litellm_memory_hook.memory_api.errors import MemoryInputError, MemoryNotFoundError
from litellm_memory_hook.memory_api.targets import MemoryTarget
from litellm_memory_hook.store.memory_history import HistoryEntry, Restored
from litellm_memory_hook.store.memory_sets import MemoryItem


@dataclass(frozen=True)
class MemoryListing:
    """A memory set as the API shows it: items oldest first and the set's version."""

    pinned: list[MemoryItem]
    memories: list[MemoryItem]
    version: int


class MemorySetAPI(APIBase):
    """The calls on one memory set (a :class:`MemoryTarget`'s)."""

    def _checked_text(self, text: object) -> str:
        """A memory's text as it is stored: a trimmed string within
        ``memories.max_pinned_item_chars``."""
        if not isinstance(text, str):
            raise MemoryInputError("'text' must be a string")
        value = text.strip()
        if not value:
            raise MemoryInputError("'text' is empty")
        limit = self.settings.memories.max_pinned_item_chars
        if len(value) > limit:
            raise MemoryInputError(f"'text' has {len(value)} characters; the limit is {limit}")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise MemoryInputError("'text' is not valid Unicode text") from exc
        return value

    async def list(self, target: MemoryTarget) -> MemoryListing:
        """The pinned and extracted memories of the target's set, oldest first."""
        state = await self.memsets.read(target.memory)
        return MemoryListing(state.pinned, state.memories, state.version)

    async def pin(self, target: MemoryTarget, text: object) -> MemoryItem:
        """Add a pinned memory (stored as typed, trimmed).

        Raises:
            MemoryInputError: empty, too long or not text; or the set has
                ``memories.max_pinned_items``.
        """
        value = self._checked_text(text)
        item_id = await self.memsets.pin(
            target.memory, value, now_ms=now_ms(), max_items=self.settings.memories.max_pinned_items
        )
        if not item_id:
            raise MemoryInputError(
                f"this user already has {self.settings.memories.max_pinned_items} pinned memories"
            )
        return MemoryItem(item_id, value)

    async def edit(self, target: MemoryTarget, item_id: str, text: object) -> MemoryItem:
        """Replace a pinned memory's text.

        Raises:
            MemoryInputError: bad text, or the id is an extracted memory (the model's, not
                editable: delete it and pin the new text). MemoryNotFoundError: no such memory.
        """
        value = self._checked_text(text)
        if not await self.memsets.edit_pinned(target.memory, item_id, value):
            if any(m.id == item_id for m in (await self.list(target)).memories):
                raise MemoryInputError(
                    f"{item_id!r} is an extracted memory: only pinned memories can be edited "
                    "(delete it, then pin the new text)"
                )
            raise MemoryNotFoundError(f"no pinned memory {item_id!r}")
        return MemoryItem(item_id, value)

    async def correct_extracted(
        self, target: MemoryTarget, item_id: str, text: object
    ) -> MemoryItem:
        """Correct an extracted memory: pin ``text`` (:meth:`pin`) and delete the extracted one
        (:meth:`delete_memory`, whose tombstone keeps its fact from being extracted again), as
        the inspector's Edit of an extracted memory does with the same two calls. Users may
        correct what the model wrote; the correction is theirs, so it is pinned.

        Returns:
            The new pinned memory.

        Raises:
            MemoryInputError: bad text, or the pinned limit is reached.
            MemoryNotFoundError: no extracted memory with that id.
        """
        value = self._checked_text(text)
        if not any(m.id == item_id for m in (await self.list(target)).memories):
            raise MemoryNotFoundError(f"no extracted memory {item_id!r}")
        item = await self.pin(target, value)
        await self.delete_memory(target, item_id)
        return item

    async def delete_pinned(self, target: MemoryTarget, item_id: str) -> None:
        """Delete a pinned memory.

        Raises:
            MemoryNotFoundError: no such pinned memory.
        """
        if not await self.memsets.delete(
            target.memory, item_id, pinned=True, tomb="", now_ms=now_ms()
        ):
            raise MemoryNotFoundError(f"no pinned memory {item_id!r}")

    async def delete_memory(self, target: MemoryTarget, item_id: str) -> None:
        """Delete an extracted memory and leave its tombstone (not extracted again).

        Raises:
            MemoryNotFoundError: no such extracted memory.
        """
        try:
            text = await self.redis.hget(target.memory.memories, item_id)
        except RedisError as exc:
            raise StoreError(f"read memory {item_id}: {exc}") from exc
        if text is None:
            raise MemoryNotFoundError(f"no extracted memory {item_id!r}")
        value = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
        if not await self.memsets.delete(
            target.memory, item_id, pinned=False, tomb=fact_hash(value), now_ms=now_ms()
        ):
            raise MemoryNotFoundError(f"no extracted memory {item_id!r}")

    async def history(self, target: MemoryTarget) -> Sequence[HistoryEntry]:
        """The memories extraction jobs replaced or deleted from the target's set, newest first
        (at most ``memories.max_history_items``;
        :mod:`litellm_memory_hook.store.memory_history`)."""
        return await self.removed.entries(target.memory)

    async def restore(self, target: MemoryTarget, entry_id: str) -> MemoryItem:
        """Put a history entry's memory back (its id and text exactly; a tombstone of the same
        fact is removed) and take the entry out of the history; counted as
        ``memories_restored`` in ``mem:stats``.

        Raises:
            MemoryNotFoundError: no such entry in the set's history.
            MemoryInputError: the set holds that memory (its id or the same fact) already, or
                ``memories.max_items`` memories.
        """
        found = await self.removed.find(target.memory, entry_id)
        if found is None:
            raise MemoryNotFoundError(f"no history entry {entry_id!r}")
        entry = found[0]
        same = [
            m
            for m in (await self.list(target)).memories
            if fact_key(m.text) == fact_key(entry.text)
        ]
        if same:
            raise MemoryInputError(f"the memory set holds that memory already ({same[0].id})")
        done, _ = await self.removed.restore(
            target.memory,
            entry_id,
            fact_hash=fact_hash(entry.text),
            max_items=self.settings.memories.max_items,
        )
        if done is Restored.NO_ENTRY:
            raise MemoryNotFoundError(f"no history entry {entry_id!r}")
        if done is Restored.STORED:
            raise MemoryInputError(f"the memory set holds memory {entry.memory_id!r} already")
        if done is Restored.FULL:
            raise MemoryInputError(
                f"the memory set holds {self.settings.memories.max_items} memories "
                "(memories.max_items): delete one first"
            )
        await self.queue.count(memories_restored=1)
        return MemoryItem(entry.memory_id, entry.text)


__all__ = ["MemoryListing", "MemorySetAPI"]
