"""End to end, issue 26 item 2: Anthropic Messages (``/v1/messages``) through a real LiteLLM
proxy, driven by the real ``anthropic`` SDK (``messages.create`` and ``messages.stream``), the
stand-in model answering as Anthropic (its rules enforced), a real Redis.

A fact from one request reaches the next; an agent's 40,000-character tool result reaches the
model whole with memory added; thinking blocks come back byte-exact; one user's memories are
shared by chat completions and Messages (two aliases, one namespace); bad input gets the same
answer as without the hook; ``count_tokens`` counts the memory too.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from litellm_memory_hook.extraction.prompt import is_extraction_call
from litellm_memory_hook.tools import standin_anthropic
from tests.support import harness
from tests.support.harness import MASTER_KEY

MODELS: list[dict[str, Any]] = [
    {
        "model_name": "claude",
        "litellm_params": {"model": "anthropic/claude-standin", "api_base": "BASE", "api_key": "x"},
        "model_info": {
            "memory": {"enabled": True, "system_prompt": "You are Mira.", "namespace": "team"}
        },
    },
    {
        "model_name": "chat",
        "litellm_params": {"model": "openai/standin", "api_base": "BASE", "api_key": "x"},
        "model_info": {"memory": {"enabled": True, "namespace": "team"}},
    },
    {
        "model_name": "claude-plain",
        "litellm_params": {"model": "anthropic/claude-standin", "api_base": "BASE", "api_key": "x"},
    },
]
CLAUDE_SYSTEM = [
    {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}
]


class Stack(harness.Running):
    """The processes of these tests, with an ``anthropic`` client."""

    def claude(self) -> anthropic.Anthropic:
        """The SDK as Claude Code uses the proxy: base URL and a bearer token."""
        return anthropic.Anthropic(
            base_url=self.proxy, auth_token=MASTER_KEY, api_key=None, max_retries=0, timeout=60
        )

    def ask(self, stream: bool, **request: Any) -> anthropic.types.Message:
        """``messages.create``, or ``messages.stream`` read to its final message."""
        request = {"model": "claude", "max_tokens": 256, **request}
        if not stream:
            return self.claude().messages.create(**request)
        with self.claude().messages.stream(**request) as events:
            return events.get_final_message()

    def calls(self, model: str = "claude-standin") -> list[dict[str, Any]]:
        """The chat bodies the stand-in received for a deployment (``anthropic/claude-standin``:
        Messages bodies; ``standin``: chat completions), oldest first, extraction calls left
        out."""
        bodies = self.standin.get("/_standin/requests").json()
        return [
            b
            for b in bodies
            if b.get("model") == model
            and not is_extraction_call(standin_anthropic.as_chat(b)["messages"])
            and not is_extraction_call(b.get("messages"))
        ]

    def last_call(self) -> dict[str, Any]:
        """The last Messages body the stand-in received."""
        return self.calls()[-1]

    def memories(self, user: str, model: str = "claude") -> list[str]:
        response = self.http.get(
            f"{self.proxy}/memory/v1/memories",
            params={"user": user, "model": model},
            headers={"Authorization": f"Bearer {MASTER_KEY}"},
        )
        response.raise_for_status()
        return [m["text"] for m in response.json()["memories"]]

    def wait_memory(self, user: str, text: str, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(text in m for m in self.memories(user)):
                return
            time.sleep(0.2)
        pytest.fail(f"no memory with {text!r} for {user}: {self.memories(user)}")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with harness.stack(
        tmp_path_factory.mktemp("e2e-anthropic"),
        stem="e2ea",
        kind=Stack,
        extra_models=MODELS,
        memory={"extraction": {"quiet_s": 1.0, "poll_s": 0.2}},
    ) as running:
        yield running


def _user() -> str:
    return "u" + uuid.uuid4().hex[:8]


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content if b.get("type") == "text"]


def _system_text(body: dict[str, Any]) -> str:
    system = body.get("system")
    return system if isinstance(system, str) else "\n".join(b["text"] for b in system or ())


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_a_fact_reaches_the_next_request(stack: Stack, stream: bool) -> None:
    """Two requests that send only their new message: the second reaches the model with the
    first exchange (from Redis), after the client's system, and the model answers from it."""
    user = _user()
    first = stack.ask(
        stream,
        system="Be brief.",
        metadata={"user_id": user},
        messages=[{"role": "user", "content": "My cat is called Miso."}],
    )
    assert first.content[0].text == "Noted: My cat is called Miso."
    second = stack.ask(
        stream,
        system="Be brief.",
        metadata={"user_id": user},
        messages=[{"role": "user", "content": "What is my cat called?"}],
    )
    assert second.content[0].text == "You told me: My cat is called Miso."
    body = stack.last_call()
    # the client's string first, as sent; the head after it, with the cache mark the layout
    # puts on an Anthropic deployment's head (so the string becomes two blocks)
    client, head = body["system"]
    assert client == {"type": "text", "text": "Be brief."}
    assert head["text"].startswith("You are Mira.") and head["cache_control"] == {
        "type": "ephemeral"
    }
    assert [(m["role"], _texts(m["content"])[-1]) for m in body["messages"]] == [
        ("user", "My cat is called Miso."),
        ("assistant", "Noted: My cat is called Miso."),
        ("user", "What is my cat called?"),
    ]
    assert body["metadata"] == {"user_id": user}  # Anthropic's own field, as sent
    assert [t["role"] for t in stack.turns(user, "team.anthropic")] == ["user", "assistant"] * 2


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_an_agents_long_tool_result_reaches_the_model_whole_with_memory(
    stack: Stack, stream: bool
) -> None:
    """Claude Code's shape: its user id (account, session), its system blocks with a cache
    mark, tools, and its whole history with a 40,000-character tool result: the model gets
    every message as sent, the pinned memory after the client's system, the tail after the
    result; the turn is stored under the account, in the session's conversation."""
    account, session = uuid.uuid4().hex[:12], uuid.uuid4().hex[:12]
    claude_code_id = f"user_{'ab' * 32}_account_{account}_session_{session}"
    pinned = stack.http.post(
        f"{stack.proxy}/memory/v1/pinned",
        json={"user": account, "model": "claude", "text": "Prefers tabs over spaces."},
        headers={"Authorization": f"Bearer {MASTER_KEY}"},
    )
    assert pinned.status_code == 201, pinned.text
    output = "".join(f"line {i:05d}\n" for i in range(3637))[:40_000]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "List the files."},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_01", "name": "ls", "input": {"p": "."}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01",
                    "content": output,
                    "cache_control": {"type": "ephemeral"},
                },
            ],
        },
    ]
    tools = [{"name": "ls", "description": "list", "input_schema": {"type": "object"}}]
    stack.ask(
        stream,
        system=CLAUDE_SYSTEM,
        metadata={"user_id": claude_code_id},
        tools=tools,
        messages=messages,
    )
    body = stack.last_call()
    assert body["system"][0] == CLAUDE_SYSTEM[0]
    assert "Prefers tabs over spaces." in _system_text(body)
    assert body["messages"][:2] == messages[:2]
    result, *added = body["messages"][2]["content"]
    assert result == messages[2]["content"][0] and len(result["content"]) == 40_000
    assert [b["type"] for b in added] == ["text"] and "<memory" in added[0]["text"]
    stored = stack.turns(account, session)
    assert [t["role"] for t in stored] == ["user", "assistant", "tool", "assistant"]


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_thinking_blocks_are_replayed_byte_exact(stack: Stack, stream: bool) -> None:
    """A reply's thinking blocks (a signed one, a redacted one), streamed or whole, are stored
    whole and reach the model in the next request exactly as the client received them."""
    user = _user()
    signature = "EqQBCkgIARABGAIiQFz+" + uuid.uuid4().hex + "/ü=="
    stack.script(
        {
            "content": "Miso is a fine name.",
            "thinking": [
                {"thinking": "The user names a cat — Miso.\nNote it.", "signature": signature},
                {"data": "RW5jcnlwdGVkIHRoaW5raW5n"},
            ],
        }
    )
    reply = stack.ask(
        stream,
        metadata={"user_id": user},
        messages=[{"role": "user", "content": "My cat is called Miso."}],
    )
    received = [b.model_dump(exclude_none=True) for b in reply.content]
    assert received[0]["signature"] == signature
    stack.ask(
        stream,
        metadata={"user_id": user},
        messages=[{"role": "user", "content": "And my dog?"}],
    )
    replayed = stack.last_call()["messages"][1]
    assert replayed["role"] == "assistant"
    thinking, redacted, text = replayed["content"]
    exact = [json.dumps(b, sort_keys=True, ensure_ascii=False) for b in (thinking, redacted)]
    assert exact == [json.dumps(b, sort_keys=True, ensure_ascii=False) for b in received[:2]]
    # the text as received; the layout's cache mark on the window's end may be added to it
    assert {k: v for k, v in text.items() if k != "cache_control"} == received[2]
    stored = stack.turns(user, "team.anthropic")[1]["msg"]["thinking_blocks"]
    assert stored == received[:2]


