"""The Responses API adapter (protocols/responses.py) in-process: the hook's pre-call on
Responses requests (fakeredis), the conversions, the reply and stream readers.

The property test drives the real pre-call hook (planning, window, cache layout, tail in a
system or a user message, cache marks) on random ``input`` item lists: every item the client
sent is in the applied request exactly, in order; the client's ``instructions`` are a prefix of
the applied ones; every other field is untouched; what the hook does not read passes through
unchanged.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import Iterator
from typing import Any

import fakeredis
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from litellm.types.llms.openai import ResponsesAPIResponse

from litellm_memory_hook.protocols import adapter_for, adapter_named, responses
from litellm_memory_hook.protocols.responses import RESPONSES
from litellm_memory_hook.protocols.responses_items import view_messages
from litellm_memory_hook.protocols.responses_rebuild import rebuilt_request
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.proxy.outcomes import read_outcome
from litellm_memory_hook.settings import MemorySettings
from tests.support.hook_calls import Auth

RULES = "You are Mira."
ALIASES: dict[str, dict[str, Any]] = {
    "r-system": {"memory": {"enabled": True, "system_prompt": RULES, "tail_placement": "system"}},
    "r-user": {"memory": {"enabled": True, "system_prompt": RULES, "tail_placement": "user"}},
    "r-marks": {
        "memory": {
            "enabled": True,
            "system_prompt": RULES,
            "tail_placement": "user",
            "cache_marks": "on",
        }
    },
    "r-seed": {"memory": {"enabled": True, "layout": "seed"}},
}
#: an alias whose model declares a 3,000-token window (E06: what the hook adds is sized to it)
SMALL = {"memory": {"enabled": True, "system_prompt": RULES}, "max_input_tokens": 3000}


class Loop:
    """One event loop and a hook on fakeredis, for sync (hypothesis) tests."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.redis = fakeredis.FakeAsyncRedis(decode_responses=False)
        self.hook = MemoryHook(
            settings=MemorySettings(key_prefix="tr" + uuid.uuid4().hex[:8], worker_in_proxy=False),
            redis=self.redis,
            alias_lookup=lambda model: SMALL if model == "r-small" else ALIASES.get(model),
        )

    def pre(self, data: dict[str, Any]) -> dict[str, Any]:
        out = self.loop.run_until_complete(
            self.hook.async_pre_call_hook(Auth(), None, data, "aresponses")
        )
        assert out is not None
        return out

    def post(self, data: dict[str, Any], response: Any) -> None:
        self.loop.run_until_complete(self.hook.async_post_call_success_hook(data, Auth(), response))


@pytest.fixture(scope="module")
def running() -> Iterator[Loop]:
    loop = Loop()
    yield loop
    loop.loop.run_until_complete(loop.redis.aclose())
    loop.loop.close()


def _response(text: str, ident: str = "resp_1", calls: tuple[dict[str, Any], ...] = ()) -> Any:
    output: list[dict[str, Any]] = [
        {
            "type": "message",
            "id": "msg_1",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        },
        *calls,
    ]
    return ResponsesAPIResponse.model_validate(
        {
            "id": ident,
            "object": "response",
            "created_at": 1,
            "status": "completed",
            "output": output,
        }
    )


def _request(model: str, user: str, items: Any, **extra: Any) -> dict[str, Any]:
    """A Responses body as the proxy hands it to the pre-call hook (LiteLLM's metadata in
    ``litellm_metadata``)."""
    return {
        "model": model,
        "user": user,
        "input": items,
        "litellm_call_id": uuid.uuid4().hex,
        "litellm_metadata": {"headers": {}},
        **extra,
    }


# -- strategies --------------------------------------------------------------------------------

_text = st.text(alphabet="abc xyz?.\n", min_size=0, max_size=30)
_words = st.text(alphabet="abcdefgh ", min_size=1, max_size=30)


