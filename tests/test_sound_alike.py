"""Phonetic keys join spellings of one word, not different English words with the same
consonants: "parrot" and "party" share ``~prt``, and a question about one recalled a line about
the other (found by a fresh-user run). :func:`recall.sound_alike` now tells them apart, and recall
and the choice of memories take a false key's weight off again; romanised Hindi keeps the loose
match the key was made for."""

from __future__ import annotations

import re
from typing import Any

import pytest
import redis.asyncio as aioredis

from litellm_memory_hook.core import recall
from litellm_memory_hook.core.prompt import EarlierLine
from litellm_memory_hook.core.script import has_hinglish_marker
from litellm_memory_hook.core.selection import select_items
from litellm_memory_hook.proxy import recall_step
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.proxy.identity import Identity
from litellm_memory_hook.proxy.recall_step import RecallOptions, recall_query
from litellm_memory_hook.store.keys import ConversationKeys, user_scope
from litellm_memory_hook.store.redis_store import MemoryStore
from litellm_memory_hook.tools.datasets import HistoryLine
from litellm_memory_hook.tools.importer import import_lines

from .conftest import Auth, chat_request, make_hook, model_response

ALIKE = [
    ("paint", "painting"),  # same English stem
    ("dance", "dancing"),  # stems danc / dance: one letter past a shared beginning
    ("cream", "creamy"),
    ("share", "shared"),
    ("theatre", "theater"),  # a transposition apart
    ("colour", "color"),
    ("recommends", "reccomend"),  # two apart, 8+ letters
    ("definitely", "definately"),  # 8+ letters: a changed vowel is a typo
    ("seema", "सीमा"),  # another script: always
    ("café", "cafe"),
]
NOT_ALIKE = [
    ("parrot", "party"),
    ("team", "time"),
    ("son", "sun"),
    ("share", "sure"),
    ("book", "back"),
    ("many", "money"),
    ("pretty", "party"),
    ("black", "block"),  # one vowel changed in a short word
    ("pride", "parade"),
    ("think", "thanks"),
]


@pytest.mark.parametrize(("a", "b"), ALIKE)
def test_spellings_and_forms_of_one_word_sound_alike(a: str, b: str) -> None:
    assert recall.phonetic_key(a) == recall.phonetic_key(b) is not None
    assert recall.sound_alike(a, b) and recall.sound_alike(b, a)


@pytest.mark.parametrize(("a", "b"), NOT_ALIKE)
def test_different_english_words_with_one_key_do_not(a: str, b: str) -> None:
    assert recall.phonetic_key(a) == recall.phonetic_key(b) is not None
    assert not recall.sound_alike(a, b) and not recall.sound_alike(b, a)
    assert recall.sound_alike(a, b, loose=True)  # romanised Hindi: the key decides


def test_romanised_hindi_keeps_the_vowel_variants() -> None:
    """dawai / davai differ as team / time do: a line in romanised Hindi, or a query in it
    (``loose``), keeps them together."""
    assert not recall.sound_alike("dawai", "davai")
    assert recall.false_sound_alikes(["dawai"], "Davai le li kya", ["~dv"]) == frozenset()
    assert recall.false_sound_alikes(["dawai"], "Davai on the shelf", ["~dv"]) == {"~dv"}
    assert recall.false_sound_alikes(["dawai"], "Davai on the shelf", ["~dv"], loose=True) == set()
    assert recall.sound_alike("rakhne", "rakhna", loose=True)
    assert has_hinglish_marker("Mera kutta bahut cute hai")
    assert not has_hinglish_marker("Join the beta, Jo")
    assert not has_hinglish_marker("नमस्ते")


def test_false_keys_are_the_ones_no_pair_of_words_joins() -> None:
    assert recall.false_sound_alikes(["parrot"], "We threw a party", ["~prt"]) == {"~prt"}
    # the line also holds the word itself: the key joins that pair
    assert recall.false_sound_alikes(["parrot"], "A party for my parrot", ["~prt"]) == set()
    assert recall.false_sound_alikes(["parrots"], "my parrot Kiwi", ["~prt"]) == set()
    # only the keys given (those the line matched) are judged
    assert recall.false_sound_alikes(["parrot"], "We threw a party", []) == set()


