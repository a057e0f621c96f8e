"""One extraction job: what the model is shown about a conversation, and what is written back.

A job reads the conversation's meta, the messages since its cursor (at most
``extraction.max_messages_chars``; a longer backlog is done in several jobs) and its memory set;
shows the model the summary, the pinned memories (fixed) and the stored memories that concern the
new messages (:func:`~litellm_memory_hook.core.selection.select_items`); parses and cleans its JSON
off the event loop (:mod:`~litellm_memory_hook.extraction.parse`, one retry with "Reply with
valid JSON only."); then writes the changes (:mod:`~litellm_memory_hook.extraction.changes`),
the summary and the cursor in one transaction, only if nothing changed them since the job read
them (:meth:`MemorySetStore.commit_extraction`). A conflict re-reads once, else the job runs
again. The changes are bounded: a memory is removed only by an explicit update or delete, at
most ``extraction.max_removed_share`` of the set per job, into the set's history; a summary
that reads as an instruction or loses most of the old one's facts is not taken.

Failures by kind (:mod:`~litellm_memory_hook.extraction.failures`): a prompt too long for the
model halves the new lines (then shows no stored memory) and asks again at once; a single line
that does not fit alone is skipped (the cursor moves past it). Any other failure (the call, or
a reply unusable twice) is tried again after an exponential backoff (longer for 401, 403, 404)
up to ``extraction.max_attempts`` times, then given up with one warning line until the
conversation's next message; meanwhile new messages run no job that calls the model.

The loop that claims due conversations and runs their jobs is
:class:`~litellm_memory_hook.extraction.worker.ExtractionWorker`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import redis.asyncio as aioredis

from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.errors import ExtractionError
from litellm_memory_hook.extraction.changes import filter_again, guarded_changes, history_entries
from litellm_memory_hook.extraction.client import ExtractionCallError, ExtractionModel
from litellm_memory_hook.extraction.failures import REPLY_KIND, Failures, FailureStore
from litellm_memory_hook.extraction.job_steps import (
    JobOutcome,
    batch_of,
    read_conversation,
    record_failure,
    shown_memories,
    write_under_way,
)
from litellm_memory_hook.extraction.parse import ExtractionResult, fact_hash, parse_extraction
from litellm_memory_hook.extraction.prompt import (
    RETRY_MESSAGE,
    ExtractionLine,
    build_extraction_messages,
)
from litellm_memory_hook.settings import AliasMemoryConfig, MemorySettings
from litellm_memory_hook.store.keys import ConversationKeys, MemoryKeys
from litellm_memory_hook.store.memory_sets import (
    ExtractionCommit,
    MemoryItem,
    MemorySetState,
    MemorySetStore,
)
from litellm_memory_hook.store.queue import ExtractionQueue

logger = logging.getLogger("litellm_memory_hook")

#: a job whose model call answered that the prompt is too long is tried again at once with
#: half the new lines (or no stored memories) this many times at most; a single line that does
#: not fit alone is skipped (the cursor moves past it, counted as ``lines_skipped``).
MAX_SPLITS = 10


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class _Job:
    """What one job read: the conversation, its memory set and its failures."""

    keys: ConversationKeys
    memory: MemoryKeys
    alias_name: str
    alias: AliasMemoryConfig
    cursor: int
    last_seq: int
    token: str
    summary: str
    turns: list[Turn]
    failures: Failures
    state: MemorySetState


@dataclass(frozen=True)
class _Answer:
    """The model's cleaned answer, the memories it was shown and the seq it covers."""

    result: ExtractionResult
    shown: list[MemoryItem]
    others: list[MemoryItem]
    through: int


