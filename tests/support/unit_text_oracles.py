"""The quadratic implementations that the linear text paths replaced, kept as oracles: the tests
in tests/unit/test_linear_text.py check that the new code gives exactly what these gave."""

from __future__ import annotations

from collections.abc import Sequence

import regex

from litellm_memory_hook.core.alignment import Alignment, tool_call_ids
from litellm_memory_hook.core.message_text import content_text, keep_tail
from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.core.script.latin import LATIN_WORD

_SENTENCE_END = regex.compile(r"[.!?:;\n\u2026\p{Ps}\p{Pi}\u3002\uff01\uff1f]\s*$")
_SENTENCE_START = frozenset(".!?:;\n\u2026\"'(\u201c\u2018[")
_ASCII_CAPITALISED = regex.compile(r"\b[A-Z][A-Za-z]*")
_CAPITALISED = regex.compile(r"\b\p{Lu}[\p{L}\p{M}]*")


def names_inside_sentences(text: str) -> set[int]:
    """The old ``script._names_inside_sentences``: a regex search of the whole prefix per word."""
    out = set()
    for position, match in enumerate(LATIN_WORD.finditer(text)):
        word = match.group()
        if (
            position
            and len(word.partition("'")[0]) > 1
            and word[0].isupper()
            and word[1:].islower()
            and not _SENTENCE_END.search(text, 0, match.start())
        ):
            out.add(position)
    return out


def inner_names(text: str) -> frozenset[str]:
    """The old ``recall.inner_names``: the whole prefix copied and stripped per word."""
    out: set[str] = set()
    pattern = _ASCII_CAPITALISED if text.isascii() else _CAPITALISED
    for match in pattern.finditer(text):
        before = text[: match.start()].rstrip(" \t")
        if before and before[-1] not in _SENTENCE_START:
            out.add(match.group().casefold())
    return frozenset(out)


def _same(message: dict[str, object], turn: Turn, max_chars: int) -> bool:
    if message.get("role") != turn.role:
        return False
    text = content_text(message.get("content"))
    if len(text) > max_chars:
        text = keep_tail(text, max_chars)
    if text.strip() != turn.text.strip():
        return False
    if turn.role == "assistant" and tool_call_ids(message) != tool_call_ids(turn):
        return False
    return turn.role != "tool" or str(message.get("tool_call_id") or "") == turn.tool_call_id


def align(
    client: Sequence[dict[str, object]], stored: Sequence[Turn], max_chars: int
) -> Alignment | None:
    """The old ``plan.align``: every offset compared message by message."""
    best: tuple[int, int, int, int, int] | None = None
    n, m = len(client), len(stored)
    for offset in range(-n + 1, m):
        ci, si = max(0, -offset), max(0, offset)
        length = min(n - ci, m - si)
        same = [_same(client[ci + k], stored[si + k], max_chars) for k in range(length)]
        matches = sum(same)
        if not matches:
            continue
        first_diff = same.index(False) if False in same else length
        after = same[first_diff + 1 :]
        run_after = after.index(False) if False in after else len(after)
        key = (first_diff, run_after, matches, si + length, offset)
        if best is None or key[:4] > best[:4]:
            best = key
    if best is None:
        return None
    first_diff, _, _, _, offset = best
    ci, si = max(0, -offset), max(0, offset)
    seqs = [0] * n
    for k in range(first_diff):
        seqs[ci + k] = stored[si + k].seq
    return Alignment(ci + first_diff, si + first_diff, first_diff, tuple(seqs))
