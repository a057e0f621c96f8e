r"""Recall of older conversation lines by rare shared words (DESIGN.md section 6). Pure functions.

For every new user message the hook recalls lines of the conversation that lie before the recent
window: the lines sharing the rarest terms with the message, scored by the sum of
``weight(kind) * log(1 + N / (1 + df))`` over the distinct shared terms (:func:`rank`, the one
scorer of the package: recall of lines, recall across a user's chats (:func:`rank_collections`)
and the choice of stored memories (:func:`rank_texts`) all use it), then shown in time order.
How many: by default as many of the best as fit in a character budget (:func:`fill_budget`:
``recall_chars``, at most ``recall_k_max`` lines, each scoring at least ``recall_min_share`` of
the best), or a fixed ``recall_k`` (the seed's top 4).

Terms:

* Plain words (:func:`tokenize`): runs of letters, combining marks and digits (``regex``'s
  ``[\p{L}\p{M}\p{N}]+``, so a Devanagari vowel sign stays inside its word: सीमा, इंटरव्यू),
  after NFKC and case folding, without short words and without the stopwords of the packaged
  lists (``stopwords/en.txt`` and the request verbs :data:`REQUEST_WORDS`, tell / say / ask /
  know / remember; ``hi-latn.txt``, romanised Hindi / Hinglish; ``hi.txt``, Hindi in
  Devanagari; ``th``, ``lo``, ``km``, ``my``, ``zh``, ``ja``). Scripts written without spaces
  (Han, Hiragana, Katakana, Thai, Lao, Khmer, Myanmar) are split into words by ICU's
  dictionary-based word segmentation (``icu4py``), so lines meet on whole words only: character
  bigrams made fragments that straddle two words match unrelated lines (the false-recall set,
  ``test_false_recall.py``, holds unrelated queries in each of these scripts that must recall
  nothing).
* Extra keys (:func:`index_terms`, :func:`query_terms`), namespaced by a first character that
  no plain word can start with (plain words start with a letter, mark or digit):

  - ``~`` phonetic keys (:func:`phonetic_key`): a consonant skeleton of every Latin-script word
    (after light English suffix stripping) and of every Devanagari word (romanised with
    ``indic_transliteration``). Spelling variants of romanised Hindi meet (nahi / nhi / नहीं,
    mujhe / mjhe, rehti / रहती), so do a name in both scripts (Seema / सीमा) and English
    inflections (paint / painting). Weight 0.5. In English the skeleton also joins different
    words (parrot / party, team / time): :func:`sound_alike` tells a spelling or form of one
    word from another word, and recall (:class:`SoundAlikes`, used by
    :mod:`litellm_memory_hook.proxy.recall_step`) and :func:`rank_texts` take the weight of such
    a false key off again. In romanised Hindi (a query or line holding a Hinglish marker word)
    two words that are neither English words nor names meet on the key alone (rehti / rahti);
    English words are checked there too (party / parrot in "Kal raat dost ki party thi").
  - ``^`` context keys: a message that follows a question is also indexed under the plain words
    of that question (the store passes the previous message's text as ``previous``), and a query
    looks for each of its words there too, so a reply that answers a question without repeating
    it is found. Weight 1.0.
  - ``@`` date terms, query side only (:func:`litellm_memory_hook.core.dates.query_dates`): a
    day, week, month or year the message names ("8 May 2023", "May 2023", "yesterday", "last
    week"), in the user's zone; the store finds the lines said then by time
    and :func:`date_postings` makes them postings. Weight 2.0. Usually they only lift lines
    that words matched (``BOOST_KINDS``): a message that merely contains a date recalls
    nothing by it. They lead instead (date-led recall, :func:`dates_lead`) when the message
    asks something (:func:`asks_about_time`: a question mark, or an English question word
    first) and a date is at least as rare as each of its plain words that an older line
    shares (no more lines said then than lines holding the word; the date's own words, "May",
    "2023", "yesterday", left out: :func:`litellm_memory_hook.core.dates.without_dates`): "What
    did we talk about on 2 May 2023?" when "talk" is in more lines than that day holds, or in
    none. Then :func:`rank` takes the lines said within the named spans as its candidates and
    the words only lift them (``main_kinds``): the lines of that day that the words match come
    first, then the day's other lines, those with more content words first
    (:func:`date_led_order`, :func:`content_words`; lines under ``MIN_CONTENT_WORDS`` that no
    word matched, greetings and one-word replies, left out while others remain), at most
    ``DATE_LED_K_MAX`` of them (:mod:`litellm_memory_hook.proxy.recall_step`).

Every key and weight was kept because it raised evidence cover in ``bench/recall_quality.py`` or
``litellm-memory bench recall`` (LoCoMo, Maharana et al., ACL 2024, and the project's
multilingual chats). On LoCoMo dev, window + top 4 holds 64.4% of the evidence lines (plain IDF:
53.6%), window + the default budget of 2,500 characters 74.3% (plain IDF: 63.0%) in a median
prompt of 7,509 characters (64.7% and 74.4% before the window began to start with a user
message); on the multilingual chats 87.8% (plain: 69.4%), 68.4% of the hard
ones (plain: 21.0%). Date terms: +1.2 points of LoCoMo cover at 4 lines and +1.5 at 2,500
characters (123 of the 1,155 questions name a date); date-led recall then 74.25% -> 74.37% at
2,500 characters (two questions gained, none lost; the multilingual chats unchanged). Weighing
the date against the words by ``weight x IDF`` instead (the date counted twice) made dates lead
far more often and lost 3 questions against 4 gained (74.28%; 74.19% with the 8-line cap).

Bounds, so that the store's work per message is bounded: at most ``MAX_TERMS_PER_MESSAGE`` terms
per message or query (plain words first), each at most ``MAX_TERM_CHARS`` code points; at most
``MAX_DATES_PER_QUERY`` dates (:mod:`litellm_memory_hook.core.dates`).
"""

from __future__ import annotations

import heapq
import math
import re
import unicodedata
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import regex
from icu4py.breakers import WordBreaker
from indic_transliteration import sanscript
from rapidfuzz.distance import OSA, Indel

from litellm_memory_hook.core.dates import DATE_PREFIX, QUESTION_WORDS
from litellm_memory_hook.core.excerpt import excerpt
from litellm_memory_hook.core.memo import short_text_memo
from litellm_memory_hook.core.script import (
    ENGLISH_LEXICON,
    ENGLISH_WORDS,
    HINGLISH_WORDS,
    has_hinglish_marker,
)

