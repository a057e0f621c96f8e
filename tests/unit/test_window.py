"""The recent window: budgets, tool groups, empty content (cases C22, C24, C26)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from litellm_memory_hook.core.message_text import content_text, is_blank
from litellm_memory_hook.core.messages import message_chars
from litellm_memory_hook.core.window import build_window, fit_window, group_units

CALL = {
    "id": "c1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city":"Pune"}'},
}
C24 = [
    {"role": "user", "content": "weather?"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c1", "content": "31C"},
    {"role": "assistant", "content": "It's 31C."},
]
NEW = [{"role": "user", "content": "and tomorrow?"}]


def _valid(window: list[dict[str, Any]]) -> None:
    """No orphan tool message, no partial group, no empty text content."""
    open_calls: set[str] = set()
    for i, m in enumerate(window):
        if m["role"] == "tool":
            assert m["tool_call_id"] in open_calls
        elif m.get("tool_calls"):
            open_calls = {c["id"] for c in m["tool_calls"]}
            answered = set()
            for later in window[i + 1 :]:
                if later["role"] != "tool":
                    break
                answered.add(later["tool_call_id"])
            assert answered == open_calls
        else:
            assert not is_blank(content_text(m.get("content")))


def test_budget_that_cuts_inside_a_tool_group_drops_the_group_whole() -> None:
    """Case C24: a budget between the call and its result never keeps an orphan tool message."""
    for budget in range(20, 120):
        window = build_window(C24, NEW, max_chars=budget, max_messages=40)
        _valid(window)
        assert window[-1] == NEW[0]
        assert window[0]["role"] != "tool"


def test_group_with_a_missing_reply_is_removed() -> None:
    """Case C24: two tool_calls and only one reply: the group goes whole."""
    two = {**CALL, "id": "c2"}
    history = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "", "tool_calls": [CALL, two]},
        {"role": "tool", "tool_call_id": "c1", "content": "31C"},
        {"role": "assistant", "content": "ok"},
    ]
    window = build_window(history, NEW, max_chars=8000, max_messages=40)
    assert [m["role"] for m in window] == ["user", "assistant", "user"]
    _valid(window)


def test_whole_group_kept_and_null_content_is_fine() -> None:
    """content: null with tool_calls is handled (no len(None)) and kept as None, not ""."""
    window = build_window(C24, NEW, max_chars=8000, max_messages=40)
    assert [m["role"] for m in window] == ["user", "assistant", "tool", "assistant", "user"]
    assert window[1]["content"] is None


def test_message_budget_and_char_budget() -> None:
    """Walk back until 40 messages or 8000 characters, whichever first; the window then starts
    at a user message (m061 is a reply, so it goes and 39 messages are sent)."""
    history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i:03d} " + "a" * 95}
        for i in range(100)
    ]
    window = build_window(history, NEW, max_chars=8000, max_messages=40)
    assert len(window) == 39 and window[0]["content"].startswith("m062")
    assert build_window(history, NEW, max_chars=8000, max_messages=41)[0]["content"][:4] == "m060"
    window = build_window(history, NEW, max_chars=1000, max_messages=40)
    assert sum(message_chars(m) for m in window) <= 1000
    assert len(window) == 9 and window[0]["content"].startswith("m092")
    assert window[-2]["content"].startswith("m099")


def test_a_trimmed_window_starts_with_a_user_message() -> None:
    """mckaywrigley/chatbot-ui#1656: a trimmed history that starts with a reply is a 400 from
    Anthropic and Bedrock; the replies and tool groups before the first kept question go."""
    history = [
        {"role": "user", "content": "weather in Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": "31C"},
        {"role": "assistant", "content": "31C and sunny"},
        {"role": "assistant", "content": "anything else?"},
        {"role": "user", "content": "no, thanks"},
        {"role": "assistant", "content": "bye"},
    ]
    for count in range(2, 8):
        window = build_window(history, NEW, max_chars=8000, max_messages=count)
        assert window[0]["role"] == "user", count
        assert window[-1] == NEW[0]
    assert build_window(history, NEW, max_chars=8000, max_messages=5) == [*history[5:], NEW[0]]
    assert build_window(history, NEW, max_chars=8000, max_messages=2) == NEW
    # room for the question once the tool group goes: the question and its replies stay
    for count in (6, 7):
        window = build_window(history, NEW, max_chars=8000, max_messages=count)
        assert window == [history[0], *history[3:], NEW[0]]
    # a stored history that starts with a greeting (an import, a client that switched to
    # sending only the new message) loses it even when it fits; the client's own history
    # (verbatim) is sent as it is when it fits, and follows the rule when it is trimmed
    greeting = [{"role": "assistant", "content": "Hi! How can I help?"}, *history[5:]]
    assert build_window(greeting, NEW, max_chars=8000, max_messages=40) == [*history[5:], NEW[0]]
    window = build_window(greeting, NEW, max_chars=8000, max_messages=40, verbatim=True)
    assert window == [*greeting, NEW[0]]
    window = build_window(greeting, NEW, max_chars=8000, max_messages=3, verbatim=True)
    assert window == [*history[5:], NEW[0]]
    assert build_window(greeting, NEW, max_chars=8000, max_messages=2, verbatim=True) == NEW


def _call(number: int) -> dict[str, Any]:
    return {**CALL, "id": f"c{number}"}


def _step(number: int, result: str = "ok") -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": None, "tool_calls": [_call(number)]},
        {"role": "tool", "tool_call_id": f"c{number}", "content": result},
    ]


def test_a_tool_continuation_keeps_its_question_whatever_its_size() -> None:
    """An agent's new turn is a tool call and its result: the user message that asked, and
    every step since, go whole with it (a 9,000-character result over the 8,000 budget, 25
    steps over the 40-message budget); older history gives way and starts with a user message."""
    older = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
    asked = {"role": "user", "content": "Summarise notes.txt"}
    big = _step(1, "n" * 9000)
    for verbatim in (False, True):
        window = build_window(
            [*older, asked], big, max_chars=8000, max_messages=40, verbatim=verbatim
        )
        assert window == [asked, *big]
        steps = [m for number in range(1, 25) for m in _step(number)]
        window = build_window(
            [*older, asked, *steps], _step(25), max_chars=8000, max_messages=40, verbatim=verbatim
        )
        assert window == [asked, *steps, *_step(25)] and len(window) == 51
        window = build_window([*older, asked], _step(2), max_chars=8000, max_messages=40)
        assert window == [*older, asked, *_step(2)]
    # no question anywhere: nothing to add, and the stored replies before still go
    assert build_window(older[1:], _step(3), max_chars=8000, max_messages=40) == _step(3)


def test_a_follow_up_to_a_long_agent_episode_keeps_its_task_and_answer() -> None:
    """An agent's episode whose tool results pass the budget, then a follow-up question: the
    window keeps the task and the final answer, in place of the oldest tool steps. Before, it
    started after the task, so every step and the answer went too (a window starts with a user
    message) and the model got the follow-up alone."""
    task = {"role": "user", "content": "Compare the three reports."}
    steps = [m for number in range(1, 4) for m in _step(number, f"report {number} " + "r" * 3000)]
    answer = {"role": "assistant", "content": "Report 2 is the strongest."}
    follow = [{"role": "user", "content": "Why report 2?"}]
    for verbatim in (False, True):
        history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
        history += [task, *steps, answer]
        window = build_window(history, follow, max_chars=8000, max_messages=40, verbatim=verbatim)
        assert window == [task, *steps[2:], answer, *follow], verbatim
        _valid(window)
        assert sum(message_chars(m) for m in window) <= 8000
    # a task too long to fit even without the steps: as before, the follow-up alone
    long_task = {"role": "user", "content": "t" * 7980}
    window = build_window([long_task, *steps, answer], follow, max_chars=8000, max_messages=40)
    assert window == follow


def test_a_final_answer_over_the_budget_keeps_its_end_after_the_task() -> None:
    """An agent's final answer alone passes the budget: its end goes after the task, in place of
    the tool steps between them (fresh-user report: the follow-up went alone)."""
    task = {"role": "user", "content": "Summarise the logs"}
    final = {"role": "assistant", "content": "word " * 400 + "THE END"}
    follow = [{"role": "user", "content": "shorten it"}]
    window = build_window([task, *_step(1), final], follow, max_chars=1500, max_messages=40)
    assert window[0] == task and window[-1] == follow[0] and len(window) == 3
    assert window[1]["content"].endswith("THE END") and len(window[1]["content"]) < 1500
    fitted = fit_window([task, *_step(1), final], follow, max_chars=1500, max_messages=40)
    assert fitted.history_indices == (0, 3)


def test_a_huge_new_message_reaches_the_model_whole() -> None:
    """Case C22 b: 200,000 characters ending in a question reach the model as sent (the question
    survives, and so does the rest: the client's turn is never cut); no history fits beside it."""
    text = "y" * 200_000 + " Question: what is 2+2?"
    new = [{"role": "user", "content": text}]
    window = build_window(C24, new, max_chars=8000, max_messages=40)
    assert window == new
    parts = [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": "x"}}]
    with_parts = [{"role": "user", "content": parts}]
    assert build_window(C24, with_parts, max_chars=8000, max_messages=40) == with_parts


def test_image_parts_of_the_new_message_reach_the_model() -> None:
    """Case C25: the current message's parts are passed as sent."""
    parts = [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "https://example.invalid/cat.jpg"}},
    ]
    window = build_window([], [{"role": "user", "content": parts}], max_chars=8000, max_messages=40)
    assert window[0]["content"] == parts


