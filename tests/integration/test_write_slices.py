"""A whole history's write runs in slices: other requests are not held (issue 27 item 1).

A whole-history client's first request stores every turn it sent (hundreds, up to megabytes):
the post-call write builds, indexes and bounds each one on the proxy's event loop. It did the
building and the bounding of all of them at once (~10-25 ms of CPU each at 1 MB, one chunk),
and paused once per 4 ms indexing slice with a single loop turn, so another request's Redis
round trip waited behind two slices. :mod:`litellm_memory_hook.slices` keeps every chunk to
about 2 ms and lets the callbacks a slice made ready, and what they wake, run first.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from litellm_memory_hook.core.models import stored_text
from litellm_memory_hook.engine import commit as commit_module
from litellm_memory_hook.slices import PAUSE_YIELDS, SLICE_S, Slicer, map_sliced, pause
from litellm_memory_hook.store.keys import ConversationKeys
from litellm_memory_hook.store.redis_store import MemoryStore
from tests.support.hook_calls import Auth, make_hook, model_response


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_map_sliced_is_a_list_comprehension_that_pauses_once_per_slice() -> None:
    clock = FakeClock()
    slicer = Slicer(slice_s=0.002, clock=clock)

    def costly(x: int) -> int:
        clock.now += 0.001  # half a slice each
        return x * 2

    assert await map_sliced(costly, range(10), slicer) == [x * 2 for x in range(10)]
    assert slicer.pauses == 5
    short = Slicer(clock=FakeClock())  # no time passes: never pauses
    assert await map_sliced(str, range(1000), short) == [str(x) for x in range(1000)]
    assert short.pauses == 0


async def test_a_pause_lets_a_reply_and_the_step_it_wakes_run_before_the_next_slice() -> None:
    """A small request's Redis reply resolves a future (one loop turn) that wakes its task (the
    next): between two slices of long work, each of its round trips completes."""
    log: list[str] = []

    async def small() -> None:
        loop = asyncio.get_running_loop()
        for _ in range(4):
            reply: asyncio.Future[None] = loop.create_future()
            loop.call_soon(reply.set_result, None)  # the reply's callback, then the wake-up
            await reply
            log.append("S")

    async def large() -> None:
        for _ in range(6):
            log.append("L")  # one slice of work
            await pause()

    await asyncio.gather(large(), small())
    # until the small task is done, no two slices follow each other: each of its round trips
    # waits behind one slice at most (with a pause of one loop turn: "LLSLLSLLS")
    order = "".join(log)
    assert order.count("S") == 4 and "LL" not in order[: order.rindex("S")], order
    assert PAUSE_YIELDS >= 3


def _whole_history(turns: int, chars: int) -> list[dict[str, Any]]:
    messages = []
    for i in range(turns):
        role = "user" if i % 2 == 0 else "assistant"
        text = f"{i} " + ("Alice told Bob about the harbour in Lisbon. " * (chars // 44 + 1))
        messages.append({"role": role, "content": text[:chars]})
    if messages[-1]["role"] == "user":
        messages.append({"role": "assistant", "content": "I see."})
    return [*messages, {"role": "user", "content": "What did we talk about?"}]


def _costing(function: Callable[..., Any], seconds: float) -> Callable[..., Any]:
    """``function``, plus ``seconds`` of CPU per call (a turn's work on a slow machine)."""

    def slow(*args: Any, **kwargs: Any) -> Any:
        until = time.thread_time() + seconds
        while time.thread_time() < until:
            pass
        return function(*args, **kwargs)

    return slow


async def test_a_whole_history_write_never_holds_the_loop_for_long(
    real_redis: aioredis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """200 turns, each made to cost 1 ms of CPU to build, to index and to bound (600 ms in
    all): while the post-call write runs, the event loop's longest stretch of this thread's
    CPU time without a turn for other work stays within a few slices (before: the building and
    the bounding each ran all 200 at once, 200 ms). Every turn is stored, in order."""
    hook = make_hook(real_redis, prefix)
    messages = _whole_history(200, 400)
    data = {
        "model": "demo",
        "user": "u-slices",
        "messages": messages,
        "litellm_call_id": "whole-1",
    }
    out = await hook.async_pre_call_hook(Auth(), None, data, "acompletion")
    assert out is not None
    monkeypatch.setattr(commit_module, "indexed", _costing(commit_module.indexed, 1e-3))
    monkeypatch.setattr(MemoryStore, "_bounded", _costing(MemoryStore._bounded, 1e-3))
    chunks: list[float] = []
    done = False

    async def ticker() -> None:
        last = time.thread_time()
        while not done:
            await asyncio.sleep(0)
            now = time.thread_time()
            chunks.append(now - last)
            last = now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    await hook.async_post_call_success_hook(out, Auth(), model_response("Noted."))
    await hook.drain()
    done = True
    await task
    # the first stretch holds the post-call hook's own reading of the record
    longest = max(chunks[1:])
    assert longest < 8 * SLICE_S, f"{longest * 1000:.1f} ms"
    assert len(chunks) > 100  # it did pause, often
    keys = ConversationKeys.for_ids(prefix, "master", "u-slices", "demo")
    stored = [stored_text(json.loads(m)) for m in await real_redis.zrange(keys.turns, 0, -1)]
    assert stored == [m["content"] for m in messages] + ["Noted."]
    assert hook.counters["turns_stored"] == len(messages) + 1


async def test_planning_in_a_thread_lowers_the_switch_interval_until_the_last_ends() -> None:
    """A thread of pure Python holds the GIL up to the switch interval each time the event
    loop's thread asks for it (5 ms by default, at every step of another request). While
    :func:`in_thread` work runs, the interval is THREAD_SWITCH_S; after the last one ends it is
    what it was, also when the work raised."""
    import sys
    import threading

    from litellm_memory_hook.slices import THREAD_SWITCH_S, in_thread

    before = sys.getswitchinterval()
    seen: list[float] = []
    gate = threading.Event()

    def work() -> int:
        gate.wait(5)
        seen.append(sys.getswitchinterval())
        return 7

    def fails() -> int:
        raise ValueError("bad history")

    first = asyncio.ensure_future(in_thread(work))
    second = asyncio.ensure_future(in_thread(work))
    await asyncio.sleep(0.05)
    assert sys.getswitchinterval() == pytest.approx(THREAD_SWITCH_S)
    gate.set()
    assert await first == 7 and await second == 7
    assert seen == [pytest.approx(THREAD_SWITCH_S)] * 2
    assert sys.getswitchinterval() == pytest.approx(before)
    with pytest.raises(ValueError):
        await in_thread(fails)
    assert sys.getswitchinterval() == pytest.approx(before)
