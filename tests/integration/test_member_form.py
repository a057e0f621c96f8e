"""The compact member of a stored turn (issue 30): ``c`` for ``call_id``, ``cx`` for the recall
context terms, ``m`` for the message without its role, the turn's name, tool calls and tool call
id left to the message when they are its own. Every turn reads back whole from it; members
stored in the full form (every version before) read as they did, in the store too; an export
shows the full form either way."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import redis.asyncio as aioredis

from litellm_memory_hook.core import recall
from litellm_memory_hook.core.indexing import indexed_chain, stored_terms
from litellm_memory_hook.core.models import (
    CONTEXT_MARK,
    Turn,
    compact_body,
    full_member,
)
from litellm_memory_hook.core.stored_messages import message_to_turn
from litellm_memory_hook.store import transfer
from litellm_memory_hook.store.keys import ConversationKeys, user_scope
from litellm_memory_hook.store.redis_store import MemoryStore

CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


def _said(message: dict[str, Any], **changes: Any) -> Turn:
    turn = message_to_turn(message, ts_ms=1_700_000_000_000, call_id="call-1")
    assert turn is not None
    return Turn(**{**turn.__dict__, "seq": 7, **changes})


TURNS = {
    "a named user": _said({"role": "user", "content": "My cat is Miso.", "name": "Caroline"}),
    "a reply with context": _said(
        {"role": "assistant", "content": "Miso is a fine name."}, ctx=("^cat", "^miso")
    ),
    "a name the message does not have": _said(
        {"role": "user", "content": "hi", "name": "Caroline"}, name=""
    ),
    "another name than the message's": _said(
        {"role": "user", "content": "hi", "name": "Caroline"}, name="Mel"
    ),
    "a message name that is no text": _said({"role": "user", "content": "hi", "name": 5}),
    "a message whose role is not first": _said({"content": "hi", "role": "user"}),
    "a message of another role": _said({"role": "user", "content": "hi"}, role="assistant"),
    "tool calls": _said({"role": "assistant", "content": None, "tool_calls": [CALL]}),
    "tool calls other than the message's": _said(
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        tool_calls=({**CALL, "id": "c2"},),
    ),
    "no tool calls beside the message's": _said(
        {"role": "assistant", "content": None, "tool_calls": [CALL]}, tool_calls=()
    ),
    "a tool result": _said({"role": "tool", "tool_call_id": "c1", "content": "42"}),
    "parts": _said({"role": "user", "content": [{"type": "text", "text": "look"}]}),
    "terms without the mark": _said({"role": "user", "content": "x"}, ctx=("cat", "^miso")),
    "a term holding a space": _said({"role": "user", "content": "x"}, ctx=("^a b",)),
    "a bare mark": _said({"role": "user", "content": "x"}, ctx=("^",)),
    "a bare mark last": _said({"role": "user", "content": "x"}, ctx=("^a", "^")),
    "a mark inside a term": _said({"role": "user", "content": "x"}, ctx=("^a^b", "^c")),
    "an imported line": Turn(role="user", text="old line", ts_ms=5, seq=7, joined=True),
    "flags": _said({"role": "assistant", "content": "cut sh"}, partial=True, fp="0123"),
}


def _member(turn: Turn) -> str:
    return '{"seq":7,' + turn.body_json()


def _full_member_of(turn: Turn) -> str:
    """The member as every version before the compact one stored it."""
    return json.dumps({"seq": turn.seq, **turn.full_body()}, ensure_ascii=False)


@pytest.mark.parametrize("case", TURNS)
def test_a_compact_member_reads_back_its_turn(case: str) -> None:
    turn = TURNS[case]
    member = _member(turn)
    assert json.loads(member) == {"seq": 7, **compact_body(turn.full_body())}
    assert list(json.loads(member)) == ["seq", *compact_body(turn.full_body())]
    read = Turn.from_member(member)
    assert read == turn and read.msg == turn.msg
    assert full_member(json.loads(member)) == {"seq": 7, **turn.full_body()}
    old = Turn.from_member(_full_member_of(turn))
    assert old == turn and old.msg == turn.msg
    # store/lua reads the role right after the seq, and the first '"ts":' as the turn's own
    assert member.startswith('{"seq":7,"role":')
    assert int(re.findall(r'"ts":(-?\d+)', member)[0]) == turn.ts_ms


def test_what_the_compact_member_leaves_out() -> None:
    named = json.loads(_member(TURNS["a named user"]))
    assert named == {
        "seq": 7,
        "role": "user",
        "ts": 1_700_000_000_000,
        "c": "call-1",
        "m": {"content": "My cat is Miso.", "name": "Caroline"},
    }
    assert json.loads(_member(TURNS["a reply with context"]))["cx"] == "cat miso"
    assert json.loads(_member(TURNS["a name the message does not have"]))["name"] == ""
    assert json.loads(_member(TURNS["another name than the message's"]))["name"] == "Mel"
    assert "tool_calls" not in json.loads(_member(TURNS["tool calls"]))
    assert json.loads(_member(TURNS["no tool calls beside the message's"]))["tool_calls"] == []
    assert "tool_call_id" not in json.loads(_member(TURNS["a tool result"]))
    for case in ("a message whose role is not first", "a message of another role"):
        assert json.loads(_member(TURNS[case]))["msg"] == TURNS[case].msg
    assert json.loads(_member(TURNS["a mark inside a term"]))["cx"] == "a^b c"
    for case in (
        "terms without the mark",
        "a term holding a space",
        "a bare mark",
        "a bare mark last",
    ):
        assert json.loads(_member(TURNS[case]))["ctx"] == list(TURNS[case].ctx)
    assert len(_member(TURNS["a named user"])) < len(_full_member_of(TURNS["a named user"])) - 40


def test_keys_this_version_does_not_know_are_kept() -> None:
    body = {**TURNS["a named user"].full_body(), "future": [1, 2]}
    compact = compact_body(body)
    assert compact["future"] == [1, 2] and "m" in compact
    full = full_member({"seq": 7, **compact})
    assert full == {"seq": 7, **TURNS["a named user"].full_body(), "future": [1, 2]}


def test_members_stored_before_read_as_they_did() -> None:
    """Members as the previous version wrote them (bench latency's LoCoMo text)."""
    user = (
        '{"seq":3,"role":"user","ts":1683554280000,"call_id":"bench-1","name":"Caroline",'
        '"ctx":["^caroline","^good"],"msg":{"role":"user","content":"I went to a LGBTQ support '
        'group yesterday.","name":"Caroline"}}'
    )
    turn = Turn.from_member(user)
    assert (turn.seq, turn.role, turn.name, turn.call_id) == (3, "user", "Caroline", "bench-1")
    assert turn.text == "I went to a LGBTQ support group yesterday."
    assert turn.ctx == ("^caroline", "^good") and turn.msg is not None
    assert turn.to_message() == {"role": "user", "content": turn.text, "name": "Caroline"}
    assert Turn.from_member('{"seq":3,' + turn.body_json()) == turn
    assert full_member(json.loads(user)) == json.loads(user)  # the full form, as it is
    imported = '{"seq":1,"role":"user","text":"old line","ts":5,"joined":true}'
    assert Turn.from_member(imported) == Turn(
        role="user", text="old line", ts_ms=5, seq=1, joined=True
    )


def test_the_context_mark_is_recalls() -> None:
    assert recall.CONTEXT_PREFIX == CONTEXT_MARK


async def test_a_conversation_stored_in_the_full_form_reads_deletes_and_exports_the_same(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """Turns an older version stored (full-form members, in users' Redis) load, are found by
    recall, export as the same document and delete with exactly their index entries, as the
    same turns stored now do."""
    store = MemoryStore(any_redis, ttl_s=3600)
    memory = ConversationKeys.for_ids(prefix, "master", "u-A", "x").user_keys.memory_set(
        user_scope("demo")
    )
    said = [
        {"role": "user", "content": "My cat is called Miso.", "name": "Caroline"},
        {"role": "assistant", "content": "Miso is a lovely name for a cat."},
        {"role": "user", "content": "She likes the garden."},
    ]
    turns = [
        t
        for i, m in enumerate(said)
        if (t := message_to_turn(m, ts_ms=1_700_000_000_000 + i, call_id=f"k{i // 2}"))
    ]
    now, before = (ConversationKeys.for_ids(prefix, "master", "u-A", c) for c in ("now", "old"))
    for keys in (now, before):
        await store.append(keys, indexed_chain(turns), memory=memory)
    members = await any_redis.zrange(before.turns, 0, -1, withscores=True)
    await any_redis.delete(before.turns)
    await any_redis.zadd(
        before.turns,
        {_full_member_of(Turn.from_member(member)): score for member, score in members},
    )
    assert b'"msg"' in (await any_redis.zrange(before.turns, 0, 0))[0]
    assert await store.all_turns(before) == await store.all_turns(now)
    loads = [
        await store.load(keys, memory, tail=2, query_terms=["miso", "garden"])
        for keys in (now, before)
    ]
    assert loads[0][0].tail == loads[1][0].tail
    assert loads[0][1].df == loads[1][1].df == {"miso": 2, "garden": 1}
    assert await store.fetch_turns(before, [1, 2]) == await store.fetch_turns(now, [1, 2])
    dumps = [await transfer.read_conversation(any_redis, keys) for keys in (now, before)]
    assert dumps[0].turns == dumps[1].turns
    assert dumps[0].turns[0]["msg"] == {**said[0]} and dumps[0].turns[0]["name"] == "Caroline"
    for keys in (now, before):
        stored = [stored_terms(t) for t in await store.all_turns(keys)]
        assert await store.delete_turns(keys, stored) == 3
        assert not await any_redis.exists(keys.postings, keys.turns, keys.times)
