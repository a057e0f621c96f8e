"""Every text path of a request is linear in its input and bounded (issue 27 item 1).

A 300 KB pasted log kept the pre-call hook busy 11.5 s on the event loop, and every other user
waited: the search for a sentence end scanned the whole prefix before every capitalised word.
These tests hold (1) that the linear replacements give exactly what the old code gave
(hypothesis against the old implementations, kept in ``tests/support/unit_text_oracles.py``), (2)
that analyses read a bounded excerpt of a long text, and (3) generous time bounds on 1 MB inputs
of the kinds that were quadratic, so that a return of the fault fails loudly.
"""

from __future__ import annotations

import time
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from litellm_memory_hook.core import recall
from litellm_memory_hook.core.alignment import align
from litellm_memory_hook.core.excerpt import ANALYSED_CHARS, excerpt
from litellm_memory_hook.core.indexing import indexed_chain, indexed_slices
from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.core.script import detect_script
from litellm_memory_hook.core.script.latin import _names_inside_sentences
from tests.support import unit_text_oracles as old

_PIECES = st.sampled_from(
    [*"Aa Bb. Cc\n\t !?:;«(“‘ é É\u2029\x1c\x85\u3000\u00a0'", "Ana", "Bob", "NASA", "I'm", "x"]
)
_TEXTS = st.lists(_PIECES, max_size=40).map("".join)


@settings(max_examples=3000, deadline=None)
@given(_TEXTS)
def test_names_inside_sentences_as_before(text: str) -> None:
    """The gap-by-gap sentence-end check finds the names the prefix search found, white space
    as ``regex`` reads it (U+001C is white space to Python, not to ``\\s``)."""
    assert _names_inside_sentences(text) == old.names_inside_sentences(text)


@settings(max_examples=3000, deadline=None)
@given(_TEXTS)
def test_inner_names_as_before(text: str) -> None:
    """The look-back over spaces and tabs finds the names the prefix copy found."""
    assert recall.inner_names(text) == old.inner_names(text)


def test_excerpt_keeps_start_and_end_whole_words() -> None:
    """A long text gives its start and end, cut between words, within the limit; a short one
    is itself; excerpting twice changes nothing."""
    words = " ".join(f"w{i}" for i in range(5000))
    cut = excerpt(words)
    assert len(cut) <= ANALYSED_CHARS
    head, tail = cut.split("\n")
    assert words.startswith(head) and words.endswith(tail)
    assert head.split()[-1] in words.split() and tail.split()[0] in words.split()
    assert excerpt(cut) == cut
    assert excerpt("short text") == "short text"
    assert excerpt("x" * 10_000) == "x" * 1999 + "\n" + "x" * 1999


def test_long_text_terms_are_its_excerpt_terms() -> None:
    """Recall reads a long message's start and end: a question before a pasted log and one
    after it are both found; the middle of the log is not indexed."""
    log = "2026-12-03 ERROR worker timeout\n" * 10_000 + "middling\n" + "ERROR again\n" * 10_000
    text = "Why does zephyrine crash? " + log + " Also what about quasimodo?"
    terms = recall.query_terms(text)
    assert "zephyrine" in terms and "quasimodo" in terms
    assert "middling" not in terms and "middling" in recall.query_terms("middling")
    assert terms == recall.query_terms(excerpt(text))
    assert recall.index_terms(text) == recall.index_terms(excerpt(text))


def test_script_of_long_text_is_read_from_its_excerpt() -> None:
    """A Russian question around a long English log is Cyrillic, as its excerpt is."""
    log = "Traceback: ValueError in module Foo at line 12. " * 20_000
    text = "Почему падает мой сервер? " + "Вот лог ошибки целиком. " * 40 + log
    text += " Что мне делать с этой ошибкой, подскажи пожалуйста?" * 3
    assert detect_script(text) == detect_script(excerpt(text))
    assert detect_script(text).script == "Cyrillic"


