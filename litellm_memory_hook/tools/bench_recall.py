"""Benchmark: how much of the labelled evidence the product's recall puts in the prompt, on Redis.

Data: files in the LoCoMo format (:func:`litellm_memory_hook.tools.datasets.load_locomo`), read in
place, never copied: LoCoMo itself (Maharana et al., "Evaluating Very Long-Term Conversational
Memory of LLM Agents", ACL 2024; snap-research/locomo, CC BY-NC 4.0) and the project's
multilingual chats, whose questions may carry a ``hard`` flag.

Protocol, for every question with evidence (DESIGN.md sections 5 and 6):

* the whole conversation is imported through the product's own store and index on a real Redis
  (:func:`litellm_memory_hook.tools.importer.import_lines`: blank lines are skipped, so the
  i-th stored line gets seq ``first_seq + i``), under the ``membench`` key prefix, deleted
  afterwards;
* the question is the new message; :func:`litellm_memory_hook.proxy.context.prepare` rebuilds the
  request as the hook does: the recent window (default budget 8000 characters / 40 messages, the
  question included) and the top ``k`` recalled lines (postings read from Redis with
  :meth:`~litellm_memory_hook.store.redis_store.MemoryStore.load`, so the postings cap applies,
  scored by
  :func:`litellm_memory_hook.core.recall.score`): the ``tuned`` method;
* two baselines recall from the same stored lines, older than the same window, in memory:
  ``plain-idf`` (the plain words of :data:`~litellm_memory_hook.core.recall.PLAIN_TERM_OPTIONS`,
  summed IDF, N = the stored lines) and ``bm25`` (the ``bm25s`` package, Lucene BM25 with
  k1 = 1.5, b = 0.75, over the same words).

Metrics, averaged over questions (each a share of the question's evidence lines, in [0, 1]):
``recall@k`` = evidence lines among the ``k`` recalled; ``cover@k`` = evidence lines in the
window or among the recalled; ``window`` = evidence lines in the window alone. Overall, per
LoCoMo category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial) and on the
``hard`` questions. An evidence id that names no stored line (a malformed label, a blank line)
counts as not found; a few LoCoMo labels join two ids with ";" and count as two.

``bench/recall_quality.py`` runs the same protocol fully in memory (with ablations); this module
holds the pieces both share.
"""

from __future__ import annotations

import asyncio
import heapq
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from rich.table import Table

from litellm_memory_hook.core import recall
from litellm_memory_hook.core.plan import Budget
from litellm_memory_hook.proxy.context import ContextOptions, prepare
from litellm_memory_hook.proxy.identity import Identity
from litellm_memory_hook.store.keys import ConversationKeys, user_scope
from litellm_memory_hook.store.redis_store import POSTINGS_CAP, MemoryStore
from litellm_memory_hook.tools.datasets import History, list_locomo_samples, load_locomo
from litellm_memory_hook.tools.importer import delete_conversation, import_lines, line_to_turn
from litellm_memory_hook.tools.replay import percentile

BENCH_PREFIX = "membench"
TOP_K = 4  # DESIGN.md section 6: recalled lines per request
METHODS = ("plain-idf", "bm25", "tuned")
LOCOMO_CITATION = (
    "LoCoMo: Maharana et al., Evaluating Very Long-Term Conversational Memory of LLM Agents, "
    "ACL 2024 (snap-research/locomo, CC BY-NC 4.0)"
)

#: A recall method over lines numbered 0..n-1: (question, first excluded number) -> the numbers
#: of the recalled lines, ascending (the lines from the excluded number on are the window).
Retriever = Callable[[str, int], list[int]]


def evidence_ids(evidence: Iterable[str]) -> set[str]:
    """The evidence line ids of a question; ids joined with ";" ("D8:6; D9:17") are split."""
    return {part.strip() for raw in evidence for part in raw.split(";") if part.strip()}


def memory_idf_retriever(
    docs: Sequence[Sequence[str]],
    query: Callable[[str], Sequence[str]],
    *,
    k: int = TOP_K,
    weights: Mapping[str, float] | None = None,
    n_docs: int | None = None,
) -> Retriever:
    """An in-memory postings index scored by :func:`litellm_memory_hook.core.recall.score`.

    Args:
        docs: the terms of each line; line ``i`` is posted under number ``i``.
        query: a question's terms.
        k: lines recalled at most.
        weights: weight per term kind (see :func:`~litellm_memory_hook.core.recall.score`).
        n_docs: N of the IDF formula (default ``len(docs)``).

    Returns:
        The retriever (exact postings and document frequencies: no cap).
    """
    postings: dict[str, list[int]] = defaultdict(list)
    for number, terms in enumerate(docs):
        for term in dict.fromkeys(terms):
            postings[term].append(number)
    df = {term: len(numbers) for term, numbers in postings.items()}
    total = len(docs) if n_docs is None else n_docs

    def retrieve(question: str, start: int) -> list[int]:
        found = recall.score(
            query(question),
            postings,
            df,
            total,
            exclude_from_seq=start,
            k=k,
            term_weights=weights,
        )
        return [number for number, _ in found]

    return retrieve


