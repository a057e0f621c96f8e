"""The script the reply should be in, from the user's last message and those before it (pure).

A message that tells too little (a short one in Latin letters or with no clear script, or Chinese
characters only) gives way to the script of the user's earlier messages, newest first, at most
``EARLIER_MESSAGES`` of them; lengths in letters.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from litellm_memory_hook.core.excerpt import excerpt
from litellm_memory_hook.core.script.detect import ScriptGuess, detect_script, letter_counts, prose

SHORT_MESSAGE_LETTERS: Final = 12
"""A message with fewer letters than this ("ok", "thanks", "lol", "👍") in Latin letters, or
with no clear script, tells little of the language the user writes in: the conversation's
earlier messages decide (:func:`conversation_script`)."""

EARLIER_MESSAGES: Final = 6
"""At most this many of the user's earlier messages are read for :func:`conversation_script`."""


def conversation_script(last: str, earlier: Iterable[str] = ()) -> tuple[ScriptGuess, bool]:
    """The script (and language) the reply should be in: that of the user's last message,
    unless the last message tells too little and the conversation says more.

    * A short message (fewer than :data:`SHORT_MESSAGE_LETTERS` letters) in Latin letters, or
      one with no clear script ("ok", "thanks", "lol", "👍" after messages in Russian or
      Devanagari): the newest earlier message with a clear script decides when it is written
      in another script, or when the short message's own language is unknown ("ok" after
      English or Hinglish). A short message in another script than Latin ("да", "हाँ") stands:
      it was typed on purpose.
    * A message in Chinese characters only ("了解", "東京駅") after a message in Japanese is
      Japanese: kanji alone do not tell Japanese from Chinese.

    An earlier message that itself tells too little is read the same way, from the messages
    before it (within the newest :data:`EARLIER_MESSAGES`): after a message in Russian, "ok" and
    "ok" again are both Cyrillic, and after one in Japanese, "了解" twice is Japanese.

    Args:
        last: the user's last message.
        earlier: the user's messages before it, newest first (at most
            :data:`EARLIER_MESSAGES` are read, and only when ``last`` tells too little).

    Returns:
        ``(guess, from_earlier)``: the guess, and whether the earlier messages gave it.
    """
    guess = detect_script(last)
    if not _tells_little(last, guess):
        return guess, False
    return _with_earlier(guess, _earlier_script(earlier))


def _tells_little(text: str, guess: ScriptGuess) -> bool:
    """Whether ``guess``, :func:`detect_script` of ``text``, may give way to the script of the
    messages before it: Chinese characters only, or a short message in Latin letters or with
    no clear script (:func:`conversation_script`)."""
    if guess.script == "Han":
        return True
    return guess.script in (None, "Latin") and _letters(text) < SHORT_MESSAGE_LETTERS


def _with_earlier(guess: ScriptGuess, prior: ScriptGuess) -> tuple[ScriptGuess, bool]:
    """:func:`conversation_script` for a message that tells little: its own ``guess``, or
    ``prior``, the script of the messages before it (``ScriptGuess(None)`` when they have
    none)."""
    if guess.script == "Han":
        return (prior, True) if prior.script == "Japanese" else (guess, False)
    if prior.script is None:
        return guess, False
    if prior.script != "Latin" or guess.script is None or guess.language is None:
        return (prior, True) if prior != guess else (guess, False)
    return guess, False


def _earlier_script(earlier: Iterable[str]) -> ScriptGuess:
    """The script of the newest of the ``earlier`` messages (newest first, at most
    :data:`EARLIER_MESSAGES`) that has one, each message that tells little read as
    :func:`conversation_script` reads the last one, from the messages before it."""
    telling_little: list[ScriptGuess] = []
    prior = ScriptGuess(None)
    for number, text in enumerate(earlier):
        if number >= EARLIER_MESSAGES:
            break
        guess = detect_script(text)
        if _tells_little(text, guess):
            telling_little.append(guess)
        elif guess.script is not None:
            prior = guess
            break
    for guess in reversed(telling_little):
        resolved, _ = _with_earlier(guess, prior)
        if resolved.script is not None:
            prior = resolved
    return prior


def _letters(text: str) -> int:
    return sum(letter_counts(prose(excerpt(text))).values())