@st.composite
def _message(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(["user", "user", "assistant", "system", "developer"]))
    if role == "assistant":
        part = st.fixed_dictionaries(
            {"type": st.just("output_text"), "text": _text, "annotations": st.just([])}
        ) | st.fixed_dictionaries({"type": st.just("refusal"), "refusal": _text})
    elif role == "user":
        part = (
            st.fixed_dictionaries({"type": st.just("input_text"), "text": _words})
            | st.fixed_dictionaries(
                {"type": st.just("input_image"), "image_url": st.just("https://x.test/a.png")}
            )
            | st.fixed_dictionaries({"type": st.just("input_file"), "file_id": st.just("file-1")})
        )
    else:
        part = st.fixed_dictionaries({"type": st.just("input_text"), "text": _words})
    content = draw(_words | st.lists(part, min_size=1, max_size=3))
    item: dict[str, Any] = {"role": role, "content": content}
    if draw(st.booleans()):
        item["type"] = "message"
    if role == "assistant" and draw(st.booleans()):
        item.update(id="msg_" + draw(st.text(alphabet="0123456789", min_size=3, max_size=6)))
        item["status"] = "completed"
    return item


_call_ids = st.sampled_from(["call_a", "call_b", "call_c"])
_call = st.fixed_dictionaries(
    {
        "type": st.just("function_call"),
        "call_id": _call_ids,
        "name": st.sampled_from(["get_weather", "search"]),
        "arguments": st.sampled_from(['{"city": "Paris"}', "{}"]),
    },
    optional={"id": st.just("fc_1"), "status": st.just("completed")},
)
_output = st.fixed_dictionaries(
    {
        "type": st.just("function_call_output"),
        "call_id": _call_ids,
        "output": _text
        | st.lists(
            st.fixed_dictionaries({"type": st.just("input_text"), "text": _text}), max_size=2
        ),
    }
)
_rider = st.sampled_from(
    [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "think"}],
            "encrypted_content": "gAAAA==",
        },
        {"type": "item_reference", "id": "msg_0"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    ]
)
_question = {"role": "user", "content": "What is my cat called?"}
_items = st.builds(
    lambda items, last: items + last,
    st.lists(st.one_of(_message(), _call, _output, _rider), min_size=1, max_size=8),
    st.sampled_from([[], [_question]]),  # most agents' requests end with the user's words
)
_instructions = st.none() | _words


def _subsequence(wanted: list[Any], seen: list[Any]) -> bool:
    """Whether ``wanted`` appears in ``seen`` in order, each element equal."""
    at = 0
    for item in seen:
        if at < len(wanted) and item == wanted[at]:
            at += 1
    return at == len(wanted)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    items=_items | _words,
    instructions=_instructions,
    model=st.sampled_from(sorted(ALIASES)),
    stored=st.booleans(),
    continues=st.sampled_from([None, "previous_response_id", "conversation"]),
)
def test_every_client_item_reaches_the_model_exactly_in_order(
    running: Loop,
    items: Any,
    instructions: str | None,
    model: str,
    stored: bool,
    continues: str | None,
) -> None:
    """For random ``input`` item lists (and string inputs): the applied ``input`` holds every
    item the client sent, exactly and in order; the client's ``instructions`` are a prefix of
    the applied ones; every other field is as sent (``previous_response_id`` and
    ``conversation`` too, and then no stored turn is added: the provider replays them); a
    request the adapter does not read is left as it was."""
    user = "u" + uuid.uuid4().hex[:10]
    if stored:  # a stored exchange: the window (or, continued, the provider) brings it back
        first = running.pre(_request(model, user, "My cat is called Miso."))
        running.post(first, _response("Nice name!"))
    extra: dict[str, Any] = {
        "tools": [{"type": "function", "name": "get_weather", "parameters": {}}],
        "store": False,
        "reasoning": {"effort": "low"},
        "metadata": {"app": "codex"},
        "include": ["reasoning.encrypted_content"],
    }
    if instructions is not None:
        extra["instructions"] = instructions
    if continues is not None:  # the provider holds the earlier turns
        extra[continues] = "resp_unknown" if continues == "previous_response_id" else "conv_1"
    data = _request(model, user, copy.deepcopy(items), **extra)
    sent = copy.deepcopy(data)
    readable = RESPONSES.view(copy.deepcopy(data)) is not None
    out = running.pre(data)
    fields = set(sent) - {"instructions", "input", "litellm_metadata"}
    assert {k: out.get(k) for k in fields} == {k: sent[k] for k in fields}
    if not readable:
        assert out["input"] == sent["input"] and out.get("instructions") == instructions
        return
    applied = out.get("instructions")
    if instructions is not None:
        assert isinstance(applied, str) and applied.startswith(instructions)
    if RULES and model != "r-seed":
        assert isinstance(applied, str) and RULES in applied
    if isinstance(items, str):
        assert out["input"] == items or {"role": "user", "content": items} in out["input"]
    else:
        assert isinstance(out["input"], list)
        assert _subsequence(sent["input"], out["input"])
    if continues is not None:  # a replaying provider (no router: not told) gets no stored turn
        assert out[continues] == sent[continues]
        assert "Nice name!" not in str(out["input"])


