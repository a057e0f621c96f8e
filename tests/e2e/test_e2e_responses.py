"""End to end, issue 26 item 1: the Responses API through a real LiteLLM proxy, driven by the
``openai`` SDK's ``client.responses.create`` (streamed and not).

What the model received is read from the stand-in's records: for ``openai/`` aliases LiteLLM
calls the stand-in's ``/v1/responses`` (the Responses API served natively: the stand-in keeps
each response and replays it for ``previous_response_id``, as OpenAI does); for
``openai/chat_completions/`` aliases LiteLLM bridges the request to ``/v1/chat/completions``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support import harness
from tests.support.harness import MASTER_KEY

RULES = "You are Mira, a warm and concise companion."
FACT = "My cat is called Miso."


class Stack(harness.Running):
    """The proxy, the stand-in and Redis of these tests."""

    def bodies(self) -> list[dict[str, Any]]:
        """Every body the stand-in received, oldest first (extraction calls left out)."""
        return harness.chat_calls(self.standin.get("/_standin/requests").json())

    def upstream(self) -> dict[str, Any]:
        """The last model call's body (a Responses body, or a chat body when bridged)."""
        return self.bodies()[-1]

    def create(self, stream: bool, **body: Any) -> Any:
        """``client.responses.create``; a stream is read to its end and its completed
        response returned."""
        client = self.openai()
        if not stream:
            return client.responses.create(**body)
        completed = None
        with client.responses.create(stream=True, **body) as events:
            for event in events:
                if event.type == "response.completed":
                    completed = event.response
        assert completed is not None, "the stream did not complete"
        return completed

    def post(self, body: dict[str, Any]) -> httpx.Response:
        return self.http.post(
            f"{self.proxy}/v1/responses",
            json=body,
            headers={"Authorization": f"Bearer {MASTER_KEY}"},
        )

    def wait(self, condition: Any, timeout_s: float = 20.0) -> Any:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = condition()
            if found:
                return found
            time.sleep(0.1)
        pytest.fail(f"timed out; log:\n{self.log.read_text(errors='replace')[-3000:]}")


