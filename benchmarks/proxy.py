"""Benchmark: requests per second and latency through a real LiteLLM proxy, hook on and off.

One run starts the package's stand-in model and one LiteLLM proxy process with the memory hook
(``litellm_memory_hook.proxy_callback.memory_hook``) and two aliases on the same stand-in:
``bench-memory`` (memory enabled, with a ``system_prompt``) and ``bench-plain`` (no memory: the
hook passes it through). For each number of clients (``--clients 1,32``), that many concurrent
clients send chat requests as an app that sends only the new message does, one user per client,
each going through a conversation that grows (:func:`conversation_lines`; every user's stored
history is first seeded with ``history`` messages by one whole-history request, so the recent
window is full from the start). The same lines go to both aliases.

A third side, ``context`` (``--context-side``, on by default), tells the hook's own cost from
LiteLLM's: the plain alias is sent the very messages the hook built for the memory alias (read
back from the stand-in's record of the warm-up requests: system message with the memory block,
the recent window, the new message). The proxy's work grows with the request (parsing,
validation, logging, the upstream call) whatever the hook costs, so ``context/off`` is the floor
under ``on/off`` that no hook could beat, and ``on/context`` the hook's own share.

The sides run in the same proxy, in rounds whose order rotates (on-off-context, off-context-on,
...), so a slow moment of the machine (other processes, the other engineers' tests) hits them
alike; the spread of the per-round throughput ratios is reported as the noise. Per side:
requests per second (requests / wall time of its rounds), latency percentiles (p50 / p95 / p99,
ms, every request), CPU milliseconds of the proxy process per request (``/proc``: the proxy's
own cost, less disturbed by the machine than wall time) and of the stand-in, and the pre-call
hook's time inside the proxy (``x-memory-hook-ms`` of the requests sent with
``x-memory-debug: 1``, one in :data:`DEBUG_EVERY`, on every side).

The post-call write's cost is measured in-process (:func:`write_cost`): a
:class:`~litellm_memory_hook.proxy.hook.MemoryHook` on the same Redis runs the pre-call hook and
``async_post_call_success_hook`` for a growing conversation, timing the post-call hook, its
``_write`` (the Lua append with the user index, the extraction schedule) and the record's HMAC
signature, and a bare redis-py round trip (``PING``, wall and CPU time): the floor under each of
the hook's Redis calls (two in pre-call: the read and the fetch of recalled lines; two in
post-call: the append and the schedule).

Extraction (``--extraction``): ``proxy`` (the default deployment) runs the worker inside the
proxy: every 12 stored messages a conversation is due and the worker calls the stand-in through
the proxy's router, a cost of memory that the hook-on side pays in the proxy's own CPU.
``worker`` runs it as a separate ``litellm-memory worker`` process
(``extraction.worker_in_proxy: false``) calling the stand-in directly (``extraction.base_url``),
as a deployment under load does (docker-compose.yml): the proxy then pays only the hook. ``off``
writes no extraction job at all.

Profile (``profile_requests``): after the timed rounds at the largest number of clients, one
more phase per side, the memory alias then the context side, each of that many requests, while
py-spy samples the proxy process (:mod:`benchmarks.py_spy`); :mod:`benchmarks.proxy_profile`
sorts the samples into categories (the hook's steps, the Redis client, LiteLLM's logging, the
rest of LiteLLM, pydantic, the HTTP server, ...) in ms of CPU per request, side by side.

Keys go under ``membench-proxy-<hex>:`` and are deleted at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import httpx
import redis

from benchmarks.keys import delete_prefix, run_prefix
from benchmarks.proxy_profile import ProfileBreakdown, SideProfile, parse_raw
from benchmarks.proxy_report import (
    ClientsResult,
    ProxyBenchReport,
    SideStats,
)
from benchmarks.proxy_talk import MEMORY_ALIAS, PLAIN_ALIAS, SYSTEM_PROMPT, Conversations
from benchmarks.proxy_write import write_cost
from benchmarks.py_spy import RATE, Recording
from litellm_memory_hook.core.messages import content_text
from litellm_memory_hook.store.keys import due_key, stats_key
from litellm_memory_hook.tools.processes import PROXY_ENV, spawn, terminate_all, worker_command
from litellm_memory_hook.tools.stack import Stack, stack

PREFIX_STEM = "membench-proxy"
ExtractionMode = Literal["proxy", "worker", "off"]
EXTRACTION_MODES: tuple[ExtractionMode, ...] = ("proxy", "worker", "off")
#: one request in this many (per side) is sent with ``x-memory-debug: 1``.
DEBUG_EVERY = 4
#: most rounds per number of clients (each round runs both sides once).
MAX_ROUNDS = 10

Progress = Callable[[str], None]


# --- processes -------------------------------------------------------------------------------


def bench_config(
    standin_port: int,
    *,
    prefix: str,
    redis_url: str,
    master_key: str,
    extraction: ExtractionMode,
) -> dict[str, Any]:
    """The run's proxy config: the two aliases on the stand-in, the hook, the prefix."""
    params = {
        "model": "openai/standin",
        "api_base": f"http://127.0.0.1:{standin_port}/v1",
        "api_key": "not-needed",
    }
    config = {
        "model_list": [
            {
                "model_name": MEMORY_ALIAS,
                "litellm_params": dict(params),
                "model_info": {"memory": {"enabled": True, "system_prompt": SYSTEM_PROMPT}},
            },
            {"model_name": PLAIN_ALIAS, "litellm_params": dict(params)},
        ],
        "litellm_settings": {"callbacks": "litellm_memory_hook.proxy_callback.memory_hook"},
        "callback_settings": {
            "memory": {
                "storage": {"key_prefix": prefix},
                "redis": {"url": redis_url},
                "extraction": {
                    "enabled": extraction != "off",
                    "worker_in_proxy": extraction == "proxy",
                    "base_url": f"http://127.0.0.1:{standin_port}/v1",
                    "api_key": "not-needed",
                },
                "gc_freeze": True,  # as the shipped config.yaml
            }
        },
        "general_settings": {"master_key": master_key},
    }
    return config


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (Linux ``/proc``; 0 elsewhere or when it is
    gone). The proxy runs one worker in one process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


