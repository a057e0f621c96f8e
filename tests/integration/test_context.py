"""Planning a turn: new-message-only and whole-history clients, seeding, regenerate (C23)."""

from __future__ import annotations

import json
from dataclasses import replace as dc_replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from litellm_memory_hook.core.indexing import indexed
from litellm_memory_hook.core.models import ConversationState, Turn
from litellm_memory_hook.core.plan import plan_turn, plan_with_buffered
from litellm_memory_hook.core.stored_messages import message_to_turn
from litellm_memory_hook.engine.options import ContextOptions
from litellm_memory_hook.engine.rebuild import prepare
from litellm_memory_hook.engine.recall_step import RecallOptions
from litellm_memory_hook.store.keys import ConversationKeys, MemoryKeys, user_scope
from litellm_memory_hook.store.redis_store import MemoryStore

NOW = 1_700_000_000_000


def _state(*pairs: tuple[str, str], ts: int = NOW - 10_000) -> ConversationState:
    tail = [Turn(role=r, text=t, ts_ms=ts, seq=i + 1) for i, (r, t) in enumerate(pairs)]
    return ConversationState(meta={"seq": str(len(tail))} if tail else {}, tail=tail)


def _user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def _assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def test_empty_store_is_seeded_from_the_clients_history() -> None:
    """With nothing stored, the client's earlier messages are history and are stored too."""
    plan = plan_turn([_user("a"), _assistant("b"), _user("c")], _state(), now_ms=NOW)
    assert plan is not None
    assert [m["content"] for m in plan.history] == ["a", "b"]
    assert [t.text for t in plan.turns_to_store()] == ["a", "b", "c"]
    # only the new turn is made into turns on the request's path; the seed waits for the write
    assert [t.text for t in plan.pending] == ["c"] and plan.seeded == 2
    assert plan.seed is not None and [m["content"] for m in plan.seed.messages] == ["a", "b"]


def test_the_clients_edit_wins_over_the_stored_copy() -> None:
    """Issue 8: a whole-history client is authoritative for what it sends: an edited first
    message reaches the model as edited, and the stored turns from the edit on are replaced by
    the client's (the edited message, the reply after it, then the new message)."""
    state = _state(("user", "a"), ("assistant", "b"))
    plan = plan_turn(
        [_user("a (edited by the app)"), _assistant("b"), _user("c")], state, now_ms=NOW
    )
    assert plan is not None and plan.verbatim
    assert [m["content"] for m in plan.history] == ["a (edited by the app)", "b"]
    assert [t.text for t in plan.pending] == ["a (edited by the app)", "b", "c"]
    assert [t.seq for t in plan.replace] == [1, 2]


def test_a_repair_keeps_the_times_the_messages_were_said() -> None:
    """A whole-history client's request repairs the store (a regenerate made while Redis could
    not be read was stored as a new turn: B, b1, B, b2; the client shows B, b2): the turns it
    stores again keep the times they were said, never before the turn they follow; its edited
    message and the new one are said now (fresh-user report: every turn after the first
    difference was stamped with the time of the repair)."""
    said = [("user", "Q"), ("assistant", "A"), ("user", "B"), ("assistant", "b1")]
    said += [("user", "B"), ("assistant", "b2")]
    tail = [
        Turn(role=r, text=t, ts_ms=NOW - 60_000 + i * 1000, seq=i + 1)
        for i, (r, t) in enumerate(said)
    ]
    state = ConversationState(meta={"seq": "6"}, tail=tail)
    client = [_user("Q"), _assistant("A"), _user("B"), _assistant("b2"), _user("C")]
    plan = plan_turn(client, state, now_ms=NOW)
    assert plan is not None and [t.seq for t in plan.replace] == [4, 5, 6]
    assert [(t.text, t.ts_ms) for t in plan.pending] == [("b2", NOW - 55_000), ("C", NOW)]
    # an edit: the edited message is said now, and what follows it never before it
    client = [_user("Q"), _assistant("A"), _user("B, edited"), _assistant("b1"), _user("C")]
    plan = plan_turn(client, state, now_ms=NOW)
    assert plan is not None
    assert [(t.text, t.ts_ms) for t in plan.pending] == [
        ("B, edited", NOW),
        ("b1", NOW),
        ("C", NOW),
    ]


def test_new_message_only_client() -> None:
    """A client that sends only the new message gets the stored history."""
    plan = plan_turn([_user("c")], _state(("user", "a"), ("assistant", "b")), now_ms=NOW)
    assert plan is not None and [m["content"] for m in plan.history] == ["a", "b"]


def test_regenerate_replaces_the_last_reply() -> None:
    """The last user message sent again without its reply replaces the reply, not duplicates."""
    joke = "tell me a joke, please"
    state = _state(("user", "a"), ("assistant", "b"), ("user", joke), ("assistant", "zebra"))
    whole = plan_turn([_user("a"), _assistant("b"), _user(joke)], state, now_ms=NOW)
    only_new = plan_turn([_user(joke)], state, now_ms=NOW)
    for plan in (whole, only_new):
        assert plan is not None and plan.regenerate
        assert [t.text for t in plan.replace] == ["zebra"]
        assert plan.pending == ()
        assert [m["content"] for m in plan.history] == ["a", "b"]


def test_a_real_repeat_is_not_a_regenerate() -> None:
    """The same text after the reply was seen (history ends with it), or much later, is new."""
    state = _state(("user", "ok"), ("assistant", "fine"))
    seen = plan_turn([_user("ok"), _assistant("fine"), _user("ok")], state, now_ms=NOW)
    later = plan_turn([_user("ok")], state, now_ms=NOW + 3_600_000)
    for plan in (seen, later):
        assert plan is not None and not plan.regenerate and [t.text for t in plan.pending] == ["ok"]