def _alias(name: str, model: str, memory: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "model_name": name,
        "litellm_params": {"model": model, "api_base": "BASE", "api_key": "x"},
    }
    if memory:
        entry["model_info"] = {"memory": {"enabled": True, "system_prompt": RULES}}
    return entry


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Stand-in + proxy: ``demo`` (the package's alias, ``openai/``: Responses served
    natively), ``bridged`` (``openai/chat_completions/``: LiteLLM's bridge to chat
    completions) and their plain twins without memory."""
    with harness.stack(
        tmp_path_factory.mktemp("e2e-responses"),
        stem="e2r",
        kind=Stack,
        extra_models=[
            _alias("plain", "openai/standin", memory=False),
            _alias("bridged", "openai/chat_completions/standin", memory=True),
            _alias("plain-bridged", "openai/chat_completions/standin", memory=False),
        ],
        # Codex's recipe (docs/protocols/responses.md): the user in a header the provider
        # table sends, the conversation in the session_id header Codex sends
        memory={
            "extraction": {"quiet_s": 1.0, "poll_s": 0.2},
            "identity": {"user_header": "x-memory-user", "conversation_header": "session_id"},
        },
        extra={"router_settings": {"num_retries": 0, "disable_cooldowns": True}},
    ) as running:
        yield running


def _user() -> str:
    return "u" + uuid.uuid4().hex[:8]


def _count(text: str, body: dict[str, Any]) -> int:
    return json.dumps(body, ensure_ascii=False).count(json.dumps(text)[1:-1])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_fact_from_one_request_reaches_the_next(stack: Stack, stream: bool) -> None:
    """Request 1's fact is in request 2's input (the stored window: items before the
    client's), the head joins the client's instructions after them, the model answers from it;
    both turns are stored in the user's Responses conversation."""
    user = _user()
    first = stack.create(stream, model="demo", user=user, input=FACT, instructions="Be brief.")
    assert first.output_text == f"Noted: {FACT}"
    sent = stack.upstream()
    assert sent["input"] == FACT  # nothing before it: still a string
    assert sent["instructions"].startswith(f"Be brief.\n\n{RULES}")
    question = [{"role": "user", "content": "What is my cat called?"}]
    second = stack.create(stream, model="demo", user=user, input=question, instructions="Be brief.")
    assert second.output_text == f"You told me: {FACT}"
    sent = stack.upstream()
    assert sent["input"][0] == {"type": "message", "role": "user", "content": FACT}
    assert sent["input"][-1] == question[0]
    assert sent["instructions"].startswith("Be brief.\n\n")
    stored = stack.turns(user, "demo.responses")
    assert [t["text"] for t in stored] == [
        FACT,
        f"Noted: {FACT}",
        "What is my cat called?",
        f"You told me: {FACT}",
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_an_agents_40000_character_tool_output_reaches_the_model_whole(
    stack: Stack, stream: bool
) -> None:
    """An agent's whole history (its task, a function_call and its 40,000-character output,
    a reasoning item) reaches the model exactly, with the pinned memory in ``instructions``;
    the model's function_call reply reaches the client and is stored as a tool call."""
    user = _user()
    pinned = "Prefers answers in bullet points."
    made = stack.http.post(
        f"{stack.proxy}/memory/v1/pinned",
        json={"user": user, "model": "demo", "text": pinned},
        headers={"Authorization": f"Bearer {MASTER_KEY}"},
    )
    assert made.status_code == 201, made.text
    log = "".join(f"line {i:05d}: ok\n" for i in range(2858))[:40_000]
    assert len(log) == 40_000
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Read it"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB=="},
        {"type": "function_call", "call_id": "call_1", "name": "read_log", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": log},
    ]
    tools = [{"type": "function", "name": "read_log", "parameters": {"type": "object"}}]
    call = {"id": "call_2", "type": "function", "function": {"name": "read_log", "arguments": "{}"}}
    stack.script({"content": "", "tool_calls": [call]})
    reply = stack.create(
        stream,
        model="demo",
        user=user,
        input=items,
        tools=tools,
        instructions="You are Codex.",
        include=["reasoning.encrypted_content"],
    )
    sent = stack.upstream()
    assert sent["input"] == items
    assert sent["tools"] == tools and sent["include"] == ["reasoning.encrypted_content"]
    assert sent["instructions"].startswith(f"You are Codex.\n\n{RULES}")
    assert pinned in sent["instructions"]
    calls = [o for o in reply.output if o.type == "function_call"]
    assert [(c.call_id, c.name) for c in calls] == [("call_2", "read_log")]
    stored = stack.turns(user, "demo.responses")
    tool_turn = stored[-2]["msg"]  # stored within the stored-text bound, its end kept
    assert tool_turn["tool_call_id"] == "call_1" and tool_turn["content"].endswith(log[-5000:])
    assert stored[-1]["msg"]["tool_calls"][0]["id"] == "call_2"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_previous_response_id_continuation_sees_each_earlier_turn_once(
    stack: Stack, stream: bool
) -> None:
    """``demo`` (the provider replays): the continuation keeps ``previous_response_id`` and
    sends no stored turn again, memory only. ``bridged`` (LiteLLM would replay from its
    database): the hook serves the earlier turns from Redis and drops
    ``previous_response_id``; 200 at once, each earlier turn once."""
    user = _user()
    first = stack.create(stream, model="demo", user=user, input=FACT)
    started = time.monotonic()
    second = stack.create(
        stream,
        model="demo",
        user=user,
        input="What is my cat called?",
        previous_response_id=first.id,
    )
    assert second.output_text == f"You told me: {FACT}"
    sent = stack.upstream()
    assert sent["previous_response_id"].startswith("resp_")  # LiteLLM decoded it
    assert _count(FACT, sent) == 0 and sent["input"] == "What is my cat called?"
    assert time.monotonic() - started < 10

    user = _user()
    first = stack.create(stream, model="bridged", user=user, input=FACT)
    started = time.monotonic()
    second = stack.create(
        stream,
        model="bridged",
        user=user,
        input="What is my cat called?",
        previous_response_id=first.id,
    )
    assert second.output_text == f"You told me: {FACT}"
    assert time.monotonic() - started < 10
    sent = stack.upstream()
    roles = [(m["role"], m["content"]) for m in sent["messages"] if m["role"] != "system"]
    assert roles == [
        ("user", FACT),
        ("assistant", f"Noted: {FACT}"),
        ("user", "What is my cat called?"),
    ]
    # a previous response the hook never stored: LiteLLM handles it as without the hook
    third = stack.create(
        stream, model="bridged", user=_user(), input="Hello", previous_response_id=first.id
    )
    assert third.output_text == "Noted: Hello"


def test_one_user_shares_memories_across_chat_completions_and_responses(stack: Stack) -> None:
    """The same user id on chat completions and on the Responses API (one alias, so one
    namespace) reads and writes the same memories (the stand-in's extraction rule keeps the
    user's "I live" and "my" sentences); each protocol keeps its own conversation. On the
    Responses API a flag control is the string "true" (its metadata holds strings only)."""
    user = _user()
    memories = f"{stack.prefix}:{{master:{user}}}:ns:demo:memories"
    chat = stack.openai()
    chat.chat.completions.create(
        model="demo",
        user=user,
        messages=[{"role": "user", "content": "I live in Pune."}],
        extra_body={"metadata": {"memory_flush": True}},
    )
    stack.wait(lambda: "User: I live in Pune." in stack.redis.hvals(memories))
    stack.create(False, model="demo", user=user, input="Where do I live?")
    assert "User: I live in Pune." in stack.upstream()["instructions"]

    stack.create(
        True, model="demo", user=user, input="My dog is Rex.", metadata={"memory_flush": "true"}
    )
    stack.wait(lambda: "User: My dog is Rex." in stack.redis.hvals(memories))
    chat.chat.completions.create(
        model="demo",
        user=user,
        messages=[{"role": "user", "content": "What is my dog called?"}],
        extra_body={"metadata": {"conversation_id": "fresh"}},
    )
    assert "User: My dog is Rex." in json.dumps(stack.upstream()["messages"][0])
    assert [t["text"] for t in stack.turns(user, "demo")][:1] == ["I live in Pune."]
    assert next(t["text"] for t in stack.turns(user, "demo.responses")) == "Where do I live?"


def test_a_codex_shaped_request_gets_memory_in_its_session(stack: Stack) -> None:
    """What Codex sends (store false, its whole history with reasoning and tool items,
    streamed, the ``session_id`` header) with the user in the header its provider table adds:
    the history reaches the model exactly, memory joins ``instructions``, and the turn is
    stored in the conversation named by ``session_id``."""
    user, session = _user(), uuid.uuid4().hex
    history: list[dict[str, Any]] = [
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "env"}],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "ls"}]},
        {"type": "reasoning", "id": "rs_9", "summary": [], "encrypted_content": "gAAAAC=="},
        {"type": "function_call", "call_id": "call_9", "name": "shell", "arguments": '{"c":"ls"}'},
        {"type": "function_call_output", "call_id": "call_9", "output": "README.md"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "1"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "My cat"}]},
    ]
    body = {
        "model": "demo",
        "instructions": "You are Codex, a coding agent.",
        "input": history,
        "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}],
        "store": False,
        "stream": True,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": session,
    }
    answer = stack.http.post(
        f"{stack.proxy}/v1/responses",
        json=body,
        headers={
            "Authorization": f"Bearer {MASTER_KEY}",
            "session_id": session,
            "x-memory-user": user,
        },
    )
    assert answer.status_code == 200 and "response.completed" in answer.text
    sent = stack.upstream()
    added = [i for i in sent["input"] if i not in history]  # the tail, before the last message
    assert [i for i in sent["input"] if i in history] == history
    assert len(added) == 1 and added[0]["role"] == "system" and "<memory_" in json.dumps(added)
    assert sent["input"][-2:] == [added[0], history[-1]]
    assert sent["instructions"].startswith("You are Codex, a coding agent.\n\n" + RULES)
    assert sent["store"] is False and sent["prompt_cache_key"] == session
    stored = stack.turns(user, session)
    assert [t["text"] for t in stored][-2:] == ["My cat", "Noted: My cat"]


