"""Choosing which stored memories go into a prompt when they exceed their budget (pure).

More memories are kept in Redis than fit in the ``<memories>`` section (a cap of a few hundred).
When they do not all fit, the ones that share rare words with the new message come first, scored
by the recall scorer itself (:func:`litellm_memory_hook.core.recall.rank_texts`, which runs
:func:`~litellm_memory_hook.core.recall.rank`, docs/design.md#recall) with the memory set as the
collection: ``score(m) = sum over terms t shared by m and the query of
weight(kind(t)) * log(1 + N / (1 + df(t)))``, N = the number of memories, df(t) = the memories
holding t; the same terms (words, segmentation of scripts without spaces, phonetic keys) and the
same weights as recall of old lines. The remaining budget goes to the newest memories. The chosen
ones keep their stored order (oldest first), so the section reads the same from request to
request.

Measured on LoCoMo dev with an oracle extractor (issue 7): a newest-first list lifts evidence
cover from 0.635 to 0.649; choosing by shared rare words lifts it to 0.766.
"""

from __future__ import annotations

from collections.abc import Sequence

from litellm_memory_hook.core import recall


def select_items(
    items: Sequence[str],
    query: str,
    budget: int,
    *,
    max_items: int = 100,
) -> tuple[str, ...]:
    """The items (oldest first, as stored) to show within ``budget`` characters.

    Args:
        items: stored memory texts, oldest first.
        query: the text the memories should serve (the new user message; for the extraction
            job, the new lines).
        budget: characters for all chosen items together.
        max_items: most items shown.

    Returns:
        The chosen texts, stripped, in their stored order. When everything fits, all of them.
        Items with a positive score come first (highest score, then newest), then the newest
        of the rest; an item that does not fit is skipped and smaller ones may still fit.
    """
    texts = [t.strip() for t in items]
    indexed = [(i, t) for i, t in enumerate(texts) if t]
    if not indexed:
        return ()
    if sum(len(t) for _, t in indexed) <= budget and len(indexed) <= max_items:
        return tuple(t for _, t in indexed)
    scores = _scores([t for _, t in indexed], query)
    order = sorted(
        range(len(indexed)), key=lambda j: (scores[j] > 0, scores[j], indexed[j][0]), reverse=True
    )
    chosen: list[int] = []
    used = 0
    for j in order:
        if len(chosen) >= max_items:
            break
        size = len(indexed[j][1])
        if used + size <= budget:
            chosen.append(j)
            used += size
    return tuple(indexed[j][1] for j in sorted(chosen))


def _scores(texts: Sequence[str], query: str) -> list[float]:
    """Score of each text against the query: the recall scorer, the texts being the collection."""
    return recall.rank_texts(texts, query)


def related_items(
    items: Sequence[str],
    query: str,
    budget: int,
    shown: Sequence[str] = (),
) -> tuple[str, ...]:
    """The items that share rare words with ``query`` (the scores of :func:`select_items`) and
    are not among ``shown``, highest score first (then newest), within ``budget`` characters:
    what the cache layout's tail adds for the user's last message to the memories its head
    shows for the whole epoch.

    Args:
        items: stored memory texts, oldest first.
        query: the new user message.
        budget: characters for all chosen items together.
        shown: texts the prompt shows already (compared stripped).
    """
    seen = {t.strip() for t in shown}
    texts = [t.strip() for t in items]
    candidates = [(i, t) for i, t in enumerate(texts) if t and t not in seen]
    if not candidates or budget <= 0 or not query.strip():
        return ()
    scores = _scores([t for _, t in candidates], query)
    order = sorted(
        (j for j in range(len(candidates)) if scores[j] > 0),
        key=lambda j: (scores[j], candidates[j][0]),
        reverse=True,
    )
    chosen: list[str] = []
    used = 0
    for j in order:
        size = len(candidates[j][1])
        if used + size <= budget:
            chosen.append(candidates[j][1])
            used += size
    return tuple(chosen)