def test_echoed_injected_blocks_are_removed_and_client_prompt_kept() -> None:
    """Case C23: a system block we injected earlier and the client echoed is removed."""
    messages = [
        {"role": "system", "content": "You are Tutor."},
        {"role": "system", "content": "<memory>…previously injected…</memory>"},
        _user("hi"),
    ]
    plan = plan_turn(messages, _state(), now_ms=NOW)
    assert plan is not None and plan.system_texts == ("You are Tutor.",)
    assert [t.text for t in plan.pending] == ["hi"]


def test_no_new_user_turn_means_no_plan() -> None:
    """A request ending with an assistant prefill is planned (D03: the prefill stays last, the
    user turn is stored); one with no user turn at all, or junk, is not."""
    plan = plan_turn([_user("a"), _assistant("b")], _state(), now_ms=NOW)
    assert plan is not None and plan.prefill == "b" and [t.text for t in plan.pending] == ["a"]
    assert plan.new == (_user("a"), _assistant("b"))
    assert plan_turn([_assistant("b")], _state(), now_ms=NOW) is None
    assert plan_turn("junk", _state(), now_ms=NOW) is None
    assert plan_turn([None, "hello", {"role": "user", "content": "hi"}], _state(), now_ms=NOW)


def _filler(count: int = 60) -> list[Turn]:
    """Chat turns that fill the recent window, newer than the lines a test recalls."""
    return [
        Turn(
            role="user" if i % 2 else "assistant",
            text=f"filler chat number {i} " * 5,
            ts_ms=NOW - 10**7 + i,
        )
        for i in range(count)
    ]


async def test_prepare_builds_system_window_and_recall(store: MemoryStore, prefix: str) -> None:
    """Old lines outside the window are recalled by rare shared words; window lines are not."""
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "c1")
    old = [
        Turn(role="user", text="My sister Seema lives in Pune near the river", ts_ms=NOW - 10**8)
    ]
    filler = _filler()
    await store.append(keys, [indexed(t) for t in old + filler])
    options = ContextOptions(operator_rules="You are Mira.")
    prepared = await prepare(
        store, keys, _memory(keys), [_user("Where does Seema live?")], options, now_ms=NOW
    )
    assert prepared is not None
    system = prepared.messages[0]
    assert system["role"] == "system" and system["content"].startswith("You are Mira.")
    assert "Seema lives in Pune" in system["content"]
    assert [t.seq for t in prepared.recalled] == [1]
    assert prepared.messages[-1] == _user("Where does Seema live?")
    assert len(prepared.messages) - 2 == 39  # 40-message window: 39 stored + the new one
    assert prepared.layer_chars["earlier_lines"] > 0


async def test_a_photo_recalls_no_earlier_photo(store: MemoryStore, prefix: str) -> None:
    """A message that is a photo alone has no words to recall by: its ``[image]`` placeholder
    was the query, so every earlier photo line outside the window was recalled (``user:
    [image]``, nothing the model can use). Its text still recalls as before."""
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "c1")
    old = [
        Turn(role="user", text="Look at my holiday photo\n[image]", ts_ms=NOW - 10**8),
        Turn(role="user", text="[image]", ts_ms=NOW - 10**8 + 1),
    ]
    filler = _filler()
    await store.append(keys, [indexed(t) for t in old + filler])
    photo = {"type": "image_url", "image_url": {"url": "https://example.com/c.png"}}
    prepared = await prepare(
        store,
        keys,
        _memory(keys),
        [{"role": "user", "content": [photo]}],
        ContextOptions(),
        now_ms=NOW,
    )
    assert prepared is not None and prepared.recalled == []
    assert "earlier_lines" not in prepared.messages[0]["content"]
    question = {"type": "text", "text": "Where was the holiday?"}
    asked = [{"role": "user", "content": [question, photo]}]
    prepared = await prepare(store, keys, _memory(keys), asked, ContextOptions(), now_ms=NOW)
    assert prepared is not None and [t.seq for t in prepared.recalled] == [1]


async def test_a_follow_up_to_an_agent_episode_sees_its_task_once(
    store: MemoryStore, prefix: str
) -> None:
    """After an agent's episode whose tool results pass the window budget, a follow-up gets the
    task and the final answer in the window (the oldest tool steps give way), and recall never
    repeats the task as an earlier line: the window's history starts at the task, though the
    steps after it were left out."""
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "c1")
    task = Turn(role="user", text="Compare the Falcon and Heron reports", ts_ms=NOW - 10**6)
    steps: list[Turn] = []
    for number in (1, 2, 3):
        call = {"id": f"c{number}", "type": "function", "function": {"name": "read"}}
        call["function"]["arguments"] = "{}"
        steps.append(Turn(role="assistant", text="", ts_ms=NOW - 10**6, tool_calls=(call,)))
        steps.append(
            Turn(role="tool", text="r" * 3000, ts_ms=NOW - 10**6, tool_call_id=f"c{number}")
        )
    answer = Turn(role="assistant", text="Heron is stronger.", ts_ms=NOW - 10**6)
    await store.append(keys, [indexed(t) for t in (task, *steps, answer)])
    ask = "Why is Heron stronger than Falcon in the reports?"
    prepared = await prepare(store, keys, _memory(keys), [_user(ask)], ContextOptions(), now_ms=NOW)
    assert prepared is not None
    window = prepared.messages[1:]
    roles = ["user", "assistant", "tool", "assistant", "tool", "assistant", "user"]
    assert [m["role"] for m in window] == roles and window[1]["tool_calls"][0]["id"] == "c2"
    assert window[0]["content"] == task.text and window[-2]["content"] == answer.text
    assert prepared.recalled == [] and task.text not in prepared.messages[0]["content"]


