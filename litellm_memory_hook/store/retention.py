"""Bounding a conversation: the oldest turns beyond ``storage.max_messages`` are deleted.

Time-based retention is the TTL every key carries (refreshed on write); this module bounds the
count too (sorted sets are trimmed to N). Trimmed turns leave the recall index with
exactly the terms they were indexed under (:func:`~litellm_memory_hook.core.indexing.stored_terms`).
"""

from __future__ import annotations

from redis.exceptions import RedisError

from litellm_memory_hook.core.indexing import stored_terms
from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.store.keys import ConversationKeys
from litellm_memory_hook.store.redis_store import MemoryStore

#: trims happen in batches: a conversation may exceed its bound by this share before a trim.
TRIM_SLACK = 0.02


def trim_step(max_messages: int) -> int:
    """The batch size of trims: 2% of the bound, at least 1 (messages)."""
    return max(1, int(max_messages * TRIM_SLACK))


def should_check(first_seq: int, last_seq: int, max_messages: int) -> bool:
    """True when an append that wrote seqs ``first_seq..last_seq`` crossed a multiple of the
    trim step, so a writer counts the conversation about once per step, not on every write."""
    step = trim_step(max_messages)
    return last_seq // step != (first_seq - 1) // step


async def trim_oldest(store: MemoryStore, keys: ConversationKeys, max_messages: int) -> int:
    """Delete the oldest turns so that at most ``max_messages`` remain, with their index entries.

    Nothing happens until the conversation holds more than ``max_messages + trim_step`` turns;
    then it is trimmed to ``max_messages``, reading and deleting ``store.batch_turns`` turns at a
    time, so that no read or script is long (issue 9 item 7). A turn stored meanwhile by another
    request is newer and never among the oldest read here.

    Returns:
        How many turns were deleted.

    Raises:
        StoreError: Redis failed (batches before it stay deleted; the next trim goes on).
    """
    count = await store.count_turns(keys)
    if count <= max_messages + trim_step(max_messages):
        return 0
    excess = count - max_messages
    deleted = 0
    while excess > 0:
        try:
            members = await store.redis.zrange(keys.turns, 0, min(excess, store.batch_turns) - 1)
        except RedisError as exc:
            raise StoreError(f"trim {keys.ref}: {exc}") from exc
        turns = [Turn.from_member(m) for m in members if isinstance(m, bytes | str)]
        if not turns:
            break
        removed = await store.delete_turns(keys, [stored_terms(t) for t in turns])
        call_ids = sorted({t.call_id for t in turns if t.call_id})
        if call_ids:  # the idempotency entries of trimmed turns go too
            try:
                await store.redis.hdel(keys.calls, *call_ids)
            except RedisError as exc:
                raise StoreError(f"trim {keys.ref}: {exc}") from exc
        deleted += removed
        excess -= len(turns)
        if removed == 0:
            break  # another trim deleted them first
    return deleted
