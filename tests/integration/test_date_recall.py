"""Date-led recall: a question about a day recalls that day's lines without a shared word
(:func:`litellm_memory_hook.core.recall.dates_lead`), through the hook and the request path, on
fakeredis and on a real Redis; a message that merely contains a date does not."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
import redis.asyncio as aioredis

from litellm_memory_hook.core import dates, recall
from litellm_memory_hook.engine.identity import Identity
from litellm_memory_hook.engine.options import ContextOptions
from litellm_memory_hook.engine.rebuild import prepare
from litellm_memory_hook.engine.recall_step import RecallOptions
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.store.keys import ConversationKeys, user_scope
from litellm_memory_hook.store.redis_store import MemoryStore
from litellm_memory_hook.tools.histories import HistoryLine
from litellm_memory_hook.tools.importer import import_lines
from tests.support.hook_calls import Auth, chat_request, make_hook, model_response
from tests.support.prompt_view import memory_text

DAY_MS = 86_400_000
MINUTE_MS = 60_000
T0 = int(datetime(2023, 5, 1, 12, 0, tzinfo=UTC).timestamp() * 1000)  # Monday 1 May 2023
# 2 May 2023: two greetings around three lines that carry content
MAY_2 = [
    ("user", "Hey Mira!"),
    ("user", "We booked the flights to Lisbon for the wedding in June"),
    ("assistant", "Wonderful, a Lisbon wedding in June sounds lovely"),
    ("user", "My sister Noor also starts her nursing course in autumn"),
    ("assistant", "Bye!"),
]
OTHER_DAYS = [
    (0, "user", "I adopted a greyhound called Pixel from the shelter"),
    (2, "user", "Pixel chewed the sofa cushions again this morning"),
]


def _lines(filler: int = 50) -> list[HistoryLine]:
    """1 and 3 May, 2 May (``MAY_2``, a minute apart), then ``filler`` lines on 20 May that fill
    the recent window."""
    lines = [HistoryLine(role, text, T0 + day * DAY_MS) for day, role, text in OTHER_DAYS]
    lines += [
        HistoryLine(role, text, T0 + DAY_MS + i * MINUTE_MS) for i, (role, text) in enumerate(MAY_2)
    ]
    lines += [
        HistoryLine("user" if i % 2 == 0 else "assistant", f"ok sounds good {i}", T0 + 19 * DAY_MS)
        for i in range(filler)
    ]
    return sorted(lines, key=lambda line: line.ts_ms)


async def _imported(store: MemoryStore, prefix: str, user: str = "u-A") -> Identity:
    """A fresh user whose history was imported (``litellm-memory import``) into the default
    conversation of the alias ``demo``, as the hook names it."""
    keys = ConversationKeys.for_ids(prefix, "master", user, "demo")
    memory = keys.user_keys.memory_set(user_scope("demo"))
    who = Identity("master", user, "demo", "demo", keys, memory, "demo")
    await import_lines(store, who, _lines())
    return who


def _earlier(data: dict[str, Any]) -> list[str]:
    """The recalled lines of a rebuilt request, as shown."""
    system = str(memory_text(data["messages"]))
    found = re.search(r"<earlier_lines>(.*?)</earlier_lines>", system, re.S)
    return [x for x in found.group(1).splitlines() if x.startswith("- [")] if found else []


async def _ask(hook: MemoryHook, text: str, call_id: str, reply: str) -> list[str]:
    data = await hook.async_pre_call_hook(
        Auth(), None, chat_request(text, call_id=call_id), "acompletion"
    )
    assert data is not None
    await hook.async_post_call_success_hook(data, Auth(), model_response(reply))
    await hook.drain()
    return _earlier(data)


async def test_a_question_about_a_day_recalls_its_lines_the_first_time_and_on_regenerate(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A fresh user imports a dated history and asks about a day in words no line shares
    ("talk"): the lines said that day are recalled, those with content first (the greetings
    left out while content lines fill the recall), in time order with the day in their labels,
    nothing of other days. The same question sent again as a regenerate recalls the same lines:
    the stored question and the reply it replaces, which share its words, are in the recent
    window and weigh nothing (before, a date alone recalled nothing, either time)."""
    store = MemoryStore(any_redis, ttl_s=3600)
    await _imported(store, prefix)
    hook = make_hook(any_redis, prefix)
    question = "What did we talk about on 2 May 2023?"
    first = await _ask(hook, question, "q1", "Let me think about 2 May 2023.")
    again = await _ask(hook, question, "q2", "On 2 May 2023 we talked about Lisbon.")
    assert [x.split("] ", 1)[1] for x in first] == [
        "user: We booked the flights to Lisbon for the wedding in June",
        "assistant: Wonderful, a Lisbon wedding in June sounds lovely",
        "user: My sister Noor also starts her nursing course in autumn",
    ]
    assert all(x.startswith("- [2023-05-02 12:0") for x in first)
    assert again == first
    turns = await store.all_turns(ConversationKeys.for_ids(prefix, "master", "u-A", "demo"))
    assert [t.text for t in turns[-2:]] == [question, "On 2 May 2023 we talked about Lisbon."]