async def test_a_follow_up_to_an_episode_longer_than_the_tail_read_keeps_its_task(
    store: MemoryStore, prefix: str
) -> None:
    """An agent that sends only its new messages ran 30 tool steps: the stored tail a request
    reads (44 turns) holds no user message. A follow-up question still gets the task (read
    back from the store) and the final answer in its window; before, it went alone."""
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "c1")
    task = Turn(role="user", text="Find the root cause of the crash", ts_ms=NOW - 10**6)
    turns = [task]
    for number in range(1, 31):
        call = {"id": f"c{number}", "type": "function", "function": {"name": "read"}}
        call["function"]["arguments"] = "{}"
        turns.append(Turn(role="assistant", text="", ts_ms=NOW - 10**6, tool_calls=(call,)))
        turns.append(
            Turn(role="tool", text=f"log {number}", ts_ms=NOW - 10**6, tool_call_id=f"c{number}")
        )
    turns.append(Turn(role="assistant", text="The zebra module overflowed.", ts_ms=NOW - 10**6))
    await store.append(keys, [indexed(t) for t in turns])
    ask = "Why did it overflow?"
    prepared = await prepare(store, keys, _memory(keys), [_user(ask)], ContextOptions(), now_ms=NOW)
    assert prepared is not None
    window = prepared.messages[1:]
    assert window[0]["content"] == task.text and window[-2]["content"] == turns[-1].text
    assert window[-1]["content"] == ask and len(window) <= 40
    assert window[1]["role"] == "assistant" and window[1]["tool_calls"]  # whole tool groups
    # a second follow-up: the tail read now starts inside the episode and holds the first
    # follow-up; the task still comes first (before: the window began at the first follow-up)
    said = [
        Turn(role="user", text=ask, ts_ms=NOW),
        Turn(role="assistant", text="A counter passed 2^31.", ts_ms=NOW),
    ]
    await store.append(keys, [indexed(t) for t in said])
    again = "And after that?"
    prepared = await prepare(
        store, keys, _memory(keys), [_user(again)], ContextOptions(), now_ms=NOW
    )
    assert prepared is not None
    window = prepared.messages[1:]
    assert window[0]["content"] == task.text and len(window) <= 40
    assert [m["content"] for m in window[-4:]] == [turns[-1].text, ask, said[1].text, again]


async def test_recall_never_repeats_a_message_of_the_window(
    store: MemoryStore, prefix: str
) -> None:
    """A whole-history client's own messages older than the stored tail read have no seq, so
    the window's first seq does not exclude them: recall leaves out a line that says the same
    as a window message (fresh-user report: the agent's task, in the window and again in the
    earlier lines), and ranks one more line for it, so the next best still comes."""
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "c1")
    task = Turn(role="user", text="Find the zebra crash root cause", ts_ms=NOW - 10**7)
    note = Turn(role="assistant", text="Zebra crash notes: the parser", ts_ms=NOW - 10**7 + 1)
    filler = [
        Turn(role="user" if i % 2 else "assistant", text=f"step {i} done", ts_ms=NOW - 10**6 + i)
        for i in range(60)
    ]
    await store.append(keys, [indexed(t) for t in (task, note, *filler)])
    history = [{"role": "user", "content": task.text}]
    history += [t.to_message() for t in filler[-20:]]
    request = [*history, _user("So the zebra crash root cause is known?")]
    for options in (ContextOptions(), ContextOptions(recall=RecallOptions(mode="fixed", k=1))):
        prepared = await prepare(store, keys, _memory(keys), request, options, now_ms=NOW)
        assert prepared is not None
        assert prepared.messages[1]["content"] == task.text  # the client's task, in the window
        assert task.text not in prepared.messages[0]["content"]
        assert [t.text for t in prepared.recalled] == [note.text]


def test_memory_sections_respect_their_budgets() -> None:
    """Case C22 a, c: 500 facts of 200 characters fill the memory budget, not the prompt; pinned
    memories larger than their budget are cut, and come before extracted ones."""
    from litellm_memory_hook.core.budgets import fit_items

    facts = [f"fact {i:03d} " + "x" * 191 for i in range(500)]
    kept = fit_items(facts, 3000)
    assert sum(len(f) for f in kept) <= 3000 and len(kept) == 15 and kept[0] == facts[0]
    huge = fit_items(["p" * 10_000, "second"], 2000)
    assert huge == ("p" * 1999 + "…",)
    assert fit_items(["", "  ", "ok"], 10) == ("ok",)


async def test_prepare_caps_500_memories(store: MemoryStore, prefix: str) -> None:
    """Case C22 a: with 500 stored facts the built system message stays within the budgets."""
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "c1")
    memory = _memory(keys)
    await store.redis.hset(memory.memories, mapping={f"m{i}": "y" * 200 for i in range(500)})
    await store.redis.hset(memory.pinned, mapping={f"p{i}": "P" * 500 for i in range(50)})
    prepared = await prepare(store, keys, memory, [_user("hi")], ContextOptions(), now_ms=NOW)
    assert prepared is not None
    assert 2000 <= prepared.layer_chars["fixed_memories"] < 2400
    assert 2800 <= prepared.layer_chars["memories"] < 3400
    assert len(prepared.messages[0]["content"]) < 6500