def test_empty_messages_in_history_are_dropped() -> None:
    """Case C26: empty and invisible history messages never reach the model."""
    history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "\u200b"},
        {"role": "assistant", "content": "yo"},
    ]
    window = build_window(history, NEW, max_chars=8000, max_messages=40)
    assert [m["content"] for m in window] == ["hi", "yo", "and tomorrow?"]


messages = st.lists(
    st.one_of(
        st.builds(lambda t: {"role": "user", "content": t}, st.text(max_size=30)),
        st.builds(lambda t: {"role": "assistant", "content": t}, st.text(max_size=30)),
        st.just({"role": "assistant", "content": None, "tool_calls": [CALL]}),
        st.just({"role": "tool", "tool_call_id": "c1", "content": "31C"}),
        st.just({"role": "tool", "tool_call_id": "zz", "content": "stray"}),
    ),
    max_size=30,
)


@given(messages, st.integers(min_value=200, max_value=600), st.integers(min_value=1, max_value=12))
def test_any_history_gives_a_valid_window_within_budget(
    history: list[dict[str, Any]], chars: int, count: int
) -> None:
    """Whatever the history, the window is valid and within both budgets."""
    window = build_window(history, NEW, max_chars=chars, max_messages=count)
    _valid(window)
    assert len(window) <= max(count, 1)
    assert sum(message_chars(m) for m in window) <= chars
    assert window[-1] == NEW[0]
    assert window[0]["role"] == "user"
    client = build_window(history, NEW, max_chars=chars, max_messages=count, verbatim=True)
    whole = [m for unit in group_units(history, verbatim=True) for m in unit]
    assert client[:-1] == whole or client[0]["role"] == "user"