async def test_a_request_that_merely_contains_a_date_recalls_nothing(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """No question ("remind me on 2 May 2023 to phone the dentist", words matching no line):
    the date only lifts lines that words matched, so nothing is recalled; the same date asked
    about recalls that day."""
    store = MemoryStore(any_redis, ttl_s=3600)
    await _imported(store, prefix)
    hook = make_hook(any_redis, prefix)
    assert await _ask(hook, "remind me on 2 May 2023 to phone the dentist", "r1", "Sure.") == []
    assert len(await _ask(hook, "what happened on 2 May 2023", "r2", "Let me see.")) == 3


async def _prepared_lines(
    store: MemoryStore, who: Identity, text: str, options: RecallOptions, now_ms: int
) -> list[str]:
    prepared = await prepare(
        store,
        who.keys,
        who.memory,
        [{"role": "user", "content": text}],
        ContextOptions(recall=options, timezone="UTC"),
        now_ms=now_ms,
    )
    assert prepared is not None
    return [t.text for t in prepared.recalled]


async def test_words_rarer_than_the_date_keep_it_a_lift(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A question whose word names fewer lines than the day holds ("Pixel": 2 lines; 3 May: 1
    line, so "Pixel" on 3 May leads by the date; 2 May: 5 lines) is ranked by its words as
    before, the day lifting its matches; a relative date ("last Tuesday", no question mark)
    leads like an absolute one."""
    store = MemoryStore(any_redis, ttl_s=3600)
    who = await _imported(store, prefix)
    options = RecallOptions(mode="fixed", k=4)
    asked = T0 + 30 * DAY_MS
    pixel = [text for _, _, text in OTHER_DAYS]
    on_2 = await _prepared_lines(store, who, "What did Pixel do on 2 May 2023?", options, asked)
    assert on_2 == pixel
    on_3 = await _prepared_lines(store, who, "What did Pixel do on 3 May 2023?", options, asked)
    assert on_3 == [pixel[1]]
    tuesday = T0 + 8 * DAY_MS  # Tuesday 9 May: "last Tuesday" is 2 May
    assert await _prepared_lines(store, who, "what happened last Tuesday", options, tuesday) == [
        text for _, text in MAY_2[1:4]
    ]


async def test_a_busy_day_gives_at_most_the_date_led_cap(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A day of 30 short lines and a budget that would hold them all: a date-led recall keeps
    ``DATE_LED_K_MAX`` lines, the greetings not among them."""
    store = MemoryStore(any_redis, ttl_s=3600)
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "busy")
    memory = keys.user_keys.memory_set(user_scope("demo"))
    who = Identity("master", "u-A", "busy", "demo", keys, memory, "demo")
    day = [
        HistoryLine("user", "hi!" if i % 3 == 0 else f"note {i} about the garden beds", T0 + i)
        for i in range(30)
    ]
    filler = [HistoryLine("user", f"ok {i}", T0 + 5 * DAY_MS + i) for i in range(50)]
    await import_lines(store, who, [*day, *filler])
    options = RecallOptions(chars=50_000, k_max=32)
    found = await _prepared_lines(store, who, "What about 1 May 2023?", options, T0 + 9 * DAY_MS)
    assert len(found) == recall.DATE_LED_K_MAX
    assert "hi!" not in found


# -- the pure pieces --------------------------------------------------------------------------


def test_questions_and_requests() -> None:
    """A question mark or an English question word first makes a question; a request that
    contains a date does not."""
    assert recall.asks_about_time("What did we talk about on 2 May 2023?")
    assert recall.asks_about_time("what happened last tuesday")
    assert recall.asks_about_time("Did we plan anything for 2023-05-02")
    assert recall.asks_about_time("2 May 2023？")
    assert not recall.asks_about_time("remind me on 3 May 2023 to call Bob")
    assert not recall.asks_about_time("Whatever, 2 May 2023 it is")
    assert not recall.asks_about_time("")


def test_without_dates_leaves_the_other_words() -> None:
    """Every form query_dates reads goes (relative ones only with a request time), so the
    year and month names are not weighed as words of the question."""
    now = T0 + 30 * DAY_MS
    strip = dates.without_dates
    assert recall.tokenize(strip("What did we talk about on 2 May 2023?", now)) == ["talk"]
    assert recall.tokenize(strip("Pixel in May 2023, May 8, 2023 and 2023-05-09?", now)) == [
        "pixel"
    ]
    assert recall.tokenize(strip("the garden plan last week or 3 days ago?", now)) == [
        "garden",
        "plan",
    ]
    assert "yesterday" in recall.tokenize(strip("the plan yesterday?", None))
    assert strip("no dates here", now) == "no dates here"


def test_dates_lead_when_no_older_line_shares_a_rarer_word() -> None:
    """The date leads when it names no more lines than any word an older line shares; words
    (and dates) that match only lines of the recent window are not weighed."""
    day = "@2023-05-02"
    lines = {day: [3, 4, 5], "talk": [1, 2, 9, 10], "lisbon": [4, 6], "new": [9, 10]}
    one = recall.Collection(lines, {t: len(v) for t, v in lines.items()}, 10, 9)
    assert recall.dates_lead(["talk"], [day], [one])  # talk: 4 lines, the day 3
    assert not recall.dates_lead(["lisbon"], [day], [one])  # lisbon: 2 lines
    assert recall.dates_lead(["new"], [day], [one])  # only in the window (seqs 9, 10)
    assert recall.dates_lead([], [day], [one])
    assert not recall.dates_lead([], ["@2023-06-01"], [one])
    window_only = recall.Collection({day: [9]}, {day: 1}, 10, 9)
    assert not recall.dates_lead([], [day], [window_only])
    # another chat's lines count with this one's, as rank_collections counts them
    other = recall.Collection({"lisbon": [1, 2]}, {"lisbon": 2}, 5, None)
    assert recall.dates_lead(["lisbon"], [day], [one, other])


def test_date_led_ranking_keeps_to_the_day_and_content() -> None:
    """With the date as the main kind, only the day's lines are candidates and the words lift
    those they match; then content first among equal scores, greetings out while content is
    left, and back to them when nothing else is."""
    day = "@2023-05-02"
    postings = {day: [3, 4, 5, 6], "lisbon": [1, 5]}
    ranked = recall.rank(
        ["lisbon", day], postings, {}, 10, k=10, main_kinds=frozenset({recall.DATE_PREFIX})
    )
    assert [seq for seq, _ in ranked] == [5, 6, 4, 3]
    assert recall.rank(["lisbon", day], postings, {}, 10, k=10) == [
        ranked[0],
        (1, pytest.approx(ranked[0][1] - ranked[1][1])),
    ]
    matched = recall.matched_seqs(["lisbon", "pixel"], postings, [3, 4, 5, 6])
    assert matched == {5}
    words = {3: 4, 4: 1, 5: 1, 6: 3}
    order = recall.date_led_order(ranked, words.__getitem__, matched.__contains__)
    assert [seq for seq, _ in order] == [5, 3, 6]
    greetings = recall.date_led_order(ranked[2:], lambda _: 1, lambda _: False)
    assert [seq for seq, _ in greetings] == [4, 3]


def test_a_year_after_in_during_or_of_is_a_date() -> None:
    """ "What did we talk about in 2023?" named no date (a year alone was not read); a number
    that is no year stays a word."""
    terms = {
        text: [s.term for s in dates.query_dates(text, "UTC")]
        for text in (
            "What did we talk about in 2023?",
            "in May 2023 and during 2022",
            "the summer of 2019",
            "In the year 2021 we met",
            "I walked 2023 steps",
            "since 2020",
            "in 2023-05-08",
        )
    }
    assert terms == {
        "What did we talk about in 2023?": ["@2023"],
        "in May 2023 and during 2022": ["@2023-05", "@2022"],
        "the summer of 2019": ["@2019-06-01..2019-09-01"],
        "In the year 2021 we met": ["@2021"],
        "I walked 2023 steps": [],
        "since 2020": [],
        "in 2023-05-08": ["@2023-05-08"],
    }
    [year] = dates.query_dates("in 2024", "UTC")
    assert year.end_ms - year.start_ms == 366 * DAY_MS
    assert "2023" not in dates.without_dates("What did we talk about in 2023?")


async def test_a_question_about_a_year_recalls_that_years_lines(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """Lines of 2022 and of 2023, then filler: a question about 2022 in words no line shares
    recalls the 2022 lines only."""
    store = MemoryStore(any_redis, ttl_s=3600)
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "years")
    memory = keys.user_keys.memory_set(user_scope("demo"))
    who = Identity("master", "u-A", "years", "demo", keys, memory, "demo")
    in_2022 = ["We moved to Porto for the new job", "The flat near the river is lovely"]
    in_2023 = ["Noor started her nursing course", "We adopted a greyhound called Pixel"]
    lines = [HistoryLine("user", t, T0 - 300 * DAY_MS + i * DAY_MS) for i, t in enumerate(in_2022)]
    lines += [HistoryLine("user", t, T0 + i * DAY_MS) for i, t in enumerate(in_2023)]
    lines += [HistoryLine("user", f"ok noted {i}", T0 + 40 * DAY_MS + i) for i in range(50)]
    await import_lines(store, who, lines)
    found = await _prepared_lines(
        store, who, "What did we talk about in 2022?", RecallOptions(), T0 + 60 * DAY_MS
    )
    assert found == in_2022


def test_a_season_of_a_year_names_its_three_months() -> None:
    """ "What did we talk about in the summer of 2025?" named the whole year 2025: a season
    names its months (northern meteorological seasons), winter running into the next year."""
    terms = {
        text: [s.term for s in dates.query_dates(text, "UTC")]
        for text in (
            "What did we talk about in the summer of 2025?",
            "spring 2024",
            "during the Autumn of 2022",
            "fall 2022 and in 2021",
            "the winter of 2023",
            "winter 2023/24",
            "summer 2023-05-08",
        )
    }
    assert terms == {
        "What did we talk about in the summer of 2025?": ["@2025-06-01..2025-09-01"],
        "spring 2024": ["@2024-03-01..2024-06-01"],
        "during the Autumn of 2022": ["@2022-09-01..2022-12-01"],
        "fall 2022 and in 2021": ["@2022-09-01..2022-12-01", "@2021"],
        "the winter of 2023": ["@2023-12-01..2024-03-01"],
        "winter 2023/24": ["@2023-12-01..2024-03-01"],
        "summer 2023-05-08": ["@2023-05-08"],
    }
    [winter] = dates.query_dates("winter 2023", "Asia/Kolkata")
    assert winter.end_ms - winter.start_ms == (31 + 31 + 29) * DAY_MS  # 2024 is a leap year
    assert winter.start_ms == int(datetime(2023, 11, 30, 18, 30, tzinfo=UTC).timestamp() * 1000)
    assert recall.tokenize(dates.without_dates("What did we discuss in the summer of 2025?")) == [
        "discuss"
    ]


async def test_a_question_about_a_season_recalls_that_seasons_lines(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """Lines of spring and of summer 2023, then filler: a question about the summer in words no
    line shares recalls the summer lines only (it recalled the whole year's)."""
    store = MemoryStore(any_redis, ttl_s=3600)
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "seasons")
    memory = keys.user_keys.memory_set(user_scope("demo"))
    who = Identity("master", "u-A", "seasons", "demo", keys, memory, "demo")
    spring = ["We moved to Porto for the new job", "The flat near the river is lovely"]
    summer = ["Noor started her nursing course", "We adopted a greyhound called Pixel"]
    lines = [HistoryLine("user", t, T0 - 30 * DAY_MS + i * DAY_MS) for i, t in enumerate(spring)]
    lines += [HistoryLine("user", t, T0 + 60 * DAY_MS + i * DAY_MS) for i, t in enumerate(summer)]
    lines += [HistoryLine("user", f"ok noted {i}", T0 + 200 * DAY_MS + i) for i in range(50)]
    await import_lines(store, who, lines)
    found = await _prepared_lines(
        store,
        who,
        "What did we talk about in the summer of 2023?",
        RecallOptions(),
        T0 + 220 * DAY_MS,
    )
    assert found == summer
