"""How the conversation store's data crosses to and from Redis: the recall index's packed
postings, the replies of the read scripts, and the ARGV sections of the write scripts.

A postings value (a field of a conversation's ``postings`` hash) is packed big-endian uint32s: the
term's document frequency, then the seqs of the newest messages holding it, ascending
(``store/lua/includes/postings.lua`` writes it, :func:`unpack_postings` reads it). The write
scripts read the turns to remove and the terms to index as the flat sections
:func:`removal_args` and :func:`term_args` build (``store/lua/includes/turn_index.lua``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from litellm_memory_hook.core.models import IndexedTurn

#: the largest seq a conversation may hold: the recall index packs seqs as uint32.
MAX_SEQ = 2**32 - 1


@dataclass(frozen=True)
class DateSeqs:
    """The stored turns said within one date span (``store/lua/seq_spans.lua``).

    Attributes:
        df: how many turns the span holds (the date term's document frequency).
        runs: ``(first seq, end seq)`` pairs, end excluded, ascending and disjoint: the seqs of
            the span's latest (by time) ``postings_cap`` turns, as runs of consecutive seqs.
            While the turns' times are in seq order (no ``meta.ts_unordered``), or in a
            conversation without a usable time index, one run from the first turn said at or
            after the span's start to the first said at or after its end (the newest
            ``postings_cap`` seqs of it), found by a binary search over the turns' times.
    """

    df: int = 0
    runs: tuple[tuple[int, int], ...] = ()


@dataclass
class Postings:
    """The index entries read for one query: term -> (df, newest seqs) and N.

    Attributes:
        spans: for each date span asked, the turns said in it.
        chats: the user's index members (``c:<conversation>``, ``ns:<namespace>``), when asked
            (``recall.scope: user``).
    """

    n_docs: int = 0
    df: dict[str, int] = field(default_factory=dict)
    seqs: dict[str, npt.NDArray[np.uint32]] = field(default_factory=dict)
    spans: list[DateSeqs] = field(default_factory=list)
    chats: list[str] = field(default_factory=list)


def unpack_postings(value: bytes) -> tuple[int, npt.NDArray[np.uint32]]:
    """Decode a postings value: (document frequency, seqs ascending as a uint32 array)."""
    count = len(value) // 4
    if count == 0:
        return 0, np.zeros(0, dtype=np.uint32)
    numbers = np.frombuffer(value, dtype=">u4", count=count)
    return int(numbers[0]), numbers[1:]


def add_postings(postings: Postings, terms: Sequence[str], values: Sequence[Any]) -> None:
    """Add the postings values read for ``terms`` (``HMGET`` order; none for a missing term)."""
    for term, value in zip(terms, values, strict=True):
        if value:
            df, seqs = unpack_postings(value)
            postings.df[term] = df
            postings.seqs[term] = seqs


def flat_spans(spans: Sequence[tuple[int, int]]) -> list[int]:
    """Date spans as ``seq_spans.lua`` reads them: start, end, start, end, ..."""
    return [int(x) for span in spans for x in span]


def date_seqs(reply: Sequence[Any]) -> list[DateSeqs]:
    """Decode a ``seq_spans.lua`` reply: per span, the count, the number of runs, the runs."""
    numbers = [int(x) for x in reply]
    out: list[DateSeqs] = []
    i = 0
    while i < len(numbers):
        df, n_runs = numbers[i], numbers[i + 1]
        flat = numbers[i + 2 : i + 2 + 2 * n_runs]
        out.append(DateSeqs(df, tuple(zip(flat[::2], flat[1::2], strict=True))))
        i += 2 + 2 * n_runs
    return out


def as_int(value: str | None) -> int:
    """A number field as read (0 when missing or not a number)."""
    try:
        return int(value or 0)
    except ValueError:
        return 0


def as_text(value: bytes | str | None) -> str:
    """A reply value as text (``""`` for none; undecodable bytes replaced)."""
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def pairs(flat: Sequence[bytes]) -> dict[bytes, bytes]:
    """A hash as Lua's ``HGETALL`` returns it (field, value, field, value, ...) as a dict."""
    return dict(zip(flat[::2], flat[1::2], strict=True))


def in_field_order(items: dict[bytes, bytes]) -> list[str]:
    """Hash values ordered by field name: writers name fields so that this order is creation
    order (zero-padded epoch ms or ULIDs); Redis itself returns a large hash in no order."""
    return [as_text(items[name]) for name in sorted(items)]


def term_args(items: Sequence[IndexedTurn]) -> list[Any]:
    """The index section of a write: the number of distinct terms, then for each the term, a
    count and the 1-based positions of the turns holding it (one field update per term)."""
    groups: dict[str, list[int]] = {}
    for position, item in enumerate(items, 1):
        for term in dict.fromkeys(item.terms):
            groups.setdefault(term, []).append(position)
    args: list[Any] = [len(groups)]
    for term, positions in groups.items():
        args.extend((term, len(positions), *positions))
    return args


def removal_args(turns: Sequence[IndexedTurn]) -> list[Any]:
    """Turns to remove as the scripts' ``remove_turns`` reads them: each seq with 1 when indexed,
    then each distinct term with the seqs holding it."""
    args: list[Any] = [len(turns)]
    groups: dict[str, list[int]] = {}
    for item in turns:
        args.extend((item.turn.seq, 1 if item.terms else 0))
        for term in dict.fromkeys(item.terms):
            groups.setdefault(term, []).append(item.turn.seq)
    args.append(len(groups))
    for term, seqs in groups.items():
        args.extend((term, len(seqs), *seqs))
    return args
