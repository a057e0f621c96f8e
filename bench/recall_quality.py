"""Recall quality, offline: how much of the labelled evidence the recall layer puts in the prompt.

Data (read in place from ``../shared/data``, never copied into this repository):

* LoCoMo (Maharana et al., "Evaluating Very Long-Term Conversational Memory of LLM Agents",
  ACL 2024; snap-research/locomo, CC BY-NC 4.0): the 6 dev conversations of
  ``locomo/locomo-dev.json``.
* ``multiling/multiling-dev.json``: the project's 2 companion-app chats (Hinglish; English,
  Hinglish and Devanagari mixed), with a ``hard`` flag on questions that plain keyword matching
  cannot answer.

Protocol (DESIGN.md sections 5, 6 and 10): for every question with evidence, the whole
conversation is the history (the newest line has the highest seq) and the question is the new
message. Every line is indexed (an in-memory index, no Redis); the recent window is taken as the
product takes it (walk back from the newest line until 8000 characters or 40 messages, counting
``len(text)``; a line that would overflow the budget stops the walk; at least the newest line);
the top 4 come from the older lines.

Metrics, averaged over questions: ``recall@4`` = evidence lines among the 4 recalled / evidence
lines; ``cover@4`` = evidence lines in window + top 4 / evidence lines. Overall, per LoCoMo
category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial) and on the
``hard`` questions.

Methods, side by side in one run:

* ``plain-idf``: :func:`~litellm_memory_hook.core.recall.tokenize` words only, summed IDF.
* ``bm25``: the ``bm25s`` package (Lucene BM25, k1=1.5, b=0.75) over the same words.
* ``tuned``: :func:`~litellm_memory_hook.core.recall.index_terms` /
  :func:`~litellm_memory_hook.core.recall.query_terms` with their extra keys, scored by
  :func:`~litellm_memory_hook.core.recall.score` (what the product runs).

Then the ablations: the tuned scheme with one idea switched off or changed at a time.

Usage::

    .venv/bin/python bench/recall_quality.py --json bench/out/recall_quality.json

The run that chose the defaults (deterministic, about 10 s; recall@4 / cover@4):

=================  ===============  ===============  ===============
method             LoCoMo dev       multiling        multiling hard
=================  ===============  ===============  ===============
plain-idf          0.458 / 0.539    0.561 / 0.643    0.053 / 0.184
bm25               0.426 / 0.507    0.561 / 0.643    0.053 / 0.184
tuned              0.555 / 0.636    0.663 / 0.745    0.316 / 0.447
=================  ===============  ===============  ===============

Evidence ids that name no line of the conversation (3 malformed LoCoMo labels) count as not
found.

This tool measures term schemes at a fixed 4 lines, in memory (no dates: they need the store's
lookup by time). The product's default, budgeted recall (``recall.max_chars``), the dates in
questions and the cover curve against recalled characters are measured on Redis by
``litellm-memory bench recall ../shared/data/locomo/locomo-dev.json
../shared/data/multiling/multiling-dev.json``. Scripts without spaces (now segmented with ICU)
do not occur in these data sets; ``tests/integration/test_false_recall.py`` covers them.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

try:
    from benchmarks import recall as bench_recall
    from benchmarks import recall_report
    from litellm_memory_hook.core import recall
    from litellm_memory_hook.tools.histories import (
        History,
        HistoryLine,
        list_locomo_samples,
        load_locomo,
    )
except ImportError:  # run as a script from a checkout: bench/ is on sys.path, not the root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    if getattr(sys.modules.get("benchmarks"), "__file__", None) is None:
        sys.modules.pop("benchmarks", None)  # a folder of that name found first, not the package
    from benchmarks import recall as bench_recall
    from benchmarks import recall_report
    from litellm_memory_hook.core import recall
    from litellm_memory_hook.tools.histories import (
        History,
        HistoryLine,
        list_locomo_samples,
        load_locomo,
    )

# Shared with ``litellm-memory bench recall`` (the same protocol on a real Redis).
Result = recall_report.Result
Retriever = bench_recall.Retriever  # (question, window start) -> recalled line indexes (seqs)
Tally = recall_report.Tally

DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"  # ../shared/data of the repo
DATA_FILES = {
    "locomo": Path("locomo") / "locomo-dev.json",
    "multiling": Path("multiling") / "multiling-dev.json",
}
DATASETS = {name: DATA_DIR / rel for name, rel in DATA_FILES.items()}
WINDOW_CHARS = 8000  # DESIGN.md section 5: recent window budget, characters
WINDOW_MESSAGES = 40  # DESIGN.md section 5: recent window budget, messages
TOP_K = recall_report.TOP_K  # DESIGN.md section 6: recalled lines


def window_start(lines: Sequence[HistoryLine]) -> int:
    """Index of the oldest line of the recent window (DESIGN.md section 5).

    Walks back from the newest line while the window holds fewer than ``WINDOW_MESSAGES`` lines
    and the next line fits in what is left of ``WINDOW_CHARS`` (``len(text)``); the newest line is
    always in the window.
    """
    if not lines:
        return 0
    start = len(lines) - 1
    used = len(lines[start].text)
    while start > 0 and len(lines) - start < WINDOW_MESSAGES:
        size = len(lines[start - 1].text)
        if used + size > WINDOW_CHARS:
            break
        used += size
        start -= 1
    return start


def idf_retriever(
    lines: Sequence[HistoryLine],
    index: Callable[[HistoryLine, str], list[str]],
    query: Callable[[str], list[str]],
    weights: Mapping[str, float] | None,
) -> Retriever:
    """An in-memory postings index over ``lines`` (seq = line index), scored by recall.score.

    ``index(line, previous_text)`` gives a line's terms, ``query(question)`` the question's.
    """
    docs = [index(line, lines[seq - 1].text if seq > 0 else "") for seq, line in enumerate(lines)]
    return bench_recall.memory_idf_retriever(docs, query, k=TOP_K, weights=weights)


def bm25_retriever(lines: Sequence[HistoryLine]) -> Retriever:
    """BM25 (``bm25s``, Lucene variant, defaults k1=1.5, b=0.75) over :func:`recall.tokenize`."""
    return bench_recall.bm25_retriever([line.text for line in lines], k=TOP_K)


@dataclass(frozen=True)
class Method:
    """A recall method under test."""

    name: str
    build: Callable[[Sequence[HistoryLine]], Retriever]


def idf_method(
    name: str,
    options: recall.TermOptions,
    weights: Mapping[str, float] | None = None,
    *,
    speaker_keys: bool = False,
    stem_keys: bool = False,
    stopwords: frozenset[str] | None = None,
) -> Method:
    """A summed-IDF method over ``index_terms`` / ``query_terms`` with the given options.

    ``speaker_keys`` and ``stem_keys`` add two ideas that were tried and left out of the product,
    so that their ablation rows can be reproduced: ``@`` + the speaker's name on every line (and
    ``@`` + every plain word of the question), and ``=`` + the English stem of every plain word.
    ``stopwords`` replaces the packaged lists.
    """

    def extra(words: Sequence[str]) -> list[str]:
        keys = []
        if stem_keys:
            keys += [f"={recall.english_stem(w)}" for w in words if w.isascii()]
        return keys

    def index(line: HistoryLine, previous: str) -> list[str]:
        terms = recall.index_terms(
            line.text, previous=previous, stopwords=stopwords, options=options
        )
        plain = [t for t in terms if not recall.term_kind(t)]
        if speaker_keys:
            terms += [f"@{w}" for w in recall.tokenize(line.speaker, frozenset())]
        return terms + extra(plain)

    def query(text: str) -> list[str]:
        terms = recall.query_terms(text, stopwords=stopwords, options=options)
        plain = [t for t in terms if not recall.term_kind(t)]
        if speaker_keys:
            terms += [f"@{w}" for w in plain]
        return terms + extra(plain)

    return Method(name, lambda lines: idf_retriever(lines, index, query, weights))


def python_word_method(name: str) -> Method:
    r"""Build the baseline of DESIGN.md section 10 (plain IDF over Python ``\w`` words).

    Python ``\w+`` words (which cut Devanagari words at their vowel signs), 3+ characters,
    English stopwords only, summed IDF, no extra keys.
    """
    english = recall.load_stopwords(lists=["en"])

    def words(text: str) -> list[str]:
        found = re.findall(r"\w+", text.casefold())
        return sorted({w for w in found if len(w) >= 3 and w not in english})

    def index(line: HistoryLine, previous: str) -> list[str]:
        return words(line.text)

    return Method(name, lambda lines: idf_retriever(lines, index, words, {"": 1.0}))


TUNED = recall.DEFAULT_TERM_OPTIONS
METHODS = (
    idf_method("plain-idf", recall.PLAIN_TERM_OPTIONS, {"": 1.0}),
    Method("bm25", bm25_retriever),
    idf_method("tuned", TUNED),
)
ABLATIONS = (
    idf_method("tuned", TUNED),
    python_word_method("plain, Python \\w words"),
    idf_method(
        "plain, en stopwords",
        recall.PLAIN_TERM_OPTIONS,
        {"": 1.0},
        stopwords=recall.load_stopwords(lists=["en"]),
    ),
    idf_method("tuned, en stopwords", TUNED, stopwords=recall.load_stopwords(lists=["en"])),
    idf_method(
        "tuned, en+hi-latn stop", TUNED, stopwords=recall.load_stopwords(lists=["en", "hi-latn"])
    ),
    idf_method("- context keys (^)", replace(TUNED, context=False)),
    idf_method("- phonetic keys (~)", replace(TUNED, phonetic=False, translit=False)),
    idf_method("- transliteration", replace(TUNED, translit=False)),
    idf_method("- stem in ~ key", replace(TUNED, stem_in_key=False)),
    idf_method("+ final-n rule (Latin)", replace(TUNED, final_nasal=True)),
    idf_method("~ weight 0.25", TUNED, {"~": 0.25}),
    idf_method("~ weight 0.75", TUNED, {"~": 0.75}),
    idf_method("~ weight 1.0", TUNED, {"~": 1.0}),
    idf_method("^ weight 0.5", TUNED, {"^": 0.5}),
    idf_method("^ weight 0.75", TUNED, {"^": 0.75}),
    idf_method("+ speaker keys (@) 0.5", TUNED, {"@": 0.5}, speaker_keys=True),
    idf_method("+ speaker keys (@) 1.0", TUNED, {"@": 1.0}, speaker_keys=True),
    idf_method("+ stem keys (=) 0.5", TUNED, {"=": 0.5}, stem_keys=True),
    idf_method("+ stem keys (=) 1.0", TUNED, {"=": 1.0}, stem_keys=True),
)


def evaluate(histories: Sequence[History], method: Method) -> Result:
    """Run one method over every question with evidence of the histories."""
    result = Result()
    for history in histories:
        lines = history.lines
        seq_of = {line.line_id: seq for seq, line in enumerate(lines)}
        start = window_start(lines)
        retrieve = method.build(lines)
        for item in history.qa:
            evidence = bench_recall.evidence_ids(item.evidence)  # "D8:6; D9:17" counts as two
            if not evidence:
                continue
            recalled = {lines[seq].line_id for seq in retrieve(item.question, start)}
            window = {e for e in evidence if e in seq_of and seq_of[e] >= start}
            shares = (
                len(evidence & recalled) / len(evidence),
                len(evidence & (recalled | window)) / len(evidence),
                len(window) / len(evidence),
            )
            result.add(item.category, item.hard, shares)
    return result


def load(path: Path) -> list[History]:
    """Read every sample of a LoCoMo-format file.

    Raises:
        DatasetError: the file cannot be read or is malformed.
    """
    return [load_locomo(path, sample_id) for sample_id in list_locomo_samples(path)]


def _row(label: str, tally: Tally) -> str:
    d = tally.as_dict()
    return (
        f"{label:<22} {d['questions']:>5} {d['recall@4']:>9.3f} {d['cover@4']:>8.3f}"
        f" {d['window']:>7.3f}"
    )


def format_results(name: str, results: Mapping[str, Result]) -> str:
    """A text table: one block per method, rows overall / by category / hard."""
    out = [
        f"\n== {name} ==",
        f"{'method / group':<22} {'n':>5} {'recall@4':>9} {'cover@4':>8} {'window':>7}",
    ]
    for method, result in results.items():
        out.append(_row(method, result.overall))
        for category, tally in sorted(result.by_category.items()):
            out.append(_row(f"  category {category}", tally))
        if result.hard.questions:
            out.append(_row("  hard", result.hard))
    return "\n".join(out)


def format_ablations(rows: Mapping[str, Mapping[str, Result]]) -> str:
    """A text table: one row per variant, recall/cover per dataset and on multiling hard."""
    head = (
        f"\n== ablations (recall@4 / cover@4) ==\n{'variant':<22} {'locomo':>15} "
        f"{'multiling':>15} {'multiling hard':>15}"
    )
    out = [head]
    for variant, per_data in rows.items():
        cells = []
        for tally in (
            per_data["locomo"].overall,
            per_data["multiling"].overall,
            per_data["multiling"].hard,
        ):
            d = tally.as_dict()
            cells.append(f"{d['recall@4']:.3f} / {d['cover@4']:.3f}")
        out.append(f"{variant:<22} " + " ".join(f"{c:>15}" for c in cells))
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--json", type=Path, help="write the results to this JSON file")
    parser.add_argument("--no-ablations", action="store_true", help="skip the ablation table")
    parser.add_argument(
        "--data", type=Path, default=DATA_DIR, help=f"the shared data folder (default {DATA_DIR})"
    )
    args = parser.parse_args(argv)

    began = time.perf_counter()
    paths = {name: args.data / rel for name, rel in DATA_FILES.items()}
    histories = {name: load(path) for name, path in paths.items()}
    report: dict[str, object] = {
        "protocol": {
            "window_chars": WINDOW_CHARS,
            "window_messages": WINDOW_MESSAGES,
            "top_k": TOP_K,
            "data": {name: str(path) for name, path in paths.items()},
        },
    }
    text = []
    for name, hist in histories.items():
        results = {method.name: evaluate(hist, method) for method in METHODS}
        report[name] = {m: r.as_dict() for m, r in results.items()}
        text.append(format_results(name, results))
    if not args.no_ablations:
        rows = {
            variant.name: {name: evaluate(hist, variant) for name, hist in histories.items()}
            for variant in ABLATIONS
        }
        report["ablations"] = {
            v: {name: r.as_dict() for name, r in per.items()} for v, per in rows.items()
        }
        text.append(format_ablations(rows))
    report["seconds"] = round(time.perf_counter() - began, 2)
    sys.stdout.write("\n".join(text) + f"\n\n({report['seconds']} s)\n")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
