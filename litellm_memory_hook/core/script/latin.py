"""The language of a message in Latin letters: English, Hinglish, or unknown (pure).

Marker words of English, Hinglish and eleven other languages (:mod:`.words`) are counted in
one packed tally per word; names inside a sentence count apart. :func:`latin_language` gives
:data:`ENGLISH`, :data:`HINGLISH` or ``None``; :func:`has_hinglish_marker` serves recall.

Rules of :func:`latin_language`:

The language is told from Latin words (lower-cased runs of Latin letters, with inner
apostrophes; a right single quotation mark counts as ``'``) by marker words:
:data:`ENGLISH_WORDS`, :data:`HINGLISH_WORDS` and, for each other language in
:data:`OTHER_LATIN_WORDS` (German, Spanish, French, Portuguese, Italian, Dutch, Indonesian,
Turkish, Tagalog, Polish, Scandinavian), that language's common function words. A word listed by
several languages (``mein`` German and Hinglish, ``was`` English and German, ``se`` Spanish and
Hinglish) counts for each of them. An unlisted word with an apostrophe counts by its elided head
and its rest (French ``c'est`` as ``c'`` and ``est``). A word capitalised inside a sentence (an
upper-case letter, at least one more letter before any apostrophe, the rest lower case; not the
first word, nor a word after ``.``, ``!``, ``?``, ``:``, ``;``, a line break, an ellipsis or an
opening bracket or quote) is taken for a name: ``Ana``, ``Luigi's``, ``Abhi`` in "the report Abhi
sent", ``Berlin`` in "Tom lives in Berlin now."; not ``I'm`` or ``NASA``. A name is not one of the
``n`` words and counts for no Hinglish or lexicon count below, but still for English (``May`` in
"Is Paris nice in May?") and the other languages that list it (German capitalises its nouns and
the formal ``Sie``). Counts, over the message's ``n`` words other than names: ``e`` English and
``h`` Hinglish marker words; ``b`` words that English or Hinglish (or both) lists; ``l`` words of
:data:`ENGLISH_LEXICON`, English words at least ten times as frequent in English as in any of 21
other Latin-script languages (``sister``, ``plays``, ``birthday``; not ``met``, ``come``,
``party``, ``nice``; rule in ``bench/english_lexicon.py``), none of them a marker word; ``a``
accented words (a letter outside ASCII: ``müde``, ``está``, ``çok``; capitalised words after the
first word are not counted, whether or not a sentence ends before them: names such as ``Jürgen``,
``São Paulo``); a Hinglish marker capitalised inside a sentence is a name ("call Kal tomorrow")
and so counts only for the other languages that list it; ``o`` the larger of ``a`` and the best
other language's count; ``r`` the same but without the other languages' words that English lists
and Hinglish does not (``i`` Italian, ``for`` Scandinavian, ``on`` Polish: in a code-switched line
they are its English half). The Hinglish weight ``w`` is ``h`` plus ``HINGLISH_WEIGHT - 1`` (2)
for each Hinglish marker not in :data:`HINGLISH_WEAK_WORDS`: a Hindi pronoun, verb, postposition,
particle or form of address (``hai``, ``kya``, ``mera``, ``tu``, ``yaar``, ``bhai``) is all but
absent from English text, while code-switched Hinglish is full of English words, so it takes more
than three English markers to outweigh one; the weak ones (English words and names such as ``ho``,
``mat``, ``beta``, ``Jo``, the honorific ``ji``, and nouns English borrows such as ``khana``,
``shaadi``) weigh 1, and alone never make Hinglish ("Join the beta", "Me and Jo" are not). With
``h_s`` the strong ones: Hinglish when ``h_s >= 1``, ``w >= e``, ``b >= MARKER_SHARE * n`` and ``h
> r``; otherwise, when ``h_s >= 1``, ``w >= e`` and ``b >= MARKER_SHARE * n``, unknown; otherwise
English when ``e > w`` (or, with no Hinglish marker at all, ``h`` 0, when ``l >= 2``), ``e + l >
o`` and ``e + l >= MARKER_SHARE * n``; otherwise unknown (``language`` ``None``): another
language, a tie, or too few marker words. So "Mera kutta bahut cute hai, what do you think?"
(``w`` 9, ``e`` 4), "Ok bhai, see you tomorrow" (3, 3) and "Sorry yaar, I forgot" are Hinglish; "I
love chai", "namaste everyone" and "Thanks bhai, that was really helpful!" (3, 4) are English. And
English or Hinglish must beat every other language's evidence: "Wie alt ist mein Hund?", "Mi perro
se llama Toby.", "Was ist das?", "Is het goed?", "Ho fame", "Tu sei pazzo" and "Se me hizo tarde."
are unknown, and their reminder asks for the same language (``CLAUSE_LATIN_OTHER``). Unknown
is the safe outcome: a wrong English or Hinglish label tells the model to switch language. Lexicon
words are English evidence against the other languages and towards the share, but not against
Hinglish (code-switched Hinglish is full of English nouns and verbs), and a lone one does not make
English, since English words are borrowed everywhere (Indonesian "Meeting jam sembilan"). So "My
sister Ana plays cello." (``e`` 1 ``my``, ``l`` 2; Polish 1 ``my``), "Tom lives in Berlin now."
and "Nadia painted her kitchen yellow." (``e`` 1, ``l`` 3; Turkish 1 ``her``) are English; "Ana
and Marco met in Lisbon." (``e`` 2 ``and`` ``in``, Dutch 2 ``met`` ``in``) and "Carlos hates
cilantro." (``l`` 1) are unknown. Words common to English and Hinglish (``to``, ``main``, ``tab``,
``ok``) are in neither list; ``me`` is in both. Accuracy on ``tests/data/latin_languages.jsonl``
(short chat messages in 15 languages, code-switched Hinglish, English with Hindi loanwords) and on
``tests/data/latin_names.jsonl`` (short English lines with names, places, brands and numbers;
lines of 12 other languages and Hinglish with names) is checked by ``tests/unit/test_script.py``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

import regex

from litellm_memory_hook.core.script.words import (
    ENGLISH_LEXICON,
    ENGLISH_WORDS,
    HINGLISH_WEAK_WORDS,
    HINGLISH_WORDS,
    OTHER_LATIN_WORDS,
)

ENGLISH: Final = "English"
"""Value of :attr:`ScriptGuess.language` for English in Latin letters."""

HINGLISH: Final = "Hinglish (romanised Hindi)"
"""Value of :attr:`ScriptGuess.language` for romanised Hindi (Hinglish) in Latin letters."""

MARKER_SHARE: Final = 0.2
"""Share of the Latin words that must be marker words of English or Hinglish (0-1)."""

HINGLISH_WEIGHT: Final = 3
"""Weight against English of a Hinglish marker word not in :data:`HINGLISH_WEAK_WORDS`.

