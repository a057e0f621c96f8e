"""What recall keeps of a ranking: one copy of each text, the best that fit a budget (pure).

:func:`distinct_texts` drops repeats of a text already ranked (:func:`same_text`);
:func:`fill_budget` keeps the best lines that fit in a budget of characters, at most ``k_max``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from litellm_memory_hook.core.recall.ranking import Key


def same_text(text: str) -> str:
    """What two lines that say the same thing have in common: the text case folded, its runs
    of whitespace one space, stripped ("Got it,  thanks!" and "got it, thanks!")."""
    return " ".join(text.casefold().split())


def distinct_texts(
    ranked: Sequence[tuple[Key, float]], text: Callable[[Key], str]
) -> list[tuple[Key, float]]:
    """The ranked lines without the repeats of a text already ranked (:func:`same_text`), best
    first: a line said many times ("Got it, thanks for telling me.") fills one slot of recall,
    not all of them. The copy kept is the first in ``ranked``: the best score, and among equal
    scores the one ranked first (:func:`rank` puts the newer line first).

    Args:
        ranked: ``(key, score)`` pairs, best first.
        text: a line's text.

    Returns:
        The pairs whose text comes first, in their order.
    """
    seen: set[str] = set()
    out: list[tuple[Key, float]] = []
    for key, value in ranked:
        said = same_text(text(key))
        if said not in seen:
            seen.add(said)
            out.append((key, value))
    return out


def fill_budget(
    ranked: Sequence[tuple[Key, float]],
    size: Callable[[Key], int],
    *,
    chars: int,
    k_max: int,
    min_share: float = 0.0,
) -> list[Key]:
    """Budgeted recall: the best lines that fit in ``chars`` characters, at most ``k_max``.

    Walks ``ranked`` best first; a line scoring below ``min_share`` times the best score ends
    the walk (a query with one strong match does not drag in weak ones); a line that does not
    fit in what is left is skipped and a shorter one after it may still fit.

    Args:
        ranked: ``(key, score)`` pairs, best first (:func:`rank`, :func:`rank_collections`).
        size: the characters a line takes in the prompt.
        chars: the budget; ``<= 0`` gives ``[]``.
        k_max: most lines.
        min_share: in ``[0, 1]``.

    Returns:
        The chosen keys, best first.
    """
    if chars <= 0 or k_max <= 0 or not ranked:
        return []
    floor = min_share * ranked[0][1]
    chosen: list[Key] = []
    used = 0
    for key, value in ranked:
        if len(chosen) >= k_max or value < floor:
            break
        cost = size(key)
        if used + cost <= chars:
            chosen.append(key)
            used += cost
    return chosen
