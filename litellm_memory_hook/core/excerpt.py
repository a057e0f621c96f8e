"""The part of an over-long text that the hook analyses (pure; no I/O).

Every analysis of a message's words (its script, recall's query and index terms, the dates it
names, sound-alike keys) reads at most :data:`ANALYSED_CHARS` characters of it: the whole text
when it is that short, else its start and its end, half each, joined by a line break. A pasted
log or file of any length then costs the hook about what a long message costs, and one user's
paste cannot hold the proxy's event loop for the others; the model still receives the text
whole (the window and the stored turn keep their own bounds).

The start and the end are where a person puts what they mean around a paste ("what does this
error mean?" before it, "why does this fail?" after it). Each half is cut at white space when
one is near its edge, so no word is split in two and no word is made up of two halves.
"""

from __future__ import annotations

from typing import Final

__all__ = ["ANALYSED_CHARS", "excerpt"]

ANALYSED_CHARS: Final = 4_000
"""Characters (code points) of a text that the analyses read: its first and last 2,000."""

_NEAR_EDGE: Final = 64
"""How far back (or forward) from a half's edge a cut looks for white space, characters."""


def excerpt(text: str, limit: int = ANALYSED_CHARS) -> str:
    """``text`` when it has at most ``limit`` characters; else its first and last ``limit // 2``
    characters (fewer when cut at white space near the edge), joined by ``"\\n"``.

    Idempotent: ``excerpt(excerpt(t)) == excerpt(t)``, since the result is never longer than
    ``limit``. Costs O(``limit``) whatever ``len(text)``.

    Args:
        text: any text.
        limit: the most characters returned (at least 2).
    """
    if len(text) <= limit:
        return text
    half = max(1, (limit - 1) // 2)
    head = text[:half]
    tail = text[len(text) - half :]
    if not text[half].isspace():
        cut = _last_space(head, len(head) - _NEAR_EDGE)
        if cut > 0:
            head = head[:cut]
    if not text[len(text) - half - 1].isspace():
        cut = _first_space(tail, _NEAR_EDGE)
        if cut >= 0:
            tail = tail[cut + 1 :]
    return head.rstrip() + "\n" + tail.lstrip()


def _last_space(text: str, start: int) -> int:
    """Index of the last white space in ``text[start:]``, or -1."""
    for index in range(len(text) - 1, max(start, 0) - 1, -1):
        if text[index].isspace():
            return index
    return -1


def _first_space(text: str, end: int) -> int:
    """Index of the first white space in ``text[:end]``, or -1."""
    for index in range(min(end, len(text))):
        if text[index].isspace():
            return index
    return -1
