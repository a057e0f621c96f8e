"""End to end: ``recall_scope: user`` through a real LiteLLM proxy process with the stand-in model
and a real Redis, two chat ids of one user (issue 11 item 4).

A frontend that opens a new chat id for every chat: a fact said in chat A reaches the model in
chat B, in ``<earlier_lines>`` and labelled with chat A; an alias without the opt-in does not
recall it; another user never gets it; ``x-memory-layers`` reports the recall layer's size.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.support import harness
from tests.support.prompt_view import memory_text

MODELS = [
    {
        "model_name": "across",
        "litellm_params": {"model": "openai/standin", "api_base": "BASE", "api_key": "x"},
        "model_info": {"memory": {"enabled": True, "recall": {"scope": "user"}}},
    },
    {
        "model_name": "within",
        "litellm_params": {"model": "openai/standin", "api_base": "BASE", "api_key": "x"},
        "model_info": {"memory": {"enabled": True, "namespace": "across"}},
    },
]
FILLER = [f"ok, noted number {i}" for i in range(50)]


class Stack(harness.Running):
    """The proxy, the stand-in's control client, an OpenAI client and Redis."""

    @functools.cached_property
    def client(self) -> openai.OpenAI:
        """An openai client of the proxy with the master key."""
        return self.openai()

    def last_system(self) -> str:
        """The system text (head and tail) of the newest chat request the stand-in model
        received (the background extraction calls are left out)."""
        return memory_text(self.chat_calls()[-1]["messages"])

    def say(self, model: str, user: str, chat: str, text: str, **extra: Any) -> Any:
        """One chat turn with a conversation id, as a frontend sends it."""
        return self.client.chat.completions.with_raw_response.create(
            model=model,
            user=user,
            messages=[{"role": "user", "content": text}],
            extra_body={"metadata": {"conversation_id": chat}},
            **extra,
        )


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Stand-in model + LiteLLM proxy with the two aliases above."""
    with harness.stack(
        tmp_path_factory.mktemp("e2e-recall"), stem="e2e", kind=Stack, extra_models=MODELS
    ) as running:
        yield running


def test_a_fact_from_chat_a_reaches_chat_b(stack: Stack) -> None:
    """Chat A holds the fact (then enough talk to push it out of A's own window); chat B, a new
    chat id of the same user, asks: the model gets the line, labelled with chat A, and the
    debug header reports the recall layer. The alias without the opt-in (same namespace) and
    another user do not get it."""
    user, other = "u" + uuid.uuid4().hex[:8], "u" + uuid.uuid4().hex[:8]
    stack.say("across", user, "chat-a", "My axolotl is called Quibblefrond.")
    for line in FILLER[:3]:
        stack.say("across", user, "chat-a", line)

    raw = stack.say(
        "across",
        user,
        "chat-b",
        "What is my axolotl called again?",
        extra_headers={"x-memory-debug": "1"},
    )
    raw.parse()
    system = stack.last_system()
    earlier = system.split("<earlier_lines>")[1].split("</earlier_lines>")[0]
    assert 'other chat "chat-a"] user: My axolotl is called Quibblefrond.' in earlier
    layers = json.loads(raw.headers["x-memory-layers"])
    assert layers["earlier_lines"] == len(system.split("<earlier_lines>")[1]) - len(
        system.split("</earlier_lines>")[1]
    ) + len("<earlier_lines>")

    stack.say("within", user, "chat-c", "What is my axolotl called again?")
    assert "Quibblefrond" not in stack.last_system()
    stack.say("across", other, "chat-b", "What is my axolotl called again?")
    assert "Quibblefrond" not in stack.last_system()


def test_own_chat_lines_are_not_labelled(stack: Stack) -> None:
    """A line recalled from the chat itself carries its date label only."""
    user = "u" + uuid.uuid4().hex[:8]
    stack.say("across", user, "solo", "The spare key is under the blue flowerpot.")
    for line in FILLER:
        stack.say("across", user, "solo", line)
    stack.say("across", user, "solo", "Where is the spare key?")
    earlier = stack.last_system().split("<earlier_lines>")[1].split("</earlier_lines>")[0]
    line = next(x for x in earlier.splitlines() if "flowerpot" in x)
    assert "other chat" not in line and line.startswith("- [") and " UTC] user: " in line
