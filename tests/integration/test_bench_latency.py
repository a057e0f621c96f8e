"""``bench latency`` and ``bench footprint`` on a real Redis: rows for each size, turns stored as
the proxy stores them, and no key left behind."""

from __future__ import annotations

import itertools
import sys
import threading
from pathlib import Path

import pytest
import redis

from benchmarks import footprint
from benchmarks import latency as bench
from benchmarks.instructions import BytecodeCounter
from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.tools.histories import load_locomo
from tests.support.redis_url import real_redis_url
from tests.support.tiny_locomo import tiny_locomo

pytestmark = pytest.mark.redis


def test_cycled_turns_are_stored_as_the_proxy_stores_them(tmp_path: Path) -> None:
    """Each turn keeps its message (``msg``) and a call id shared by a question and its reply,
    as :func:`message_to_turn` makes them in the hook; time goes on a minute a turn."""
    tiny_locomo(tmp_path / "tiny.json")
    history = load_locomo(tmp_path / "tiny.json", "tiny")
    turns = footprint.cycled_turns(history, 130)  # more than the 62 lines: the text cycles
    assert len(turns) == 130
    assert all(t.msg == {"role": t.role, "content": t.text, "name": t.name} for t in turns)
    assert [t.call_id for t in turns[:4]] == ["bench-0", "bench-0", "bench-1", "bench-1"]
    assert turns[62].text == turns[0].text
    assert {b.ts_ms - a.ts_ms for a, b in itertools.pairwise(turns)} == {60_000}
    member = '{"seq":1,' + turns[0].body_json()
    assert Turn.from_member(member).text == turns[0].text and '"text"' not in member


def test_bench_latency_rows_and_cleanup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two sizes, a few runs: each row is filled, the prompt holds the window, the naive
    approach is timed, and the run's keys are deleted after."""
    tiny_locomo(tmp_path / "tiny.json")
    history = load_locomo(tmp_path / "tiny.json", "tiny")
    url = real_redis_url()
    prefixes: list[str] = []

    def run_prefix(stem: str) -> str:
        prefixes.append(real_prefix(stem))
        return prefixes[-1]

    real_prefix = bench.run_prefix
    monkeypatch.setattr(bench, "run_prefix", run_prefix)
    rows = bench.run_latency_sync(url, history, [10, 200], runs=5, count_pairs=4)
    assert [r.messages for r in rows] == [10, 200]
    for row in rows:
        assert row.runs == 5 and 0 < row.hook_p50_ms <= row.hook_p99_ms
        assert row.bytecode_pairs == 4
        assert row.bytecode_per_pair is not None and row.bytecode_per_pair > 10_000
        assert row.naive_p50_ms is not None and row.naive_p50_ms > 0
        assert row.memory_bytes > row.text_bytes > 0 and row.build_s >= 0
        assert row.prompt_chars_p50 > 0 and row.history_chars > 0
        assert row.memory_bytes == sum(row.memory_by_kind.values())
        assert row.memory_by_kind["turns"] > row.memory_by_kind["postings"] > 0
    [prefix] = prefixes
    client = redis.Redis.from_url(url)
    try:
        assert not list(client.scan_iter(match=f"{prefix}:*", count=1000))
    finally:
        client.close()


def test_bench_footprint_bytes_by_kind_and_cleanup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each row holds every key kind, per message and in all; the whole is their sum, more than
    the text; a conversation made by chat requests has its call ids; the run's keys are deleted
    after."""
    tiny_locomo(tmp_path / "tiny.json")
    history = load_locomo(tmp_path / "tiny.json", "tiny")
    url = real_redis_url()
    prefixes: list[str] = []

    def run_prefix(stem: str) -> str:
        prefixes.append(real_prefix(stem))
        return prefixes[-1]

    real_prefix = footprint.run_prefix
    monkeypatch.setattr(footprint, "run_prefix", run_prefix)
    rows = footprint.run_footprint_sync(url, history, [10, 300], chat_sizes=[20])
    assert [(r.messages, r.built) for r in rows] == [(10, "store"), (300, "store"), (20, "chat")]
    assert rows[2].bytes_by_kind["calls"] > 0  # a chat request's call id, for idempotent writes
    for row in rows:
        assert set(row.bytes_by_kind) == set(footprint.KINDS)
        assert row.memory_bytes == sum(row.bytes_by_kind.values()) > row.text_bytes > 0
        assert row.bytes_by_kind["turns"] > row.bytes_by_kind["postings"] > 0
        assert row.bytes_by_kind["meta"] > 0 and row.bytes_by_kind["user"] > 0
    payload = footprint.footprint_rows_json(rows)[1]
    per = payload["bytes_per_message"]
    assert per["total"] == round(rows[1].memory_bytes / 300, 1) and per["text"] > 0
    assert payload["x_text"] == round(rows[1].memory_bytes / rows[1].text_bytes, 2)
    [prefix] = prefixes
    client = redis.Redis.from_url(url)
    try:
        assert not list(client.scan_iter(match=f"{prefix}:*", count=1000))
    finally:
        client.close()


def test_the_bytecode_counter_counts_what_runs_inside_it_and_puts_back_the_trace() -> None:
    def work(n: int) -> int:
        return sum(i * i for i in range(n))

    counts = []
    for n in (100, 100, 200):
        with BytecodeCounter() as counter:
            work(n)
        counts.append(counter.count)
    assert counts[0] == counts[1] > 100 and counts[2] > counts[0] * 1.5
    assert sys.gettrace() is None and threading.gettrace() is None


def test_instructions_per_turn_pair_are_the_same_in_two_runs(tmp_path: Path) -> None:
    """The count of a turn pair is a figure the machine's load does not move: two runs give
    the same within 2% (each message new, so no memo of the first run serves the second)."""
    tiny_locomo(tmp_path / "tiny.json")
    history = load_locomo(tmp_path / "tiny.json", "tiny")
    runs = [
        bench.run_latency_sync(
            real_redis_url(), history, [10, 200], runs=1, naive=False, count_pairs=6
        )
        for _ in range(2)
    ]
    first, second = ([r.bytecode_per_pair or 0 for r in rows] for rows in runs)
    assert all(count > 10_000 for count in first), first
    for a, b in zip(first, second, strict=True):
        assert abs(a - b) <= 0.02 * a, (first, second)
