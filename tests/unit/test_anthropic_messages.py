"""The Anthropic Messages adapter in process (no proxy): view/apply against the engine's own
assembly (a hypothesis property), the hook on fake Redis, the reply readers (whole and SSE
bytes), and Claude Code's user id."""

from __future__ import annotations

import copy
import json
from typing import Any

import fakeredis
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litellm_memory_hook.core.assemble import assemble
from litellm_memory_hook.core.cache_marks import add_marks
from litellm_memory_hook.core.models import full_member
from litellm_memory_hook.engine.rebuild import _stable_ends
from litellm_memory_hook.protocols import adapter_for
from litellm_memory_hook.protocols.anthropic_messages import (
    ANTHROPIC,
    StreamAccumulator,
    count_marks,
    reply_message,
)
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.proxy.identity import claude_code_ids
from litellm_memory_hook.proxy.request_data import METADATA_KEY
from litellm_memory_hook.settings import MemorySettings
from litellm_memory_hook.store.keys import ConversationKeys
from litellm_memory_hook.tools import standin_anthropic
from tests.support.hook_calls import Auth

MARK = {"type": "ephemeral"}

# -- random valid Anthropic requests --------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)
_mark = st.one_of(st.none(), st.just(MARK))


def _text_block(text: str, mark: Any) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if mark is not None:
        block["cache_control"] = mark
    return block


_text_blocks = st.builds(_text_block, _text, _mark)
_image = st.just(
    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}
)
_document = st.just({"type": "document", "source": {"type": "url", "url": "https://x/a.pdf"}})
_user_content = st.one_of(
    _text, st.lists(st.one_of(_text_blocks, _image, _document), min_size=1, max_size=3)
)
_thinking = st.one_of(
    st.builds(
        lambda t, s: {"type": "thinking", "thinking": t, "signature": s},
        _text,
        st.text("abcdefXYZ0123456789+/=", min_size=8, max_size=40),
    ),
    st.builds(lambda d: {"type": "redacted_thinking", "data": d}, _text),
)


@st.composite
def conversations(draw: st.DrawFn) -> dict[str, Any]:
    """A valid Messages request: exchanges of user and assistant messages, an assistant's tool
    uses answered first thing in the next user message, the last message a user's."""
    messages: list[dict[str, Any]] = []
    pending: list[str] = []
    for turn in range(draw(st.integers(1, 4))):
        blocks: list[dict[str, Any]] = []
        for call_id in pending:
            content = draw(st.one_of(st.none(), _text, st.lists(_text_blocks, max_size=2)))
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id}
            if content is not None:
                result["content"] = content
            blocks.append(result)
        user = draw(_user_content)
        if blocks:
            if draw(st.booleans()):
                blocks += [{"type": "text", "text": user}] if isinstance(user, str) else user
            messages.append({"role": "user", "content": blocks})
        else:
            messages.append({"role": "user", "content": user})
        pending = []
        if turn == 3 or not draw(st.booleans()):
            break
        reply = draw(st.lists(_thinking, max_size=2))
        if draw(st.booleans()):
            reply.append(_text_block(draw(_text), draw(_mark)))
        for n in range(draw(st.integers(0 if reply else 1, 2))):
            call_id = f"toolu_{len(messages)}_{n}"
            reply.append({"type": "tool_use", "id": call_id, "name": "ls", "input": {"p": n}})
            pending.append(call_id)
        messages.append({"role": "assistant", "content": reply})
    if pending:
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": i} for i in pending],
            }
        )
    system = draw(st.one_of(st.none(), _text, st.lists(_text_blocks, min_size=1, max_size=3)))
    data: dict[str, Any] = {"model": "claude", "max_tokens": 64, "messages": messages}
    if system is not None:
        data["system"] = system
    return data


