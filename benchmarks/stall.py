"""Benchmark: does one user's large message stall the others?

For each kind of text (English prose with names, Russian, Hindi in Devanagari and romanised,
Chinese, code, a log) and each size (characters), two clients:

* ``new``: the large text is the new user message;
* ``whole``: a whole-history client sends that many characters as ~2,000-character messages
  (user and assistant in turn) and a short question; its first request stores them all;
  ``whole+next`` is its next request (the same history, the reply, one more question): what
  each of its requests costs from then on.

Two measures, side by side:

1. **In-process, on a real Redis** (the hook as the proxy makes it, extraction off): the hook's
   time for the large request before the model is called (the pre-call: what delays its
   reply), its post-call hook (which LiteLLM awaits before it answers: the reply waits for
   it too), the write to its end (the whole history of a whole-history client's first request
   is stored and indexed then), and the *added wait* of
   another user: small requests sent one after another while the large one runs (pre-call and
   write), the largest of their latencies less their median latency alone. Beside it, the
   *quiet wait*: as many small requests with nothing else running, the largest less the same
   median (what the machine's own noise adds to a maximum; on a loaded machine it is most of
   the added wait). Targets: pre-call <= 50 ms at 1 MB, added wait <= 20 ms.
2. **Through a real LiteLLM proxy and the stand-in model** (``--proxy``): the small request's
   added wait while a large one is in flight, on the memory alias and on a plain alias (what
   LiteLLM itself costs for the same body: the baseline beside it).

Times are wall-clock milliseconds on this machine; the added wait is the figure that says
whether other users stall.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
from litellm.types.utils import ModelResponse
from redis.exceptions import RedisError

from benchmarks.keys import delete_prefix, run_prefix
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.settings import (
    ExtractionSettings,
    MemorySettings,
    RedisSettings,
    StorageSettings,
)

PREFIX_STEM = "memstall"
"""Keys of a run go under ``memstall-<8 hex>:``; every one is deleted after the run."""

#: one paragraph per kind, cycled (with a counter, so lines differ) up to the size
SAMPLES: dict[str, str] = {
    "english": (
        "Yesterday Alice met Bob and Carol at the Harbour Cafe in Lisbon, where Dave told "
        "them about his new job at Northwind. Then they walked to the Old Town together. "
    ),
    "russian": (
        "Вчера Анна встретила Бориса в кафе на Невском проспекте, и он рассказал ей о новой "
        "работе в Санкт-Петербурге. Потом они гуляли по набережной до вечера. "
    ),
    "hindi": (
        "कल सीमा ने दिल्ली में राहुल से मुलाकात की और उसने अपनी नई नौकरी के बारे में बताया। "
        "फिर वे दोनों शाम तक लोधी गार्डन में घूमते रहे। "
    ),
    "hinglish": (
        "Kal Seema ne Delhi mein Rahul se mulaqat ki aur usne apni nayi naukri ke baare mein "
        "bataya. Phir woh dono shaam tak Lodhi Garden mein ghoomte rahe. "
    ),
    "chinese": (
        "昨天小美在上海的咖啡馆见到了李明，他告诉她自己在北京找到了新工作。"
        "后来他们一起在外滩散步到晚上。"
    ),
    "code": (
        "def Handler(Request, Context):\n    Result = Service.Fetch(Request.Id)  # Fetch It\n"
        "    if not Result.Ok:\n        raise ValueError(f'Bad {Request.Id}: {Result.Error}')\n"
    ),
    "log": (
        "2026-12-03T10:00:01Z ERROR Worker TypeError: Cannot read property 'Name' of "
        "undefined at Object.<anonymous> (/App/Src/Index.js:12:5)\n"
    ),
}

QUESTION = "What did we talk about?"
SMALL = "Hi! How are you today?"
WHOLE_MESSAGE_CHARS = 2_000


def text_of(kind: str, size: int) -> str:
    """``size`` characters of ``kind`` (:data:`SAMPLES`), each paragraph numbered."""
    sample = SAMPLES[kind]
    parts: list[str] = []
    total = 0
    number = 0
    while total < size:
        piece = f"{number}. {sample}"
        parts.append(piece)
        total += len(piece)
        number += 1
    return "".join(parts)[:size]


def messages_for(kind: str, size: int, client: str) -> list[dict[str, Any]]:
    """The large request's messages: one message of ``size`` characters (``new``), or a history
    of ``size`` characters in ~2,000-character messages and a short question (``whole``)."""
    text = text_of(kind, size)
    if client == "new":
        return [{"role": "user", "content": text}]
    history: list[dict[str, Any]] = []
    for index, start in enumerate(range(0, len(text), WHOLE_MESSAGE_CHARS)):
        role = "user" if index % 2 == 0 else "assistant"
        history.append({"role": role, "content": text[start : start + WHOLE_MESSAGE_CHARS]})
    if history[-1]["role"] == "user":
        history.append({"role": "assistant", "content": "I see."})
    return [*history, {"role": "user", "content": QUESTION}]


@dataclass(frozen=True)
class StallRow:
    """One kind, size and client (ms)."""

    kind: str
    chars: int
    client: str
    hook_ms: float  # the large request's pre-call, in-process
    write_ms: float  # its post-call hook and write to their end (after the reply), in-process
    added_wait_ms: float  # the slowest small request during it, less their median alone
    small_requests: int  # small requests sent during it
    #: the same statistic with nothing else running: as many small requests alone, their
    #: largest latency less their median (the machine's own noise; the baseline beside it)
    quiet_wait_ms: float = 0.0
    #: its post-call hook alone (the reply waits for it: LiteLLM awaits the hook)
    post_call_ms: float = 0.0
    proxy_added_wait_ms: float | None = None  # through the proxy, memory alias
    plain_added_wait_ms: float | None = None  # through the proxy, plain alias (baseline)


class _Auth:
    token = "sk-bench-stall"
    team_id = "bench"
    user_id = None


def _reply(text: str) -> ModelResponse:
    return ModelResponse(
        id="r",
        object="chat.completion",
        model="bench",
        choices=[
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": text},
            }
        ],
    )


async def _turn(
    hook: MemoryHook, user: str, messages: list[dict[str, Any]]
) -> tuple[float, float, float]:
    """One request through the hook: its pre-call time, its write's time (the post-call hook
    and any background write to their end) and the post-call hook's alone, ms."""
    data: dict[str, Any] = {
        "model": "bench",
        "user": user,
        "metadata": {},
        "messages": [dict(m) for m in messages],
        "litellm_call_id": uuid.uuid4().hex,
    }
    started = time.perf_counter()
    await hook.async_pre_call_hook(_Auth(), None, data, "acompletion")
    called = time.perf_counter()
    await hook.async_post_call_success_hook(data, _Auth(), _reply("Noted."))
    answered = time.perf_counter()
    await hook.drain()
    ended = time.perf_counter()
    return (called - started) * 1000, (ended - called) * 1000, (answered - called) * 1000


