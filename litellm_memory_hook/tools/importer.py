"""Bulk-loading an existing chat history into a conversation, with its real timestamps."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from redis.exceptions import RedisError

from litellm_memory_hook.core.indexing import indexed_chain
from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.proxy.identity import Identity
from litellm_memory_hook.store.queue import ExtractionQueue
from litellm_memory_hook.store.redis_store import MemoryStore, now_ms
from litellm_memory_hook.tools.datasets import HistoryLine

BATCH_TURNS = 250


@dataclass(frozen=True)
class ImportResult:
    """Turns written by this import and the seq range they got (0, 0 when none)."""

    turns: int
    first_seq: int
    last_seq: int


def line_to_turn(line: HistoryLine, max_chars: int = 32_000) -> Turn | None:
    """The stored turn of an imported line (``None`` for blank text)."""
    from litellm_memory_hook.core.messages import is_blank, keep_tail

    if is_blank(line.text):
        return None
    return Turn(
        role=line.role,
        text=keep_tail(line.text, max_chars),
        ts_ms=line.ts_ms,
        name=line.speaker,
    )


async def delete_conversation(store: MemoryStore, who: Identity) -> None:
    """Remove every key of a conversation and its entry in the user index.

    Raises:
        StoreError: Redis failed.
    """
    try:
        await store.redis.delete(*who.keys.all())
        await store.redis.srem(who.keys.user_keys.index, who.keys.index_member)
    except RedisError as exc:
        raise StoreError(f"delete {who.keys.ref}: {exc}") from exc


async def import_lines(
    store: MemoryStore, who: Identity, lines: Sequence[HistoryLine], *, max_chars: int = 32_000
) -> ImportResult:
    """Append lines to the conversation in batches of 250 turns, indexed for recall.

    The caller schedules extraction over the imported lines (:func:`schedule_import`): the
    worker works through the backlog in jobs of ``extraction_lines_chars`` each.

    Lines already stored (same role, timestamp and text) are skipped, so importing a file again
    into the same conversation writes only its new lines, and an import that failed part-way
    resumes where it stopped. ``turns`` of the result counts the turns this call wrote.

    Raises:
        StoreError: Redis failed (lines before the failing batch stay written).
    """
    stored = {(t.role, t.ts_ms, t.text) for t in await store.all_turns(who.keys)}
    turns = [
        t
        for t in (line_to_turn(line, max_chars) for line in lines)
        if t is not None and (t.role, t.ts_ms, t.text) not in stored
    ]
    first = last = written = 0
    meta = {**who.meta_fields(), "created_ms": str(now_ms())}
    state, _ = await store.load(who.keys, who.memory, tail=1)
    previous = state.tail[-1].text if state.tail else ""
    for start in range(0, len(turns), BATCH_TURNS):
        batch = turns[start : start + BATCH_TURNS]
        result = await store.append(
            who.keys,
            indexed_chain(batch, previous),
            meta_if_new=meta,
        )
        previous = batch[-1].text
        if result.written:
            written += len(batch)
            first = first or result.first_seq
            last = result.last_seq
    if turns:
        await store.touch_user_index(who.keys, who.memory)
    return ImportResult(turns=written, first_seq=first, last_seq=last)


async def schedule_import(queue: ExtractionQueue, who: Identity, result: ImportResult) -> bool:
    """Make the conversation due for extraction now when the import wrote turns.

    Returns:
        True when it was scheduled.

    Raises:
        StoreError: Redis failed.
    """
    if not result.turns:
        return False
    await queue.schedule(who.keys, now_ms(), earlier_only=True)
    return True
