"""The extraction worker: claims due conversations and runs their extraction jobs.

The worker is the loop around the jobs: it polls the due set every ``extraction.poll_s``
seconds (or when woken), claims a conversation's lease, runs its job
(:class:`~litellm_memory_hook.extraction.job.ExtractionJob`: what the model is shown, what is
written back, failures by kind) and says when it runs again. A failed poll is said by the kind
of its Redis failure, once per outage or once per period.

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
from collections.abc import Callable

import redis.asyncio as aioredis

from litellm_memory_hook.errors import ConfigError, InvalidIdError, MemoryHookError, StoreError
from litellm_memory_hook.extraction.changes import plan_changes
from litellm_memory_hook.extraction.client import ExtractionModel
from litellm_memory_hook.extraction.failures import FailureStore
from litellm_memory_hook.extraction.job import ExtractionJob
from litellm_memory_hook.extraction.job_steps import MAX_TURNS_PER_JOB, JobOutcome
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
from litellm_memory_hook.store.keys import ConversationKeys
from litellm_memory_hook.store.memory_sets import MemorySetStore
from litellm_memory_hook.store.queue import ExtractionQueue
from litellm_memory_hook.store.workers import KIND_STANDALONE, Heartbeat, WorkerBeat

__all__ = ["MAX_TURNS_PER_JOB", "ExtractionWorker", "JobOutcome", "lease_s", "plan_changes"]

logger = logging.getLogger("litellm_memory_hook")

#: a job that finds a batched write under way runs again this much later (ms).
DEFER_MS = 1000
#: a job that Redis failed in the middle of (a blip: the due entry was taken out after) runs
#: again this much later (ms).
STORE_RETRY_MS = 5_000


def lease_s(settings: MemorySettings) -> float:
    """A job's lease (seconds): ``extraction.lease_s``, and at least the longest a job may take
    (two model calls of ``extraction.timeout_s``, plus 30 s): a lease that ends mid-job lets a
    second worker run the same job and pay the model twice."""
    return max(settings.extraction.lease_s, 2 * settings.extraction.timeout_s + 30)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _operation(exc: BaseException) -> str:
    """`` in <what>`` when a :class:`StoreError` says which call failed (``read mem:due``):
    Redis's NOPERM for a key does not name the key."""
    if not isinstance(exc, StoreError) or exc.__cause__ is None:
        return ""
    what = str(exc).split(": ", 1)[0]
    return f" in {what[:120]}" if what and what != str(exc) else ""


class ExtractionWorker:
    """Runs extraction jobs from the due set.

    Args:
        redis: an asyncio client (``decode_responses=False``).
        settings: the global settings (budgets, lease, poll and sweep intervals).
        model: how to call the model (:class:`RouterModel` in-proxy, :class:`OpenAIModel`).
        alias_lookup: alias name -> its memory config (``None``: unknown or memory off).
        queue: the due set; default: one on ``redis`` with ``settings.storage.key_prefix``.
        worker_id: the lease owner's name (default: host, pid and random hex).
        kind: what runs it, written in its heartbeat: ``proxy`` (the in-proxy task) or
            ``standalone`` (a ``litellm-memory worker`` process).

    While :meth:`run_forever` runs, a task of its own writes the worker's heartbeat every
    ``extraction.heartbeat_s`` seconds (:class:`~litellm_memory_hook.store.workers.Heartbeat`);
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
        self.queue = queue or ExtractionQueue(redis, settings.storage.key_prefix)
        self.memsets = MemorySetStore(redis, ttl_s=settings.storage.retention_s)
        self.failures = FailureStore(redis)
        self._job = ExtractionJob(
            redis,
            settings,
            model,
            alias_lookup=alias_lookup,
            queue=self.queue,
            memsets=self.memsets,
            failures=self.failures,
        )
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.kind = kind
        self.started_ms = _now_ms()
        #: jobs this worker finished (any outcome but failed) and jobs that failed
        self.jobs_done = 0
        self.jobs_failed = 0
        self.heartbeat = Heartbeat(
            redis,
            settings.storage.key_prefix,
            self._beat,
            settings.extraction.heartbeat_s,
            settings.redis.refusal_log_s,
        )
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._last_sweep = 0.0
        #: failed polls and jobs by the kind of their Redis failure (this process)
        self.redis_faults: Counter[RedisFault] = Counter()
        #: refusals said once per ``redis.refusal_log_s`` per cause, with the count
        self._refusals = RateLimitedLog(settings.redis.refusal_log_s)

    def _beat(self, now_ms: int) -> WorkerBeat:
        """This worker's heartbeat at ``now_ms`` (epoch ms)."""
        return WorkerBeat(
            id=self.worker_id,
            kind=self.kind,
            host=socket.gethostname(),
            pid=os.getpid(),
            started_ms=self.started_ms,
            beat_ms=now_ms,
            interval_ms=int(self.settings.extraction.heartbeat_s * 1000),
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
        starts failing and one when it works again (a poll every ``extraction.poll_s`` would
        log a traceback each time); a refusal (NOPERM, NOSCRIPT, OOM ...) is said with what to
        change, once per ``redis.refusal_log_s`` for as long as it lasts (with how many polls
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
                if self.settings.extraction.sweep_s and (
                    time.monotonic() - self._last_sweep >= self.settings.extraction.sweep_s
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
                async with asyncio.timeout(self.settings.extraction.poll_s):
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
                    explain(kind, exc, prefix=self.settings.storage.key_prefix),
                )
            await reconnect(self.redis)
            return
        self._refusals.emit(
            f"poll:{fault_key(kind, exc)}",
            logging.ERROR,
            f"memory worker: polling refused ({kind.value}{_operation(exc)}): "
            f"{explain(kind, exc, prefix=self.settings.storage.key_prefix)}; extraction waits "
            "until it is fixed (polling goes on)",
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
        prefix = self.settings.storage.key_prefix
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
            outcome = await self._job.run(keys)
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
            f"{explain(kind, exc, prefix=self.settings.storage.key_prefix)}",
        )

    # -- sweep -----------------------------------------------------------------------------------

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

    async def sweep(self, batch: int = 500) -> int:
        """Schedule conversations whose cursor lags behind their last message
        (:func:`~litellm_memory_hook.extraction.sweep.sweep`). Returns how many."""
        return await sweep(
            self.redis, self.settings, self.queue, self.worker_id, self._extracts, batch=batch
        )