_stored = st.lists(
    st.sampled_from(
        [
            [
                {"role": "user", "content": "My cat is Miso."},
                {"role": "assistant", "content": "Ok"},
            ],
            [
                {"role": "user", "content": [{"type": "text", "text": "look"}]},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_s",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                    "thinking_blocks": [{"type": "thinking", "thinking": "hm", "signature": "SIG"}],
                },
                {"role": "tool", "tool_call_id": "call_s", "content": "42"},
                {"role": "assistant", "content": "It is 42."},
            ],
            [{"role": "assistant", "content": "a reply cut from its question"}],
        ]
    ),
    max_size=2,
).map(lambda groups: [copy.deepcopy(m) for g in groups for m in g])


def _sent_blocks(message: dict[str, Any]) -> list[Any]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), _stored, st.booleans(), st.booleans(), _text.filter(str.strip))
def test_view_apply_keeps_every_client_message_and_anthropics_rules(
    data: dict[str, Any], stored: list[dict[str, Any]], whole: bool, marks: bool, tail: str
) -> None:
    """For any valid request, through the engine's own assembly (stored turns before the
    client's messages when the client sent only its new turn, the head, the tail in the last
    user message, cache marks): the client's system comes first byte-exact, every client
    message is in the result as sent and in order (the last user message only with the tail
    block added, after its tool results), and the result keeps the stand-in's (Anthropic's)
    rules and the limit of 4 cache marks."""
    data, tail = json.loads(json.dumps(data)), "".join(tail)  # fresh strings, as in a request
    sent = copy.deepcopy(data)
    client_marks = count_marks(sent)
    view = ANTHROPIC.view(data)
    assert view is not None and data["litellm_metadata"] is view["metadata"]
    window = list(view["messages"]) if whole else [*stored, *view["messages"]]
    rebuilt = assemble(
        [],
        window,
        rules="Rules.",
        memory_block="<memory>m</memory>",
        tail=tail,
        tail_in_user=True,
        tail_after_tools=True,
    )
    if marks:
        rebuilt = add_marks(rebuilt, _stable_ends(rebuilt, True))
    view["messages"] = rebuilt
    ANTHROPIC.apply(data, view)

    assert standin_anthropic.rule_error(data) is None
    assert count_marks(data) <= max(4, client_marks)
    system = data["system"]
    if isinstance(sent.get("system"), list):
        assert system[: len(sent["system"])] == sent["system"]
    elif isinstance(system, str):
        assert system.startswith(sent.get("system") or "")
    elif sent.get("system"):
        assert system[0] == {"type": "text", "text": sent["system"]}
    *history, last = sent["messages"]
    found = iter(data["messages"][:-1])
    for message in history:  # each as sent, in order
        assert any(m == message for m in found)
    if last["role"] == "assistant":  # a prefill ends the request as sent; the tail is in the head
        system = data["system"]
        texts = [system] if isinstance(system, str) else [b["text"] for b in system]
        assert data["messages"][-1] == last and any(tail in t for t in texts)
        return
    blocks, at = _sent_blocks(last), 0
    while at < len(blocks) and blocks[at]["type"] == "tool_result":
        at += 1
    added = {"type": "text", "text": tail}
    assert data["messages"][-1]["content"] == [*blocks[:at], added, *blocks[at:]]


# -- the hook in process --------------------------------------------------------------------------

ALIASES = {"claude": {"memory": {"enabled": True, "system_prompt": "You are Mira."}}}
CLAUDE_CODE = "user_" + "d" * 64 + "_account_3f2a-77_session_5e1c-9a0b"


@pytest.fixture
def hook(prefix: str) -> MemoryHook:
    return MemoryHook(
        settings=MemorySettings(key_prefix=prefix, worker_in_proxy=False),
        redis=fakeredis.FakeAsyncRedis(decode_responses=False),
        alias_lookup=lambda model: ALIASES.get(model),
    )


def _request(text: Any, call_id: str, user: str = "alice", **extra: Any) -> dict[str, Any]:
    return {
        "model": "claude",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": text}],
        "metadata": {"user_id": user},
        "litellm_call_id": call_id,
        **extra,
    }


def _reply(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"id": "msg_1", "type": "message", "role": "assistant", "content": list(blocks)}


