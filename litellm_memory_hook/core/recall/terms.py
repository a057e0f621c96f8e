"""The terms of a message: what the recall index stores and what a query looks up (pure).

Plain words (:mod:`~litellm_memory_hook.core.recall.tokens`), then their ``~`` phonetic keys
(:mod:`~litellm_memory_hook.core.recall.phonetic`), then ``^`` context keys (the plain words of
the question a message answers): sorted, distinct, at most ``MAX_TERMS_PER_MESSAGE`` terms.
"""

from __future__ import annotations

from collections.abc import Sequence

from litellm_memory_hook.core.memo import short_text_memo
from litellm_memory_hook.core.recall.phonetic import phonetic_key
from litellm_memory_hook.core.recall.questions import is_question
from litellm_memory_hook.core.recall.scheme import (
    CONTEXT_PREFIX,
    DEFAULT_TERM_OPTIONS,
    MAX_TERM_CHARS,
    MAX_TERMS_PER_MESSAGE,
    TERMS_MEMO_MAX_CHARS,
    TERMS_MEMO_SIZE,
    TermOptions,
)
from litellm_memory_hook.core.recall.tokens import tokenize


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


@short_text_memo(max_len=TERMS_MEMO_MAX_CHARS, maxsize=TERMS_MEMO_SIZE)
def text_terms_cached(text: str, options: TermOptions) -> frozenset[str]:
    """:func:`index_terms` of a text (default stopwords, no context) as a set, memoised."""
    return frozenset(index_terms(text, options=options))


@short_text_memo(max_len=TERMS_MEMO_MAX_CHARS, maxsize=256)
def query_terms_cached(text: str, options: TermOptions = DEFAULT_TERM_OPTIONS) -> tuple[str, ...]:
    """:func:`query_terms` of a message (default stopwords), memoised: a request scores its
    new message against the recall index and against the memory set."""
    return tuple(query_terms(text, options=options))