def test_short_repeats_and_different_photos_are_new_messages() -> None:
    """A new-message-only client sending "ok" twice, or two different photos, gets two turns;
    an explicit metadata.memory_regenerate still regenerates the short one."""
    state = _state(("user", "ok"), ("assistant", "fine"))
    plan = plan_turn([_user("ok")], state, now_ms=NOW)
    assert plan is not None and not plan.regenerate and [t.text for t in plan.pending] == ["ok"]
    forced = plan_turn([_user("ok")], state, now_ms=NOW, regenerate=True)
    assert forced is not None and [t.text for t in forced.replace] == ["fine"]

    def photo(url: str) -> dict[str, object]:
        return {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}

    first = plan_turn(
        [photo("https://x.invalid/cat.jpg")], _state(("user", "x"), ("assistant", "y")), now_ms=NOW
    )
    assert first is not None
    stored = ConversationState(
        meta={"seq": "2"},
        tail=[
            Turn(role="user", text="[image]", ts_ms=NOW - 5000, seq=1, fp=first.pending[0].fp),
            Turn(role="assistant", text="A cat!", ts_ms=NOW - 4000, seq=2),
        ],
    )
    dog = plan_turn([photo("https://x.invalid/dog.jpg")], stored, now_ms=NOW, regenerate=True)
    assert dog is not None and not dog.regenerate and len(dog.pending) == 1
    same = plan_turn([photo("https://x.invalid/cat.jpg")], stored, now_ms=NOW, regenerate=True)
    assert same is not None and same.regenerate


def test_repeated_tool_results_replace_the_old_answer() -> None:
    """A client sending the same tool call and results again (a retry, or regenerating the
    answer): the call is not stored twice, the old results and answer are replaced, and the
    window holds the call id once."""
    call = {"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}
    tail = [
        Turn(role="user", text="weather?", ts_ms=NOW, seq=1),
        Turn(role="assistant", text="", ts_ms=NOW, seq=2, tool_calls=(call,)),
        Turn(role="tool", text="31C", ts_ms=NOW, seq=3, tool_call_id="c1"),
        Turn(role="assistant", text="It is 31C.", ts_ms=NOW, seq=4),
    ]
    state = ConversationState(meta={"seq": "4"}, tail=tail)
    messages = [
        _user("weather?"),
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "31C"},
    ]
    plan = plan_turn(messages, state, now_ms=NOW)
    assert plan is not None
    assert [t.seq for t in plan.replace] == [3, 4]
    assert [t.role for t in plan.pending] == ["tool"]
    assert [m["role"] for m in plan.history] == ["user"]


def test_tool_results_sent_alone_answer_the_stored_call() -> None:
    """A client that sends only its new messages sends the results of the calls the model
    made in the last (stored) reply, without that reply: the stored call completes the group,
    the results alone are stored; results that answer no stored call, or only some of two,
    still pass through as sent."""
    two = [
        {"id": "c1", "type": "function", "function": {"name": "a", "arguments": "{}"}},
        {"id": "c2", "type": "function", "function": {"name": "b", "arguments": "{}"}},
    ]
    tail = [
        Turn(role="user", text="do a and b", ts_ms=NOW, seq=1),
        Turn(
            role="assistant",
            text="",
            ts_ms=NOW,
            seq=2,
            tool_calls=tuple(two),
            msg={"role": "assistant", "content": None, "tool_calls": two},
        ),
    ]
    state = ConversationState(meta={"seq": "2"}, tail=tail)
    results = [
        {"role": "tool", "tool_call_id": "c2", "content": "B"},
        {"role": "tool", "tool_call_id": "c1", "content": "A"},
    ]
    plan = plan_turn(results, state, now_ms=NOW)
    assert plan is not None
    assert plan.new == ({"role": "assistant", "content": None, "tool_calls": two}, *results)
    assert [(t.role, t.text) for t in plan.pending] == [("tool", "B"), ("tool", "A")]
    assert [m["role"] for m in plan.history] == ["user"] and plan.replace == ()
    assert plan_turn(results[:1], state, now_ms=NOW) is None  # c1 unanswered
    stray = [{"role": "tool", "tool_call_id": "c9", "content": "?"}]
    assert plan_turn(stray, state, now_ms=NOW) is None
    # a retry of the step after its results and answer were stored replaces them
    done = [
        *tail,
        Turn(role="tool", text="B", ts_ms=NOW, seq=3, tool_call_id="c2"),
        Turn(role="tool", text="A", ts_ms=NOW, seq=4, tool_call_id="c1"),
        Turn(role="assistant", text="Done.", ts_ms=NOW, seq=5),
    ]
    retry = plan_turn(results, ConversationState(meta={"seq": "5"}, tail=done), now_ms=NOW)
    assert retry is not None and [t.seq for t in retry.replace] == [3, 4, 5]
    assert [(t.role, t.text) for t in retry.pending] == [("tool", "B"), ("tool", "A")]
    # once the user asked something new, results sent alone answer nothing stored
    asked = [*done, Turn(role="user", text="and now?", ts_ms=NOW, seq=6)]
    assert plan_turn(results, ConversationState(meta={"seq": "6"}, tail=asked), now_ms=NOW) is None


def _offline(raw: object, buffered: list[Turn], **options: Any) -> Any:
    """The plan the hook makes while Redis is down: an empty stored conversation."""
    return plan_with_buffered(raw, ConversationState(meta={}, tail=[]), buffered, **options)