async def test_a_fact_reaches_the_next_request_and_thinking_is_replayed_whole(
    hook: MemoryHook,
) -> None:
    """Two requests that send only their new message: the second gets the first exchange
    from Redis, the reply's thinking block byte-exact, after the client's own system."""
    first = _request("My cat is called Miso.", "c1", system="Be brief.")
    await hook.async_pre_call_hook(Auth(), None, first, "anthropic_messages")
    assert first["metadata"] == {"user_id": "alice"}  # Anthropic's own field: as sent
    assert METADATA_KEY in first["litellm_metadata"]
    thinking = {"type": "thinking", "thinking": "They named a cat.", "signature": "EqQBCkgIAh=="}
    await hook.async_post_call_success_hook(
        first, Auth(), _reply(thinking, {"type": "text", "text": "Nice name!"})
    )
    await hook.drain()
    second = _request("What is my cat called?", "c2", system="Be brief.")
    await hook.async_pre_call_hook(Auth(), None, second, "anthropic_messages")
    assert second["system"].startswith("Be brief.\n\nYou are Mira.")
    user, assistant, question = second["messages"]
    assert user == {"role": "user", "content": [{"type": "text", "text": "My cat is called Miso."}]}
    assert assistant["content"] == [thinking, {"type": "text", "text": "Nice name!"}]
    assert question["content"][-1] == {"type": "text", "text": "What is my cat called?"}


@pytest.mark.parametrize(
    "body",
    [
        {"messages": []},
        {"messages": "hi"},
        {"messages": [{"role": "assistant", "content": "x"}]},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": ""}]}]},
        {"messages": [{"role": "user", "content": "x"}], "system": 5},
        {"messages": [{"role": "user", "content": "x"}], "metadata": "m"},
        {"messages": [{"role": "system", "content": "x"}]},
        {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}]},
        {"messages": [{"role": "user", "content": [{"type": "text"}]}]},
        {"messages": [{"role": "user", "content": None}]},
    ],
)
async def test_bad_input_passes_through_untouched(hook: MemoryHook, body: dict[str, Any]) -> None:
    """A request Anthropic would refuse reaches the proxy exactly as sent (it answers as
    without the hook), nothing stored."""
    data = {"model": "claude", "max_tokens": 8, "litellm_call_id": "b", **body}
    data["metadata"] = data.get("metadata", {"user_id": "alice"})
    before = json.dumps(data)
    assert await hook.async_pre_call_hook(Auth(), None, data, "anthropic_messages") is data
    outcome = data.pop("litellm_metadata")  # LiteLLM's own field: the x-memory-outcome note
    assert json.dumps(data) == before and outcome == {"litellm_memory_outcome": "invalid_request"}
    assert hook.counters["invalid_passthrough"] == 1 and not hook.counters["precall_errors"]


async def test_claude_code_sessions_of_one_account_share_the_user(hook: MemoryHook) -> None:
    """Claude Code's user id: the account is the user, each session its own conversation."""
    other_session = CLAUDE_CODE.replace("5e1c-9a0b", "0000-1111")
    one = _request("hi", "s1", user=CLAUDE_CODE)
    two = _request("hi", "s2", user=other_session)
    for data in (one, two):
        await hook.async_pre_call_hook(Auth(), None, data, "anthropic_messages")
    refs = [d["litellm_metadata"][METADATA_KEY]["ref"] for d in (one, two)]
    assert refs == ["master:3f2a-77:5e1c-9a0b", "master:3f2a-77:0000-1111"]


def test_claude_code_ids() -> None:
    """The legacy and the JSON form, with and without an account, in each mode."""
    device = "user_" + "a" * 64
    assert claude_code_ids(f"{device}_account_ac-1_session_se-1") == ("ac-1", "se-1")
    assert claude_code_ids(f"{device}_account__session_se-1") == ("a" * 64, "se-1")
    assert claude_code_ids(f"{device}_account_ac-1_session_se-1", "device") == ("a" * 64, "se-1")
    as_json = json.dumps({"device_id": "dev", "account_uuid": "", "session_id": "se-2"})
    assert claude_code_ids(as_json) == ("dev", "se-2")
    assert claude_code_ids(as_json, "whole") == (as_json, None)
    assert claude_code_ids("alice") == ("alice", None)
    assert claude_code_ids('{"name": 1}') == ('{"name": 1}', None)


