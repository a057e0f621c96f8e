"""The stand-in answers a question from what it was given: a memory, a recalled line or an earlier
user message of the request ("You told me: ..."), else "Noted: ..." as before. Through the real
stand-in app; through a real LiteLLM proxy: tests/e2e/test_standin_answers.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from litellm_memory_hook.core.prompt import EarlierLine, PromptLayers, build_system_message
from litellm_memory_hook.tools.standin import create_app

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