def test_tool_results_sent_alone_during_an_outage_answer_the_buffered_call() -> None:
    """Redis down (fresh-user report): results sent alone answer the tool_calls reply that waits
    in this proxy's outage buffer; it goes before them, with the buffered turns before it as the
    history, and only the results are stored. Before, they went to the model as an orphan tool
    message (a 400 from OpenAI and Anthropic) and were not stored at all."""
    call = [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]
    call_msg = {"role": "assistant", "content": None, "tool_calls": call}
    buffered = [
        Turn(role="user", text="Weather in Pune?", ts_ms=NOW),
        Turn(role="assistant", text="", ts_ms=NOW, tool_calls=tuple(call), msg=call_msg),
    ]
    results = [{"role": "tool", "tool_call_id": "c1", "content": "31C"}]
    plan = _offline(results, buffered, now_ms=NOW, call_id="d2")
    assert plan is not None and not plan.verbatim
    assert plan.new == (call_msg, *results)
    assert [m["content"] for m in plan.history] == ["Weather in Pune?"]
    assert [(t.role, t.text) for t in plan.pending] == [("tool", "31C")]
    assert plan.replace == () and plan.seeded == 0 and plan.previous_text == ""
    # nothing buffered for the conversation (its call is in Redis): passed through, unstored
    assert _offline(results, [], now_ms=NOW) is None
    # a retry after the answer was buffered: the model gets it whole, nothing is stored (the
    # buffered turns cannot be replaced before they are written)
    answered = [*buffered, Turn(role="tool", text="31C", ts_ms=NOW, tool_call_id="c1")]
    answered.append(Turn(role="assistant", text="31C in Pune.", ts_ms=NOW))
    retry = _offline(results, answered, now_ms=NOW)
    assert retry is not None and not retry.store and retry.pending == retry.replace == ()
    assert retry.new == (call_msg, *results)
    # a new message gets the turns said since Redis went down
    asked = _offline([_user("hi")], answered, now_ms=NOW)
    assert asked is not None and not asked.verbatim and asked.store
    assert [m["role"] for m in asked.history] == ["user", "assistant", "tool", "assistant"]
    assert [t.text for t in asked.pending] == ["hi"] and asked.previous_text == "31C in Pune."
    # a client's history with nothing buffered seeds an empty store (written only if empty)
    whole = [_user("a"), {"role": "assistant", "content": "b"}, _user("c")]
    seeded = _offline(whole, [], now_ms=NOW)
    assert seeded is not None and seeded.seeded == 2 and seeded.verbatim
    # and with its earlier turns buffered, only the new message is stored (once)
    earlier = [Turn(role="user", text="a", ts_ms=NOW), Turn(role="assistant", text="b", ts_ms=NOW)]
    again = _offline(whole, earlier, now_ms=NOW)
    assert again is not None and again.verbatim and [t.text for t in again.pending] == ["c"]


def test_a_regenerate_asked_for_during_an_outage_is_one() -> None:
    """``metadata.memory_regenerate`` while Redis is down: a short message sent again is a
    regenerate of the buffered reply (answered without it, not stored), as with Redis up;
    before, the outage path dropped the flag (fresh-user report)."""
    buffered = [
        Turn(role="user", text="short", ts_ms=NOW - 1000),
        Turn(role="assistant", text="Noted: short", ts_ms=NOW - 900),
    ]
    again = _offline([_user("short")], buffered, now_ms=NOW, regenerate=True)
    assert again is not None and not again.store and again.history == ()
    plain = _offline([_user("short")], buffered, now_ms=NOW)
    assert plain is not None and plain.store and len(plain.history) == 2
    # the alias's regenerate window applies too (0: only an explicit regenerate)
    long_text = "Tell me more about it, please."
    said = [Turn(role="user", text=long_text, ts_ms=NOW - 1000), buffered[1]]
    repeated = _offline([_user(long_text)], said, now_ms=NOW)
    assert repeated is not None and not repeated.store
    kept = _offline([_user(long_text)], said, now_ms=NOW, regenerate_window_s=0)
    assert kept is not None and kept.store


def test_tool_results_answer_a_call_buffered_after_the_stored_tail() -> None:
    """Redis answers reads while this proxy still holds the agent's last step in its outage
    buffer (Redis full, or back a moment before the buffer is written): results sent alone are
    planned against the stored tail followed by the buffered turns, so the call goes before
    them and the question and earlier steps are the history."""

    def call(number: int) -> dict[str, Any]:
        return {"id": f"c{number}", "type": "function", "function": {"name": "f", "arguments": ""}}

    def step(number: int, seq: int = 0) -> Turn:
        msg = {"role": "assistant", "content": None, "tool_calls": [call(number)]}
        return Turn(
            role="assistant", text="", ts_ms=NOW, seq=seq, tool_calls=(call(number),), msg=msg
        )

    stored = [Turn(role="user", text="Check both", ts_ms=NOW, seq=1), step(1, seq=2)]
    state = ConversationState(meta={"seq": "2"}, tail=stored)
    buffered = [Turn(role="tool", text="A", ts_ms=NOW, tool_call_id="c1"), step(2)]
    results = [{"role": "tool", "tool_call_id": "c2", "content": "B"}]
    plan = plan_with_buffered(results, state, buffered, now_ms=NOW)
    assert plan is not None and plan.new[0]["tool_calls"][0]["id"] == "c2"
    assert [m["role"] for m in plan.history] == ["user", "assistant", "tool"]
    assert plan.history_seqs[:2] == (1, 2) and plan.replace == ()
    assert [(t.role, t.text) for t in plan.pending] == [("tool", "B")]
    # the buffer wrote the step meanwhile (the load saw it): its turns are not seen twice
    written = [dc_replace(t, call_id="w1") for t in buffered]
    both = ConversationState(
        meta={"seq": "4"},
        tail=[*stored, *(dc_replace(t, seq=n) for n, t in ((3, written[0]), (4, written[1])))],
    )
    again = plan_with_buffered(results, both, written, now_ms=NOW)
    assert again is not None and [m["role"] for m in again.history] == ["user", "assistant", "tool"]
    # a retry of the stored call's results after their answer was buffered is not stored:
    # before, the stored call was answered past the buffered turns and stored a duplicate step
    first = [{"role": "tool", "tool_call_id": "c1", "content": "A"}]
    done = [buffered[0], Turn(role="assistant", text="done", ts_ms=NOW)]
    retry = plan_with_buffered(first, state, done, now_ms=NOW)
    assert retry is not None and not retry.store and retry.pending == retry.replace == ()
    # a call id used again: the buffered call is answered, and nothing stored is replaced
    old = [
        *stored,
        Turn(role="tool", text="old", ts_ms=NOW, seq=3, tool_call_id="c1"),
        Turn(role="assistant", text="old final", ts_ms=NOW, seq=4),
    ]
    task2 = [Turn(role="user", text="task 2", ts_ms=NOW), step(1)]
    reused = plan_with_buffered(
        first, ConversationState(meta={"seq": "4"}, tail=old), task2, now_ms=NOW
    )
    assert reused is not None and reused.replace == ()
    assert reused.history[-1]["content"] == "task 2"
    assert plan_with_buffered(first, state, [], now_ms=NOW) is not None  # no buffer: as before


