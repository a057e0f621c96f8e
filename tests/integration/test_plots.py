"""The benchmark plots: PNGs written beside the JSON from the rows the benchmarks produce."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from benchmarks import plots
from benchmarks.options import LOCOMO_CITATION

pytest.importorskip("matplotlib", reason="plots need matplotlib (the dev or plots extra)")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

LATENCY_ROWS: list[dict[str, Any]] = [
    {
        "messages": 100,
        "runs": 30,
        "hook_p50_ms": 1.49,
        "hook_p99_ms": 1.83,
        "naive_p50_ms": 7.3,
        "naive_p99_ms": 8.9,
        "build_s": 0.02,
        "memory_bytes": 120368,
        "text_bytes": 14334,
        "prompt_chars_p50": 6951.0,
        "history_chars": 14328,
    },
    {
        "messages": 1000,
        "runs": 30,
        "hook_p50_ms": 1.53,
        "hook_p99_ms": 2.6,
        "naive_p50_ms": 109.0,
        "naive_p99_ms": 205.1,
        "build_s": 0.19,
        "memory_bytes": 616288,
        "text_bytes": 137983,
        "prompt_chars_p50": 5780.5,
        "history_chars": 137942,
    },
    {
        "messages": 100000,
        "runs": 30,
        "hook_p50_ms": 1.7,
        "hook_p99_ms": 4.2,
        "naive_p50_ms": None,  # --no-naive or above naive_max: left out of the plot
        "naive_p99_ms": None,
        "build_s": 40.1,
        "memory_bytes": 49068630,
        "text_bytes": 13777000,
        "prompt_chars_p50": 7727.5,
        "history_chars": 13773160,
    },
]


def _png(path: Path) -> bytes:
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC), path
    assert len(data) > 10_000, f"{path} is suspiciously small ({len(data)} bytes)"
    return data


def test_latency_plots_beside_the_json(tmp_path: Path) -> None:
    """The latency rows give two PNGs named after the JSON file; None naive values are fine."""
    json_path = tmp_path / "out" / "latency.json"
    json_path.parent.mkdir()
    json_path.write_text(json.dumps(LATENCY_ROWS))
    written = plots.write_latency_plots(json.loads(json_path.read_text()), json_path)
    assert written == [
        tmp_path / "out" / "latency-hook-time.png",
        tmp_path / "out" / "latency-chars-sent.png",
    ]
    for path in written:
        _png(path)


def test_latency_rows_without_chars_give_only_the_time_plot(tmp_path: Path) -> None:
    """Rows of an older benchmark (no prompt_chars_p50) still give the hook-time plot."""
    old = [
        {k: v for k, v in row.items() if k not in ("prompt_chars_p50", "history_chars")}
        for row in LATENCY_ROWS
    ]
    written = plots.write_latency_plots(old, tmp_path / "old.json")
    assert [p.name for p in written] == ["old-hook-time.png"]
    _png(written[0])


def test_latency_plot_needs_rows(tmp_path: Path) -> None:
    """No rows: a clear error, no file."""
    with pytest.raises(ValueError, match="hook_p50_ms"):
        plots.write_latency_plots([], tmp_path / "none.json")
    assert not list(tmp_path.iterdir())


def _point(
    label: str, method: str, chars: float, cover: float, hard: float | None
) -> dict[str, Any]:
    return {
        "point": label,
        "method": method,
        "questions": 49,
        "cover": cover,
        "recall": cover - 0.05,
        "hard_questions": 19 if hard is not None else 0,
        "cover_hard": hard,
        "recalled_chars_median": chars,
        "recalled_chars_mean": chars,
        "prompt_chars_median": 3000,
    }


def _recall_report(hard: bool = True) -> dict[str, Any]:
    """A recall report as ``bench recall --json`` writes it (the parts the plot reads)."""
    curve = []
    for method, lift in (("tuned", 0.15), ("plain-idf", 0.0)):
        for label, chars, cover in (
            ("k=2", 320.0, 0.5),
            ("k=4", 480.0, 0.6),
            ("k=8", 750.0, 0.65),
            ("1500 chars", 850.0, 0.68),
            ("2000 chars", 932.2, 0.7),  # a saturated budget: these share one label
            ("2500 chars", 932.2, 0.7),
        ):
            hard_cover = cover - 0.3 + lift if hard else None
            curve.append(_point(label, method, chars, cover + lift, hard_cover))
    return {
        "source": "../shared/data/multiling/multiling-dev.json",
        "citation": LOCOMO_CITATION,
        "protocol": {"k": "budget", "recall": {"mode": "budget", "k": 4, "chars": 2500}},
        "samples": ["ml-1", "ml-3"],
        "results": {"tuned": {"all": {"questions": 49, "window": 0.07}}},
        "curve": curve,
        "questions": [],
    }


def test_recall_plot_beside_the_json(tmp_path: Path) -> None:
    """The recall report's cover curve gives one PNG named after the JSON."""
    json_path = tmp_path / "recall-multiling.json"
    report = _recall_report()
    json_path.write_text(json.dumps(report))
    written = plots.write_recall_plots(json.loads(json_path.read_text()), json_path)
    assert written == [tmp_path / "recall-multiling-cover.png"]
    _png(written[0])
    _png(plots.write_recall_plots(_recall_report(hard=False), tmp_path / "no-hard.json")[0])


