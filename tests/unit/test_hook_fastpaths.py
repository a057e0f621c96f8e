"""The hook's hot-path shortcuts (issue 9 item 10) give exactly what the plain code gave:
turn parsing, message copies, the write record and its signature, and the extraction schedule
that reads the cursor again only when it can matter."""

from __future__ import annotations

import copy
import json
from dataclasses import asdict
from typing import Any

import pytest
import redis.asyncio as aioredis
from hypothesis import given
from hypothesis import strategies as st

from litellm_memory_hook.core import recall
from litellm_memory_hook.core.models import Turn, copy_json, full_member, stored_text
from litellm_memory_hook.core.recall import scheme
from litellm_memory_hook.core.stored_messages import message_to_turn
from litellm_memory_hook.engine.record import RECORD_VERSION, RecordError, TurnRecord
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.proxy.request_data import METADATA_KEY
from litellm_memory_hook.store.keys import ConversationKeys, due_key
from tests.support.hook_calls import Auth, chat_request, make_hook, model_response

MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": "My cat is called Miso.", "name": "alice"},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "look", "cache_control": {"type": "ephemeral"}},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
        ],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
        ],
        "reasoning_content": "thinking",
    },
    {"role": "tool", "tool_call_id": "c1", "content": "42"},
    {"role": "assistant", "content": "Ünïcode — ok\u2028next", "x_unknown": [1, 2.5, None, True]},
]


def _turns() -> list[Turn]:
    turns = [message_to_turn(m, ts_ms=1_700_000_000_000 + i) for i, m in enumerate(MESSAGES)]
    out = [t for t in turns if t is not None]
    out.append(Turn(role="user", text="imported", ts_ms=5, seq=9, ctx=("^cat", "^miso")))
    return out


def _old_from_member(member: str | bytes) -> Turn:
    """The parse as it was: the dataclass's own constructor."""
    data = json.loads(member)
    ctx = data.get("ctx")
    return Turn(
        role=str(data["role"]),
        text=stored_text(data),
        ts_ms=int(data.get("ts") or 0),
        seq=int(data.get("seq") or 0),
        call_id=str(data.get("call_id") or ""),
        name=str(data.get("name") or ""),
        tool_calls=tuple(data.get("tool_calls") or ()),
        tool_call_id=str(data.get("tool_call_id") or ""),
        partial=bool(data.get("partial", False)),
        ctx=tuple(str(t) for t in ctx) if ctx else (),
        fp=str(data.get("fp") or ""),
        msg=data["msg"] if isinstance(data.get("msg"), dict) else None,
    )


@pytest.mark.parametrize("index", range(len(MESSAGES) + 1))
def test_from_member_equals_the_constructor(index: int) -> None:
    """The parse of a stored member (compact) gives what the plain constructor gives for its
    full form, and so does the parse of the full form (a member stored before the compact one)."""
    turn = _turns()[index]
    member = '{"seq":7,' + turn.body_json()
    full = json.dumps(full_member(json.loads(member)))
    fast, old = Turn.from_member(member), _old_from_member(full)
    assert fast == old and fast.msg == old.msg
    assert Turn.from_member(full) == old and Turn.from_member(full).msg == old.msg
    if not fast.tool_calls:  # dicts inside make a turn unhashable, either way
        assert hash(fast) == hash(old)
    assert asdict(fast) == asdict(old)
    assert Turn.from_member(member.encode()) == old
    with pytest.raises(AttributeError):
        fast.text = "changed"  # type: ignore[misc]  # still frozen


def test_a_stored_turn_holds_its_text_once() -> None:
    """``text`` is left out of the member when it is ``msg``'s string content, and read back
    from there; a text that differs (parts, placeholders, tool calls) is stored."""
    once = 0
    for turn in _turns():
        member = '{"seq":7,' + turn.body_json()
        same = bool(turn.msg) and turn.msg.get("content") == turn.text
        assert ("text" in json.loads(member)) is not same
        assert Turn.from_member(member).text == turn.text
        once += same
    assert 0 < once < len(_turns())
    message = {"role": "user", "content": "hello there"}
    said = Turn(role="user", text="hello there", ts_ms=1, msg=message)
    assert json.loads('{"seq":1,' + said.body_json()) == {
        "seq": 1,
        "role": "user",
        "ts": 1,
        "m": {"content": "hello there"},
    }
    # a member written before (text and msg both) reads the same
    old = json.dumps({"seq": 1, "role": "user", "text": "hello there", "ts": 1, "msg": message})
    assert Turn.from_member(old) == Turn.from_member('{"seq":1,' + said.body_json())


def test_from_member_rejects_what_it_rejected() -> None:
    for bad in ("not json", "[1, 2]", '{"text": "no role"}'):
        with pytest.raises(ValueError):
            Turn.from_member(bad)


