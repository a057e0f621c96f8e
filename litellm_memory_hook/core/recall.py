r"""Recall of older conversation lines by rare shared words (DESIGN.md section 6). Pure functions.

For every new user message the hook recalls up to 4 lines of the conversation that lie before the
recent window: the lines sharing the rarest terms with the message, scored by the sum of
``log(1 + N / (1 + df))`` over the distinct shared terms (:func:`score`), in time order.

Terms:

* Plain words (:func:`tokenize`): runs of letters, combining marks and digits (``regex``'s
  ``[\p{L}\p{M}\p{N}]+``, so a Devanagari vowel sign stays inside its word: सीमा, इंटरव्यू),
  after NFKC and case folding, without short words and without the stopwords of the packaged
  lists (``stopwords/en.txt``; ``hi-latn.txt``, romanised Hindi / Hinglish; ``hi.txt``, Hindi in
  Devanagari). Scripts written without spaces (Han, Hiragana, Katakana, Thai, Lao, Khmer,
  Myanmar) give overlapping bigrams of grapheme clusters.
* Extra keys (:func:`index_terms`, :func:`query_terms`), namespaced by a first character that
  no plain word can start with (plain words start with a letter, mark or digit):

  - ``~`` phonetic keys (:func:`phonetic_key`): a consonant skeleton of every Latin-script word
    (after light English suffix stripping) and of every Devanagari word (romanised with
    ``indic_transliteration``). Spelling variants of romanised Hindi meet (nahi / nhi / नहीं,
    mujhe / mjhe, rehti / रहती), so do a name in both scripts (Seema / सीमा) and English
    inflections (paint / painting). Weight 0.5.
  - ``^`` context keys: a message that follows a question is also indexed under the plain words
    of that question (the store passes the previous message's text as ``previous``), and a query
    looks for each of its words there too, so a reply that answers a question without repeating
    it is found. Weight 1.0.

Every key and weight was kept because it raised evidence recall in ``bench/recall_quality.py``
(LoCoMo, Maharana et al., ACL 2024, and the project's multilingual chats); that command prints
the ablation of each. On LoCoMo dev, window + top 4 holds 63.6% of the evidence lines (plain IDF:
54.0%); on the multilingual chats 74.5% (plain: 64.3%), 44.7% of the hard ones (plain: 18.4%).

Bounds, so that the store's work per message is bounded: at most ``MAX_TERMS_PER_MESSAGE`` terms
per message or query (plain words first), each at most ``MAX_TERM_CHARS`` code points.
"""

from __future__ import annotations

import heapq
import itertools
import math
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import regex
from indic_transliteration import sanscript

__all__ = [
    "CONTEXT_PREFIX",
    "DEFAULT_TERM_OPTIONS",
    "DEFAULT_TERM_WEIGHTS",
    "MAX_TERMS_PER_MESSAGE",
    "MAX_TERM_CHARS",
    "MIN_SKELETON_CHARS",
    "MIN_WORD_CHARS",
    "MIN_WORD_SYLLABLES",
    "PACKAGED_STOPWORD_LISTS",
    "PHONETIC_PREFIX",
    "PLAIN_TERM_OPTIONS",
    "TermOptions",
    "default_stopwords",
    "english_stem",
    "idf",
    "index_terms",
    "is_question",
    "load_stopwords",
    "phonetic_key",
    "query_terms",
    "score",
    "term_kind",
    "tokenize",
]

MAX_TERMS_PER_MESSAGE = 64
"""Most terms stored for one message, and most terms of a query. Plain words come first, then
phonetic keys, then context keys. On the LoCoMo dev lines: 10 plain words and 22 terms on average,
at most 35 plain words; the bound cuts context keys of 0.8% of lines (-0.002 cover@4 against no
bound). Each term costs the store one posting append, so this bounds the write per message."""

MAX_TERM_CHARS = 40
"""Longest term in code points; longer words are cut to this length (on both the index and the
query side, so a cut word still meets itself). Bounds the key size in the store."""

MIN_WORD_CHARS = 3
"""Shortest kept word of an alphabetic script, in code points after NFKC (drops "is", "to", "ka",
"ki", "hu"; DESIGN.md section 6 "minus short words")."""

