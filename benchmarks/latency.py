"""Benchmark: the pre-call hook's time on a real Redis as the stored history grows.

For each size N, a conversation of N stored messages is built from LoCoMo text (cycled, with its
speakers and time order), each line stored as the proxy stores a chat message (the message in
``msg``, a call id) and indexed through the product's own store; then the hook's
``async_pre_call_hook``, with the Redis client it makes in the proxy (timeouts and the reconnect
retry included), runs in-process against that Redis for a set of questions, timed with
``time.perf_counter`` (median and p99 over all runs, ms); the sizes take turns call by call, so
machine noise hits them alike. Beside it, the naive approach: load every
older message and score it in Python with the same IDF formula.

Beside the times, a figure the machine's load does not move: the Python bytecode instructions
one turn pair executes (:mod:`benchmarks.instructions`), the pre-call hook and the post-call
success hook (the write, the extraction schedule) of a new message and its reply, counted over
``count_pairs`` pairs at each size after the timed calls (each message new, so no memo holds
it), their mean.

Data: LoCoMo (Maharana et al., ACL 2024; snap-research/locomo, CC BY-NC 4.0).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from redis.exceptions import RedisError

from benchmarks.footprint import cycled_turns, fill, memory_by_kind
from benchmarks.instructions import BytecodeCounter
from benchmarks.keys import delete_prefix, run_prefix
from litellm_memory_hook.core import recall
from litellm_memory_hook.core.messages import content_text
from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.settings import (
    ExtractionSettings,
    MemorySettings,
    RedisSettings,
    StorageSettings,
)
from litellm_memory_hook.store.keys import ConversationKeys
from litellm_memory_hook.store.redis_store import MemoryStore
from litellm_memory_hook.tools.histories import History
from litellm_memory_hook.tools.replay import percentile

PREFIX_STEM = "membench"
"""Keys of a run go under ``membench-<8 hex>:``; every one is deleted after the run."""


@dataclass(frozen=True)
class LatencyRow:
    """Timings at one history size (ms)."""

    messages: int
    runs: int
    hook_p50_ms: float
    hook_p99_ms: float
    naive_p50_ms: float | None
    naive_p99_ms: float | None
    build_s: float
    memory_bytes: int
    text_bytes: int
    prompt_chars_p50: float = 0.0  # characters the model received per request (median)
    history_chars: int = 0  # characters of the whole stored history (what a resend costs)
    #: Python bytecode instructions per turn pair (pre-call + post-call), mean; None: not counted
    bytecode_per_pair: int | None = None
    bytecode_pairs: int = 0  # turn pairs counted
    #: bytes of each key kind (``turns``, ``postings``, ``times``, ...: benchmarks/footprint.py)
    memory_by_kind: dict[str, int] = field(default_factory=dict)


class _Auth:
    token = "litellm_proxy_master_key"
    team_id = None
    user_id = "default_user_id"


#: turn pairs run uncounted before the counted ones at each size
COUNT_WARMUP = 2
#: numbers the counted messages (``(ref 000012)``): each is new to the process's memos
_FRESH = itertools.count()


async def _count_pairs(
    hook: MemoryHook, size: int, questions: Sequence[str], pairs: int
) -> list[int]:
    """Bytecode instructions of each of ``pairs`` turn pairs (after :data:`COUNT_WARMUP`) on
    the conversation of ``size`` messages: the pre-call hook of a new message (stored, not
    read-only), the post-call success hook of its reply, and any write they leave behind."""
    from litellm.types.utils import ModelResponse

    counts: list[int] = []
    for i in range(COUNT_WARMUP + pairs):
        ref = f"(ref {next(_FRESH):06d})"
        text = f"{questions[i % len(questions)]} {ref}"
        data: dict[str, Any] = {
            "model": "bench",
            "user": f"bench{size}",
            "metadata": {"conversation_id": "bench"},
            "messages": [{"role": "user", "content": text}],
            "litellm_call_id": f"count-{size}-{i}",
        }
        reply = {"role": "assistant", "content": f"Noted {ref}: {text[:60]}"}
        response = ModelResponse(
            id=f"r{i}", choices=[{"index": 0, "message": reply, "finish_reason": "stop"}]
        )
        with BytecodeCounter() as counter:
            await hook.async_pre_call_hook(_Auth(), None, data, "acompletion")
            await hook.async_post_call_success_hook(data, _Auth(), response)
            await hook.drain()
        if i >= COUNT_WARMUP:
            counts.append(counter.count)
    return counts


async def _naive(store: MemoryStore, keys: ConversationKeys, question: str, window: int) -> None:
    """Load every stored message and score the older ones in Python (the baseline)."""
    members = await store.redis.zrange(keys.turns, 0, -1)
    turns = [Turn.from_member(m) for m in members if isinstance(m, bytes | str)]
    older = turns[:-window] if window else turns
    query = set(recall.query_terms(question))
    if not query:
        return
    docs = [
        set(recall.index_terms(t.text, t.name, previous=turns[i - 1].text if i else ""))
        for i, t in enumerate(older)
    ]
    df: Counter[str] = Counter()
    for doc in docs:
        df.update(doc & query)
    n = len(docs)
    scores = [
        (sum(math.log(1 + n / (1 + df[w])) for w in doc & query), t.seq)
        for doc, t in zip(docs, older, strict=True)
    ]
    scores.sort(reverse=True)
    del scores[4:]


async def run_latency(
    redis_url: str,
    history: History,
    sizes: Sequence[int],
    *,
    runs: int = 200,
    naive: bool = True,
    naive_max: int = 100_000,
    count_pairs: int = 20,
) -> list[LatencyRow]:
    """Time the pre-call hook at each history size (see the module docstring).

    Args:
        redis_url: a real Redis (the benchmark writes keys under ``membench-<8 hex>:`` and
            deletes every one of them after).
        history: the text to cycle.
        sizes: stored messages per conversation.
        runs: timed hook calls per size (questions cycled from ``history.qa``).
        naive: also time the naive load-everything approach.
        naive_max: largest size for the naive approach (it takes ~0.5 s a call at 100,000).
        count_pairs: turn pairs whose bytecode instructions are counted per size (0: none).
    """
    prefix = run_prefix(PREFIX_STEM)
    try:
        return await _run_latency(
            redis_url, prefix, history, sizes, runs, naive, naive_max, count_pairs
        )
    finally:
        with contextlib.suppress(RedisError):
            delete_prefix(redis_url, prefix)


async def _run_latency(
    redis_url: str,
    prefix: str,
    history: History,
    sizes: Sequence[int],
    runs: int,
    naive: bool,
    naive_max: int,
    count_pairs: int,
) -> list[LatencyRow]:
    # No extraction worker: the benchmark times the pre-call hook alone, and writes nothing.
    # The hook makes its Redis client as in the proxy (timeouts and reconnect retry included).
    settings = MemorySettings(
        redis=RedisSettings(url=redis_url),
        storage=StorageSettings(key_prefix=prefix),
        extraction=ExtractionSettings(worker_in_proxy=False),
    )
    hook = MemoryHook(
        settings=settings,
        alias_lookup=lambda model: {"memory": {"enabled": True, "system_prompt": "Be kind."}},
    )
    store = hook.store
    redis = store.redis
    questions = [q.question for q in history.qa] or ["What did we talk about?"]
    conversations = {
        size: ConversationKeys.for_ids(prefix, "master", f"bench{size}", "bench") for size in sizes
    }
    built: dict[int, tuple[float, dict[str, int], int]] = {}
    timings: dict[int, list[float]] = {size: [] for size in sizes}
    sent: dict[int, list[int]] = {size: [] for size in sizes}
    history_chars: dict[int, int] = {}
    try:
        for size, keys in conversations.items():
            await redis.delete(*keys.all())
            turns = cycled_turns(history, size)
            started = time.perf_counter()
            await fill(store, keys, turns)
            text_bytes = sum(len(t.text.encode()) for t in turns)
            history_chars[size] = sum(len(t.text) for t in turns)
            built[size] = (
                time.perf_counter() - started,
                await memory_by_kind(redis, keys),
                text_bytes,
            )
        # Sizes take turns call by call, so a slow moment of the machine hits every size alike
        # and the ratio between sizes is fair.
        for i in range(runs + 10):
            question = questions[i % len(questions)]
            for size in sizes:
                data: dict[str, Any] = {
                    "model": "bench",
                    "user": f"bench{size}",
                    "metadata": {"conversation_id": "bench", "memory_mode": "read_only"},
                    "messages": [{"role": "user", "content": question}],
                }
                t0 = time.perf_counter()
                await hook.async_pre_call_hook(_Auth(), None, data, "acompletion")
                if i >= 10:  # warm-up
                    timings[size].append((time.perf_counter() - t0) * 1000)
                    sent[size].append(
                        sum(len(content_text(m.get("content"))) for m in data["messages"])
                    )
        counted = {
            size: await _count_pairs(hook, size, questions, count_pairs) if count_pairs else []
            for size in sizes
        }
        if hook.counters.get("precall_errors") or hook.counters.get("postcall_errors"):
            raise RuntimeError(f"the hook failed during the benchmark: {dict(hook.counters)}")
        rows: list[LatencyRow] = []
        for size, keys in conversations.items():
            naive_times: list[float] = []
            if naive and size <= naive_max:
                naive_runs = max(3, min(runs, int(2_000_000 / max(size, 1))))
                for i in range(naive_runs):
                    t0 = time.perf_counter()
                    await _naive(
                        store, keys, questions[i % len(questions)], settings.window.max_messages
                    )
                    naive_times.append((time.perf_counter() - t0) * 1000)
            build_s, memory, text_bytes = built[size]
            rows.append(
                LatencyRow(
                    messages=size,
                    runs=len(timings[size]),
                    hook_p50_ms=round(statistics.median(timings[size]), 3),
                    hook_p99_ms=round(percentile(timings[size], 99), 3),
                    naive_p50_ms=round(statistics.median(naive_times), 3) if naive_times else None,
                    naive_p99_ms=round(percentile(naive_times, 99), 3) if naive_times else None,
                    build_s=round(build_s, 2),
                    memory_bytes=sum(memory.values()),
                    memory_by_kind=memory,
                    text_bytes=text_bytes,
                    prompt_chars_p50=statistics.median(sent[size]),
                    history_chars=history_chars[size],
                    bytecode_per_pair=(
                        round(statistics.fmean(counted[size])) if counted[size] else None
                    ),
                    bytecode_pairs=len(counted[size]),
                )
            )
    finally:
        for keys in conversations.values():
            await redis.delete(*keys.all())
        await redis.aclose()
    return rows


def latency_rows_json(rows: Sequence[LatencyRow]) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts."""
    return [asdict(r) for r in rows]


def run_latency_sync(*args: Any, **kwargs: Any) -> list[LatencyRow]:
    """:func:`run_latency` on a fresh event loop."""
    return asyncio.run(run_latency(*args, **kwargs))