Hindi pronouns, verbs, postpositions, particles and forms of address (``hai``, ``kya``, ``mera``,
``yaar``, ``bhai``) almost never occur in English text, while code-switched Hinglish is full of
English words ("Mera kutta bahut cute hai, what do you think?": 3 Hinglish, 4 English markers):
English must outnumber such a marker more than three to one to win."""

LATIN_WORD: Final = regex.compile(
    r"[\p{L}&&\p{Script=Latin}]+(?:['\u2019][\p{L}&&\p{Script=Latin}]+)*", regex.V1
)

_HINGLISH_STRONG: Final[frozenset[str]] = HINGLISH_WORDS - HINGLISH_WEAK_WORDS
_ASCII_RUN: Final = re.compile("[a-z]+")  # the markers are ASCII: the stdlib's engine is faster


def has_hinglish_marker(text: str) -> bool:
    """Whether a text holds a Hinglish marker that English text almost never holds: a word of
    :data:`HINGLISH_WORDS` not in :data:`HINGLISH_WEAK_WORDS` (``hai``, ``kya``, ``mera``,
    ``yaar``), any case. Recall uses it to let romanised-Hindi spelling variants meet
    (:func:`litellm_memory_hook.core.recall.sound_alike`).

    Returns:
        True for "Mera kutta bahut cute hai"; False for "Join the beta" and for text without
        Latin letters.
    """
    return not _HINGLISH_STRONG.isdisjoint(_ASCII_RUN.findall(text.casefold()))


_MARKER_WORDS: Final[Mapping[str, frozenset[str]]] = MappingProxyType(
    {ENGLISH: ENGLISH_WORDS, HINGLISH: HINGLISH_WORDS, **OTHER_LATIN_WORDS}
)
_MARKER_LANGUAGES: Final[tuple[str, ...]] = tuple(_MARKER_WORDS)
_ENGLISH_INDEX: Final = _MARKER_LANGUAGES.index(ENGLISH)
_HINGLISH_INDEX: Final = _MARKER_LANGUAGES.index(HINGLISH)
_FIELD_BITS: Final = 32
"""Width of one language's counter in a packed tally (no message has 2**32 words)."""
_FIELD_MASK: Final = (1 << _FIELD_BITS) - 1


