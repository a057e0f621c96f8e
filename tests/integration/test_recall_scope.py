"""Budgeted recall, dates in questions and ``recall_scope: user`` (issue 11), on fakeredis and on
a real Redis: the store reads, the request path (:func:`prepare`) and the hook in-process.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import pytest
import redis.asyncio as aioredis
from hypothesis import given, settings
from hypothesis import strategies as st

from litellm_memory_hook.core import dates, recall
from litellm_memory_hook.core.indexing import indexed_chain
from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.core.prompt import (
    EarlierLine,
    PromptLayers,
    build_system_message,
    earlier_line_chars,
)
from litellm_memory_hook.core.selection import select_items
from litellm_memory_hook.core.time_labels import time_label
from litellm_memory_hook.engine.options import ContextOptions
from litellm_memory_hook.engine.rebuild import prepare
from litellm_memory_hook.engine.recall_step import RecallOptions
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.settings import AliasMemoryConfig, MemorySettings
from litellm_memory_hook.store.keys import ConversationKeys, MemoryKeys, user_scope
from litellm_memory_hook.store.redis_store import DateSeqs, MemoryStore
from tests.support.hook_calls import Auth, model_response
from tests.support.prompt_view import memory_text

DAY_MS = 86_400_000
T0 = int(datetime(2023, 5, 1, 12, 0, tzinfo=UTC).timestamp() * 1000)
FILLER = [f"ok sounds good {i}" for i in range(50)]  # pushes older lines out of the window


def _turns(texts: list[str], start_ms: int = T0, step_ms: int = 60_000) -> list[Turn]:
    return [
        Turn(
            role="user" if i % 2 == 0 else "assistant",
            text=text,
            ts_ms=start_ms + i * step_ms,
            name="Asha" if i % 2 == 0 else "Mira",
        )
        for i, text in enumerate(texts)
    ]


async def _chat(
    store: MemoryStore,
    prefix: str,
    conversation: str,
    texts: list[str],
    *,
    user: str = "u-A",
    namespace: str = "demo",
    start_ms: int = T0,
    step_ms: int = 60_000,
) -> tuple[ConversationKeys, MemoryKeys]:
    """A stored conversation listed in its user's index, as the hook leaves one."""
    keys = ConversationKeys.for_ids(prefix, "master", user, conversation)
    memory = keys.user_keys.memory_set(user_scope(namespace))
    meta = {"conversation": conversation, "namespace": namespace, "user": user}
    await store.append(
        keys, indexed_chain(_turns(texts, start_ms, step_ms)), meta_if_new=meta, at_ms=start_ms
    )
    await store.touch_user_index(keys, memory)
    return keys, memory


async def _ask(
    store: MemoryStore,
    keys: ConversationKeys,
    memory: MemoryKeys,
    text: str,
    options: RecallOptions,
    timezone: str | None = "UTC",
) -> tuple[str, Any]:
    prepared = await prepare(
        store,
        keys,
        memory,
        [{"role": "user", "content": text}],
        ContextOptions(recall=options, timezone=timezone),
        now_ms=T0 + 400 * DAY_MS,
    )
    assert prepared is not None
    return str(prepared.messages[0]["content"]), prepared


# -- budgeted recall --------------------------------------------------------------------------


async def test_budget_fills_characters_best_first(any_redis: aioredis.Redis, prefix: str) -> None:
    """The budgeted mode keeps lines while they fit in recall_chars (as shown, labels
    included), at most recall_k_max; the fixed mode keeps recall_k whatever their size."""
    store = MemoryStore(any_redis, ttl_s=3600)
    old = [f"my axolotl Quibblefrond number {i} " + "x" * (40 * i) for i in range(1, 9)]
    keys, memory = await _chat(store, prefix, "c1", [*old, *FILLER])
    question = "what about Quibblefrond the axolotl?"
    for chars in (200, 600, 5000):
        _, prepared = await _ask(store, keys, memory, question, RecallOptions(chars=chars))
        lines = [EarlierLine(t.ts_ms, t.name, t.text) for t in prepared.recalled]
        assert sum(earlier_line_chars(line, "UTC") for line in lines) <= chars
        assert prepared.layer_chars["earlier_lines"] > 0
    _, capped = await _ask(store, keys, memory, question, RecallOptions(chars=50_000, k_max=3))
    assert len(capped.recalled) == 3
    _, fixed = await _ask(store, keys, memory, question, RecallOptions(mode="fixed", k=2))
    assert len(fixed.recalled) == 2
    _, off = await _ask(store, keys, memory, question, RecallOptions(chars=0))
    assert off.recalled == [] and off.layer_chars["earlier_lines"] == 0