def test_copy_json_is_a_deep_copy() -> None:
    value: Any = {"a": [1, {"b": "c", "d": [None, True, 2.5]}], "e": ("t", [1])}
    copied = copy_json(value)
    assert copied == copy.deepcopy(value)
    copied["a"][1]["d"].append("x")
    copied["e"][1].append(2)  # a tuple is deep-copied too (the generic fallback)
    assert value == {"a": [1, {"b": "c", "d": [None, True, 2.5]}], "e": ("t", [1])}


@pytest.mark.parametrize("index", range(len(MESSAGES) + 1))
def test_to_message_copies(index: int) -> None:
    """A replayed message is the client's message, and changing it never changes the turn."""
    turn = _turns()[index]
    before = copy.deepcopy(turn.to_message())
    message = turn.to_message()
    _scribble(message)
    assert turn.to_message() == before


def _scribble(value: Any) -> None:
    if isinstance(value, dict):
        for item in list(value.values()):
            _scribble(item)
        value["scribbled"] = True
    elif isinstance(value, list):
        for item in value:
            _scribble(item)
        value.append("scribbled")


@given(st.text(max_size=4))
def test_term_kind_equals_the_unicode_rule(term: str) -> None:
    """The ASCII shortcut of term_kind gives what the regex rule gives, for any string."""
    plain = scheme._PLAIN_START.match(term) is not None if term else True
    assert recall.term_kind(term) == ("" if plain else term[0])


@pytest.mark.parametrize(
    "term", ["a", "Z", "7", "~miso", "^cat", "#x", " x", "é", "ü", "中", "\u0301a"]
)
def test_term_kind_examples(term: str) -> None:
    expected = "" if scheme._PLAIN_START.match(term) else term[0]
    assert recall.term_kind(term) == expected


def test_signature_checks_the_whole_record(fake_redis: aioredis.Redis) -> None:
    signer = make_hook(fake_redis, "tsig").engine.signer
    record: dict[str, Any] = {
        "v": 1,
        "pending": [asdict(t) for t in _turns()],
        "layers": {"window": 10},
        "hook_ms": 1.25,
        "big": 2**70,  # orjson refuses it: the json fallback signs it, the same each time
    }
    sig = signer.sign(record)
    assert sig == signer.sign(copy.deepcopy(record)) == signer.sign({**record, "sig": "x"})
    changed = copy.deepcopy(record)
    changed["pending"][0]["text"] = "forged"
    assert signer.sign(changed) != sig
    assert signer.sign({**record, "big": 2**70 + 1}) != sig


async def test_the_record_crosses_the_call_typed_signed_and_versioned(
    fake_redis: aioredis.Redis,
) -> None:
    """The record in the request's metadata is the signed wire form of a TurnRecord: it reads
    back as the same record, a changed field is not genuine, and a signed record of another
    version is refused."""
    hook = make_hook(fake_redis, "trec")
    out = await hook.async_pre_call_hook(Auth(), None, chat_request(), "acompletion")
    assert out is not None
    wire = out["metadata"][METADATA_KEY]
    record = TurnRecord.from_wire(wire)
    assert hook.engine.signer.seal(record) == wire and hook.engine.opened(wire) == record
    assert (record.protocol, record.ref, record.write) == ("chat", "master:u-A:demo", True)
    assert not hook.engine.signer.genuine({**wire, "cursor": 7})
    other = {**wire, "v": RECORD_VERSION + 1}
    other["sig"] = hook.engine.signer.sign(other)
    with pytest.raises(RecordError):
        hook.engine.opened(other)


async def _exchange(hook: MemoryHook, n: int, **extra: Any) -> dict[str, Any]:
    data = chat_request(f"message number {n}", call_id=f"call-{n}", **extra)
    out = await hook.async_pre_call_hook(Auth(), None, data, "acompletion")
    assert out is not None
    await hook.async_post_call_success_hook(out, Auth(), model_response(f"reply {n}"))
    return out


class _CountingRedis:
    """Counts HGETs of the conversation's cursor on a fakeredis client."""

    def __init__(self, client: aioredis.Redis) -> None:
        self.client = client
        self.cursor_reads = 0
        original = client.hget

        async def hget(name: Any, key: Any) -> Any:
            if key in ("cursor", b"cursor"):
                self.cursor_reads += 1
            return await original(name, key)

        client.hget = hget  # type: ignore[method-assign]


