"""The memory engine: one per hook, protocol-neutral. Before the model call it rebuilds a turn
(:meth:`MemoryEngine.rebuild`: size the budgets to the model's window, read the conversation or
go without Redis, rebuild, record); after the reply it writes the turn and schedules its
extraction (:meth:`MemoryEngine.commit`).

The parts: :mod:`.rebuild` (read state, plan, window, layers, assemble), :mod:`.record` (the
signed record that crosses the model call), :mod:`.held_turns` (the turns it names),
:mod:`.commit` (the write, the schedule, the outage buffer), :mod:`.breakers` (when Redis is
skipped). Every count goes into the hook's one ``counters`` object, which the metrics read.
The flow and the failure policy: docs/design.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.engine.breakers import Health
from litellm_memory_hook.engine.commit import TurnWriter
from litellm_memory_hook.engine.held_turns import HeldTurns, sent_now
from litellm_memory_hook.engine.layers import EpochUpdate
from litellm_memory_hook.engine.options import refitted, sized
from litellm_memory_hook.engine.rebuild import PreparedRequest, prepare, prepare_offline
from litellm_memory_hook.engine.record import RecordSigner, TurnRecord
from litellm_memory_hook.engine.turn import RebuildOutcome, Rebuilt, TurnRequest
from litellm_memory_hook.engine.write_buffer import PendingWrite, WriteBuffer
from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.settings import MemorySettings
from litellm_memory_hook.store.epochs import write_epoch
from litellm_memory_hook.store.errors import RateLimitedLog
from litellm_memory_hook.store.keys import ConversationKeys
from litellm_memory_hook.store.queue import ExtractionQueue
from litellm_memory_hook.store.redis_store import MemoryStore, now_ms

logger = logging.getLogger("litellm_memory_hook")

#: a pooled connection that Redis closed (a restart, an idle timeout) is replaced and the
#: command sent once more before anything counts as a failure; a real outage still fails (and
#: opens the breaker) after that one retry. Writes are idempotent on the call id, so a retried
#: script never stores a turn twice. A timeout is retried too (redis-py's default): a
#: connection a NAT or firewall dropped silently answers nothing rather than a reset, and only a
#: fresh one mends it; the price is that a frozen Redis holds a request 2 x redis.timeout_s.
RECONNECT_OPTIONS: dict[str, Any] = {
    "retry": Retry(NoBackoff(), 1),
    "retry_on_error": [RedisConnectionError],
}

#: ``HSET`` of a reply's id into a conversation's ``calls`` hash, only while it exists (it
#: expires with the conversation; a write that did not reach Redis leaves no key without TTL)
_REMEMBER_REPLY = """
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
return 0
"""


class MemoryEngine:
    """Long memory for chat turns, over one Redis client.

    Args:
        settings: the global settings.
        redis: an asyncio Redis client (``decode_responses=False``).
        counters: the hook's counters (the metrics read them).
        wake: called when a conversation is due for extraction at once.
    """

    def __init__(
        self,
        settings: MemorySettings,
        redis: aioredis.Redis,
        counters: Counter[str],
        wake: Callable[[], None] = lambda: None,
    ) -> None:
        self.settings = settings
        self.counters = counters
        self.store = MemoryStore.for_settings(redis, settings)
        self.queue = ExtractionQueue(redis, settings.storage.key_prefix)
        #: the rate-limited log of Redis failures (one line per cause per period)
        self.refusals = RateLimitedLog(settings.redis.refusal_log_s)
        self.health = Health(
            settings.redis.breaker_s,
            counters,
            lambda keys: self.writer.node(keys),
            self.refusals,
            settings.storage.key_prefix,
        )
        self.writer = TurnWriter(
            settings, counters, self.store, self.queue, self.health, self.refusals, wake
        )
        self.held = HeldTurns(on_drop=lambda: counters.update(("held_dropped",)))
        self.signer = RecordSigner()
        self._background: set[asyncio.Task[None]] = set()

    @property
    def buffer(self) -> WriteBuffer:
        """The outage buffer of this process."""
        return self.writer.buffer

    # -- before the model call -----------------------------------------------------------------

    async def rebuild(self, turn: TurnRequest) -> Rebuilt:
        """The request's messages with memory, and the record of what to store.

        Raises:
            Exception: a failure of our own (the hook sends the client's messages on); a Redis
                failure is no exception here: the turn is rebuilt without Redis.
        """
        options = sized(turn.options, turn.messages, turn.limit)
        if options is None:  # the client's own messages and the reply fill the model's window
            self.counters["too_large_passthrough"] += 1
            assert turn.limit is not None
            logger.info(
                "memory hook: %r's window (%d tokens, %d for the reply) holds no memory beside "
                "the request; passing it through",
                turn.model,
                turn.limit.input_tokens,
                turn.limit.reply_tokens,
            )
            return Rebuilt("too_large")
        turn = replace(turn, options=options)
        keys = turn.who.keys
        if self.health.open(keys):
            self.counters["breaker_passthrough"] += 1
            return await self._offline(turn, skipped=True)
        known = await self._knows_reply(keys, turn.previous_reply)
        buffered, superseded = self.buffered_turns(keys)  # before the load: never in neither
        reading = prepare(
            self.store,
            keys,
            turn.who.memory,
            turn.messages,
            options,
            call_id=turn.call_id,
            buffered=buffered,
            superseded=superseded,
        )
        try:
            if self.health.probing(keys):  # a half-open breaker's probe waits one timeout
                prepared = await asyncio.wait_for(reading, timeout=self.settings.redis.timeout_s)
            else:
                prepared = await reading
        except (StoreError, TimeoutError) as exc:
            # said once per cause and period by the breaker (an outage, a refusal by its kind)
            self.health.trip(keys)
            self.counters["precall_errors"] += 1
            logger.debug("memory hook: Redis failed in pre-call (%s); the turn is buffered", exc)
            return replace(await self._offline(turn), reply_known=known)
        self.health.ok(keys)
        prepared = await self._refit(prepared, turn)
        if prepared is None:
            self.counters["no_new_turn"] += 1
            return Rebuilt("no_new_turn", reply_known=known)
        if prepared.epoch is not None and turn.mode == "read_write":
            self.spawn(self._record_epoch(keys, prepared.epoch))
        elapsed_ms = (time.perf_counter() - turn.started) * 1000
        return Rebuilt(
            _read_outcome(turn),
            messages=prepared.messages,
            record=self._record(turn, prepared, elapsed_ms),
            prepared=prepared,
            elapsed_ms=elapsed_ms,
            reply_known=known,
        )

    async def _offline(self, turn: TurnRequest, *, skipped: bool = False) -> Rebuilt:
        """Redis is down: the request goes on with the client's messages and the alias's rules,
        and its turn is still recorded for the post-call step, which queues it in the outage
        buffer (:func:`~litellm_memory_hook.engine.rebuild.prepare_offline`)."""
        prepared = await prepare_offline(
            turn.messages,
            turn.options,
            call_id=turn.call_id,
            buffered=self.buffered_turns(turn.who.keys)[0],
        )
        if prepared is None:
            return Rebuilt("redis_down", skipped=skipped)
        elapsed_ms = (time.perf_counter() - turn.started) * 1000  # the failed try's time too
        # no token read: the write is refused if a forget came after the request started
        prepared = replace(prepared, forget_token=f"@{now_ms() - int(elapsed_ms)}")
        return Rebuilt(
            "redis_down",
            messages=prepared.messages,
            record=self._record(turn, prepared, elapsed_ms),
            elapsed_ms=elapsed_ms,
            skipped=skipped,
        )

    async def _refit(
        self, prepared: PreparedRequest | None, turn: TurnRequest
    ) -> PreparedRequest | None:
        """A prompt still over the model's window is built once more with the budgets cut in
        the same proportion (:func:`~.options.refitted`); what is then still over goes as it
        is (the next request's budgets start smaller by the same estimate)."""
        if prepared is None:
            return None
        tighter = refitted(turn.options, prepared.messages, turn.messages, turn.limit)
        if tighter is None:
            return prepared
        self.counters["refit_to_model"] += 1
        return await prepare(
            self.store,
            turn.who.keys,
            turn.who.memory,
            turn.messages,
            tighter,
            call_id=turn.call_id,
            buffered=self.buffered_turns(turn.who.keys)[0],
        )

    def _record(
        self, turn: TurnRequest, prepared: PreparedRequest, elapsed_ms: float
    ) -> dict[str, Any]:
        """The signed record of the turn (what to store after the reply); the turns themselves
        are held in the process (:mod:`.held_turns`), named by the record."""
        who, plan = turn.who, prepared.plan
        self.counters["rebuilt"] += 1
        if not plan.store:
            self.counters["outage_not_stored"] += 1
            logger.info(
                "memory hook: %s replaces turns still in the outage buffer; not stored",
                who.keys.ref,
            )
        for layer, chars in prepared.layer_chars.items():
            self.counters[f"chars_{layer}"] += chars
        if plan.surrogates:
            # a client cut a string inside an emoji (JSON "\\ud83d"): its messages reach the
            # model as sent, and are stored with U+FFFD in its place (plan.storable_forms)
            self.counters["surrogate_requests"] += 1
        record = TurnRecord(
            protocol=turn.protocol,
            prefix=who.keys.prefix,
            ref=who.keys.ref,
            meta=who.meta_fields(),
            memory_scope=who.memory.scope,
            flush=turn.flush,
            extract=turn.extract,
            write=turn.mode == "read_write" and plan.store,
            held=self._hold(prepared),
            previous=plan.previous_text,
            seeded=plan.seeded,
            prefill=plan.prefill,
            prefill_name=plan.prefill_name,
            cursor=prepared.cursor,
            forget_token=prepared.forget_token,
            hook_ms=round(elapsed_ms, 3),
            layers=prepared.layer_chars,
        )
        return self.signer.seal(record)

    def _hold(self, prepared: PreparedRequest) -> str:
        """Hold the plan's turns until the reply (:mod:`.held_turns`); of a seed, only the
        messages the request sends become turns now."""
        plan = prepared.plan
        made = sent_now(plan.seed, prepared.messages) if plan.seed is not None else None
        return self.held.hold(plan.pending, plan.replace, plan.seed, made)

    async def _record_epoch(self, keys: ConversationKeys, update: EpochUpdate) -> None:
        """Record the cache layout's window start and head snapshot (a hint: a failure costs
        the next request a fresh snapshot)."""
        try:
            if await write_epoch(
                self.store.redis, keys, update.start, update.epoch, update.snapshot
            ):
                self.counters["epochs_recorded"] += 1
        except Exception as exc:  # the reply is not held for it, and nothing is lost
            self.counters["epoch_write_failures"] += 1
            logger.debug("memory hook: recording the epoch of %s failed: %s", keys.ref, exc)

    async def _knows_reply(self, keys: ConversationKeys, field: str | None) -> bool | None:
        """Whether the conversation's ``calls`` hash holds ``field`` (a stored reply a request
        continues); ``None`` when there is none to look up or the lookup failed (counted)."""
        if field is None:
            return None
        try:
            found = await asyncio.wait_for(
                self.store.redis.hexists(keys.calls, field),
                timeout=self.settings.redis.timeout_s,
            )
        except Exception as exc:
            self.counters["continuation_lookup_errors"] += 1
            logger.debug("memory hook: looking up a previous response failed: %s", exc)
            return None
        self.counters["continuations_served" if found else "continuations_unknown"] += 1
        return bool(found)

    # -- after the reply -----------------------------------------------------------------------

    def opened(self, raw: object) -> TurnRecord | None:
        """The record in a request's metadata when this engine signed it, else ``None``
        (counted as ``forged_records`` when it was changed or not ours).

        Raises:
            RecordError: a signed record of another version.
        """
        if not isinstance(raw, dict):
            return None
        if not self.signer.genuine(raw):
            self.counters["forged_records"] += 1
            logger.warning("memory hook: ignoring a memory record this proxy did not write")
            return None
        return TurnRecord.from_wire(raw)

    async def commit(
        self,
        record: TurnRecord,
        reply: dict[str, Any] | None,
        call_id: str,
        *,
        partial: bool = False,
    ) -> None:
        """Store the record's held turns and the reply (:meth:`TurnWriter.commit`); a cut
        stream's reply is marked ``partial``. Never raises."""
        held = self.held.take(record.held)
        if held is None:  # a bound dropped them (counted there)
            self.counters["held_lost"] += 1
            logger.warning(
                "memory hook: the turns of %s's call %s were no longer held; not stored",
                record.ref,
                call_id,
            )
            return
        pending = held.pending
        if held.seed is not None:
            seed = await held.seed_turns()
            pending, record = (*seed, *pending), replace(record, seeded=len(seed))
        await self.writer.commit(
            PendingWrite(record, reply, call_id, partial, pending=pending, replace=held.replace)
        )

    async def remember_reply(self, record: TurnRecord, field: str, call_id: str) -> None:
        """Note a stored reply under ``field`` in its conversation's ``calls`` hash (only while
        the conversation is stored), so a continuation of it is served from Redis. Never
        raises."""
        if not record.write:
            return
        try:
            await self.store.redis.eval(_REMEMBER_REPLY, 1, record.keys.calls, field, call_id)
        except Exception as exc:
            self.counters["reply_id_write_errors"] += 1
            logger.debug("memory hook: noting a response id failed: %s", exc)

    # -- the outage buffer and background work -------------------------------------------------

    def buffered_turns(self, keys: ConversationKeys) -> tuple[list[Turn], set[int]]:
        """:meth:`TurnWriter.buffered_turns`."""
        return self.writer.buffered_turns(keys)

    def forgetting(
        self, keys: ConversationKeys, *, whole_user: bool
    ) -> contextlib.AbstractAsyncContextManager[list[PendingWrite]]:
        """:meth:`TurnWriter.forgetting`."""
        return self.writer.forgetting(keys, whole_user=whole_user)

    def spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        """Run a post-call write in the background: kept referenced, its failure counted and
        logged (``postcall_errors``), never left as "Task exception was never retrieved"."""

        async def guarded() -> None:
            try:
                await coroutine
            except Exception:
                self.counters["postcall_errors"] += 1
                logger.exception("memory hook: a background write failed")

        task = asyncio.ensure_future(guarded())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def drain(self) -> None:
        """Wait for background writes and the outage buffer (tests and shutdown)."""
        await self.writer.drain()
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)


def _read_outcome(turn: TurnRequest) -> RebuildOutcome:
    """The outcome of a request whose memory was read: ``used`` when its turn is stored."""
    if turn.mode == "read_write":
        return "used"
    return "temporary" if turn.temporary else "read_only"