async def test_min_share_drops_weak_matches(any_redis: aioredis.Redis, prefix: str) -> None:
    """One strong match does not drag in lines that share only a common word."""
    store = MemoryStore(any_redis, ttl_s=3600)
    old = ["Quibblefrond my axolotl loves worms", *[f"worms again {i}" for i in range(6)]]
    keys, memory = await _chat(store, prefix, "c1", [*old, *FILLER])
    question = "does Quibblefrond like worms?"
    _, every = await _ask(store, keys, memory, question, RecallOptions(min_share=0.0))
    _, strong = await _ask(store, keys, memory, question, RecallOptions(min_share=0.5))
    assert len(every.recalled) == 7
    assert [t.text for t in strong.recalled] == [old[0]]


def test_fill_budget_skips_what_does_not_fit() -> None:
    """A line too big for what is left is skipped; a shorter one after it may still fit."""
    ranked = [("a", 9.0), ("b", 8.0), ("c", 7.0), ("d", 0.5)]
    sizes = {"a": 50, "b": 80, "c": 30, "d": 10}
    assert recall.fill_budget(ranked, sizes.__getitem__, chars=100, k_max=5) == ["a", "c", "d"]
    assert recall.fill_budget(ranked, sizes.__getitem__, chars=100, k_max=5, min_share=0.1) == [
        "a",
        "c",
    ]
    assert recall.fill_budget(ranked, sizes.__getitem__, chars=1000, k_max=2) == ["a", "b"]
    assert recall.fill_budget(ranked, sizes.__getitem__, chars=0, k_max=2) == []


def test_recall_options_per_alias() -> None:
    """Alias values override the global ones; the defaults are the settings' (budgeted)."""
    settings = MemorySettings(recall_chars=1800)
    assert RecallOptions() == RecallOptions.for_alias(MemorySettings(), AliasMemoryConfig())
    chosen = RecallOptions.for_alias(
        settings, AliasMemoryConfig(recall_scope="user", recall_k_max=6, recall_mode="fixed")
    )
    assert (chosen.mode, chosen.chars, chosen.k_max, chosen.scope) == ("fixed", 1800, 6, "user")
    assert RecallOptions().mode == "budget" and RecallOptions().enabled
    assert not RecallOptions(k=0).enabled and not RecallOptions(chars=0).enabled


# -- one scorer ---------------------------------------------------------------------------------


def test_rank_collections_of_one_is_rank() -> None:
    """One conversation ranked as a collection gives exactly rank()'s result."""
    postings = {"goa": [1, 5, 9], "trip": [5, 7], "~g": [1, 9]}
    df = {"goa": 3, "trip": 2, "~g": 2}
    alone = recall.rank(["goa", "trip", "~g"], postings, df, 10, exclude_from_seq=9, k=5)
    merged = recall.rank_collections(
        ["goa", "trip", "~g"], [recall.Collection(postings, df, 10, 9)], k=5
    )
    assert [((0, seq), value) for seq, value in alone] == merged
    assert recall.score(["goa"], postings, df, 10, k=2) == sorted(
        recall.rank(["goa"], postings, df, 10, k=2)
    )


def test_rank_collections_sums_n_and_df() -> None:
    """Across chats N and df add up: a word frequent in one chat is weighed in the union."""
    first = recall.Collection({"goa": [1, 2, 3]}, {"goa": 3}, 4)
    second = recall.Collection({"goa": [1]}, {"goa": 1}, 6)
    ranked = recall.rank_collections(["goa"], [first, second], k=10)
    assert {key for key, _ in ranked} == {(0, 1), (0, 2), (0, 3), (1, 1)}
    assert all(value == pytest.approx(recall.idf(10, 4)) for _, value in ranked)


def test_memory_selection_uses_the_recall_scorer() -> None:
    """select_items scores memories with rank(): a phonetic match counts half a word match,
    as in recall."""
    memories = ["Seema lives in Pune", "Sima loves tea", "The weather was hot"]
    scores = recall.rank_texts(memories, "where does Seema live?")
    assert scores[0] > scores[1] > 0.0 == scores[2]
    assert select_items(memories, "where does Seema live?", 25) == ("Seema lives in Pune",)