async def _small(hook: MemoryHook, user: str) -> float:
    """A small request's pre-call time, ms (what another user waits for)."""
    data: dict[str, Any] = {
        "model": "bench",
        "user": user,
        "metadata": {"memory_mode": "read_only"},
        "messages": [{"role": "user", "content": SMALL}],
    }
    started = time.perf_counter()
    await hook.async_pre_call_hook(_Auth(), None, data, "acompletion")
    return (time.perf_counter() - started) * 1000


NEXT = "+next"
"""Suffix of a whole-history client's next request (its history stored by the first)."""


def _measured(clients: Sequence[str]) -> list[str]:
    """The clients measured: each of ``clients``; after ``whole``, its next request too."""
    return [name for client in clients for name in (client, client + NEXT) if name != "new" + NEXT]


async def _in_process(
    redis_url: str, prefix: str, kinds: Sequence[str], sizes: Sequence[int], clients: Sequence[str]
) -> list[StallRow]:
    settings = MemorySettings(
        redis=RedisSettings(url=redis_url),
        storage=StorageSettings(key_prefix=prefix),
        extraction=ExtractionSettings(worker_in_proxy=False, enabled=False),
    )
    hook = MemoryHook(settings=settings, alias_lookup=lambda _: {"memory": {"enabled": True}})
    rows: list[StallRow] = []
    try:
        await _turn(hook, "warm", [{"role": "user", "content": "Hello Bob, nice to meet you."}])
        alone = statistics.median([await _small(hook, "small") for _ in range(30)])
        for size in sizes:
            for kind in kinds:
                for client in _measured(clients):
                    messages = messages_for(kind, size, client.removesuffix(NEXT))
                    user = f"{kind}-{size}-{client.removesuffix(NEXT)}"
                    if client.endswith(NEXT):  # the same history stored, the reply, a question
                        messages += [
                            {"role": "assistant", "content": "Noted."},
                            {"role": "user", "content": "And after that?"},
                        ]
                    large = asyncio.create_task(_turn(hook, user, messages))
                    await asyncio.sleep(0)  # the large request starts first
                    waits = [await _small(hook, "small")]
                    while not large.done():
                        waits.append(await _small(hook, "small"))
                    pre_ms, write_ms, post_ms = await large
                    quiet = [await _small(hook, "small") for _ in waits]
                    rows.append(
                        StallRow(
                            kind,
                            size,
                            client,
                            round(pre_ms, 1),
                            round(write_ms, 1),
                            round(max(waits) - alone, 1),
                            len(waits),
                            quiet_wait_ms=round(max(quiet) - alone, 1),
                            post_call_ms=round(post_ms, 1),
                        )
                    )
    finally:
        await hook.shutdown()
        await hook.store.redis.aclose()
    return rows