#: the counters of a job's end (:mod:`litellm_memory_hook.extraction.worker`; a deferred job
#: is due again, a job cut by a shutdown runs again).
JOB_OUTCOMES = (
    "jobs_committed",
    "jobs_failed",
    "jobs_conflict",
    "jobs_nothing_new",
    "jobs_discarded",
    "jobs_deferred",
)


def process_rss_kb(pid: int) -> int:
    """A process's resident memory (KiB, ``VmRSS`` of ``/proc/<pid>/status``); 0 when it
    cannot be read (not Linux, the process gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return 0
    return 0


@dataclass
class BenchStack:
    """The running processes of one benchmark (:func:`bench_stack`): the proxy's base URL and
    master key, the pids whose CPU is read, the run's key prefix and Redis."""

    base: str
    master_key: str
    proxy_pid: int
    standin_pid: int
    worker_pid: int | None = None
    prefix: str = ""
    redis_url: str = ""
    #: the stand-in's ``http://127.0.0.1:<port>`` (its record of what the model received)
    standin_url: str = ""

    def extraction_stats(self, settle_s: float = 30.0) -> dict[str, int]:
        """The extraction job counters of the run (``mem:stats``: jobs run, committed, ...),
        read once the jobs the run made due have ended: none is due now and every job run has
        an outcome (committed, failed, conflict, nothing new, discarded), or ``settle_s``
        seconds passed. Read at once, a fast run counted the jobs still running as neither
        committed nor failed."""
        client = redis.Redis.from_url(self.redis_url)
        try:
            deadline = time.monotonic() + settle_s
            while True:
                raw = cast(dict[bytes, bytes], client.hgetall(stats_key(self.prefix)))
                stats = {k.decode(): int(v) for k, v in sorted(raw.items())}
                ended = sum(stats.get(name, 0) for name in JOB_OUTCOMES)
                due_now = client.zcount(due_key(self.prefix), "-inf", int(time.time() * 1000))
                if (not due_now and ended >= stats.get("jobs_run", 0)) or (
                    time.monotonic() >= deadline
                ):
                    return stats
                time.sleep(0.1)
        finally:
            client.close()


