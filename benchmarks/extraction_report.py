"""What a run of ``bench extraction`` reports: per sample (:class:`SampleResult`) and pooled over
samples (:class:`BenchReport`), as JSON and as a table."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from rich.table import Table

from benchmarks.evidence import LAYERS, QuestionCover
from benchmarks.options import LOCOMO_CITATION


def _spread(values: Sequence[int]) -> dict[str, float]:
    if not values:
        return {"mean": 0.0, "median": 0.0, "max": 0.0}
    return {
        "mean": round(statistics.fmean(values), 1),
        "median": float(statistics.median(values)),
        "max": float(max(values)),
    }


def _cover(questions: Sequence[QuestionCover]) -> dict[str, float]:
    evidence = sum(len(q.evidence) for q in questions)
    return {
        name: round(sum(int(getattr(q, name)) for q in questions) / evidence, 4)
        if evidence
        else 0.0
        for name in LAYERS
    }


@dataclass(frozen=True)
class SampleResult:
    """One sample's run. Times in seconds, sizes in characters.

    Attributes:
        sample_id: e.g. ``conv-26``.
        prefix: the run's key prefix (its keys are deleted at the end).
        lines: the conversation's lines; ``skipped_lines`` of them could not be sent.
        requests: chat requests of the replay.
        stored_messages: the conversation's last seq after the replay (stored messages).
        cursor: the seq extraction covered at the end (``== stored_messages``: every message
            was extracted).
        extraction_complete: the wait after the flush ended with nothing due and no lease.
        extraction_calls: extraction calls the stand-in received (retries included).
        call_chars: characters of all message text of each extraction call, in order.
        call_lines: messages in each extraction call's ``<new_lines>``, in order.
        stats: ``HGETALL <prefix>:stats`` at the end (job counters, tokens).
        memories_stored: extracted memories stored at the end (``HLEN``).
        questions: the questions asked (those with evidence, up to the limit).
    """

    sample_id: str
    prefix: str
    lines: int
    skipped_lines: int
    requests: int
    stored_messages: int
    cursor: int
    extraction_complete: bool
    extraction_calls: int
    call_chars: tuple[int, ...]
    call_lines: tuple[int, ...]
    stats: dict[str, int]
    memories_stored: int
    questions: tuple[QuestionCover, ...]
    replay_s: float
    extraction_wait_s: float
    questions_s: float
    seconds: float

    @property
    def calls_per_100_messages(self) -> float:
        """Extraction calls per 100 stored messages."""
        return _per_100(self.extraction_calls, self.stored_messages)

    @property
    def cover(self) -> dict[str, float]:
        """Evidence cover per layer (evidence lines covered / evidence lines)."""
        return _cover(self.questions)

    @property
    def median_prompt_chars(self) -> float:
        """Median over questions of the characters the model received."""
        return _median([q.prompt_chars for q in self.questions])

    def as_json(self) -> dict[str, Any]:
        """The result as a JSON-ready dict (figures first, then the per-question items)."""
        return {
            "sample_id": self.sample_id,
            "prefix": self.prefix,
            "lines": self.lines,
            "skipped_lines": self.skipped_lines,
            "requests": self.requests,
            "stored_messages": self.stored_messages,
            "cursor": self.cursor,
            "extraction_complete": self.extraction_complete,
            "extraction_calls": self.extraction_calls,
            "calls_per_100_messages": self.calls_per_100_messages,
            "chars_per_call": _spread(self.call_chars),
            "lines_per_call": _spread(self.call_lines),
            "tokens_per_call": _tokens_per_call(self.stats, self.extraction_calls),
            "jobs_committed": self.stats.get("jobs_committed", 0),
            "jobs_failed": self.stats.get("jobs_failed", 0),
            "memories_stored": self.memories_stored,
            "questions": len(self.questions),
            "evidence": sum(len(q.evidence) for q in self.questions),
            "unknown_evidence": sum(q.unknown_evidence for q in self.questions),
            "cover": self.cover,
            "covered": {n: sum(int(getattr(q, n)) for q in self.questions) for n in LAYERS},
            "median_prompt_chars": self.median_prompt_chars,
            "unmapped_memory_items": sum(q.unmapped_items for q in self.questions),
            "stats": self.stats,
            "call_chars": list(self.call_chars),
            "call_lines": list(self.call_lines),
            "replay_s": self.replay_s,
            "extraction_wait_s": self.extraction_wait_s,
            "questions_s": self.questions_s,
            "seconds": self.seconds,
            "items": [asdict(q) for q in self.questions],
        }


def _per_100(calls: int, messages: int) -> float:
    return round(100 * calls / messages, 2) if messages else 0.0


def _median(values: Sequence[int]) -> float:
    return float(statistics.median(values)) if values else 0.0


def _tokens_per_call(stats: Mapping[str, int], calls: int) -> dict[str, float]:
    return {
        "prompt": round(stats.get("tokens_prompt", 0) / calls, 1) if calls else 0.0,
        "completion": round(stats.get("tokens_completion", 0) / calls, 1) if calls else 0.0,
    }


@dataclass(frozen=True)
class BenchReport:
    """All samples of a run, and the pooled figures (sums over samples, then the ratios)."""

    source: str
    model: str
    redis_url: str
    samples: tuple[SampleResult, ...]
    seconds: float
    limit_questions: int | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    def pooled(self) -> dict[str, Any]:
        """Pooled figures: total calls / total messages, all calls, all questions."""
        questions = [q for s in self.samples for q in s.questions]
        calls = sum(s.extraction_calls for s in self.samples)
        stats: dict[str, int] = {}
        for s in self.samples:
            for name, value in s.stats.items():
                stats[name] = stats.get(name, 0) + value
        return {
            "sample_id": "pooled",
            "stored_messages": sum(s.stored_messages for s in self.samples),
            "extraction_calls": calls,
            "calls_per_100_messages": _per_100(calls, sum(s.stored_messages for s in self.samples)),
            "chars_per_call": _spread([c for s in self.samples for c in s.call_chars]),
            "lines_per_call": _spread([n for s in self.samples for n in s.call_lines]),
            "tokens_per_call": _tokens_per_call(stats, calls),
            "jobs_committed": stats.get("jobs_committed", 0),
            "jobs_failed": stats.get("jobs_failed", 0),
            "all_extracted": all(
                s.extraction_complete and s.cursor == s.stored_messages for s in self.samples
            ),
            "questions": len(questions),
            "evidence": sum(len(q.evidence) for q in questions),
            "cover": _cover(questions),
            "median_prompt_chars": _median([q.prompt_chars for q in questions]),
        }

    def as_json(self) -> dict[str, Any]:
        """The report as a JSON-ready dict."""
        return {
            "benchmark": "extraction",
            "data": LOCOMO_CITATION,
            "source": self.source,
            "model": self.model,
            "redis_url": self.redis_url,
            "limit_questions": self.limit_questions,
            "settings": self.settings,
            "seconds": self.seconds,
            "pooled": self.pooled(),
            "samples": [s.as_json() for s in self.samples],
        }


def report_table(report: BenchReport, title: str = "extraction cost and evidence cover") -> Table:
    """A rich table: one row per sample and the pooled row."""
    table = Table(title=title)
    columns = (
        "sample",
        "msgs",
        "calls/100",
        "msgs/call",
        "chars/call mean·med·max",
        "tok/call",
        "jobs ok/fail",
        "window",
        "recall",
        "memories",
        "summary",
        "win+rec",
        "all",
        "prompt chars p50",
    )
    for name in columns:
        table.add_column(name, justify="left" if name == "sample" else "right")
    rows = [s.as_json() for s in report.samples]
    if rows:
        rows.append(report.pooled())
    for row in rows:
        chars = row["chars_per_call"]
        cover = row["cover"]
        flag = "" if row.get("all_extracted", row.get("extraction_complete", True)) else " !"
        table.add_row(
            str(row["sample_id"]) + flag,
            str(row["stored_messages"]),
            f"{row['calls_per_100_messages']:.2f}",
            f"{row['lines_per_call']['mean']:.1f}",
            f"{chars['mean']:.0f}·{chars['median']:.0f}·{chars['max']:.0f}",
            f"{row['tokens_per_call']['prompt']:.0f}+{row['tokens_per_call']['completion']:.0f}",
            f"{row['jobs_committed']}/{row['jobs_failed']}",
            *(f"{cover[n]:.3f}" for n in ("window", "recall", "memories", "summary")),
            f"{cover['window_recall']:.3f}",
            f"{cover['all_layers']:.3f}",
            f"{row['median_prompt_chars']:.0f}",
            end_section=row["sample_id"] == rows[-1]["sample_id"] and len(rows) > 1,
        )
    return table


__all__ = ["BenchReport", "SampleResult", "report_table"]