__all__ = [
    "BOOST_KINDS",
    "CONTEXT_PREFIX",
    "DATE_LED_K_MAX",
    "DATE_PREFIX",
    "DEFAULT_TERM_OPTIONS",
    "DEFAULT_TERM_WEIGHTS",
    "MAX_TERMS_PER_MESSAGE",
    "MAX_TERM_CHARS",
    "MIN_CONTENT_WORDS",
    "MIN_KANA_CHARS",
    "MIN_SKELETON_CHARS",
    "MIN_SPACELESS_LETTERS",
    "MIN_WORD_CHARS",
    "MIN_WORD_SYLLABLES",
    "PACKAGED_STOPWORD_LISTS",
    "PHONETIC_PREFIX",
    "PLAIN_TERM_OPTIONS",
    "REQUEST_WORDS",
    "SCORE_EPSILON",
    "Collection",
    "SoundAlikes",
    "TermOptions",
    "asks_about_time",
    "capitalised_words",
    "content_words",
    "date_led_order",
    "date_postings",
    "dates_lead",
    "default_stopwords",
    "distinct_texts",
    "english_stem",
    "false_sound_alikes",
    "fill_budget",
    "holders",
    "idf",
    "index_terms",
    "inner_names",
    "is_english_word",
    "is_question",
    "load_lemmas",
    "load_stopwords",
    "matched_seqs",
    "phonetic_key",
    "query_sound_alikes",
    "query_terms",
    "rank",
    "rank_collections",
    "rank_texts",
    "same_text",
    "score",
    "sound_alike",
    "term_kind",
    "term_weight",
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

DEFAULT_TERM_WEIGHTS: Mapping[str, float] = {
    "": 1.0,
    PHONETIC_PREFIX: 0.5,
    CONTEXT_PREFIX: 1.0,
    DATE_PREFIX: 2.0,
}
"""Weight per term kind (the prefix, "" for plain words) multiplying the IDF in :func:`score`.
Phonetic keys count half of a plain word, context keys as much as one: the best of
0.25 / 0.5 / 0.75 / 1.0 measured by ``bench/recall_quality.py``. Date terms count twice: weights
1 / 2 / 3 / 4 gave LoCoMo dev cover 0.733 / 0.736 / 0.738 / 0.736 at 2,500 characters (in
memory), against 0.722 without dates; 2 and 3 are within noise."""

BOOST_KINDS: frozenset[str] = frozenset({DATE_PREFIX})
"""Term kinds that only add to lines some other term matched: a date a message merely contains
recalls nothing by itself (it would recall every line of a busy day, tool traffic included), it
lifts that day's matches. A question whose date leads (:func:`dates_lead`) is ranked with the
date as the only main kind instead (``main_kinds`` of :func:`rank`)."""

DATE_LED_K_MAX = 8
"""Most lines a date-led recall keeps (both recall modes; the character budget still applies):
a question about a day gets that day's gist, not every line of a busy day or of a month."""

MIN_CONTENT_WORDS = 3
"""Fewest :func:`content_words` of a line that carries content in a date-led recall: "Hey
Mira!" (1), "Thanks, Caroline!" and "Hey Mel! How is it going?" (2) do not; "Congrats on the
new job!" (3) does. Lines below it that no word of the question matched are left out while
other lines can be recalled (:func:`date_led_order`)."""

_SPACELESS = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}\u30fc\u3005"
_RUN = regex.compile(rf"([{_SPACELESS}]+)|([\p{{L}}\p{{M}}\p{{N}}--[{_SPACELESS}]]+)", regex.V1)
_GRAPHEME = regex.compile(r"\X")
_HAN = regex.compile(r"[\p{Han}\u3005]")
_LETTER = regex.compile(r"\p{L}")
_HIRAGANA_ONLY = regex.compile(r"[\p{Hiragana}\u30fc]+")
_KATAKANA_ONLY = regex.compile(r"[\p{Katakana}\u30fc]+")
_ICU_LOCALE = "und"  # ICU picks the dictionary by script (Thai, Lao, Khmer, Burmese, CJ)
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

PACKAGED_STOPWORD_LISTS = ("en", "hi-latn", "hi", "th", "lo", "km", "my", "zh", "ja")
"""The stopword lists shipped in ``litellm_memory_hook/core/stopwords/`` (``<name>.txt``)."""

MIN_KANA_CHARS = 3
"""Shortest kept word written in hiragana only: shorter ones are particles and inflections
(は, が, を, に, の, んで, ます)."""

MIN_SPACELESS_LETTERS = 2
"""Shortest kept word of Thai, Lao, Khmer and Myanmar, in letters (vowel signs and other
combining marks not counted): one-letter particles go (ก็, ရ), one-syllable words of two letters
stay (Khmer ឆ្មា "cat" is one grapheme cluster of two letters). Han words of one character stay
(猫, 书): the stopword lists hold the common ones."""


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


REQUEST_WORDS: frozenset[str] = frozenset(
    {
        *("tell", "tells", "told", "telling", "say", "says", "said", "saying"),
        *("ask", "asks", "asked", "asking", "know", "knows", "knew", "known", "knowing"),
        *("remember", "remembers", "remembered", "remembering"),
        *("remind", "reminds", "reminded", "reminding", "recall", "recalls", "recalled"),
        "recalling",
    }
)
"""English verbs with which a message asks the assistant for its memory, or a reply
acknowledges it ("Can you tell me about the bedroom?", "Do you remember ...?", "What did I say
about ...?", "Got it, thanks for telling me."): the request, not its subject. They are
stopwords of the English list (:func:`load_stopwords` with ``"en"``), with their forms, so
"tell" does not recall every "thanks for telling me"."""


