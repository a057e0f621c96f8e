"""Tokenising a message into the plain words recall matches on (pure).

Folding (NFKC, case fold), runs of letters, marks and digits; runs of scripts written without
spaces go to ICU (:mod:`~litellm_memory_hook.core.recall.segment`); short words and stopwords
go. Lengths in code points (alphabetic scripts) or syllables (Brahmic scripts, Hangul).
"""

from __future__ import annotations

import unicodedata

import regex

from litellm_memory_hook.core.excerpt import excerpt
from litellm_memory_hook.core.memo import short_text_memo
from litellm_memory_hook.core.recall.scheme import MAX_TERM_CHARS, TERMS_MEMO_MAX_CHARS
from litellm_memory_hook.core.recall.segment import (
    SPACELESS,
    spaceless_words_of_runs,
)
from litellm_memory_hook.core.recall.stopwords import default_stopwords, fold

MIN_WORD_CHARS = 3
"""Shortest kept word of an alphabetic script, in code points after NFKC (drops "is", "to", "ka",
"ki", "hu")."""

MIN_WORD_SYLLABLES = 2
"""Shortest kept word of a syllabic script (Brahmic abugidas, Hangul), in syllables: a Devanagari
akshara counts as one syllable whatever its vowel signs (है, का, कि, में go; सीमा, घर stay). Two-
syllable function words (हम, यह, और) are in ``hi.txt``."""

_RUN = regex.compile(rf"([{SPACELESS}]+)|([\p{{L}}\p{{M}}\p{{N}}--[{SPACELESS}]]+)", regex.V1)

_BRAHMIC = regex.compile(
    r"[\p{Devanagari}\p{Bengali}\p{Gurmukhi}\p{Gujarati}\p{Oriya}\p{Tamil}\p{Telugu}"
    r"\p{Kannada}\p{Malayalam}\p{Sinhala}]"
)
_HANGUL = regex.compile(r"\p{Hangul}")

_VIRAMAS = frozenset("\u094d\u09cd\u0a4d\u0acd\u0b4d\u0bcd\u0c4d\u0ccd\u0d4d\u0dca")


def _syllables(word: str) -> int:
    """Syllables of a word of a syllabic script: letters not joined to the previous by a virama."""
    count = 0
    previous = ""
    for char in word:
        if unicodedata.category(char).startswith(("L", "N")) and previous not in _VIRAMAS:
            count += 1
        previous = char
    return count


def _long_enough(word: str) -> bool:
    if _BRAHMIC.search(word) is not None or _HANGUL.search(word) is not None:
        return _syllables(word) >= MIN_WORD_SYLLABLES
    return len(word) >= MIN_WORD_CHARS


def tokenize(text: str, stopwords: frozenset[str] | None = None) -> list[str]:
    r"""Split a message into the words recall matches on, in text order, repeats kept.

    Steps: drop invisible format characters (soft hyphen, zero-width joiners), NFKC, case fold,
    NFKC and case fold again; take runs of ``[\p{L}\p{M}\p{N}]`` (combining marks stay inside
    words, unlike Python's ``\w``). A run of a script written without spaces (Han, Hiragana,
    Katakana, Thai, Lao, Khmer, Myanmar) is split into words by ICU's dictionary-based word
    segmentation (:func:`spaceless_words`: "我的猫叫小米" -> "我的", "猫叫", "小米"), so two
    lines meet only on a whole word, never on a fragment that straddles two words (character
    bigrams did: "说明天气" shared "明天" with "明天去北京"). Other runs are words, kept if long
    enough (``MIN_WORD_CHARS`` code points in alphabetic scripts, ``MIN_WORD_SYLLABLES``
    syllables in Brahmic scripts and Hangul). Stopwords go in every script (the packaged lists
    include Thai, Lao, Khmer, Myanmar, Chinese and Japanese function words). Terms longer than
    ``MAX_TERM_CHARS`` code points are cut to that length.

    Args:
        text: any string (emoji, punctuation and control characters are simply skipped).
        stopwords: the stopword set; ``None`` for :func:`default_stopwords`.

    Returns:
        The terms; ``[]`` when the text holds only stopwords, short words, emoji or punctuation.
        Of a text over :data:`~litellm_memory_hook.core.excerpt.ANALYSED_CHARS`, only the words
        of its :func:`~litellm_memory_hook.core.excerpt.excerpt` (its start and end).
    """
    text = excerpt(text)
    if stopwords is None:
        return list(_default_tokens(text))
    return _tokenize(text, stopwords)


@short_text_memo(max_len=TERMS_MEMO_MAX_CHARS, maxsize=1024)
def _default_tokens(text: str) -> tuple[str, ...]:
    """:func:`tokenize` with the default stopwords, memoised: a request tokenises its new
    message for recall and again to index it after the reply, and the reply is tokenised
    again as the context of the next message."""
    return tuple(_tokenize(text, default_stopwords()))


def _tokenize(text: str, stop: frozenset[str]) -> list[str]:
    folded = fold(text)
    runs = [(m.group(1), m.group(2)) for m in _RUN.finditer(folded)]
    # the runs written without spaces, segmented in one ICU pass (spaceless_words_of_runs)
    segmented = iter(spaceless_words_of_runs([s for s, _ in runs if s is not None]))
    out: list[str] = []
    for spaceless, word in runs:
        if spaceless is not None:
            out.extend(w[:MAX_TERM_CHARS] for w in next(segmented) if w not in stop)
        elif _long_enough(word) and word not in stop:
            out.append(word[:MAX_TERM_CHARS])
    return out