def test_a_whole_history_client_sending_on_after_a_cut_stream_replaces_the_partial() -> None:
    """A whole-history client whose stream was cut sends on with the part it got: its copy
    replaces the stored partial reply (fresh-user report: both were kept, the text twice)."""
    tail = [
        Turn(role="user", text="Tell me a long story", ts_ms=NOW - 9000, seq=1),
        Turn(role="assistant", text="Once upon a", ts_ms=NOW - 8000, seq=2, partial=True),
    ]
    state = ConversationState(meta={"seq": "2"}, tail=tail)
    messages = [
        _user("Tell me a long story"),
        {"role": "assistant", "content": "Once upon a"},
        _user("ok, and then?"),
    ]
    plan = plan_turn(messages, state, now_ms=NOW)
    assert plan is not None and [t.seq for t in plan.replace] == [2]
    assert [(t.role, t.text) for t in plan.pending] == [
        ("assistant", "Once upon a"),
        ("user", "ok, and then?"),
    ]
    assert plan.previous_text == "Tell me a long story" and plan.verbatim


def test_new_turn_with_incomplete_tool_groups_passes_through() -> None:
    """Two calls with one result, or a call without an id: the request is not rebuilt (it goes
    to the model as sent) rather than silently losing its new turn."""
    two = [
        {"id": "c1", "type": "function", "function": {"name": "a", "arguments": "{}"}},
        {"id": "c2", "type": "function", "function": {"name": "b", "arguments": "{}"}},
    ]
    partial = [
        _user("do a and b"),
        {"role": "assistant", "content": None, "tool_calls": two},
        {"role": "tool", "tool_call_id": "c1", "content": "A"},
    ]
    no_id = [
        _user("do a"),
        {"role": "assistant", "content": None, "tool_calls": [{**two[0], "id": None}]},
        {"role": "tool", "tool_call_id": "None", "content": "A"},
    ]
    for messages in (partial, no_id):
        assert plan_turn(messages, _state(("user", "x"), ("assistant", "y")), now_ms=NOW) is None


def _memory(keys: ConversationKeys) -> MemoryKeys:
    """The memory set a request to the alias ``demo`` uses (``memory_scope: user``)."""
    return keys.user_keys.memory_set(user_scope("demo"))


async def test_a_regenerate_never_shows_the_reply_it_replaces(
    store: MemoryStore, prefix: str
) -> None:
    """Found by a fresh-user test: the first message sent again (a regenerate) must not bring
    the old reply back through recall; the model writes it anew."""
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "c1")
    ask = "Please write me a short poem."
    await store.append(
        keys,
        [
            indexed(Turn(role="user", text=ask, ts_ms=NOW - 1000)),
            indexed(Turn(role="assistant", text="Roses are red, a poem for you.", ts_ms=NOW - 900)),
        ],
    )
    prepared = await prepare(store, keys, _memory(keys), [_user(ask)], ContextOptions(), now_ms=NOW)
    assert prepared is not None and prepared.plan.regenerate
    assert prepared.recalled == []
    assert "Roses are red" not in json.dumps(prepared.messages)


def _apply(state: ConversationState, plan: object) -> list[str]:
    """The stored texts after a plan's writes (replaced turns out, pending turns appended)."""
    from litellm_memory_hook.core.plan import TurnPlan

    assert isinstance(plan, TurnPlan)
    gone = {t.seq for t in plan.replace}
    return [t.text for t in state.tail if t.seq not in gone] + [t.text for t in plan.pending]


