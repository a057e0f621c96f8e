"""A periodic background task that stops between runs, never inside one.

The extraction worker's heartbeat and the metrics publisher each write to Redis every few
seconds from a task of their own. Stopping such a task by cancelling it can cancel a redis-py
call half-way; the client's next call (the heartbeat's delete, the last publish) then waited
forever on a real Redis Cluster in the test suite
(``tests/integration/test_worker_heartbeat.py``; once on a single Redis too). :class:`Periodic`
asks the loop to end, lets a run in flight finish, and cancels only when that takes longer than
``stop_timeout_s``. Its waits use ``asyncio.timeout``: Python 3.11's ``asyncio.wait_for`` can
swallow a cancellation that comes as the awaited call ends (gh-86296), and a loop whose
cancellation was swallowed runs on (the hangs above).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

logger = logging.getLogger("litellm_memory_hook")

#: how long (seconds) :meth:`Periodic.stop` waits for a run in flight before cancelling it.
STOP_TIMEOUT_S = 2.0


class Periodic:
    """Run ``action`` now and then every ``period_s`` seconds on the running event loop, until
    :meth:`stop`.

    Args:
        action: the coroutine function to run; an exception it raises is logged and the next
            run still comes (it must not raise for expected failures such as Redis errors).
        period_s: seconds from the end of one run to the start of the next.
        name: the task's name (and the log's).
        stop_timeout_s: the longest :meth:`stop` waits for a run in flight (seconds).
    """

    def __init__(
        self,
        action: Callable[[], Awaitable[object]],
        period_s: float,
        *,
        name: str,
        stop_timeout_s: float = STOP_TIMEOUT_S,
    ) -> None:
        self.action = action
        self.period_s = period_s
        self.name = name
        self.stop_timeout_s = stop_timeout_s
        self._task: asyncio.Task[None] | None = None
        self._stopping: asyncio.Event | None = None

    @property
    def running(self) -> bool:
        """Whether the task runs."""
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start (once), on the running event loop: the first run is now."""
        if self._task is None:
            self._stopping = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def _run(self) -> None:
        stopping = self._stopping
        assert stopping is not None
        while not stopping.is_set():
            try:
                await self.action()
            except Exception:  # a bug must not stop later runs
                logger.exception("%s failed", self.name)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.period_s):
                    await stopping.wait()
            if cancel_swallowed():
                raise asyncio.CancelledError

    async def stop(self) -> bool:
        """End the loop after the run in flight, if any (cancelled after ``stop_timeout_s``
        seconds: Redis does not answer).

        Returns:
            Whether it had been started (its task may have ended already, cancelled): the
            caller's clean-up after the last run is owed then.
        """
        task, self._task = self._task, None
        if task is None or self._stopping is None:
            return False
        self._stopping.set()
        # asyncio.wait leaves the task's own outcome (an exception, a cancellation) in it, and
        # raises only a cancellation of the caller
        done, _ = await asyncio.wait({task}, timeout=self.stop_timeout_s)
        if not done:
            task.cancel()
            await asyncio.wait({task})
        return True


def cancel_swallowed() -> bool:
    """Whether the current task was asked to cancel and still runs: a call below it caught
    the ``CancelledError`` (the extraction worker's loop was seen polling on after a cancel, now
    and then, on a Redis Cluster client). A loop that checks this between rounds ends anyway.
    (``asyncio.timeout`` cancels and uncancels the task itself: after its block the count is
    back where it was.)"""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def finish_even_if_cancelled(awaitable: Awaitable[object]) -> None:
    """Await ``awaitable`` to its end even when the awaiting task is cancelled meanwhile; the
    cancellation is raised after it (a worker loop's clean-up in its ``finally``)."""
    future = asyncio.ensure_future(awaitable)
    try:
        await asyncio.shield(future)
    except asyncio.CancelledError:
        await future
        raise
