"""LiteLLM's own cost of the context memory adds: the floor under `bench proxy`'s on/off ratio.

Memory makes every request larger: the hook sends the model a system message with the memory
block and a recent window of up to 40 messages instead of the one new message a client sends.
The proxy's own work grows with the request (parsing, validation, logging, the upstream call),
whatever the hook costs. This benchmark measures that part alone, with the hook out of the way:
the same proxy as `litellm-memory bench proxy` (`bench_stack`: stand-in model, one LiteLLM proxy
process, extraction off) serves its plain alias (no memory) two kinds of request, in alternating
rounds at N concurrent clients:

* ``one``: one user message of about 150 characters (what an app that sends only the new
  message sends);
* ``memory-sized``: what the hook makes of it on this benchmark's conversations: a system
  message with the alias rules and a 40-item memory block, a 40-message window (20 user / 20
  assistant lines), then the new message; about 8,700 characters in 42 messages.

Reported per kind: requests per second, the proxy's CPU milliseconds per request (``/proc``),
and the ratio memory-sized / one. A ratio of 0.95 means that the larger request alone takes the
5% a 0.95x throughput target allows, before any cost of the hook itself.

Usage::

    .venv/bin/python bench/context_cost.py --clients 32 --requests 1920 \\
        --json bench/out/context-cost.json

Measured 2026-12-01 on the project's 2-core machine, 32 clients: with this script (6 rounds of
320 requests a kind) one 30.0 requests/s and 32.4 ms CPU a request, memory-sized 29.3
requests/s and 33.4 ms: ratio 0.979 (rounds 0.87-1.07), +0.9 ms CPU a request; an earlier
hand-made run of the same shape read 0.95 and +1.4 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from litellm_memory_hook.settings import MemorySettings
from litellm_memory_hook.tools.bench_keys import run_prefix
from litellm_memory_hook.tools.bench_proxy import (
    PLAIN_ALIAS,
    BenchStack,
    bench_stack,
    process_cpu_seconds,
)

WORDS = [
    "the",
    "lake",
    "sunrise",
    "painting",
    "caroline",
    "melanie",
    "summer",
    "camping",
    "kids",
    "adoption",
    "pottery",
    "support",
    "group",
    "music",
    "guitar",
    "beach",
    "family",
    "friends",
    "school",
    "career",
    "counselling",
]


def _line(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def requests_of_each_kind(seed: int = 7) -> dict[str, list[dict[str, Any]]]:
    """The two message lists (see the module docstring), deterministic for ``seed``."""
    rng = random.Random(seed)
    memory_block = "\n".join(f"- {_line(rng, 12)}" for _ in range(40))
    memory_sized: list[dict[str, Any]] = [
        {
            "role": "system",
            "content": f"You are Mira, a warm and concise companion.\n\n<memory_context>\n"
            f"{memory_block}\n</memory_context>",
        }
    ]
    for _ in range(20):
        memory_sized.append({"role": "user", "content": _line(rng, 25)})
        memory_sized.append({"role": "assistant", "content": "Noted: " + _line(rng, 8)})
    new = {"role": "user", "content": _line(rng, 20)}
    memory_sized.append(new)
    return {"one": [new], "memory-sized": memory_sized}


async def _round(
    http: httpx.AsyncClient, stack: BenchStack, messages: list[dict[str, Any]], n: int, clients: int
) -> tuple[float, float]:
    """``n`` requests by ``clients`` clients; returns (seconds, proxy CPU seconds)."""

    async def client(index: int) -> None:
        for _ in range(n // clients):
            answer = await http.post(
                f"{stack.base}/v1/chat/completions",
                headers={"Authorization": f"Bearer {stack.master_key}"},
                json={"model": PLAIN_ALIAS, "messages": messages, "user": f"u{index}"},
            )
            answer.raise_for_status()

    started, cpu = time.perf_counter(), process_cpu_seconds(stack.proxy_pid)
    await asyncio.gather(*(client(i) for i in range(clients)))
    return time.perf_counter() - started, process_cpu_seconds(stack.proxy_pid) - cpu


async def _drive(stack: BenchStack, clients: int, requests: int, rounds: int) -> dict[str, Any]:
    kinds = requests_of_each_kind()
    per_round = max(clients, requests // rounds // clients * clients)
    seconds = {kind: 0.0 for kind in kinds}
    cpu = {kind: 0.0 for kind in kinds}
    ratios: list[float] = []
    limits = httpx.Limits(max_connections=clients * 2)
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        for messages in kinds.values():  # warm-up
            await _round(http, stack, messages, clients, clients)
        for number in range(rounds):
            order = list(kinds) if number % 2 == 0 else list(reversed(kinds))
            rps: dict[str, float] = {}
            for kind in order:
                wall, used = await _round(http, stack, kinds[kind], per_round, clients)
                seconds[kind] += wall
                cpu[kind] += used
                rps[kind] = per_round / wall
            ratios.append(rps["memory-sized"] / rps["one"])
    done = per_round * rounds
    out: dict[str, Any] = {
        "clients": clients,
        "requests_per_kind": done,
        "chars": {k: sum(len(str(m["content"])) for m in v) for k, v in kinds.items()},
        "messages": {k: len(v) for k, v in kinds.items()},
    }
    for kind in kinds:
        out[kind] = {
            "rps": round(done / seconds[kind], 2),
            "proxy_cpu_ms_per_request": round(cpu[kind] * 1000 / done, 2),
        }
    out["ratio"] = round(out["memory-sized"]["rps"] / out["one"]["rps"], 3)
    out["round_ratios"] = [round(r, 3) for r in ratios]
    out["round_ratio_median"] = round(statistics.median(ratios), 3)
    return out


def main() -> None:
    """Run the benchmark; print a table; write JSON with ``--json``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--requests", type=int, default=1920, help="requests per kind")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--redis-url", default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    url = args.redis_url or MemorySettings().redis_url
    with tempfile.TemporaryDirectory() as folder:
        prefix = run_prefix("membench-ctx")
        with bench_stack(url, prefix, Path(folder), extraction="off") as stack:
            report = asyncio.run(_drive(stack, args.clients, args.requests, args.rounds))
    print(f"{'kind':14} {'messages':>8} {'chars':>6} {'req/s':>7} {'CPU ms/req':>10}")
    for kind in ("one", "memory-sized"):
        print(
            f"{kind:14} {report['messages'][kind]:8} {report['chars'][kind]:6} "
            f"{report[kind]['rps']:7.1f} {report[kind]['proxy_cpu_ms_per_request']:10.2f}"
        )
    print(f"memory-sized / one: {report['ratio']} (rounds {report['round_ratios']})")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
        print(f"json: {args.json}")


if __name__ == "__main__":
    main()