@cache
def default_stopwords() -> frozenset[str]:
    """The packaged stopwords (English, romanised Hindi, Hindi), loaded once.

    Returns:
        The words of the packaged lists (``stopwords/en.txt`` with :data:`REQUEST_WORDS`,
        ``hi-latn.txt``, ``hi.txt`` and the others), NFKC + casefolded.
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
    if "en" in lists:
        words |= REQUEST_WORDS
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


def _spaceless_words(run: str) -> list[str]:
    """The words of a run of a script written without spaces, by ICU's word segmentation.

    ICU (through ``icu4py``) splits Thai, Lao, Khmer and Myanmar with its dictionaries of those
    languages, and Han and kana with its Chinese-Japanese dictionary, the segmentation that
    Lucene's ICU tokenizer and the browsers use. A name that is not in a dictionary comes out as
    single characters or syllables; consecutive single katakana characters are joined again
    (ミ + ケ -> ミケ). Filters: hiragana-only words shorter than ``MIN_KANA_CHARS``, Thai, Lao,
    Khmer and Myanmar words of fewer than ``MIN_SPACELESS_LETTERS`` letters, and a lone kana
    character go; stopwords are left to the caller.
    """
    words: list[str] = []
    joined = False  # the last word is a run of single katakana characters
    for piece in WordBreaker(run, _ICU_LOCALE):
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


#: Memos of terms (:func:`tokenize`, :func:`rank_texts`, :func:`query_terms_cached`). Most texts
#: whose terms :func:`rank_texts` keeps in memory. A user's memory set is scored
#: against every new message, and its texts change only when an extraction job commits: the
#: terms of each text are computed once, not per request (3.2 ms -> 0.3 ms per request at 50
#: memories). Texts longer than ``_TERMS_MEMO_MAX_CHARS`` are not kept, so the memo holds at most
#: about 4,096 x 2,000 characters of text plus their terms (~20 MB).
_TERMS_MEMO_SIZE = 4096
_TERMS_MEMO_MAX_CHARS = 2000


def tokenize(text: str, stopwords: frozenset[str] | None = None) -> list[str]:
    r"""Split a message into the words recall matches on, in text order, repeats kept.

    Steps: drop invisible format characters (soft hyphen, zero-width joiners), NFKC, case fold,
    NFKC and case fold again; take runs of ``[\p{L}\p{M}\p{N}]`` (combining marks stay inside
    words, unlike Python's ``\w``). A run of a script written without spaces (Han, Hiragana,
    Katakana, Thai, Lao, Khmer, Myanmar) is split into words by ICU's dictionary-based word
    segmentation (:func:`_spaceless_words`: "我的猫叫小米" -> "我的", "猫叫", "小米"), so two
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


@short_text_memo(max_len=_TERMS_MEMO_MAX_CHARS, maxsize=1024)
def _default_tokens(text: str) -> tuple[str, ...]:
    """:func:`tokenize` with the default stopwords, memoised: a request tokenises its new
    message for recall and again to index it after the reply, and the reply is tokenised
    again as the context of the next message."""
    return tuple(_tokenize(text, default_stopwords()))


def _tokenize(text: str, stop: frozenset[str]) -> list[str]:
    folded = _fold(text)
    out: list[str] = []
    for match in _RUN.finditer(folded):
        spaceless, word = match.group(1), match.group(2)
        if spaceless is not None:
            out.extend(w[:MAX_TERM_CHARS] for w in _spaceless_words(spaceless) if w not in stop)
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
def _ascii_form(word: str) -> str | None:
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
        stripped = _ascii_form(word)
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


INFLECTION_PREFIX = 4
"""Shortest shared beginning of two English stems that :func:`sound_alike` takes for two forms
of one word (dance / dancing: "danc"; cream / creamy: "cream")."""


def load_lemmas() -> None:
    """Load ``lemminflect``'s English lemma dictionary now (about 0.5 s, once per process), so
    that the first request whose recall needs it (:func:`sound_alike`) does not wait for it."""
    _english_lemmas("took")


@lru_cache(maxsize=16384)
def _english_lemmas(word: str) -> frozenset[str]:
    """The English lemmas of a lower-case ASCII word, of any part of speech (``lemminflect``'s
    dictionary and rules; took -> take, movies -> movie), else none."""
    from lemminflect import getAllLemmas  # its dictionary takes ~0.2 s to load: on first use

    return frozenset(lemma for lemmas in getAllLemmas(word).values() for lemma in lemmas)


@cache
def _english_vocabulary() -> frozenset[str]:
    """The packaged English words of :mod:`litellm_memory_hook.core.script`
    (:data:`~litellm_memory_hook.core.script.ENGLISH_LEXICON` and its marker words), less the
    romanised-Hindi marker words (``main``, ``me``)."""
    return (ENGLISH_LEXICON | ENGLISH_WORDS) - HINGLISH_WORDS


@lru_cache(maxsize=65536)
def is_english_word(word: str) -> bool:
    """Whether a plain word is a known English word: in the packaged English lexicon of
    :mod:`litellm_memory_hook.core.script` (itself, or its :func:`english_stem`), or a word of
    ``lemminflect``'s English dictionary (party, parrot, team, rate, beer), and not a romanised-
    Hindi marker word (:data:`~litellm_memory_hook.core.script.HINGLISH_WORDS`: hum, main).
    Romanised Hindi (rehti, nahi, mujhe, behen, raat) is not.

    Args:
        word: a plain word as :func:`tokenize` returns it.

    Returns:
        False also for a word that is not ASCII letters once its diacritics go (Devanagari).
    """
    plain = _ascii_form(word)
    if plain is None or plain in HINGLISH_WORDS:
        return False
    vocabulary = _english_vocabulary()
    if plain in vocabulary or english_stem(plain) in vocabulary:
        return True
    return bool(_english_lemmas(plain))