def test_a_stored_exchange_is_the_window_of_the_next_request(running: Loop) -> None:
    """Without ``previous_response_id`` the stored turns are input items before the client's;
    the head joins the client's instructions after them; the tail is a system item."""
    user = "u" + uuid.uuid4().hex[:10]
    first = running.pre(_request("r-system", user, "My cat is called Miso.", instructions="Hi."))
    assert first["input"] == "My cat is called Miso."  # nothing before it: still a string
    assert first["instructions"].startswith("Hi.\n\nYou are Mira.")
    running.post(first, _response("Nice name!"))
    own = [{"role": "user", "content": [{"type": "input_text", "text": "What is my cat called?"}]}]
    second = running.pre(_request("r-system", user, copy.deepcopy(own), instructions="Hi."))
    assert second["input"][:2] == [
        {"type": "message", "role": "user", "content": "My cat is called Miso."},
        {"type": "message", "role": "assistant", "content": "Nice name!"},
    ]
    assert second["input"][2]["role"] == "system" and "<memory_" in str(second["input"][2])
    assert second["input"][3:] == own


def test_the_tail_in_a_user_message_is_an_item_of_its_own(running: Loop) -> None:
    """``tail_placement: user``: the tail is a user item before the client's last one, which
    stays exactly as sent."""
    user = "u" + uuid.uuid4().hex[:10]
    running.post(running.pre(_request("r-user", user, "My cat is called Miso.")), _response("Ok"))
    own = {"type": "message", "role": "user", "content": "What is my cat called?"}
    out = running.pre(_request("r-user", user, [dict(own)]))
    assert out["input"][-1] == own
    tail = out["input"][-2]
    assert tail["role"] == "user" and tail["content"][0]["text"].startswith("<memory_context>")