def bm25_retriever(texts: Sequence[str], *, k: int = TOP_K) -> Retriever:
    """BM25 (``bm25s``, Lucene variant, k1 = 1.5, b = 0.75) over :func:`recall.tokenize` words.

    BM25: S. Robertson and H. Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond",
    2009. Lines scoring 0 are never recalled; ties go to the newer line.

    Args:
        texts: the lines; line ``i`` is number ``i``.
        k: lines recalled at most.

    Raises:
        ModuleNotFoundError: ``bm25s`` (a ``dev`` extra) is not installed.
    """
    import bm25s  # optional benchmark dependency

    corpus = [recall.tokenize(text) for text in texts]
    if not any(corpus):
        return lambda question, start: []
    model = bm25s.BM25()
    model.index(corpus, show_progress=False)
    vocab: Mapping[str, int] = model.vocab_dict

    def retrieve(question: str, start: int) -> list[int]:
        words = [w for w in dict.fromkeys(recall.tokenize(question)) if w in vocab]
        if not words:
            return []
        scores = model.get_scores(words)
        best = heapq.nlargest(
            k,
            ((float(scores[n]), n) for n in range(min(start, len(texts))) if scores[n] > 0.0),
        )
        return sorted(n for _, n in best)

    return retrieve


@dataclass
class Tally:
    """Sums of per-question shares for one group of questions (``k``: the label of recall@k)."""

    k: int = TOP_K
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

    k: int = TOP_K
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


@dataclass
class RecallReport:
    """A run of :func:`run_recall`.

    Attributes:
        k: lines recalled per question.
        samples: the sample ids run.
        results: method name -> its figures.
        questions: one row per question with evidence.
        stored_lines: lines stored, all samples together.
        import_s: seconds spent importing (all samples).
        seconds: wall time of the whole run.
        prepare_ms_p50 / prepare_ms_p99: time of one :func:`prepare` (the hook's read path:
            load, window, recall, fetch of the recalled lines), milliseconds.
        postings_cap: the store's postings cap per term.
    """

    k: int
    samples: list[str]
    results: dict[str, Result]
    questions: list[QuestionRow] = field(default_factory=list)
    stored_lines: int = 0
    import_s: float = 0.0
    seconds: float = 0.0
    prepare_ms_p50: float = 0.0
    prepare_ms_p99: float = 0.0
    postings_cap: int = POSTINGS_CAP

    def as_json(self, *, source: str = "") -> dict[str, Any]:
        """JSON-ready dict: protocol, figures per method, timings and the per-question rows."""
        return {
            "source": source,
            "citation": LOCOMO_CITATION,
            "protocol": {
                "k": self.k,
                "window_chars": Budget().chars,
                "window_messages": Budget().messages,
                "postings_cap": self.postings_cap,
                "methods": list(self.results),
            },
            "samples": self.samples,
            "stored_lines": self.stored_lines,
            "results": {name: result.as_dict() for name, result in self.results.items()},
            "timing": {
                "seconds": self.seconds,
                "import_s": self.import_s,
                "prepare_ms_p50": self.prepare_ms_p50,
                "prepare_ms_p99": self.prepare_ms_p99,
            },
            "questions": [asdict(row) for row in self.questions],
        }


def load_histories(path: Path, sample_ids: Sequence[str] = ()) -> list[History]:
    """The samples of a LoCoMo-format file (all of them when ``sample_ids`` is empty).

    Raises:
        DatasetError: unreadable file, unknown sample, or a malformed session.
    """
    return [load_locomo(path, s) for s in (list(sample_ids) or list_locomo_samples(path))]


def _shares(evidence: set[str], window: set[str], recalled: set[str]) -> tuple[float, float, float]:
    n = len(evidence)
    return (
        len(evidence & recalled) / n,
        len(evidence & (recalled | window)) / n,
        len(evidence & window) / n,
    )


