"""Script (and, for Latin letters, Hinglish versus English) of the user's last message.

The final reminder of the system message names the script the reply must be written in (DESIGN.md
section 5, field cases C12 and C15): "Their last message is in Devanagari, so write your reply in
Devanagari." This module makes the guess and words that clause.

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
* For Latin, the language is told from Latin words (lower-cased runs of Latin letters, with
  inner apostrophes): ``h`` words in :data:`HINGLISH_WORDS`, ``e`` in :data:`ENGLISH_WORDS`,
  ``n`` words in all. Hinglish when ``h >= 1``, ``h >= e`` and ``h >= MARKER_SHARE * n``;
  otherwise English when ``e >= 1`` and ``e >= MARKER_SHARE * n``; otherwise unknown (e.g.
  Spanish or French, or too few marker words). Words that are common in both (``to``, ``me``,
  ``main``, ``the``, ``tab``, ``ok``) are in neither list. Known weakness: Italian
  ``ho``/``hai`` look Hinglish.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import regex

__all__ = [
    "CLAUSE_HINGLISH",
    "CLAUSE_KNOWN",
    "CLAUSE_LATIN_OTHER",
    "CLAUSE_UNCLEAR",
    "ENGLISH",
    "ENGLISH_WORDS",
    "HINGLISH",
    "HINGLISH_WORDS",
    "MAJORITY",
    "MARKER_SHARE",
    "MIN_LETTERS",
    "SCRIPTS",
    "ScriptGuess",
    "detect_script",
    "reminder_language_clause",
]

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

ENGLISH: Final = "English"
"""Value of :attr:`ScriptGuess.language` for English in Latin letters."""

HINGLISH: Final = "Hinglish (romanised Hindi)"
"""Value of :attr:`ScriptGuess.language` for romanised Hindi (Hinglish) in Latin letters."""

MIN_LETTERS: Final = 2
"""Fewer counted letters than this gives no guess."""

MAJORITY: Final = 0.7
"""Share of the counted letters a script needs to win (0-1)."""

MARKER_SHARE: Final = 0.2
"""Share of the Latin words that must be marker words of a language (0-1)."""


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


HINGLISH_WORDS: Final[frozenset[str]] = _word_set(
    """
    hai hain hoon hun hu ho tha thi thay raha rahi rahe rha rhi rhe
    kya kyaa kyun kyu kyon kyunki kaise kaisa kaisi kab kaha kahan kaun kitna kitni kitne jab
    nahi nhi nahin nai na mat haan han ji
    mera meri mere mujhe mjhe mujhko mujhse tera teri tere tujhe tum tumhe tumhara tumhari aap
    aapka aapki apna apni apne hum hume humko hamara hamari uska uski uske unka unki unke usko
    yeh ye woh wo vo yahan wahan idhar udhar
    bhi aur lekin par magar phir fir toh sirf bas abhi kal aaj parso hamesha kabhi
    ka ki ke ko se mein mei mai mujh
    kar karo karna karke kiya kiye kiyi diya diye liya liye gaya gayi gaye gya gyi hua hui hue
    aa raho rehna rehta rehti rehte jao jana jaana aana aaya aayi aaye
    dekho dekh bolo bol batao bata
    yaar yar bhai acha accha achha achcha theek thik thoda zyada jyada bahut bohot bahot kuch sab
    koi matlab pata chalo chal samjha samjhe samajh wala wali wale
    """
)
"""Common romanised Hindi function words and very frequent Hinglish words."""

ENGLISH_WORDS: Final[frozenset[str]] = _word_set(
    """
    the a an is are am was were be been being i you he she we they it my your his her our their
    its this that these those what where when why how who which whom whose do does did don't
    doesn't didn't can can't cannot could will won't would should shall must may might have has
    had having of in on at for with from by about into over under after before and or but not
    no yes if then than so because just also very really there here i'm it's you're let's
    hello hi hey thanks thank please
    """
)
"""Common English function words and greetings."""

CLAUSE_KNOWN: Final = "Their last message is in {label}, so write your reply in {label}."
"""Clause for a detected script (and for English); ``{label}`` is :attr:`ScriptGuess.label`."""

CLAUSE_HINGLISH: Final = (
    "Their last message is in {label}, so write your reply in Hinglish in Latin letters."
)
"""Clause for Hinglish; ``{label}`` is :attr:`ScriptGuess.label`."""

CLAUSE_LATIN_OTHER: Final = (
    "Their last message is in {label}, so write your reply in the same language, in {label}."
)
"""Clause for Latin letters in a language other than English or Hinglish (or an unknown one)."""

CLAUSE_UNCLEAR: Final = "Write your reply in the language the user writes in."
"""Clause when no script was detected."""

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
_LATIN_WORD: Final = regex.compile(
    r"[\p{L}&&\p{Script=Latin}]+(?:['\u2019][\p{L}&&\p{Script=Latin}]+)*", regex.V1
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


def _latin_language(text: str) -> str | None:
    words = [str(word).lower().replace("\u2019", "'") for word in _LATIN_WORD.findall(text)]
    if not words:
        return None
    hindi = sum(word in HINGLISH_WORDS for word in words)
    english = sum(word in ENGLISH_WORDS for word in words)
    needed = MARKER_SHARE * len(words)
    if hindi >= 1 and hindi >= english and hindi >= needed:
        return HINGLISH
    if english >= 1 and english >= needed:
        return ENGLISH
    return None


def _letter_counts_by_runs(text: str) -> dict[str, int]:
    """Counted letters per script group (:data:`_LETTER_RUNS`)."""
    counts: dict[str, int] = {}
    for match in _LETTER_RUNS.finditer(text):
        group = str(match.lastgroup)
        counts[group] = counts.get(group, 0) + len(match.group())
    return counts


def _letter_counts(text: str) -> dict[str, int]:
    """:func:`_letter_counts_by_runs`, with a fast path for ASCII text (most messages): there
    every letter is a Latin one, so the script regex (~40x slower) is not needed."""
    if not text.isascii():
        return _letter_counts_by_runs(text)
    latin = sum(1 for char in text if char.isalpha())
    return {"Latin": latin} if latin else {}


def detect_script(text: str) -> ScriptGuess:
    """Guess the script of a message (and Hinglish or English for Latin letters).

    The rules are in the module docstring: letters only, at least :data:`MIN_LETTERS` of them,
    kana pools Han into "Japanese", a :data:`MAJORITY` share wins.

    Args:
        text: The user's message, any length; may hold emoji, digits, markup.

    Returns:
        A :class:`ScriptGuess`; ``ScriptGuess(None)`` when unclear.

    Raises:
        Nothing; every ``str`` is accepted.
    """
    counts = _letter_counts(text)
    total = sum(counts.values())
    if total < MIN_LETTERS:
        return ScriptGuess(None)
    kana = counts.pop("Hiragana", 0) + counts.pop("Katakana", 0)
    if kana:
        counts["Japanese"] = kana + counts.pop("Han", 0)
    counts.pop("Other", None)
    if not counts:
        return ScriptGuess(None)
    script, count = max(counts.items(), key=lambda item: item[1])
    if count < MAJORITY * total:
        return ScriptGuess(None)
    if script == "Latin":
        return ScriptGuess(script, _latin_language(text))
    return ScriptGuess(script)


def reminder_language_clause(
    guess: ScriptGuess,
    *,
    known: str = CLAUSE_KNOWN,
    hinglish: str = CLAUSE_HINGLISH,
    latin_other: str = CLAUSE_LATIN_OTHER,
    unclear: str = CLAUSE_UNCLEAR,
) -> str:
    """Word the reminder's sentence about the reply's language and script.

    Args:
        guess: What :func:`detect_script` returned for the user's last message.
        known: Template for a detected script or English; ``{label}`` is replaced.
        hinglish: Template for Hinglish; ``{label}`` is replaced.
        latin_other: Template for Latin letters in another or unknown language.
        unclear: Sentence when there is no guess (used as is).

    Returns:
        One sentence, e.g. "Their last message is in Devanagari, so write your reply in
        Devanagari."

    Raises:
        KeyError, IndexError or ValueError: a template has a placeholder other than ``{label}``
            or unbalanced braces.
    """
    label = guess.label
    if not label:
        return unclear
    if guess.script == "Latin":
        if guess.language == HINGLISH:
            return hinglish.format(label=label)
        if guess.language is None:
            return latin_other.format(label=label)
    return known.format(label=label)
