"""Benchmark: how much of the labelled evidence the product's recall puts in the prompt, on Redis.

Data: files in the LoCoMo format (:func:`litellm_memory_hook.tools.histories.load_locomo`), read in
place, never copied: LoCoMo itself (Maharana et al., "Evaluating Very Long-Term Conversational
Memory of LLM Agents", ACL 2024; snap-research/locomo, CC BY-NC 4.0) and the project's
multilingual chats, whose questions may carry a ``hard`` flag.

Protocol, for every question with evidence (docs/design.md#the-prompt-and-the-window, #recall):

* the whole conversation is imported through the product's own store and index on a real Redis
  (:func:`litellm_memory_hook.tools.importer.import_lines`: blank lines are skipped, so the
  i-th stored line gets seq ``first_seq + i``), under the ``membench`` key prefix, deleted
  afterwards;
* the question is the new message; :func:`litellm_memory_hook.engine.rebuild.prepare` rebuilds the
  request as the hook does: the recent window (default budget 8000 characters / 40 messages, the
  question included) and the recalled lines (postings read from Redis with
  :meth:`~litellm_memory_hook.store.redis_store.MemoryStore.load`, so the postings cap applies,
  dates in the question looked up by time, ranked by :func:`litellm_memory_hook.core.recall.rank`
  and chosen by the recall options: the budgeted mode, or the fixed top ``k``): the ``tuned``
  method; zone UTC;
* two baselines rank the same stored lines, older than the same window, in memory, and choose
  under the same rule (the same ``k``, or the same character budget with the lines' sizes as
  shown): ``plain-idf`` (the plain words of
  :data:`~litellm_memory_hook.core.recall.PLAIN_TERM_OPTIONS`, summed IDF, N = the stored lines)
  and ``bm25`` (the ``bm25s`` package, Lucene BM25 with k1 = 1.5, b = 0.75, over the same words).

Metrics, averaged over questions (each a share of the question's evidence lines, in [0, 1]):
``recall`` = evidence lines among the recalled; ``cover`` = evidence lines in the window or among
the recalled; ``window`` = evidence lines in the window alone (labelled ``@k`` in the fixed mode,
``@budget`` in the budgeted mode). Overall, per LoCoMo category (1 multi-hop, 2 temporal,
3 open-domain, 4 single-hop, 5 adversarial) and on the ``hard`` questions. Beside them the median
characters sent per question (the system message and the window).

The cover curve (:func:`curve_points`): cover, cover of the ``hard`` questions, median characters
of the ``<earlier_lines>`` section and median characters sent, at the fixed mode's k = 2, 4, 8,
12 and the budgeted mode at 1,500 / 2,000 / 2,500 / 3,000 characters, ``tuned`` beside
``plain-idf``. An evidence id that names no stored line (a malformed label, a blank line) counts
as not found; a few LoCoMo labels join two ids with ";" and count as two.

``bench/recall_quality.py`` runs the fixed-k protocol fully in memory (with ablations); this
module holds the pieces both share.
"""

from __future__ import annotations

import asyncio
import heapq
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from benchmarks.recall_report import (
    TOP_K,
    CurvePoint,
    QuestionRow,
    RecallReport,
    Result,
)
from litellm_memory_hook.core import recall
from litellm_memory_hook.core.budgets import Budget
from litellm_memory_hook.core.messages import content_text
from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.core.plan import speaker_label
from litellm_memory_hook.core.prompt import (
    EarlierLine,
    PromptLayers,
    build_system_message,
    earlier_line_chars,
)
from litellm_memory_hook.engine.identity import Identity
from litellm_memory_hook.engine.options import ContextOptions
from litellm_memory_hook.engine.rebuild import prepare
from litellm_memory_hook.engine.recall_step import RecallOptions
from litellm_memory_hook.store.keys import ConversationKeys, MemoryKeys, user_scope
from litellm_memory_hook.store.redis_store import POSTINGS_CAP, MemoryStore
from litellm_memory_hook.tools.histories import History, list_locomo_samples, load_locomo
from litellm_memory_hook.tools.importer import delete_conversation, import_lines, line_to_turn
from litellm_memory_hook.tools.replay import percentile

