"""End to end, issue 25: the cache layout through a real proxy and the stand-in model.

An OpenAI-compatible alias with a 10-message window gets its stable head first (the same text
from request to request), the window, then the volatile tail as a system message just before the
question; the window's first message moves only in steps; a pinned memory written over HTTP
reaches the head on the next request. An Anthropic alias gets the tail in the question and
``cache_control`` marks on its stable parts, within Anthropic's limit of four.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import harness
from tests.support.prompt_view import is_tail, without_tail

MODELS: list[dict[str, Any]] = [
    {
        "model_name": "small",
        "litellm_params": {"model": "openai/standin", "api_base": "BASE", "api_key": "x"},
        "model_info": {
            "memory": {
                "enabled": True,
                "system_prompt": "You are Mira.",
                "window": {"max_messages": 10},
            }
        },
    },
    {
        "model_name": "claude-small",
        "litellm_params": {"model": "anthropic/claude-standin", "api_base": "BASE", "api_key": "x"},
        "model_info": {
            "memory": {
                "enabled": True,
                "system_prompt": "You are Mira.",
                "window": {"max_messages": 10},
            }
        },
    },
]


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.Running]:
    folder: Path = tmp_path_factory.mktemp("cache-layout")
    with harness.stack(folder, stem="cachelay", extra_models=MODELS) as stack:
        yield stack


def _ask(running: harness.Running, model: str, user: str, text: str) -> dict[str, Any]:
    response = running.openai().chat.completions.create(
        model=model, user=user, messages=[{"role": "user", "content": text}]
    )
    assert response.choices[0].message.content
    body: dict[str, Any] = running.chat_calls()[-1]
    return body


def test_openai_compatible_alias_keeps_its_head_and_steps_its_window(
    running: harness.Running,
) -> None:
    """14 requests: the tail right before each question, the window's first message changing
    at steps only, the head only with it; a pin reaches the head at once."""
    user = "u" + uuid.uuid4().hex[:8]
    heads, firsts = [], []
    for i in range(14):
        messages = _ask(running, "small", user, f"Message number {i} about my garden")["messages"]
        heads.append(messages[0]["content"])
        firsts.append(without_tail(messages)[1]["content"])
        assert is_tail(messages[-2]) and "<memory_reminder>" in messages[-2]["content"]
        assert messages[-1] == {"role": "user", "content": f"Message number {i} about my garden"}
    assert all(head.startswith("You are Mira.") for head in heads)
    steps = [i for i in range(1, len(firsts)) if firsts[i] != firsts[i - 1]]
    assert 1 <= len(steps) <= 3, firsts
    # the head (its snapshot of the memories and summary the background jobs wrote) changes
    # only where the window's first message does: an epoch
    assert {i for i in range(1, len(heads)) if heads[i] != heads[i - 1]} <= set(steps)
    pinned = httpx.post(
        f"{running.proxy}/memory/v1/pinned",
        json={"user": user, "model": "small", "text": "My name is Ana."},
        headers={"Authorization": f"Bearer {harness.MASTER_KEY}"},
        timeout=30,
    )
    assert pinned.status_code == 201, pinned.text
    messages = _ask(running, "small", user, "What is my name?")["messages"]
    assert "My name is Ana." in messages[0]["content"]


def test_anthropic_alias_gets_the_tail_in_the_question_and_cache_marks(
    running: harness.Running,
) -> None:
    """Through LiteLLM's Anthropic transformation: the system field is the head, marked; the
    reply before the question is marked; the question's first block is the tail; at most four
    marks."""
    user = "u" + uuid.uuid4().hex[:8]
    _ask(running, "claude-small", user, "My cat is called Miso.")
    body = _ask(running, "claude-small", user, "What is my cat called?")
    system = body["system"]
    blocks = [system] if isinstance(system, dict) else system
    assert blocks[-1]["cache_control"] == {"type": "ephemeral"}
    assert "You are Mira." in blocks[0]["text"]
    reply, question = body["messages"][-2], body["messages"][-1]
    assert reply["role"] == "assistant"
    assert reply["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert question["content"][0]["text"].startswith("<memory_context>")
    marks = sum(
        1
        for message in [{"content": blocks}, *body["messages"]]
        for block in message["content"]
        if isinstance(block, dict) and "cache_control" in block
    )
    assert marks == 2
