"""Phonetic keys: the consonant skeleton of a Latin or Devanagari word (pure).

``~`` keys let spellings of one word meet (nahi / nhi / नहीं, Seema / सीमा, paint / painting):
diacritics dropped, English suffixes stripped (:func:`english_stem`), Devanagari romanised,
digraphs folded, vowels dropped. One key per word, at most ``MAX_TERM_CHARS`` code points.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

import regex
from indic_transliteration import sanscript

from litellm_memory_hook.core.recall.scheme import (
    DEFAULT_TERM_OPTIONS,
    MAX_TERM_CHARS,
    PHONETIC_PREFIX,
    TermOptions,
)

MIN_SKELETON_CHARS = 2
"""Shortest phonetic key (consonant skeleton, see :func:`phonetic_key`); shorter ones would make
unrelated words meet."""

_DEVANAGARI = regex.compile(r"\p{Devanagari}")
_FINAL_NASAL = regex.compile(r"[\u0901\u0902]+$")
_DEVANAGARI_CONSONANT = regex.compile(r"[\u0915-\u0939\u0958-\u095f\u0978-\u097f]")

_ASCII_WORD = regex.compile(r"[a-z]+")
_LATIN_WORD = regex.compile(r"\p{Latin}[\p{Latin}\p{M}]*")


def english_stem(word: str) -> str:
    """Conservative English suffix stripping of a lower-case word (plural, -ing, -ed).

    A small subset of step 1 of Porter's stemmer (M. F. Porter, "An algorithm for suffix
    stripping", 1980): -ies -> -y, -sses / -shes / -ches / -xes -> drop "es", -s (not -ss, -us,
    -is) -> drop, -ing / -ed -> drop when 4+ letters remain (then a doubled final consonant other
    than l / s is undoubled: running -> run). Used inside phonetic keys only.

    Args:
        word: a plain word.

    Returns:
        The stem (the word itself when no rule applies).
    """
    if len(word) >= 6 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) >= 6 and word.endswith(("sses", "shes", "ches", "xes")):
        return word[:-2]
    if len(word) >= 5 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            stem = word[: -len(suffix)]
            if len(stem) >= 2 and stem[-1] == stem[-2] and stem[-1] not in "aeiouls":
                stem = stem[:-1]
            return stem
    return word


# Romanised-Hindi / English spelling folds, applied in order to a lower-case ASCII word.
_DIGRAPHS = (
    ("chh", "c"),
    ("ch", "c"),
    ("sh", "s"),
    ("ph", "f"),
    ("kh", "k"),
    ("gh", "g"),
    ("jh", "j"),
    ("th", "t"),
    ("dh", "d"),
    ("bh", "b"),
    ("ck", "k"),
    ("w", "v"),
    ("z", "j"),
    ("q", "k"),
    ("x", "ks"),
    ("mb", "nb"),
    ("mp", "np"),
)
_VOWELS = frozenset("aeiou")


def _skeleton(word: str, *, final_nasal: bool) -> str:
    """Consonant skeleton of a lower-case ASCII word (see :func:`phonetic_key`)."""
    collapsed = "".join(c for i, c in enumerate(word) if i == 0 or c != word[i - 1])
    if len(collapsed) > 2 and collapsed[-1] == "w" and collapsed[-2] in _VOWELS:
        collapsed = collapsed[:-1]  # English vowel digraphs: view, saw, show
    for old, new in _DIGRAPHS:
        collapsed = collapsed.replace(old, new)
    collapsed = "".join(c for i, c in enumerate(collapsed) if i == 0 or c != collapsed[i - 1])
    if final_nasal and len(collapsed) > 3 and collapsed[-1] == "n" and collapsed[-2] in _VOWELS:
        collapsed = collapsed[:-1]
    head = "a" if collapsed[:1] in _VOWELS else ""
    consonants = head + "".join(c for c in collapsed[len(head) :] if c not in _VOWELS)
    if len(consonants) > 2 and consonants[-1] == "y":
        consonants = consonants[:-1]
    return consonants


@lru_cache(maxsize=65536)
def _devanagari_latin(word: str) -> str:
    """Loose lower-case romanisation of a Devanagari word, for its phonetic key.

    OPTITRANS of ``indic_transliteration``; nukta dropped; a word-final anusvara / chandrabindu
    (a nasal vowel) dropped, another one written "n"; the final inherent vowel deleted.
    """
    prepared = word.replace("\u093c", "")
    prepared = _FINAL_NASAL.sub("", prepared)  # नहीं -> "nahi": a final nasal vowel, not a "n"
    prepared = prepared.replace("\u0902", "न्").replace("\u0901", "न्")  # बैंगलोर -> "bainglor"
    if not prepared:
        return ""
    latin = sanscript.transliterate(prepared, sanscript.DEVANAGARI, sanscript.OPTITRANS)
    if latin.endswith("a") and _DEVANAGARI_CONSONANT.fullmatch(prepared[-1]) is not None:
        latin = latin[:-1]  # schwa deletion: बहन -> "bahan", not "bahana"
    return "".join(_ASCII_WORD.findall(latin.lower()))


@lru_cache(maxsize=65536)
def ascii_form(word: str) -> str | None:
    """A Latin-script word without its diacritics, when that leaves ASCII letters only (cafe for
    café); else ``None``."""
    if _LATIN_WORD.fullmatch(word) is None:
        return None
    stripped = "".join(
        c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c)
    )
    return stripped if _ASCII_WORD.fullmatch(stripped) is not None else None


@lru_cache(maxsize=65536)
def _phonetic_key_cached(word: str, options: TermOptions) -> str | None:
    if _DEVANAGARI.search(word) is not None:
        if not options.translit:
            return None
        latin = _devanagari_latin(word)
    else:
        stripped = ascii_form(word)
        if stripped is None:
            return None
        latin = english_stem(stripped) if options.stem_in_key else stripped
    if not latin:
        return None
    skeleton = _skeleton(latin, final_nasal=options.final_nasal)
    if len(skeleton) < MIN_SKELETON_CHARS:
        return None
    return PHONETIC_PREFIX + skeleton[: MAX_TERM_CHARS - 1]


def phonetic_key(word: str, options: TermOptions = DEFAULT_TERM_OPTIONS) -> str | None:
    """The ``~`` phonetic key of one plain word, or ``None`` when it has none.

    Latin-script words (diacritics dropped, English -s / -es / -ing / -ed stripped by
    :func:`english_stem`) and Devanagari words (romanised: OPTITRANS of ``indic_transliteration``,
    nukta dropped, a final nasal mark dropped and another one written "n", the final inherent
    vowel deleted) are reduced to a consonant skeleton: doubled letters single, a final "w"
    after a vowel dropped (view), Hindi aspirates and spelling pairs folded (chh/ch -> c,
    sh -> s, ph -> f, kh gh jh th dh bh -> k g j t d b, w -> v, z -> j, q -> k, x -> ks,
    mb/mp -> nb/np), vowels dropped except a leading one written "a", then a final "y" dropped.
    So nahi, nhi and नहीं give ``~nh``; mujhe, mjhe and मुझे ``~mj``; Seema and सीमा ``~sm``;
    rehti, rahti and रहती ``~rht``; interview and इंटरव्यू ``~antrv``; paint, paints and painting
    ``~pnt``. A written final nasal stays (nahin gives ``~nhn``) unless ``options.final_nasal``.
    A key in the style of Soundex (R. C. Russell, US patent 1,261,167, 1918): consonants carry
    the word, vowels are where spellings differ. Skeletons shorter than ``MIN_SKELETON_CHARS``
    give ``None`` (they would join unrelated words).

    Args:
        word: a plain word as :func:`tokenize` returns it (NFKC + casefolded).
        options: the term scheme (``phonetic`` off gives ``None``).

    Returns:
        ``"~"`` + the skeleton (at most ``MAX_TERM_CHARS`` code points in all), or ``None``.
    """
    if not options.phonetic:
        return None
    if options is DEFAULT_TERM_OPTIONS:  # one string to hash: the indexing and recall path
        return _default_phonetic_key(word)
    return _phonetic_key_cached(word, options)


@lru_cache(maxsize=65536)
def _default_phonetic_key(word: str) -> str | None:
    return _phonetic_key_cached(word, DEFAULT_TERM_OPTIONS)