_STRONG_INDEX: Final = len(_MARKER_LANGUAGES)
"""Index of one more counter after the languages': the Hinglish words not in
:data:`HINGLISH_WEAK_WORDS`."""
_EITHER_INDEX: Final = _STRONG_INDEX + 1
"""Index of the counter of words that English or Hinglish (or both) lists."""
_OTHER_INDICES: Final[tuple[int, ...]] = tuple(
    index
    for index in range(len(_MARKER_LANGUAGES))
    if index not in (_ENGLISH_INDEX, _HINGLISH_INDEX)
)
_RIVAL_INDICES: Final[tuple[int, ...]] = tuple(
    _EITHER_INDEX + 1 + position for position in range(len(_OTHER_INDICES))
)
"""Indices of the counters, one per other language, of its words other than those English lists
and Hinglish does not."""


_LEXICON_INDEX: Final = _RIVAL_INDICES[-1] + 1
"""Index of the counter of :data:`ENGLISH_LEXICON` words."""


def _packed_word_tallies() -> dict[str, int]:
    """Each marker word's tally: 1 in the counter field of every language listing it; 1 in the
    field :data:`_STRONG_INDEX` for a Hinglish word not in :data:`HINGLISH_WEAK_WORDS`; 1 in the
    field :data:`_EITHER_INDEX` for a word English or Hinglish lists; and, unless English lists
    it and Hinglish does not, 1 in the :data:`_RIVAL_INDICES` field of every other language
    listing it. Each :data:`ENGLISH_LEXICON` word (no marker word): 1 in the field
    :data:`_LEXICON_INDEX`.

    A message's counts are then the plain sum of its words' tallies, one counter of
    :data:`_FIELD_BITS` bits per field.
    """
    table: dict[str, int] = {}
    for index, language in enumerate(_MARKER_LANGUAGES):
        for word in _MARKER_WORDS[language]:
            table[word] = table.get(word, 0) + (1 << (_FIELD_BITS * index))
    for word in HINGLISH_WORDS - HINGLISH_WEAK_WORDS:
        table[word] += 1 << (_FIELD_BITS * _STRONG_INDEX)
    for word in ENGLISH_WORDS | HINGLISH_WORDS:
        table[word] += 1 << (_FIELD_BITS * _EITHER_INDEX)
    for index, rival in zip(_OTHER_INDICES, _RIVAL_INDICES, strict=True):
        for word in _MARKER_WORDS[_MARKER_LANGUAGES[index]] - (ENGLISH_WORDS - HINGLISH_WORDS):
            table[word] += 1 << (_FIELD_BITS * rival)
    for word in ENGLISH_LEXICON:
        table[word] = 1 << (_FIELD_BITS * _LEXICON_INDEX)
    return table


_WORD_TALLIES: Final[dict[str, int]] = _packed_word_tallies()


_NAME_MASK: Final = sum(
    _FIELD_MASK << (_FIELD_BITS * index)
    for index in (_ENGLISH_INDEX, *_OTHER_INDICES, *_RIVAL_INDICES)
)
"""The fields of a tally that a name keeps: the English and the other languages' counters, not the
Hinglish, lexicon or :data:`_EITHER_INDEX` ones."""


def _name_tally(tally: int) -> int:
    """The packed tally of a word taken for a name (rules in the module docstring), from its
    tally as a word: what it counts for English (``May``, ``Will``) and the other languages."""
    kept = tally & _NAME_MASK
    if (kept >> (_FIELD_BITS * _ENGLISH_INDEX)) & _FIELD_MASK:
        kept += 1 << (_FIELD_BITS * _EITHER_INDEX)
    return kept


#: what may end a sentence before a word (a capitalised word after it is not taken for a name),
#: besides any opening bracket or quote (general categories ``Ps`` and ``Pi``)
_SENTENCE_END_CHARS: Final = frozenset(".!?:;\n\u2026\u3002\uff01\uff1f")

#: the characters ``regex`` takes for white space (``\s``; every one is below U+3001)
_SPACE: Final = "".join(c for c in map(chr, range(0x3001)) if regex.match(r"\s", c))


def _ends_sentence(gap: str) -> bool:
    """Whether ``gap``, the text between two words, ends a sentence: its last character that is
    not white space is in :data:`_SENTENCE_END_CHARS` or opens a bracket or quote, or a line
    break follows it. Linear in ``len(gap)``."""
    body = gap.rstrip(_SPACE)
    if "\n" in gap[len(body) :]:
        return True
    if not body:
        return False
    last = body[-1]
    return last in _SENTENCE_END_CHARS or unicodedata.category(last) in ("Ps", "Pi")