async def _proxy_wait(
    http: httpx.AsyncClient, base: str, key: str, alias: str, messages: list[dict[str, Any]]
) -> float:
    """The small request's added wait (ms) while ``messages`` go to ``alias``."""
    headers = {"Authorization": f"Bearer {key}"}

    async def send(body: dict[str, Any]) -> float:
        started = time.perf_counter()
        response = await http.post(f"{base}/v1/chat/completions", json=body, headers=headers)
        response.raise_for_status()
        return (time.perf_counter() - started) * 1000

    def body(user: str, content: list[dict[str, Any]]) -> dict[str, Any]:
        return {"model": alias, "user": user, "messages": content}

    small = [{"role": "user", "content": SMALL}]
    alone = statistics.median([await send(body("small", small)) for _ in range(5)])
    large = asyncio.create_task(send(body(f"large-{uuid.uuid4().hex[:8]}", messages)))
    await asyncio.sleep(0.05)  # the large body is on its way, then in the proxy
    waited = await send(body("small", small))
    await large
    return waited - alone


async def _through_proxy(
    redis_url: str, prefix: str, rows: list[StallRow], folder: Path
) -> list[StallRow]:
    from benchmarks.proxy import bench_stack
    from benchmarks.proxy_talk import MEMORY_ALIAS, PLAIN_ALIAS

    out: list[StallRow] = []
    with bench_stack(redis_url, prefix, folder, extraction="off") as stack:
        async with httpx.AsyncClient(timeout=120) as http:
            for row in rows:
                if row.client.endswith(NEXT):  # through the proxy: first requests only
                    out.append(row)
                    continue
                messages = messages_for(row.kind, row.chars, row.client)
                memory = await _proxy_wait(
                    http, stack.base, stack.master_key, MEMORY_ALIAS, messages
                )
                plain = await _proxy_wait(http, stack.base, stack.master_key, PLAIN_ALIAS, messages)
                out.append(
                    StallRow(
                        **{
                            **asdict(row),
                            "proxy_added_wait_ms": round(memory, 1),
                            "plain_added_wait_ms": round(plain, 1),
                        }
                    )
                )
    return out


def run_stall(
    redis_url: str,
    *,
    kinds: Sequence[str] = tuple(SAMPLES),
    sizes: Sequence[int] = (10_000, 100_000, 1_000_000),
    clients: Sequence[str] = ("new", "whole"),
    proxy: bool = False,
) -> list[StallRow]:
    """Run the benchmark (module docstring); keys under ``memstall-<8 hex>:`` are deleted
    after."""
    prefix = run_prefix(PREFIX_STEM)
    try:
        rows = asyncio.run(_in_process(redis_url, prefix, kinds, sizes, clients))
        if proxy:
            with tempfile.TemporaryDirectory(prefix="memstall-") as folder:
                rows = asyncio.run(_through_proxy(redis_url, prefix + "p", rows, Path(folder)))
        return rows
    finally:
        with contextlib.suppress(RedisError):
            delete_prefix(redis_url, prefix)


def stall_rows_json(rows: Sequence[StallRow]) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts."""
    return [asdict(row) for row in rows]
