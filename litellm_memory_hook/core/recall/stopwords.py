"""The stopwords of recall and the folding every term goes through (pure).

The packaged lists (``litellm_memory_hook/core/stopwords/<name>.txt``: English with the
request verbs, romanised Hindi, Hindi, Thai, Lao, Khmer, Myanmar, Chinese, Japanese), loaded
once, plus a deployment's own files; words NFKC + casefolded by :func:`fold`, as terms are.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from functools import cache
from importlib import resources
from pathlib import Path

import regex

# Format characters that hide inside words: soft hyphen, ZWNJ, ZWJ, word joiner, BOM.
_IGNORABLE = regex.compile(r"[\u00ad\u200b-\u200d\u2060\ufeff]")

PACKAGED_STOPWORD_LISTS = ("en", "hi-latn", "hi", "th", "lo", "km", "my", "zh", "ja")
"""The stopword lists shipped in ``litellm_memory_hook/core/stopwords/`` (``<name>.txt``)."""


def fold(text: str) -> str:
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
            words.add(fold(line))
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