def sound_alike(a: str, b: str, *, loose: bool = False) -> bool:
    """Whether two plain words that share a phonetic key are one word in two spellings or forms,
    and not two words that the key's consonant skeleton happens to join.

    The key was made for romanised Hindi, whose spellings differ mostly in vowels (rehti /
    rahti, theek / thik, bahut / bohot). In English, words with the same consonants are usually
    different words: parrot / party (``~prt``), team / time, son / sun, share / sure. So two
    different Latin-script words sound alike only when

    * ``loose`` (the text reads as romanised Hindi) and neither word is a known English word
      (:func:`is_english_word`): any two such words with the same key, as the key intends
      (rehti / rahti, nahi / nhi, behen / bahen); two English words, or an English word and a
      Hindi one (rate / raat, time / tum), are judged as below even inside Hinglish text, or
    * they are forms of one English word: a lemma in common (``lemminflect``: take / took,
      find / found, movie / movies), or the same stem by :func:`english_stem` (paint /
      painting), or
    * the stems share their first ``INFLECTION_PREFIX`` (4) letters or more, and all but at
      most one letter of the shorter one (dance / dancing, cream / creamy, share / shared), or
    * they are a typo apart: between stems of 5 to 7 letters, one letter left out or added
      (colour / color) or two neighbours swapped (theatre / theater), not one letter changed:
      with the same consonants that is a vowel, and think / thank, black / block are two words;
      from 8 letters on, an optimal-string-alignment distance (Damerau-Levenshtein with adjacent
      transpositions, ``rapidfuzz``) of at most 2 (recommend / reccomend, definitely /
      definately); below 5 letters none, where one letter makes another word.

    A word in another script (Devanagari, whose key is a romanisation) always sounds like a
    word with its key: the two cannot be compared letter by letter.

    Args:
        a / b: plain words as :func:`tokenize` returns them.
        loose: the query or the line reads as romanised Hindi
            (:func:`~litellm_memory_hook.core.script.has_hinglish_marker`) and neither word is
            a name there (:func:`false_sound_alikes` decides).

    Returns:
        True when recall may count the key as a match between them.
    """
    if a == b:
        return True
    if loose and not is_english_word(a) and not is_english_word(b):
        return True
    left, right = _ascii_form(a), _ascii_form(b)
    if left is None or right is None:
        return True
    if not _english_lemmas(left).isdisjoint(_english_lemmas(right)):
        return True
    left, right = english_stem(left), english_stem(right)
    if left == right:
        return True
    shorter = min(len(left), len(right))
    shared = 0
    for x, y in zip(left, right, strict=False):
        if x != y:
            break
        shared += 1
    if shared >= max(INFLECTION_PREFIX, shorter - 1):
        return True
    if shorter >= 8:
        return OSA.distance(left, right) <= 2
    if shorter < 5:
        return False
    # a letter left out or added, or two swapped; not one changed: with the consonants the
    # same, that is a vowel, and think / thank, black / block are two words
    return Indel.distance(left, right) <= 1 or (
        OSA.distance(left, right) == 1 and sorted(left) == sorted(right)
    )


_CAPITALISED = regex.compile(r"\b\p{Lu}[\p{L}\p{M}]*")
_ASCII_CAPITALISED = re.compile(r"\b[A-Z][A-Za-z]*")
_ASCII_RUN = re.compile("[a-z0-9]+")


def capitalised_words(text: str) -> frozenset[str]:
    """The words of a text written with a capital first letter, casefolded as :func:`tokenize`
    gives them: its names, and the first word of each sentence ("Seema", "Sima loves tea")."""
    if text.isascii():  # the usual line: the stdlib's engine, several times faster
        return frozenset(w.lower() for w in _ASCII_CAPITALISED.findall(text))
    return frozenset(m.group().casefold() for m in _CAPITALISED.finditer(text))


def _line_words(text: str) -> Iterable[str]:
    """The distinct plain words of a line (:func:`tokenize`, default stopwords); for an ASCII
    text, the same words found by the stdlib's engine (runs of letters and digits, lower case),
    without the cost of Unicode normalisation."""
    if not text.isascii():
        return dict.fromkeys(tokenize(text))
    stop = default_stopwords()
    return {
        w: None
        for w in _ASCII_RUN.findall(text.lower())
        if len(w) >= MIN_WORD_CHARS and w not in stop
    }


_SENTENCE_START = frozenset(".!?:;\n\u2026\"'(\u201c\u2018[")


def inner_names(text: str) -> frozenset[str]:
    """The words of a text written with a capital first letter inside a sentence, casefolded:
    its names ("Tom" in "I had a beer with Tom"), not the first word of a sentence ("Kal raat
    ..."), which :func:`capitalised_words` also gives. A word after a line break, ``.``, ``!``,
    ``?``, ``:``, ``;``, an ellipsis or an opening bracket or quote opens a sentence. Linear in
    ``len(text)``: each word looks back only over the spaces and tabs before it."""
    out: set[str] = set()
    pattern = _ASCII_CAPITALISED if text.isascii() else _CAPITALISED
    for match in pattern.finditer(text):
        index = match.start() - 1
        while index >= 0 and text[index] in " \t":
            index -= 1
        if index >= 0 and text[index] not in _SENTENCE_START:
            out.add(match.group().casefold())
    return frozenset(out)


def false_sound_alikes(
    query_words: Sequence[str],
    text: str,
    keys: Iterable[str],
    *,
    loose: bool = False,
    names: Set[str] = frozenset(),
    proper: Set[str] = frozenset(),
    options: TermOptions = DEFAULT_TERM_OPTIONS,
) -> frozenset[str]:
    """The phonetic keys that a line matched a query on only through words that do not sound
    alike (:func:`sound_alike`): recall takes their weight off the line's score, so that a
    question about a parrot does not recall a line about a party.

    Two words both written with a capital letter, in the query and in the line, are taken for
    one name in two spellings, whose romanisations vary as romanised Hindi does (Seema / Sima),
    unless both are English words (a sentence that starts "Team ..." and the name Tom).
    When the query or the line reads as romanised Hindi
    (:func:`~litellm_memory_hook.core.script.has_hinglish_marker`), two words neither of which
    is a known English word (:func:`is_english_word`) nor a name (:func:`inner_names` of the
    query or of the line) sound alike by their key alone (``loose`` of :func:`sound_alike`):
    rehti / rahti meet; parrot / party, team / time, rate / raat and time / Tom do not, in
    any text.

    Args:
        query_words: the query's plain words (the plain terms of :func:`query_terms`).
        text: the line's text.
        keys: the ``~`` keys the line matched (whose postings hold it).
        loose: the query reads as romanised Hindi.
        names: the query's :func:`capitalised_words`.
        proper: the query's :func:`inner_names`.
        options: the term scheme of the keys.

    Returns:
        The false keys among ``keys`` (empty when every key joins some pair that sounds alike).
    """
    wanted = frozenset(keys)
    if not wanted:
        return frozenset()
    asked: dict[str, list[str]] = {}
    for word in query_words:
        key = phonetic_key(word, options)
        if key in wanted:
            asked.setdefault(key, []).append(word)
    said: dict[str, list[str]] = {}
    for word in _line_words(text):
        key = phonetic_key(word, options)
        if key in asked:
            said.setdefault(key, []).append(word)
    if not said:
        return frozenset()
    line_names = capitalised_words(text) if names else frozenset()
    hindi = loose or has_hinglish_marker(text)
    line_proper = inner_names(text) if hindi else frozenset()

    def alike(a: str, b: str) -> bool:
        if a in names and b in line_names and not (is_english_word(a) and is_english_word(b)):
            return True
        return sound_alike(a, b, loose=hindi and a not in proper and b not in line_proper)

    return frozenset(
        key
        for key, words in asked.items()
        if key in said and not any(alike(a, b) for a in words for b in said[key])
    )