BENCH_PREFIX = "membench"
CURVE_KS = (2, 4, 8, 12)  # fixed-mode points of the cover curve (lines)
CURVE_BUDGETS = (1500, 2000, 2500, 3000)  # budgeted-mode points of the cover curve (characters)
METHODS = ("plain-idf", "bm25", "tuned")
#: A recall method over lines numbered 0..n-1: (question, first excluded number) -> the numbers
#: of the recalled lines, ascending (the lines from the excluded number on are the window); with
#: ``ranked=True`` the builders below give ``(number, score)`` pairs, best first, instead.
Retriever = Callable[[str, int], list[Any]]


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
    ranked: bool = False,
) -> Retriever:
    """An in-memory postings index scored by :func:`litellm_memory_hook.core.recall.score`.

    Args:
        docs: the terms of each line; line ``i`` is posted under number ``i``.
        query: a question's terms.
        k: lines recalled at most.
        weights: weight per term kind (see :func:`~litellm_memory_hook.core.recall.score`).
        n_docs: N of the IDF formula (default ``len(docs)``).
        ranked: give ``(number, score)`` pairs, best first (:func:`recall.rank`).

    Returns:
        The retriever (exact postings and document frequencies: no cap).
    """
    postings: dict[str, list[int]] = defaultdict(list)
    for number, terms in enumerate(docs):
        for term in dict.fromkeys(terms):
            postings[term].append(number)
    df = {term: len(numbers) for term, numbers in postings.items()}
    total = len(docs) if n_docs is None else n_docs

    def retrieve(question: str, start: int) -> list[Any]:
        found = recall.rank(
            query(question),
            postings,
            df,
            total,
            exclude_from_seq=start,
            k=k,
            term_weights=weights,
        )
        return found if ranked else sorted(number for number, _ in found)

    return retrieve


def bm25_retriever(texts: Sequence[str], *, k: int = TOP_K, ranked: bool = False) -> Retriever:
    """BM25 (``bm25s``, Lucene variant, k1 = 1.5, b = 0.75) over :func:`recall.tokenize` words.

    BM25: S. Robertson and H. Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond",
    2009. Lines scoring 0 are never recalled; ties go to the newer line.

    Args:
        texts: the lines; line ``i`` is number ``i``.
        k: lines recalled at most.
        ranked: give ``(number, score)`` pairs, best first.

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

    def retrieve(question: str, start: int) -> list[Any]:
        words = [w for w in dict.fromkeys(recall.tokenize(question)) if w in vocab]
        if not words:
            return []
        scores = model.get_scores(words)
        best = heapq.nlargest(
            k,
            ((float(scores[n]), n) for n in range(min(start, len(texts))) if scores[n] > 0.0),
        )
        return [(n, v) for v, n in best] if ranked else sorted(n for _, n in best)

    return retrieve


def point_label(options: RecallOptions) -> str:
    """``k=4`` for the fixed mode, ``2500 chars`` for the budgeted mode."""
    return f"k={options.k}" if options.mode == "fixed" else f"{options.chars} chars"


def curve_points(
    ks: Sequence[int] = CURVE_KS,
    budgets: Sequence[int] = CURVE_BUDGETS,
    base: RecallOptions | None = None,
) -> list[RecallOptions]:
    """The points of the cover curve: the fixed mode at each ``k``, then the budgeted mode (the
    other options of ``base``, default the product's) at each budget."""
    base = base or RecallOptions()
    fixed = [replace(base, mode="fixed", k=k) for k in ks]
    return fixed + [replace(base, mode="budget", chars=c) for c in budgets]


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


def _sent_chars(messages: Sequence[Mapping[str, Any]]) -> int:
    return sum(len(content_text(m.get("content"))) for m in messages)


def _choose(
    ranked: Sequence[tuple[int, float]], options: RecallOptions, size: Callable[[int], int]
) -> list[int]:
    """A baseline's lines under the product's selection rule (fixed k, or the budget)."""
    if options.mode == "fixed":
        return [n for n, _ in ranked[: options.k]]
    return recall.fill_budget(
        ranked[: options.k_max],
        size,
        chars=options.chars,
        k_max=options.k_max,
        min_share=options.min_share,
    )


@dataclass
class _Run:
    """What one conversation of the benchmark needs while its questions run."""

    store: MemoryStore
    keys: ConversationKeys
    memory: MemoryKeys
    ids: list[str]
    turns: list[Turn]
    number_of: dict[str, int]
    now: int


async def _ask(
    run: _Run, question: str, options: ContextOptions
) -> tuple[Any, set[str], int, int, int]:
    """One question through :func:`prepare`: (prepared, window ids' start, recalled chars,
    prompt chars, window chars)."""
    prepared = await prepare(
        run.store, run.keys, run.memory, [{"role": "user", "content": question}], options,
        now_ms=run.now,
    )  # fmt: skip
    if prepared is None:
        raise RuntimeError(f"no request for {question!r}")
    window_seqs = prepared.window_seqs
    start = (min(window_seqs) if window_seqs else len(run.turns) + 1) - 1  # a line number
    window_chars = sum(
        len(content_text(m.get("content"))) for m in prepared.messages if m.get("role") != "system"
    )
    return (
        prepared,
        {run.ids[n] for n in range(start, len(run.ids))},
        prepared.layer_chars.get("earlier_lines", 0),
        _sent_chars(prepared.messages),
        window_chars,
    )


async def _run_history(
    store: MemoryStore,
    history: History,
    number: int,
    report: RecallReport,
    options: ContextOptions,
    prefix: str,
    timings: list[float],
    points: Sequence[RecallOptions],
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
        turns = [t for _, t in stored]
        now = max((t.ts_ms for t in turns), default=0) + 86_400_000
        run = _Run(store, keys, memory, ids, turns, {i: n for n, i in enumerate(ids)}, now)
        texts = [t.text for t in turns]
        plain = recall.PLAIN_TERM_OPTIONS
        deepest = max([options.recall.candidates, *(p.candidates for p in points)])
        baselines: dict[str, Retriever] = {
            "plain-idf": memory_idf_retriever(
                [recall.index_terms(text, options=plain) for text in texts],
                lambda q: recall.query_terms(q, options=plain),
                k=deepest,
                weights={"": 1.0},
                ranked=True,
            ),
            "bm25": bm25_retriever(texts, k=deepest, ranked=True),
        }
        timezone = options.timezone

        def size(n: int) -> int:
            t = turns[n]
            return earlier_line_chars(EarlierLine(t.ts_ms, speaker_label(t), t.text), timezone)

        def block(question: str, chosen: Sequence[int]) -> tuple[int, int]:
            lines = [EarlierLine(turns[n].ts_ms, speaker_label(turns[n]), turns[n].text) for n in
                     sorted(chosen)]  # fmt: skip
            layers = PromptLayers(earlier_lines=lines, last_user_text=question, timezone=timezone)
            built = build_system_message(layers, options.wording)
            return len(built.text), built.layer_chars["earlier_lines"]

        for item in history.qa:
            evidence = evidence_ids(item.evidence)
            if not evidence:
                continue
            t0 = time.perf_counter()
            prepared, in_window, _, prompt, window_chars = await _ask(run, item.question, options)
            timings.append((time.perf_counter() - t0) * 1000)
            window = evidence & in_window
            start = min((run.number_of[i] for i in in_window), default=len(ids))
            recalled = {"tuned": tuple(ids[t.seq - 1] for t in prepared.recalled)}
            ranked = {name: retrieve(item.question, start) for name, retrieve in baselines.items()}
            for name, found in ranked.items():
                recalled[name] = tuple(ids[n] for n in sorted(_choose(found, options.recall, size)))
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
                    prompt_chars=prompt,
                )
            )
            for point in points:
                label = point_label(point)
                asked = replace(options, recall=point)
                got, _, chars, sent, _ = await _ask(run, item.question, asked)
                mine = {ids[t.seq - 1] for t in got.recalled}
                report.curve.setdefault((label, "tuned"), CurvePoint(label, "tuned")).add(
                    item.hard, _shares(evidence, window, mine), chars, sent
                )
                chosen = _choose(ranked["plain-idf"], point, size)
                total, layer = block(item.question, chosen)
                report.curve.setdefault((label, "plain-idf"), CurvePoint(label, "plain-idf")).add(
                    item.hard,
                    _shares(evidence, window, {ids[n] for n in chosen}),
                    layer,
                    total + window_chars,
                )
    finally:
        await store.forget_user(who.keys.user_keys)
        await store.redis.delete(who.keys.user_keys.forgets)  # a benchmark leaves nothing