def test_one_user_shares_memories_across_chat_completions_and_messages(stack: Stack) -> None:
    """The same user id on Messages (alias ``claude``) and chat completions (alias ``chat``,
    the same ``namespace``): a memory drawn from a Messages conversation is in the head of a
    chat conversation, and one drawn from chat in a new Messages conversation."""
    user = _user()
    stack.ask(
        False, metadata={"user_id": user}, messages=[{"role": "user", "content": "I live in Pune."}]
    )
    stack.wait_memory(user, "I live in Pune.")
    stack.openai().chat.completions.create(
        model="chat",
        user=user,
        messages=[{"role": "user", "content": "My dog is called Rex."}],
        extra_body={"metadata": {"conversation_id": "phone"}},
    )
    chat_body = stack.calls("standin")[-1]
    assert "I live in Pune." in json.dumps(chat_body["messages"][0])
    stack.wait_memory(user, "My dog is called Rex.")
    stack.claude().messages.create(
        model="claude",
        max_tokens=64,
        metadata={"user_id": user},
        messages=[{"role": "user", "content": "Hello again."}],
        extra_headers={"x-litellm-session-id": "laptop"},
    )
    assert "My dog is called Rex." in _system_text(stack.last_call())


BAD_BODIES: list[dict[str, Any]] = [
    {"max_tokens": 8, "messages": []},
    {"max_tokens": 8, "messages": "hi"},
    {"max_tokens": 8, "messages": [{"role": "assistant", "content": "x"}]},
    {"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "text", "text": ""}]}]},
    {"max_tokens": 8, "messages": [{"role": "user", "content": "x"}], "system": 5},
    {"max_tokens": 8, "messages": [{"role": "user", "content": None}]},
    {"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "tool_result"}]}]},
    {"messages": [{"role": "user", "content": "x"}]},
]


@pytest.mark.parametrize("body", BAD_BODIES, ids=range(len(BAD_BODIES)))
def test_bad_input_gets_the_answer_it_gets_without_the_hook(
    stack: Stack, body: dict[str, Any]
) -> None:
    """Each malformed request answers with the same status on the memory alias as on the same
    deployment without memory; never a 500 from the hook."""
    statuses = []
    for model in ("claude", "claude-plain"):
        response = stack.http.post(
            f"{stack.proxy}/v1/messages",
            json={"model": model, "metadata": {"user_id": "bad-input"}, **body},
            headers={"Authorization": f"Bearer {MASTER_KEY}"},
        )
        statuses.append(response.status_code)
        assert "litellm_memory_hook" not in response.text
    assert statuses[0] == statuses[1]
    assert "memory hook: pre-call failed" not in stack.log.read_text(errors="replace")


def test_count_tokens_counts_the_memory(stack: Stack) -> None:
    """``/v1/messages/count_tokens`` (no ``metadata`` in Anthropic's count) counts what the
    model would receive: the user this process saw with the request's Claude Code session
    header gets the earlier turns and the head counted, more than the same body on the alias
    without memory; the count stores nothing and sends Anthropic no metadata."""
    user, headers = _user(), {"x-claude-code-session-id": uuid.uuid4().hex}
    stack.claude().messages.create(
        model="claude",
        max_tokens=64,
        metadata={"user_id": user},
        messages=[{"role": "user", "content": "My cat is called Miso."}],
        extra_headers=headers,
    )
    request: dict[str, Any] = {"messages": [{"role": "user", "content": "What is my cat called?"}]}
    counts = [
        stack.claude().messages.count_tokens(model=model, extra_headers=headers, **request)
        for model in ("claude", "claude-plain")
    ]
    assert counts[0].input_tokens > counts[1].input_tokens
    with_memory, as_sent = stack.standin.get("/_standin/count_tokens_requests").json()[-2:]
    assert "My cat is called Miso." in json.dumps(with_memory["messages"])
    assert "You are Mira." in json.dumps(with_memory["system"])
    assert as_sent["messages"] == request["messages"] and "metadata" not in with_memory
    assert len(stack.turns(user, "team.anthropic")) == 2