@contextlib.contextmanager
def bench_stack(
    redis_url: str, prefix: str, folder: Path, *, extraction: ExtractionMode
) -> Iterator[BenchStack]:
    """The stand-in and the proxy, started together
    (:func:`litellm_memory_hook.tools.stack.stack`), and with ``extraction="worker"`` a
    standalone worker; stopped (and the keys deleted) after."""
    master_key = f"sk-bench-{secrets.token_hex(8)}"
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("LITELLM_MEMORY_")}
    redis_env = {"REDIS_URL": redis_url, "LITELLM_MEMORY_REDIS__URL": redis_url}

    def config(standin_port: int) -> dict[str, Any]:
        return bench_config(
            standin_port,
            prefix=prefix,
            redis_url=redis_url,
            master_key=master_key,
            extraction=extraction,
        )

    worker: list[subprocess.Popen[bytes]] = []
    with stack(
        folder,
        config,
        prefix=prefix,
        redis_env=redis_env,
        keys=redis.Redis.from_url(redis_url),
        kind=Stack,
        env=base_env,
    ) as running:
        if extraction == "worker":
            worker_env = {**base_env, **PROXY_ENV, **redis_env}
            command = worker_command(folder / "config.yaml")
            worker.append(spawn(command, folder / "worker.log", cwd=folder, env=worker_env))
        try:
            yield BenchStack(
                running.proxy,
                master_key,
                running.processes.proxy.pid,
                running.processes.standin.pid,
                worker[0].pid if worker else None,
                prefix,
                redis_url,
                running.standin_url,
            )
        finally:
            terminate_all(worker)


# --- driving the proxy -----------------------------------------------------------------------


class _Driver:
    def __init__(self, stack: BenchStack, run_id: str, users: int, seed: int) -> None:
        self.stack = stack
        self.run_id = run_id
        self.talk = Conversations(users, seed)
        self.headers = {"Authorization": f"Bearer {stack.master_key}"}
        self.seeded: set[int] = set()
        self.sent = 0

    def user(self, index: int) -> str:
        return f"{self.run_id}-u{index}"

    async def seed(self, http: httpx.AsyncClient, users: int, history: int) -> None:
        """Seed each new user's memory conversation with ``history`` earlier messages (one
        whole-history request each; an empty store is seeded from a client's history)."""
        wanted = [u for u in range(users) if u not in self.seeded]
        if not history or not wanted:
            self.seeded.update(wanted)
            return

        async def one(user: int) -> None:
            messages = [*self.talk.history(user, history), {"role": "user", "content": "Hi!"}]
            body = {"model": MEMORY_ALIAS, "user": self.user(user), "messages": messages}
            response = await http.post(
                f"{self.stack.base}/v1/chat/completions", json=body, headers=self.headers
            )
            if response.status_code != 200:
                raise RuntimeError(f"seeding failed: {response.status_code} {response.text[:300]}")

        for start in range(0, len(wanted), 8):
            await asyncio.gather(*(one(u) for u in wanted[start : start + 8]))
        self.seeded.update(wanted)

    async def built_messages(self, http: httpx.AsyncClient) -> list[list[dict[str, Any]]]:
        """The message lists the hook sent the model for the memory alias since the stand-in's
        record was last cleared (its first message is the system message with the alias's
        rules), then clears the record (it would grow with every request of the run).

        Raises:
            RuntimeError: the record holds no such request.
        """
        record = f"{self.stack.standin_url}/_standin/requests"
        response = await http.get(record)
        response.raise_for_status()
        built = [
            body["messages"]
            for body in response.json()
            if isinstance(body, dict)
            and isinstance(body.get("messages"), list)
            and body["messages"]
            and body["messages"][0].get("role") == "system"
            and SYSTEM_PROMPT in str(body["messages"][0].get("content"))
        ]
        (await http.delete(record)).raise_for_status()
        if not built:
            raise RuntimeError("the stand-in recorded no request the hook built")
        return built

    async def side(
        self,
        http: httpx.AsyncClient,
        alias: str,
        clients: int,
        requests: int,
        stats: SideStats,
        *,
        messages: Sequence[list[dict[str, Any]]] = (),
    ) -> None:
        """``requests`` requests to ``alias`` from ``clients`` concurrent clients (one user
        each, each waiting for its reply before its next message): each sends its next
        conversation line, or, given ``messages``, one of those lists (cycled)."""
        left = requests

        async def client(user: int) -> None:
            nonlocal left
            while left > 0:
                left -= 1
                self.sent += 1
                headers = dict(self.headers)
                debug = self.sent % DEBUG_EVERY == 0
                if debug:
                    headers["x-memory-debug"] = "1"
                body = {
                    "model": alias,
                    "user": self.user(user),
                    "messages": (
                        messages[self.sent % len(messages)]
                        if messages
                        else [{"role": "user", "content": self.talk.next_line(alias, user)}]
                    ),
                }
                started = time.perf_counter()
                try:
                    response = await http.post(
                        f"{self.stack.base}/v1/chat/completions", json=body, headers=headers
                    )
                except httpx.HTTPError:
                    stats.errors += 1
                    continue
                elapsed = (time.perf_counter() - started) * 1000
                if response.status_code != 200:
                    stats.errors += 1
                    continue
                stats.latencies_ms.append(elapsed)
                hook_ms = response.headers.get("x-memory-hook-ms")
                if hook_ms:
                    with contextlib.suppress(ValueError):
                        stats.hook_ms.append(float(hook_ms))

        proxy_cpu = process_cpu_seconds(self.stack.proxy_pid)
        proxy_rss = process_rss_kb(self.stack.proxy_pid)
        standin_cpu = process_cpu_seconds(self.stack.standin_pid)
        worker = self.stack.worker_pid
        worker_cpu = process_cpu_seconds(worker) if worker else 0.0
        started = time.perf_counter()
        await asyncio.gather(*(client(u) for u in range(min(clients, requests))))
        seconds = time.perf_counter() - started
        stats.proxy_cpu_s += process_cpu_seconds(self.stack.proxy_pid) - proxy_cpu
        stats.proxy_rss_growth_kb += process_rss_kb(self.stack.proxy_pid) - proxy_rss
        stats.standin_cpu_s += process_cpu_seconds(self.stack.standin_pid) - standin_cpu
        if worker:
            stats.worker_cpu_s += process_cpu_seconds(worker) - worker_cpu
        stats.seconds += seconds
        stats.requests += requests
        stats.round_rps.append(requests / seconds if seconds > 0 else 0.0)


