"""Steps of one extraction job that need no worker state: its outcome, the batch of new lines,
the memories shown, and the bookkeeping of a failed try."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.core.selection import select_items
from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.extraction.failures import (
    REPLY_KIND,
    Failures,
    FailureStore,
    after_failure,
)
from litellm_memory_hook.settings import MemorySettings
from litellm_memory_hook.store.forgets import token_of
from litellm_memory_hook.store.keys import ConversationKeys
from litellm_memory_hook.store.memory_sets import MemoryItem, MemorySetState
from litellm_memory_hook.store.queue import ExtractionQueue
from litellm_memory_hook.store.redis_store import write_progress_ms

logger = logging.getLogger("litellm_memory_hook")


#: most stored turns one job reads past the cursor (the character budget usually ends it first).
MAX_TURNS_PER_JOB = 400
#: a batched write whose last batch is older than ``write_buffer.max_age_s`` plus this (s) was
#: abandoned (the outage buffer dropped it, or its proxy stopped): it never resumes, and the
#: job no longer waits for it.
ABANDONED_WRITE_MARGIN_S = 60


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class JobOutcome:
    """What one job did: ``status`` is ``committed``, ``nothing_new``, ``busy`` (another worker
    holds the lease), ``deferred`` (a batched write is under way: runs again in ``DEFER_MS``),
    ``failed`` (the model's reply was unusable twice, or the call failed: ``call_failed``; it
    runs again at ``again_ms``, or, ``given_up``, after the conversation's next message),
    ``backoff`` (an earlier failure's wait is not over: runs at ``again_ms``, the model is not
    called), ``waiting`` (given up, and no message came since: leaves the due set),
    ``conflict`` (lost the compare-and-set twice) or ``discarded`` (expired conversation, no
    user, unknown alias or extraction off)."""

    status: str
    added: int = 0
    deleted: int = 0
    more: bool = False
    #: a failed job whose model call failed (not its reply)
    call_failed: bool = False
    #: a failed job that reached ``extraction.max_attempts``: it waits for the next message
    given_up: bool = False
    #: when the job runs again (epoch ms), when the outcome sets it
    again_ms: int | None = None
    #: a failed job that Redis failed: it runs again in ``STORE_RETRY_MS``
    store_failed: bool = False


def write_under_way(meta: dict[str, str], settings: MemorySettings) -> bool:
    """Whether a batched write is under way in the conversation (its meta hash): one whose last
    batch is younger than ``write_buffer.max_age_s`` plus :data:`ABANDONED_WRITE_MARGIN_S`."""
    limit_ms = (settings.write_buffer.max_age_s + ABANDONED_WRITE_MARGIN_S) * 1000
    now = _now_ms()
    return any(now - at < limit_ms for at in write_progress_ms(meta))


def batch_of(turns: Sequence[Turn], budget: int) -> tuple[list[Turn], int]:
    """The turns of this job within ``budget`` characters (at least one), and the seq
    extracted through."""
    chosen: list[Turn] = []
    used = 0
    through = 0
    for turn in turns:
        useful = turn.role in ("user", "assistant") and turn.text and not turn.partial
        if useful and chosen and used + len(turn.text) > budget:
            break
        if useful:
            chosen.append(turn)
            used += len(turn.text)
        through = turn.seq
    return chosen, through


def shown_memories(
    state: MemorySetState, batch: Sequence[Turn], memory_chars: int, *, max_items: int
) -> tuple[list[MemoryItem], list[MemoryItem]]:
    """The stored memories shown to the model (those that concern the batch's user lines,
    within ``memory_chars``) and the others (kept as they are)."""
    lines_text = " ".join(t.text for t in batch if t.role == "user")
    shown_texts = set(
        select_items(
            [m.text for m in state.memories],
            lines_text,
            memory_chars,
            max_items=max_items,
        )
    )
    shown = [m for m in state.memories if m.text.strip() in shown_texts]
    others = [m for m in state.memories if m.text.strip() not in shown_texts]
    return shown, others


async def record_failure(
    store: FailureStore,
    queue: ExtractionQueue,
    settings: MemorySettings,
    keys: ConversationKeys,
    failures: Failures,
    kind: str,
    last_seq: int,
    error: Exception | None,
) -> JobOutcome:
    """Count a failed try of kind ``kind`` and decide when the job runs again
    (:func:`~litellm_memory_hook.extraction.failures.after_failure`): one info line per try,
    one warning line when the job is given up."""
    after = after_failure(failures, kind, now_ms=_now_ms(), last_seq=last_seq, settings=settings)
    await store.write(keys, after)
    reason = str(error)[:300] if error is not None else "no usable reply, twice"
    call_failed = kind != REPLY_KIND
    if after.given_up:
        await queue.count(jobs_given_up=1, **{f"failures_{kind}": 1})
        logger.warning(
            "memory worker: extraction of %s given up after %d tries (%s: %s); it runs "
            "again after the conversation's next message",
            keys.ref,
            after.attempts,
            kind,
            reason,
        )
        return JobOutcome("failed", call_failed=call_failed, given_up=True)
    await queue.count(**{f"failures_{kind}": 1})
    logger.info(
        "memory worker: extraction of %s failed (try %d of %d, %s: %s); next try in %.0f s",
        keys.ref,
        after.attempts,
        settings.extraction.max_attempts,
        kind,
        reason,
        (after.next_ms - _now_ms()) / 1000,
    )
    return JobOutcome("failed", call_failed=call_failed, again_ms=after.next_ms)


async def read_conversation(
    redis: aioredis.Redis, keys: ConversationKeys
) -> tuple[dict[str, str], list[Turn], str]:
    """The conversation's meta, its turns after the cursor (at most ``MAX_TURNS_PER_JOB``)
    and its forget token (:mod:`litellm_memory_hook.store.forgets`), which the commit is
    checked against.

    Raises:
        StoreError: Redis failed.
    """
    try:
        async with redis.pipeline(transaction=False) as pipe:
            pipe.hmget(keys.user_keys.forgets, list(keys.forget_fields))  # first: see load
            pipe.hgetall(keys.meta)
            tokens, meta_raw = await pipe.execute()
        meta = {
            (k.decode() if isinstance(k, bytes) else str(k)): (
                v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
            )
            for k, v in meta_raw.items()
        }
        cursor = int(meta.get("cursor", "0") or 0)
        members = await redis.zrangebyscore(
            keys.turns, f"({cursor}", "+inf", start=0, num=MAX_TURNS_PER_JOB
        )
    except RedisError as exc:
        raise StoreError(f"read {keys.ref}: {exc}") from exc
    turns = []
    for member in members:
        if not isinstance(member, bytes | str):
            continue
        try:
            turns.append(Turn.from_member(member))
        except ValueError:
            continue
    return meta, turns, token_of(tokens)
