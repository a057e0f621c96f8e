"""End to end: a whole-history client whose turn 2 holds a lone surrogate (a JavaScript client
that cut a string inside an emoji: ``JSON.stringify`` writes ``"\\ud83d"``), through a real
LiteLLM proxy, with the real ``openai`` client.

LiteLLM 1.108.7 answers 400 "Invalid JSON payload" to such a body before any hook runs, for
every alias (the first test), so the memory hook never sees one from it; nor can LiteLLM's
OpenAI and Anthropic clients send one to the model. The second test gives the proxy a decoding
and an encoding that carry it (``tests/support/lone_surrogates.py``: callbacks before and after the
memory hook, which sees the lone surrogate itself): the turns after it get memory, the client's
messages reach the model as sent, and Redis holds each turn once, the lone surrogate as U+FFFD.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.support import harness
from tests.support.harness import MASTER_KEY
from tests.support.lone_surrogates import MARKER
from tests.support.paths import SUPPORT
from tests.support.prompt_view import memory_text, without_tail

RULES = "You are Mira, a warm and concise companion."
SAID = ["My cat is called Miso.", f"I loved the beach trip {MARKER}", "What did I love?", "Name?"]
REPLIES = ["Nice name!", "Sounds fun!", "The beach trip.", "Miso."]


class JavaScriptWire(httpx.BaseTransport):
    """Sends a request body as a JavaScript client writes it: every :data:`MARKER` in a string
    (JSON ``"\\\\ud83d"``, an escaped backslash) becomes the escape ``"\\ud83d"`` of the lone
    surrogate itself, which Python's JSON encoders (httpx's, the openai client's) refuse."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Forward the request with its body rewritten (and its length set again)."""
        body = request.read().replace(b"\\\\ud83d", b"\\ud83d")
        headers = httpx.Headers(request.headers)
        headers["content-length"] = str(len(body))
        return self.inner.handle_request(
            httpx.Request(
                request.method,
                request.url,
                headers=headers,
                content=body,
                extensions=request.extensions,
            )
        )

    def close(self) -> None:
        self.inner.close()


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.Running]:
    """Stand-in + proxy: ``demo`` (memory) and ``plain``; the decoding callback before the
    memory hook, the encoding one after it."""
    folder = tmp_path_factory.mktemp("e2e-surrogates")
    shutil.copy(SUPPORT / "lone_surrogates.py", folder / "lone_surrogates.py")
    models = [
        {
            "model_name": "plain",
            "litellm_params": {"model": "openai/standin", "api_base": "BASE", "api_key": "x"},
        },
    ]
    callbacks = [
        "lone_surrogates.decoder",
        "litellm_memory_hook.proxy_callback.memory_hook",
        "lone_surrogates.encoder",
    ]
    with harness.stack(
        folder,
        stem="e2s",
        extra_models=models,
        extra={
            "litellm_settings": {"callbacks": callbacks},
            "router_settings": {"num_retries": 0, "disable_cooldowns": True},
        },
    ) as started:
        yield started


def _user() -> str:
    return "u" + uuid.uuid4().hex[:8]


def test_litellm_answers_400_to_a_lone_surrogate_for_every_alias(
    running: harness.Running,
) -> None:
    """As sent by a JavaScript client, turn 2's body holds ``"\\ud83d"``: LiteLLM refuses it
    (400) before any hook, the memory alias as the plain one, and so every later request of a
    whole-history client; the model and Redis see only turn 1."""
    user = _user()
    wire = httpx.Client(transport=JavaScriptWire(), timeout=60)
    client = openai.OpenAI(
        base_url=f"{running.proxy}/v1", api_key=MASTER_KEY, max_retries=0, http_client=wire
    )
    calls = len(running.chat_calls())
    running.script(REPLIES[0])
    first = client.chat.completions.create(
        model="demo", user=user, messages=[{"role": "user", "content": SAID[0]}]
    )
    assert first.choices[0].message.content == REPLIES[0]
    history: list[Any] = [
        {"role": "user", "content": SAID[0]},
        {"role": "assistant", "content": REPLIES[0]},
        {"role": "user", "content": SAID[1]},
    ]
    for model, messages in [
        ("plain", history),
        ("demo", history),
        ("demo", [*history, {"role": "user", "content": SAID[2]}]),
    ]:
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(model=model, user=user, messages=messages)
        assert "Invalid JSON payload: no low surrogate in string" in str(refused.value)
    assert len(running.chat_calls()) == calls + 1
    assert [(t["seq"], t["role"], t["text"]) for t in running.turns(user)] == [
        (1, "user", SAID[0]),
        (2, "assistant", REPLIES[0]),
    ]
    wire.close()


def test_turns_after_a_lone_surrogate_get_memory_and_are_stored_once(
    running: harness.Running,
) -> None:
    """A whole-history client through a proxy that carries the lone surrogate: turn 1 plain,
    turn 2's message holds it, turns 3 and 4 send everything again. The model receives, on
    turns 3 and 4, the memory block and the client's messages as sent (the lone surrogate
    included, here in its escaped form); Redis holds the 8 turns once each, in order, the lone
    surrogate as U+FFFD (so the hook saw it). Before, every request holding a lone surrogate
    anywhere passed through without memory and unstored: Redis held turn 1 only."""
    user = _user()
    client = running.openai()
    history: list[Any] = []
    for turn, (said, reply) in enumerate(zip(SAID, REPLIES, strict=True), 1):
        history.append({"role": "user", "content": said})
        running.script(reply)
        answer = client.chat.completions.create(model="demo", user=user, messages=history)
        assert answer.choices[0].message.content == reply
        received = running.chat_calls()[-1]["messages"]
        if turn >= 3:
            assert received[0]["role"] == "system"
            assert received[0]["content"].startswith(RULES)
            assert "<memory_reminder>" in memory_text(received)
            assert without_tail(received)[1:] == history  # as sent, in order, every field
            assert without_tail(received)[3]["content"] == f"I loved the beach trip {MARKER}"
        history.append({"role": "assistant", "content": reply})
    assert [(t["seq"], t["role"], t["text"]) for t in running.turns(user)] == [
        (1, "user", SAID[0]),
        (2, "assistant", REPLIES[0]),
        (3, "user", "I loved the beach trip \ufffd"),
        (4, "assistant", REPLIES[1]),
        (5, "user", SAID[2]),
        (6, "assistant", REPLIES[2]),
        (7, "user", SAID[3]),
        (8, "assistant", REPLIES[3]),
    ]
