"""Whether two words that share a phonetic key are one word, or two the key joins (pure).

:func:`sound_alike` judges a pair (forms, typos, romanised-Hindi variants, names);
:func:`false_sound_alikes` and :class:`SoundAlikes` find the keys a line matched a query on only
through words that do not sound alike, so recall takes their weight off the line's score.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from functools import cache, lru_cache
from types import MappingProxyType
from typing import TYPE_CHECKING

import regex
from rapidfuzz.distance import OSA, Indel

from litellm_memory_hook.core.excerpt import excerpt
from litellm_memory_hook.core.memo import short_text_memo
from litellm_memory_hook.core.recall.phonetic import ascii_form, english_stem, phonetic_key
from litellm_memory_hook.core.recall.scheme import (
    DEFAULT_TERM_OPTIONS,
    TERMS_MEMO_MAX_CHARS,
    TermOptions,
    term_kind,
)
from litellm_memory_hook.core.recall.stopwords import default_stopwords
from litellm_memory_hook.core.recall.terms import query_terms_cached
from litellm_memory_hook.core.recall.tokens import MIN_WORD_CHARS, tokenize
from litellm_memory_hook.core.script import (
    ENGLISH_LEXICON,
    ENGLISH_WORDS,
    HINGLISH_WORDS,
    has_hinglish_marker,
)

if TYPE_CHECKING:
    from litellm_memory_hook.core.recall.ranking import Collection

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
    plain = ascii_form(word)
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
    left, right = ascii_form(a), ascii_form(b)
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


@short_text_memo(max_len=TERMS_MEMO_MAX_CHARS, maxsize=256)
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