MIN_WORD_SYLLABLES = 2
"""Shortest kept word of a syllabic script (Brahmic abugidas, Hangul), in syllables: a Devanagari
akshara counts as one syllable whatever its vowel signs (है, का, कि, में go; सीमा, घर stay). Two-
syllable function words (हम, यह, और) are in ``hi.txt``."""

MIN_SKELETON_CHARS = 2
"""Shortest phonetic key (consonant skeleton, see :func:`phonetic_key`); shorter ones would make
unrelated words meet."""

PHONETIC_PREFIX = "~"
"""Prefix of phonetic keys in the index (never the first character of a plain word)."""

CONTEXT_PREFIX = "^"
"""Prefix of context keys: the plain words of the question a message answers."""

DEFAULT_TERM_WEIGHTS: Mapping[str, float] = {"": 1.0, PHONETIC_PREFIX: 0.5, CONTEXT_PREFIX: 1.0}
"""Weight per term kind (the prefix, "" for plain words) multiplying the IDF in :func:`score`.
Phonetic keys count half of a plain word, context keys as much as one: the best of
0.25 / 0.5 / 0.75 / 1.0 measured by ``bench/recall_quality.py``."""

_SPACELESS = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}\u30fc\u3005"
_RUN = regex.compile(rf"([{_SPACELESS}]+)|([\p{{L}}\p{{M}}\p{{N}}--[{_SPACELESS}]]+)", regex.V1)
_GRAPHEME = regex.compile(r"\X")
# Format characters that hide inside words: soft hyphen, ZWNJ, ZWJ, word joiner, BOM.
_IGNORABLE = regex.compile(r"[\u00ad\u200b-\u200d\u2060\ufeff]")
_BRAHMIC = regex.compile(
    r"[\p{Devanagari}\p{Bengali}\p{Gurmukhi}\p{Gujarati}\p{Oriya}\p{Tamil}\p{Telugu}"
    r"\p{Kannada}\p{Malayalam}\p{Sinhala}]"
)
_HANGUL = regex.compile(r"\p{Hangul}")
_DEVANAGARI = regex.compile(r"\p{Devanagari}")
_FINAL_NASAL = regex.compile(r"[\u0901\u0902]+$")
_DEVANAGARI_CONSONANT = regex.compile(r"[\u0915-\u0939\u0958-\u095f\u0978-\u097f]")
_VIRAMAS = frozenset("\u094d\u09cd\u0a4d\u0acd\u0b4d\u0bcd\u0c4d\u0ccd\u0d4d\u0dca")
_ASCII_WORD = regex.compile(r"[a-z]+")
_LATIN_WORD = regex.compile(r"\p{Latin}[\p{Latin}\p{M}]*")

_PLAIN_START = regex.compile(r"[\p{L}\p{M}\p{N}]")

PACKAGED_STOPWORD_LISTS = ("en", "hi-latn", "hi")
"""The stopword lists shipped in ``litellm_memory_hook/core/stopwords/`` (``<name>.txt``)."""


@dataclass(frozen=True)
class TermOptions:
    """Which extra keys :func:`index_terms` and :func:`query_terms` add to the plain words.

    The defaults are the tuned scheme; ``bench/recall_quality.py`` switches single options off
    (or on) to measure each idea.

    Attributes:
        phonetic: ``~`` consonant-skeleton keys of Latin-script words.
        translit: ``~`` keys of Devanagari words too (romanised with ``indic_transliteration``);
            needs ``phonetic``.
        stem_in_key: strip English -s / -es / -ies / -ing / -ed before taking the skeleton.
        final_nasal: also drop a word-final "n" after a vowel in the skeletons of Latin words, so
            nahin / hain / kahan meet nahi / hai / kaha (off: it cut English words such as join,
            plan, written, and gained nothing on the Hinglish chats).
        context: ``^`` context keys: a message that follows a question is indexed with the
            question's plain words, and a query looks for its words among them too.
    """

    phonetic: bool = True
    translit: bool = True
    stem_in_key: bool = True
    final_nasal: bool = False
    context: bool = True


DEFAULT_TERM_OPTIONS = TermOptions()
"""The tuned term scheme used by the store and the hook."""

PLAIN_TERM_OPTIONS = TermOptions(
    phonetic=False, translit=False, stem_in_key=False, final_nasal=False, context=False
)
"""Plain words only (the "plain IDF" baseline of DESIGN.md section 6)."""