class ExtractionJob:
    """Runs the extraction job of one claimed conversation (:meth:`run`); the worker holds the
    lease around it.

    Args:
        redis: an asyncio client (``decode_responses=False``).
        settings: the global settings (budgets, model timeout, memory bounds).
        model: how to call the model.
        alias_lookup: alias name -> its memory config (``None``: unknown or memory off).
        queue: the due set (its ``mem:stats`` counters).
        memsets: the memory sets (read, and the compare-and-set commit).
        failures: the conversations' failure records.
    """

    def __init__(
        self,
        redis: aioredis.Redis,
        settings: MemorySettings,
        model: ExtractionModel,
        *,
        alias_lookup: Callable[[str], AliasMemoryConfig | None],
        queue: ExtractionQueue,
        memsets: MemorySetStore,
        failures: FailureStore,
    ) -> None:
        self.redis = redis
        self.settings = settings
        self.model = model
        self.alias_lookup = alias_lookup
        self.queue = queue
        self.memsets = memsets
        self.failures = failures

    async def run(self, keys: ConversationKeys) -> JobOutcome:
        """Run the job of the conversation ``keys`` (its lease held by the caller).

        Raises:
            StoreError: Redis failed (the job runs again later).
            MemoryHookError: another failure of ours.
        """
        await self.queue.count(jobs_run=1)
        meta, turns, token = await read_conversation(self.redis, keys)
        if not meta or not meta.get("user") or not meta.get("mscope"):
            logger.warning("memory worker: %s has no stored user or scope; dropped", keys.ref)
            await self.queue.count(jobs_discarded=1)
            return JobOutcome("discarded")
        if write_under_way(meta, self.settings):
            # a batched write (a long seed or import) is under way: its turns have seqs
            # reserved but not all stored yet; extracting now could move the cursor past them
            await self.queue.count(jobs_deferred=1)
            return JobOutcome("deferred")
        alias_name = meta.get("alias", "")
        alias = self.alias_lookup(alias_name) if alias_name else None
        if alias is None or not alias.extraction or not self.settings.extraction.enabled:
            await self.queue.count(jobs_discarded=1)
            return JobOutcome("discarded")
        last_seq = int(meta.get("seq", "0") or 0)
        failures = await self.failures.read(keys)
        if failures.waiting_for_message(last_seq):
            await self.queue.count(jobs_waiting=1)
            return JobOutcome("waiting")
        if failures.given_up:
            failures = failures.new_round()  # a message came since it was given up
        if failures.next_ms > _now_ms():
            return JobOutcome("backoff", again_ms=failures.next_ms)
        memory = keys.user_keys.memory_set(meta["mscope"])
        job = _Job(
            keys=keys,
            memory=memory,
            alias_name=alias_name,
            alias=alias,
            cursor=int(meta.get("cursor", "0") or 0),
            last_seq=last_seq,
            token=token,
            summary=meta.get("summary", ""),
            turns=turns,
            failures=failures,
            state=await self.memsets.read(memory),
        )
        answer = await self._ask_fitting(job)
        if isinstance(answer, JobOutcome):
            return answer
        return await self._commit(job, answer)

    async def _ask_fitting(self, job: _Job) -> JobOutcome | _Answer:
        """Ask the model about the new lines; a context error halves the lines (then shows no
        stored memory) and asks again, up to :data:`MAX_SPLITS` times; a line that does not fit
        alone is skipped. Other failures are recorded (:func:`record_failure`)."""
        full = self.settings.extraction.max_messages_chars
        lines_chars = min(job.failures.fit or full, full)
        memory_chars = self.settings.extraction.max_memories_chars
        kind, error = "context", ExtractionError(f"no fit after {MAX_SPLITS} splits")
        for _ in range(MAX_SPLITS + 1):
            batch, through = batch_of(job.turns, lines_chars)
            if through <= job.cursor:
                await self.queue.count(jobs_nothing_new=1)
                return JobOutcome("nothing_new")
            if not batch:
                # nothing a person said (a tool step, cut replies): the cursor moves past it,
                # and the model is not asked (it would rewrite the memories from no lines)
                return await self._skip(job, through)
            shown, others = shown_memories(
                job.state, batch, memory_chars, max_items=self.settings.memories.max_items
            )
            try:
                result = await self._ask(job, [m.text for m in shown], batch)
            except ExtractionCallError as exc:
                kind, error = exc.kind, exc
                if exc.kind != "context":
                    break
                if len(batch) > 1:
                    lines_chars = max(1, sum(len(t.text) for t in batch) // 2)
                elif shown:
                    memory_chars = 0
                else:
                    return await self._too_long(job, through, batch)
                await self.queue.count(jobs_split=1)
                continue
            except ExtractionError as exc:  # a model that raised no call error of its own
                kind, error = "other", exc
                break
            if result is None:
                kind, error = REPLY_KIND, ExtractionError("no usable reply, twice")
                break
            fit = lines_chars if lines_chars < full else 0
            if job.failures != Failures(fit=fit):
                await self.failures.write(job.keys, Failures(fit=fit))
            return _Answer(result, shown, others, through)
        return await record_failure(
            self.failures,
            self.queue,
            self.settings,
            job.keys,
            job.failures,
            kind,
            job.last_seq,
            error,
        )

    async def _commit(self, job: _Job, answer: _Answer) -> JobOutcome:
        """Write the model's answer, bounded (:mod:`~litellm_memory_hook.extraction.changes`;
        compare-and-set; one re-read after a lost race)."""
        keys, memory, state, settings = job.keys, job.memory, job.state, self.settings
        result, shown, others = answer.result, answer.shown, answer.others
        more = job.last_seq > answer.through
        for attempt in range(2):
            current = result if attempt == 0 else filter_again(result, state)
            changes = await asyncio.to_thread(  # bounded CPU work, off the event loop
                guarded_changes, shown, others, current, old_summary=job.summary, settings=settings
            )
            plan, now = changes.plan, _now_ms()
            commit = ExtractionCommit(
                read_version=state.version,
                read_cursor=job.cursor,
                delete_ids=plan.delete_ids,
                add=plan.add,
                summary=changes.summary,
                cursor=answer.through,
                forget_token=job.token,
                history=history_entries(
                    plan,
                    conversation=keys.conversation,
                    from_seq=job.cursor + 1,
                    through_seq=answer.through,
                    now_ms=now,
                ),
                history_max=settings.memories.max_history_items,
            )
            if await self.memsets.commit_extraction(keys, memory, commit, now_ms=now):
                await self.queue.count(jobs_committed=1, **changes.counters())
                changes.log(keys.ref)
                return JobOutcome("committed", len(plan.add), len(plan.delete_ids), more)
            # Lost the compare-and-set: a user edited the memory set (or another job ran).
            fresh_meta, _, fresh_token = await read_conversation(self.redis, keys)
            if fresh_token != job.token or not fresh_meta:
                # forgotten while the model answered: nothing it drew from them is kept
                await self.queue.count(jobs_discarded=1)
                return JobOutcome("discarded")
            if int(fresh_meta.get("cursor", "0") or 0) != job.cursor:
                break  # another job already extracted these messages
            state = await self.memsets.read(memory)
            live = {m.id for m in state.memories}
            if any(m.id not in live and fact_hash(m.text) not in state.tombs for m in shown):
                # another job replaced what the model was shown: its reply is stale (it may
                # keep or reword a fact that is gone); the job runs again on the new set
                break
            shown = [m for m in shown if m.id in live]
            others = [m for m in state.memories if m.id not in {s.id for s in shown}]
        await self.queue.count(jobs_conflict=1)
        return JobOutcome("conflict")

    async def _too_long(self, job: _Job, through: int, batch: Sequence[Turn]) -> JobOutcome:
        """Skip a line that does not fit the model's context even alone (no stored memory
        shown): the cursor moves past it (counted as ``lines_skipped``, one warning line) and
        the rest of the backlog runs at once, starting from a one-line budget."""
        chars = sum(len(t.text) for t in batch)
        logger.warning(
            "memory worker: a %d-character line of %s does not fit the extraction model's "
            "context; skipped",
            chars,
            job.keys.ref,
        )
        await self.queue.count(lines_skipped=len(batch))
        await self.failures.write(job.keys, Failures(fit=max(1, chars)))
        return await self._skip(job, through)

    async def _skip(self, job: _Job, through: int) -> JobOutcome:
        """Move the cursor past turns with nothing to extract; memories and summary stay.
        Turns after ``through`` wait (the job runs again at once)."""
        commit = ExtractionCommit(
            read_version=job.state.version,
            read_cursor=job.cursor,
            delete_ids=(),
            add=(),
            summary=None,
            cursor=through,
            forget_token=job.token,
        )
        if await self.memsets.commit_extraction(job.keys, job.memory, commit, now_ms=_now_ms()):
            await self.queue.count(jobs_nothing_new=1)
            return JobOutcome("nothing_new", more=job.last_seq > through)
        await self.queue.count(jobs_conflict=1)
        return JobOutcome("conflict")

    async def _ask(
        self, job: _Job, memories: list[str], batch: Sequence[Turn]
    ) -> ExtractionResult | None:
        """Call the model (one retry on an unusable reply); ``None`` when the reply was
        unusable twice.

        Raises:
            ExtractionCallError: the call itself failed (its ``kind`` says how).
            ExtractionError: the model failed without saying how.
        """
        alias, state = job.alias, job.state
        pinned = [p.text for p in state.pinned]
        lines = [
            ExtractionLine(ts_ms=t.ts_ms, speaker=t.name or t.role, text=t.text) for t in batch
        ]
        messages = build_extraction_messages(
            memories=memories,
            pinned=pinned,
            summary=job.summary,
            lines=lines,
            timezone=self.settings.timezone,
            wording=alias.extraction_wording,
        )
        model = alias.extraction_model or job.alias_name
        settings = self.settings
        for attempt in range(2):
            reply = await self.model.complete(
                model, messages, json_mode=True, timeout_s=settings.extraction.timeout_s
            )
            await self.queue.count(
                tokens_prompt=reply.prompt_tokens, tokens_completion=reply.completion_tokens
            )
            try:
                # in a thread: parsing and cleaning a long reply is CPU work (bounded, linear)
                # that must not hold the proxy's event loop
                result = await asyncio.to_thread(
                    parse_extraction,
                    reply.text,
                    pinned=pinned,
                    tombstones=frozenset(state.tombs),
                    max_items=settings.memories.max_items,
                    max_item_chars=settings.memories.max_item_chars,
                    max_summary_chars=settings.summary.max_chars,
                )
            except ExtractionError as exc:
                logger.info("memory worker: unusable extraction reply (%s)", exc)
                if attempt == 0:
                    await self.queue.count(jobs_retried=1)
                    messages = [
                        *messages,
                        {"role": "assistant", "content": reply.text[:4000]},
                        {"role": "user", "content": RETRY_MESSAGE},
                    ]
                continue
            await self.queue.count(**{f"dropped_{rule}": n for rule, n in result.dropped.items()})
            return result
        return None