async def _run_history(
    store: MemoryStore,
    history: History,
    number: int,
    report: RecallReport,
    options: ContextOptions,
    prefix: str,
    timings: list[float],
) -> None:
    """Import one conversation, ask its questions, add the figures to ``report``, clean up."""
    user = f"recall{number}"
    keys = ConversationKeys.for_ids(prefix, "bench", user, "recall")
    memory = keys.user_keys.memory_set(user_scope("recall"))
    who = Identity("bench", user, "recall", "recall", keys, memory, "recall")
    await delete_conversation(store, who)
    try:
        started = time.perf_counter()
        imported = await import_lines(store, who, history.lines)
        report.import_s += time.perf_counter() - started
        stored = [(line, t) for line in history.lines if (t := line_to_turn(line)) is not None]
        if len(stored) != imported.turns or imported.first_seq not in (0, 1):
            raise RuntimeError(f"{history.sample_id}: import did not store the lines in order")
        report.stored_lines += len(stored)
        ids = [line.line_id for line, _ in stored]
        number_of = {line_id: n for n, line_id in enumerate(ids)}  # seq = n + 1
        texts = [t.text for _, t in stored]
        plain = recall.PLAIN_TERM_OPTIONS
        baselines: dict[str, Retriever] = {
            "plain-idf": memory_idf_retriever(
                [recall.index_terms(text, options=plain) for text in texts],
                lambda q: recall.query_terms(q, options=plain),
                k=options.recall_k,
                weights={"": 1.0},
            ),
            "bm25": bm25_retriever(texts, k=options.recall_k),
        }
        now = max((t.ts_ms for _, t in stored), default=0) + 86_400_000
        for item in history.qa:
            evidence = evidence_ids(item.evidence)
            if not evidence:
                continue
            t0 = time.perf_counter()
            prepared = await prepare(
                store,
                keys,
                memory,
                [{"role": "user", "content": item.question}],
                options,
                now_ms=now,
            )
            timings.append((time.perf_counter() - t0) * 1000)
            if prepared is None:
                raise RuntimeError(f"{history.sample_id}: no request for {item.question!r}")
            seqs = prepared.plan.history_seqs
            in_window = len(prepared.messages) - 1 - len(prepared.plan.new)
            window_seqs = [s for s in seqs[len(seqs) - in_window :] if s]
            start = (min(window_seqs) if window_seqs else len(stored) + 1) - 1  # a line number
            window = {e for e in evidence if e in number_of and number_of[e] >= start}
            recalled = {"tuned": tuple(ids[t.seq - 1] for t in prepared.recalled)}
            for name, retrieve in baselines.items():
                recalled[name] = tuple(ids[n] for n in retrieve(item.question, start))
            for name in METHODS:
                report.results[name].add(
                    item.category, item.hard, _shares(evidence, window, set(recalled[name]))
                )
            report.questions.append(
                QuestionRow(
                    sample_id=history.sample_id,
                    question=item.question,
                    category=item.category,
                    hard=item.hard,
                    evidence=tuple(sorted(evidence)),
                    window=tuple(sorted(window)),
                    recalled={name: recalled[name] for name in METHODS},
                )
            )
    finally:
        await store.forget_user(who.keys.user_keys)


async def run_recall(
    redis_url: str,
    histories: Sequence[History],
    *,
    k: int = TOP_K,
    budget: Budget | None = None,
    postings_cap: int = POSTINGS_CAP,
    prefix: str = BENCH_PREFIX,
) -> RecallReport:
    """Measure evidence recall@k and cover@k of the three methods (see the module docstring).

    Args:
        redis_url: a real Redis; the run writes one conversation at a time under ``prefix``
            and deletes it (and its user-index entry) afterwards, also on failure.
        histories: the conversations with their questions (LoCoMo format).
        k: lines recalled per question (``ContextOptions.recall_k``).
        budget: the recent window (default: 8000 characters / 40 messages).
        postings_cap: the store's postings cap per term.
        prefix: key prefix of the benchmark's keys.

    Returns:
        The figures per method, per question rows and timings.

    Raises:
        StoreError: Redis failed.
        RuntimeError: the import did not store the lines in order (a bug).
        ModuleNotFoundError: ``bm25s`` is not installed.
    """
    began = time.perf_counter()
    report = RecallReport(
        k=k,
        samples=[h.sample_id for h in histories],
        results={name: Result(k) for name in METHODS},
        postings_cap=postings_cap,
    )
    options = ContextOptions(budget=budget or Budget(), recall_k=k)
    redis = aioredis.from_url(redis_url, decode_responses=False)
    timings: list[float] = []
    try:
        store = MemoryStore(redis, ttl_s=3600, postings_cap=postings_cap)
        for number, history in enumerate(histories):
            await _run_history(store, history, number, report, options, prefix, timings)
    finally:
        await redis.aclose()
    if timings:
        report.prepare_ms_p50 = round(statistics.median(timings), 3)
        report.prepare_ms_p99 = round(percentile(timings, 99), 3)
    report.import_s = round(report.import_s, 2)
    report.seconds = round(time.perf_counter() - began, 2)
    return report


def run_recall_sync(*args: Any, **kwargs: Any) -> RecallReport:
    """:func:`run_recall` on a fresh event loop."""
    return asyncio.run(run_recall(*args, **kwargs))


def recall_table(report: RecallReport, title: str) -> Table:
    """A rich table: one row per group (all, categories, hard), ``recall@k/cover@k`` per method.

    Args:
        report: a run of :func:`run_recall`.
        title: the table's title.
    """
    table = Table(title=title, caption=f"cells: recall@{report.k}/cover@{report.k}")
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
            cells.append(f"{group[f'recall@{report.k}']:.3f}/{group[f'cover@{report.k}']:.3f}")
        cells.append(f"{tally.as_dict()['window']:.3f}")
        table.add_row(*cells)
    return table
