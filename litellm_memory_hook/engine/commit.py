"""After the reply: write the turn, trim, and schedule the conversation's extraction; when Redis
cannot take the write, keep it in the outage buffer (:mod:`.write_buffer`).

:meth:`TurnWriter.commit` never raises. A write is one Lua script (:meth:`MemoryStore.append`),
idempotent on the call id, so a retried write never stores a turn twice. Its turns are built,
indexed and bounded in slices (:mod:`litellm_memory_hook.slices`), so that a whole history's
write does not hold other requests. Failures by kind (:mod:`litellm_memory_hook.store.errors`):
an outage trips the node's breaker (:mod:`.breakers`), READONLY reconnects and tries once more,
a refusal is counted and said once per period and the write set aside in its conversation.
The policy: docs/design.md (failure policy); what an outage loses: docs/operations.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

from litellm_memory_hook.core.indexing import indexed, stored_terms
from litellm_memory_hook.core.message_text import without_surrogates
from litellm_memory_hook.core.models import IndexedTurn, Turn
from litellm_memory_hook.core.stored_messages import message_to_turn
from litellm_memory_hook.engine.breakers import Health
from litellm_memory_hook.engine.write_buffer import PendingWrite, WriteBuffer
from litellm_memory_hook.settings import MemorySettings
from litellm_memory_hook.slices import LONG_WRITE_TURNS, Slicer, pause
from litellm_memory_hook.store.client import node_of, reconnect
from litellm_memory_hook.store.errors import (
    RateLimitedLog,
    RedisFault,
    classify,
    explain,
    fault_key,
)
from litellm_memory_hook.store.keys import ConversationKeys
from litellm_memory_hook.store.queue import ExtractionQueue
from litellm_memory_hook.store.redis_store import AppendResult, MemoryStore, now_ms
from litellm_memory_hook.store.retention import should_check, trim_oldest

logger = logging.getLogger("litellm_memory_hook")


class TurnWriter:
    """Writes turns to Redis, or keeps them in the outage buffer until Redis takes them.

    Args:
        settings: the global settings (budgets, retention, extraction timing, the buffer's
            bounds).
        counters: the hook's counters.
        store / queue: the store and the extraction schedule on the same Redis.
        health: the breakers (:mod:`.breakers`).
        refusals: the rate-limited log of Redis failures.
        wake: called when a conversation is due at once (wakes the in-process worker).
    """

    def __init__(
        self,
        settings: MemorySettings,
        counters: Counter[str],
        store: MemoryStore,
        queue: ExtractionQueue,
        health: Health,
        refusals: RateLimitedLog,
        wake: Callable[[], None],
    ) -> None:
        self.settings = settings
        self.counters = counters
        self.store = store
        self.queue = queue
        self.health = health
        self.refusals = refusals
        self.wake = wake
        self._buffer: WriteBuffer | None = None

    # -- committing a turn ---------------------------------------------------------------------

    async def commit(self, item: PendingWrite) -> None:
        """Append the item's turns and reply, or queue them in the outage buffer: at once while
        the breaker of the conversation's Redis node is open or earlier writes of the same
        conversation wait (order is kept per conversation, and no other conversation waits for
        it); after a failure, whatever raised it (the client's error, any other exception of
        the client, a bug of ours), by its kind: unreachable trips that node's breaker;
        READONLY (a failover) drops the pooled connections and tries once more; a refusal
        (NOPERM, NOSCRIPT, OOM, WRONGTYPE, a script error) is counted and said in one line per
        period, and the write is set aside in its conversation. Never raises."""
        keys = item.record.keys
        if self.health.open(keys) or self.buffer.holds(item.conversation):
            self.buffer.add(item)  # keep order; never hold the response
            return
        try:
            await self._write_once(item, probe=self.health.probing(keys))
        except Exception as exc:
            kind = classify(exc)
            if kind is RedisFault.READONLY:
                self.counters["redis_readonly_reconnects"] += 1
                await reconnect(self.store.redis)
                try:
                    await self.write(item)
                except Exception as again:
                    exc, kind = again, classify(again)
                else:
                    self.health.ok(keys)
                    return
            self._write_failed(item, keys, kind, exc)
            return
        self.health.ok(keys)

    async def _write_once(self, item: PendingWrite, *, probe: bool) -> None:
        """:meth:`write`; a probe (the node's breaker is half-open) gives up after one
        ``redis.timeout_s``, not after the reconnect retry's second one."""
        if not probe:
            await self.write(item)
            return
        await asyncio.wait_for(self.write(item), timeout=self.settings.redis.timeout_s)

    def _write_failed(
        self, item: PendingWrite, keys: ConversationKeys, kind: RedisFault, exc: BaseException
    ) -> None:
        """A write failed with ``kind``: count it, trip the node's breaker when Redis is
        unreachable, and keep the write in the buffer (which says it, rate-limited), set aside
        in its conversation for a refusal."""
        self.counters["write_failures"] += 1
        self.counters[f"write_failures_{kind.value}"] += 1
        if kind is RedisFault.ERROR:  # not the client's: a failure of our own post-call code
            self.counters["postcall_errors"] += 1
        if kind is RedisFault.UNREACHABLE:
            # Unreachable or slow: skip that node for a while. A refusal comes at once and
            # reads still work, so the requests go on reading the stored history.
            self.health.trip(keys, exc)
        self.buffer.add_failed(item, exc)  # counted by kind and said there, rate-limited

    # -- the write itself ----------------------------------------------------------------------

    def item_turns(self, item: PendingWrite) -> list[Turn]:
        """The turns one write stores: its pending turns, then the reply (said at
        ``item.answered_ms``; a cut stream's marked ``partial``)."""
        turns = list(item.pending)
        reply = item.reply
        prefill, prefill_name = item.record.prefill, item.record.prefill_name
        if reply is not None and (prefill or prefill_name):
            reply = _with_prefill(reply, prefill, prefill_name)
        if reply is not None:
            reply_turn = message_to_turn(
                reply,
                ts_ms=item.answered_ms,
                call_id=item.call_id,
                max_chars=self.settings.storage.max_message_chars,
            )
            if reply_turn is not None:
                if item.partial:
                    reply_turn = replace(reply_turn, partial=True)
                turns.append(reply_turn)
        return turns

    async def write(self, item: PendingWrite) -> None:
        """Append one write's turns (then trim and schedule: :meth:`_after_append`).

        Raises:
            Exception: Redis failed (any exception of the client); the caller decides.
        """
        record, call_id = item.record, item.call_id
        keys = record.keys
        at = now_ms()
        # a whole history's turns are indexed and bounded in slices (:mod:`..slices`): other
        # requests run between them
        if len(item.pending) > LONG_WRITE_TURNS:
            await pause()  # the post-call's own work came first: a slice anew
        slicer = Slicer()
        turns = self.item_turns(item)
        if item.partial and item.reply is not None and not any(t.partial for t in turns):
            self.counters["partial_empty"] += 1  # a cut stream with nothing in it
        if not turns:
            return
        previous = record.previous
        chain: list[IndexedTurn] = []
        for turn in turns:  # indexed_chain, in slices: other requests run between them
            chain.append(indexed(turn, previous))
            previous = turn.text
            await slicer.step()
        if slicer.pauses:  # a long history: the append's own slices start afresh
            await pause()
        result = await self.store.append(
            keys,
            chain,
            call_id=call_id,
            meta_if_new={**record.meta, "created_ms": str(item.answered_ms)},
            replace=[stored_terms(t) for t in item.replace],
            at_ms=at,
            seeded=record.seeded,
            memory=keys.user_keys.memory_set(record.memory_scope),  # indexed in the same script
            forget_token=record.forget_token,
        )
        if result.forgotten:  # a forget came after this request read the conversation
            self.counters["writes_forgotten"] += 1
            logger.info("memory hook: %s was forgotten since its request; not stored", keys.ref)
            return
        if result.meta_restored:
            self._meta_restored(keys, result)
        if result.written:
            self.counters["turns_stored"] += len(turns)
        try:
            await self._after_append(item, keys, result, at)
        except Exception as exc:
            kind = classify(exc)
            if kind.transient:
                raise  # retried: the append finds its call id stored and schedules again
            # The turns are stored; only the trim or the schedule was refused (an ACL without
            # the due set, say): the write is done, the refusal counted and said.
            self._followup_refused(kind, exc, keys)

    def _meta_restored(self, keys: ConversationKeys, result: AppendResult) -> None:
        """The conversation's meta hash was gone beside its turns (an evicting
        maxmemory-policy): the seq went on from the newest stored turn. Counted and said."""
        self.counters["meta_evicted"] += 1
        cursor = "its extraction cursor from its copy"
        if result.cursor_guessed:  # the copy went too: no job extracts it all again
            self.counters["meta_cursor_guessed"] += 1
            cursor = "its extraction cursor (no copy left) from the newest stored turn"
        self.refusals.emit(
            "meta_evicted",
            logging.ERROR,
            f"memory hook: the meta key of {keys.ref} was gone beside its stored turns "
            "(evicted: Redis's maxmemory-policy must be noeviction); numbering went on "
            f"from the newest stored turn, {cursor}; its summary is lost",
        )

    def _followup_refused(
        self, kind: RedisFault, exc: BaseException, keys: ConversationKeys
    ) -> None:
        """The turns are stored, but Redis refused what follows (the trim, the schedule)."""
        self.counters[f"redis_refused_{kind.value}"] += 1
        self.counters["followup_refused"] += 1
        self.refusals.emit(
            f"followup:{fault_key(kind, exc)}",
            logging.ERROR,
            "memory hook: turns stored, but scheduling their extraction failed "
            f"({explain(kind, exc, prefix=keys.prefix)})",
        )

    async def _after_append(
        self, item: PendingWrite, keys: ConversationKeys, result: AppendResult, at: int
    ) -> None:
        """What follows an append: the trim past ``storage.max_messages`` and the extraction
        schedule (a retried write whose turns were stored only schedules)."""
        settings = self.settings
        record = item.record
        quiet_ms = int(settings.extraction.quiet_s * 1000)
        if not result.written:
            self.counters["duplicate_writes_skipped"] += 1
            if record.extract:
                # A retry of a write that stored its turns and failed after (the schedule, with
                # Redis filling up): the conversation is made due, never later than it is.
                await self._schedule(item, keys, at + quiet_ms, earlier_only=True)
            return
        if should_check(result.first_seq, result.last_seq, settings.storage.max_messages):
            self.counters["turns_trimmed"] += await trim_oldest(
                self.store, keys, settings.storage.max_messages
            )
        if not record.extract:
            return
        now_due = record.flush
        # The append script returns the cursor as it is now (a job may have committed since the
        # pre-call). After a batched write it does not: the cursor this request's pre-call read
        # bounds the new messages from above (it only moves forward), so the cursor is read
        # again only when even that count reaches extraction.every_messages.
        if not now_due:
            cursor = result.cursor
            if (
                cursor is None
                and result.last_seq - record.cursor >= settings.extraction.every_messages
            ):
                cursor = await self.store.cursor(keys)
            now_due = (
                cursor is not None
                and result.last_seq - cursor >= settings.extraction.every_messages
            )
        await self._schedule(item, keys, at if now_due else at + quiet_ms)
        if now_due:
            self.wake()

    # -- the extraction schedule ---------------------------------------------------------------

    async def _schedule(
        self, item: PendingWrite, keys: ConversationKeys, due_ms: int, *, earlier_only: bool = False
    ) -> None:
        """Make the conversation due for extraction at ``due_ms`` (epoch ms). The due set is one
        key for every user: on a Cluster its node may be down while the conversation's is not.
        Then the turns stay stored, the conversation's next writes go on, and the schedule
        waits in the outage buffer by itself (grouped by the due set's node, whose breaker is
        the one tripped; never moved later than ``due_ms``). On one server a failure raises
        as before (the whole write is retried: the append finds its call id stored)."""
        due_node = self.due_node
        apart = due_node not in ("", self.node(keys))
        if apart and self.health.nodes.is_open(due_node):
            self.counters["schedules_held"] += 1
            self.buffer.add(_schedule_item(item, due_ms))
            return
        try:
            await self.queue.schedule(keys, due_ms, earlier_only=earlier_only)
        except Exception as exc:
            kind = classify(exc)
            if not apart or not kind.transient:
                raise
            if kind is RedisFault.UNREACHABLE:
                self.health.trip_node(
                    due_node, "extraction schedules wait for it", " (the extraction due set)"
                )
            self.counters["schedules_held"] += 1
            self.buffer.add_failed(_schedule_item(item, due_ms), exc)
            return
        if apart:
            self.health.nodes.ok(due_node)

    async def _retry_schedule(self, item: PendingWrite, keys: ConversationKeys) -> None:
        """A schedule-only buffer item: make the conversation due, never later than it is. A
        transient failure raises (the buffer retries it); a refusal is counted and said."""
        assert item.schedule_at is not None
        try:
            await self.queue.schedule(keys, item.schedule_at, earlier_only=True)
        except Exception as exc:
            kind = classify(exc)
            if kind.transient:
                raise
            self._followup_refused(kind, exc, keys)
            return
        due_node = self.due_node
        if due_node:
            self.health.nodes.ok(due_node)
        self.counters["schedules_retried_ok"] += 1

    def node(self, keys: ConversationKeys) -> str:
        """The Redis node of a conversation (``""``: one server, every key on it)."""
        return node_of(self.store.redis, keys.turns)

    @property
    def due_node(self) -> str:
        """The Redis node of the extraction due set (``""``: one server). One key for every
        user: on a Cluster it lives on one node, which may not be the conversation's."""
        return node_of(self.store.redis, self.queue.due)

    # -- the outage buffer ---------------------------------------------------------------------

    @property
    def buffer(self) -> WriteBuffer:
        """The outage buffer of this process (made at first use)."""
        if self._buffer is None:
            self._buffer = WriteBuffer(
                self._write_pending,
                max_items=self.settings.write_buffer.max_turns,
                max_age_s=self.settings.write_buffer.max_age_s,
                count=self._count,
                group=self._item_node,
                refused_retry_s=self.settings.write_buffer.refused_retry_s,
                log=self.refusals,
            )
        return self._buffer

    def _item_node(self, item: PendingWrite) -> str:
        """The Redis node a buffered write goes to (its group in the buffer): the
        conversation's, or for a schedule-only item the due set's."""
        if item.schedule_at is not None:
            return self.due_node
        return self.node(item.record.keys)

    async def drain(self) -> None:
        """Wait until the outage buffer is written out (or dropped)."""
        if self._buffer is not None:
            await self._buffer.drain()

    def _count(self, name: str, amount: int) -> None:
        self.counters[name] += amount

    async def _write_pending(self, item: PendingWrite) -> None:
        """A write of the outage buffer; READONLY drops the pooled connections first, so the
        next try reaches the node that is primary now."""
        keys = item.record.keys
        if item.schedule_at is not None:
            await self._retry_schedule(item, keys)
            return
        try:
            await self.write(item)
        except Exception as exc:
            if classify(exc) is RedisFault.READONLY:
                self.counters["redis_readonly_reconnects"] += 1
                await reconnect(self.store.redis)
            raise
        self.health.ok(keys)

    def buffered_turns(self, keys: ConversationKeys) -> tuple[list[Turn], set[int]]:
        """The turns this process holds for the conversation in its outage buffer, oldest
        first, and the seqs of stored turns those writes replace (one pass over at most
        ``write_buffer.max_turns`` writes while it holds any; at once when it is empty). Take them
        before reading the conversation: a write that lands meanwhile is in one of the two."""
        if self._buffer is None or not self._buffer.active:
            return [], set()
        turns: list[Turn] = []
        superseded: set[int] = set()
        for item in self._buffer.matching(lambda i: i.conversation == (keys.prefix, keys.ref)):
            turns.extend(self.item_turns(item))
            superseded.update(t.seq for t in item.replace)
        return turns, superseded

    @contextlib.asynccontextmanager
    async def forgetting(
        self, keys: ConversationKeys, *, whole_user: bool
    ) -> AsyncIterator[list[PendingWrite]]:
        """Around a forget of a conversation, or of every conversation of its user
        (``whole_user``): its writes waiting in the outage buffer are taken out first, so that
        they are not written after the forget, and one being sent is waited for (at most twice
        ``redis.timeout_s``), so that the forget deletes what it stored. When the forget fails
        (Redis down: nothing was forgotten) they go back into the buffer; when it succeeds
        they are counted as ``writes_forgotten``. Yields the writes taken.

        Writes whose request read a forget token are refused in Redis anyway
        (:mod:`litellm_memory_hook.store.forgets`); these are the ones made while Redis could
        not be read."""
        if self._buffer is None:
            yield []
            return

        def forgotten(item: PendingWrite) -> bool:
            prefix, ref = item.conversation
            if prefix != keys.prefix:
                return False
            other = ConversationKeys.from_ref(prefix, ref)
            return other.user_keys == keys.user_keys if whole_user else other == keys

        taken = self._buffer.take(forgotten)
        try:
            await self._buffer.cancelled_sent(2 * self.settings.redis.timeout_s)
            yield taken
        except BaseException:
            self._buffer.restore(taken)
            raise
        self.counters["writes_forgotten"] += len(taken)


def _schedule_item(item: PendingWrite, due_ms: int) -> PendingWrite:
    """A schedule-only buffer item for ``item``'s conversation, due at ``due_ms``."""
    return PendingWrite(item.record, None, item.call_id, schedule_at=due_ms)


def _with_prefill(reply: dict[str, Any], prefill: str, name: str = "") -> dict[str, Any]:
    """The reply a prefilled request stored: the prefill, then the model's continuation (a
    reply that already starts with the prefill is kept as it is), with the prefill's ``name``
    (the speaker a roleplay frontend wrote) unless the reply has its own."""
    if name and not reply.get("name"):
        reply = {**reply, "name": name}
    content = reply.get("content")
    text = content if isinstance(content, str) else ""
    # the recorded prefill is in its stored form (a lone surrogate as U+FFFD), and so is the
    # stored reply (message_to_turn): a reply that repeats the prefill as sent repeats it
    if without_surrogates(text).startswith(prefill):
        return reply
    return {**reply, "content": prefill + text}
