"""The one scorer of the package: lines ranked by the rare terms they share with a query (pure).

A line's score is ``sum(weight(kind) * log(1 + N / (1 + df)))`` over the distinct shared terms
(:func:`rank`); over several conversations as one collection (:func:`rank_collections`); over a
set of short texts, the memories (:func:`rank_texts`). Postings: term -> ascending seqs.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from litellm_memory_hook.core.recall.scheme import (
    BOOST_KINDS,
    DEFAULT_TERM_OPTIONS,
    DEFAULT_TERM_WEIGHTS,
    TermOptions,
    term_kind,
)
from litellm_memory_hook.core.recall.soundalike import query_sound_alikes
from litellm_memory_hook.core.recall.terms import query_terms_cached, text_terms_cached

SCORE_EPSILON = 1e-9
"""A score at or below this is nothing left: float sums and differences of IDF weights, once
the weight of false keys is taken off (:class:`SoundAlikes`)."""


def idf(n_docs: int, df: int) -> float:
    """Inverse document frequency ``log(1 + N / (1 + df))``.

    The smoothed form never divides by zero and stays positive for any ``df`` (also one larger
    than ``N``, as a store that counts a term twice may report).

    Args:
        n_docs: N, the number of indexed messages; ``N <= 0`` gives 0.0.
        df: the number of messages holding the term; negative values count as 0.

    Returns:
        The weight, natural log, in ``[0, log(1 + N)]``.
    """
    if n_docs <= 0:
        return 0.0
    return math.log1p(n_docs / (1 + max(df, 0)))


Postings = Mapping[str, Sequence[int] | npt.NDArray[Any]]
"""term -> ascending sequence numbers of the lines holding it (may be only the newest ones)."""

Key = TypeVar("Key", bound=Hashable)

#: At most this many postings in all are summed in plain Python (:func:`_rank_small`); more go
#: through numpy (:func:`_rank_arrays`), whose fixed cost (~100 us) a memory set of a few dozen
#: items or a message of rare words does not repay. Measured on this project's 2-core machine:
#: 16 postings 22 vs 116 us, 64: 105 vs 185 us, 128: 173 vs 193 us, 256: 257 vs 208 us (lists;
#: numpy arrays from the store break even near 64). Both give the same result (a property test).
SMALL_RANK_POSTINGS = 96

_Terms = tuple[list[Sequence[int] | npt.NDArray[Any]], list[float]]


def _weights(term_weights: Mapping[str, float] | None) -> dict[str, float]:
    weights = dict(DEFAULT_TERM_WEIGHTS)
    if term_weights is not None:
        weights.update(term_weights)
    return weights


def _flatten(
    segments: Sequence[Sequence[int] | npt.NDArray[Any]],
    segment_weights: Sequence[float],
    exclude_from_seq: int | None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """All postings of the segments as (seq, weight) arrays; repeats within a term count once."""
    lengths = np.fromiter((len(x) for x in segments), dtype=np.int64, count=len(segments))
    every = np.concatenate([np.asarray(x, dtype=np.int64) for x in segments])
    weight_of = np.repeat(np.asarray(segment_weights, dtype=np.float64), lengths)
    # The store's postings are strictly ascending; anything else (hand-made input) is
    # de-duplicated per term.
    starts = np.cumsum(lengths) - lengths
    steps = np.diff(every) > 0
    steps[starts[1:] - 1] = True  # a new term may start anywhere
    if not bool(np.all(steps)):
        pairs = np.unique(np.stack([np.repeat(np.arange(len(segments)), lengths), every]), axis=1)
        every = pairs[1]
        weight_of = np.asarray(segment_weights, dtype=np.float64)[pairs[0]]
    if exclude_from_seq is not None:
        keep = every < exclude_from_seq
        every, weight_of = every[keep], weight_of[keep]
    return every, weight_of


def rank(
    query: Sequence[str],
    postings: Postings,
    df: Mapping[str, int],
    n_docs: int,
    *,
    exclude_from_seq: int | None = None,
    k: int = 4,
    term_weights: Mapping[str, float] | None = None,
    main_kinds: frozenset[str] | None = None,
) -> list[tuple[int, float]]:
    """The ``k`` best older messages for a query, best first: the one scorer of the package.

    A candidate's score is ``sum(weight(kind(t)) * idf(n_docs, df[t]))`` over the distinct query
    terms ``t`` whose postings hold it (summed IDF, with a weight per term kind). Terms
    of a kind in ``BOOST_KINDS`` (dates) add only to candidates that another term matched; with
    ``main_kinds`` (a date-led question: ``{DATE_PREFIX}``) the candidates are the messages that
    terms of those kinds match, and every other term only adds to them.
    Recall of conversation lines (:func:`score`, :func:`rank_collections`) and the choice of
    stored memories (:func:`rank_texts`, used by
    :func:`litellm_memory_hook.core.selection.select_items`) all go through here.

    Args:
        query: the query's terms (:func:`query_terms`, plus date terms); repeats count once.
        postings: term -> sequence numbers of the messages holding it (ascending; may be only
            the newest postings of a term). Terms missing here match nothing.
        df: term -> exact document frequency; a term missing here uses ``len(postings[t])``.
        n_docs: N, the number of indexed messages.
        exclude_from_seq: messages with ``seq >= exclude_from_seq`` (the recent window, and
            anything newer) are never returned; ``None`` excludes nothing.
        k: how many to return at most; ``k <= 0`` gives ``[]``.
        term_weights: weight per term kind (the prefix of :func:`term_kind`, ``""`` for plain
            words); kinds missing from it use ``DEFAULT_TERM_WEIGHTS``, then 1.0.
        main_kinds: the kinds whose terms choose the candidates, all others only adding to
            them; ``None``: every kind but ``BOOST_KINDS``.

    Returns:
        Up to ``k`` pairs ``(seq, score)``, highest score first, ties to the newer message.
        Messages scoring 0 are never returned.
    """
    if k <= 0 or n_docs <= 0:
        return []
    weights = _weights(term_weights)
    main: _Terms = ([], [])
    boost: _Terms = ([], [])
    for term in sorted(set(query)):
        seqs = postings.get(term)
        if seqs is None or len(seqs) == 0:
            continue
        kind = term_kind(term)
        weight = weights.get(kind, 1.0) * idf(n_docs, df.get(term, len(seqs)))
        if weight > 0.0:
            lifts = kind in BOOST_KINDS if main_kinds is None else kind not in main_kinds
            target = boost if lifts else main
            target[0].append(seqs)
            target[1].append(weight)
    if not main[0]:
        return []
    if sum(map(len, main[0])) + sum(map(len, boost[0])) <= SMALL_RANK_POSTINGS:
        return _rank_small(main, boost, exclude_from_seq, k)
    return _rank_arrays(main, boost, exclude_from_seq, k)


def _rank_small(
    main: _Terms, boost: _Terms, exclude_from_seq: int | None, k: int
) -> list[tuple[int, float]]:
    """:func:`rank`'s sums and choice in plain Python: per message, the term weights in the
    terms' order (the order numpy adds them in), repeats within a term counted once."""

    def sums(terms: _Terms) -> dict[int, float]:
        out: dict[int, float] = {}
        for seqs, weight in zip(*terms, strict=True):
            for seq in dict.fromkeys(map(int, seqs)):
                if exclude_from_seq is None or seq < exclude_from_seq:
                    out[seq] = out.get(seq, 0.0) + weight
        return out

    totals = sums(main)
    if boost[0]:
        for seq, lift in sums(boost).items():
            if seq in totals:
                totals[seq] += lift
    return heapq.nlargest(k, totals.items(), key=lambda i: (i[1], i[0]))


