"""The script of one message: which writing system its letters are in (pure).

:func:`detect_script` counts the letters of each script (code, web and e-mail addresses left
out), pools kana with Han as Japanese, and takes a script that holds a majority; Latin text is
told English, Hinglish or unknown by :mod:`.latin`. The result is a :class:`ScriptGuess`.

Rules of :func:`detect_script`:

* Only letters count: characters of category L (letters) or M (marks, e.g. Indic vowel signs) whose
  Unicode ``Script`` property is a real script. Characters of script Common or Inherited (digits,
  punctuation, emoji, whitespace, the Japanese long-vowel mark, Arabic harakat) are ignored.
  Letters of a script not in :data:`SCRIPTS` (e.g. Armenian, Ethiopic) count towards the total
  but not towards any script.
* Fewer than :data:`MIN_LETTERS` counted letters: no guess.
* If the text has any Hiragana or Katakana, Han, Hiragana and Katakana are pooled as "Japanese";
  otherwise Han letters count as "Han" (Chinese).
* A script wins when it has at least :data:`MAJORITY` (70 %) of the counted letters; otherwise the
  text is mixed and there is no guess.
* Latin text embedded in a sentence of another script does not count against it: when Latin wins
  or no script does, the letters are counted again without the Latin words no language lists
  (names, products, identifiers: "Python", "TypeError") and without the Latin text after a colon
  that follows a letter of another script (a pasted error or log line); a script other than
  Latin that then wins with at least :data:`FRAME_LETTERS` letters (:data:`FRAME_SYLLABLES`
  characters of kana, Han or Hangul before such a colon) is the guess.
* For Latin, the language is told by :func:`~litellm_memory_hook.core.script.latin.latin_language`
  (the rules in :mod:`litellm_memory_hook.core.script.latin`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import regex

from litellm_memory_hook.core.excerpt import excerpt
from litellm_memory_hook.core.script.latin import (
    ENGLISH,
    HINGLISH,
    LATIN_WORD,
    latin_language,
    latin_term,
)

SCRIPTS: Final[tuple[str, ...]] = (
    "Latin",
    "Devanagari",
    "Bengali",
    "Gurmukhi",
    "Gujarati",
    "Tamil",
    "Telugu",
    "Kannada",
    "Malayalam",
    "Arabic",
    "Cyrillic",
    "Greek",
    "Hebrew",
    "Thai",
    "Han",
    "Japanese",
    "Hangul",
)
"""Every value :attr:`ScriptGuess.script` can take besides ``None``."""

MIN_LETTERS: Final = 2
"""Fewer counted letters than this gives no guess."""

MAJORITY: Final = 0.7
"""Share of the counted letters a script needs to win (0-1)."""

FRAME_LETTERS: Final = 3
"""Letters a script other than Latin needs to be the sentence that Latin terms or a pasted line
are embedded in (:func:`detect_script`): "Python это" is Cyrillic, "Python да" is not. Scripts
whose every character is a syllable or a word (kana, Han, Hangul) need
:data:`FRAME_SYLLABLES`."""

FRAME_SYLLABLES: Final = 2
""":data:`FRAME_LETTERS` for Japanese, Han and Hangul before a colon with a pasted line after it:
two characters are a word there ("エラー: TypeError ..." is Japanese; the long-vowel mark is not
counted), while "Tokyo 東京" stays Latin."""

_SYLLABIC: Final = frozenset({"Japanese", "Han", "Hangul"})

_LABELS: Final[dict[str, str]] = {
    "Latin": "Latin letters",
    "Arabic": "Arabic script",
    "Han": "Chinese characters (Han)",
    "Japanese": "Japanese",
    "Hangul": "Korean (Hangul)",
}

_LANGUAGE_LABELS: Final[dict[str, str]] = {
    ENGLISH: "English",
    HINGLISH: "Hinglish (romanised Hindi, in Latin letters)",
}

# Letters that are counted: categories L and M, scripts other than Common/Inherited.
_COUNTED = r"[\p{L}\p{M}--[\p{Script=Common}\p{Script=Inherited}]]"
_GROUPS: Final[tuple[str, ...]] = (
    *(name for name in SCRIPTS if name != "Japanese"),
    "Hiragana",
    "Katakana",
)
_KNOWN_SCRIPTS = "".join(f"\\p{{Script={name}}}" for name in _GROUPS)
_LETTER_RUNS: Final = regex.compile(
    "|".join(
        [
            *(f"(?P<{name}>[{_COUNTED}&&\\p{{Script={name}}}]+)" for name in _GROUPS),
            f"(?P<Other>[{_COUNTED}--[{_KNOWN_SCRIPTS}]]+)",
        ]
    ),
    regex.V1,
)


@dataclass(frozen=True)
class ScriptGuess:
    """The script of a message and, for Latin letters, its language when it can be told.

    Attributes:
        script: One of :data:`SCRIPTS`, or ``None`` when the text is mixed, unclear or has fewer
            than :data:`MIN_LETTERS` letters.
        language: :data:`ENGLISH` or :data:`HINGLISH` for Latin text where it can be told, else
            ``None``.
    """

    script: str | None
    language: str | None = None

    @property
    def label(self) -> str:
        """The phrase the reminder uses for the script or language.

        Returns:
            E.g. ``"Devanagari"``, ``"Arabic script"``, ``"English"``, ``"Hinglish (romanised
            Hindi, in Latin letters)"``, ``"Latin letters"`` (Latin, language unknown), or ``""``
            when there is no guess.
        """
        if self.script is None:
            return ""
        if self.script == "Latin" and self.language in _LANGUAGE_LABELS:
            return _LANGUAGE_LABELS[self.language]
        return _LABELS.get(self.script, self.script)


def _letter_counts_by_runs(text: str) -> dict[str, int]:
    """Counted letters per script group (:data:`_LETTER_RUNS`)."""
    counts: dict[str, int] = {}
    for match in _LETTER_RUNS.finditer(text):
        group = str(match.lastgroup)
        counts[group] = counts.get(group, 0) + len(match.group())
    return counts


def letter_counts(text: str) -> dict[str, int]:
    """:func:`_letter_counts_by_runs`, with a fast path for ASCII text (most messages): there
    every letter is a Latin one, so the script regex (~40x slower) is not needed."""
    if not text.isascii():
        return _letter_counts_by_runs(text)
    latin = sum(1 for char in text if char.isalpha())
    return {"Latin": latin} if latin else {}


#: what is no word of the language the user writes in, each found only in a text holding its
#: mark: fenced and inline code (`` ` ``), web addresses (``://``, ``www.``) and e-mail addresses
#: (``@``). A question in Japanese about a line of Python, or in Russian with an e-mail address
#: in it, was taken for English or "Latin letters".
_NOT_PROSE: Final[tuple[tuple[tuple[str, ...], regex.Pattern[str]], ...]] = (
    (("`",), regex.compile(r"```.*?(?:```|\Z)|`[^`\n]+`", regex.DOTALL)),
    (("://", "www."), regex.compile(r"\b(?:https?|ftp)://\S+|\bwww\.\S+")),
    (("@",), regex.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+")),
)


def prose(text: str) -> str:
    """``text`` with its code, web and e-mail addresses (:data:`_NOT_PROSE`) each replaced by
    a space; the text itself when it holds none of their marks."""
    for marks, pattern in _NOT_PROSE:
        if any(mark in text for mark in marks):
            text = pattern.sub(" ", text)
    return text


_NOT_LATIN_LETTER: Final = regex.compile(f"[{_COUNTED}--\\p{{Script=Latin}}]", regex.V1)


def _pasted_from(text: str) -> int:
    """Where the Latin text pasted after a sentence in another script starts: just after the
    first colon (``:`` or ``：``) that follows a letter of a script other than Latin ("このエラー
    は何ですか: TypeError: Cannot read properties..."); ``len(text)`` without one."""
    letter = _NOT_LATIN_LETTER.search(text)
    if letter is None:
        return len(text)
    colons = (text.find(":", letter.end()), text.find("\uff1a", letter.end()))
    return min((at + 1 for at in colons if at >= 0), default=len(text))


def _without_embedded_latin(text: str, pasted_from: int) -> str:
    """``text`` without the Latin words embedded in a sentence of another script
    (:func:`detect_script`): terms (:func:`latin_term`) and every Latin word from
    ``pasted_from`` on (:func:`_pasted_from`: after a colon that follows a letter of another
    script)."""
    return LATIN_WORD.sub(
        lambda word: " " if word.start() >= pasted_from or latin_term(word[0]) else word[0],
        text,
    )


def _winner(counts: dict[str, int]) -> tuple[str | None, int]:
    """The script of letter counts (:func:`letter_counts`) by the rules of the module
    docstring, with its letter count; ``(None, 0)`` when unclear."""
    total = sum(counts.values())
    if total < MIN_LETTERS:
        return None, 0
    counts = dict(counts)
    kana = counts.pop("Hiragana", 0) + counts.pop("Katakana", 0)
    if kana:
        counts["Japanese"] = kana + counts.pop("Han", 0)
    counts.pop("Other", None)
    if not counts:
        return None, 0
    script, count = max(counts.items(), key=lambda item: item[1])
    if count < MAJORITY * total:
        return None, 0
    return script, count


def detect_script(text: str) -> ScriptGuess:
    """Guess the script of a message (and Hinglish or English for Latin letters).

    The rules are in the module docstring: letters only, at least :data:`MIN_LETTERS` of them,
    kana pools Han into "Japanese", a :data:`MAJORITY` share wins.

    Code (fenced or in backticks), web addresses and e-mail addresses are left out first:
    they are written in Latin letters whatever the language around them.

    A sentence in another script with Latin text embedded in it is in that script: when the
    letters are not in another script already, they are counted again without the Latin terms
    (names, product names, identifiers: :func:`latin_term`) and without the Latin text after a
    colon that follows a letter of another script (a pasted error or log line); if a script
    other than Latin then wins, with at least :data:`FRAME_LETTERS` letters, it is the guess.
    So "Я использую Python и Django" is Cyrillic and "このエラーは何ですか: TypeError: Cannot
    read properties of undefined" Japanese, while "Привет hello" and "hello नमस्ते दोस्त how
    are" (Latin words of a language) stay unclear.

    Args:
        text: The user's message, any length; may hold emoji, digits, markup.

    Returns:
        A :class:`ScriptGuess`; ``ScriptGuess(None)`` when unclear.

    Raises:
        Nothing; every ``str`` is accepted. Of a text over
        :data:`~litellm_memory_hook.core.excerpt.ANALYSED_CHARS`, only its
        :func:`~litellm_memory_hook.core.excerpt.excerpt` (its start and end) is read.
    """
    text = prose(excerpt(text))
    counts = letter_counts(text)
    script, _ = _winner(counts)
    if script in (None, "Latin") and "Latin" in counts and len(counts) > 1:
        pasted_from = _pasted_from(text)
        framed, count = _winner(letter_counts(_without_embedded_latin(text, pasted_from)))
        labelled = framed in _SYLLABIC and pasted_from < len(text)
        least = FRAME_SYLLABLES if labelled else FRAME_LETTERS
        if framed not in (None, "Latin") and count >= least:
            return ScriptGuess(framed)
    if script is None:
        return ScriptGuess(None)
    if script == "Latin":
        return ScriptGuess(script, latin_language(text))
    return ScriptGuess(script)