async def test_schedule_takes_the_cursor_from_the_append(
    fake_redis: aioredis.Redis,
) -> None:
    """With extraction_every=6 (3 exchanges), the due time is the quiet time until 6 messages
    are new since the cursor. The append script returns the cursor as it is at the write, so
    the cursor is never read by another round trip, and a job that committed after the
    pre-call (cursor moved) keeps the due time at the quiet time (no 2-message job)."""
    prefix = "tsched"
    hook = make_hook(fake_redis, prefix, extraction_every=6, extraction_quiet_s=100)
    counting = _CountingRedis(fake_redis)
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    ref = keys.ref

    async def due_in_s() -> float:
        score = await fake_redis.zscore(due_key(prefix), ref)
        meta_updated = int(await fake_redis.hget(keys.meta, "updated_ms") or 0)
        return (float(score or 0) - meta_updated) / 1000

    for n in (1, 2):
        await _exchange(hook, n)
        assert await due_in_s() == pytest.approx(100, abs=1)  # 2 and 4 messages: not due
    # a job extracted through seq 4 after the next request's pre-call read cursor 0
    data = chat_request("message number 3", call_id="call-3")
    out = await hook.async_pre_call_hook(Auth(), None, data, "acompletion")
    assert out is not None and out["metadata"][METADATA_KEY]["cursor"] == 0
    await fake_redis.hset(keys.meta, "cursor", 4)
    await hook.async_post_call_success_hook(out, Auth(), model_response("reply 3"))
    assert await due_in_s() == pytest.approx(100, abs=1)  # only 2 new since seq 4: not due
    # without a job, 6 new messages since the cursor: due now
    await fake_redis.hset(keys.meta, "cursor", 0)
    await _exchange(hook, 4)
    assert await due_in_s() == pytest.approx(0, abs=1)
    # a flush is due now, whatever the cursor
    await fake_redis.hset(keys.meta, "cursor", 8)
    await _exchange(hook, 5, metadata={"memory_flush": True})
    assert await due_in_s() == pytest.approx(0, abs=1)
    # a write of 2 new messages after a job at seq 10: not due
    await fake_redis.hset(keys.meta, "cursor", 10)
    await _exchange(hook, 6)
    assert await due_in_s() == pytest.approx(100, abs=1)
    assert counting.cursor_reads == 0  # only the append script read it


async def test_a_batched_write_reads_the_cursor_when_it_can_matter(
    fake_redis: aioredis.Redis,
) -> None:
    """A write too large for one script (a long client history seeding a new conversation)
    returns no cursor: the post-call hook reads it, once, since the write is due by the
    pre-call's cursor."""
    prefix = "tschedb"
    hook = make_hook(fake_redis, prefix, extraction_every=6, extraction_quiet_s=100)
    counting = _CountingRedis(fake_redis)
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    history: list[dict[str, Any]] = []
    for n in range(150):  # more than one script's batch_turns (100)
        history.append({"role": "user", "content": f"old question {n}"})
        history.append({"role": "assistant", "content": f"old answer {n}"})
    data = chat_request("the new one", call_id="call-big")
    data["messages"] = [*history, *data["messages"]]
    out = await hook.async_pre_call_hook(Auth(), None, data, "acompletion")
    assert out is not None
    await hook.async_post_call_success_hook(out, Auth(), model_response("reply"))
    assert await fake_redis.zcard(keys.turns) == 302
    assert counting.cursor_reads == 1
    score = await fake_redis.zscore(due_key(prefix), keys.ref)
    meta_updated = int(await fake_redis.hget(keys.meta, "updated_ms") or 0)
    assert (float(score or 0) - meta_updated) / 1000 == pytest.approx(0, abs=1)


async def test_gc_freeze_freezes_the_startup_objects_once(
    fake_redis: aioredis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gc_freeze``: the first memory request freezes what the process holds (full
    collections then skip it), once; without the setting nothing is frozen."""
    import gc

    from litellm_memory_hook.proxy import hook as hook_module

    monkeypatch.setattr(hook_module, "_frozen", [])
    gc.unfreeze()
    try:
        plain = make_hook(fake_redis, prefix)
        await plain.async_pre_call_hook(Auth(), None, chat_request(call_id="p1"), "acompletion")
        assert gc.get_freeze_count() == 0
        frozen = make_hook(fake_redis, prefix, gc_freeze=True)
        await frozen.async_pre_call_hook(Auth(), None, chat_request(call_id="f1"), "acompletion")
        assert gc.get_freeze_count() > 1000
        freezes: list[int] = []
        real_freeze = gc.freeze
        monkeypatch.setattr(gc, "freeze", lambda: freezes.append(1) or real_freeze())
        await frozen.async_pre_call_hook(Auth(), None, chat_request(call_id="f2"), "acompletion")
        # once per process (the frozen count itself can fall: a frozen object whose last
        # reference goes is freed all the same, which made a comparison of counts flaky)
        assert freezes == []
        assert hook_module.freeze_startup_objects() is False and freezes == []
    finally:
        gc.unfreeze()