BAD_BODIES: list[dict[str, Any]] = [
    {"input": 42},
    {},
    {"input": [42]},
    {"input": [{"role": "wizard", "content": "hi"}]},
    {"input": [{"role": "user", "content": 7}]},
    {"input": "hi", "instructions": ["not", "text"]},
    {"input": [{"type": "function_call_output", "call_id": "nope", "output": "x"}]},
    {"input": "hi", "previous_response_id": 5},
    {"input": "hi", "previous_response_id": "resp_never_made"},
    {"input": "hi", "tools": "no"},
    {"input": [{"type": "reasoning", "id": "rs_1", "summary": []}]},
]


@pytest.mark.parametrize("body", BAD_BODIES, ids=lambda b: json.dumps(b)[:40])
@pytest.mark.parametrize("pair", [("plain", "demo"), ("plain-bridged", "bridged")])
def test_bad_input_gets_the_same_status_as_without_the_hook(
    stack: Stack, body: dict[str, Any], pair: tuple[str, str]
) -> None:
    """Wrong types, missing input, unknown ids: the memory alias answers with the status its
    plain twin answers (LiteLLM and the model judge the request as the client sent it), never
    a 500 of the hook's."""
    plain, memory = pair
    user = _user()
    without = stack.post({"model": plain, "user": user, **body})
    withhook = stack.post({"model": memory, "user": user, **body})
    assert withhook.status_code == without.status_code, (withhook.text, without.text)
    assert "litellm_memory_hook" not in withhook.text
    assert "memory hook: pre-call failed" not in stack.log.read_text(errors="replace")