def _names_inside_sentences(text: str) -> set[int]:
    """Positions (in :data:`LATIN_WORD` order) of the words taken for names: capitalised
    words (an upper-case letter, at least one more letter before any apostrophe, the rest lower
    case: ``Ana``, ``Luigi's``, not ``I'm`` or ``NASA``) that do not start the text or a
    sentence. Linear in ``len(text)``: each word looks only at the gap since the word before
    it."""
    out = set()
    previous_end = 0
    for position, match in enumerate(LATIN_WORD.finditer(text)):
        word = match.group()
        if (
            position
            and len(word.partition("'")[0]) > 1
            and word[0].isupper()
            and word[1:].islower()
            and not _ends_sentence(text[previous_end : match.start()])
        ):
            out.add(position)
        previous_end = match.end()
    return out


def _word_tally(word: str) -> int:
    """Packed tally of a lower-cased word; for an unlisted word with an apostrophe (French
    ``c'est``, Italian ``sull'autunno``) that of its elided head (``c'``) plus its rest
    (``est``)."""
    tally = _WORD_TALLIES.get(word, 0)
    if tally or "'" not in word:
        return tally
    head, _, rest = word.partition("'")
    return _WORD_TALLIES.get(head + "'", 0) + _WORD_TALLIES.get(rest, 0)


_OTHER_SHIFTS: Final[tuple[int, ...]] = tuple(_FIELD_BITS * index for index in _OTHER_INDICES)
_RIVAL_SHIFTS: Final[tuple[int, ...]] = tuple(_FIELD_BITS * index for index in _RIVAL_INDICES)


def _accented_words(words: list[str]) -> int:
    """Words with a letter outside ASCII (``müde``, ``está``, ``çok``), except capitalised ones
    after the first word (names such as ``Jürgen``, ``São Paulo``)."""
    return sum(
        not word.isascii() and (position == 0 or not word[0].isupper())
        for position, word in enumerate(words)
    )


def latin_language(text: str) -> str | None:
    """:data:`ENGLISH`, :data:`HINGLISH` or ``None`` for Latin text (rules in the module
    docstring)."""
    text = text.replace("\u2019", "'")
    accented = 0
    words: list[str]
    if text.isascii():
        words = LATIN_WORD.findall(text.lower())
    else:
        # Lower-cased word by word: lower-casing the text first splits a word at a letter
        # whose lower case gains a combining mark (Turkish "İ" becomes "i" + U+0307).
        as_written: list[str] = LATIN_WORD.findall(text)
        words = [word.lower() for word in as_written]
        accented = _accented_words(as_written)
    if not words:
        return None
    total = sum(map(_word_tally, words))
    names = _names_inside_sentences(text) if any(c.isupper() for c in text[1:]) else set()
    for position in names:
        tally = _word_tally(words[position])
        total += _name_tally(tally) - tally
    lexicon = (total >> (_FIELD_BITS * _LEXICON_INDEX)) & _FIELD_MASK
    english = (total >> (_FIELD_BITS * _ENGLISH_INDEX)) & _FIELD_MASK
    hindi = (total >> (_FIELD_BITS * _HINGLISH_INDEX)) & _FIELD_MASK
    strong = (total >> (_FIELD_BITS * _STRONG_INDEX)) & _FIELD_MASK
    hindi_weight = hindi + (HINGLISH_WEIGHT - 1) * strong
    needed = MARKER_SHARE * (len(words) - len(names))
    either = (total >> (_FIELD_BITS * _EITHER_INDEX)) & _FIELD_MASK
    if strong >= 1 and hindi_weight >= english and either >= needed:
        # Another language's words that English also lists (``i``, ``for``, ``on``) are the
        # English half of a code-switched line, not evidence against Hinglish.
        rival = max(accented, *((total >> shift) & _FIELD_MASK for shift in _RIVAL_SHIFTS))
        return HINGLISH if hindi > rival else None
    other = max(accented, *((total >> shift) & _FIELD_MASK for shift in _OTHER_SHIFTS))
    evidence = english + lexicon
    if (
        (english > hindi_weight or (hindi == 0 and lexicon >= 2))
        and evidence > other
        and evidence >= needed
    ):
        return ENGLISH
    return None


def latin_term(word: str) -> bool:
    """Whether a Latin word, as written, is no word of a language :func:`detect_script` knows:
    neither a marker word of English, Hinglish or another Latin-script language
    (:data:`ENGLISH_WORDS`, :data:`HINGLISH_WORDS`, :data:`OTHER_LATIN_WORDS`) nor, in lower
    case, an :data:`ENGLISH_LEXICON` word. Names, product names and identifiers ("Python",
    "Django", "TypeError", "React", "redis") are such terms; "hello", "how", "properties" are
    not."""
    tally = _word_tally(word.lower().replace("\u2019", "'"))
    if tally & ~(_FIELD_MASK << (_FIELD_BITS * _LEXICON_INDEX)):
        return False
    return not (tally and word.islower())