def _shape(lists: Sequence[list[dict[str, Any]]]) -> dict[str, float]:
    """How many message lists, their median length (messages) and size (characters of text)."""
    return {
        "lists": len(lists),
        "messages_p50": statistics.median(len(m) for m in lists),
        "chars_p50": statistics.median(
            sum(len(content_text(x.get("content"))) for x in m) for m in lists
        ),
    }


def _rounds(requests: int, clients: int) -> int:
    """Rounds per number of clients: at least 2 (on and off each lead once; the context side
    leads from the third round), each round at least ~2 requests per client, at most
    :data:`MAX_ROUNDS`."""
    return max(2, min(MAX_ROUNDS, requests // max(2 * clients, 10)))


async def _profile(
    driver: _Driver,
    http: httpx.AsyncClient,
    clients: int,
    built: Sequence[list[dict[str, Any]]],
    requests: int,
    folder: Path,
    progress: Progress,
) -> ProfileBreakdown:
    """One phase of ``requests`` requests per side (memory alias, then the context side) while
    py-spy samples the proxy (``profile-<side>.txt`` in ``folder``); the proxy's CPU is read
    over the same span as the samples."""
    sides: dict[str, SideProfile] = {}
    pid = driver.stack.proxy_pid
    for name, alias, messages in (("memory", MEMORY_ALIAS, ()), ("context", PLAIN_ALIAS, built)):
        progress(f"{clients} clients: profiling the {name} side ({requests} requests)")
        stats = SideStats()
        with Recording(pid, folder / f"profile-{name}.txt", RATE) as spy:
            cpu = process_cpu_seconds(pid)
            await driver.side(http, alias, clients, requests, stats, messages=messages)
            await asyncio.sleep(0.2)  # the work LiteLLM leaves after the last replies
            cpu = process_cpu_seconds(pid) - cpu
            raw = spy.stop()
        sides[name] = SideProfile(parse_raw(raw), stats.requests, cpu, stats.errors)
    return ProfileBreakdown(sides["memory"], sides["context"], RATE)


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


async def _drive(
    stack: BenchStack,
    clients_list: Sequence[int],
    requests: int,
    history: int,
    progress: Progress,
    context_side: bool,
    profile: tuple[int, Path] | None = None,
) -> tuple[list[ClientsResult], ProfileBreakdown | None]:
    driver = _Driver(stack, uuid.uuid4().hex[:8], max(clients_list), seed=7)
    results: list[ClientsResult] = []
    profiled: ProfileBreakdown | None = None
    for clients in clients_list:
        limits = httpx.Limits(max_connections=clients + 8, max_keepalive_connections=clients + 8)
        async with httpx.AsyncClient(timeout=120, limits=limits) as http:
            progress(f"{clients} clients: seeding {history} messages per user")
            await driver.seed(http, clients, history)
            if context_side:
                await http.delete(f"{stack.standin_url}/_standin/requests")
            # connections, caches, first requests: not counted
            await driver.side(http, MEMORY_ALIAS, clients, clients, SideStats())
            built = await driver.built_messages(http) if context_side else []
            await driver.side(http, PLAIN_ALIAS, clients, clients, SideStats())
            on, off = SideStats(), SideStats()
            sides: list[tuple[str, SideStats, Sequence[list[dict[str, Any]]]]] = [
                (MEMORY_ALIAS, on, ()),
                (PLAIN_ALIAS, off, ()),
            ]
            context = None
            if built:
                context = SideStats()
                await driver.side(http, PLAIN_ALIAS, clients, clients, SideStats(), messages=built)
                sides.append((PLAIN_ALIAS, context, built))
            rounds = _rounds(requests, clients)
            for index, share in enumerate(_split(requests, rounds)):
                progress(f"{clients} clients: round {index + 1}/{rounds}")
                # each side leads in turn: on-off(-context), off(-context)-on, ...
                turn = index % len(sides)
                for alias, stats, messages in sides[turn:] + sides[:turn]:
                    await driver.side(http, alias, clients, share, stats, messages=messages)
            shape = _shape(built) if built else None
            results.append(ClientsResult(clients, rounds, on, off, context, shape))
            if profile and built and profiled is None and clients == max(clients_list):
                profiled = await _profile(driver, http, clients, built, *profile, progress)
    return results, profiled


# --- the run ---------------------------------------------------------------------------------


def run_proxy_bench(
    redis_url: str,
    *,
    clients: Sequence[int] = (1, 32),
    requests: int = 400,
    history: int = 200,
    extraction: ExtractionMode = "proxy",
    write_samples: int | None = None,
    log_dir: Path | None = None,
    progress: Progress | None = None,
    context_side: bool = True,
    profile_requests: int = 0,
) -> ProxyBenchReport:
    """Run the benchmark (the module docstring).

    Args:
        redis_url: a real Redis (keys under ``membench-proxy-<hex>:``, deleted at the end).
        clients: the numbers of concurrent clients to run, one after the other.
        requests: timed requests per side (hook on, hook off) at each number of clients.
        history: messages each user's memory conversation holds before the timed requests.
        extraction: ``proxy``, ``worker`` or ``off`` (the module docstring).
        write_samples: turn pairs of the in-process write measurement (default: ``requests``,
            at most 300; 0: skipped).
        log_dir: keep the processes' logs and config here (default: a temporary folder).
        progress: called with a short description of each phase.
        context_side: also run the context side (the module docstring).
        profile_requests: when positive, the profiled phase's requests per side (the module
            docstring; needs the context side and py-spy). Its raw files go to the log folder.

    Raises:
        RuntimeError: a process did not start, seeding failed, or the stand-in recorded no
            request the hook built (for the context side); py-spy could not profile the proxy
            (:class:`benchmarks.py_spy.ProfilerError`).
    """
    if not clients or any(c < 1 for c in clients) or requests < 1:
        raise ValueError("clients must be positive numbers and requests at least 1")
    if profile_requests and not context_side:
        raise ValueError("the profile compares the memory side with the context side: keep it")
    say = progress or (lambda _: None)
    started = time.perf_counter()
    prefix = run_prefix(PREFIX_STEM)
    with contextlib.ExitStack() as stack:
        if log_dir is None:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-proxy-")))
        else:
            folder = log_dir
            folder.mkdir(parents=True, exist_ok=True)
        say("starting the stand-in and the proxy")
        with bench_stack(redis_url, prefix, folder, extraction=extraction) as procs:
            profile = (profile_requests, folder) if profile_requests > 0 else None
            results, profiled = asyncio.run(
                _drive(procs, list(clients), requests, history, say, context_side, profile)
            )
            extraction_stats = procs.extraction_stats()
        samples = min(requests, 300) if write_samples is None else write_samples
        write = None
        if samples > 0:
            say(f"timing the post-call write in-process ({samples} turn pairs)")
            try:
                write = asyncio.run(write_cost(redis_url, f"{prefix}-w", samples))
            finally:
                with contextlib.suppress(redis.RedisError):
                    delete_prefix(redis_url, f"{prefix}-w")
    config = {
        "clients": list(clients),
        "requests_per_side": requests,
        "history": history,
        "extraction": extraction,
        "context_side": context_side,
        "profile_requests": profile_requests or None,
        "debug_every": DEBUG_EVERY,
        "redis_url": redis_url,
        "key_prefix": prefix,
        "cpu_count": os.cpu_count(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }
    return ProxyBenchReport(
        results,
        write,
        config,
        time.perf_counter() - started,
        extraction_stats,
        profiled.as_json() if profiled else None,
    )