def _fold(text: str) -> str:
    """Drop invisible format characters, then NFKC, case fold, NFKC, case fold.

    The last case fold makes every term a fixed point of ``str.casefold`` (NFKC alone can
    recompose a folded "ǰ" into a character that folds again); the same function folds the
    stopword lists, so both sides always agree.
    """
    folded = unicodedata.normalize("NFKC", _IGNORABLE.sub("", text)).casefold()
    return unicodedata.normalize("NFKC", folded).casefold()


def _read_stopword_lines(lines: Iterable[str]) -> set[str]:
    words: set[str] = set()
    for raw in lines:
        line = raw.split("#", 1)[0].strip()
        if line:
            words.add(_fold(line))
    return words


@cache
def _packaged_list(name: str) -> frozenset[str]:
    text = resources.files("litellm_memory_hook.core.stopwords").joinpath(f"{name}.txt")
    return frozenset(_read_stopword_lines(text.read_text(encoding="utf-8").split("\n")))


@cache
def default_stopwords() -> frozenset[str]:
    """The packaged stopwords (English, romanised Hindi, Hindi), loaded once.

    Returns:
        The words of ``stopwords/en.txt``, ``hi-latn.txt`` and ``hi.txt``, NFKC + casefolded.
    """
    return load_stopwords()


