"""Escaping of user- and model-written text before it goes into the system message.

Every piece of data that ends up inside a marked section of the system message
(docs/design.md#the-prompt-and-the-window: persona, custom instructions, pinned and extracted
memories, the summary, recalled lines and their speakers) goes through :func:`escape_data` first,
so that it can neither close its section early nor open a fake one, nor hide text from a human
reader.

What is changed, in this order:

1. Terminal escape sequences are removed whole (ANSI CSI like ``ESC [31m``, and terminated OSC
   like ``ESC ]8;;url ESC \\``). Then invisible characters are removed: control characters
   (``\\p{Cc}``: C0, DEL, C1), format characters (``\\p{Cf}``: bidirectional controls such as
   U+202E and U+2066-U+2069, U+200E/F, U+061C, zero-width space/non-joiner/joiner
   U+200B-U+200D, U+2060, U+FEFF, the soft hyphen, Unicode tag characters U+E0000-U+E007F, ...),
   lone surrogates (``\\p{Cs}``) and the other default-ignorable code points that render as
   nothing (e.g. the Hangul fillers U+3164 and U+FFA0, U+034F). Variation selectors are kept
   (they only pick an emoji or glyph style).
   Whitespace characters are not removed here, see step 2.

   Consequences, accepted for safety: emoji joined with ZWJ fall apart into their parts (the
   family emoji man-ZWJ-woman-ZWJ-girl becomes three separate people), subdivision flags lose
   their tag characters, and ZWNJ/ZWJ used for shaping in Persian or Indic words are dropped
   (the letters themselves stay).
2. Every run of whitespace, line breaks included (``\\r``, ``\\n``, ``\\r\\n``, ``\\v``,
   ``\\f``, U+0085, U+2028, U+2029, the information separators U+001C-U+001F that Python's
   ``str.splitlines`` treats as line breaks, tabs, no-break and ideographic spaces), becomes
   one ASCII space; spaces at both ends are removed. The result is a single line.
3. Angle brackets that read as tag delimiters are replaced by the single angle quotation marks
   ``‹`` (U+2039) and ``›`` (U+203A):

   * ``<`` ``>`` (ASCII),
   * ``＜`` ``＞`` (full-width, U+FF1C/U+FF1E) and ``﹤`` ``﹥`` (small, U+FE64/U+FE65), whose
     compatibility (NFKC) form is ASCII ``<`` ``>``,
   * ``˂`` ``˃`` (modifier arrowheads, U+02C2/U+02C3), drawn like ``<`` ``>``,
   * ``〈`` ``〉`` (U+2329/U+232A, deprecated angle brackets) and ``⟨`` ``⟩`` (U+27E8/U+27E9,
     mathematical angle brackets), which many fonts draw like tag brackets.

   Left alone on purpose: the CJK brackets ``〈〉《》`` (U+3008-U+300B, ordinary punctuation
   in Chinese, Japanese and Korean), ``‹`` ``›`` themselves (so escaping is idempotent),
   ``≮`` ``≯`` (only their NFD form contains ``<``/``>``; nothing downstream normalises), and
   letters of real scripts that resemble brackets (e.g. Canadian syllabics ``ᐸ`` ``ᐳ``).

The replacement characters are never markers: :mod:`litellm_memory_hook.core.prompt` uses ASCII
``<name>`` markers only, and its marker detection matches ASCII ``<`` ``>`` only.

No other change is made: letters, digits, punctuation, emoji and the text's Unicode
normalisation form stay as written.
"""

from __future__ import annotations

from typing import Final

import regex

from litellm_memory_hook.core.memo import short_text_memo

__all__ = ["ANGLE_CLOSE", "ANGLE_OPEN", "escape_data"]

ANGLE_OPEN: Final = "\u2039"
"""``‹``: what every opening angle bracket of :data:`_OPENERS` becomes."""

ANGLE_CLOSE: Final = "\u203a"
"""``›``: what every closing angle bracket of :data:`_CLOSERS` becomes."""

_OPENERS: Final = "<\uff1c\ufe64\u02c2\u2329\u27e8"
_CLOSERS: Final = ">\uff1e\ufe65\u02c3\u232a\u27e9"

_ANGLE_TABLE: Final[dict[int, str]] = {
    **{ord(c): ANGLE_OPEN for c in _OPENERS},
    **{ord(c): ANGLE_CLOSE for c in _CLOSERS},
}

# Whitespace as Unicode defines it, plus U+001C-U+001F (Python's str.isspace() and splitlines()
# treat them as whitespace / line breaks).
_WHITESPACE_CLASS: Final = r"[\p{White_Space}\x1c-\x1f]"

_WHITESPACE_RUN: Final = regex.compile(_WHITESPACE_CLASS + "+", regex.V1)

# Terminal escape sequences (ANSI CSI such as "\x1b[31m", and OSC such as hyperlinks): removed
# whole, so that no "[31m" residue is left once the ESC character itself is stripped.
_TERMINAL_ESCAPE: Final = regex.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]|(?:\x1b\]|\x9d)[^\x00-\x1f\x7f-\x9f]*(?:\x07|\x1b\\|\x9c)"
)

_INVISIBLE: Final = regex.compile(
    r"[[\p{Cc}\p{Cf}\p{Cs}\p{Default_Ignorable_Code_Point}]"
    r"--[\p{Variation_Selector}" + _WHITESPACE_CLASS[1:-1] + r"]]+",
    regex.V1,
)


# Printable characters that the full escape changes: the angle brackets and their look-alikes,
# and the default-ignorable characters that are letters or marks (tests/unit/test_escape.py checks
# this set against the patterns above over every code point).
_UNSAFE_PRINTABLE: Final = regex.compile(
    "[<>\uff1c\ufe64\u02c2\u2329\u27e8\uff1e\ufe65\u02c3\u232a\u27e9"
    "\u034f\u115f\u1160\u17b4\u17b5\u3164\uffa0]"
)


@short_text_memo(max_len=2000, maxsize=4096)  # memories and recalled lines recur
def escape_data(text: str) -> str:
    """Make one user- or model-written piece safe and readable inside a marked section.

    Args:
        text: Any string (a memory, a summary, a persona, a recalled line, a speaker name).

    Returns:
        A single line (no line break of any kind) without control, format or other invisible
        characters, without ``<``/``>`` or their look-alikes listed in the module docstring
        (replaced by ``‹``/``›``), with whitespace runs collapsed to one space and no space at
        either end. ``""`` when nothing visible remains. The function is idempotent:
        ``escape_data(escape_data(x)) == escape_data(x)``.

    Raises:
        Nothing; every ``str`` is accepted.
    """
    # Fast path: most pieces are printable text without a run of spaces or a space at either
    # end and without an unsafe character, which the full escape (~25 us a piece; a request
    # escapes dozens: memories, recalled lines) leaves as it is.
    if (
        text.isprintable()
        and "  " not in text
        and text[:1] != " "
        and text[-1:] != " "
        and _UNSAFE_PRINTABLE.search(text) is None
    ):
        return text
    return _escape_full(text)


def _escape_full(text: str) -> str:
    """:func:`escape_data` without its fast path."""
    cleaned: str = _TERMINAL_ESCAPE.sub("", text)
    cleaned = _INVISIBLE.sub("", cleaned)
    cleaned = _WHITESPACE_RUN.sub(" ", cleaned).strip(" ")
    return cleaned.translate(_ANGLE_TABLE)
