"""The stand-in answers a question from what it was given: a memory, a recalled line or an earlier
user message of the request ("You told me: ..."), else "Noted: ..." as before. Through the real
stand-in app (unit) and through a real LiteLLM proxy with the memory hook (end to end)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from litellm_memory_hook.core.prompt import EarlierLine, PromptLayers, build_system_message
from litellm_memory_hook.tools.standin import create_app

from . import harness
from .prompt_view import without_tail

TS = 1_715_000_000_000


def _system(
    pinned: tuple[str, ...] = (),
    memories: tuple[str, ...] = (),
    earlier: tuple[EarlierLine, ...] = (),
) -> dict[str, Any]:
    """A system message holding a memory block as the hook builds it."""
    layers = PromptLayers(
        operator_rules=("You are Mira.",), pinned=pinned, memories=memories, earlier_lines=earlier
    )
    return {"role": "system", "content": build_system_message(layers).text}


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(create_app()) as test_client:
        yield test_client


def _reply(client: TestClient, messages: list[dict[str, Any]]) -> str:
    response = client.post("/v1/chat/completions", json={"model": "m", "messages": messages})
    assert response.status_code == 200, response.text
    return str(response.json()["choices"][0]["message"]["content"])


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def test_question_quotes_the_extracted_memory_sharing_most_words(client: TestClient) -> None:
    system = _system(
        pinned=("I live in Porto.",),
        memories=("User: I work as a nurse.", "User: My cat is called Miso.", "User: I like tea."),
    )
    assert _reply(client, [system, _user("What is my cat called?")]) == (
        "You told me: My cat is called Miso."
    )
    assert _reply(client, [system, _user("where do I live")]) == "You told me: I live in Porto."
    # plural and singular match ("nurses" ~ "nurse")
    assert _reply(client, [system, _user("Do you know about nurses?")]) == (
        "You told me: I work as a nurse."
    )


def test_question_quotes_a_recalled_line_without_its_time_and_speaker(client: TestClient) -> None:
    earlier = (
        EarlierLine(TS, "user", "My locker code is 4711."),
        EarlierLine(TS + 1000, "assistant", "Your locker code is noted, 4711."),
        EarlierLine(TS + 2000, "user", "What locker do I have?"),  # a question: never quoted
    )
    system = _system(earlier=earlier)
    assert _reply(client, [system, _user("Which locker code did I give you?")]) == (
        "You told me: My locker code is 4711."
    )


def test_question_quotes_an_earlier_user_message_of_the_window(client: TestClient) -> None:
    """A new-message client's window: the fact is an earlier user line, not yet a memory."""
    system = _system()
    messages = [
        system,
        _user("My cat is called Miso."),
        {"role": "assistant", "content": "Noted: My cat is called Miso."},
        _user("What is my cat called?"),
    ]
    assert _reply(client, messages) == "You told me: My cat is called Miso."


def test_non_questions_and_unanswered_questions_stay_noted(client: TestClient) -> None:
    system = _system(memories=("User: My cat is called Miso.",))
    assert _reply(client, [system, _user("My dog is called Bruno.")]) == (
        "Noted: My dog is called Bruno."
    )
    # a question sharing no word with any line
    assert _reply(client, [system, _user("Still there?")]) == "Noted: Still there?"
    # earlier lines that are questions are not quoted
    questions = [_user("Question number 1?"), _user("Question number 2?")]
    assert _reply(client, questions) == "Noted: Question number 2?"
    long = "Why " + "x" * 100
    assert _reply(client, [_user(long)]) == "Noted: " + long[:60]


def test_same_request_same_reply_and_scripted_replies_win(client: TestClient) -> None:
    messages = [_system(memories=("User: My cat is called Miso.",)), _user("cat name?")]
    assert {_reply(client, messages) for _ in range(3)} == {"You told me: My cat is called Miso."}
    client.post("/_standin/replies", json=["scripted"]).raise_for_status()
    assert _reply(client, messages) == "scripted"
    assert _reply(client, messages) == "You told me: My cat is called Miso."


def test_anthropic_messages_route_answers_from_its_system(client: TestClient) -> None:
    system = _system(memories=("User: My cat is called Miso.",))["content"]
    body = {
        "model": "claude",
        "max_tokens": 100,
        "system": system,
        "messages": [{"role": "user", "content": "What is my cat called?"}],
    }
    response = client.post("/v1/messages", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["content"][0]["text"] == "You told me: My cat is called Miso."


@pytest.mark.e2e
def test_quick_start_second_request_names_the_cat(tmp_path: Path) -> None:
    """The README's quick start through a real proxy: two requests that each send only the new
    message; the second reply names the cat (from the window). A new conversation of the same
    user, once the extraction ran, gets it from the extracted memories."""
    with harness.stack(
        tmp_path, stem="answers", memory={"extraction": {"quiet_s": 0.5}}
    ) as running:
        client = running.openai()
        user = "alice-" + uuid.uuid4().hex[:6]

        def ask(text: str, conversation: str | None = None) -> str:
            extra = {"metadata": {"conversation_id": conversation}} if conversation else None
            reply = client.chat.completions.create(
                model="demo", user=user, messages=[_user(text)], extra_body=extra
            )
            return reply.choices[0].message.content or ""

        assert ask("My cat is called Miso.") == "Noted: My cat is called Miso."
        assert ask("What is my cat called?") == "You told me: My cat is called Miso."
        deadline = time.monotonic() + 60
        memories: list[str] = []
        while time.monotonic() < deadline and not memories:
            listing = running.http.get(
                f"{running.proxy}/memory/v1/memories",
                params={"user": user, "model": "demo"},
                headers={"Authorization": f"Bearer {harness.MASTER_KEY}"},
            )
            assert listing.status_code == 200, listing.text
            memories = [m["text"] for m in listing.json()["memories"]]
            time.sleep(0.3)
        assert memories == ["User: My cat is called Miso."]
        assert ask("Remind me, what is my cat called?", "another") == (
            "You told me: My cat is called Miso."
        )
        body = running.chat_calls()[-1]
        assert "My cat is called Miso." in body["messages"][0]["content"]
        # the new conversation has no window: the head, the tail, the question
        assert [m["role"] for m in without_tail(body["messages"])] == ["system", "user"]
