"""Regenerate ``litellm_memory_hook/core/script_words/english.txt``, the English lexicon of
:mod:`litellm_memory_hook.core.script`.

Needs the ``wordfreq`` package (``pip install wordfreq``; version 3.1.1 made the shipped list). It
is not a dependency of the project: the list is generated once and committed.

Rule: a word of wordfreq's English list ("best" size) that is written in ASCII letters (with at
most one inner apostrophe), has a Zipf frequency of at least :data:`MIN_ZIPF` in English, and is at
least :data:`MARGIN` Zipf units (10 times) more frequent in English than in each language of
:data:`OTHER_LANGUAGES`. So ``sister``, ``birthday``, ``plays``, ``hates`` are in; ``met`` (Dutch
"with"), ``come`` (Italian "how"), ``pan`` (Spanish, Polish), ``party`` and ``weekend`` (borrowed
by many languages), ``drives`` (Norwegian) and ``nice`` (the French city) are out.

Tagalog (``fil``) and Malay (``ms``) are not among the languages compared: their wordfreq lists
come from web text that switches to English so often that they rank ``birthday``, ``wedding``
and ``sister`` nearly as high as English does.

Usage: ``python bench/english_lexicon.py > litellm_memory_hook/core/script_words/english.txt``
"""

from __future__ import annotations

import re
import sys
from importlib.metadata import version

import wordfreq  # type: ignore[import-not-found]

MIN_ZIPF = 3.5
"""Lowest English Zipf frequency (log10 of occurrences per billion words) of a listed word."""

MARGIN = 1.0
"""Zipf units by which English must exceed every other language (1.0: 10 times as frequent)."""

OTHER_LANGUAGES = (
    *("de", "es", "fr", "it", "pt", "nl", "pl", "sv", "nb", "da", "id", "tr", "ro", "fi"),
    *("cs", "ca", "hu", "sk", "sl", "lt", "lv"),
)
"""wordfreq codes of the Latin-script languages the English frequency is compared with."""

_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def english_lexicon() -> list[str]:
    """The words of the rule in the module docstring, most frequent first."""
    out = []
    for word in wordfreq.iter_wordlist("en", "best"):
        zipf = wordfreq.zipf_frequency(word, "en")
        if zipf < MIN_ZIPF:
            break
        if _WORD.fullmatch(word) and all(
            wordfreq.zipf_frequency(word, language) <= zipf - MARGIN for language in OTHER_LANGUAGES
        ):
            out.append(word)
    return out


def main() -> None:
    """Print the list with its header comment."""
    words = english_lexicon()
    header = (
        "# English lexicon of litellm_memory_hook.core.script (ENGLISH_LEXICON), made by\n"
        f"# bench/english_lexicon.py from wordfreq {version('wordfreq')}: Zipf >= {MIN_ZIPF} in"
        f" English and at least\n# {MARGIN} above each of {' '.join(OTHER_LANGUAGES)}.\n"
        f"# {len(words)} words, most frequent first. Derived from the wordfreq data (Robyn Speer"
        " et al.,\n# github.com/rspeer/wordfreq), licensed CC BY-SA 4.0; this list is shared"
        " under the same licence.\n"
    )
    sys.stdout.write(header + "".join(f"{word}\n" for word in words))


if __name__ == "__main__":
    main()
