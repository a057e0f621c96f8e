"""Which recall-index terms a turn is stored under (pure; no I/O).

The store's append and delete scripts take each turn with its terms; these functions give them,
so that deleting or trimming a turn removes exactly the entries its append wrote.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from litellm_memory_hook.core import recall
from litellm_memory_hook.core.models import IndexedTurn, Turn


def _indexable(turn: Turn) -> bool:
    return turn.role in ("user", "assistant") and bool(turn.text) and not turn.partial


def indexed(turn: Turn, previous: str = "") -> IndexedTurn:
    """A new turn with its recall terms: user and assistant text is indexed, tool traffic is not.

    The context keys that come from ``previous`` are recorded on the returned turn (``ctx``), so
    :func:`stored_terms` can later give exactly the terms it was indexed under.

    Args:
        turn: the turn.
        previous: text of the turn before it (a reply is also keyed by the question it answers;
            :func:`litellm_memory_hook.core.recall.index_terms`).
    """
    if not _indexable(turn):
        return IndexedTurn(turn)
    terms = recall.index_terms(turn.text, turn.name, previous=previous)
    ctx = tuple(t for t in terms if t.startswith(recall.CONTEXT_PREFIX))
    return IndexedTurn(replace(turn, ctx=ctx), terms)


def stored_terms(turn: Turn) -> IndexedTurn:
    """A stored turn with exactly the terms it was indexed under (for deletion).

    Its own words and keys are recomputed from its text (:func:`recall.index_terms` is a pure
    function of it); the context keys come from ``turn.ctx``. ``index_terms`` keeps plain and
    phonetic terms before context keys under its cap, so the union is the original list.
    """
    if not _indexable(turn):
        return IndexedTurn(turn)
    own = recall.index_terms(turn.text, turn.name)
    return IndexedTurn(turn, sorted({*own, *turn.ctx}))


def indexed_chain(turns: Sequence[Turn], previous: str = "") -> list[IndexedTurn]:
    """:func:`indexed` over consecutive turns, each keyed by the text of the one before it."""
    out: list[IndexedTurn] = []
    for turn in turns:
        out.append(indexed(turn, previous))
        previous = turn.text
    return out


#: seconds of indexing in one slice of :func:`indexed_slices` (a few milliseconds: the event
#: loop's other work waits no longer than that)
INDEX_SLICE_S = 0.004


def indexed_slices(
    turns: Sequence[Turn],
    previous: str = "",
    slice_s: float = INDEX_SLICE_S,
    clock: Callable[[], float] = time.perf_counter,
) -> Iterator[list[IndexedTurn]]:
    """:func:`indexed_chain` in slices of about ``slice_s`` seconds of work each (at least one
    turn), so that a caller on an event loop can let other work run between slices: a
    whole-history client's first request stores its whole history at once, and text costs
    from ~0.3 us a character (English) to ~3 us (Chinese, segmented by ICU).

    Args:
        turns / previous: as :func:`indexed_chain`.
        slice_s: seconds after which a slice ends (checked after each turn).
        clock: seconds, monotonic (``time.perf_counter``).
    """
    out: list[IndexedTurn] = []
    started = clock()
    for turn in turns:
        out.append(indexed(turn, previous))
        previous = turn.text
        if clock() - started >= slice_s:
            yield out
            out, started = [], clock()
    if out:
        yield out