# -- dates in questions -------------------------------------------------------------------------


def test_query_dates_forms_and_zones() -> None:
    """Days and months in the usual English forms; the span is the local day of the zone."""
    spans = dates.query_dates("on 8 May 2023, May 9th, 2023, 2023-05-10 or in June 2023?")
    assert [s.term for s in spans] == ["@2023-05-08", "@2023-05-09", "@2023-05-10", "@2023-06"]
    day = dates.query_dates("what happened on 8th of May, 2023?", "Asia/Kolkata")[0]
    assert day.start_ms == int(datetime(2023, 5, 7, 18, 30, tzinfo=UTC).timestamp() * 1000)
    assert day.end_ms - day.start_ms == DAY_MS
    assert [s.term for s in dates.query_dates("on 31 June 2023 or 8 May")] == ["@2023-06"]
    assert dates.query_dates("x", "Not/AZone") == []
    month = dates.query_dates("February 2024", "UTC")[0]
    assert month.end_ms - month.start_ms == 29 * DAY_MS


NOW = int(datetime(2026, 12, 2, 9, 30, tzinfo=UTC).timestamp() * 1000)  # a Wednesday


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("what did I say yesterday?", ["@2026-12-01"]),
        ("and today, and the day before yesterday?", ["@2026-12-02", "@2026-11-30"]),
        ("3 days ago and two days ago", ["@2026-11-29", "@2026-11-30"]),
        ("last Monday or on friday", ["@2026-11-30", "@2026-11-27"]),
        ("last Wednesday", ["@2026-11-25"]),  # the latest Wednesday before today
        ("last week", ["@2026-11-23..2026-11-30"]),
        ("this week", ["@2026-11-30..2026-12-03"]),
        ("the past week", ["@2026-11-26..2026-12-03"]),
        ("a week ago", ["@2026-11-22..2026-11-29"]),
        ("last month and 2 months ago", ["@2026-11", "@2026-10"]),
        ("this month", ["@2026-12-01..2026-12-03"]),
        ("last year", ["@2025"]),
        ("in January a year ago", ["@2025"]),
        ("12 months ago", ["@2025-12"]),
        ("on 8 May 2023 and yesterday", ["@2023-05-08", "@2026-12-01"]),
        ("tomorrow, next week, on the table, lastly", []),
    ],
)
def test_relative_dates_are_read_against_the_request_time(text: str, terms: list[str]) -> None:
    """Relative dates name local days, ISO weeks, calendar months and years before the
    request's time; future forms and look-alike words name nothing."""
    assert [s.term for s in dates.query_dates(text, "UTC", NOW)] == terms
    assert [s.term for s in dates.query_dates(text, "UTC")] == [t for t in terms if "2023" in t]


def test_relative_dates_follow_the_users_zone() -> None:
    """At 02:00 UTC it is still yesterday evening in New York: "yesterday" is a day earlier
    there, and the span is New York's local midnight to midnight."""
    early = int(datetime(2026, 12, 2, 2, 0, tzinfo=UTC).timestamp() * 1000)
    [kolkata] = dates.query_dates("yesterday", "Asia/Kolkata", early)
    [new_york] = dates.query_dates("yesterday", "America/New_York", early)
    assert (kolkata.term, new_york.term) == ("@2026-12-01", "@2026-11-30")
    assert new_york.start_ms == int(datetime(2026, 11, 30, 5, 0, tzinfo=UTC).timestamp() * 1000)
    assert new_york.end_ms - new_york.start_ms == DAY_MS
    assert (
        len(dates.query_dates("today yesterday 2 days ago 3 days ago 4 days ago", "UTC", early))
        == 4
    )


_DATE_WORDS = st.sampled_from(
    [
        *("yesterday", "today", "ago", "last", "this", "past", "on", "a", "99", "0", "Monday"),
        *("day", "days", "week", "weeks", "month", "months", "year", "years", "sunday", ","),
        *("the day before", "8 May 2023", "2023-02-30", "May 2023", "31 June 2023", "\n"),
    ]
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(_DATE_WORDS, st.text(max_size=8)), max_size=12).map(" ".join),
    st.integers(min_value=0, max_value=4_102_444_800_000),  # 1970 to 2100
    st.sampled_from([None, "UTC", "Asia/Kolkata", "America/New_York", "Pacific/Kiritimati"]),
)
def test_query_dates_never_fail(text: str, now: int, zone: str | None) -> None:
    """Any text at any time in any zone: at most MAX_DATES_PER_QUERY distinct spans, each
    a non-empty span of whole local days named by a date term."""
    spans = dates.query_dates(text, zone, now)
    assert len(spans) <= dates.MAX_DATES_PER_QUERY and len(set(spans)) == len(spans)
    for span in spans:
        assert span.term.startswith(dates.DATE_PREFIX) and span.start_ms < span.end_ms


