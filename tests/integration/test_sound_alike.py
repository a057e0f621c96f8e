"""Phonetic keys join spellings of one word, not different English words with the same
consonants: "parrot" and "party" share ``~prt``, and a question about one recalled a line about
the other (found by a fresh-user run). :func:`recall.sound_alike` now tells them apart, and recall
and the choice of memories take a false key's weight off again; romanised Hindi keeps the loose
match the key was made for."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest
import redis.asyncio as aioredis

from litellm_memory_hook.core import recall
from litellm_memory_hook.core.prompt import EarlierLine
from litellm_memory_hook.core.script import has_hinglish_marker
from litellm_memory_hook.core.selection import select_items
from litellm_memory_hook.engine import recall_step
from litellm_memory_hook.engine.identity import Identity
from litellm_memory_hook.engine.recall_step import RecallOptions, recall_query
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.store.keys import ConversationKeys, user_scope
from litellm_memory_hook.store.redis_store import MemoryStore
from litellm_memory_hook.tools.histories import HistoryLine
from litellm_memory_hook.tools.importer import import_lines
from tests.support.hook_calls import Auth, chat_request, make_hook, model_response
from tests.support.prompt_view import memory_text

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
    # two English words stay two words inside romanised Hindi too
    assert not recall.sound_alike(a, b, loose=True) and not recall.sound_alike(b, a, loose=True)


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


async def _imported(
    store: MemoryStore, prefix: str, old: Sequence[tuple[str, str]] = OLD, filler_lines: int = 50
) -> None:
    """``old`` imported for user u-A, then ``filler_lines`` lines a day later (the window)."""
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    who = Identity(
        "master", "u-A", "demo", "demo", keys, keys.user_keys.memory_set(user_scope("demo")), "demo"
    )
    lines = [HistoryLine(role, text, T0 + i * 1000) for i, (role, text) in enumerate(old)]
    filler = [
        HistoryLine(("user", "assistant")[i % 2], f"ok noted {i}", T0 + DAY_MS + i * 1000)
        for i in range(filler_lines)
    ]
    await import_lines(store, who, lines + filler)


async def _earlier(hook: MemoryHook, text: str, call_id: str) -> list[str]:
    data: dict[str, Any] | None = await hook.async_pre_call_hook(
        Auth(), None, chat_request(text, call_id=call_id), "acompletion"
    )
    assert data is not None
    await hook.async_post_call_success_hook(data, Auth(), model_response("Sure."))
    await hook.drain()
    system = str(memory_text(data["messages"]))
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


# Hinglish lines and English words (fresh-user run): a Hinglish marker in the question or the
# line switched the check off for every word, so any English word of a Hinglish line met every
# English word with its consonant skeleton (parrot / party, team / time, rate / raat).

MIXED = [
    ("user", "Kal raat dost ki party thi, bahut maza aaya."),
    ("assistant", "Hum log parties mein jaate rehte hain."),
    ("user", "Mere paas time nahi hai aaj kal."),
    ("assistant", "I had a beer with Tom at the bar."),
    ("user", "Our neighbours hosted several parties in August."),
    ("user", "Meri behen Pune mein rehti hai."),
    ("user", "Mujhe nahi pata tha ki woh aayegi."),
]
MIXED_TEXTS = [text for _, text in MIXED]

# question -> the lines it must recall (by their text); every other line is a false recall
MIXED_QUESTIONS = [
    ("Where is my parrot?", []),
    ("What did my team do?", []),
    ("Do you remember the rate we got?", []),
    ("Mere time ka kya?", ["Mere paas time nahi hai aaj kal."]),
    ("Mera parrot kahan hai? Bata na yaar", []),
    ("Tom ka kya hua?", ["I had a beer with Tom at the bar."]),
    # romanised-Hindi spellings of one word still meet, in either direction
    # (rahti / rehta / rehte: forms of one verb)
    ("Meri bahan kahan rahti hai?", MIXED_TEXTS[1:2] + MIXED_TEXTS[5:6]),
    ("bahen kidhar rehta hai?", MIXED_TEXTS[1:2] + MIXED_TEXTS[5:6]),
    ("mjhe nhi pata", ["Mujhe nahi pata tha ki woh aayegi."]),
]


@pytest.mark.parametrize(("question", "expected"), MIXED_QUESTIONS)
def test_english_words_in_hinglish_text_are_still_checked(
    question: str, expected: list[str]
) -> None:
    """The choice of memories (:func:`recall.rank_texts`): an English word of a Hinglish line
    meets only itself or its own forms; romanised-Hindi variants keep meeting."""
    scores = recall.rank_texts(MIXED_TEXTS, question)
    assert [t for t, s in zip(MIXED_TEXTS, scores, strict=True) if s > 0.0] == expected


def test_the_loose_match_is_for_words_that_are_neither_english_nor_names() -> None:
    for a, b in [("rehti", "rahti"), ("rehti", "rehta"), ("nahi", "nhi"), ("mujhe", "mjhe")]:
        assert recall.sound_alike(a, b, loose=True) and recall.sound_alike(b, a, loose=True)
    for a, b in [("behen", "behan"), ("behen", "bahen"), ("behan", "bahen")]:
        assert recall.sound_alike(a, b, loose=True)
    for a, b in [("parrot", "party"), ("parrot", "parties"), ("team", "time"), ("time", "tom")]:
        assert not recall.sound_alike(a, b, loose=True)
    assert not recall.sound_alike("rate", "raat", loose=True)  # one of them English is enough
    assert recall.is_english_word("parrot") and recall.is_english_word("parties")
    assert recall.is_english_word("neighbours") and recall.is_english_word("time")
    for word in ("rehti", "rahti", "nahi", "nhi", "mujhe", "behen", "bahen", "raat", "kal"):
        assert not recall.is_english_word(word)
    # names: capitalised inside a sentence, not the first word of one
    assert recall.inner_names("Kal raat Rita aayi. Phir Tom bhi") == {"rita", "tom"}
    assert recall.false_sound_alikes(["raat"], "Kal Rita aayi thi", ["~rt"]) == {"~rt"}
    assert recall.false_sound_alikes(["raat"], "Raat ko woh aayi thi", ["~rt"]) == set()
    # two capitalised English words are not one name (a sentence opening "Team" and Tom)
    names = recall.capitalised_words("Team outing kab hai?")
    assert recall.false_sound_alikes(["team"], "Ask Tom", ["~tm"], names=names) == {"~tm"}


MIXED_FILLER = 50


async def test_hinglish_lines_recalled_by_english_sound_alikes_no_more(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """Through the hook on fake, real and Cluster Redis, the questions of the fresh-user
    report: "Where is my parrot?" recalled "Kal raat dost ki party thi ..." and "Hum log
    parties mein ...", "What did my team do?" "Mere paas time nahi hai ...", "Mere time ka
    kya?" the beer with Tom; now only the lines that share a word, or a Hindi spelling of one."""
    store = MemoryStore(any_redis, ttl_s=3600)
    await _imported(store, prefix, MIXED, MIXED_FILLER)
    hook = make_hook(any_redis, prefix)
    for number, (question, expected) in enumerate(MIXED_QUESTIONS):
        found = await _earlier(hook, question, f"m{number}")
        texts = [line.split(": ", 1)[1] for line in found]
        assert texts == expected, question


