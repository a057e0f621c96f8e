"""Our own blocks in a client's system text: their tag names, and removing them.

The system message this package builds holds a data block and a reminder (tags
:data:`DATA_TAG` and :data:`REMINDER_TAG`, :mod:`litellm_memory_hook.core.prompt`). A client
that echoes an earlier system message back, or an earlier memory layer, puts such blocks in the
client's system text; :func:`strip_injected` removes them before the text becomes an operator
rule, in time linear in the text's length.
"""

from __future__ import annotations

from typing import Any, Final

import regex

DATA_TAG: Final = "memory_context"
"""Tag name of the data block that holds all sections."""

REMINDER_TAG: Final = "memory_reminder"
"""Tag name of the final reminder."""

_STRIPPED_TAGS: Final[tuple[str, ...]] = (DATA_TAG, REMINDER_TAG)
# A system message that is nothing but a <memory> / <memories> block was injected by an earlier
# memory layer; the same tags inside a client's own prompt are the client's.
_WHOLE_LEGACY_BLOCK: Final = regex.compile(
    r"\A\s*<\s*(memory|memories)(?:\s[^<>]*)?>.*<\s*/\s*\1\s*>\s*\Z",
    regex.IGNORECASE | regex.DOTALL,
)


def _open_tag(name: str) -> str:
    return rf"<\s*{name}(?:\s[^<>]*)?>"


def _close_tag(name: str) -> str:
    return rf"<\s*/\s*{name}\s*>"


_BLOCKS: Final = tuple(
    (
        regex.compile(rf"{_open_tag(name)}.*?{_close_tag(name)}", regex.IGNORECASE | regex.DOTALL),
        regex.compile(_close_tag(name), regex.IGNORECASE),
    )
    for name in _STRIPPED_TAGS
)
_ORPHAN_TAGS: Final = regex.compile(
    "|".join(f"{_open_tag(name)}|{_close_tag(name)}" for name in _STRIPPED_TAGS),
    regex.IGNORECASE,
)


def _gap(space: str) -> str:
    if "\n" in space or "\r" in space:
        return "\n\n"
    return " " if space else ""


def _cut_out(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` without the given spans, ends stripped; the white space around removed spans
    becomes one gap (a blank line if it held a line break, else a space). Linear in
    ``len(text)``: the patterns match tags only, never runs of white space, so no input makes
    them backtrack over it."""
    if not spans:
        return text
    starts = [0, *(right for _, right in spans)]
    ends = [*(left for left, _ in spans), len(text)]
    result: list[str] = []
    space = ""
    for start, end in zip(starts, ends, strict=True):
        piece = text[start:end]
        core = piece.strip()
        if not core:
            space += piece
            continue
        if result:
            result.append(_gap(space + piece[: len(piece) - len(piece.lstrip())]))
        result.append(core)
        space = piece[len(piece.rstrip()) :]
    return "".join(result)


def _remove_blocks(text: str, block: Any, close: Any) -> str:
    # Only the text up to the last closing tag can hold a block; limiting the search to it
    # keeps unclosed opening tags from making the search quadratic.
    end = 0
    for match in close.finditer(text):
        end = int(match.end())
    if not end:
        return text
    spans = [(m.start(), m.end()) for m in block.finditer(text, 0, end)]
    return _cut_out(text, spans)


def strip_injected(text: str) -> str:
    """Remove from a client's system text every block an earlier request of ours injected.

    Removed (tag names case-insensitive, spaces inside tags and attributes on opening tags
    allowed, content spanning lines): our data block ``<memory_context>...</memory_context>`` and
    our ``<memory_reminder>...</memory_reminder>``, wherever they stand (a client echoing our
    system message back), then any leftover lone tag of those two names; and a
    system text that is nothing but one ``<memory>`` or ``<memories>`` block (injected by an
    earlier memory layer). Other tags in the client's own prompt, ``<persona>`` or ``<summary>``
    included, are the client's and stay. The whitespace around a removed block becomes a blank
    line if it held a line break, else one space.

    Args:
        text: One client system message's text (or several joined).

    Returns:
        The rest, stripped of whitespace at both ends; ``""`` if nothing remains. Text without
        any of these tags comes back unchanged except for that strip.

    Raises:
        Nothing; every ``str`` is accepted.
    """
    rest = text
    for block, close in _BLOCKS:
        rest = _remove_blocks(rest, block, close)
    rest = _cut_out(rest, [(m.start(), m.end()) for m in _ORPHAN_TAGS.finditer(rest)])
    rest = rest.strip()
    if _WHOLE_LEGACY_BLOCK.match(rest):
        return ""
    return rest
