"""E11: the window's day marks (core/days.py), and the case through ``prepare``: two lines
said 26 hours ago come back with the day they were said on, under the current date."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from litellm_memory_hook.core.days import MAX_DAY_MARKS, day_marks
from litellm_memory_hook.core.indexing import indexed
from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.engine.options import ContextOptions
from litellm_memory_hook.engine.rebuild import prepare
from litellm_memory_hook.store.keys import ConversationKeys, user_scope
from litellm_memory_hook.store.redis_store import MemoryStore
from tests.support.prompt_view import memory_text

HOUR = 3_600_000
#: Thursday 2026-12-03 10:00 UTC
NOW = 1_796_292_000_000


def test_no_marks_when_everything_is_from_today() -> None:
    assert day_marks([(NOW - HOUR, "hi"), (NOW, "and now")], NOW) == []
    assert day_marks([(0, "a client line the store does not hold"), (NOW, "hi")], NOW) == []
    assert day_marks([], NOW) == []


def test_a_mark_per_day_oldest_first_with_the_first_words() -> None:
    said = [
        (NOW - 74 * HOUR, "Three days back."),
        (NOW - 26 * HOUR, "My exam is tomorrow at 9 am, I am so nervous about the whole thing."),
        (NOW - 26 * HOUR + 1, "Good luck with the exam!"),
        (NOW, "When is my exam?"),
    ]
    assert day_marks(said, NOW) == [
        'Monday 2026-11-30 (3 days ago): the messages from "Three days back." on',
        'Wednesday 2026-12-02 (yesterday): the messages from "My exam is tomorrow at 9 am, I am '
        'so nervous ab…" on',
        'Thursday 2026-12-03 (today): the messages from "When is my exam?" on',
    ]


def test_days_begin_at_the_users_midnight() -> None:
    # now is 2026-12-03 10:00 UTC: 23:00 in Auckland (+13) and 02:00 in Los Angeles (-8); 9 hours
    # earlier is the same day in Auckland and in UTC, the day before in Los Angeles
    late = [(NOW - 9 * HOUR, "before"), (NOW, "now")]
    assert day_marks(late, NOW, "Pacific/Auckland") == []
    assert day_marks(late, NOW, "UTC") == []
    assert [m.split(" (")[1][:9] for m in day_marks(late, NOW, "America/Los_Angeles")] == [
        "yesterday",
        "today): t",
    ]


@given(
    st.lists(st.tuples(st.integers(min_value=0, max_value=NOW), st.text(max_size=300)), max_size=60)
)
def test_any_window_gives_a_bounded_oldest_first_list(said: list[tuple[int, str]]) -> None:
    marks = day_marks([*sorted(said), (NOW, "now")], NOW)
    assert len(marks) <= MAX_DAY_MARKS
    assert all(len(mark) < 160 for mark in marks)
    assert marks == [] or "(today)" in marks[-1]


async def test_e11_yesterdays_lines_come_back_dated(store: MemoryStore, prefix: str) -> None:
    """E11: "My exam is tomorrow at 9 am" said 26 hours ago is in the window; the prompt names
    today (Thursday) and marks that those lines were said yesterday."""
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "c1")
    lines = [
        Turn(
            role="user", text="My exam is tomorrow at 9 am, I am so nervous.", ts_ms=NOW - 26 * HOUR
        ),
        Turn(role="assistant", text="Good luck with the exam!", ts_ms=NOW - 26 * HOUR + 5_000),
    ]
    await store.append(keys, [indexed(t) for t in lines])
    ask = {"role": "user", "content": "When is my exam?"}
    prepared = await prepare(
        store,
        keys,
        keys.user_keys.memory_set(user_scope("demo")),
        [ask],
        ContextOptions(layout="cache"),
        now_ms=NOW,
    )
    assert prepared is not None
    text = memory_text(prepared.messages)
    assert "Thursday 2026-12-03 10:00 UTC" in text
    assert 'Wednesday 2026-12-02 (yesterday): the messages from "My exam is tomorrow' in text
    assert 'Thursday 2026-12-03 (today): the messages from "When is my exam?" on' in text
    assert [m["content"] for m in prepared.messages if m["role"] != "system"][-1] == (
        "When is my exam?"
    )