def load_stopwords(
    extra_files: Sequence[Path] = (), *, lists: Sequence[str] = PACKAGED_STOPWORD_LISTS
) -> frozenset[str]:
    """Packaged stopword lists plus those of more files (for deployments with more languages).

    Args:
        extra_files: UTF-8 text files, one word per line, ``#`` starts a comment.
        lists: which packaged lists to include (names from ``PACKAGED_STOPWORD_LISTS``).

    Returns:
        The union, NFKC + casefolded, for the ``stopwords`` parameter of :func:`tokenize`,
        :func:`index_terms` and :func:`query_terms`.

    Raises:
        OSError: a file cannot be read.
        UnicodeDecodeError: a file is not UTF-8.
        ValueError: ``lists`` names a list that is not packaged.
    """
    unknown = set(lists) - set(PACKAGED_STOPWORD_LISTS)
    if unknown:
        raise ValueError(f"no packaged stopword list {sorted(unknown)}")
    words: set[str] = set()
    for name in lists:
        words |= _packaged_list(name)
    for path in extra_files:
        words |= _read_stopword_lines(path.read_text(encoding="utf-8").split("\n"))
    return frozenset(words)


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
    Katakana, Thai, Lao, Khmer, Myanmar) gives its overlapping bigrams of grapheme clusters
    ("我的猫" -> "我的", "的猫"); a lone character gives itself (a one-character word such as 猫
    meets only itself). Other runs are words, kept if long enough (``MIN_WORD_CHARS`` code points
    in alphabetic scripts, ``MIN_WORD_SYLLABLES`` syllables in Brahmic scripts and Hangul) and
    not stopwords. Terms longer than ``MAX_TERM_CHARS`` code points are cut to that length.

    Args:
        text: any string (emoji, punctuation and control characters are simply skipped).
        stopwords: the stopword set; ``None`` for :func:`default_stopwords`.

    Returns:
        The terms; ``[]`` when the text holds only stopwords, short words, emoji or punctuation.
    """
    stop = default_stopwords() if stopwords is None else stopwords
    folded = _fold(text)
    out: list[str] = []
    for match in _RUN.finditer(folded):
        spaceless, word = match.group(1), match.group(2)
        if spaceless is not None:
            chars = _GRAPHEME.findall(spaceless)
            grams = chars if len(chars) == 1 else [a + b for a, b in itertools.pairwise(chars)]
            out.extend(g[:MAX_TERM_CHARS] for g in grams if g not in stop)
        elif _long_enough(word) and word not in stop:
            out.append(word[:MAX_TERM_CHARS])
    return out


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
def _phonetic_key_cached(word: str, options: TermOptions) -> str | None:
    if _DEVANAGARI.search(word) is not None:
        if not options.translit:
            return None
        latin = _devanagari_latin(word)
    elif _LATIN_WORD.fullmatch(word) is not None:
        stripped = "".join(
            c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c)
        )
        if _ASCII_WORD.fullmatch(stripped) is None:
            return None
        latin = english_stem(stripped) if options.stem_in_key else stripped
    else:
        return None
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
    return _phonetic_key_cached(word, options)


_QUESTION_MARKS = regex.compile(r"[?\u00bf\u061f\u2e2e\uff1f]")


def is_question(text: str) -> bool:
    """Whether a message asks something: it holds a question mark.

    The ASCII "?", its full-width form (U+FF1F), the inverted "¿" and the Arabic U+061F count.

    Args:
        text: a message.

    Returns:
        True when the text holds a question mark.
    """
    return _QUESTION_MARKS.search(text) is not None


def _terms(words: Sequence[str], context_words: Sequence[str], options: TermOptions) -> list[str]:
    """Plain words, then their phonetic keys, then context keys, up to the bound; sorted."""
    chosen = dict.fromkeys(list(dict.fromkeys(words))[:MAX_TERMS_PER_MESSAGE])
    plain = list(chosen)
    for word in plain:
        if len(chosen) >= MAX_TERMS_PER_MESSAGE:
            break
        key = phonetic_key(word, options)
        if key is not None:
            chosen[key] = None
    if options.context:
        for word in context_words:
            if len(chosen) >= MAX_TERMS_PER_MESSAGE:
                break
            chosen[CONTEXT_PREFIX + word[: MAX_TERM_CHARS - 1]] = None
    return sorted(chosen)


def index_terms(
    text: str,
    speaker: str = "",
    *,
    previous: str = "",
    stopwords: frozenset[str] | None = None,
    options: TermOptions = DEFAULT_TERM_OPTIONS,
) -> list[str]:
    """The distinct terms stored in the recall index for one message.

    In this order, until ``MAX_TERMS_PER_MESSAGE`` terms: the plain words of :func:`tokenize`
    (distinct, in text order), the ``~`` phonetic keys of those words (:func:`phonetic_key`),
    and, when ``previous`` asks a question (:func:`is_question`), ``^`` context keys: ``"^"`` +
    each plain word of ``previous``. A reply usually answers the question before it without
    repeating its words ("What have you learned from those books?" / "A lot about
    ecosystems."): the context keys let a later query about the books find the reply.

    Args:
        text: the message text.
        speaker: the speaker's name. Accepted for the store's convenience and not indexed: a
            speaker key did not raise the benchmark enough to pay for doubling the query's terms
            (``bench/recall_quality.py``).
        previous: the text of the message just before this one in the conversation ("" for the
            first message, or when the store does not have it: then no context keys).
        stopwords: the stopword set; ``None`` for :func:`default_stopwords`.
        options: the term scheme; the default is the tuned one.

    Returns:
        Sorted distinct terms, at most ``MAX_TERMS_PER_MESSAGE``, each at most ``MAX_TERM_CHARS``
        code points.
    """
    del speaker
    context = (
        tokenize(previous, stopwords)
        if options.context and previous and is_question(previous)
        else []
    )
    return _terms(tokenize(text, stopwords), list(dict.fromkeys(context)), options)


def query_terms(
    text: str,
    *,
    stopwords: frozenset[str] | None = None,
    options: TermOptions = DEFAULT_TERM_OPTIONS,
) -> list[str]:
    """The terms of a new user message, built as :func:`index_terms` builds them.

    The plain words, their phonetic keys and, for each plain word, its context key ``"^" + word``
    (to meet replies to earlier questions with that word), in that order until
    ``MAX_TERMS_PER_MESSAGE``.

    Guarantees: the plain words and phonetic keys of ``query_terms(x)`` are all in
    ``index_terms(x)`` (an earlier copy of a message meets it on them), and its context keys
    are in ``index_terms(y, previous=x)`` for any reply ``y`` when ``x`` is a question (as far as
    the bound lets them in).

    Args:
        text: the new user message.
        stopwords: the stopword set; ``None`` for :func:`default_stopwords`.
        options: the term scheme; the default is the tuned one.

    Returns:
        Sorted distinct terms (``[]`` for a message of only stopwords, emoji or punctuation).
    """
    words = tokenize(text, stopwords)
    return _terms(words, list(dict.fromkeys(words)), options)


def term_kind(term: str) -> str:
    """The kind of a term: its namespace prefix (``"~"``, ``"^"``), or ``""`` for a plain word.

    Plain words start with a letter, mark or digit; any other first character is a prefix.
    """
    return term[0] if term and _PLAIN_START.match(term) is None else ""


def idf(n_docs: int, df: int) -> float:
    """Inverse document frequency ``log(1 + N / (1 + df))`` (DESIGN.md section 6).

    The smoothed form never divides by zero and stays positive for any ``df`` (also one larger
    than ``N``, as a store that counts a term twice may report).

    Args:
        n_docs: N, the number of indexed messages; ``N <= 0`` gives 0.0.
        df: the number of messages holding the term; negative values count as 0.

    Returns:
        The weight, natural log, in ``[0, log(1 + N)]``.
    """
    if n_docs <= 0:
        return 0.0
    return math.log1p(n_docs / (1 + max(df, 0)))


def score(
    query: Sequence[str],
    postings: Mapping[str, Sequence[int] | npt.NDArray[Any]],
    df: Mapping[str, int],
    n_docs: int,
    *,
    exclude_from_seq: int | None = None,
    k: int = 4,
    term_weights: Mapping[str, float] | None = None,
) -> list[tuple[int, float]]:
    """The top ``k`` older messages for a query, by the summed IDF of distinct shared terms.

    A candidate's score is ``sum(weight(kind(t)) * idf(n_docs, df[t]))`` over the distinct query
    terms ``t`` whose postings hold it (DESIGN.md section 6, with a weight per term kind).

    Args:
        query: the query's terms (:func:`query_terms`); repeats count once. Empty -> ``[]``.
        postings: term -> sequence numbers of the messages holding it (ascending; may be only
            the newest postings of a term). Terms missing here match nothing.
        df: term -> exact document frequency; a term missing here uses ``len(postings[t])``.
        n_docs: N, the number of indexed messages.
        exclude_from_seq: messages with ``seq >= exclude_from_seq`` (the recent window, and
            anything newer) are never returned; ``None`` excludes nothing.
        k: how many to return at most; ``k <= 0`` gives ``[]``.
        term_weights: weight per term kind (the prefix of :func:`term_kind`, ``""`` for plain
            words); kinds missing from it use ``DEFAULT_TERM_WEIGHTS``, then 1.0.

    Returns:
        Up to ``k`` pairs ``(seq, score)`` in ascending ``seq`` (time order): the best scores,
        ties going to the newer message. Messages scoring 0 are never returned.
    """
    if k <= 0 or n_docs <= 0:
        return []
    weights = dict(DEFAULT_TERM_WEIGHTS)
    if term_weights is not None:
        weights.update(term_weights)
    segments: list[Sequence[int] | npt.NDArray[Any]] = []
    segment_weights: list[float] = []
    for term in sorted(set(query)):
        seqs = postings.get(term)
        if seqs is None or len(seqs) == 0:
            continue
        weight = weights.get(term_kind(term), 1.0) * idf(n_docs, df.get(term, len(seqs)))
        if weight > 0.0:
            segments.append(seqs)
            segment_weights.append(weight)
    if not segments:
        return []
    lengths = np.fromiter((len(x) for x in segments), dtype=np.int64, count=len(segments))
    every = np.concatenate([np.asarray(x, dtype=np.int64) for x in segments])
    weight_of = np.repeat(np.asarray(segment_weights), lengths)
    # Repeats of one message within a term count once. The store's postings are strictly
    # ascending; anything else (hand-made input) is de-duplicated per term.
    starts = np.cumsum(lengths) - lengths
    steps = np.diff(every) > 0
    steps[starts[1:] - 1] = True  # a new term may start anywhere
    if not bool(np.all(steps)):
        pairs = np.unique(np.stack([np.repeat(np.arange(len(segments)), lengths), every]), axis=1)
        every = pairs[1]
        weight_of = np.asarray(segment_weights)[pairs[0]]
    if exclude_from_seq is not None:
        keep = every < exclude_from_seq
        every, weight_of = every[keep], weight_of[keep]
    if every.size == 0:
        return []
    # Sum per message with one bincount over all postings (vectorised: the cost is linear in
    # the postings read, which the store caps per term), then keep the k best.
    base = int(every.min())
    totals = np.bincount(every - base, weights=weight_of)
    candidates = np.flatnonzero(totals > 0.0)
    if candidates.size > k:
        cut = candidates.size - k
        kth = np.partition(totals[candidates], cut)[cut]
        candidates = candidates[totals[candidates] >= kth]
    best = heapq.nlargest(
        k, ((int(c) + base, float(totals[c])) for c in candidates), key=lambda i: (i[1], i[0])
    )
    return sorted(best)