async def test_yesterday_lifts_the_lines_of_yesterday(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """Among lines that share the words, "yesterday" puts the one said the day before the
    request first; without it the newest wins the tie."""
    store = MemoryStore(any_redis, ttl_s=3600)
    texts = [f"we talked about the garden plan {i}" for i in range(10)]
    keys, memory = await _chat(store, prefix, "c1", [*texts, *FILLER], step_ms=DAY_MS)
    asked_at = T0 + 7 * DAY_MS + 3 * 3_600_000  # line i was said at T0 + i days: 6 is yesterday

    async def recalled(question: str) -> list[str]:
        prepared = await prepare(
            store,
            keys,
            memory,
            [{"role": "user", "content": question}],
            ContextOptions(recall=RecallOptions(mode="fixed", k=1), timezone="UTC"),
            now_ms=asked_at,
        )
        assert prepared is not None
        return [t.text for t in prepared.recalled]

    assert await recalled("the garden plan yesterday?") == [texts[6]]
    assert await recalled("the garden plan?") == [texts[9]]
    assert await recalled("the garden plan 3 days ago?") == [texts[4]]


async def test_date_lifts_the_lines_of_that_day(any_redis: aioredis.Redis, prefix: str) -> None:
    """Among lines that share the words, those of the named day come first; a date a message
    merely names (no question) recalls nothing (tests/integration/test_date_recall.py: a question
    about it does)."""
    store = MemoryStore(any_redis, ttl_s=3600)
    texts = [f"we talked about the garden plan {i}" for i in range(10)]
    keys, memory = await _chat(store, prefix, "c1", [*texts, *FILLER], step_ms=DAY_MS)
    named = datetime.fromtimestamp((T0 + 6 * DAY_MS) / 1000, UTC)
    question = f"the garden plan of {named:%d %B %Y}?"
    _, prepared = await _ask(store, keys, memory, question, RecallOptions(mode="fixed", k=1))
    assert [t.text for t in prepared.recalled] == [texts[6]]
    _, nothing = await _ask(store, keys, memory, f"{named:%d %B %Y}", RecallOptions())
    assert nothing.recalled == []


async def _spans_of(
    times: list[int], spans: list[tuple[int, int]], *, cap: int = 1024, legacy: bool = False
) -> list[DateSeqs]:
    """The date spans a fakeredis store finds in one request's turns said at ``times`` (seq
    1, 2, ... in that order); ``legacy``: the time index deleted (a conversation stored before
    it existed)."""
    import fakeredis

    client = fakeredis.FakeAsyncRedis(decode_responses=False)
    store = MemoryStore(client, ttl_s=60, postings_cap=cap)
    keys = ConversationKeys.for_ids("p", "t", "u", "c")
    turns = [Turn(role="user", text=f"w{i}", ts_ms=t) for i, t in enumerate(times)]
    await store.append(keys, indexed_chain(turns))
    if legacy:
        await client.delete(keys.times)
    _, postings = await store.load(
        keys, keys.user_keys.memory_set("ns:x"), tail=1, date_spans=spans
    )
    await client.aclose()
    return postings.spans


def _seqs(found: DateSeqs) -> list[int]:
    return [int(seq) for seq in recall.date_postings(found.runs)]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=60), min_size=1, max_size=40),
    st.integers(min_value=-5, max_value=60),
    st.integers(min_value=0, max_value=30),
    st.integers(min_value=1, max_value=8),
)
def test_seq_spans_match_a_scan(times: list[int], start: int, width: int, cap: int) -> None:
    """The span script finds, through the time index, the turns a scan of the timestamps finds,
    whatever order the times are stored in: their number, and the latest (by time, then by
    seq) ``cap`` of them as runs of consecutive seqs."""
    import asyncio

    [found] = asyncio.run(_spans_of(times, [(start, start + width)], cap=cap))
    inside = [seq for seq, t in enumerate(times, 1) if start <= t < start + width]
    assert found.df == len(inside)
    got = _seqs(found)
    assert got == sorted(set(got)) and set(got) <= set(inside)
    assert len(got) == min(cap, len(inside))
    left_out = set(inside) - set(got)
    if got and left_out:
        assert min((times[s - 1], s) for s in got) > max((times[s - 1], s) for s in left_out)
    # runs are maximal: consecutive seqs never split into two runs
    assert all(a[1] < b[0] for a, b in zip(found.runs, found.runs[1:], strict=False))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=50), min_size=1, max_size=40),
    st.integers(min_value=-5, max_value=60),
    st.integers(min_value=0, max_value=30),
)
def test_seq_spans_without_a_time_index_binary_search(
    gaps: list[int], start: int, width: int
) -> None:
    """A conversation stored before the time index existed (no ``times`` key): the span script
    binary-searches the turns' times, as it did before, and finds the seqs of a scan when the
    times are in seq order."""
    import asyncio

    times, now = [], 0
    for gap in gaps:
        now += gap
        times.append(now)
    [found] = asyncio.run(_spans_of(times, [(start, start + width)], legacy=True))
    inside = [seq for seq, t in enumerate(times, 1) if start <= t < start + width]
    assert _seqs(found) == inside
    assert found.df == len(inside)