@dataclass(frozen=True)
class SoundAlikes:
    """The query side of :func:`false_sound_alikes` (:func:`query_sound_alikes` makes it once
    per message).

    A line that holds a query word itself matched that word's key through the pair (word,
    word), which sounds alike; only the keys that a line holds without any of their query words
    are judged word by word, on its text.

    Attributes:
        words: the query's plain words.
        key_words: key -> the query words with that key (empty: nothing to check).
        names: the query's :func:`capitalised_words`.
        loose: the query reads as romanised Hindi (its words that are neither English nor
            names meet their vowel variants).
        options: the term scheme of the keys.
        proper: the query's :func:`inner_names`.
    """

    words: tuple[str, ...] = ()
    key_words: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    names: frozenset[str] = frozenset()
    loose: bool = False
    options: TermOptions = DEFAULT_TERM_OPTIONS
    proper: frozenset[str] = frozenset()

    def false_keys(self, text: str, open_keys: Sequence[str]) -> frozenset[str]:
        """:func:`false_sound_alikes` of a line: the keys whose weight its score loses.

        Args:
            text: the line's text.
            open_keys: the keys the line holds without any of their query words (the others
                join it to the query through the word itself).
        """
        if not open_keys:
            return frozenset()
        return false_sound_alikes(
            self.words,
            text,
            open_keys,
            loose=self.loose,
            names=self.names,
            proper=self.proper,
            options=self.options,
        )

    def risky(self, collections: Sequence[Collection]) -> list[str]:
        """The keys that may join a line to the query through another word: those whose
        document frequency, in some collection, exceeds that of each of their query words (the
        key's lines are more than the lines holding the words themselves). Other keys are never
        false, and are not checked line by line."""
        out = []
        for key, words in self.key_words.items():
            for collection in collections:
                df = collection.df
                if df.get(key, 0) > max(df.get(w, 0) for w in words):
                    out.append(key)
                    break
        return out


SCORE_EPSILON = 1e-9
"""A score at or below this is nothing left: float sums and differences of IDF weights, once
the weight of false keys is taken off (:class:`SoundAlikes`)."""


@short_text_memo(max_len=_TERMS_MEMO_MAX_CHARS, maxsize=256)
def query_sound_alikes(text: str, options: TermOptions = DEFAULT_TERM_OPTIONS) -> SoundAlikes:
    """The :class:`SoundAlikes` check of a new message (its terms: :func:`query_terms_cached`),
    memoised: recall and the choice of memories both check the lines of one message. Of a long
    message, its :func:`~litellm_memory_hook.core.excerpt.excerpt` is read."""
    text = excerpt(text)
    words = tuple(t for t in query_terms_cached(text, options) if not term_kind(t))
    key_words: dict[str, list[str]] = {}
    for word in words:
        key = phonetic_key(word, options)
        if key is not None:
            key_words.setdefault(key, []).append(word)
    if not key_words:
        return SoundAlikes(words, options=options)
    return SoundAlikes(
        words,
        MappingProxyType({k: tuple(v) for k, v in key_words.items()}),
        capitalised_words(text),
        has_hinglish_marker(text),
        options,
        inner_names(text),
    )


_QUESTION_MARKS = regex.compile(r"[?\u00bf\u061f\u2e2e\uff1f]")


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


_FIRST_WORD = regex.compile(r"[\p{L}\p{M}]+")


def content_words(text: str) -> int:
    """How many distinct words of a line recall matches on (:func:`tokenize`, default stopwords):
    what a date-led recall prefers among the lines of a day ("Hey Mel! How's it going?" 2,
    "I adopted a greyhound named Pixel" 4). Memoised with :func:`tokenize` for short texts."""
    return len(set(tokenize(text)))


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


@short_text_memo(max_len=_TERMS_MEMO_MAX_CHARS, maxsize=_TERMS_MEMO_SIZE)
def _text_terms_cached(text: str, options: TermOptions) -> frozenset[str]:
    """:func:`index_terms` of a text (default stopwords, no context) as a set, memoised."""
    return frozenset(index_terms(text, options=options))


@short_text_memo(max_len=_TERMS_MEMO_MAX_CHARS, maxsize=256)
def query_terms_cached(text: str, options: TermOptions = DEFAULT_TERM_OPTIONS) -> tuple[str, ...]:
    """:func:`query_terms` of a message (default stopwords), memoised: a request scores its
    new message against the recall index and against the memory set."""
    return tuple(query_terms(text, options=options))


def term_kind(term: str) -> str:
    """The kind of a term: its namespace prefix (``"~"``, ``"^"``), or ``""`` for a plain word.

    Plain words start with a letter, mark or digit; any other first character is a prefix.
    """
    if not term:
        return ""
    first = term[0]
    if first.isascii():  # the usual case, without the Unicode regex
        return "" if first.isalnum() else first
    return first if _PLAIN_START.match(term) is None else ""


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


Postings = Mapping[str, Sequence[int] | npt.NDArray[Any]]
"""term -> ascending sequence numbers of the lines holding it (may be only the newest ones)."""

Key = TypeVar("Key", bound=Hashable)

#: At most this many postings in all are summed in plain Python (:func:`_rank_small`); more go
#: through numpy (:func:`_rank_arrays`), whose fixed cost (~100 us) a memory set of a few dozen
#: items or a message of rare words does not repay. Measured on this project's 2-core machine:
#: 16 postings 22 vs 116 us, 64: 105 vs 185 us, 128: 173 vs 193 us, 256: 257 vs 208 us (lists;
#: numpy arrays from the store break even near 64). Both give the same result (a property test).
SMALL_RANK_POSTINGS = 96

_Terms = tuple[list[Sequence[int] | npt.NDArray[Any]], list[float]]


def _weights(term_weights: Mapping[str, float] | None) -> dict[str, float]:
    weights = dict(DEFAULT_TERM_WEIGHTS)
    if term_weights is not None:
        weights.update(term_weights)
    return weights


