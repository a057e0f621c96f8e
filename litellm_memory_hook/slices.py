"""Long CPU work on the event loop, in slices that let the other requests through.

A whole-history client's first request stores its whole history (hundreds of turns, up to
megabytes): building, bounding and indexing each turn is pure-Python work on the proxy's event
loop. Done at once it holds every other request for hundreds of milliseconds; a thread does not
help, since pure Python holds the GIL and the loop then waits for it at each of its own steps.
So such work runs in slices of about :data:`SLICE_S` seconds, with a :func:`pause` between two.

:func:`pause` yields to the loop :data:`PAUSE_YIELDS` times, not once: a small request whose
Redis reply arrived during a slice needs two loop turns to run again (the reply's callback
resolves a future, and the future wakes the task on the next turn). With a single yield each
of its round trips waited behind two slices; with three, the reply and the step it wakes run
before the next slice starts, so each round trip waits at most for the slice under way.

Planning a whole history runs in a thread instead (:func:`in_thread`): it is one deep pure
function, not a loop to slice. Then the event loop's thread waits for the GIL at each of its
steps, up to Python's switch interval (5 ms by default) every time: a small request of a few
Redis round trips waited 20-40 ms. While such a thread runs, the interval is
:data:`THREAD_SWITCH_S`, so the loop gets the GIL back within about that long.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: seconds of work in one slice: another request waits at most about that long per step
SLICE_S = 0.002
#: loop turns of one pause (see the module docstring)
PAUSE_YIELDS = 3
#: Python's switch interval (seconds) while :func:`in_thread` work runs
THREAD_SWITCH_S = 0.0005
#: a write of more turns than this (a whole history) pauses before it starts: the post-call
#: hook's own work (reading the record) came just before in the same loop turn
LONG_WRITE_TURNS = 16


async def pause() -> None:
    """Let the event loop run what is ready, and what that makes ready, before going on."""
    for _ in range(PAUSE_YIELDS):
        await asyncio.sleep(0)


class Slicer:
    """The time since the last pause, shared by consecutive steps of one long piece of work
    (building, then indexing, then bounding a history's turns): :meth:`step` pauses once a
    slice is spent, so no step's tail and the next step's head add up to one long slice.

    Args:
        slice_s: seconds of work in one slice.
        clock: seconds, monotonic (``time.perf_counter``).
    """

    def __init__(
        self, slice_s: float = SLICE_S, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.slice_s = slice_s
        self.clock = clock
        self.started = clock()
        #: pauses so far
        self.pauses = 0

    async def step(self) -> None:
        """Pause (:func:`pause`) when the slice under way is spent."""
        if self.clock() - self.started >= self.slice_s:
            await pause()
            self.pauses += 1
            self.started = self.clock()


async def map_sliced(
    function: Callable[[T], R], items: Iterable[T], slicer: Slicer | None = None
) -> list[R]:
    """``[function(item) for item in items]``, pausing whenever a slice of work is spent
    (``slicer``, or a new one; checked after each item: a short list never pauses)."""
    slicer = slicer or Slicer()
    out: list[R] = []
    for item in items:
        out.append(function(item))
        await slicer.step()
    return out


_threads = 0  # in_thread calls under way
_switch_before = 0.0  # the switch interval before the first of them


async def in_thread(function: Callable[[], R]) -> R:
    """``function()`` in a thread, with the switch interval at :data:`THREAD_SWITCH_S` while
    any such call runs (and put back after the last), so the event loop's thread waits at most
    about that long for the GIL at each step (see the module docstring)."""
    global _threads, _switch_before
    if _threads == 0:
        _switch_before = sys.getswitchinterval()
        sys.setswitchinterval(min(THREAD_SWITCH_S, _switch_before))
    _threads += 1
    try:
        return await asyncio.to_thread(function)
    finally:
        _threads -= 1
        if _threads == 0:
            sys.setswitchinterval(_switch_before)


__all__ = [
    "LONG_WRITE_TURNS",
    "PAUSE_YIELDS",
    "SLICE_S",
    "THREAD_SWITCH_S",
    "Slicer",
    "in_thread",
    "map_sliced",
    "pause",
]