async def test_seq_spans_exact_runs_of_out_of_order_times() -> None:
    """Exact replies: turns said at minutes 10, 11, 12, then 1, 2 (imported after), then 13;
    a span of minutes 0-3 finds seqs 4-5, one of minutes 11-14 finds 2, 3 and 6 as two runs,
    and with cap 2 only the latest two by time (3 and 6); turns of one time give the newest
    seqs. Without the index (a conversation
    stored before it existed) the binary search over the times gives what it gave before the
    index: seqs 1-5 for minutes 0-3, not the imported 4-5 alone."""
    minute = 60_000
    times = [10 * minute, 11 * minute, 12 * minute, 1 * minute, 2 * minute, 13 * minute]
    spans = [(0, 3 * minute), (11 * minute, 14 * minute), (20 * minute, 30 * minute)]
    assert await _spans_of(times, spans) == [
        DateSeqs(2, ((4, 6),)),
        DateSeqs(3, ((2, 4), (6, 7))),
        DateSeqs(0, ()),
    ]
    assert (await _spans_of(times, spans[1:2], cap=2)) == [DateSeqs(3, ((3, 4), (6, 7)))]
    # one time for every turn (a history seeding a conversation): the newest seqs
    assert (await _spans_of([minute] * 12, [(0, 2 * minute)], cap=5)) == [DateSeqs(12, ((8, 13),))]
    assert (await _spans_of(times, spans[:1], legacy=True)) == [DateSeqs(5, ((1, 6),))]


# -- date labels --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("zone", "moment", "label"),
    [
        (None, datetime(2023, 5, 8, 13, 56, tzinfo=UTC), "2023-05-08 13:56 UTC"),
        ("Asia/Kolkata", datetime(2023, 5, 8, 13, 56, tzinfo=UTC), "2023-05-08 19:26 +05:30"),
        ("Asia/Kathmandu", datetime(2023, 5, 8, 13, 56, tzinfo=UTC), "2023-05-08 19:41 +05:45"),
        ("America/St_Johns", datetime(2023, 1, 8, 13, 56, tzinfo=UTC), "2023-01-08 10:26 -03:30"),
        ("Europe/London", datetime(2023, 1, 8, 13, 56, tzinfo=UTC), "2023-01-08 13:56 UTC"),
        ("Europe/London", datetime(2023, 7, 8, 13, 56, tzinfo=UTC), "2023-07-08 14:56 +01:00"),
        ("Pacific/Kiritimati", datetime(2023, 5, 8, 13, 56, tzinfo=UTC), "2023-05-09 03:56 +14:00"),
        ("Asia/Kolkata", datetime(1900, 1, 1, 0, 0, tzinfo=UTC), "1900-01-01 05:21 +05:21:10"),
    ],
)
def test_date_labels_are_unambiguous(zone: str | None, moment: datetime, label: str) -> None:
    """ISO date, 24-hour time and the numeric offset of that moment, never an abbreviation
    (IST, CST); "UTC" whenever the offset is zero."""
    assert time_label(int(moment.timestamp() * 1000), zone) == label