def test_memories_chosen_by_a_false_key_score_nothing() -> None:
    texts = ["Loves going to a party on Fridays", "Has a green parrot called Kiwi"]
    scores = recall.rank_texts(texts, "What is my parrot called?")
    assert scores[0] == 0.0 and scores[1] > 0.0
    # a real shared word still counts, the false key's weight taken off
    both = recall.rank_texts(["Fridays: party", "Fridays: parrot class"], "parrot on Fridays")
    assert 0.0 < both[0] < both[1]
    # with a tight budget, the parrot memory is the one chosen
    assert select_items(texts, "What is my parrot called?", 40) == (texts[1],)


DAY_MS = 86_400_000
T0 = 1_700_000_000_000
OLD = [
    ("user", "We threw a big party for Mira's birthday"),
    ("assistant", "That sounds like a great evening"),
    ("user", "Our parrot Kiwi learned to whistle the anthem"),
    ("assistant", "Clever bird"),
]


async def _imported(store: MemoryStore, prefix: str) -> None:
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    who = Identity(
        "master", "u-A", "demo", "demo", keys, keys.user_keys.memory_set(user_scope("demo")), "demo"
    )
    lines = [HistoryLine(role, text, T0 + i * 1000) for i, (role, text) in enumerate(OLD)]
    filler = [
        HistoryLine(("user", "assistant")[i % 2], f"ok noted {i}", T0 + DAY_MS + i * 1000)
        for i in range(50)
    ]
    await import_lines(store, who, lines + filler)


async def _earlier(hook: MemoryHook, text: str, call_id: str) -> list[str]:
    data: dict[str, Any] | None = await hook.async_pre_call_hook(
        Auth(), None, chat_request(text, call_id=call_id), "acompletion"
    )
    assert data is not None
    await hook.async_post_call_success_hook(data, Auth(), model_response("Sure."))
    await hook.drain()
    system = str(data["messages"][0]["content"])
    found = re.search(r"<earlier_lines>(.*?)</earlier_lines>", system, re.S)
    lines = found.group(1).splitlines() if found else []
    return [x.split("] ", 1)[1] for x in lines if x.startswith("- [")]


async def test_a_question_about_the_parrot_recalls_the_parrot_not_the_party(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """Through the hook on fake, real and Cluster Redis: the party line shares only ``~prt``
    with the question ("parrots" / "party"); before the fix it was recalled beside the parrot
    line, and the parrot line beside it for a question about the party."""
    store = MemoryStore(any_redis, ttl_s=3600)
    await _imported(store, prefix)
    hook = make_hook(any_redis, prefix)
    assert await _earlier(hook, "Do you remember what my parrots did?", "c1") == [
        "user: Our parrot Kiwi learned to whistle the anthem"
    ]
    # a question about the party recalls the party line only
    assert await _earlier(hook, "Who had a party?", "c2") == [
        "user: We threw a big party for Mira's birthday"
    ]


def test_names_written_with_a_capital_in_both_are_one_name() -> None:
    """Seema / Sima: a name romanised two ways still meets; the same pair written in lower case
    in the line does not."""
    assert not recall.sound_alike("seema", "sima")
    names = recall.capitalised_words("Where does Seema live?")
    assert names == {"where", "seema"}
    assert recall.false_sound_alikes(["seema"], "Sima loves tea", ["~sm"], names=names) == set()
    assert recall.false_sound_alikes(["seema"], "a sima card", ["~sm"], names=names) == {"~sm"}
    assert recall.false_sound_alikes(["seema"], "Sima loves tea", ["~sm"]) == {"~sm"}


def test_only_lines_that_a_false_key_could_have_carried_are_checked() -> None:
    """A line matched by the false key alone is left out; a line that also shares a word with
    the question scores more than the risky keys together and keeps its score (checking every
    line cost ~10% of the pre-call hook); a line holding the word itself is never suspect."""
    query = recall_query("Is the parrot eating kiwi?", RecallOptions(), None)
    texts = {1: "We threw a party", 2: "A party with kiwi fruit", 3: "The parrot sleeps"}
    postings: dict[str, list[int]] = {}
    for seq, text in texts.items():
        for term in recall.index_terms(text):
            postings.setdefault(term, []).append(seq)
    collection = recall.Collection(postings, {t: len(v) for t, v in postings.items()}, 10)
    ranked = [((0, seq), value) for seq, value in recall.rank(query.terms, postings, {}, 10, k=5)]
    found = {(0, s): EarlierLine(0, "user", t) for s, t in texts.items()}
    kept = dict(recall_step._without_false_sound_alikes(ranked, found, [collection], query))
    assert (0, 1) in dict(ranked) and (0, 1) not in kept
    assert kept[(0, 2)] == dict(ranked)[(0, 2)]
    assert kept[(0, 3)] == dict(ranked)[(0, 3)]
