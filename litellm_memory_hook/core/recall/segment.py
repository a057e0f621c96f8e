"""Words of the scripts written without spaces, by ICU's dictionary-based segmentation (pure).

Han, Hiragana, Katakana, Thai, Lao, Khmer and Myanmar runs are split into words by ``icu4py``
(ICU's word break iterator with its dictionaries); a few filters then drop particles and lone
characters. Stopwords are left to the caller (:mod:`~litellm_memory_hook.core.recall.tokens`).
"""

from __future__ import annotations

from collections.abc import Sequence

import regex
from icu4py.breakers import WordBreaker

SPACELESS = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}\u30fc\u3005"

_HAN = regex.compile(r"[\p{Han}\u3005]")
_LETTER = regex.compile(r"\p{L}")
_HIRAGANA_ONLY = regex.compile(r"[\p{Hiragana}\u30fc]+")
_KATAKANA_ONLY = regex.compile(r"[\p{Katakana}\u30fc]+")
_ICU_LOCALE = "und"  # ICU picks the dictionary by script (Thai, Lao, Khmer, Burmese, CJ)

MIN_KANA_CHARS = 3
"""Shortest kept word written in hiragana only: shorter ones are particles and inflections
(は, が, を, に, の, んで, ます)."""

MIN_SPACELESS_LETTERS = 2
"""Shortest kept word of Thai, Lao, Khmer and Myanmar, in letters (vowel signs and other
combining marks not counted): one-letter particles go (ก็, ရ), one-syllable words of two letters
stay (Khmer ឆ្មា "cat" is one grapheme cluster of two letters). Han words of one character stay
(猫, 书): the stopword lists hold the common ones."""


def spaceless_words(run: str) -> list[str]:
    """The words of a run of a script written without spaces, by ICU's word segmentation.

    ICU (through ``icu4py``) splits Thai, Lao, Khmer and Myanmar with its dictionaries of those
    languages, and Han and kana with its Chinese-Japanese dictionary, the segmentation that
    Lucene's ICU tokenizer and the browsers use. A name that is not in a dictionary comes out as
    single characters or syllables; consecutive single katakana characters are joined again
    (ミ + ケ -> ミケ). Filters: hiragana-only words shorter than ``MIN_KANA_CHARS``, Thai, Lao,
    Khmer and Myanmar words of fewer than ``MIN_SPACELESS_LETTERS`` letters, and a lone kana
    character go; stopwords are left to the caller.
    """
    return spaceless_words_of_runs([run])[0]


#: what joins the runs of one text for a single pass of ICU: a space, which ICU never puts in a
#: word, and which no run holds (runs are letters of the scripts above only)
_RUN_JOIN = " "


def spaceless_words_of_runs(runs: Sequence[str]) -> list[list[str]]:
    """:func:`spaceless_words` of each run, by one ICU pass over them all joined by spaces.

    A word break iterator costs ~10 us to make: a Chinese text of 24,000 characters has ~1,400
    runs between its punctuation marks, and segmenting them one by one took 16 ms against 6 ms
    in one pass. ICU breaks at every space and segments each run alike either way (a test holds
    the two equal), so the words come back run by run.
    """
    if not runs:
        return []
    pieces: list[list[str]] = [[]]
    for piece in WordBreaker(_RUN_JOIN.join(runs), _ICU_LOCALE):
        if piece == _RUN_JOIN:
            pieces.append([])
        else:
            pieces[-1].append(piece)
    if len(pieces) != len(runs):  # never seen: then run by run, as before
        pieces = [list(WordBreaker(run, _ICU_LOCALE)) for run in runs]
    return [_kept(p) for p in pieces]


def _kept(pieces: list[str]) -> list[str]:
    """One run's ICU pieces: single katakana characters joined again, then the filters of
    :func:`spaceless_words`."""
    words: list[str] = []
    joined = False  # the last word is a run of single katakana characters
    for piece in pieces:
        single_kana = len(piece) == 1 and _KATAKANA_ONLY.fullmatch(piece) is not None
        if single_kana and joined:
            words[-1] += piece
            continue
        words.append(piece)
        joined = single_kana
    kept: list[str] = []
    for word in words:
        if _HAN.search(word) is not None:
            kept.append(word)
        elif _HIRAGANA_ONLY.fullmatch(word) is not None:
            if len(word) >= MIN_KANA_CHARS:
                kept.append(word)
        elif _KATAKANA_ONLY.fullmatch(word) is not None:
            if len(word) >= 2:
                kept.append(word)
        elif len(_LETTER.findall(word)) >= MIN_SPACELESS_LETTERS:
            kept.append(word)
    return kept
