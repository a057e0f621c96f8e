"""The word lists of script detection, read once from the packaged data files (pure).

Marker words of English, Hinglish (romanised Hindi) and eleven other Latin-script languages
(``core/script_words/markers-*.txt``) and the English lexicon (``core/script_words/english.txt``,
made by ``bench/english_lexicon.py``): lower case, as frozensets.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from types import MappingProxyType
from typing import Final


def _packaged_words(name: str) -> frozenset[str]:
    """Words of the packaged list ``script_words/{name}``: separated by white space, several a
    line or one; a line that starts with ``#`` is a comment."""
    text = resources.files("litellm_memory_hook.core.script_words").joinpath(name)
    lines = text.read_text(encoding="utf-8").split("\n")
    return frozenset(word for line in lines if not line.startswith("#") for word in line.split())


HINGLISH_WORDS: Final[frozenset[str]] = _packaged_words("markers-hi-latn.txt")
"""Common romanised Hindi function words and very frequent Hinglish words (lower case)."""

HINGLISH_WEAK_WORDS: Final[frozenset[str]] = _packaged_words("markers-hi-latn-weak.txt")

"""The :data:`HINGLISH_WORDS` that also occur in English text: English words, abbreviations and
names (``ho``, ``mat``, ``par``, ``bas``, ``beta``, ``Jo``) and nouns English borrows (``naam``,
``khana``, ``shaadi``, ``paisa``). Against English they weigh 1, every other Hinglish marker
:data:`HINGLISH_WEIGHT`."""

ENGLISH_WORDS: Final[frozenset[str]] = _packaged_words("markers-en.txt")
"""Common English function words, greetings and very frequent chat words (lower case)."""

_OTHER_LATIN_FILES: Final[tuple[tuple[str, str], ...]] = (
    ("German", "markers-de.txt"),
    ("Spanish", "markers-es.txt"),
    ("French", "markers-fr.txt"),
    ("Portuguese", "markers-pt.txt"),
    ("Italian", "markers-it.txt"),
    ("Dutch", "markers-nl.txt"),
    ("Indonesian", "markers-id.txt"),
    ("Turkish", "markers-tr.txt"),
    ("Tagalog", "markers-tl.txt"),
    ("Polish", "markers-pl.txt"),
    ("Scandinavian", "markers-sv-nb-da.txt"),
)

OTHER_LATIN_WORDS: Final[Mapping[str, frozenset[str]]] = MappingProxyType(
    {language: _packaged_words(name) for language, name in _OTHER_LATIN_FILES}
)

"""Common function words of other languages written in Latin letters, by language (lower case).

Evidence against English and Hinglish: many short Hinglish marker words are also common words
of these languages (``mein`` German, ``se`` Spanish, ``hai`` Italian, ``na`` Tagalog/Polish),
and many English ones too (``was``, ``is``, ``in``, ``die``)."""

ENGLISH_LEXICON: Final[frozenset[str]] = _packaged_words("english.txt").difference(
    ENGLISH_WORDS, HINGLISH_WORDS, *OTHER_LATIN_WORDS.values()
)
"""English words at least ten times as frequent in English as in each of 21 other Latin-script
languages (wordfreq lists; Zipf frequency 3.5 or more, among the 15,000 most frequent English
words), less every marker word: ``sister``, ``plays``, ``birthday``, ``yellow``.

Read from the packaged ``script_words/english.txt``, which ``bench/english_lexicon.py`` makes
(the rule in full there)."""