def _flatten(
    segments: Sequence[Sequence[int] | npt.NDArray[Any]],
    segment_weights: Sequence[float],
    exclude_from_seq: int | None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """All postings of the segments as (seq, weight) arrays; repeats within a term count once."""
    lengths = np.fromiter((len(x) for x in segments), dtype=np.int64, count=len(segments))
    every = np.concatenate([np.asarray(x, dtype=np.int64) for x in segments])
    weight_of = np.repeat(np.asarray(segment_weights, dtype=np.float64), lengths)
    # The store's postings are strictly ascending; anything else (hand-made input) is
    # de-duplicated per term.
    starts = np.cumsum(lengths) - lengths
    steps = np.diff(every) > 0
    steps[starts[1:] - 1] = True  # a new term may start anywhere
    if not bool(np.all(steps)):
        pairs = np.unique(np.stack([np.repeat(np.arange(len(segments)), lengths), every]), axis=1)
        every = pairs[1]
        weight_of = np.asarray(segment_weights, dtype=np.float64)[pairs[0]]
    if exclude_from_seq is not None:
        keep = every < exclude_from_seq
        every, weight_of = every[keep], weight_of[keep]
    return every, weight_of


def rank(
    query: Sequence[str],
    postings: Postings,
    df: Mapping[str, int],
    n_docs: int,
    *,
    exclude_from_seq: int | None = None,
    k: int = 4,
    term_weights: Mapping[str, float] | None = None,
    main_kinds: frozenset[str] | None = None,
) -> list[tuple[int, float]]:
    """The ``k`` best older messages for a query, best first: the one scorer of the package.

    A candidate's score is ``sum(weight(kind(t)) * idf(n_docs, df[t]))`` over the distinct query
    terms ``t`` whose postings hold it (DESIGN.md section 6, with a weight per term kind). Terms
    of a kind in ``BOOST_KINDS`` (dates) add only to candidates that another term matched; with
    ``main_kinds`` (a date-led question: ``{DATE_PREFIX}``) the candidates are the messages that
    terms of those kinds match, and every other term only adds to them.
    Recall of conversation lines (:func:`score`, :func:`rank_collections`) and the choice of
    stored memories (:func:`rank_texts`, used by
    :func:`litellm_memory_hook.core.selection.select_items`) all go through here.

    Args:
        query: the query's terms (:func:`query_terms`, plus date terms); repeats count once.
        postings: term -> sequence numbers of the messages holding it (ascending; may be only
            the newest postings of a term). Terms missing here match nothing.
        df: term -> exact document frequency; a term missing here uses ``len(postings[t])``.
        n_docs: N, the number of indexed messages.
        exclude_from_seq: messages with ``seq >= exclude_from_seq`` (the recent window, and
            anything newer) are never returned; ``None`` excludes nothing.
        k: how many to return at most; ``k <= 0`` gives ``[]``.
        term_weights: weight per term kind (the prefix of :func:`term_kind`, ``""`` for plain
            words); kinds missing from it use ``DEFAULT_TERM_WEIGHTS``, then 1.0.
        main_kinds: the kinds whose terms choose the candidates, all others only adding to
            them; ``None``: every kind but ``BOOST_KINDS``.

    Returns:
        Up to ``k`` pairs ``(seq, score)``, highest score first, ties to the newer message.
        Messages scoring 0 are never returned.
    """
    if k <= 0 or n_docs <= 0:
        return []
    weights = _weights(term_weights)
    main: _Terms = ([], [])
    boost: _Terms = ([], [])
    for term in sorted(set(query)):
        seqs = postings.get(term)
        if seqs is None or len(seqs) == 0:
            continue
        kind = term_kind(term)
        weight = weights.get(kind, 1.0) * idf(n_docs, df.get(term, len(seqs)))
        if weight > 0.0:
            lifts = kind in BOOST_KINDS if main_kinds is None else kind not in main_kinds
            target = boost if lifts else main
            target[0].append(seqs)
            target[1].append(weight)
    if not main[0]:
        return []
    if sum(map(len, main[0])) + sum(map(len, boost[0])) <= SMALL_RANK_POSTINGS:
        return _rank_small(main, boost, exclude_from_seq, k)
    return _rank_arrays(main, boost, exclude_from_seq, k)


def _rank_small(
    main: _Terms, boost: _Terms, exclude_from_seq: int | None, k: int
) -> list[tuple[int, float]]:
    """:func:`rank`'s sums and choice in plain Python: per message, the term weights in the
    terms' order (the order numpy adds them in), repeats within a term counted once."""

    def sums(terms: _Terms) -> dict[int, float]:
        out: dict[int, float] = {}
        for seqs, weight in zip(*terms, strict=True):
            for seq in dict.fromkeys(map(int, seqs)):
                if exclude_from_seq is None or seq < exclude_from_seq:
                    out[seq] = out.get(seq, 0.0) + weight
        return out

    totals = sums(main)
    if boost[0]:
        for seq, lift in sums(boost).items():
            if seq in totals:
                totals[seq] += lift
    return heapq.nlargest(k, totals.items(), key=lambda i: (i[1], i[0]))


def _rank_arrays(
    main: _Terms, boost: _Terms, exclude_from_seq: int | None, k: int
) -> list[tuple[int, float]]:
    """:func:`rank`'s sums and choice with numpy (any number of postings)."""
    every, weight_of = _flatten(main[0], main[1], exclude_from_seq)
    if every.size == 0:
        return []
    # Sum per message with one bincount over all postings (vectorised: the cost is linear in
    # the postings read, which the store caps per term), then keep the k best.
    base, top = int(every.min()), int(every.max())
    totals = np.bincount(every - base, weights=weight_of)
    if boost[0]:
        extra, extra_weight = _flatten(boost[0], boost[1], exclude_from_seq)
        inside = (extra >= base) & (extra <= top)
        lift = np.bincount(
            extra[inside] - base, weights=extra_weight[inside], minlength=totals.size
        )
        totals = totals + np.where(totals > 0.0, lift, 0.0)
    candidates = np.flatnonzero(totals > 0.0)
    if candidates.size > k:
        # The k best in numpy: those above the k-th score, then the newest of those tied with
        # it (candidates are in ascending seq order). A Python loop over every line tied at the
        # k-th score would cost ~1 ms when many lines share only a common word.
        values = totals[candidates]
        kth = np.partition(values, candidates.size - k)[candidates.size - k]
        above = candidates[values > kth]
        tied = candidates[values == kth]
        candidates = np.concatenate([above, tied[tied.size - (k - above.size) :]])
    return heapq.nlargest(
        k, ((int(c) + base, float(totals[c])) for c in candidates), key=lambda i: (i[1], i[0])
    )


def score(
    query: Sequence[str],
    postings: Postings,
    df: Mapping[str, int],
    n_docs: int,
    *,
    exclude_from_seq: int | None = None,
    k: int = 4,
    term_weights: Mapping[str, float] | None = None,
) -> list[tuple[int, float]]:
    """The top ``k`` older messages for a query, in time order (:func:`rank`, re-sorted).

    Returns:
        Up to ``k`` pairs ``(seq, score)`` in ascending ``seq`` (time order): the best scores,
        ties going to the newer message. Messages scoring 0 are never returned.
    """
    return sorted(
        rank(
            query,
            postings,
            df,
            n_docs,
            exclude_from_seq=exclude_from_seq,
            k=k,
            term_weights=term_weights,
        )
    )


@dataclass(frozen=True)
class Collection:
    """The index entries of one conversation read for a query (see :func:`rank_collections`).

    Attributes:
        postings: term -> ascending seqs (the query's terms only, date terms included).
        df: term -> document frequency.
        n_docs: indexed messages of the conversation.
        exclude_from_seq: seqs from here on are never recalled (the recent window).
    """

    postings: Postings
    df: Mapping[str, int]
    n_docs: int
    exclude_from_seq: int | None = None


def rank_collections(
    query: Sequence[str],
    collections: Sequence[Collection],
    *,
    k: int,
    term_weights: Mapping[str, float] | None = None,
    main_kinds: frozenset[str] | None = None,
) -> list[tuple[tuple[int, int], float]]:
    """Rank the lines of several conversations (a user's chats) as one collection, best first.

    N is the sum of the conversations' N and a term's df the sum of its dfs, so a word common in
    one chat and rare in the others weighs what it weighs in the union; each conversation keeps
    its own window excluded. One conversation gives exactly :func:`rank`'s result.
    ``main_kinds``: as in :func:`rank`.

    Returns:
        Up to ``k`` pairs ``((collection index, seq), score)``, highest score first, ties to the
        later collection, then the newer line.
    """
    if len(collections) == 1:  # the usual request: no copies
        only = collections[0]
        found = rank(
            query,
            only.postings,
            only.df,
            only.n_docs,
            exclude_from_seq=only.exclude_from_seq,
            k=k,
            term_weights=term_weights,
            main_kinds=main_kinds,
        )
        return [((0, seq), value) for seq, value in found]
    merged: dict[str, list[npt.NDArray[np.int64]]] = {}
    df: dict[str, int] = {}
    offsets: list[int] = []
    offset = 0
    for collection in collections:
        offsets.append(offset)
        top = 0
        for term, seqs in collection.postings.items():
            if len(seqs) == 0:
                continue
            array = np.asarray(seqs, dtype=np.int64)
            top = max(top, int(array.max()))
            if collection.exclude_from_seq is not None:
                array = array[array < collection.exclude_from_seq]
            merged.setdefault(term, []).append(array + offset)
            df[term] = df.get(term, 0) + collection.df.get(term, len(seqs))
        offset += top + 1
    n_docs = sum(c.n_docs for c in collections)
    postings = {term: np.concatenate(parts) for term, parts in merged.items()}
    found = rank(query, postings, df, n_docs, k=k, term_weights=term_weights, main_kinds=main_kinds)
    bounds = np.asarray(offsets, dtype=np.int64)
    out: list[tuple[tuple[int, int], float]] = []
    for ident, value in found:
        index = int(np.searchsorted(bounds, ident, side="right")) - 1
        out.append(((index, ident - offsets[index]), value))
    return out


def term_weight(
    term: str, collections: Sequence[Collection], term_weights: Mapping[str, float] | None = None
) -> float:
    """What one matched term adds to a line's score in :func:`rank_collections` over these
    collections: ``weight(kind) * idf(N, df)``, N and df summed over the collections (a
    collection whose postings of the term are empty adds no df, as there)."""
    df = 0
    for collection in collections:
        seqs = collection.postings.get(term)
        if seqs is not None and len(seqs) > 0:
            df += collection.df.get(term, len(seqs))
    n_docs = sum(c.n_docs for c in collections)
    return _weights(term_weights).get(term_kind(term), 1.0) * idf(n_docs, df)


def dates_lead(
    words: Sequence[str], dates: Sequence[str], collections: Sequence[Collection]
) -> bool:
    """Whether a question's dates lead its recall (date-led recall; module docstring): a date
    names no more lines than any of its words does.

    Precisely: some date term matches an older line (one before its collection's
    ``exclude_from_seq``), and its document frequency (the lines said in its span, summed over
    the collections as :func:`rank_collections` sums it) is at most that of each of ``words``
    that matches an older line: the date is at least as rare as every word the question shares
    with older lines (a higher or equal IDF). Words that match only lines of the recent window
    do not count (the question itself once stored, the reply a regenerate replaces), so a
    question is weighed alike the first time and when it is sent again.

    Args:
        words: the question's plain words besides its dates' own (:func:`tokenize` of
            :func:`litellm_memory_hook.core.dates.without_dates`).
        dates: its date terms (``DATE_PREFIX``).
        collections: what the store read for the question.

    Returns:
        True when some date term leads; False without dates or when no date matches an older
        line.
    """

    def older_df(term: str) -> int | None:
        df, matched = 0, False
        for collection in collections:
            seqs = collection.postings.get(term)
            if seqs is None or len(seqs) == 0:
                continue
            df += collection.df.get(term, len(seqs))
            limit = collection.exclude_from_seq
            matched = matched or limit is None or int(np.min(seqs)) < limit
        return df if matched else None

    date = min((df for df in map(older_df, dates) if df is not None), default=None)
    if date is None:
        return False
    return all(df is None or date <= df for df in map(older_df, words))


def matched_seqs(terms: Sequence[str], postings: Postings, seqs: Iterable[int]) -> frozenset[int]:
    """The seqs among ``seqs`` that the postings of some of ``terms`` hold (postings ascending,
    as the store keeps them): in a date-led recall, the lines the question's words matched.

    Returns:
        Those seqs (a binary search per term: O(terms x len(seqs) x log postings)).
    """
    return frozenset().union(*holders(terms, postings, seqs).values())


def holders(
    terms: Sequence[str], postings: Postings, seqs: Iterable[int]
) -> dict[str, frozenset[int]]:
    """For each of ``terms``, the seqs among ``seqs`` that its postings hold (ascending, as the
    store keeps them): a binary search per term, O(terms x len(seqs) x log postings).

    Returns:
        term -> those seqs (every term of ``terms``, possibly with none).
    """
    wanted = np.array(sorted(set(seqs)), dtype=np.int64)
    out: dict[str, frozenset[int]] = {}
    for term in terms:
        found = postings.get(term)
        if found is None or len(found) == 0 or wanted.size == 0:
            out[term] = frozenset()
            continue
        array = np.asarray(found, dtype=np.int64)
        at = np.minimum(np.searchsorted(array, wanted), array.size - 1)
        out[term] = frozenset(wanted[array[at] == wanted].tolist())
    return out


def date_led_order(
    ranked: Sequence[tuple[Key, float]],
    content: Callable[[Key], int],
    matched: Callable[[Key], bool],
) -> list[tuple[Key, float]]:
    """The lines of a date-led recall in the order they are chosen (module docstring).

    Best score first; among equal scores (the lines of a day that no word matched), the lines
    with more content words first. Lines that no word matched and that carry fewer than
    ``MIN_CONTENT_WORDS`` content words (greetings, one-word replies) are left out, unless no
    other line is left.

    Args:
        ranked: ``(key, score)`` pairs, best first (:func:`rank_collections` with the dates as
            ``main_kinds``).
        content: a line's :func:`content_words`.
        matched: whether some word of the question matched the line (:func:`matched_seqs`).

    Returns:
        The pairs to choose from, in that order (scores still non-increasing).
    """
    ordered = sorted(ranked, key=lambda item: (-item[1], -content(item[0])))
    kept = [i for i in ordered if matched(i[0]) or content(i[0]) >= MIN_CONTENT_WORDS]
    return kept or ordered


def rank_texts(
    texts: Sequence[str], query: str, *, options: TermOptions = DEFAULT_TERM_OPTIONS
) -> list[float]:
    """The score of each text against a query, the texts themselves being the collection.

    For short stored texts (memories): each is indexed with :func:`index_terms` (no context
    keys), the query gets :func:`query_terms`, and :func:`rank` scores them with the same
    weights as recall; the weight of a phonetic key that joined the query and a text only
    through words that do not sound alike (:func:`false_sound_alikes`) is taken off again.

    Returns:
        One score per text (0.0 for a text sharing no term with the query).
    """
    scores = [0.0] * len(texts)
    wanted = set(query_terms_cached(query, options)) if query else set()
    if not wanted or not texts:
        return scores
    postings: dict[str, list[int]] = {}
    for number, text in enumerate(texts):
        for term in wanted.intersection(_text_terms_cached(text, options)):
            postings.setdefault(term, []).append(number)
    check = query_sound_alikes(query, options)
    collection = [Collection(postings, {}, len(texts))]
    for number, value in rank(list(wanted), postings, {}, len(texts), k=len(texts)):
        open_keys = [
            key
            for key, words in check.key_words.items()
            if number in postings.get(key, ())
            and not any(number in postings.get(w, ()) for w in words)
        ]
        for term in check.false_keys(texts[number], open_keys):
            value -= term_weight(term, collection)
        scores[number] = value if value > SCORE_EPSILON else 0.0
    return scores


def same_text(text: str) -> str:
    """What two lines that say the same thing have in common: the text case folded, its runs
    of whitespace one space, stripped ("Got it,  thanks!" and "got it, thanks!")."""
    return " ".join(text.casefold().split())


def distinct_texts(
    ranked: Sequence[tuple[Key, float]], text: Callable[[Key], str]
) -> list[tuple[Key, float]]:
    """The ranked lines without the repeats of a text already ranked (:func:`same_text`), best
    first: a line said many times ("Got it, thanks for telling me.") fills one slot of recall,
    not all of them. The copy kept is the first in ``ranked``: the best score, and among equal
    scores the one ranked first (:func:`rank` puts the newer line first).

    Args:
        ranked: ``(key, score)`` pairs, best first.
        text: a line's text.

    Returns:
        The pairs whose text comes first, in their order.
    """
    seen: set[str] = set()
    out: list[tuple[Key, float]] = []
    for key, value in ranked:
        said = same_text(text(key))
        if said not in seen:
            seen.add(said)
            out.append((key, value))
    return out


def fill_budget(
    ranked: Sequence[tuple[Key, float]],
    size: Callable[[Key], int],
    *,
    chars: int,
    k_max: int,
    min_share: float = 0.0,
) -> list[Key]:
    """Budgeted recall: the best lines that fit in ``chars`` characters, at most ``k_max``.

    Walks ``ranked`` best first; a line scoring below ``min_share`` times the best score ends
    the walk (a query with one strong match does not drag in weak ones); a line that does not
    fit in what is left is skipped and a shorter one after it may still fit.

    Args:
        ranked: ``(key, score)`` pairs, best first (:func:`rank`, :func:`rank_collections`).
        size: the characters a line takes in the prompt.
        chars: the budget; ``<= 0`` gives ``[]``.
        k_max: most lines.
        min_share: in ``[0, 1]``.

    Returns:
        The chosen keys, best first.
    """
    if chars <= 0 or k_max <= 0 or not ranked:
        return []
    floor = min_share * ranked[0][1]
    chosen: list[Key] = []
    used = 0
    for key, value in ranked:
        if len(chosen) >= k_max or value < floor:
            break
        cost = size(key)
        if used + cost <= chars:
            chosen.append(key)
            used += cost
    return chosen


def date_postings(runs: Sequence[tuple[int, int]]) -> npt.NDArray[np.int64]:
    """The postings of a date term: the seqs of the lines in its span, as the store found them
    by time (runs of consecutive seqs, ``(first, end)`` with ``end`` excluded, ascending and
    disjoint: :class:`~litellm_memory_hook.store.redis_store.DateSeqs`; the store already keeps
    at most its postings cap of them).

    Returns:
        The seqs of every run, ascending; empty if none.
    """
    parts = [np.arange(first, end, dtype=np.int64) for first, end in runs if end > first]
    if not parts:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate(parts)
