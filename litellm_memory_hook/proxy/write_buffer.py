"""The outage buffer: turns that could not be written wait in the proxy, in order, for Redis.

When a write fails (Redis down, a timeout, the breaker open), the turn goes into a bounded
in-process FIFO queue; one background task writes the queue out, oldest first, as soon as Redis
answers again, backing off from ``RETRY_FIRST_S`` to ``RETRY_MAX_S`` between attempts. While the
queue is not empty, new writes queue behind it, so turns reach Redis in the order they were
answered. Writes are idempotent on ``litellm_call_id``, so a write that reached Redis before its
answer was lost is not stored twice.

Limits (settings): ``write_buffer_max`` items (the oldest is dropped when a new one would pass
it) and ``write_buffer_max_age_s`` seconds (an item older than that is dropped instead of
written). A dropped write takes with it the later writes of its conversation that go on its
exchange (tool results answering its call, and so on), which stored alone would leave tool
results without their call. Drops are counted (``writes_lost``) and logged; the buffer lives in
one process, so a proxy killed during an outage loses what it held.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from litellm_memory_hook.errors import MemoryHookError
from litellm_memory_hook.store.redis_store import now_ms

logger = logging.getLogger("litellm_memory_hook")

RETRY_FIRST_S = 0.2
RETRY_MAX_S = 0.5


@dataclass
class PendingWrite:
    """One turn waiting to be written: the signed record, the reply, the call id.

    ``answered_ms`` (epoch ms) is when the reply came, the time its turn is stored with however
    late the buffer writes it; ``queued_at`` (monotonic seconds) ages the item.
    """

    record: dict[str, Any]
    reply: dict[str, Any] | None
    call_id: str
    partial: bool = False
    queued_at: float = field(default_factory=time.monotonic)
    answered_ms: int = field(default_factory=now_ms)

    @property
    def conversation(self) -> tuple[str, str]:
        """``(key prefix, conversation ref)`` of the write."""
        return str(self.record.get("prefix")), str(self.record.get("ref"))

    @property
    def goes_on_exchange(self) -> bool:
        """True when the write starts with tool results: they answer a call that an earlier
        write of the conversation holds (or Redis does), so they mean nothing without it."""
        pending = self.record.get("pending") or ()
        first = pending[0] if pending else None
        return isinstance(first, dict) and first.get("role") == "tool"


class WriteBuffer:
    """A bounded FIFO of writes with one flusher task.

    Args:
        write: writes one item; raises :class:`MemoryHookError` when Redis fails.
        max_items: most items held (the oldest is dropped past it).
        max_age_s: an item older than this (seconds) is dropped, not written.
        count: called with a counter name and an amount (``writes_lost``, ``write_retried_ok``).
    """

    def __init__(
        self,
        write: Callable[[PendingWrite], Awaitable[None]],
        *,
        max_items: int,
        max_age_s: float,
        count: Callable[[str, int], None],
    ) -> None:
        self._write = write
        self.max_items = max_items
        self.max_age_s = max_age_s
        self._count = count
        self._items: deque[PendingWrite] = deque()
        self._task: asyncio.Task[None] | None = None
        self._sending: PendingWrite | None = None
        self._cancelled: PendingWrite | None = None

    def __len__(self) -> int:
        return len(self._items)

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
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._flush())

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
        """Queue a write and make sure the flusher runs."""
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
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        delay = RETRY_FIRST_S
        while self._items:
            item = self._items[0]
            if item is self._cancelled:  # dropped (a forget) while it was being sent
                self._discard(item)
                continue
            if time.monotonic() - item.queued_at > self.max_age_s:
                self._drop(item, f"waited over {self.max_age_s:.0f} s for Redis")
                continue
            failed: MemoryHookError | None = None
            self._sending = item
            try:
                await self._write(item)
            except MemoryHookError as exc:
                failed = exc
            except Exception:
                logger.exception("memory hook: buffered write failed")
                self._drop(item, "its write failed unexpectedly")
                continue
            finally:
                self._sending = None
            if failed is not None:
                if item is not self._cancelled:
                    logger.warning("memory hook: buffered write failed (%s); retrying", failed)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, RETRY_MAX_S)
                continue
            self._discard(item)
            self._count("write_retried_ok", 1)
            delay = RETRY_FIRST_S

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
        self._count("writes_lost", lost)
        logger.error(
            "memory hook: %s; dropped %d write(s) of %s", reason, lost, dropped.conversation[1]
        )

    async def drain(self, timeout_s: float | None = None) -> None:
        """Wait until the queue is written out (or ``timeout_s`` seconds passed)."""
        task = self._task
        if task is not None and not task.done():
            await asyncio.wait([task], timeout=timeout_s)
