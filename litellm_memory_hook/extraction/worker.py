"""The extraction worker: claims due conversations and runs their extraction jobs.

One job (DESIGN.md section 7, issue 7): read the conversation's meta, the messages since its
cursor (at most ``extraction_lines_chars``; a longer backlog is done in several jobs) and its
memory set; show the model the summary, the pinned memories (fixed) and the stored memories that
concern the new messages (:func:`litellm_memory_hook.core.selection.select_items`); parse and
clean its JSON (:mod:`litellm_memory_hook.extraction.parse`, one retry with "Reply with valid JSON
only."); then replace the shown memories, the summary and the cursor in one transaction, only if
nothing changed them since the job read them (:meth:`MemorySetStore.commit_extraction`). A
conflict re-reads once (the user's deletions and pins are applied to the model's list again) and
otherwise gives up; the conversation stays due and runs again.

Any number of workers (in-proxy tasks and ``litellm-memory worker`` processes) share one Redis:
a conversation's lease (:class:`ExtractionQueue`) lets one job run at a time, and a worker killed
mid-job loses its lease after ``extraction_lease_s`` (at least two model calls' timeouts plus
30 s: :func:`lease_s`). A periodic sweep (SCAN, never KEYS)
schedules conversations whose cursor lags behind their last message (a schedule lost in an
outage). A running worker writes a heartbeat (``mem:{workers}:w:<worker id>``, every
``extraction_heartbeat_s``, expiring after three; :mod:`litellm_memory_hook.store.workers`), so
the metrics, ``litellm-memory doctor`` and ``stats`` tell whether any worker is alive.

Counters (``HGETALL mem:stats``): ``jobs_run``, ``jobs_committed``, ``jobs_failed``,
``jobs_retried``, ``jobs_discarded``, ``jobs_conflict``, ``jobs_nothing_new``, ``jobs_deferred``,
``dropped_<rule>`` per cleaning rule, ``tokens_prompt``, ``tokens_completion``, ``swept``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.core.selection import select_items
from litellm_memory_hook.errors import (
    ConfigError,
    ExtractionError,
    InvalidIdError,
    MemoryHookError,
    StoreError,
)
from litellm_memory_hook.extraction.client import ExtractionModel
from litellm_memory_hook.extraction.parse import (
    ExtractionResult,
    fact_hash,
    fact_key,
    parse_extraction,
    repeats_pinned,
)
from litellm_memory_hook.extraction.prompt import (
    RETRY_MESSAGE,
    ExtractionLine,
    build_extraction_messages,
)
from litellm_memory_hook.periodic import cancel_swallowed, finish_even_if_cancelled
from litellm_memory_hook.settings import AliasMemoryConfig, MemorySettings
from litellm_memory_hook.store.forgets import token_of
from litellm_memory_hook.store.keys import ConversationKeys, MemoryKeys, sweep_key
from litellm_memory_hook.store.memory_sets import (
    ExtractionCommit,
    MemoryItem,
    MemorySetState,
    MemorySetStore,
)
from litellm_memory_hook.store.queue import ExtractionQueue
from litellm_memory_hook.store.redis_store import write_progress_ms
from litellm_memory_hook.store.workers import KIND_STANDALONE, Heartbeat, WorkerBeat

logger = logging.getLogger("litellm_memory_hook")

#: a job that finds a batched write under way runs again this much later (ms).
DEFER_MS = 1000
#: a batched write whose last batch is older than ``write_buffer_max_age_s`` plus this (s) was
#: abandoned (the outage buffer dropped it, or its proxy stopped): it never resumes, and the
#: job no longer waits for it.
ABANDONED_WRITE_MARGIN_S = 60
#: a job that Redis failed in the middle of (a blip: the due entry was taken out after) runs
#: again this much later (ms).
STORE_RETRY_MS = 5_000
#: a job whose model call failed (connection refused, timeout, an error answer: the model may
#: answer later) runs again this much later (ms); an unusable reply waits for the next message.
CALL_RETRY_MS = 60_000

#: most stored turns one job reads past the cursor (the character budget usually ends it first).
MAX_TURNS_PER_JOB = 400


def lease_s(settings: MemorySettings) -> float:
    """A job's lease (seconds): ``extraction_lease_s``, and at least the longest a job may take
    (two model calls of ``extraction_timeout_s``, plus 30 s): a lease that ends mid-job lets a
    second worker run the same job and pay the model twice."""
    return max(settings.extraction_lease_s, 2 * settings.extraction_timeout_s + 30)


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class JobOutcome:
    """What one job did: ``status`` is ``committed``, ``nothing_new``, ``busy`` (another worker
    holds the lease), ``deferred`` (a batched write is under way: runs again in ``DEFER_MS``),
    ``failed`` (the model's reply was unusable twice, or the call failed: ``call_failed``),
    ``conflict`` (lost the compare-and-set twice) or ``discarded`` (expired conversation, no
    user, unknown alias or extraction off)."""

    status: str
    added: int = 0
    deleted: int = 0
    more: bool = False
    #: a failed job whose model call failed: it runs again in ``CALL_RETRY_MS``
    call_failed: bool = False
    #: a failed job that Redis failed: it runs again in ``STORE_RETRY_MS``
    store_failed: bool = False


def plan_commit(
    shown: Sequence[MemoryItem],
    others: Sequence[MemoryItem],
    result_memories: Sequence[str],
    *,
    max_memories: int,
) -> tuple[list[str], list[str]]:
    """The ids to delete and the texts to add so that the shown memories become the model's list.

    Rules: a returned text equal (by :func:`fact_key`) to a shown memory keeps that memory (its
    id and creation time; an unchanged fact is a no-op, case C18); a shown memory the model did
    not return is deleted (changed or merged); a returned text equal to a memory that was not
    shown is not added again; the rest is added. Past ``max_memories`` the oldest memories are
    deleted.

    Returns:
        (ids to delete, texts to add), both in stored / reply order.
    """
    shown_by_key: dict[str, MemoryItem] = {}
    for item in shown:
        shown_by_key.setdefault(fact_key(item.text), item)
    other_keys = {fact_key(item.text) for item in others}
    kept: set[str] = set()
    add: list[str] = []
    for text in result_memories:
        key = fact_key(text)
        if key in shown_by_key:
            kept.add(shown_by_key[key].id)
        elif key not in other_keys:
            add.append(text)
            other_keys.add(key)
    delete = [item.id for item in shown if item.id not in kept]
    remaining = sorted([i.id for i in shown if i.id in kept] + [i.id for i in others])
    excess = len(remaining) + len(add) - max_memories
    if excess > 0:
        delete.extend(remaining[:excess])
        if excess > len(remaining):
            add = add[: max(0, max_memories)]
    return delete, add


def _filter_again(result: ExtractionResult, state: MemorySetState) -> list[str]:
    """The model's memories without those the user pinned (by the rule of
    :func:`~litellm_memory_hook.extraction.parse.repeats_pinned`, as the parser drops them) or
    deleted since the job read."""
    pinned = frozenset(k for k in (fact_key(p.text) for p in state.pinned) if k)
    return [
        m
        for m in result.memories
        if fact_hash(m) not in state.tombs and not repeats_pinned(fact_key(m), pinned)
    ]


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
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.kind = kind
        self.started_ms = _now_ms()
        #: jobs this worker finished (any outcome but failed) and jobs that failed
        self.jobs_done = 0
        self.jobs_failed = 0
        self.heartbeat = Heartbeat(
            redis, settings.key_prefix, self._beat, settings.extraction_heartbeat_s
        )
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._last_sweep = 0.0

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
        when the loop ends, also when it is cancelled); errors are logged, never raised. While
        Redis is unreachable one line is logged when polling starts failing and one when it
        works again (a poll every ``extraction_poll_s`` would log a traceback each time)."""
        self.heartbeat.start()
        try:
            await self._poll()
        finally:
            await finish_even_if_cancelled(self.heartbeat.stop())

    async def _poll(self) -> None:
        redis_down = False
        while not self._stopping:
            try:
                await self.run_due()
                if self.settings.extraction_sweep_s and (
                    time.monotonic() - self._last_sweep >= self.settings.extraction_sweep_s
                ):
                    self._last_sweep = time.monotonic()
                    await self.sweep()
                if redis_down:
                    redis_down = False
                    logger.warning("memory worker: Redis answers again; polling resumed")
            except (StoreError, RedisError) as exc:
                if not redis_down:
                    redis_down = True
                    logger.warning("memory worker: polling failed, Redis unreachable: %s", exc)
            except Exception:
                logger.exception("memory worker: polling failed")
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.extraction_poll_s):
                    await self._wake.wait()
            if cancel_swallowed():
                raise asyncio.CancelledError

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
            logger.warning("memory worker: job %s failed, runs again: %s", ref, exc)
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
        if outcome.call_failed:
            again = _now_ms() + CALL_RETRY_MS
        if outcome.store_failed:
            again = _now_ms() + STORE_RETRY_MS
        await self.queue.finish(keys, self.worker_id, claim, again_ms=again)
        return outcome

    # -- one job ---------------------------------------------------------------------------------

    async def _read(self, keys: ConversationKeys) -> tuple[dict[str, str], list[Turn], str]:
        """The conversation's meta, its turns after the cursor (at most ``MAX_TURNS_PER_JOB``)
        and its forget token (:mod:`litellm_memory_hook.store.forgets`), which the commit is
        checked against.

        Raises:
            StoreError: Redis failed.
        """
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
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
            members = await self.redis.zrangebyscore(
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

    def _batch(self, turns: Sequence[Turn]) -> tuple[list[Turn], int]:
        """The turns of this job within the character budget, and the seq extracted through."""
        budget = self.settings.extraction_lines_chars
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

    async def _job(self, keys: ConversationKeys) -> JobOutcome:
        await self.queue.count(jobs_run=1)
        meta, turns, token = await self._read(keys)
        if not meta or not meta.get("user") or not meta.get("mscope"):
            logger.warning("memory worker: %s has no stored user or scope; dropped", keys.ref)
            await self.queue.count(jobs_discarded=1)
            return JobOutcome("discarded")
        if self._write_under_way(meta):
            # a batched write (a long seed or import) is under way: its turns have seqs
            # reserved but not all stored yet; extracting now could move the cursor past them
            await self.queue.count(jobs_deferred=1)
            return JobOutcome("deferred")
        alias_name = meta.get("alias", "")
        alias = self.alias_lookup(alias_name) if alias_name else None
        if alias is None or not alias.extraction or not self.settings.extraction_enabled:
            await self.queue.count(jobs_discarded=1)
            return JobOutcome("discarded")
        cursor = int(meta.get("cursor", "0") or 0)
        last_seq = int(meta.get("seq", "0") or 0)
        batch, through = self._batch(turns)
        if through <= cursor:
            await self.queue.count(jobs_nothing_new=1)
            return JobOutcome("nothing_new")
        memory = keys.user_keys.memory_set(meta["mscope"])
        state = await self.memsets.read(memory)
        if not batch:
            # nothing a person said (a tool step, cut replies): the cursor moves past it, and
            # the model is not asked (it would rewrite the memories from no lines)
            return await self._skip(
                keys, memory, state.version, cursor, through, token, more=last_seq > through
            )
        lines_text = " ".join(t.text for t in batch if t.role == "user")
        shown_texts = set(
            select_items(
                [m.text for m in state.memories],
                lines_text,
                self.settings.extraction_memory_chars,
                max_items=self.settings.max_memories,
            )
        )
        shown = [m for m in state.memories if m.text.strip() in shown_texts]
        others = [m for m in state.memories if m.text.strip() not in shown_texts]
        summary = meta.get("summary", "")
        try:
            result = await self._ask(
                alias_name,
                alias,
                [m.text for m in shown],
                [p.text for p in state.pinned],
                summary,
                batch,
                state,
                speaker_names=(meta.get("user", "user"),),
            )
        except ExtractionError as exc:
            logger.warning("memory worker: extraction call failed: %s", exc)
            return JobOutcome("failed", call_failed=True)
        if result is None:
            return JobOutcome("failed")
        more = last_seq > through
        for attempt in range(2):
            memories = list(result.memories) if attempt == 0 else _filter_again(result, state)
            delete, add = plan_commit(
                shown, others, memories, max_memories=self.settings.max_memories
            )
            commit = ExtractionCommit(
                read_version=state.version,
                read_cursor=cursor,
                delete_ids=delete,
                add=add,
                summary=result.summary,
                cursor=through,
                forget_token=token,
            )
            if await self.memsets.commit_extraction(keys, memory, commit, now_ms=_now_ms()):
                await self.queue.count(jobs_committed=1)
                return JobOutcome("committed", len(add), len(delete), more)
            # Lost the compare-and-set: a user edited the memory set (or another job ran).
            fresh_meta, _, fresh_token = await self._read(keys)
            if fresh_token != token or not fresh_meta:
                # forgotten while the model answered: nothing it drew from them is kept
                await self.queue.count(jobs_discarded=1)
                return JobOutcome("discarded")
            if int(fresh_meta.get("cursor", "0") or 0) != cursor:
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

    def _write_under_way(self, meta: dict[str, str]) -> bool:
        """Whether a batched write is under way in the conversation: one whose last batch is
        younger than ``write_buffer_max_age_s`` plus :data:`ABANDONED_WRITE_MARGIN_S`."""
        limit_ms = (self.settings.write_buffer_max_age_s + ABANDONED_WRITE_MARGIN_S) * 1000
        now = _now_ms()
        return any(now - at < limit_ms for at in write_progress_ms(meta))

    async def _skip(
        self,
        keys: ConversationKeys,
        memory: MemoryKeys,
        version: int,
        cursor: int,
        through: int,
        token: str,
        *,
        more: bool,
    ) -> JobOutcome:
        """Move the cursor past turns with nothing to extract; memories and summary stay.
        ``more``: turns after ``through`` wait (the job runs again at once)."""
        commit = ExtractionCommit(
            read_version=version,
            read_cursor=cursor,
            delete_ids=(),
            add=(),
            summary=None,
            cursor=through,
            forget_token=token,
        )
        if await self.memsets.commit_extraction(keys, memory, commit, now_ms=_now_ms()):
            await self.queue.count(jobs_nothing_new=1)
            return JobOutcome("nothing_new", more=more)
        await self.queue.count(jobs_conflict=1)
        return JobOutcome("conflict")

    async def _ask(
        self,
        alias_name: str,
        alias: AliasMemoryConfig,
        memories: list[str],
        pinned: list[str],
        summary: str,
        batch: Sequence[Turn],
        state: MemorySetState,
        speaker_names: Sequence[str],
    ) -> ExtractionResult | None:
        """Call the model (one retry on an unusable reply); ``None`` when the reply was
        unusable twice.

        Raises:
            ExtractionError: the call itself failed.
        """
        del speaker_names
        lines = [
            ExtractionLine(ts_ms=t.ts_ms, speaker=t.name or t.role, text=t.text) for t in batch
        ]
        messages = build_extraction_messages(
            memories=memories,
            pinned=pinned,
            summary=summary,
            lines=lines,
            timezone=self.settings.timezone,
            wording=alias.extraction_wording,
        )
        model = alias.extraction_model or alias_name
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
        """Schedule conversations whose cursor lags behind their last message and that are not
        due; one worker at a time (a lease on ``mem:sweep``). Returns how many were scheduled.
        Conversations of an alias without extraction (unknown, or ``extraction: false``) are
        left alone, and nothing is scheduled while ``extraction_enabled`` is false.

        Uses SCAN over ``<prefix>:{*}:c:*:meta`` (every node of a Cluster), never KEYS.
        """
        prefix = self.settings.key_prefix
        if not self.settings.extraction_enabled:
            return 0
        lease_s = max(1, int(self.settings.extraction_sweep_s or 60))
        try:
            if not await self.redis.set(sweep_key(prefix), self.worker_id, nx=True, ex=lease_s):
                return 0
            scheduled = 0
            quiet_ms = int(self.settings.extraction_quiet_s * 1000)
            async for key in self.redis.scan_iter(match=f"{prefix}:{{*}}:c:*:meta", count=batch):
                name = key.decode() if isinstance(key, bytes) else str(key)
                keys = _keys_from_meta_key(prefix, name)
                if keys is None:
                    continue
                seq, cursor, alias = await self.redis.hmget(name, ["seq", "cursor", "alias"])
                if not self._extracts(alias):
                    continue  # its job would be discarded, at every sweep
                if int(seq or 0) > int(cursor or 0) and await self.queue.due_time(keys) is None:
                    await self.redis.zadd(self.queue.due, {keys.ref: _now_ms() + quiet_ms}, nx=True)
                    scheduled += 1
        except RedisError as exc:
            raise StoreError(f"sweep: {exc}") from exc
        await self.queue.count(swept=scheduled)
        return scheduled


def _keys_from_meta_key(prefix: str, name: str) -> ConversationKeys | None:
    """The conversation of a ``<prefix>:{t:u}:c:<c>:meta`` key name, or ``None``."""
    head = f"{prefix}:{{"
    if not name.startswith(head) or not name.endswith(":meta"):
        return None
    tag, _, rest = name[len(head) :].partition("}:c:")
    conversation = rest[: -len(":meta")]
    tenant, _, user = tag.partition(":")
    if not (tenant and user and conversation) or ":" in user or ":" in conversation:
        return None
    return ConversationKeys(prefix, tenant, user, conversation)
