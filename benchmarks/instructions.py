"""A count of work that the machine's load does not move: executed Python bytecode instructions.

Wall and CPU times of the hook move with the machine's other load (the benchmarks share two
cores with other work); the number of instructions a turn pair executes does not. Hardware
counters (``perf_event_open``'s instructions) would count every instruction, C included, but
this project's machines expose no PMU to their guests (``PERF_COUNT_HW_INSTRUCTIONS``: no such
device), so :class:`BytecodeCounter` counts Python bytecode instructions instead, in process:
``sys.settrace`` with ``frame.f_trace_opcodes`` (Python 3.11 has no ``sys.monitoring``), in
this thread and in the threads started meanwhile. What runs in C (hiredis's parser, orjson,
the regex engine, Redis itself) is not counted, nor the tracing's own calls.

Nor are the event loop's own frames (``asyncio``, ``selectors``; what they call is counted):
how many turns the loop takes, and how many pieces a reply is read in, depend on when Redis's
replies arrive, which the machine's load moves; counted, they moved the total by ~0.5-1.5%
from run to run. Without them it is the same within ~0.5% (a metric's histogram bucket, a
slice's pause, which hang on measured times). Tracing makes Python ~50x slower while it runs,
so the counted calls are few and are not timed.
"""

from __future__ import annotations

import asyncio
import os
import selectors
import sys
import threading
from types import FrameType, TracebackType
from typing import Any

#: what the count is, for table headers and reports
KIND = "Python bytecode instructions (sys.settrace opcode events, event loop's frames excluded)"
#: files whose frames are not counted: the event loop's own (the module docstring)
NOT_COUNTED = (os.path.dirname(asyncio.__file__) + os.sep, selectors.__file__)


class BytecodeCounter:
    """Count the bytecode instructions executed between ``__enter__`` and ``__exit__`` in this
    thread (and in threads started meanwhile: ``threading.settrace``); :attr:`count` holds
    the total. Not reentrant; puts back the trace functions it found."""

    def __init__(self) -> None:
        self.count = 0
        self._previous: tuple[Any, Any] = (None, None)

    def _call(self, frame: FrameType, event: str, arg: object) -> Any:
        if frame.f_code.co_filename.startswith(NOT_COUNTED):
            return None
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        return self._opcode

    def _opcode(self, frame: FrameType, event: str, arg: object) -> Any:
        if event == "opcode":
            self.count += 1
        return self._opcode

    def __enter__(self) -> BytecodeCounter:
        self._previous = (sys.gettrace(), threading.gettrace())
        threading.settrace(self._call)
        sys.settrace(self._call)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        sys.settrace(self._previous[0])
        threading.settrace(self._previous[1])


__all__ = ["KIND", "BytecodeCounter"]