def _rank_arrays(
    main: _Terms, boost: _Terms, exclude_from_seq: int | None, k: int
) -> list[tuple[int, float]]:
    """:func:`rank`'s sums and choice with numpy (any number of postings)."""
    every, weight_of = _flatten(main[0], main[1], exclude_from_seq)
    if every.size == 0:
        return []
    # Sum per message with one bincount over all postings (vectorised: the cost is linear in
    # the postings read, which the store caps per term), then keep the k best.
    base, top = int(every.min()), int(every.max())
    totals = np.bincount(every - base, weights=weight_of)
    if boost[0]:
        extra, extra_weight = _flatten(boost[0], boost[1], exclude_from_seq)
        inside = (extra >= base) & (extra <= top)
        lift = np.bincount(
            extra[inside] - base, weights=extra_weight[inside], minlength=totals.size
        )
        totals = totals + np.where(totals > 0.0, lift, 0.0)
    candidates = np.flatnonzero(totals > 0.0)
    if candidates.size > k:
        # The k best in numpy: those above the k-th score, then the newest of those tied with
        # it (candidates are in ascending seq order). A Python loop over every line tied at the
        # k-th score would cost ~1 ms when many lines share only a common word.
        values = totals[candidates]
        kth = np.partition(values, candidates.size - k)[candidates.size - k]
        above = candidates[values > kth]
        tied = candidates[values == kth]
        candidates = np.concatenate([above, tied[tied.size - (k - above.size) :]])
    return heapq.nlargest(
        k, ((int(c) + base, float(totals[c])) for c in candidates), key=lambda i: (i[1], i[0])
    )


def score(
    query: Sequence[str],
    postings: Postings,
    df: Mapping[str, int],
    n_docs: int,
    *,
    exclude_from_seq: int | None = None,
    k: int = 4,
    term_weights: Mapping[str, float] | None = None,
) -> list[tuple[int, float]]:
    """The top ``k`` older messages for a query, in time order (:func:`rank`, re-sorted).

    Returns:
        Up to ``k`` pairs ``(seq, score)`` in ascending ``seq`` (time order): the best scores,
        ties going to the newer message. Messages scoring 0 are never returned.
    """
    return sorted(
        rank(
            query,
            postings,
            df,
            n_docs,
            exclude_from_seq=exclude_from_seq,
            k=k,
            term_weights=term_weights,
        )
    )