# -- replies --------------------------------------------------------------------------------------


def _sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(
        f"event: {e['type']}\ndata: {json.dumps(e, ensure_ascii=False)}\n\n".encode()
        for e in events
    )


async def _stream_bytes(text: str, thinking: list[Any], calls: list[Any]) -> bytes:
    chat = {"model": "m", "messages": []}
    return "".join(
        [e async for e in standin_anthropic.stream(text, chat, 0, calls, thinking)]
    ).encode()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 400), max_size=40), _text)
async def test_a_stream_cut_anywhere_is_the_whole_reply(cuts: list[int], text: str) -> None:
    """SSE bytes cut at any byte (inside an event, inside a character) assemble into the
    message the same reply whole gives: thinking blocks whole with their signatures, text, and
    tool uses with their input."""
    thinking = [{"thinking": "Let me think — über", "signature": "c2lnbmF0dXJl"}, {"data": "ZW5j"}]
    calls = [{"id": "toolu_9", "function": {"name": "ls", "arguments": '{"p": "ü"}'}}]
    raw = await _stream_bytes(text, thinking, calls)
    accumulator = ANTHROPIC.accumulator()
    at = 0
    for cut in [*cuts, len(raw)]:
        accumulator.add(raw[at : at + cut])
        at += cut
        if at >= len(raw):
            break
    whole = standin_anthropic.message(text, {"model": "m", "messages": []}, calls, thinking)
    assert accumulator.message() == reply_message(whole)
    assert accumulator.message()["thinking_blocks"] == standin_anthropic.thinking_blocks(thinking)


def test_parsed_events_are_read_too() -> None:
    """A stream of parsed events (dicts) gives the same message as its bytes."""
    events = [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
    ]
    parsed, raw = StreamAccumulator(), StreamAccumulator()
    for event in events:
        parsed.add(event)
    raw.add(_sse(events))
    assert parsed.message() == raw.message() == {"role": "assistant", "content": "Hi"}


def test_the_adapter_is_registered() -> None:
    """LiteLLM's call type for /v1/messages reaches this adapter."""
    assert adapter_for("anthropic_messages") is ANTHROPIC


async def test_an_agent_loop_is_stored_once_and_sent_as_sent(hook: MemoryHook) -> None:
    """Claude Code's loop: each request sends the whole history (thinking, tool use, result);
    the model gets it as sent, and the store holds each message once, in order."""
    thinking = {"type": "thinking", "thinking": "I should look.", "signature": "U0lH"}
    call = {"type": "tool_use", "id": "toolu_7", "name": "ls", "input": {"path": "."}}
    history: list[dict[str, Any]] = [{"role": "user", "content": "What is in this folder?"}]
    replies = [_reply(thinking, call), _reply({"type": "text", "text": "Two files."})]
    tools = [{"name": "ls", "input_schema": {"type": "object"}}]
    for step, reply in enumerate(replies):
        data = _request("", f"a{step}", tools=tools)
        data["messages"] = copy.deepcopy(history)
        await hook.async_pre_call_hook(Auth(), None, data, "anthropic_messages")
        assert data["messages"][:-1] == history[:-1]  # the last one: the tail added
        await hook.async_post_call_success_hook(data, Auth(), reply)
        await hook.drain()
        history.append({"role": "assistant", "content": reply["content"]})
        result = {"type": "tool_result", "tool_use_id": "toolu_7", "content": "a.txt\nb.txt"}
        history.append({"role": "user", "content": [result]})
    keys = ConversationKeys.for_ids(
        hook.settings.storage.key_prefix, "master", "alice", "claude.anthropic"
    )
    stored = [full_member(json.loads(t)) for t in await hook.store.redis.zrange(keys.turns, 0, -1)]
    assert [t["role"] for t in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[1]["msg"]["thinking_blocks"] == [thinking]