@given(
    messages,
    st.integers(min_value=200, max_value=600),
    st.integers(min_value=1, max_value=12),
    st.booleans(),
)
def test_fit_window_names_the_history_message_of_each_window_message(
    history: list[dict[str, Any]], chars: int, count: int, verbatim: bool
) -> None:
    """``fit_window``: the same window, and for each of its history messages the index of the
    message it is (or whose end it keeps), in order: the recent window's stored turns are never
    recalled, so these must be exact even when an exchange's question comes from before a cut."""
    fitted = fit_window(history, NEW, max_chars=chars, max_messages=count, verbatim=verbatim)
    plain = build_window(history, NEW, max_chars=chars, max_messages=count, verbatim=verbatim)
    assert fitted.messages == plain
    assert len(fitted.history_indices) == len(plain) - 1
    assert list(fitted.history_indices) == sorted(set(fitted.history_indices))
    for message, index in zip(plain, fitted.history_indices, strict=False):
        source = history[index]
        assert message is source or (
            message["role"] == source["role"]
            and content_text(source.get("content")).endswith(content_text(message["content"]))
        )


@given(messages, st.integers(min_value=200, max_value=600), st.integers(min_value=1, max_value=12))
def test_a_tool_continuation_window_starts_with_its_question(
    history: list[dict[str, Any]], chars: int, count: int
) -> None:
    """Whatever the stored history and budgets, a tool continuation's window starts with a
    user message when the history holds one, and ends with the new turn."""
    new = _step(9)
    window = build_window(history, new, max_chars=chars, max_messages=count)
    _valid(window)
    assert window[-2:] == new
    if any(m["role"] == "user" for unit in group_units(history) for m in unit):
        assert window[0]["role"] == "user"


