"""Where the proxy's CPU goes (``bench proxy --profile``): py-spy's raw profiles of the memory side
and of the context side, sorted into categories (:func:`category`) and given in milliseconds of
CPU per request, side by side with their difference.

A stack is a tuple of :class:`Frame` from the root (the thread's first frame) to the leaf (the
frame that was running). Its *task part* is what runs under the event loop or a thread's
dispatch (the frames after the deepest of ``Runner.run``, ``_run_once``, ``Handle._run``,
``Thread.run``, ``_WorkItem.run``...): the proxy is started by LiteLLM's command line, so the
root of every stack of its main thread is LiteLLM's. The rules, in order, the first that
matches:

1. a frame of this package (``litellm_memory_hook/``): the hook's own work, split by its entry,
   the outermost of its frames: the pre-call hook, the post-call success hook (its stream hook
   too), the background write (a spawned write task, the outage buffer's flush), the
   response-headers hook, periodic and background tasks (the in-proxy extraction worker, the
   metrics publisher, the periodic tasks), other hook frames (stacks py-spy cut short: their
   outer frames are missing);
2. a frame of redis-py (or hiredis) and no LiteLLM frame in the task part: redis-py's own work
   outside the caller's stack (the tasks its ``wait_for`` starts for a send or a read with a
   timeout; LiteLLM's own Redis client makes such tasks too, on both sides);
3. LiteLLM's logging: a frame of its logging object (``litellm_logging``), its callback
   manager, its integrations and proxy hooks (custom loggers), its cost and spend calculation,
   or ``ProxyLogging``'s loops over the callbacks (not ``track_llm_api_timing``, a timing
   decorator around the upstream call);
4. threads: a ``concurrent.futures`` worker's stack (LiteLLM runs its synchronous
   ``completion`` and some callbacks there);
5. pydantic in the task part (validation and serialisation, whoever asked for it);
6. the rest of LiteLLM (its router, its ``acompletion``, the proxy's request processing, the
   upstream call);
7. the HTTP server (uvicorn, starlette, FastAPI, h11/httptools, anyio) with no LiteLLM frame;
8. the HTTP client (aiohttp, httpx, httpcore) with no LiteLLM frame: the upstream call's
   protocol callbacks;
9. the event loop: a task part that is empty (the loop's own C code, uvloop's: the stack ends at
   ``Runner.run``) or only asyncio's frames;
10. other.

py-spy counts a thread that is running *or runnable* (waiting for a CPU): on a loaded machine a
sample is not a CPU tick. So each side's samples are given two ways: as sampled (samples /
rate / requests) and scaled to the proxy's CPU per request that ``/proc`` read over the same
phase (each category's share of the samples times that CPU), the figures of the table.

The functions here are pure: they take the raw files' text and the number of requests.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

HOOK_PRE = "hook: pre-call"
HOOK_POST = "hook: post-call"
HOOK_WRITE = "hook: background write"
HOOK_HEADERS = "hook: response headers"
HOOK_PERIODIC = "hook: periodic/background tasks"
HOOK_OTHER = "hook: other frames"
REDIS = "redis client, no hook frame"
LOGGING = "litellm logging, callbacks, cost"
THREADS = "threads (concurrent.futures)"
PYDANTIC = "pydantic"
LITELLM = "litellm, the rest"
HTTP_SERVER = "http server"
HTTP_CLIENT = "http client, no litellm frame"
EVENT_LOOP = "event loop"
OTHER = "other"
#: the categories, in the table's order
CATEGORIES = (
    HOOK_PRE,
    HOOK_POST,
    HOOK_WRITE,
    HOOK_HEADERS,
    HOOK_PERIODIC,
    HOOK_OTHER,
    REDIS,
    LOGGING,
    THREADS,
    PYDANTIC,
    LITELLM,
    HTTP_SERVER,
    HTTP_CLIENT,
    EVENT_LOOP,
    OTHER,
)
HOOK_CATEGORIES = CATEGORIES[:6]

HOOK_PACKAGE = "litellm_memory_hook"
REDIS_PACKAGES = frozenset({"redis", "hiredis"})
PYDANTIC_PACKAGES = frozenset({"pydantic", "pydantic_core"})
HTTP_SERVER_PACKAGES = frozenset(
    {"uvicorn", "starlette", "fastapi", "h11", "httptools", "anyio", "uvloop", "websockets"}
)
HTTP_CLIENT_PACKAGES = frozenset({"aiohttp", "httpx", "httpcore", "yarl", "multidict"})
EVENT_LOOP_PACKAGES = frozenset({"asyncio", "selectors", "contextvars", "uvloop"})
#: the frames that run a task or a thread's work (a stack's task part comes after them)
DISPATCH_FRAMES = {
    "asyncio": frozenset(
        {
            "Runner.run",
            "run",
            "BaseEventLoop.run_until_complete",
            "BaseEventLoop.run_forever",
            "BaseEventLoop._run_once",
            "Handle._run",
        }
    ),
    "threading": frozenset({"Thread._bootstrap", "Thread._bootstrap_inner", "Thread.run"}),
    "concurrent": frozenset({"_worker", "_WorkItem.run"}),
}
#: parts of a LiteLLM file's path that make a frame its logging's (rule 3)
LOGGING_PATHS = (
    "litellm_logging",
    "logging_callback_manager",
    "logging_utils",
    "logging_worker",
    "/integrations/",
    "/proxy/hooks/",
    "cost_calculator",
    "llm_cost_calc",
    "spend_tracking",
    "_service_logger",
    "redact_messages",
)
LOGGING_FUNCTIONS = ("ProxyLogging.",)
#: frames of those files that are not logging's work: a timing decorator around the upstream
#: call (what runs under it is the call)
NOT_LOGGING = ("track_llm_api_timing",)


class Frame(NamedTuple):
    """One frame of a sampled stack: its function (py-spy writes ``Class.method``) and file
    (full, or py-spy's short path: ``litellm/router.py``)."""

    function: str
    file: str

    @property
    def package(self) -> str:
        """The top-level package or module of the file (``litellm``, ``asyncio``, ``copy``)."""
        return package_of(self.file)

    def __str__(self) -> str:
        """``function (path)``, the path from its package on (``litellm/router.py``)."""
        return f"{self.function} ({short_path(self.file)})"


Stack = tuple[Frame, ...]

_FRAME = re.compile(r"^(?P<function>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")
_PREFIXES = re.compile(r"^.*/(?:site-packages|dist-packages|lib/python3\.\d+)/")


def package_of(file: str) -> str:
    """The top-level package or module of a frame's file, whether its path is full
    (``/usr/lib/python3.11/asyncio/events.py``: ``asyncio``) or shortened by py-spy
    (``litellm/router.py``: ``litellm``); ``<frozen ...>`` and ``<string>`` are their own."""
    first = short_path(file).lstrip("/").split("/", 1)[0]
    return first[:-3] if first.endswith(".py") else first


def short_path(file: str) -> str:
    """A file's path from its package on: ``litellm/router.py``, ``asyncio/events.py``,
    ``litellm_memory_hook/proxy/hook.py`` (wherever the checkout is)."""
    path = file.replace("\\", "/")
    marker = f"/{HOOK_PACKAGE}/"
    if marker in f"/{path}":
        return HOOK_PACKAGE + "/" + f"/{path}".split(marker, 1)[1]
    return _PREFIXES.sub("", path)


def parse_frame(text: str) -> Frame:
    """``function (file:line)`` as py-spy writes a frame (the line is dropped)."""
    match = _FRAME.match(text.strip())
    if match is None:
        return Frame(text.strip(), "")
    return Frame(match["function"], match["file"])


def parse_raw(text: str) -> Counter[Stack]:
    """py-spy's raw format (collapsed stacks: ``frame;frame;... samples`` a line) as samples per
    stack; a line without a count is skipped, an empty stack kept as ``()``."""
    stacks: Counter[Stack] = Counter()
    for line in text.splitlines():
        head, _, count = line.rstrip().rpartition(" ")
        if not count.isdigit():
            continue
        frames = tuple(parse_frame(f) for f in head.split(";") if f.strip())
        stacks[frames] += int(count)
    return stacks


def _hook_entry(hook_frames: Sequence[Frame]) -> str:
    """The hook category of a stack by its outermost hook frame (the entry LiteLLM or the
    event loop called), with the files under it for the periodic tasks."""
    outer = hook_frames[0].function.rsplit(".", 1)[-1].lower()
    if "response_headers" in outer:
        return HOOK_HEADERS
    if "pre_call" in outer:
        return HOOK_PRE
    if "post_call" in outer:
        return HOOK_POST
    if any(word in outer for word in ("write", "commit", "guarded", "flush", "spawn")):
        return HOOK_WRITE
    files = " ".join(f.file for f in hook_frames)
    periodic_files = ("/extraction/", "periodic", "metrics", "/workers", "heartbeat")
    periodic_words = ("run", "loop", "tick", "publish", "sweep", "heartbeat", "periodic")
    if any(p in files for p in periodic_files) or any(w in outer for w in periodic_words):
        return HOOK_PERIODIC
    return HOOK_OTHER


def _is_logging(frame: Frame) -> bool:
    if frame.function.startswith(LOGGING_FUNCTIONS):
        return True
    if frame.function.startswith(NOT_LOGGING):
        return False
    return frame.package == "litellm" and any(p in frame.file for p in LOGGING_PATHS)


def _is_dispatch(frame: Frame) -> bool:
    return frame.function in DISPATCH_FRAMES.get(frame.package, ())


def task_part(stack: Stack) -> Stack:
    """The frames after the deepest frame that dispatches a task or a thread's work (the whole
    stack when there is none: py-spy cut it short)."""
    for index in range(len(stack) - 1, -1, -1):
        if _is_dispatch(stack[index]):
            return stack[index + 1 :]
    return stack


def category(stack: Stack) -> str:
    """The category of one sampled stack (the rules of the module docstring)."""
    hook = [f for f in stack if f.package == HOOK_PACKAGE]
    if hook:
        return _hook_entry(hook)
    task = task_part(stack)
    present = {f.package for f in task}
    litellm = "litellm" in present
    if present & REDIS_PACKAGES and not litellm:
        return REDIS
    if any(_is_logging(f) for f in stack):
        return LOGGING
    if any(f.package == "concurrent" and f.function == "_worker" for f in stack):
        return THREADS
    if present & PYDANTIC_PACKAGES:
        return PYDANTIC
    if litellm:
        return LITELLM
    if present & HTTP_SERVER_PACKAGES:
        return HTTP_SERVER
    if present & HTTP_CLIENT_PACKAGES:
        return HTTP_CLIENT
    if stack and present <= EVENT_LOOP_PACKAGES:
        return EVENT_LOOP
    return OTHER


def per_category(stacks: Mapping[Stack, int]) -> Counter[str]:
    """Samples per category."""
    out: Counter[str] = Counter()
    for stack, samples in stacks.items():
        out[category(stack)] += samples
    return out


def per_leaf(stacks: Mapping[Stack, int]) -> Counter[tuple[str, str]]:
    """Samples per (category, leaf frame) (the frame that was running)."""
    out: Counter[tuple[str, str]] = Counter()
    for stack, samples in stacks.items():
        leaf = str(stack[-1]) if stack else "(no frame)"
        out[(category(stack), leaf)] += samples
    return out


@dataclass
class SideProfile:
    """One profiled phase: the stacks py-spy sampled, the requests sent meanwhile, the proxy's
    CPU seconds over the phase (``/proc``), the requests that failed."""

    stacks: Counter[Stack]
    requests: int
    cpu_s: float = 0.0
    errors: int = 0

    @property
    def samples(self) -> int:
        return sum(self.stacks.values())

    def sampled_ms(self, samples: float, rate: int) -> float:
        """Samples as milliseconds per request (samples / rate / requests)."""
        return samples / rate * 1000 / max(self.requests, 1)

    @property
    def cpu_ms(self) -> float:
        """The proxy's CPU per request over the phase (``/proc``), ms."""
        return self.cpu_s * 1000 / max(self.requests, 1)

    def scale(self, rate: int) -> float:
        """CPU per sampled millisecond: the proxy's CPU per request over the sampled
        milliseconds per request (1 when either is unknown); under 1 on a loaded machine."""
        sampled = self.sampled_ms(self.samples, rate)
        return self.cpu_ms / sampled if sampled > 0 and self.cpu_ms > 0 else 1.0


@dataclass
class ProfileBreakdown:
    """The memory side against the context side, per category and per leaf frame."""

    memory: SideProfile
    context: SideProfile
    rate: int
    top: int = 15

    def _figures(self, memory_samples: int, context_samples: int) -> dict[str, float]:
        """CPU ms per request of each side (scaled), their difference, the sampled ms."""
        on = self.memory.sampled_ms(memory_samples, self.rate)
        off = self.context.sampled_ms(context_samples, self.rate)
        on_cpu, off_cpu = on * self.memory.scale(self.rate), off * self.context.scale(self.rate)
        return {
            "memory_ms": round(on_cpu, 3),
            "context_ms": round(off_cpu, 3),
            "difference_ms": round(on_cpu - off_cpu, 3),
            "memory_sampled_ms": round(on, 3),
            "context_sampled_ms": round(off, 3),
        }

    def rows(self) -> list[dict[str, Any]]:
        """Per category: CPU ms per request on each side, their difference, and the sampled
        ms per request on each side."""
        memory, context = per_category(self.memory.stacks), per_category(self.context.stacks)
        extra = sorted((set(memory) | set(context)) - set(CATEGORIES))
        return [
            {"category": name, **self._figures(memory[name], context[name])}
            for name in (*CATEGORIES, *extra)
        ]

    def leaves(self) -> list[dict[str, Any]]:
        """The :attr:`top` leaf frames the memory side spends most more on (CPU ms per
        request), each with its category."""
        memory, context = per_leaf(self.memory.stacks), per_leaf(self.context.stacks)
        keys = set(memory) | set(context)
        figures = {key: self._figures(memory[key], context[key]) for key in keys}
        ranked = sorted(keys, key=lambda key: (-figures[key]["difference_ms"], key))
        return [
            {"leaf": leaf, "category": name, **figures[(name, leaf)]}
            for name, leaf in ranked[: self.top]
        ]

    def as_json(self) -> dict[str, Any]:
        rows = self.rows()

        def total(name: str, chosen: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
            out: dict[str, Any] = {"category": name}
            for key in ("memory_ms", "context_ms", "difference_ms"):
                out[key] = round(float(sum(r[key] for r in chosen)), 3)
            for key in ("memory_sampled_ms", "context_sampled_ms"):
                out[key] = round(float(sum(r[key] for r in chosen)), 3)
            return out

        sides = {"memory": self.memory, "context": self.context}
        return {
            "rate": self.rate,
            "requests": {k: v.requests for k, v in sides.items()},
            "errors": {k: v.errors for k, v in sides.items()},
            "samples": {k: v.samples for k, v in sides.items()},
            "cpu_ms_per_request": {k: round(v.cpu_ms, 3) for k, v in sides.items()},
            "cpu_per_sampled_ms": {k: round(v.scale(self.rate), 4) for k, v in sides.items()},
            "categories": rows,
            "hook_total": total("hook", [r for r in rows if r["category"] in HOOK_CATEGORIES]),
            "total": total("total", rows),
            "top_leaves": self.leaves(),
        }


def profile_tables(profile: Mapping[str, Any], title: str) -> list[Any]:
    """Two rich tables of :meth:`ProfileBreakdown.as_json`: the categories (CPU ms per
    request, the sampled ms beside them) with the totals, then the top leaf frames of the
    difference."""
    from rich.table import Table

    table = Table(title=title)
    columns = ("category", "memory ms/req", "context ms/req", "difference")
    for column in (*columns, "sampled: memory", "sampled: context"):
        table.add_column(column, justify="left" if column == "category" else "right")
    for row in profile["categories"]:
        table.add_row(*_cells(row), *_sampled(row))
    table.add_section()
    hook = {**profile["hook_total"], "category": "the hook's frames, all"}
    table.add_row(*_cells(hook), *_sampled(hook))
    every = {**profile["total"], "category": "all (= the proxy's CPU, /proc)"}
    table.add_row(*_cells(every), *_sampled(every))
    leaves = Table(title=f"top {len(profile['top_leaves'])} leaf frames of the difference")
    for column in ("leaf frame", *columns):
        leaves.add_column(
            column, justify="left" if column in ("leaf frame", "category") else "right"
        )
    for row in profile["top_leaves"]:
        leaves.add_row(row["leaf"], *_cells(row))
    return [table, leaves]


def _cells(row: Mapping[str, Any]) -> list[str]:
    return [
        str(row["category"]),
        f"{row['memory_ms']:.2f}",
        f"{row['context_ms']:.2f}",
        f"{row['difference_ms']:+.2f}",
    ]


def _sampled(row: Mapping[str, Any]) -> list[str]:
    return [f"{row['memory_sampled_ms']:.2f}", f"{row['context_sampled_ms']:.2f}"]


__all__ = [
    "CATEGORIES",
    "Frame",
    "ProfileBreakdown",
    "SideProfile",
    "category",
    "package_of",
    "parse_raw",
    "per_category",
    "per_leaf",
    "profile_tables",
    "short_path",
    "task_part",
]