async def run_recall(
    redis_url: str,
    histories: Sequence[History],
    *,
    k: int = TOP_K,
    recall_options: RecallOptions | None = None,
    points: Sequence[RecallOptions] = (),
    budget: Budget | None = None,
    postings_cap: int = POSTINGS_CAP,
    prefix: str = BENCH_PREFIX,
) -> RecallReport:
    """Measure evidence recall and cover of the three methods (see the module docstring).

    Args:
        redis_url: a real Redis; the run writes one conversation at a time under ``prefix``
            and deletes it (and its user-index entry) afterwards, also on failure.
        histories: the conversations with their questions (LoCoMo format).
        k: lines recalled per question in the fixed mode (the seed's top ``k``), used when
            ``recall_options`` is not given.
        recall_options: the recall options of the main figures (e.g. the budgeted default,
            ``RecallOptions()``); the baselines choose their lines under the same rule.
        points: more recall options to measure as the cover curve (:func:`curve_points`).
        budget: the recent window (default: 8000 characters / 40 messages).
        postings_cap: the store's postings cap per term.
        prefix: key prefix of the benchmark's keys.

    Returns:
        The figures per method, per question rows, the curve and timings.

    Raises:
        StoreError: Redis failed.
        RuntimeError: the import did not store the lines in order (a bug).
        ModuleNotFoundError: ``bm25s`` is not installed.
    """
    began = time.perf_counter()
    chosen = recall_options or RecallOptions(mode="fixed", k=k)
    label: int | str = chosen.k if chosen.mode == "fixed" else "budget"
    report = RecallReport(
        k=label,
        samples=[h.sample_id for h in histories],
        results={name: Result(label) for name in METHODS},
        options=chosen,
        postings_cap=postings_cap,
    )
    options = ContextOptions(budget=budget or Budget(), recall=chosen, timezone="UTC")
    redis = aioredis.from_url(redis_url, decode_responses=False)
    timings: list[float] = []
    try:
        store = MemoryStore(redis, ttl_s=3600, postings_cap=postings_cap)
        for number, history in enumerate(histories):
            await _run_history(
                store, history, number, report, options, prefix, timings, list(points)
            )
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