def test_recall_plot_labels(tmp_path: Path) -> None:
    """This hook's points are labelled, coinciding ones once; the window baseline and the
    product's setting are named."""
    figure = plots.cover_figure(_recall_report())
    axes = figure.axes[0]
    texts = {t.get_text() for t in axes.texts}
    assert {"k=2", "k=4", "k=8", "1500", "2000-2500", "recent window alone: 7%"} <= texts
    legend = axes.get_legend()
    assert legend is not None
    labels = [t.get_text() for t in legend.get_texts()]
    assert "this hook, character budget" in labels
    assert "the product's setting (2500 chars)" in labels
    assert "dotted: hard questions" in labels


def test_recall_plot_needs_the_curve(tmp_path: Path) -> None:
    """A report without its cover curve: a clear error, no file."""
    with pytest.raises(ValueError, match="--curve"):
        plots.write_recall_plots({**_recall_report(), "curve": []}, tmp_path / "bare.json")
    assert not list(tmp_path.iterdir())


@pytest.mark.redis
async def test_latency_benchmark_rows_feed_the_plots(tmp_path: Path) -> None:
    """``bench latency`` rows carry the characters sent per request (flat: the window budget)
    and the whole history's characters (growing), and plot as written."""
    from benchmarks.latency import latency_rows_json, run_latency
    from litellm_memory_hook.tools.histories import History, HistoryLine, QAItem
    from tests.support.redis_url import real_redis_url

    words = "Seema told me about her exams in Pune and the trip to Goa with Asha"
    lines = tuple(
        HistoryLine(
            role="user" if i % 2 == 0 else "assistant",
            text=f"{words} ({i}) " * 3,
            ts_ms=1_700_000_000_000 + i * 1000,
            speaker="A" if i % 2 == 0 else "B",
        )
        for i in range(30)
    )
    history = History(
        sample_id="tiny",
        lines=lines,
        qa=(QAItem(question="Where did Asha go?", answer="Goa", evidence=(), category=4),),
    )
    client = aioredis.from_url(real_redis_url())
    before = {k async for k in client.scan_iter(match="membench-*")}
    rows = latency_rows_json(
        await run_latency(real_redis_url(), history, [40, 400], runs=3, naive=True)
    )
    # the run deletes every key it wrote: its conversations and its prefix's global keys
    assert {k async for k in client.scan_iter(match="membench-*")} == before
    await client.aclose()
    small, large = rows
    texts = [line.text for line in lines]
    assert small["history_chars"] == sum(len(texts[i % 30]) for i in range(40))
    assert large["history_chars"] == sum(len(texts[i % 30]) for i in range(400))
    assert 0 < small["prompt_chars_p50"] <= small["history_chars"] + 1000
    assert large["prompt_chars_p50"] < large["history_chars"] / 3  # the window, not the history
    written = plots.write_latency_plots(rows, tmp_path / "latency.json")
    assert [p.name for p in written] == ["latency-hook-time.png", "latency-chars-sent.png"]
