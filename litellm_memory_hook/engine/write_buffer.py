"""The outage buffer: turns that could not be written wait in the process, per conversation.

When a write fails (Redis down, a timeout, the breaker open, or Redis refusing it), the turn goes
into a bounded in-process queue; one background task writes the queue out, oldest first, as soon
as Redis answers again. Order is kept per conversation only: while a conversation has writes
waiting, its new writes queue behind them, and other conversations' writes are not held up by
it (one user's poisoned key, or an ACL without one of our keys, must not stop every other
user's writes). Writes are idempotent on ``litellm_call_id``, so a write that reached Redis
before its answer was lost is not stored twice.

A failure is read by kind (:func:`litellm_memory_hook.store.errors.classify`):

* transient (unreachable, a timeout, READONLY after a failover): the failed write's *group*
  (the Redis node its keys live on; one group for one server) waits, backing off from
  ``RETRY_FIRST_S`` to ``RETRY_MAX_S``; other groups go on;
* refused (NOPERM, NOSCRIPT, OOM, WRONGTYPE, a script error, an exception of our own): the
  write's *conversation* is set aside for ``refused_retry_s`` (counted once per write as
  ``writes_set_aside`` and ``writes_set_aside_<kind>``; said in one rate-limited line per
  cause), and everything else is written meanwhile. An ACL or memory limit fixed later lets the
  set-aside writes land on their next try.

Limits (settings): ``write_buffer.max_turns`` items (the oldest is dropped when a new one would pass
it) and ``write_buffer.max_age_s`` seconds (an item older than that is dropped instead of
written). A dropped write takes with it the later writes of its conversation that go on its
exchange (tool results answering its call, and so on), which stored alone would leave tool
results without their call. Drops are counted (``writes_lost``, and ``writes_lost_<kind>`` with
the kind of the write's last failure) and logged with that kind; the buffer lives in one
process, so a proxy killed during an outage loses what it held
(docs/operations.md#restarts-and-outages).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.engine.record import TurnRecord
from litellm_memory_hook.store.errors import (
    RateLimitedLog,
    RedisFault,
    classify,
    explain,
    fault_key,
)
from litellm_memory_hook.store.redis_store import now_ms

logger = logging.getLogger("litellm_memory_hook")

RETRY_FIRST_S = 0.2
RETRY_MAX_S = 0.5
#: a refused write's conversation is tried again after this long (seconds), by default
REFUSED_RETRY_S = 30.0


@dataclass
class PendingWrite:
    """One turn waiting to be written: its record, the reply, the call id, the turns.

    ``answered_ms`` (epoch ms) is when the reply came, the time its turn is stored with however
    late the buffer writes it; ``queued_at`` (monotonic seconds) ages the item.
    """

    record: TurnRecord
    reply: dict[str, Any] | None
    call_id: str
    partial: bool = False
    queued_at: float = field(default_factory=time.monotonic)
    answered_ms: int = field(default_factory=now_ms)
    #: the kind of the write's last failure (``None``: it has not failed in the buffer yet)
    failure: RedisFault | None = None
    #: the turns to store and the stored ones they replace (held in the process until the
    #: post-call step: :mod:`.held_turns`)
    pending: tuple[Turn, ...] = ()
    replace: tuple[Turn, ...] = ()
    #: set on a schedule-only item: the turns are stored, the conversation's extraction
    #: schedule (epoch ms it is due, never moved later) waits for the due set's Redis node
    schedule_at: int | None = None

    @property
    def conversation(self) -> tuple[str, str]:
        """``(key prefix, conversation ref)`` of the write."""
        return self.record.conversation

    @property
    def lane(self) -> tuple[str, str, bool]:
        """What the buffer keeps in order: the conversation's writes, and apart from them its
        schedule (a schedule that waits never holds back the conversation's next turns)."""
        return (*self.conversation, self.schedule_at is not None)

    @property
    def goes_on_exchange(self) -> bool:
        """True when the write starts with tool results: they answer a call that an earlier
        write of the conversation holds (or Redis does), so they mean nothing without it."""
        return bool(self.pending) and self.pending[0].role == "tool"


class WriteBuffer:
    """A bounded queue of writes, ordered per conversation, with one flusher task.

    Args:
        write: writes one item; raises when it fails (any exception: its kind decides).
        max_items: most items held (the oldest is dropped past it).
        max_age_s: an item older than this (seconds) is dropped, not written.
        count: called with a counter name and an amount (``writes_lost``, ``write_retried_ok``,
            ``writes_set_aside``, ``redis_refused_<kind>`` ...).
        group: the group of a write (the Redis node its keys live on): a transient failure
            holds back the writes of that group only. Default: one group.
        refused_retry_s: a refused write's conversation waits this long before its next try.
        log: where refusals and retries are said, rate-limited (default: one line per cause
            per minute).
        classify_failure: the kind of a failure (default
            :func:`litellm_memory_hook.store.errors.classify`).
    """

    def __init__(
        self,
        write: Callable[[PendingWrite], Awaitable[None]],
        *,
        max_items: int,
        max_age_s: float,
        count: Callable[[str, int], None],
        group: Callable[[PendingWrite], str] | None = None,
        refused_retry_s: float = REFUSED_RETRY_S,
        log: RateLimitedLog | None = None,
        classify_failure: Callable[[BaseException], RedisFault] = classify,
    ) -> None:
        self._write = write
        self.max_items = max_items
        self.max_age_s = max_age_s
        self.refused_retry_s = refused_retry_s
        self._count = count
        self._group = group or (lambda item: "")
        self._log = log or RateLimitedLog(60.0)
        self._classify = classify_failure
        self._items: deque[PendingWrite] = deque()
        self._task: asyncio.Task[None] | None = None
        self._sending: PendingWrite | None = None
        self._cancelled: PendingWrite | None = None
        #: conversation -> monotonic time before which it is not tried (set aside)
        self._held: dict[tuple[str, str], float] = {}
        #: group -> (monotonic time before which it is not tried, its current backoff)
        self._backoff: dict[str, tuple[float, float]] = {}
        self._wake = asyncio.Event()

    def __len__(self) -> int:
        return len(self._items)

    def holds(self, conversation: tuple[str, str]) -> bool:
        """True while writes of ``conversation`` (``(prefix, ref)``) wait: its new writes must
        queue behind them (a schedule-only item does not count)."""
        return any(
            item.conversation == conversation and item.schedule_at is None for item in self._items
        )

    @property
    def set_aside(self) -> int:
        """Writes waiting whose last try was refused (not an outage)."""
        return sum(1 for i in self._items if i.failure is not None and i.failure.refused)

    def take(self, where: Callable[[PendingWrite], bool]) -> list[PendingWrite]:
        """Remove and return the waiting writes for which ``where`` is true, oldest first (a
        forget: they must not be written after it). A write being sent at that moment may
        still reach Redis, but is not retried (:meth:`cancelled_sent` waits for that attempt
        to end)."""
        kept: deque[PendingWrite] = deque()
        taken: list[PendingWrite] = []
        for item in self._items:
            if not where(item):
                kept.append(item)
                continue
            taken.append(item)
            if item is self._sending:
                self._cancelled = item
                kept.append(item)  # the flusher takes it off when its attempt ends
        self._items = kept
        return taken

    def restore(self, items: list[PendingWrite]) -> None:
        """Put back writes :meth:`take` removed (a forget that failed: nothing was forgotten),
        in the order they were queued. One that was being sent is written again: writes are
        idempotent on the call id."""
        if self._cancelled is not None and any(i is self._cancelled for i in items):
            self._cancelled = None  # still queued: it is retried as before
        queued = {id(item) for item in self._items}
        back = [item for item in items if id(item) not in queued]
        if not back:
            return
        self._items = deque(sorted([*self._items, *back], key=lambda item: item.queued_at))
        self._start()

    async def cancelled_sent(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s`` seconds) until a write :meth:`take` removed while it was
        being sent has ended, so that what it may have stored can be deleted after it."""
        deadline = time.monotonic() + timeout_s
        while self._sending is not None and self._sending is self._cancelled:
            if time.monotonic() >= deadline:
                return
            await asyncio.sleep(0.005)

    def matching(self, where: Callable[[PendingWrite], bool]) -> list[PendingWrite]:
        """The writes waiting for which ``where`` is true, oldest first (not one dropped while
        it was being sent)."""
        return [item for item in self._items if item is not self._cancelled and where(item)]

    @property
    def active(self) -> bool:
        """True while items wait (new writes must queue behind them)."""
        return bool(self._items)

    def add(self, item: PendingWrite) -> None:
        """Queue a write and make sure the flusher runs (and looks at it now). A schedule-only
        item joins one already waiting for its conversation (the earlier due time wins)."""
        if item.schedule_at is not None:
            for queued in self._items:
                if queued.lane == item.lane and queued is not self._sending:
                    queued.schedule_at = min(
                        queued.schedule_at or item.schedule_at, item.schedule_at
                    )
                    return
        if len(self._items) >= self.max_items:
            # the oldest exchange not being sent (that one may be stored as we speak): a write
            # that starts one, with the tool results that go on it; else the oldest write
            waiting = [i for i in self._items if i is not self._sending]
            oldest = next((i for i in waiting if not i.goes_on_exchange), None)
            if oldest is None and waiting:
                oldest = waiting[0]
            if oldest is not None:  # else the one write held is being sent: hold one more
                self._drop(oldest, f"write buffer full ({self.max_items})")
        self._items.append(item)
        self._start()

    def add_failed(self, item: PendingWrite, exc: BaseException) -> None:
        """Queue a write whose first try failed with ``exc``: as :meth:`add`, then held back
        (its group, or its conversation set aside) as a buffered write failing so is."""
        self.add(item)
        self._failed(item, exc)

    def _start(self) -> None:
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._flush())

    def _next(self, now: float) -> tuple[PendingWrite | None, float]:
        """The oldest write that heads its conversation and may be tried now, else ``None``
        and the monotonic time when one may (``inf``: none waits)."""
        seen: set[tuple[str, str, bool]] = set()
        wake = math.inf
        for item in self._items:
            lane = item.lane
            if lane in seen:
                continue
            seen.add(lane)
            conversation = item.conversation
            if item is self._cancelled or now - item.queued_at > self.max_age_s:
                return item, now  # taken off (or dropped) by the flusher at once
            ready = self._held.get(conversation, 0.0)
            if self._backoff:
                ready = max(ready, self._backoff.get(self._group(item), (0.0, 0.0))[0])
            if ready <= now:
                return item, now
            wake = min(wake, ready)
        return None, wake

    async def _flush(self) -> None:
        while self._items:
            now = time.monotonic()
            item, wake = self._next(now)
            if item is None:
                self._wake.clear()
                timeout = None if math.isinf(wake) else max(wake - now, 0.001)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=timeout)
                continue
            if item is self._cancelled:  # dropped (a forget) while it was being sent
                self._discard(item)
                continue
            if now - item.queued_at > self.max_age_s:
                self._drop(item, f"waited over {self.max_age_s:.0f} s for Redis")
                continue
            failed: BaseException | None = None
            self._sending = item
            try:
                await self._write(item)
            except Exception as exc:  # any failure keeps the write: its kind decides when next
                failed = exc
            finally:
                self._sending = None
            if failed is not None:
                if item is not self._cancelled:
                    self._failed(item, failed)
                continue
            self._discard(item)
            self._backoff.pop(self._group(item), None)
            if item.schedule_at is None:  # a schedule counts apart (the hook's counters)
                self._held.pop(item.conversation, None)
                self._count("write_retried_ok", 1)

    def _failed(self, item: PendingWrite, exc: BaseException) -> None:
        """A buffered write failed: hold back its group (transient) or its conversation
        (refused), count and say it (rate-limited)."""
        kind = self._classify(exc)
        now = time.monotonic()
        if kind.said:
            self._count(f"redis_refused_{kind.value}", 1)
        if kind.transient:
            group = self._group(item)
            delay = self._backoff.get(group, (0.0, RETRY_FIRST_S / 2))[1] * 2
            delay = min(max(delay, RETRY_FIRST_S), RETRY_MAX_S)
            self._backoff[group] = (now + delay, delay)
            item.failure = kind
            self._log.emit(
                f"held:{fault_key(kind, exc)}",
                logging.ERROR if kind.said else logging.WARNING,
                f"memory hook: {explain(kind, exc, prefix=item.conversation[0])}; writes wait "
                "in the outage buffer "
                f"({len(self._items)} held), retried until Redis takes them",
            )
            return
        if item.failure is None or not item.failure.refused:
            self._count("writes_set_aside", 1)
            self._count(f"writes_set_aside_{kind.value}", 1)
        item.failure = kind
        self._held[item.conversation] = now + self.refused_retry_s
        self._log.emit(
            f"refused:{fault_key(kind, exc)}",
            logging.ERROR,
            f"memory hook: {explain(kind, exc, prefix=item.conversation[0])}; the writes of "
            f"{item.conversation[1]} are set aside and tried again every "
            f"{self.refused_retry_s:g} s for up to {self.max_age_s:g} s ({self.set_aside} set "
            "aside now); other conversations "
            "are written as usual",
        )

    def _discard(self, item: PendingWrite) -> None:
        """Take one write off the queue (written, or dropped by a forget while being sent)."""
        self._items = deque(i for i in self._items if i is not item)
        if item is self._cancelled:
            self._cancelled = None

    def _drop(self, dropped: PendingWrite, reason: str) -> None:
        """Drop a write, and the later writes of its conversation that go on its exchange
        (each one's tool results answer the call of the write before; the chain ends at the
        conversation's next write that starts anew). Counted as ``writes_lost``, logged."""
        lost = 1
        chain_of: tuple[str, str] | None = dropped.conversation
        kept: deque[PendingWrite] = deque()
        after = False
        for item in self._items:
            if item is dropped:
                after = True
                continue
            if after and chain_of is not None and item.conversation == chain_of:
                if item.goes_on_exchange and item is not self._sending:
                    lost += 1
                    continue
                chain_of = None  # a new exchange: the rest stands on its own
            kept.append(item)
        self._items = kept
        if dropped is self._cancelled:
            self._cancelled = None
        if not any(i.conversation == dropped.conversation for i in kept):
            self._held.pop(dropped.conversation, None)
        kind = dropped.failure.value if dropped.failure is not None else "unreachable"
        self._count("writes_lost", lost)
        self._count(f"writes_lost_{kind}", lost)
        logger.error(
            "memory hook: %s (last failure: %s); dropped %d write(s) of %s",
            reason,
            kind,
            lost,
            dropped.conversation[1],
        )

    async def drain(self, timeout_s: float | None = None) -> None:
        """Wait until the queue is written out, or holds only writes of conversations set
        aside (refused, and not due for another try), or ``timeout_s`` seconds passed."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self._task is not None and not self._task.done():
            if deadline is not None and time.monotonic() >= deadline:
                return
            now = time.monotonic()
            if self._items and all(self._held.get(i.conversation, 0.0) > now for i in self._items):
                return  # only conversations set aside wait (a refusal), not due yet
            await asyncio.sleep(0.01)