async def test_a_line_said_many_times_is_recalled_once(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """Through the hook on fake, real and Cluster Redis: a conversation whose every reply is
    the same stock line. The request verb "tell" recalls none of the replies, and a line said
    many times that does share a word is recalled once (its newest copy), not in every slot."""
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    who = Identity(
        "master", "u-A", "demo", "demo", keys, keys.user_keys.memory_set(user_scope("demo")), "demo"
    )
    said = [
        "The bedroom walls are painted sage green.",
        "We keep the old piano in the hallway.",
        "Our parrot Kiwi sleeps in the kitchen.",
        "The bedroom window faces the garden.",
        "My sister visits every Sunday.",
        "The hallway lamp needs a new bulb.",
        "I bought a rug for the study.",
        "The garden shed leaks when it rains.",
        "Kiwi the parrot hates the vacuum.",
        "The study has two bookshelves.",
    ]
    lines: list[HistoryLine] = []
    for i, text in enumerate(said):
        lines.append(HistoryLine("user", text, T0 + 2 * i * 1000))
        reply = "Got it, thanks for telling me." if i % 3 else "Got it,  THANKS for telling me!"
        lines.append(HistoryLine("assistant", reply, T0 + (2 * i + 1) * 1000))
    lines += [
        HistoryLine("user", "Where is the piano, did I mention?", T0 + 30_000),
        HistoryLine("assistant", "The piano is in the hallway.", T0 + 31_000),
        HistoryLine("user", "And the piano?", T0 + 32_000),
        HistoryLine("assistant", "The piano is in the hallway.", T0 + 33_000),
        HistoryLine("user", "OK", T0 + 34_000),
        HistoryLine("assistant", "the piano is in the  hallway.", T0 + 35_000),
    ]
    filler = [
        HistoryLine(("user", "assistant")[i % 2], f"ok noted {i}", T0 + DAY_MS + i * 1000)
        for i in range(50)
    ]
    await import_lines(MemoryStore(any_redis, ttl_s=3600), who, lines + filler)
    hook = make_hook(any_redis, prefix)
    bedroom = await _earlier(hook, "Can you tell me about the bedroom?", "r1")
    assert bedroom == [
        "user: The bedroom walls are painted sage green.",
        "user: The bedroom window faces the garden.",
    ]
    assert await _earlier(hook, "Tell me about the parrot.", "r2") == [
        "user: Our parrot Kiwi sleeps in the kitchen.",
        "user: Kiwi the parrot hates the vacuum.",
    ]
    assert await _earlier(hook, "Tell me something.", "r3") == []
    piano = await _earlier(hook, "What about the piano?", "r4")
    texts = [recall.same_text(line) for line in piano]
    assert len(texts) == len(set(texts)), piano
    # the best copy: those that answer a question about the piano score more (context keys)
    assert "assistant: The piano is in the hallway." in piano