def test_a_deleted_earlier_exchange_is_not_stored_twice() -> None:
    """A fresh-user report: a whole-history client deleting an earlier exchange, with more
    messages after it than before, had its whole history stored again after the first turns.
    The store now follows the client: the turns from the deleted one on are replaced."""
    texts = ["One.", "N1", "Two.", "N2", "Three.", "N3", "Four.", "N4"]
    state = _state(*[("user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(texts)])
    kept = [m for i, m in enumerate(texts) if i not in (2, 3)]
    client = [_user(t) if i % 2 == 0 else _assistant(t) for i, t in enumerate(kept)]
    plan = plan_turn([*client, _user("Five.")], state, now_ms=NOW)
    assert plan is not None
    assert [t.seq for t in plan.replace] == [3, 4, 5, 6, 7, 8]
    assert _apply(state, plan) == [*kept, "Five."]


@settings(max_examples=150, deadline=None)
@given(
    st.integers(min_value=2, max_value=12),
    st.data(),
)
def test_deleting_or_editing_an_exchange_keeps_the_store_equal_to_the_client(
    exchanges: int, data: st.DataObject
) -> None:
    """Whatever exchange the client edits, or deletes after the first, the stored conversation
    afterwards is the client's history and the new turn, each message once."""
    texts = [f"{'q' if i % 2 == 0 else 'a'}{i // 2} of {exchanges}" for i in range(2 * exchanges)]
    state = _state(*[("user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(texts)])
    delete = data.draw(st.booleans())
    # deleting the first exchange reads as a client that trims its own history: not tested
    at = data.draw(st.integers(min_value=int(delete), max_value=exchanges - 1)) * 2
    if delete:
        kept = texts[:at] + texts[at + 2 :]
    else:
        kept = [*texts[:at], texts[at] + " (edited)", *texts[at + 1 :]]
    client = [_user(t) if i % 2 == 0 else _assistant(t) for i, t in enumerate(kept)]
    plan = plan_turn([*client, _user("new question")], state, now_ms=NOW)
    assert plan is not None
    assert _apply(state, plan) == [*kept, "new question"]


def test_a_system_note_between_new_user_messages_keeps_the_stored_history() -> None:
    """README: a request with no assistant message in it is a new turn, not a history: its
    messages are stored after what the store holds. A client that sends only new messages with
    a system note between two of them (a user message, the app's note, the next user message)
    must still get the stored history, and both user messages must be stored."""
    state = _state(("user", "My cat is called Miso."), ("assistant", "Nice name!"))
    note = {"role": "system", "content": "Keep it short."}
    plan = plan_turn(
        [_user("I got a new job today."), note, _user("What is my cat called?")],
        state,
        now_ms=NOW,
    )
    assert plan is not None
    shown = [m["content"] for m in plan.history]
    assert shown[:2] == ["My cat is called Miso.", "Nice name!"]  # the stored conversation
    assert [t.text for t in plan.pending] == ["I got a new job today.", "What is my cat called?"]


def test_an_empty_tool_result_is_stored_and_later_requests_rewrite_nothing() -> None:
    """An agent's tool result with empty content (a command that printed nothing) is half of
    its tool group. It was never stored (an empty message is not worth storing), so the store
    held the call without its result, and every later request of the whole-history client,
    whose history shows the result, differed from the store there: each request replaced
    every stored turn after it and stored them again (new seqs, recall index and extraction
    churn, up to the whole stored tail read, on every request)."""
    call = {"id": "call_A", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
    ask = _user("make a folder called x please")
    call_msg = {"role": "assistant", "content": None, "tool_calls": [call]}
    result = {"role": "tool", "tool_call_id": "call_A", "content": ""}
    old = NOW - 600_000
    state = ConversationState(
        meta={"seq": "2"},
        tail=[
            Turn(role="user", text=ask["content"], ts_ms=old, seq=1),
            Turn(role="assistant", text="", ts_ms=old, seq=2, tool_calls=(call,)),
        ],
    )
    sent = plan_turn([ask, call_msg, result], state, now_ms=NOW)
    assert sent is not None
    # what the store holds after that request: its pending turns, then the model's answer
    tail = [
        *state.tail,
        *(dc_replace(t, seq=3 + i, ts_ms=old) for i, t in enumerate(sent.pending)),
        Turn(role="assistant", text="Done, x exists.", ts_ms=old, seq=3 + len(sent.pending)),
    ]
    after = ConversationState(meta={"seq": str(len(tail))}, tail=tail)
    history = [ask, call_msg, result, _assistant("Done, x exists."), _user("thanks, list it")]
    nxt = plan_turn(history, after, now_ms=NOW + 60_000)
    assert nxt is not None
    assert [t.seq for t in nxt.replace] == []  # nothing the client shows is rewritten
    assert [t.text for t in nxt.pending] == ["thanks, list it"]
    assert [t.role for t in sent.pending] == ["tool"]  # the result is stored with its call


def test_the_same_words_from_another_speaker_are_not_a_regenerate() -> None:
    """A group chat behind a new-message-only client (a chat or mesh bot: every user message
    carries its speaker's ``name``): Bob saying what Alice said a minute ago is a new message,
    not a regenerate. Taken for one, Alice's reply was replaced by the answer to Bob, Alice's
    message left the window and Bob's was never stored."""
    alice = {"role": "user", "name": "Alice", "content": "Good morning everyone!"}
    said = message_to_turn(alice, ts_ms=NOW - 60_000)
    assert said is not None
    state = ConversationState(
        meta={"seq": "2"},
        tail=[
            dc_replace(said, seq=1),
            Turn(role="assistant", text="Morning, Alice!", ts_ms=NOW - 59_000, seq=2),
        ],
    )
    bob = {"role": "user", "name": "Bob", "content": "Good morning everyone!"}
    plan = plan_turn([bob], state, now_ms=NOW)
    assert plan is not None
    assert not plan.regenerate and plan.replace == ()
    assert [(t.name, t.text) for t in plan.pending] == [("Bob", "Good morning everyone!")]
    assert [m["content"] for m in plan.history] == ["Good morning everyone!", "Morning, Alice!"]


def test_a_blank_reply_the_client_keeps_rewrites_nothing() -> None:
    """A blank assistant reply (a model that answered nothing) is never stored, but a
    whole-history client keeps it in its history: aligned on it, the client and the store
    parted there and every later request replaced and stored again the turns after it."""
    state = _state(
        ("user", "first question"),
        ("assistant", "first answer"),
        ("user", "second question"),
        ("user", "are you there?"),
        ("assistant", "yes, sorry"),
        ts=NOW - 600_000,
    )
    history = [
        _user("first question"),
        _assistant("first answer"),
        _user("second question"),
        _assistant(""),
        _user("are you there?"),
        _assistant("yes, sorry"),
        _user("ok, third question"),
    ]
    plan = plan_turn(history, state, now_ms=NOW)
    assert plan is not None
    assert plan.replace == ()
    assert [t.text for t in plan.pending] == ["ok, third question"]
    assert [m["content"] for m in plan.history] == [m["content"] for m in history[:-1]]


#: a JavaScript client's text cut inside an emoji (``JSON.stringify`` writes ``"\ud83d"``; the
#: proxy's JSON decoding gives a lone surrogate, which no UTF-8 text can hold).
BEACH = json.loads('"I loved the beach trip \\ud83d"')


def test_a_lone_surrogate_in_an_older_message_rewrites_nothing() -> None:
    """A whole-history client sends a message holding a lone surrogate again on every request;
    its stored turn holds U+FFFD there (message_to_turn). Compared as sent, the two differed:
    the planner took it for an edit and replaced the stored turns from it on with the client's
    (stored again, under new seqs) on every later request. Planned in its stored form, it
    matches its stored turn; the model still gets the client's message as sent."""
    state = _state(
        ("user", "My cat is called Miso."),
        ("assistant", "Nice name!"),
        ("user", "I loved the beach trip \ufffd"),
        ("assistant", "Sounds fun!"),
        ts=NOW - 600_000,
    )
    history = [
        _user("My cat is called Miso."),
        _assistant("Nice name!"),
        _user(BEACH),
        _assistant("Sounds fun!"),
        _user("What did I love?"),
    ]
    plan = plan_turn(history, state, now_ms=NOW)
    assert plan is not None and plan.verbatim
    assert plan.replace == ()
    assert [t.text for t in plan.pending] == ["What did I love?"]
    assert plan.history_seqs == (1, 2, 3, 4)
    assert plan.history[2] is history[2]  # the client's own message, the lone surrogate kept
    assert plan.history == tuple(history[:4])
    assert plan.surrogates == 1


def test_a_lone_surrogate_in_the_new_turn_and_its_prefill_is_planned_in_stored_form() -> None:
    """A new user message and a prefill holding a lone surrogate: the turn to store and the
    recorded prefill (signed into the request's metadata, then stored before the reply) hold
    U+FFFD in its place; the new turn reaches the model as the client sent it."""
    state = _state(("user", "My cat is called Miso."), ("assistant", "Nice name!"))
    prefill = {"role": "assistant", "name": "Nar\udc00rator", "content": "Once upon a \ud83d"}
    sent = [_user("My cat is called Miso."), _assistant("Nice name!"), _user(BEACH), prefill]
    plan = plan_turn(sent, state, now_ms=NOW)
    assert plan is not None
    assert [(t.role, t.text) for t in plan.pending] == [("user", "I loved the beach trip \ufffd")]
    assert (plan.prefill, plan.prefill_name) == ("Once upon a \ufffd", "Nar\ufffdrator")
    assert plan.new == (sent[2], sent[3])
    assert plan.new[0] is sent[2] and plan.new[1] is sent[3]
    assert plan.replace == ()
    assert plan.surrogates == 2


def test_a_tool_exchange_the_store_never_saw_is_stored_with_its_question() -> None:
    """A whole-history client whose messages meet nothing stored (a task it ran elsewhere, or
    with memory off) sends a tool exchange: the question that started it is stored before the
    call, results and answer, so no stored call is left without its question (fresh-user run:
    "weather in Paris?" was lost, its call and answer kept); older unknown history is not."""
    call = {"id": "c1", "type": "function", "function": {"name": "wx", "arguments": "{}"}}
    exchange = [
        _user("weather in Paris?"),
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    state = _state(("user", "I like hiking."), ("assistant", "Noted."))
    for earlier in ([], [_user("hello"), _assistant("hi")]):
        plan = plan_turn([*earlier, *exchange], state, now_ms=NOW)
        assert plan is not None
        assert [(t.role, t.text) for t in plan.pending] == [
            ("user", "weather in Paris?"),
            ("assistant", ""),
            ("tool", "sunny"),
        ]
        assert not plan.replace


def test_a_tool_exchange_beside_a_parallel_requests_turns_keeps_its_question() -> None:
    """The client's history parts from the store at turns another request stored moments ago
    (kept, not replaced): its new tool exchange is appended with the question that started
    it, which the store does not hold; a question the store holds is not stored again."""
    call = {"id": "c1", "type": "function", "function": {"name": "wx", "arguments": "{}"}}
    old = [
        Turn(role=r, text=t, ts_ms=NOW - 60_000, seq=i + 1)
        for i, (r, t) in enumerate([("user", "hello"), ("assistant", "hi")])
    ]
    parallel = [
        Turn(role="user", text="other tab", ts_ms=NOW - 1_000, seq=3),
        Turn(role="assistant", text="reply there", ts_ms=NOW - 1_000, seq=4),
    ]
    state = ConversationState(meta={"seq": "4"}, tail=[*old, *parallel])
    messages = [
        _user("hello"),
        _assistant("hi"),
        _user("weather in Paris?"),
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    plan = plan_turn(messages, state, now_ms=NOW)
    assert plan is not None
    assert not plan.replace
    assert [(t.role, t.text) for t in plan.pending] == [
        ("user", "weather in Paris?"),
        ("assistant", ""),
        ("tool", "sunny"),
    ]
