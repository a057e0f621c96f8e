"""End to end: ``recall_scope: user`` through a real LiteLLM proxy process with the stand-in model
and a real Redis, two chat ids of one user (issue 11 item 4).

A frontend that opens a new chat id for every chat: a fact said in chat A reaches the model in
chat B, in ``<earlier_lines>`` and labelled with chat A; an alias without the opt-in does not
recall it; another user never gets it; ``x-memory-layers`` reports the recall layer's size.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import pytest
import redis

from .conftest import real_redis_url
from .harness import MASTER_KEY, derived_config, free_port, start_proxy, start_standin, stop

pytestmark = pytest.mark.e2e

MODELS = [
    {
        "model_name": "across",
        "litellm_params": {"model": "openai/standin", "api_base": "BASE", "api_key": "x"},
        "model_info": {"memory": {"enabled": True, "recall_scope": "user"}},
    },
    {
        "model_name": "within",
        "litellm_params": {"model": "openai/standin", "api_base": "BASE", "api_key": "x"},
        "model_info": {"memory": {"enabled": True, "namespace": "across"}},
    },
]
FILLER = [f"ok, noted number {i}" for i in range(50)]


@dataclass
class Stack:
    """The proxy, the stand-in's control client, an OpenAI client and Redis."""

    standin: httpx.Client
    client: openai.OpenAI
    redis: redis.Redis

    def last_system(self) -> str:
        """The system message of the newest chat request the stand-in model received (the
        background extraction calls, which start with their marker, are left out)."""
        received = [
            body
            for body in self.standin.get("/_standin/requests").json()
            if not str(body["messages"][0].get("content", "")).startswith("[memory-extraction]")
        ]
        return str(received[-1]["messages"][0]["content"])

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
    folder = tmp_path_factory.mktemp("e2e-recall")
    standin_port, proxy_port = free_port(), free_port()
    prefix = "e2e" + uuid.uuid4().hex[:8]
    standin = start_standin(standin_port, folder / "standin.log")
    models = json.loads(json.dumps(MODELS).replace("BASE", f"http://127.0.0.1:{standin_port}/v1"))
    config = derived_config(
        folder / "config.yaml", standin_port=standin_port, prefix=prefix, extra_models=models
    )
    try:
        proxy = start_proxy(
            config, proxy_port, folder / "proxy.log", {"REDIS_URL": real_redis_url()}
        )
    except Exception:
        stop(standin)
        raise
    client = openai.OpenAI(
        base_url=f"http://127.0.0.1:{proxy_port}/v1", api_key=MASTER_KEY, max_retries=0, timeout=60
    )
    r = redis.Redis.from_url(real_redis_url(), decode_responses=True)
    with httpx.Client(base_url=f"http://127.0.0.1:{standin_port}", timeout=30) as control:
        yield Stack(control, client, r)
    stop(proxy)
    stop(standin)
    for key in r.scan_iter(match=f"{prefix}:*"):
        r.delete(key)
    r.close()


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