def test_a_stream_reaches_the_client_as_the_model_sent_it(stack: Stack) -> None:
    """The hook reads the event stream without changing it: the same event types, in the same
    order, through the memory alias and its plain twin."""
    kinds = []
    for model in ("plain", "demo"):
        with stack.openai().responses.create(
            model=model, user=_user(), input="Tell me a story", stream=True
        ) as events:
            kinds.append([event.type for event in events])
    assert kinds[0] == kinds[1]
    assert kinds[1][-1] == "response.completed"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_every_response_says_what_memory_did(stack: Stack, stream: bool) -> None:
    """N01 on /v1/responses: ``x-memory-outcome`` is ``used`` with a user id, ``no_user``
    without one, streamed or not."""
    for user, expected in ((_user(), "used"), (None, "no_user")):
        body: dict[str, Any] = {"model": "demo", "input": "Hello there.", "stream": stream}
        if user:
            body["user"] = user
        answer = stack.post(body)
        assert answer.status_code == 200, answer.text
        assert answer.headers.get("x-memory-outcome") == expected


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_response_echoes_the_clients_own_instructions(stack: Stack, stream: bool) -> None:
    """The Responses API echoes ``instructions`` in its response: the client gets back what it
    sent, never the operator's rules or the user's memory that reached the model (a new user
    saw the whole memory block there)."""
    user = _user()
    stack.create(False, model="demo", user=user, input=FACT, instructions="Be brief.")
    answer = stack.create(
        stream, model="demo", user=user, input="What is my cat called?", instructions="Be brief."
    )
    assert stack.upstream()["instructions"].startswith(f"Be brief.\n\n{RULES}")
    assert answer.instructions == "Be brief."
    bare = stack.create(stream, model="demo", user=user, input="And my dog?")
    assert bare.instructions is None
