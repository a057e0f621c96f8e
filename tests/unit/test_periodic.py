"""Background loops end when they are stopped or cancelled, even when a call below swallows the
cancellation (seen now and then with the Redis Cluster client: the extraction worker polled on
after a cancel, its heartbeat beating, and tests/integration/test_worker_heartbeat.py hung 3 runs
in 10)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import fakeredis
import pytest

from litellm_memory_hook.periodic import Periodic, cancel_swallowed
from litellm_memory_hook.store.workers import read_workers
from tests.integration.test_worker_heartbeat import _worker


async def _swallow_a_cancel() -> None:
    """A call that catches the CancelledError of its task and returns (a misbehaving library)."""
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.sleep(0.05)


async def test_a_cancel_swallowed_below_still_ends_the_worker_and_deletes_its_beat(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    redis: Any = fakeredis.FakeAsyncRedis()
    worker = _worker(redis, "tp")

    polling = asyncio.Event()

    async def run_due(limit: int = 20) -> list[Any]:
        polling.set()
        await _swallow_a_cancel()
        return []

    monkeypatch.setattr(worker, "run_due", run_due)
    task = asyncio.get_running_loop().create_task(worker.run_forever())
    for _ in range(100):
        if await read_workers(redis, "tp"):
            break
        await asyncio.sleep(0.01)
    polling.clear()
    await polling.wait()  # the cancel comes while the call that swallows it runs
    task.cancel()
    await asyncio.wait({task}, timeout=5)  # it polled on forever before
    assert task.cancelled()
    assert await read_workers(redis, "tp") == []


async def test_periodic_stops_between_runs_and_ends_on_a_swallowed_cancel() -> None:
    runs: list[int] = []
    started = asyncio.Event()

    async def action() -> None:
        runs.append(1)
        started.set()
        await asyncio.sleep(0.05)  # a stop while this runs waits for it

    periodic = Periodic(action, 0.01, name="t")
    periodic.start()
    await started.wait()
    await periodic.stop()
    assert not periodic.running
    done = len(runs)
    await asyncio.sleep(0.05)
    assert len(runs) == done  # no run after stop

    in_action = asyncio.Event()

    async def swallow() -> None:
        in_action.set()
        await _swallow_a_cancel()

    swallowing = Periodic(swallow, 0.01, name="t2")
    swallowing.start()
    await in_action.wait()
    task = swallowing._task
    assert task is not None
    task.cancel()
    await asyncio.wait({task}, timeout=5)  # it ran on before
    assert task.cancelled()


async def test_cancel_swallowed_is_false_after_a_timeout_block() -> None:
    """``asyncio.timeout`` cancels and uncancels its task: no false alarm after it."""
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await asyncio.sleep(1)
    assert not cancel_swallowed()


async def test_a_heartbeat_whose_task_ended_is_still_deleted_at_stop() -> None:
    """The beat task ended before stop (cancelled on its own): stop still deletes the beat."""
    redis: Any = fakeredis.FakeAsyncRedis()
    worker = _worker(redis, "te")
    worker.heartbeat.start()
    for _ in range(100):
        if await read_workers(redis, "te"):
            break
        await asyncio.sleep(0.01)
    task = worker.heartbeat._periodic._task
    assert task is not None
    task.cancel()
    await asyncio.wait({task})
    assert not worker.heartbeat.running
    await worker.heartbeat.stop()
    assert await read_workers(redis, "te") == []
