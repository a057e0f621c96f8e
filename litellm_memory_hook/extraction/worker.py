"""The extraction worker: claims due conversations and runs their extraction jobs.

One job: read the conversation's meta, the messages since its cursor (at most
``extraction_lines_chars``; a longer backlog is done in several jobs) and its memory set; show
the model the summary, the pinned memories (fixed) and the stored memories that concern the new
messages (:func:`~litellm_memory_hook.core.selection.select_items`); parse and clean its JSON
off the event loop (:mod:`~litellm_memory_hook.extraction.parse`, one retry with "Reply with
valid JSON only."); then write the changes (:mod:`~litellm_memory_hook.extraction.changes`),
the summary and the cursor in one transaction, only if nothing changed them since the job read
them (:meth:`MemorySetStore.commit_extraction`). A conflict re-reads once, else the job runs
again. The changes are bounded: a memory is removed only by an explicit update or delete, at
most ``extraction_max_removed_share`` of the set per job, into the set's history; a summary
that reads as an instruction or loses most of the old one's facts is not taken.

Failures by kind (:mod:`~litellm_memory_hook.extraction.failures`): a prompt too long for the
model halves the new lines (then shows no stored memory) and asks again at once; a single line
that does not fit alone is skipped (the cursor moves past it). Any other failure (the call, or
a reply unusable twice) is tried again after an exponential backoff (longer for 401, 403, 404)
up to ``extraction_max_attempts`` times, then given up with one warning line until the
conversation's next message; meanwhile new messages run no job that calls the model.

Any number of workers (in-proxy tasks and ``litellm-memory worker`` processes) share one Redis:
a conversation's lease (:class:`ExtractionQueue`) lets one job run at a time (a killed worker
loses it after :func:`lease_s`); a periodic sweep (:mod:`~litellm_memory_hook.extraction.sweep`)
schedules conversations whose cursor lags; a running worker writes a heartbeat
(:mod:`litellm_memory_hook.store.workers`).

Counters (``HGETALL mem:stats``): ``jobs_<outcome>``, ``jobs_given_up``, ``jobs_split``,
``lines_skipped``, ``failures_<kind>``, ``dropped_<rule>``, ``tokens_prompt``,
``tokens_completion``, ``swept``, ``deletes_refused``, ``summaries_refused``,
``memories_removed``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import redis.asyncio as aioredis

from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.errors import (
    ConfigError,
    ExtractionError,
    InvalidIdError,
    MemoryHookError,
    StoreError,
)
from litellm_memory_hook.extraction.changes import (
    filter_again,
    guarded_changes,
    history_entries,
    plan_changes,
)
from litellm_memory_hook.extraction.client import ExtractionCallError, ExtractionModel
from litellm_memory_hook.extraction.failures import (
    REPLY_KIND,
    Failures,
    FailureStore,
)
from litellm_memory_hook.extraction.job_steps import (
    MAX_TURNS_PER_JOB,
    JobOutcome,
    batch_of,
    read_conversation,
    record_failure,
    shown_memories,
    write_under_way,
)
from litellm_memory_hook.extraction.parse import (
    ExtractionResult,
    fact_hash,
    parse_extraction,
)
from litellm_memory_hook.extraction.prompt import (
    RETRY_MESSAGE,
    ExtractionLine,
    build_extraction_messages,
)
from litellm_memory_hook.extraction.sweep import sweep
from litellm_memory_hook.periodic import cancel_swallowed, finish_even_if_cancelled
from litellm_memory_hook.settings import AliasMemoryConfig, MemorySettings
from litellm_memory_hook.store.client import reconnect
from litellm_memory_hook.store.errors import (
    RateLimitedLog,
    RedisFault,
    classify,
    explain,
    fault_key,
)
from litellm_memory_hook.store.keys import ConversationKeys, MemoryKeys
from litellm_memory_hook.store.memory_sets import (
    ExtractionCommit,
    MemoryItem,
    MemorySetState,
    MemorySetStore,
)
from litellm_memory_hook.store.queue import ExtractionQueue
from litellm_memory_hook.store.workers import KIND_STANDALONE, Heartbeat, WorkerBeat

__all__ = ["MAX_TURNS_PER_JOB", "ExtractionWorker", "JobOutcome", "lease_s", "plan_changes"]

logger = logging.getLogger("litellm_memory_hook")

#: a job that finds a batched write under way runs again this much later (ms).
DEFER_MS = 1000
#: a job that Redis failed in the middle of (a blip: the due entry was taken out after) runs
#: again this much later (ms).
STORE_RETRY_MS = 5_000
#: a job whose model call answered that the prompt is too long is tried again at once with
#: half the new lines (or no stored memories) this many times at most; a single line that does
#: not fit alone is skipped (the cursor moves past it, counted as ``lines_skipped``).
MAX_SPLITS = 10


def lease_s(settings: MemorySettings) -> float:
    """A job's lease (seconds): ``extraction_lease_s``, and at least the longest a job may take
    (two model calls of ``extraction_timeout_s``, plus 30 s): a lease that ends mid-job lets a
    second worker run the same job and pay the model twice."""
    return max(settings.extraction_lease_s, 2 * settings.extraction_timeout_s + 30)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _operation(exc: BaseException) -> str:
    """`` in <what>`` when a :class:`StoreError` says which call failed (``read mem:due``):
    Redis's NOPERM for a key does not name the key."""
    if not isinstance(exc, StoreError) or exc.__cause__ is None:
        return ""
    what = str(exc).split(": ", 1)[0]
    return f" in {what[:120]}" if what and what != str(exc) else ""


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