@dataclass(frozen=True)
class Collection:
    """The index entries of one conversation read for a query (see :func:`rank_collections`).

    Attributes:
        postings: term -> ascending seqs (the query's terms only, date terms included).
        df: term -> document frequency.
        n_docs: indexed messages of the conversation.
        exclude_from_seq: seqs from here on are never recalled (the recent window).
    """

    postings: Postings
    df: Mapping[str, int]
    n_docs: int
    exclude_from_seq: int | None = None


def rank_collections(
    query: Sequence[str],
    collections: Sequence[Collection],
    *,
    k: int,
    term_weights: Mapping[str, float] | None = None,
    main_kinds: frozenset[str] | None = None,
) -> list[tuple[tuple[int, int], float]]:
    """Rank the lines of several conversations (a user's chats) as one collection, best first.

    N is the sum of the conversations' N and a term's df the sum of its dfs, so a word common in
    one chat and rare in the others weighs what it weighs in the union; each conversation keeps
    its own window excluded. One conversation gives exactly :func:`rank`'s result.
    ``main_kinds``: as in :func:`rank`.

    Returns:
        Up to ``k`` pairs ``((collection index, seq), score)``, highest score first, ties to the
        later collection, then the newer line.
    """
    if len(collections) == 1:  # the usual request: no copies
        only = collections[0]
        found = rank(
            query,
            only.postings,
            only.df,
            only.n_docs,
            exclude_from_seq=only.exclude_from_seq,
            k=k,
            term_weights=term_weights,
            main_kinds=main_kinds,
        )
        return [((0, seq), value) for seq, value in found]
    merged: dict[str, list[npt.NDArray[np.int64]]] = {}
    df: dict[str, int] = {}
    offsets: list[int] = []
    offset = 0
    for collection in collections:
        offsets.append(offset)
        top = 0
        for term, seqs in collection.postings.items():
            if len(seqs) == 0:
                continue
            array = np.asarray(seqs, dtype=np.int64)
            top = max(top, int(array.max()))
            if collection.exclude_from_seq is not None:
                array = array[array < collection.exclude_from_seq]
            merged.setdefault(term, []).append(array + offset)
            df[term] = df.get(term, 0) + collection.df.get(term, len(seqs))
        offset += top + 1
    n_docs = sum(c.n_docs for c in collections)
    postings = {term: np.concatenate(parts) for term, parts in merged.items()}
    found = rank(query, postings, df, n_docs, k=k, term_weights=term_weights, main_kinds=main_kinds)
    bounds = np.asarray(offsets, dtype=np.int64)
    out: list[tuple[tuple[int, int], float]] = []
    for ident, value in found:
        index = int(np.searchsorted(bounds, ident, side="right")) - 1
        out.append(((index, ident - offsets[index]), value))
    return out


def term_weight(
    term: str, collections: Sequence[Collection], term_weights: Mapping[str, float] | None = None
) -> float:
    """What one matched term adds to a line's score in :func:`rank_collections` over these
    collections: ``weight(kind) * idf(N, df)``, N and df summed over the collections (a
    collection whose postings of the term are empty adds no df, as there)."""
    df = 0
    for collection in collections:
        seqs = collection.postings.get(term)
        if seqs is not None and len(seqs) > 0:
            df += collection.df.get(term, len(seqs))
    n_docs = sum(c.n_docs for c in collections)
    return _weights(term_weights).get(term_kind(term), 1.0) * idf(n_docs, df)


def rank_texts(
    texts: Sequence[str], query: str, *, options: TermOptions = DEFAULT_TERM_OPTIONS
) -> list[float]:
    """The score of each text against a query, the texts themselves being the collection.

    For short stored texts (memories): each is indexed with :func:`index_terms` (no context
    keys), the query gets :func:`query_terms`, and :func:`rank` scores them with the same
    weights as recall; the weight of a phonetic key that joined the query and a text only
    through words that do not sound alike (:func:`false_sound_alikes`) is taken off again.

    Returns:
        One score per text (0.0 for a text sharing no term with the query).
    """
    scores = [0.0] * len(texts)
    wanted = set(query_terms_cached(query, options)) if query else set()
    if not wanted or not texts:
        return scores
    postings: dict[str, list[int]] = {}
    for number, text in enumerate(texts):
        for term in wanted.intersection(text_terms_cached(text, options)):
            postings.setdefault(term, []).append(number)
    check = query_sound_alikes(query, options)
    collection = [Collection(postings, {}, len(texts))]
    for number, value in rank(list(wanted), postings, {}, len(texts), k=len(texts)):
        open_keys = [
            key
            for key, words in check.key_words.items()
            if number in postings.get(key, ())
            and not any(number in postings.get(w, ()) for w in words)
        ]
        for term in check.false_keys(texts[number], open_keys):
            value -= term_weight(term, collection)
        scores[number] = value if value > SCORE_EPSILON else 0.0
    return scores