def test_newest_history_message_over_the_budget_keeps_its_end() -> None:
    """A long last reply is not dropped whole: its end fills the room its question leaves."""
    history = [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "hi"},
        {"role": "user", "content": "write me an essay"},
        {"role": "assistant", "content": "z" * 20_000 + " THE END"},
    ]
    window = build_window(history, NEW, max_chars=8000, max_messages=40)
    assert [m["role"] for m in window] == ["user", "assistant", "user"]
    assert window[0] == history[2]
    assert window[1]["content"].endswith("THE END")
    assert sum(message_chars(m) for m in window) == 8000
    # no room for the question and MIN_TAIL_CHARS of the reply, or for two more messages: the
    # reply goes too (a window never starts with one)
    long_question = [{"role": "user", "content": "q" * 7_900}, history[3]]
    assert build_window(long_question, NEW, max_chars=8000, max_messages=40) == NEW
    assert build_window(history, NEW, max_chars=8000, max_messages=2) == NEW
    # an unanswered question (a failed call) is cut alone
    unanswered = [{"role": "user", "content": "y" * 20_000 + " WHY?"}]
    [cut, _] = build_window(unanswered, NEW, max_chars=8000, max_messages=40)
    assert cut["content"].endswith("WHY?") and cut["role"] == "user"


def test_over_long_input_text_part_is_cut_without_an_empty_part() -> None:
    """Case C26 / C22 b: an input_text part over the budget is cut (its end kept) into one text
    part; no empty text part is added and the image part stays."""
    parts = [
        {"type": "input_text", "text": "q" * 20_000 + " the question?"},
        {"type": "image_url", "image_url": {"url": "https://x.invalid/a.png"}},
    ]
    [message] = build_window(
        [], [{"role": "user", "content": parts}], max_chars=8000, max_messages=40
    )
    text_parts = [p for p in message["content"] if p["type"] in ("text", "input_text")]
    assert len(text_parts) == 1 and text_parts[0]["text"].endswith("the question?")
    assert all(p.get("text", "x") for p in message["content"])
    assert message["content"][-1]["type"] == "image_url"


def test_a_last_reply_over_the_budget_by_its_reasoning_keeps_the_window_in_budget() -> None:
    """The budget now counts a message's reasoning, so a last reply that carries 8,000
    characters of ``reasoning_content`` is over a 1,000-character budget and takes the path of
    a reply "over the budget that keeps its end": but only its text is cut, its reasoning goes
    whole, and the window is still many times the budget (what the change meant to end)."""
    history = [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "Four.", "reasoning_content": "r" * 8000},
    ]
    window = build_window(history, NEW, max_chars=1000, max_messages=40)
    assert sum(message_chars(m) for m in window) <= 1000, [message_chars(m) for m in window]
