"""The term scheme of recall: the kinds of terms, their weights and bounds (pure).

A term is a plain word or an extra key whose first character, which no plain word starts with,
names its kind: ``~`` phonetic key, ``^`` context key, ``@`` date term. :class:`TermOptions`
says which keys are made; ``DEFAULT_TERM_WEIGHTS`` multiplies each kind's IDF in the score.
Bounds in terms per message and code points per term keep the store's work per message bounded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import regex

from litellm_memory_hook.core.dates import DATE_PREFIX

MAX_TERMS_PER_MESSAGE = 64
"""Most terms stored for one message, and most terms of a query. Plain words come first, then
phonetic keys, then context keys. On the LoCoMo dev lines: 10 plain words and 22 terms on average,
at most 35 plain words; the bound cuts context keys of 0.8% of lines (-0.002 cover@4 against no
bound). Each term costs the store one posting append, so this bounds the write per message."""

MAX_TERM_CHARS = 40
"""Longest term in code points; longer words are cut to this length (on both the index and the
query side, so a cut word still meets itself). Bounds the key size in the store."""

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
"""Plain words only (the "plain IDF" baseline)."""

#: Memos of terms (:func:`~litellm_memory_hook.core.recall.tokens.tokenize`,
#: :func:`~litellm_memory_hook.core.recall.ranking.rank_texts`,
#: :func:`~litellm_memory_hook.core.recall.terms.query_terms_cached`). Most texts whose terms
#: ``rank_texts`` keeps in memory. A user's memory set is scored
#: against every new message, and its texts change only when an extraction job commits: the
#: terms of each text are computed once, not per request (3.2 ms -> 0.3 ms per request at 50
#: memories). Texts longer than ``TERMS_MEMO_MAX_CHARS`` are not kept, so the memo holds at most
#: about 4,096 x 2,000 characters of text plus their terms (~20 MB).
TERMS_MEMO_SIZE = 4096
TERMS_MEMO_MAX_CHARS = 2000

_PLAIN_START = regex.compile(r"[\p{L}\p{M}\p{N}]")


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
