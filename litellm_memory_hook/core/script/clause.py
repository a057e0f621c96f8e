"""The reminder's clause about the reply's language and script (pure).

The final reminder of the system message names the script the reply must be written in ("Their
last message is in Devanagari, so write your reply in Devanagari."):
:func:`reminder_language_clause` words it from a
:class:`~litellm_memory_hook.core.script.detect.ScriptGuess` and the templates here.
"""

from __future__ import annotations

from typing import Final

from litellm_memory_hook.core.script.detect import ScriptGuess
from litellm_memory_hook.core.script.latin import HINGLISH

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

CLAUSE_EARLIER: Final = (
    "Their last message is too short to tell; before it they wrote in {label}, so write your "
    "reply in {label}."
)
"""Clause when the conversation's earlier messages decide (:func:`conversation_script`)."""


def reminder_language_clause(
    guess: ScriptGuess,
    *,
    known: str = CLAUSE_KNOWN,
    hinglish: str = CLAUSE_HINGLISH,
    latin_other: str = CLAUSE_LATIN_OTHER,
    unclear: str = CLAUSE_UNCLEAR,
    from_earlier: bool = False,
    earlier: str = CLAUSE_EARLIER,
) -> str:
    """Word the reminder's sentence about the reply's language and script.

    Args:
        guess: What :func:`detect_script` returned for the user's last message.
        known: Template for a detected script or English; ``{label}`` is replaced.
        hinglish: Template for Hinglish; ``{label}`` is replaced.
        latin_other: Template for Latin letters in another or unknown language.
        unclear: Sentence when there is no guess (used as is).
        from_earlier: the guess came from the conversation's earlier messages
            (:func:`conversation_script`).
        earlier: Template for such a guess; ``{label}`` is replaced.

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
    if from_earlier:
        return earlier.format(label=label)
    if guess.script == "Latin":
        if guess.language == HINGLISH:
            return hinglish.format(label=label)
        if guess.language is None:
            return latin_other.format(label=label)
    return known.format(label=label)