def test_a_served_continuation_drops_previous_response_id(
    running: Loop, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A provider that does not replay (a model LiteLLM bridges to chat completions) and a
    previous response the hook stored: the window comes from Redis and
    ``previous_response_id`` is dropped; an unknown previous response keeps it, without the
    stored turns."""
    monkeypatch.setattr(responses, "provider_replays", lambda model: False)
    user = "u" + uuid.uuid4().hex[:10]
    first = running.pre(_request("r-system", user, "My cat is called Miso."))
    running.post(first, _response("Nice name!", ident="resp_known"))
    known = running.pre(
        _request("r-system", user, "And its name?", previous_response_id="resp_known")
    )
    assert "previous_response_id" not in known
    assert known["input"][:2] == [
        {"type": "message", "role": "user", "content": "My cat is called Miso."},
        {"type": "message", "role": "assistant", "content": "Nice name!"},
    ]
    unknown = running.pre(
        _request("r-system", user, "And its name?", previous_response_id="resp_other")
    )
    assert unknown["previous_response_id"] == "resp_other"
    assert unknown["input"] == "And its name?"


@pytest.mark.parametrize(
    "body",
    [
        {"input": 42},
        {"input": None},
        {},
        {"input": [42]},
        {"input": [{"role": "wizard", "content": "x"}]},
        {"input": [{"role": "user", "content": 5}]},
        {"input": [{"type": "function_call", "call_id": "c", "name": 1, "arguments": "{}"}]},
        {"input": [{"type": "function_call_output", "output": "x"}]},
        {"input": [{"type": "reasoning", "id": "rs", "summary": []}]},
        {"input": "hi", "instructions": ["not", "a string"]},
    ],
)
def test_input_the_adapter_does_not_read_passes_through(
    running: Loop, body: dict[str, Any]
) -> None:
    """Wrong types and missing input reach the proxy as the client sent them (it answers them
    as without the hook)."""
    data = {"model": "r-system", "user": "u-bad", "litellm_call_id": "x", **body}
    sent = copy.deepcopy(data)
    out = running.pre(data)
    assert {k: v for k, v in out.items() if k != "litellm_metadata"} == sent


def test_items_become_chat_messages_with_riders_and_joined_calls() -> None:
    """A text reply and the calls after it are one assistant message; a reasoning item rides
    with the message after it; trailing riders with the last; each message knows its items."""
    items: list[Any] = [
        {"role": "user", "content": "Weather?"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "I"}]},
        {"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{}"},
        {"type": "function_call", "call_id": "c2", "name": "w", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sun"},
        {
            "type": "function_call_output",
            "call_id": "c2",
            "output": [{"type": "input_text", "text": "rain"}],
        },
        {"type": "item_reference", "id": "x"},
    ]
    read = view_messages(items)
    assert read is not None
    messages, spans = read
    assert messages == [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": "I",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "w", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sun"},
        {"role": "tool", "tool_call_id": "c2", "content": "rain"},
    ]
    assert spans == [(0, 1), (1, 5), (5, 6), (6, 8)]


def test_rebuilt_request_converts_stored_turns_and_keeps_client_items() -> None:
    """Stored tool traffic becomes function_call and function_call_output items; a marked copy
    of a client message is re-emitted as the client sent it."""
    view = RESPONSES.view({"input": [{"role": "user", "content": "next"}], "model": "m"})
    assert view is not None
    source = view[responses.SOURCE]
    own = source.messages[0]
    marked = {"role": "user", "content": [{"type": "text", "text": "next", "cache_control": {}}]}
    stored = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": "42"},
    ]
    lead = view["messages"][0]  # the instructions' message, the head joined to it
    head = {**lead, "content": [{"type": "text", "text": "HEAD"}, *lead["content"]]}
    out = rebuilt_request(source, [head, *stored, marked], window=True)
    assert out.added == "HEAD"
    assert out.input == [
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "42"},
        {"role": "user", "content": "next"},
    ]
    assert rebuilt_request(source, [head, own], window=False).input == [
        {"role": "user", "content": "next"}
    ]


def test_reply_and_stream_readers() -> None:
    """A whole response and its event stream give the same assistant message, calls included;
    a stream cut before ``response.completed`` keeps what it had."""
    call = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "w", "arguments": "{}"}
    response = _response("Hello there", ident="resp_9", calls=(call,))
    whole = adapter_named("responses").reply_message(response)
    assert whole == {
        "role": "assistant",
        "content": "Hello there",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}
        ],
    }
    assert RESPONSES.reply_id(response) == "resp_9"
    stream = RESPONSES.accumulator()
    stream.add({"type": "response.created", "response": {"id": "resp_9", "output": []}})
    stream.add({"type": "response.output_text.delta", "delta": "Hello"})
    stream.add({"type": "response.output_text.delta", "delta": " there"})
    assert stream.message() == {"role": "assistant", "content": "Hello there"}
    stream.add({"type": "response.completed", "response": response})
    assert stream.message() == whole and stream.reply_id == "resp_9"
    assert adapter_for("aresponses") is RESPONSES and adapter_for("responses") is RESPONSES


def test_the_clients_instructions_count_in_the_models_window(running: Loop) -> None:
    """Instructions that fill the model's declared window leave no room for memory (outcome
    ``too_large``: the alias's rules only, nothing stored); short ones get memory."""
    user = "u" + uuid.uuid4().hex[:10]
    long = "Follow the house style. " * 500  # ~12,000 characters: ~4,000 tokens
    data = _request("r-small", user, "Hello", instructions=long)
    sent = copy.deepcopy(data)
    out = running.pre(data)
    assert out["instructions"] == long + "\n\n" + RULES and out["input"] == sent["input"]
    assert read_outcome(out) == "too_large" and "litellm_memory" not in out["litellm_metadata"]
    short = running.pre(_request("r-small", user, "Hello", instructions="Be brief."))
    assert short["instructions"].startswith("Be brief.\n\n" + RULES)
