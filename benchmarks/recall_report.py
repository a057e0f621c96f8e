"""What ``bench recall`` reports: the tallies of each method (:class:`Result`), the cover curve's
points (:class:`CurvePoint`), one row per question, the whole report (:class:`RecallReport`) as
JSON and as tables."""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from rich.table import Table

from benchmarks.options import LOCOMO_CITATION
from litellm_memory_hook.core.budgets import Budget
from litellm_memory_hook.engine.recall_step import RecallOptions
from litellm_memory_hook.store.redis_store import POSTINGS_CAP

#: recalled lines per request in the fixed mode (docs/design.md#recall).
TOP_K = 4


@dataclass
class Tally:
    """Sums of per-question shares for one group of questions.

    ``k`` labels the figures: ``recall@4`` for the fixed mode's 4 lines, ``recall@budget`` for
    the budgeted mode.
    """

    k: int | str = TOP_K
    questions: int = 0
    recall: float = 0.0
    cover: float = 0.0
    window: float = 0.0

    def add(self, recall_share: float, cover_share: float, window_share: float) -> None:
        """Count one question (shares of its evidence lines, each in [0, 1])."""
        self.questions += 1
        self.recall += recall_share
        self.cover += cover_share
        self.window += window_share

    def as_dict(self) -> dict[str, float | int]:
        """Means over the questions, 4 decimals (0.0 for an empty group)."""
        n = max(self.questions, 1)
        return {
            "questions": self.questions,
            f"recall@{self.k}": round(self.recall / n, 4),
            f"cover@{self.k}": round(self.cover / n, 4),
            "window": round(self.window / n, 4),
        }


@dataclass
class Result:
    """One method on one dataset: overall, by LoCoMo category, on the ``hard`` questions."""

    k: int | str = TOP_K
    overall: Tally = field(init=False)
    by_category: dict[int, Tally] = field(init=False)
    hard: Tally = field(init=False)

    def __post_init__(self) -> None:
        self.overall = Tally(self.k)
        self.by_category = defaultdict(lambda: Tally(self.k))
        self.hard = Tally(self.k)

    def add(self, category: int, hard: bool, shares: tuple[float, float, float]) -> None:
        """Count one question: ``shares`` = (recall, cover, window) shares of its evidence."""
        self.overall.add(*shares)
        self.by_category[category].add(*shares)
        if hard:
            self.hard.add(*shares)

    def groups(self) -> list[tuple[str, Tally]]:
        """(label, tally) rows: ``all``, ``cat N`` ascending, then ``hard`` if any."""
        rows = [("all", self.overall)]
        rows += [(f"cat {c}", t) for c, t in sorted(self.by_category.items())]
        if self.hard.questions:
            rows.append(("hard", self.hard))
        return rows

    def as_dict(self) -> dict[str, object]:
        """JSON shape: ``all``, ``hard`` and ``by_category`` (category as a string key)."""
        return {
            "all": self.overall.as_dict(),
            "hard": self.hard.as_dict(),
            "by_category": {str(c): t.as_dict() for c, t in sorted(self.by_category.items())},
        }


@dataclass
class CurvePoint:
    """One point of the cover curve, for one method: sums over questions.

    Attributes:
        label: the point (:func:`point_label`).
        method: ``tuned`` (the product, on Redis) or ``plain-idf``.
        cover / cover_hard / recall: sums of per-question shares (all and ``hard`` questions).
        recalled_chars / prompt_chars: per question, characters of the ``<earlier_lines>``
            section and of every message sent (system message and window).
    """

    label: str
    method: str
    questions: int = 0
    hard_questions: int = 0
    cover: float = 0.0
    cover_hard: float = 0.0
    recall: float = 0.0
    recalled_chars: list[int] = field(default_factory=list)
    prompt_chars: list[int] = field(default_factory=list)

    def add(
        self, hard: bool, shares: tuple[float, float, float], recalled: int, prompt: int
    ) -> None:
        """Count one question."""
        self.questions += 1
        self.recall += shares[0]
        self.cover += shares[1]
        if hard:
            self.hard_questions += 1
            self.cover_hard += shares[1]
        self.recalled_chars.append(recalled)
        self.prompt_chars.append(prompt)

    def as_dict(self) -> dict[str, object]:
        """Means of the shares, medians of the characters."""
        n = max(self.questions, 1)
        return {
            "point": self.label,
            "method": self.method,
            "questions": self.questions,
            "cover": round(self.cover / n, 4),
            "recall": round(self.recall / n, 4),
            "hard_questions": self.hard_questions,
            "cover_hard": round(self.cover_hard / max(self.hard_questions, 1), 4)
            if self.hard_questions
            else None,
            "recalled_chars_median": statistics.median(self.recalled_chars or [0]),
            "recalled_chars_mean": round(statistics.fmean(self.recalled_chars or [0]), 1),
            "prompt_chars_median": statistics.median(self.prompt_chars or [0]),
        }


@dataclass(frozen=True)
class QuestionRow:
    """What one question got: evidence ids, those in the window, the recalled ids per method."""

    sample_id: str
    question: str
    category: int
    hard: bool
    evidence: tuple[str, ...]
    window: tuple[str, ...]
    recalled: dict[str, tuple[str, ...]]
    prompt_chars: int = 0


