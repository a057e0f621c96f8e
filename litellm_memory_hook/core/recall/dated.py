"""Date-led recall: a question about a day recalls that day's lines (pure).

When a question's date is at least as rare as each of its words (:func:`dates_lead`), the lines
said in the named spans are the candidates and the words only lift them; the day's lines with
more content words come first (:func:`date_led_order`), at most ``DATE_LED_K_MAX`` of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np
import numpy.typing as npt

from litellm_memory_hook.core.recall.ranking import Collection, Key, Postings
from litellm_memory_hook.core.recall.tokens import tokenize

DATE_LED_K_MAX = 8
"""Most lines a date-led recall keeps (both recall modes; the character budget still applies):
a question about a day gets that day's gist, not every line of a busy day or of a month."""

MIN_CONTENT_WORDS = 3
"""Fewest :func:`content_words` of a line that carries content in a date-led recall: "Hey
Mira!" (1), "Thanks, Caroline!" and "Hey Mel! How is it going?" (2) do not; "Congrats on the
new job!" (3) does. Lines below it that no word of the question matched are left out while
other lines can be recalled (:func:`date_led_order`)."""


def content_words(text: str) -> int:
    """How many distinct words of a line recall matches on (:func:`tokenize`, default stopwords):
    what a date-led recall prefers among the lines of a day ("Hey Mel! How's it going?" 2,
    "I adopted a greyhound named Pixel" 4). Memoised with :func:`tokenize` for short texts."""
    return len(set(tokenize(text)))


def dates_lead(
    words: Sequence[str], dates: Sequence[str], collections: Sequence[Collection]
) -> bool:
    """Whether a question's dates lead its recall (date-led recall; module docstring): a date
    names no more lines than any of its words does.

    Precisely: some date term matches an older line (one before its collection's
    ``exclude_from_seq``), and its document frequency (the lines said in its span, summed over
    the collections as :func:`rank_collections` sums it) is at most that of each of ``words``
    that matches an older line: the date is at least as rare as every word the question shares
    with older lines (a higher or equal IDF). Words that match only lines of the recent window
    do not count (the question itself once stored, the reply a regenerate replaces), so a
    question is weighed alike the first time and when it is sent again.

    Args:
        words: the question's plain words besides its dates' own (:func:`tokenize` of
            :func:`litellm_memory_hook.core.dates.without_dates`).
        dates: its date terms (``DATE_PREFIX``).
        collections: what the store read for the question.

    Returns:
        True when some date term leads; False without dates or when no date matches an older
        line.
    """

    def older_df(term: str) -> int | None:
        df, matched = 0, False
        for collection in collections:
            seqs = collection.postings.get(term)
            if seqs is None or len(seqs) == 0:
                continue
            df += collection.df.get(term, len(seqs))
            limit = collection.exclude_from_seq
            matched = matched or limit is None or int(np.min(seqs)) < limit
        return df if matched else None

    date = min((df for df in map(older_df, dates) if df is not None), default=None)
    if date is None:
        return False
    return all(df is None or date <= df for df in map(older_df, words))


def matched_seqs(terms: Sequence[str], postings: Postings, seqs: Iterable[int]) -> frozenset[int]:
    """The seqs among ``seqs`` that the postings of some of ``terms`` hold (postings ascending,
    as the store keeps them): in a date-led recall, the lines the question's words matched.

    Returns:
        Those seqs (a binary search per term: O(terms x len(seqs) x log postings)).
    """
    return frozenset().union(*holders(terms, postings, seqs).values())


def holders(
    terms: Sequence[str], postings: Postings, seqs: Iterable[int]
) -> dict[str, frozenset[int]]:
    """For each of ``terms``, the seqs among ``seqs`` that its postings hold (ascending, as the
    store keeps them): a binary search per term, O(terms x len(seqs) x log postings).

    Returns:
        term -> those seqs (every term of ``terms``, possibly with none).
    """
    wanted = np.array(sorted(set(seqs)), dtype=np.int64)
    out: dict[str, frozenset[int]] = {}
    for term in terms:
        found = postings.get(term)
        if found is None or len(found) == 0 or wanted.size == 0:
            out[term] = frozenset()
            continue
        array = np.asarray(found, dtype=np.int64)
        at = np.minimum(np.searchsorted(array, wanted), array.size - 1)
        out[term] = frozenset(wanted[array[at] == wanted].tolist())
    return out


def date_led_order(
    ranked: Sequence[tuple[Key, float]],
    content: Callable[[Key], int],
    matched: Callable[[Key], bool],
) -> list[tuple[Key, float]]:
    """The lines of a date-led recall in the order they are chosen (module docstring).

    Best score first; among equal scores (the lines of a day that no word matched), the lines
    with more content words first. Lines that no word matched and that carry fewer than
    ``MIN_CONTENT_WORDS`` content words (greetings, one-word replies) are left out, unless no
    other line is left.

    Args:
        ranked: ``(key, score)`` pairs, best first (:func:`rank_collections` with the dates as
            ``main_kinds``).
        content: a line's :func:`content_words`.
        matched: whether some word of the question matched the line (:func:`matched_seqs`).

    Returns:
        The pairs to choose from, in that order (scores still non-increasing).
    """
    ordered = sorted(ranked, key=lambda item: (-item[1], -content(item[0])))
    kept = [i for i in ordered if matched(i[0]) or content(i[0]) >= MIN_CONTENT_WORDS]
    return kept or ordered


def date_postings(runs: Sequence[tuple[int, int]]) -> npt.NDArray[np.int64]:
    """The postings of a date term: the seqs of the lines in its span, as the store found them
    by time (runs of consecutive seqs, ``(first, end)`` with ``end`` excluded, ascending and
    disjoint: :class:`~litellm_memory_hook.store.redis_store.DateSeqs`; the store already keeps
    at most its postings cap of them).

    Returns:
        The seqs of every run, ascending; empty if none.
    """
    parts = [np.arange(first, end, dtype=np.int64) for first, end in runs if end > first]
    if not parts:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate(parts)
