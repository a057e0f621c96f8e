"""Finding the JSON value in an extraction model's reply, in time linear in the reply's length.

:func:`find_json` is the first step of :func:`~litellm_memory_hook.extraction.parse.
parse_extraction`: the JSON inside a code fence of any kind or with prose around it, repaired
where that is safe. Every step is bounded:

* a reply is read up to :data:`MAX_REPLY_CHARS` characters (an endless reply is cut there);
* every regular expression matches in one left-to-right pass (an unterminated string literal is
  one token to the end of the text, never a match tried again from each quote inside it);
* a decode at one ``{`` / ``[`` reads a window of the text that grows only while the value runs
  past it (:data:`FIRST_WINDOW_CHARS`, then 4 times as much), so a brace in prose costs its
  few characters, not the rest of the reply;
* all the decodes and repairs of one reply together read at most :data:`WORK_FACTOR` times its
  length plus :data:`WORK_SLACK_CHARS` characters; then the search stops.

So a 48 KB reply cut off by its token limit is given up in a few milliseconds (it took 114 s when
each of its quotes started a match that ran to the end).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Final

from litellm_memory_hook.errors import ExtractionError

__all__ = [
    "FIRST_WINDOW_CHARS",
    "MAX_REPLY_CHARS",
    "WORK_FACTOR",
    "WORK_SLACK_CHARS",
    "find_json",
]

MAX_REPLY_CHARS: Final = 64_000
"""Characters of a reply that are read (about 16,000 tokens); the rest of a longer reply is cut
off before anything looks at it. A reply holds the shown memories
(``extraction.max_memories_chars``, 6,000 by default), the new ones and the summary
(``summary.max_chars``, 2,000): well under this."""

WORK_FACTOR: Final = 16
"""All decodes and repairs of one reply read at most this many times its length (characters),
plus :data:`WORK_SLACK_CHARS`."""

WORK_SLACK_CHARS: Final = 65_536
"""Characters every reply may read on top of :data:`WORK_FACTOR` times its length."""

FIRST_WINDOW_CHARS: Final = 256
"""Characters a decode at one ``{`` / ``[`` reads first; a value running past its window is
decoded again from a window 4 times as large (up to the end of the text)."""

_MAX_STARTS: Final = 2000  # `{` / `[` positions tried at most per candidate text
_MAX_REPAIRS: Final = 16  # of which at most this many are also tried repaired
# A decode error this close to a window's end (characters) may come from the cut, not the text.
_CUT_MARGIN: Final = 8

_DECODER: Final = json.JSONDecoder(strict=False)  # raw control characters inside strings pass

# A fenced block: ``` or ~~~ (3 or more), an optional language tag (json, JSON, json5, ...), the
# body, then the same fence again or the end of the text. Only the fence lines are dropped.
_FENCE: Final = re.compile(
    r"(?P<fence>`{3,}|~{3,})[ \t]*[A-Za-z0-9_.+-]*(?P<body>.*?)(?:(?P=fence)|\Z)", re.DOTALL
)
_VALUE_START: Final = re.compile(r"[{\[]")

# Surrogate code points in the text itself, and \uXXXX escapes of a lone surrogate (a high one
# not followed by a low one, or a low one alone). An escaped backslash is consumed first, so
# "\\ud800" (a backslash, then the letters) is left alone.
_RAW_SURROGATES: Final = re.compile("[\ud800-\udfff]+")
_SURROGATE_ESCAPE: Final = re.compile(
    r"\\(?:(?P<backslash>\\)"
    r"|u(?P<high>[dD][89abAB][0-9a-fA-F]{2})(?P<low>\\u[dD][c-fC-F][0-9a-fA-F]{2})?"
    r"|u[dD][c-fC-F][0-9a-fA-F]{2})"
)

# A string literal: its closing quote, or the end of the text when it has none (so a match that
# starts at a quote always succeeds, and no quote inside an unterminated literal starts another
# attempt: one pass).
_STRING: Final = r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)'
# Repairs, applied to the text from one `{` / `[` on: inside each string literal, a backslash
# that starts no valid escape is doubled (\q -> \\q, \u12 -> \\u12); outside strings, a comma
# right before } or ] is removed.
_REPAIR_TOKEN: Final = re.compile(_STRING + r"|,(?=\s*[}\]])", re.DOTALL)
_ESCAPE: Final = re.compile(r'\\(?:(?P<valid>["\\/bfnrt]|u[0-9a-fA-F]{4})|(?P<other>.))', re.DOTALL)
# Brackets outside string literals, for finding where a repaired value ends.
_BRACKET_TOKEN: Final = re.compile(_STRING + r"|[{}\[\]]", re.DOTALL)


def _drop_lone_surrogate_escape(match: re.Match[str]) -> str:
    if match.group("backslash") or (match.group("high") and match.group("low")):
        return match.group(0)
    return ""


def _fix_escape(match: re.Match[str]) -> str:
    if match.group("valid") is not None:
        return match.group(0)
    return "\\\\" + match.group("other")


def _repair_token(match: re.Match[str]) -> str:
    token = match.group(0)
    if token == ",":
        return ""
    return _ESCAPE.sub(_fix_escape, token)


@dataclass
class _Work:
    """Characters the decodes and repairs of one reply may still read."""

    left: int

    def spend(self, chars: int) -> None:
        self.left -= chars

    @property
    def spent(self) -> bool:
        return self.left <= 0


def _cut_by_window(exc: json.JSONDecodeError, length: int) -> bool:
    """Whether a decode error in a window of ``length`` characters may come from its end."""
    return exc.msg.startswith("Unterminated string") or exc.pos >= length - _CUT_MARGIN


def _decode_from(
    text: str, start: int, work: _Work, *, repair: bool = False
) -> tuple[bool, object, int, str]:
    """Decode one JSON value at ``start`` (``repair``: after the repairs of :func:`find_json`):
    (found, value, end index in the text decoded, error message).

    The value is decoded from a window of the text that grows (4 times) only while the error
    may come from the window's end. ``work`` is charged what was read: the characters decoded
    (to the value's end or the error), an eighth of each window copied, and twice each window
    repaired.
    """
    window = FIRST_WINDOW_CHARS
    while True:
        stop = min(len(text), start + window)
        piece = text[start:stop]
        work.spend(len(piece) // 8)
        if repair:
            work.spend(2 * len(piece))
            piece = _REPAIR_TOKEN.sub(_repair_token, piece)
        try:
            value, end = _DECODER.raw_decode(piece)
        except json.JSONDecodeError as exc:
            work.spend(exc.pos + 1)
            if stop == len(text) or work.spent or not _cut_by_window(exc, len(piece)):
                return False, None, start, str(exc)
            window *= 4
            continue
        except (ValueError, RecursionError) as exc:
            work.spend(len(piece))
            return False, None, start, str(exc) or type(exc).__name__
        work.spend(end)
        return True, value, start + end, ""


def _closing(text: str, start: int) -> int:
    """The index after the bracket that closes the one at ``start`` (string literals and their
    escapes skipped); the end of the text when it is not closed. One pass over the tokens."""
    depth = 0
    for match in _BRACKET_TOKEN.finditer(text, start):
        token = match.group(0)
        if token in "{[":
            depth += 1
        elif token in "}]":
            depth -= 1
            if depth == 0:
                return match.end()
    return len(text)


def _repaired(text: str, start: int, work: _Work) -> tuple[bool, object, int]:
    """The value at ``start`` decoded after the repairs (found, value, end in ``text``)."""
    found, value, _, _ = _decode_from(text, start, work, repair=True)
    if not found:
        return False, None, start
    end = _closing(text, start)  # the repaired text's offsets differ
    work.spend(end - start)
    return True, value, end


def _scan(text: str, errors: list[str], work: _Work) -> tuple[bool, object]:
    """The first complete JSON object in ``text``, else its first complete array, trying each
    ``{``/``[`` in turn; a start inside an array already decoded is not tried (its items are
    not values of their own).

    At each start the text is decoded as is, then (for the first few failures) repaired. The
    first decode error is appended to ``errors``. Stops when ``work`` is spent.
    """
    repairs = tried = 0
    array: tuple[object] | None = None
    skip_to = 0
    for match in _VALUE_START.finditer(text):
        start = match.start()
        if start < skip_to:
            continue
        if tried >= _MAX_STARTS or work.spent:
            break
        tried += 1
        found, value, end, error = _decode_from(text, start, work)
        if not found:
            if not errors:
                errors.append(error)
            if repairs < _MAX_REPAIRS and not work.spent:
                repairs += 1
                found, value, end = _repaired(text, start, work)
        if not found:
            continue
        if isinstance(value, dict):
            return True, value
        if array is None:
            array = (value,)
        skip_to = end
    return (True, array[0]) if array is not None else (False, None)


def find_json(text: str) -> object:
    """Find the JSON value in a model's reply.

    Rules, in order:

    1. Only the first :data:`MAX_REPLY_CHARS` characters are read.
    2. Surrogate code points, and ``\\uXXXX`` escapes of a lone surrogate (``"\\ud800"``), are
       removed; a valid pair (``"\\ud83d\\ude00"``) is kept.
    3. A reply that is one JSON object or array as a whole (around it only whitespace) is that
       value, whatever its strings hold (a memory that quotes a code fence).
    4. Else the candidates are the bodies of the code fences (```` ``` ````, ```` ```json ````,
       ```` ```JSON ````, ``~~~json``, ... up to the matching fence or the end of the text), in
       order, and then the whole text. Only the fence markers are skipped, never their content
       (mem0 PR #4026 deleted the fenced JSON).
    5. In each candidate, every ``{`` and ``[`` is tried in turn with a ``raw_decode``-style
       decode; the first complete object wins and what follows it is ignored, so prose around
       the JSON may hold braces of its own, and an array before it ("lines [1] and [2]:
       {...}") is passed over. Where no candidate holds an object, the first complete array is
       returned. Raw control characters inside strings are accepted (they are cleaned later).
    6. Where a start does not decode, it is tried once more repaired (the first 16 such
       starts): a backslash that starts no valid escape is doubled (``\\q`` becomes the two
       characters ``\\q``), and a trailing comma before ``}`` or ``]`` is removed.
    7. The decodes and repairs of 5 and 6 stop once they have read :data:`WORK_FACTOR` times
       the reply's length plus :data:`WORK_SLACK_CHARS` characters, or after 2,000 starts per
       candidate.

    Args:
        text: The reply text.

    Returns:
        The decoded value: a ``dict`` or a ``list`` (scalars are never returned), with no
        surrogate code point in any string.

    Raises:
        ExtractionError: the reply is empty, has no ``{`` or ``[``, or no complete JSON value
            could be decoded; the message says which (with the first decode error, and that the
            reply was cut when it was longer than :data:`MAX_REPLY_CHARS`).
    """
    if not text.strip():
        raise ExtractionError("the reply is empty")
    cut = ""
    if len(text) > MAX_REPLY_CHARS:
        text = text[:MAX_REPLY_CHARS]
        cut = f"; the reply is longer than {MAX_REPLY_CHARS} characters and was cut there"
    text = _SURROGATE_ESCAPE.sub(_drop_lone_surrogate_escape, _RAW_SURROGATES.sub("", text))
    if not _VALUE_START.search(text):
        raise ExtractionError(f"no JSON object or array in the reply{cut}")
    whole = text.strip()
    if whole[:1] in ("{", "["):
        try:
            value, end = _DECODER.raw_decode(whole)
        except (ValueError, RecursionError):
            pass
        else:
            if end == len(whole):
                return value
    work = _Work(WORK_FACTOR * len(text) + WORK_SLACK_CHARS)
    candidates = [m.group("body") for m in _FENCE.finditer(text)]
    candidates.append(text)
    errors: list[str] = []
    array: tuple[object] | None = None
    for candidate in candidates:
        found, value = _scan(candidate, errors, work)
        if found and isinstance(value, dict):
            return value
        if found and array is None:
            array = (value,)
    if array is not None:
        return array[0]
    first = f" (first error: {errors[0]})" if errors else ""
    gave_up = "; gave up after reading the allowed characters" if work.spent else ""
    raise ExtractionError(f"no complete JSON value in the reply{first}{cut}{gave_up}")