def _turns(draws: list[tuple[str, str]]) -> list[Turn]:
    return [Turn(role=r, text=t, ts_ms=0, seq=i + 1) for i, (r, t) in enumerate(draws)]


_MESSAGES = st.lists(
    st.tuples(st.sampled_from(["user", "assistant"]), st.sampled_from(["a", "b", "c", " a "])),
    max_size=9,
)


@settings(max_examples=3000, deadline=None)
@given(_MESSAGES, _MESSAGES)
def test_align_as_before(client: list[tuple[str, str]], stored: list[tuple[str, str]]) -> None:
    """Keyed alignment picks the offset the message-by-message comparison picked, repeated
    messages and white space included."""
    messages: list[dict[str, Any]] = [{"role": r, "content": t} for r, t in client]
    turns = _turns(stored)
    assert align(messages, turns, 8000) == old.align(messages, turns, 8000)


def test_align_with_tool_calls_as_before() -> None:
    """Tool call ids and tool results' call ids take part in the key as in the old compare."""
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
        {"role": "assistant", "content": "done"},
    ]
    stored = [
        Turn(role="user", text="hi", ts_ms=0, seq=1),
        Turn(role="assistant", text="", ts_ms=0, seq=2, tool_calls=(call,)),
        Turn(role="tool", text="42", ts_ms=0, seq=3, tool_call_id="c1"),
        Turn(role="tool", text="42", ts_ms=0, seq=4, tool_call_id="c2"),
    ]
    assert align(messages, stored, 8000) == old.align(messages, stored, 8000)
    assert align(messages, stored, 8000) is not None


def test_indexed_slices_join_to_the_chain() -> None:
    """Slicing the indexing for the event loop changes nothing that is stored."""
    turns = [
        Turn(role="user" if i % 2 else "assistant", text=f"line {i} about Paris " * 50, ts_ms=0)
        for i in range(60)
    ]
    ticks = iter(range(10_000))
    parts = list(indexed_slices(turns, "Where to?", slice_s=3, clock=lambda: next(ticks)))
    assert [len(part) for part in parts] == [3] * 20  # 3 ticks: a clock read after each turn
    assert [item for part in parts for item in part] == indexed_chain(turns, "Where to?")


_ONE_MB = 1_000_000


def _kinds() -> dict[str, str]:
    def fill(piece: str) -> str:
        return (piece * (_ONE_MB // len(piece) + 1))[:_ONE_MB]

    return {
        "english names": fill("We met Alice and Bob in Paris, then Carol Came Along With Dave "),
        "capitalised": fill("ABC. Def Ghi Jkl "),
        "log": fill("2026-12-03T10:00:01Z ERROR TypeError: Cannot read 'Foo' of undefined\n"),
        "hinglish": fill("mera naam Seema hai aur Mujhe Kitabein padhna pasand hai. "),
        "devanagari": fill("मेरा नाम सीमा है। मुझे किताबें पढ़ना पसंद है। "),
        "chinese": fill("我的猫叫米索，它喜欢吃鱼。我们昨天去了北京的公园散步。"),
        "spaces": " " * (_ONE_MB - 4) + "Ana.",
    }


def test_one_megabyte_texts_are_analysed_fast() -> None:
    """Script, query terms, sound-alike keys and inner names of 1 MB texts: each well under a
    generous bound (the quadratic code took seconds at 100 KB and minutes at 1 MB)."""
    for kind, text in _kinds().items():
        started = time.perf_counter()
        detect_script(text)
        recall.query_terms(text)
        recall.query_sound_alikes(text)
        recall.index_terms(text)
        elapsed = time.perf_counter() - started
        assert elapsed < 0.5, (kind, elapsed)
        started = time.perf_counter()
        recall.inner_names(text)
        _names_inside_sentences(text)
        assert time.perf_counter() - started < 5.0, kind  # linear scans of the whole text
