"""Regression tests from the stateful test of stored turns (tests/unit/test_stateful_turns.py): the
shrunk client sequences that stored a conversation wrongly, each driven through the real hook on
fakeredis with a fake clock, with the exact turns the store must hold afterwards."""

from __future__ import annotations

import json
from typing import Any

import fakeredis
from litellm.types.utils import ModelResponse

from litellm_memory_hook.core.models import full_member, stored_text
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.store.keys import ConversationKeys
from tests.support.hook_calls import Auth, Clock, make_hook

USER = "u-seq"


class Chat:
    """A hook on a fresh fakeredis, and the client's requests through it."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.redis = fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer())
        self.hook: MemoryHook = make_hook(self.redis, "seq")
        self.requests = 0

    async def send(self, messages: list[dict[str, Any]], reply: dict[str, Any]) -> None:
        """One request; the reply is stored 100 ms after it."""
        self.requests += 1
        data = {
            "model": "demo",
            "user": USER,
            "messages": messages,
            "litellm_call_id": f"req-{self.requests}",
        }
        out = await self.hook.async_pre_call_hook(Auth(), None, data, "acompletion")
        self.clock.ms += 100
        response = ModelResponse(
            id="r",
            choices=[{"index": 0, "message": reply, "finish_reason": "stop"}],
        )
        await self.hook.async_post_call_success_hook(out, Auth(), response)
        await self.hook.drain()

    async def turns(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """(role, text, tool-call ids or the answered id) of each stored turn, in order."""
        keys = ConversationKeys.for_ids("seq", "master", USER, "demo")
        out = []
        for raw in await self.redis.zrange(keys.turns, 0, -1):
            turn = full_member(json.loads(raw))
            ids = tuple(str(c["id"]) for c in turn.get("tool_calls") or ())
            if turn.get("tool_call_id"):
                ids = (turn["tool_call_id"],)
            out.append((turn["role"], stored_text(turn), ids))
        return out


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _reply(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def _call(call_id: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
        ],
    }


def _result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


async def test_tool_results_after_a_kept_edit_store_the_call_once(clock: Clock) -> None:
    """A whole-history agent edits its last question moments (< 5 s) after the answer: the
    grace rule keeps the answered turns and appends the edited question and the model's tool
    call. Its tool results, sent at once, are a new turn that starts with that call; the grace
    rule applied again (the client's history still differs from the young stored turns) and
    appended the whole new turn, the call included: the store held the call twice, the first
    copy with no result after it."""
    chat = Chat(clock)
    q1, a1 = _user("question 1 about the garden"), _reply("answer 1 from the model")
    q2, a2 = _user("question 2 about the garden"), _reply("answer 2 from the model")
    await chat.send([q1], a1)
    await chat.send([q1, a1, q2], a2)
    edited = _user("question 2 about the garden (edited)")
    await chat.send([q1, a1, edited], _call("call_6"))
    await chat.send(
        [q1, a1, edited, _call("call_6"), _result("call_6", "result of call_6")],
        _reply("answer 3 from the model"),
    )
    assert await chat.turns() == [
        ("user", "question 1 about the garden", ()),
        ("assistant", "answer 1 from the model", ()),
        ("user", "question 2 about the garden", ()),
        ("assistant", "answer 2 from the model", ()),
        ("user", "question 2 about the garden (edited)", ()),
        ("assistant", "", ("call_6",)),
        ("tool", "result of call_6", ("call_6",)),
        ("assistant", "answer 3 from the model", ()),
    ]


async def test_an_edited_first_message_with_a_deleted_exchange_replaces_from_the_start(
    clock: Clock,
) -> None:
    """A whole-history client deletes an exchange from the middle (a chat UI sends nothing
    for that), then edits its first message and sends: its history differs from the store at
    its first message. The alignment ranked every offset by the run of equal messages it
    starts with (none, the first message being edited), then by equal messages: the offset
    that put the client's first message on the deleted exchange matched more (the messages
    after the deletion) than the right one (the first reply), so the store kept the old first
    exchange and stored its reply again after it."""
    chat = Chat(clock)
    q1, a1 = _user("question 1 about the garden"), _reply("answer 1 from the model")
    q2, a2 = _user("question 2 about the garden"), _reply("answer 2 from the model")
    q3, a3 = _user("question 3 about the garden"), _reply("answer 3 from the model")
    await chat.send([q1], a1)
    await chat.send([q1, a1, q2], a2)
    await chat.send([q1, a1, q2, a2, q3], a3)
    clock.ms += 60_000
    edited = _user("question 1 about the garden (edited)")
    q4 = _user("question 4 about the garden")
    await chat.send([edited, a1, q3, a3, q4], _reply("answer 4 from the model"))
    assert await chat.turns() == [
        ("user", "question 1 about the garden (edited)", ()),
        ("assistant", "answer 1 from the model", ()),
        ("user", "question 3 about the garden", ()),
        ("assistant", "answer 3 from the model", ()),
        ("user", "question 4 about the garden", ()),
        ("assistant", "answer 4 from the model", ()),
    ]
