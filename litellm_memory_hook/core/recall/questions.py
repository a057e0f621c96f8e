"""Whether a message asks something, and whether it asks about a time (pure).

A question mark in any of its forms makes a question (:func:`is_question`: the store keys a
reply by the question before it); a question, or an English question word first, asks about a
time a date names (:func:`asks_about_time`: date-led recall).
"""

from __future__ import annotations

import regex

from litellm_memory_hook.core.dates import QUESTION_WORDS

_QUESTION_MARKS = regex.compile(r"[?\u00bf\u061f\u2e2e\uff1f]")

_FIRST_WORD = regex.compile(r"[\p{L}\p{M}]+")


def is_question(text: str) -> bool:
    """Whether a message asks something: it holds a question mark.

    The ASCII "?", its full-width form (U+FF1F), the inverted "¿" and the Arabic U+061F count.

    Args:
        text: a message.

    Returns:
        True when the text holds a question mark.
    """
    return _QUESTION_MARKS.search(text) is not None


def asks_about_time(text: str) -> bool:
    """Whether a message asks something, so that a date it names can be its subject (date-led
    recall, :func:`dates_lead`): it holds a question mark (:func:`is_question`), or its first
    word is an English question word (:data:`litellm_memory_hook.core.dates.QUESTION_WORDS`,
    any case; English like the date forms).

    Args:
        text: the new user message.

    Returns:
        True for "What did we talk about on 2 May 2023?" and "what happened last tuesday";
        False for "remind me on 3 May 2023 to call Bob".
    """
    if is_question(text):
        return True
    first = _FIRST_WORD.search(text)
    return first is not None and first.group().casefold() in QUESTION_WORDS