@dataclass
class RecallReport:
    """A run of :func:`run_recall`.

    Attributes:
        k: lines recalled per question in the fixed mode, ``"budget"`` in the budgeted mode.
        samples: the sample ids run.
        results: method name -> its figures.
        options: the recall options of the main figures.
        questions: one row per question with evidence.
        curve: the cover curve (``tuned`` and ``plain-idf`` at each point), when asked.
        stored_lines: lines stored, all samples together.
        import_s: seconds spent importing (all samples).
        seconds: wall time of the whole run.
        prepare_ms_p50 / prepare_ms_p99: time of one :func:`prepare` (the hook's read path:
            load, window, recall, fetch of the recalled lines), milliseconds.
        postings_cap: the store's postings cap per term.
    """

    k: int | str
    samples: list[str]
    results: dict[str, Result]
    options: RecallOptions = field(default_factory=RecallOptions)
    questions: list[QuestionRow] = field(default_factory=list)
    curve: dict[tuple[str, str], CurvePoint] = field(default_factory=dict)
    stored_lines: int = 0
    import_s: float = 0.0
    seconds: float = 0.0
    prepare_ms_p50: float = 0.0
    prepare_ms_p99: float = 0.0
    postings_cap: int = POSTINGS_CAP

    def median_prompt_chars(self) -> float:
        """Median characters sent per question (system message and window) of the main run."""
        return statistics.median([q.prompt_chars for q in self.questions] or [0])

    def as_json(self, *, source: str = "") -> dict[str, Any]:
        """JSON-ready dict: protocol, figures per method, timings and the per-question rows."""
        return {
            "source": source,
            "citation": LOCOMO_CITATION,
            "protocol": {
                "k": self.k,
                "recall": asdict(self.options),
                "window_chars": Budget().chars,
                "window_messages": Budget().messages,
                "postings_cap": self.postings_cap,
                "methods": list(self.results),
            },
            "samples": self.samples,
            "stored_lines": self.stored_lines,
            "results": {name: result.as_dict() for name, result in self.results.items()},
            "median_prompt_chars": self.median_prompt_chars(),
            "curve": [point.as_dict() for point in self.curve.values()],
            "timing": {
                "seconds": self.seconds,
                "import_s": self.import_s,
                "prepare_ms_p50": self.prepare_ms_p50,
                "prepare_ms_p99": self.prepare_ms_p99,
            },
            "questions": [asdict(row) for row in self.questions],
        }


def recall_table(report: RecallReport, title: str) -> Table:
    """A rich table: one row per group (all, categories, hard), ``recall/cover`` per method.

    Args:
        report: a run of :func:`run_recall`.
        title: the table's title.
    """
    k = report.k
    table = Table(
        title=title,
        caption=f"cells: recall@{k}/cover@{k}; median prompt {report.median_prompt_chars():.0f} "
        "chars (system message + window)",
    )
    table.add_column("group")
    table.add_column("n", justify="right")
    for name in report.results:
        table.add_column(name, justify="right")
    table.add_column("window", justify="right")
    first = next(iter(report.results.values()))
    for label, tally in first.groups():
        cells = [label, str(tally.questions)]
        for result in report.results.values():
            group = dict(result.groups())[label].as_dict()
            cells.append(f"{group[f'recall@{k}']:.3f}/{group[f'cover@{k}']:.3f}")
        cells.append(f"{tally.as_dict()['window']:.3f}")
        table.add_row(*cells)
    return table


def curve_table(report: RecallReport, title: str) -> Table:
    """A rich table of the cover curve: one row per point, tuned beside plain IDF.

    Cells: evidence cover (window + recalled), on the ``hard`` questions when the data has any,
    median characters of the recalled section and median characters sent.
    """
    hard = any(p.hard_questions for p in report.curve.values())
    table = Table(
        title=title,
        caption="tuned, then plain IDF (idf); cover = evidence in window or recalled; rec. = "
        "characters of the recalled lines, prompt = characters sent (medians)",
    )
    table.add_column("point")
    for head in ("", "idf "):
        table.add_column(f"{head}cover", justify="right")
        if hard:
            table.add_column(f"{head}hard", justify="right")
        table.add_column(f"{head}rec.", justify="right")
        table.add_column(f"{head}prompt", justify="right")
    labels = list(dict.fromkeys(label for label, _ in report.curve))
    for label in labels:
        cells = [label]
        for method in ("tuned", "plain-idf"):
            point = report.curve[(label, method)].as_dict()
            cells.append(f"{point['cover']:.3f}")
            if hard:
                cells.append(f"{point['cover_hard']:.3f}")
            cells.append(f"{point['recalled_chars_median']:.0f}")
            cells.append(f"{point['prompt_chars_median']:.0f}")
        table.add_row(*cells)
    return table


__all__ = [
    "TOP_K",
    "CurvePoint",
    "QuestionRow",
    "RecallReport",
    "Result",
    "Tally",
    "curve_table",
    "recall_table",
]