def test_repeated_hour_gets_two_offsets() -> None:
    """At the end of summer time the same local hour happens twice: the offsets tell them apart."""
    first = int(datetime(2023, 11, 5, 5, 30, tzinfo=UTC).timestamp() * 1000)
    second = first + 3_600_000
    labels = {time_label(first, "America/New_York"), time_label(second, "America/New_York")}
    assert labels == {"2023-11-05 01:30 -04:00", "2023-11-05 01:30 -05:00"}


# -- recall_scope: user -------------------------------------------------------------------------


async def test_user_scope_recalls_other_chats_labelled(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A new chat of the same user recalls a line of an older chat, labelled with that chat;
    conversation scope does not; another user's and another namespace's chats never."""
    store = MemoryStore(any_redis, ttl_s=3600)
    fact = "My axolotl is called Quibblefrond."
    await _chat(store, prefix, "old-chat", [fact, *FILLER])
    await _chat(store, prefix, "elsewhere", ["My axolotl Quibblefrond bites"], namespace="other")
    await _chat(store, prefix, "theirs", ["Quibblefrond is my axolotl too"], user="u-B")
    keys, memory = await _chat(store, prefix, "new-chat", ["hello there"])
    text, prepared = await _ask(
        store, keys, memory, "what is my axolotl called?", RecallOptions(scope="user")
    )
    assert f'other chat "old-chat"] Asha: {fact}' in text
    assert "bites" not in text and "too" not in text
    assert prepared.recalled == []  # none of this conversation's own lines
    alone, _ = await _ask(store, keys, memory, "what is my axolotl called?", RecallOptions())
    assert "Quibblefrond" not in alone


async def test_user_scope_in_a_brand_new_chat(any_redis: aioredis.Redis, prefix: str) -> None:
    """The first message of a chat nothing was stored in yet already recalls the older chat."""
    store = MemoryStore(any_redis, ttl_s=3600)
    await _chat(store, prefix, "old-chat", ["My axolotl is called Quibblefrond.", *FILLER])
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "fresh")
    memory = keys.user_keys.memory_set(user_scope("demo"))
    text, _ = await _ask(store, keys, memory, "my axolotl's name?", RecallOptions(scope="user"))
    assert 'other chat "old-chat"' in text and "Quibblefrond" in text


async def test_user_scope_reads_at_most_user_chats(any_redis: aioredis.Redis, prefix: str) -> None:
    """With more chats than recall_user_chats, the most recently updated ones are read, and
    only the postings of the query's terms."""
    store = MemoryStore(any_redis, ttl_s=3600)
    for day in range(4):
        await _chat(
            store, prefix, f"chat{day}", [f"Quibblefrond day {day}"], start_ms=T0 + day * DAY_MS
        )
    keys, _ = await _chat(store, prefix, "now", ["hi"], start_ms=T0 + 9 * DAY_MS)
    _, postings = await store.load(
        keys, keys.user_keys.memory_set("ns:demo"), tail=1, list_chats=True
    )
    others = [m for m in postings.chats if m.startswith("c:") and m != keys.index_member]
    read = await store.load_chats(keys.user_keys, others, query_terms=["quibblefrond"], max_chats=2)
    assert [c.keys.conversation for c in read] == ["chat3", "chat2"]
    assert all(set(c.postings.seqs) == {"quibblefrond"} for c in read)


@pytest.mark.parametrize("others", [1, 6])
async def test_user_scope_prunes_conversations_that_are_gone(
    any_redis: aioredis.Redis, prefix: str, others: int
) -> None:
    """Conversations whose keys expired or were deleted leave the user's index when a
    user-scope read finds them gone, so that what it reads does not grow with every chat the
    user ever had; live chats, memory sets and a chat being written stay (both paths: fewer
    chats than recall_user_chats, and more)."""
    store = MemoryStore(any_redis, ttl_s=3600)
    for n in range(others):
        await _chat(store, prefix, f"live{n}", [f"Quibblefrond {n}"], start_ms=T0 + n * DAY_MS)
    keys, _ = await _chat(store, prefix, "now", ["hi"], start_ms=T0 + 9 * DAY_MS)
    user = keys.user_keys
    await any_redis.sadd(user.index, *(f"c:gone{n}" for n in range(250)))
    half = user.conversation("half")  # its meta gone, its turns not: not pruned
    await any_redis.zadd(half.turns, {"x": 1})
    await any_redis.sadd(user.index, half.index_member)
    members = [_s(m) for m in await any_redis.smembers(user.index)]
    others_now = [m for m in members if m.startswith("c:") and m != keys.index_member]
    read = await store.load_chats(user, others_now, query_terms=["quibblefrond"], max_chats=4)
    assert len(read) == min(others, 4)
    left = {_s(m) for m in await any_redis.smembers(user.index)}
    assert not any(m.startswith("c:gone") for m in left)
    assert {f"c:live{n}" for n in range(others)} | {"c:now", "c:half", "ns:demo"} <= left
    assert len(left) == others + 3


def _s(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def test_fetch_many_reads_several_chats(any_redis: aioredis.Redis, prefix: str) -> None:
    """The chosen lines of several chats come back in one round trip, per chat, in seq order."""
    store = MemoryStore(any_redis, ttl_s=3600)
    one, _ = await _chat(store, prefix, "one", ["a1", "a2", "a3"])
    two, _ = await _chat(store, prefix, "two", ["b1", "b2"])
    got = await store.fetch_many([(one, [3, 1, 9]), (two, []), (two, [2])])
    assert [[t.text for t in group] for group in got] == [["a1", "a3"], [], ["b2"]]


# -- through the hook ---------------------------------------------------------------------------

ALIASES: dict[str, dict[str, Any]] = {
    "chat": {"memory": {"enabled": True, "recall": {"scope": "user"}}},
    "solo": {"memory": {"enabled": True, "recall": {"max_chars": 400}}},
}


def _hook(client: aioredis.Redis, prefix: str) -> MemoryHook:
    return MemoryHook(
        settings=MemorySettings(key_prefix=prefix, worker_in_proxy=False),
        redis=client,
        alias_lookup=lambda model: ALIASES.get(model),
    )


async def _turn(hook: MemoryHook, model: str, conversation: str, text: str, n: int) -> Any:
    data: dict[str, Any] = {
        "model": model,
        "user": "u-A",
        "messages": [{"role": "user", "content": text}],
        "litellm_call_id": f"call-{conversation}-{n}",
        "metadata": {"conversation_id": conversation, "headers": {"x-memory-debug": "1"}},
    }
    await hook.async_pre_call_hook(Auth(), None, data, "acompletion")
    await hook.async_post_call_success_hook(data, Auth(), model_response(f"noted {n}"))
    await hook.drain()
    return data


async def test_hook_recalls_across_chat_ids_and_reports_the_layer(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """Through the hook: an alias with recall_scope user recalls chat A's line in chat B, and
    x-memory-layers reports the recall layer's characters."""
    hook = _hook(any_redis, prefix)
    await _turn(hook, "chat", "chat-a", "My axolotl is called Quibblefrond.", 0)
    data = await _turn(hook, "chat", "chat-b", "What was my axolotl called again?", 1)
    system = memory_text(data["messages"])
    assert 'other chat "chat-a"' in system and "Quibblefrond" in system
    headers = await hook.async_post_call_response_headers_hook(data, Auth(), None, {})
    assert headers is not None
    layers = json.loads(headers["x-memory-layers"])
    assert layers["earlier_lines"] > len("Quibblefrond")
    solo = await _turn(hook, "solo", "chat-c", "What was my axolotl called again?", 2)
    assert "Quibblefrond" not in memory_text(solo["messages"])
    assert hook.counters["precall_errors"] == 0


def test_postings_of_one_conversation_only_hold_query_terms() -> None:
    """Sanity of the shared helper used by the scope tests: index terms of a line."""
    postings: dict[str, list[int]] = defaultdict(list)
    for seq, text in enumerate(["Quibblefrond day 1"]):
        for term in recall.index_terms(text):
            postings[term].append(seq)
    assert "quibblefrond" in postings


@settings(max_examples=300, deadline=None)
@given(
    st.integers(min_value=-(10**13), max_value=10**13),
    st.text(max_size=20),
    st.text(max_size=80),
    st.text(max_size=50),
    st.sampled_from([None, "Asia/Kolkata", "America/St_Johns", "Not/AZone"]),
)
def test_line_size_bounds_the_line_as_shown(
    ts: int, speaker: str, text: str, chat: str, zone: str | None
) -> None:
    """earlier_line_chars (computed without escaping) is never below what the line takes in the
    built section, so a budget is never exceeded."""
    line = EarlierLine(ts, speaker, text, chat)
    built = build_system_message(PromptLayers(earlier_lines=[line], timezone=zone))
    shown = [x for x in built.text.splitlines() if x.startswith("- [")]
    assert sum(len(x) + 1 for x in shown) <= earlier_line_chars(line, zone)


async def test_span_script_reloaded_after_a_flush(fake_redis: aioredis.Redis, prefix: str) -> None:
    """A server that lost its scripts (restart, SCRIPT FLUSH) answers NOSCRIPT inside the load
    pipeline: the script is loaded again and the read repeated."""
    store = MemoryStore(fake_redis, ttl_s=3600)
    keys, memory = await _chat(store, prefix, "c1", ["a b c", "d e f"], step_ms=DAY_MS)
    await fake_redis.script_flush()
    _, postings = await store.load(keys, memory, tail=1, date_spans=[(T0, T0 + DAY_MS)])
    assert postings.spans == [DateSeqs(1, ((1, 2),))]


async def test_a_date_finds_lines_imported_after_newer_chat(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """An import appends its lines, with their real (older) times, after the turns a user has
    already said through the proxy (tools/importer.py), so the stored times are not in seq
    order. The date is found through the time index (seq_spans.lua), not a binary search over the
    times (which walked into the newer chat and lifted nothing): the line said on the named day
    is recalled, not the newest line that shares the words."""
    from litellm_memory_hook.engine.identity import Identity
    from litellm_memory_hook.tools.histories import HistoryLine
    from litellm_memory_hook.tools.importer import import_lines

    store = MemoryStore(any_redis, ttl_s=3600)
    keys, memory = await _chat(store, prefix, "c1", FILLER * 2, start_ms=T0 + 30 * DAY_MS)
    who = Identity("master", "u-A", "c1", "demo", keys, memory, "demo")
    texts = [f"we talked about the garden plan {i}" for i in range(10)]
    lines = [HistoryLine("user", text, T0 + i * DAY_MS) for i, text in enumerate(texts)]
    await import_lines(store, who, lines)
    later = indexed_chain(_turns(FILLER[:45], T0 + 31 * DAY_MS))
    await store.append(keys, later)  # newer chat: the imported lines leave the window
    named = datetime.fromtimestamp((T0 + DAY_MS) / 1000, UTC)
    question = f"the garden plan of {named:%d %B %Y}?"
    _, prepared = await _ask(store, keys, memory, question, RecallOptions(mode="fixed", k=1))
    assert [t.text for t in prepared.recalled] == [texts[1]]


async def test_a_date_lifts_its_line_in_an_import_whose_times_are_out_of_order(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """``import`` takes a jsonl whose ``ts`` are out of file order (a merged or re-sorted log,
    or an undated first line before dated ones): the line said on the named day is recalled as
    it is when the same lines come in time order (the import sorts them, and the time index
    finds a date in any stored order)."""
    from litellm_memory_hook.engine.identity import Identity
    from litellm_memory_hook.tools.histories import HistoryLine
    from litellm_memory_hook.tools.importer import import_lines

    store = MemoryStore(any_redis, ttl_s=3600)
    texts = [f"we talked about the garden plan {i}" for i in range(10)]
    asked_at = T0 + 40 * DAY_MS

    async def recalled(conversation: str, order: list[int]) -> list[str]:
        keys = ConversationKeys.for_ids(prefix, "master", "u-A", conversation)
        memory = keys.user_keys.memory_set(user_scope("demo"))
        who = Identity("master", "u-A", conversation, "demo", keys, memory, "demo")
        lines = [HistoryLine("user", texts[i], T0 + i * DAY_MS) for i in order]
        lines += [
            HistoryLine("user", text, T0 + 20 * DAY_MS + k * 60_000)
            for k, text in enumerate(FILLER)
        ]
        await import_lines(store, who, lines)
        prepared = await prepare(
            store,
            keys,
            memory,
            [{"role": "user", "content": "the garden plan on 2023-05-07?"}],  # T0 + 6 days
            ContextOptions(recall=RecallOptions(mode="fixed", k=1), timezone="UTC"),
            now_ms=asked_at,
        )
        assert prepared is not None
        return [t.text for t in prepared.recalled]

    assert await recalled("in-order", list(range(10))) == [texts[6]]
    assert await recalled("shuffled", [7, 2, 9, 0, 5, 3, 8, 1, 6, 4]) == [texts[6]]