class ExtractionWorker:
    """Runs extraction jobs from the due set.

    Args:
        redis: an asyncio client (``decode_responses=False``).
        settings: the global settings (budgets, lease, poll and sweep intervals).
        model: how to call the model (:class:`RouterModel` in-proxy, :class:`OpenAIModel`).
        alias_lookup: alias name -> its memory config (``None``: unknown or memory off).
        queue: the due set; default: one on ``redis`` with ``settings.key_prefix``.
        worker_id: the lease owner's name (default: host, pid and random hex).
        kind: what runs it, written in its heartbeat: ``proxy`` (the in-proxy task) or
            ``standalone`` (a ``litellm-memory worker`` process).

    While :meth:`run_forever` runs, a task of its own writes the worker's heartbeat every
    ``extraction_heartbeat_s`` seconds (:class:`~litellm_memory_hook.store.workers.Heartbeat`);
    the loop's end deletes it.
    """

    def __init__(
        self,
        redis: aioredis.Redis,
        settings: MemorySettings,
        model: ExtractionModel,
        *,
        alias_lookup: Callable[[str], AliasMemoryConfig | None],
        queue: ExtractionQueue | None = None,
        worker_id: str | None = None,
        kind: str = KIND_STANDALONE,
    ) -> None:
        self.redis = redis
        self.settings = settings
        self.model = model
        self.alias_lookup = alias_lookup
        self.queue = queue or ExtractionQueue(redis, settings.key_prefix)
        self.memsets = MemorySetStore(redis, ttl_s=settings.retention_s)
        self.failures = FailureStore(redis)
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.kind = kind
        self.started_ms = _now_ms()
        #: jobs this worker finished (any outcome but failed) and jobs that failed
        self.jobs_done = 0
        self.jobs_failed = 0
        self.heartbeat = Heartbeat(
            redis,
            settings.key_prefix,
            self._beat,
            settings.extraction_heartbeat_s,
            settings.redis_refusal_log_s,
        )
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._last_sweep = 0.0
        #: failed polls and jobs by the kind of their Redis failure (this process)
        self.redis_faults: Counter[RedisFault] = Counter()
        #: refusals said once per ``redis_refusal_log_s`` per cause, with the count
        self._refusals = RateLimitedLog(settings.redis_refusal_log_s)

    def _beat(self, now_ms: int) -> WorkerBeat:
        """This worker's heartbeat at ``now_ms`` (epoch ms)."""
        return WorkerBeat(
            id=self.worker_id,
            kind=self.kind,
            host=socket.gethostname(),
            pid=os.getpid(),
            started_ms=self.started_ms,
            beat_ms=now_ms,
            interval_ms=int(self.settings.extraction_heartbeat_s * 1000),
            jobs_done=self.jobs_done,
            jobs_failed=self.jobs_failed,
        )

    # -- running ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the polling loop as a task on the running event loop (kept referenced)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self.run_forever())

    def wake(self) -> None:
        """Look at the due set now instead of at the next poll."""
        self._wake.set()

    async def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the loop after the current job (cancelled after ``timeout_s`` seconds) and
        delete the worker's heartbeat."""
        self._stopping = True
        self._wake.set()
        task, self._task = self._task, None
        if task is None:
            return
        # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a cancellation that
        # comes as the awaited task ends (gh-86296); here and in every wait of the package
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await task  # cancelled when the time is up

    async def run_forever(self) -> None:
        """Poll the due set until :meth:`stop`, beating meanwhile (the heartbeat is deleted
        when the loop ends, also when it is cancelled); errors are logged, never raised.

        A failed poll is said by its kind (:func:`~litellm_memory_hook.store.errors.classify`):
        while Redis is unreachable (or a failover's READONLY) one line is logged when polling
        starts failing and one when it works again (a poll every ``extraction_poll_s`` would
        log a traceback each time); a refusal (NOPERM, NOSCRIPT, OOM ...) is said with what to
        change, once per ``redis_refusal_log_s`` for as long as it lasts (with how many polls
        it refused meanwhile), and counted in :attr:`redis_faults`. Polling goes on at its
        usual pace: it works again as soon as the ACL or the memory limit is fixed."""
        self.heartbeat.start()
        try:
            await self._poll()
        finally:
            await finish_even_if_cancelled(self.heartbeat.stop())

    async def _poll(self) -> None:
        failing: RedisFault | None = None
        while not self._stopping:
            try:
                await self.run_due()
                if self.settings.extraction_sweep_s and (
                    time.monotonic() - self._last_sweep >= self.settings.extraction_sweep_s
                ):
                    self._last_sweep = time.monotonic()
                    await self.sweep()
                if failing is not None:
                    if failing.said:
                        logger.warning(
                            "memory worker: a poll worked again after Redis refused (%s)",
                            failing.value,
                        )
                    else:
                        logger.warning("memory worker: Redis answers again; polling resumed")
                    failing = None
            except Exception as exc:
                kind = classify(exc)
                if kind is RedisFault.ERROR:  # a bug of ours, not Redis's
                    logger.exception("memory worker: polling failed")
                else:
                    await self._poll_failed(kind, exc, failing)
                    failing = kind
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.extraction_poll_s):
                    await self._wake.wait()
            if cancel_swallowed():
                raise asyncio.CancelledError

    async def _poll_failed(
        self, kind: RedisFault, exc: BaseException, failing: RedisFault | None
    ) -> None:
        """Say a failed poll by its kind: an outage once per outage; READONLY once, and the
        pooled connections are dropped so the next poll reaches the new primary; a refusal
        once per period (rate-limited, with the count), whatever came before it."""
        self.redis_faults[kind] += 1
        if kind is RedisFault.UNREACHABLE:
            if failing is not RedisFault.UNREACHABLE:
                logger.warning("memory worker: polling failed, Redis unreachable: %s", exc)
            return
        if kind is RedisFault.READONLY:
            if failing is not RedisFault.READONLY:
                logger.warning(
                    "memory worker: polling failed: %s; reconnecting",
                    explain(kind, exc, prefix=self.settings.key_prefix),
                )
            await reconnect(self.redis)
            return
        self._refusals.emit(
            f"poll:{fault_key(kind, exc)}",
            logging.ERROR,
            f"memory worker: polling refused ({kind.value}{_operation(exc)}): "
            f"{explain(kind, exc, prefix=self.settings.key_prefix)}; extraction waits until "
            "it is fixed (polling goes on)",
        )

    async def run_due(self, limit: int = 20) -> list[JobOutcome]:
        """Run the jobs that are due now (at most ``limit``), one after another."""
        outcomes = []
        for ref in await self.queue.due_refs(_now_ms(), limit):
            if self._stopping:
                break
            outcomes.append(await self.run_job(ref))
        return outcomes

    async def run_job(self, ref: str) -> JobOutcome:
        """Claim one conversation and run its job; never raises for a bad conversation."""
        prefix = self.settings.key_prefix
        try:
            keys = ConversationKeys.from_ref(prefix, ref)
        except InvalidIdError:
            logger.warning("memory worker: dropping a bad due entry %r", ref)
            await self.queue.drop(ref)
            await self.queue.count(jobs_discarded=1)
            return JobOutcome("discarded")
        lease_ms = int(lease_s(self.settings) * 1000)
        claim = await self.queue.claim(keys, self.worker_id, now_ms=_now_ms(), lease_ms=lease_ms)
        if claim is None:
            return JobOutcome("busy")
        outcome = JobOutcome("failed")
        try:
            outcome = await self._job(keys)
        except asyncio.CancelledError:
            # Stopped mid-job (shutdown): the job stays due and runs again, at once.
            await asyncio.shield(self.queue.finish(keys, self.worker_id, claim, again_ms=_now_ms()))
            raise
        except StoreError as exc:
            self._job_store_failed(ref, exc)
            outcome = JobOutcome("failed", store_failed=True)
        except MemoryHookError as exc:
            logger.warning("memory worker: job %s failed: %s", ref, exc)
        except Exception:
            logger.exception("memory worker: job %s failed", ref)
        if outcome.status == "failed":
            self.jobs_failed += 1
            await self.queue.count(jobs_failed=1)
        else:
            self.jobs_done += 1
        again = _now_ms() if outcome.more else None
        if outcome.status == "conflict":
            again = _now_ms() + lease_ms // 4
        if outcome.status == "deferred":
            again = _now_ms() + DEFER_MS
        if outcome.again_ms is not None:
            again = outcome.again_ms
        if outcome.store_failed:
            again = _now_ms() + STORE_RETRY_MS
        await self.queue.finish(keys, self.worker_id, claim, again_ms=again)
        return outcome

    def _job_store_failed(self, ref: str, exc: StoreError) -> None:
        """A job Redis failed (it runs again later): an outage or a failover as before, one
        line per job; a refusal with what to change, once per period per cause (every due job
        would otherwise log the same NOPERM every few seconds)."""
        kind = classify(exc)
        self.redis_faults[kind] += 1
        if not kind.said:
            logger.warning("memory worker: job %s failed, runs again: %s", ref, exc)
            return
        self._refusals.emit(
            f"job:{fault_key(kind, exc)}",
            logging.ERROR,
            f"memory worker: job {ref} refused ({kind.value}{_operation(exc)}), runs again "
            "later: "
            f"{explain(kind, exc, prefix=self.settings.key_prefix)}",
        )

    # -- one job ---------------------------------------------------------------------------------

    async def _job(self, keys: ConversationKeys) -> JobOutcome:
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
        if alias is None or not alias.extraction or not self.settings.extraction_enabled:
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
        full = self.settings.extraction_lines_chars
        lines_chars = min(job.failures.fit or full, full)
        memory_chars = self.settings.extraction_memory_chars
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
                job.state, batch, memory_chars, max_items=self.settings.max_memories
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
                history_max=settings.memory_history_max,
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

    def _extracts(self, alias_name: bytes | str | None) -> bool:
        """Whether conversations of this alias (as meta stores its name) get extraction jobs."""
        if not alias_name:
            return False
        name = (
            alias_name.decode("utf-8", "replace") if isinstance(alias_name, bytes) else alias_name
        )
        try:
            alias = self.alias_lookup(name)
        except ConfigError as exc:  # one alias's bad block must not stop the sweep of the others
            logger.warning("memory worker: sweep skips alias %r: %s", name, exc)
            return False
        return alias is not None and alias.extraction

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
                model, messages, json_mode=True, timeout_s=settings.extraction_timeout_s
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
                    max_items=settings.max_memories,
                    max_item_chars=settings.memory_item_chars,
                    max_summary_chars=settings.summary_chars,
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

    # -- sweep -----------------------------------------------------------------------------------

    async def sweep(self, batch: int = 500) -> int:
        """Schedule conversations whose cursor lags behind their last message
        (:func:`~litellm_memory_hook.extraction.sweep.sweep`). Returns how many."""
        return await sweep(
            self.redis, self.settings, self.queue, self.worker_id, self._extracts, batch=batch
        )
