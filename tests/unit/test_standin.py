"""The stand-in model: extraction modes, scripted replies, text completions and embeddings."""

from __future__ import annotations

import base64
import json
import math
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from litellm_memory_hook.core.escape import escape_data
from litellm_memory_hook.tools.standin import EXTRACTION_MARKER, create_app

SYSTEM = {"role": "system", "content": f"{EXTRACTION_MARKER}\nExtract lasting facts as JSON."}

SAMPLES: list[dict[str, Any]] = [
    {
        "sample_id": "s-1",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "Hi Ben!"},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Hi Ana, how are you?"},
                {"speaker": "Ana", "dia_id": "D1:3", "text": "I adopted a cat  named Miso."},
                {"speaker": "Ben", "dia_id": "D1:4", "text": "I <3 cats <b>so</b> much."},
            ],
            "session_2_date_time": "2:00 pm on 9 May, 2023",
            "session_2": [
                {"speaker": "Ana", "dia_id": "D2:1", "text": "Hi Ben!"},
                {"speaker": "Ana", "dia_id": "D2:2", "text": "I start at the bakery on Monday."},
            ],
        },
        "observation": {
            "session_2_observation": {
                "Ana": [["Ana starts a bakery job on Monday.", "D2:2"]],
            },
            "session_1_observation": {
                "Ana": [
                    ["Ana adopted a cat named Miso.", "D1:3"],
                    ["Ana has a cat.", ["D1:3", "D2:2"]],
                ],
                "Ben": [["Ben loves cats.", "D1:4"]],
            },
        },
    },
    {
        "sample_id": "s-2",
        "conversation": {
            "speaker_a": "Cy",
            "speaker_b": "Di",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Cy", "dia_id": "D1:1", "text": "Hi Ben!"},
                {"speaker": "Cy", "dia_id": "D1:2", "text": "I moved to Oslo last week."},
            ],
        },
        "observation": {"session_1_observation": {"Cy": [["Cy moved to Oslo.", "D1:2"]]}},
    },
]


def _prompt(
    lines: Sequence[tuple[str, str]],
    memories: Sequence[str] = (),
    pinned: Sequence[str] = (),
    summary: str = "",
) -> list[dict[str, Any]]:
    """An extraction call's messages, with escaped data as the extraction prompt writes it."""
    memory_lines = "\n".join(f"- {escape_data(m)}" for m in memories) or "(none)"
    pinned_lines = "\n".join(f"- {escape_data(m)}" for m in pinned) or "(none)"
    new_lines = "\n".join(
        f"- 2023-05-08 13:{56 + i:02d} UTC, {escape_data(speaker)}: {escape_data(text)}"
        for i, (speaker, text) in enumerate(lines)
    )
    user = (
        f"<current_memories>\n{memory_lines}\n</current_memories>\n"
        f"<pinned_memories>\n{pinned_lines}\n</pinned_memories>\n"
        f"<summary>\n{escape_data(summary) or '(none)'}\n</summary>\n"
        f"<new_lines>\n{new_lines}\n</new_lines>"
    )
    return [SYSTEM, {"role": "user", "content": user}]


def _chat(client: TestClient, messages: list[dict[str, Any]], **extra: Any) -> Any:
    response = client.post(
        "/v1/chat/completions", json={"model": "standin", "messages": messages, **extra}
    )
    response.raise_for_status()
    return response.json()


def _extract(client: TestClient, messages: list[dict[str, Any]], **extra: Any) -> Any:
    return json.loads(_chat(client, messages, **extra)["choices"][0]["message"]["content"])


@pytest.fixture
def client() -> TestClient:
    """A stand-in in default mode."""
    return TestClient(create_app(assistant_name="Bot"))


@pytest.fixture
def oracle_client(tmp_path: Path) -> TestClient:
    """A stand-in in oracle mode on the hand-made samples above."""
    path = tmp_path / "oracle.json"
    path.write_text(json.dumps(SAMPLES), encoding="utf-8")
    return TestClient(create_app(mode="oracle", oracle=path))


def test_default_extraction_is_json_with_both_keys_and_deterministic(client: TestClient) -> None:
    """Default mode answers an extraction call (JSON mode too) with the same JSON every time."""
    messages = _prompt([("Caroline", "I went hiking today. I love the mountains.")])
    first = _chat(client, messages, response_format={"type": "json_object"})
    second = _chat(client, messages)
    text = first["choices"][0]["message"]["content"]
    assert text == second["choices"][0]["message"]["content"]
    reply = json.loads(text)
    assert set(reply) == {"memories", "summary"}
    assert isinstance(reply["memories"], list) and isinstance(reply["summary"], str)
    assert first["usage"]["prompt_tokens"] > 0 and first["usage"]["completion_tokens"] > 0


def test_default_extraction_keeps_memories_and_adds_user_facts(client: TestClient) -> None:
    """Current memories stay first; a user's fact sentence is added once, questions, the
    assistant's lines and pinned repeats are not; the summary grows by one short sentence."""
    messages = _prompt(
        [
            ("Caroline", "Hello! My cat is called Miso. What is my name?"),
            ("Bot", "My name is Bot."),
            ("assistant", "I love helping."),
            ("Caroline", "My cat is called Miso. I live in Pune."),
        ],
        memories=["User works at a bank."],
        pinned=["User: I live in Pune."],
        summary="They met online.",
    )
    reply = _extract(client, messages)
    assert reply["memories"] == ["User works at a bank.", "User: My cat is called Miso."]
    assert reply["summary"] == "They met online. Then they talked about My cat is called Miso."
    assert len(reply["summary"].split()) < 200


def test_default_summary_stays_under_200_words(client: TestClient) -> None:
    """A long old summary is cut so that the new summary stays under 200 words."""
    reply = _extract(client, _prompt([("Caroline", "Mujhe chai pasand hai.")], summary="w " * 400))
    assert len(reply["summary"].split()) < 200
    assert reply["summary"].endswith("Then they talked about Mujhe chai pasand hai.")
    assert reply["memories"] == ["User: Mujhe chai pasand hai."]


def test_oracle_returns_exactly_the_observations_of_present_lines(
    oracle_client: TestClient,
) -> None:
    """Oracle mode adds every observation whose evidence is among the new lines, in dataset
    order, after the current memories, without duplicates; the summary is kept."""
    messages = _prompt(
        [("Ana", "Hi Ben!"), ("Ana", "I adopted a cat named Miso.")],
        memories=["Ana has a cat."],
        summary="Old summary.",
    )
    reply = _extract(oracle_client, messages)
    assert reply == {
        "memories": ["Ana has a cat.", "Ana adopted a cat named Miso."],
        "summary": "Old summary.",
    }
    later = _extract(oracle_client, _prompt([("Ana", "I start at the bakery on Monday.")]))
    assert later["memories"] == ["Ana has a cat.", "Ana starts a bakery job on Monday."]


def test_oracle_matches_escaped_angle_brackets(oracle_client: TestClient) -> None:
    """A line whose ``<``/``>`` the prompt replaced by look-alikes still finds its dia_id."""
    messages = _prompt([("Ben", "I <3 cats <b>so</b> much.")])
    assert "‹3" in messages[1]["content"]
    assert _extract(oracle_client, messages)["memories"] == ["Ben loves cats."]


def test_oracle_picks_the_sample_and_matches_cut_lines(oracle_client: TestClient) -> None:
    """A line said in two samples counts for the sample most lines match; a line the prompt cut
    short with an ellipsis still matches by its start."""
    messages = _prompt([("user", "Hi Ben!"), ("user", "I moved to Oslo…")])
    assert _extract(oracle_client, messages)["memories"] == ["Cy moved to Oslo."]
    unknown = _extract(oracle_client, _prompt([("Ana", "Nothing like this in the data.")]))
    assert unknown == {"memories": [], "summary": ""}


def test_oracle_route_maps_facts_to_evidence(oracle_client: TestClient) -> None:
    """``GET /_standin/oracle`` maps every observation to its dia_ids, per sample on request."""
    mapping = oracle_client.get("/_standin/oracle").json()
    assert mapping["Ana has a cat."] == ["D1:3", "D2:2"]
    assert mapping["Cy moved to Oslo."] == ["D1:2"]
    assert len(mapping) == 5
    one = oracle_client.get("/_standin/oracle", params={"sample_id": "s-2"}).json()
    assert one == {"Cy moved to Oslo.": ["D1:2"]}


def test_queued_extraction_replies_win_and_are_separate(client: TestClient) -> None:
    """Extraction calls take only extraction-queued replies (invalid JSON too), chat calls only
    chat-queued ones; both are recorded, extraction bodies also on their own; DELETE clears."""
    client.post("/_standin/extraction_replies", json=["not json {", {"status": 503}])
    client.post("/_standin/replies", json=["scripted chat"])
    chat = [{"role": "user", "content": "Hello"}]
    extraction = _prompt([("Caroline", "My cat is called Miso.")])
    assert _chat(client, extraction)["choices"][0]["message"]["content"] == "not json {"
    assert _chat(client, chat)["choices"][0]["message"]["content"] == "scripted chat"
    failed = client.post("/v1/chat/completions", json={"model": "m", "messages": extraction})
    assert failed.status_code == 503 and "message" in failed.json()["error"]
    assert "memories" in _extract(client, extraction)
    assert _chat(client, chat)["choices"][0]["message"]["content"] == "Noted: Hello"
    assert len(client.get("/_standin/requests").json()) == 5
    assert len(client.get("/_standin/extraction_requests").json()) == 3
    client.post("/_standin/extraction_replies", json=["left over"])
    client.delete("/_standin/requests").raise_for_status()
    assert client.get("/_standin/requests").json() == []
    assert client.get("/_standin/extraction_requests").json() == []
    assert "memories" in _extract(client, extraction)


def test_streamed_extraction_reply_is_the_json_text(client: TestClient) -> None:
    """A streamed extraction call delivers the same JSON text in chunks."""
    messages = _prompt([("Caroline", "My cat is called Miso.")])
    expected = _chat(client, messages)["choices"][0]["message"]["content"]
    response = client.post(
        "/v1/chat/completions", json={"model": "m", "messages": messages, "stream": True}
    )
    chunks = [json.loads(line[6:]) for line in _data_lines(response.text) if line != "data: [DONE]"]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == expected


def test_chat_call_still_answers_noted(oracle_client: TestClient) -> None:
    """A chat request without the extraction marker gets ``Noted: ...`` in every mode."""
    messages = [
        {"role": "system", "content": "You are kind. [memory-extraction]"},
        {"role": "user", "content": "My cat is called Miso."},
    ]
    reply = _chat(oracle_client, messages)
    assert reply["choices"][0]["message"]["content"] == "Noted: My cat is called Miso."
    assert oracle_client.get("/_standin/extraction_requests").json() == []


def _data_lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.startswith("data: ")]


def test_text_completions_answer_in_openai_shape(client: TestClient) -> None:
    """``/v1/completions`` answers one ``text_completion`` choice per prompt, with usage."""
    body = client.post("/v1/completions", json={"model": "m", "prompt": ["Hello there", "Hi"]})
    reply = body.json()
    assert reply["object"] == "text_completion" and reply["model"] == "m"
    assert {"id", "created", "usage"} <= set(reply)
    assert reply["choices"] == [
        {"text": "Noted: Hello there", "index": 0, "finish_reason": "stop", "logprobs": None},
        {"text": "Noted: Hi", "index": 1, "finish_reason": "stop", "logprobs": None},
    ]
    assert reply["usage"]["total_tokens"] == (
        reply["usage"]["prompt_tokens"] + reply["usage"]["completion_tokens"]
    )


def test_text_completions_stream_in_sse(client: TestClient) -> None:
    """A streamed text completion sends ``text_completion`` chunks, a stop, usage, ``[DONE]``."""
    response = client.post(
        "/v1/completions",
        json={
            "model": "m",
            "prompt": "Hello there",
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    assert response.headers["content-type"].startswith("text/event-stream")
    lines = _data_lines(response.text)
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    assert all(c["object"] == "text_completion" for c in chunks)
    text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
    assert text == "Noted: Hello there"
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] > 0


def test_embeddings_are_deterministic_unit_vectors(client: TestClient) -> None:
    """``/v1/embeddings`` gives one normalised 16-float vector per input (strings or tokens),
    equal for equal texts, and base64 float32 when asked."""
    inputs: list[Any] = ["cat", "dog", "cat", [1, 2, 3]]
    reply = client.post("/v1/embeddings", json={"model": "e", "input": inputs}).json()
    assert reply["object"] == "list" and reply["model"] == "e"
    vectors = [item["embedding"] for item in reply["data"]]
    assert [item["index"] for item in reply["data"]] == [0, 1, 2, 3]
    assert all(item["object"] == "embedding" for item in reply["data"])
    assert all(len(v) == 16 and math.isclose(math.hypot(*v), 1.0) for v in vectors)
    assert vectors[0] == vectors[2] != vectors[1]
    assert reply["usage"]["prompt_tokens"] == reply["usage"]["total_tokens"] >= 4
    single = client.post(
        "/v1/embeddings", json={"model": "e", "input": "cat", "encoding_format": "base64"}
    ).json()
    decoded = struct.unpack("<16f", base64.b64decode(single["data"][0]["embedding"]))
    assert decoded == pytest.approx(vectors[0], rel=1e-6, abs=1e-7)


def test_unknown_v1_route_answers_openai_404(client: TestClient) -> None:
    """A route the stand-in lacks answers 404 with an OpenAI-shaped error, not a crash."""
    response = client.post("/v1/audio/speech", json={"model": "m", "input": "hi"})
    assert response.status_code == 404
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"


def test_create_app_rejects_bad_modes(tmp_path: Path) -> None:
    """An unknown mode, or oracle mode without a file, fails at start."""
    with pytest.raises(ValueError, match="unknown"):
        create_app(mode="smart")
    with pytest.raises(ValueError, match="oracle"):
        create_app(mode="oracle")


USE_T1 = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
}


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([], "messages: at least one message is required"),
        ([{"role": "assistant", "content": "hi"}], 'first message must use the "user" role'),
        ([{"role": "system", "content": "x"}], "messages.0.role: Input should be"),
        ([{"role": "user", "content": [{"type": "text", "text": ""}]}], "must be non-empty"),
        ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}], "non-empty"),
        (
            [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]}],
            "unexpected `tool_use_id` found in `tool_result` blocks: t1",
        ),
        ([{"role": "user", "content": "go"}, USE_T1], "were found without `tool_result` blocks"),
        (
            [{"role": "user", "content": "go"}, USE_T1, {"role": "user", "content": "and?"}],
            "messages.1: `tool_use` ids were found without `tool_result` blocks",
        ),
    ],
)
def test_messages_route_answers_anthropics_400s(
    client: TestClient, messages: list[dict[str, Any]], problem: str
) -> None:
    """The Messages route refuses what Anthropic refuses, in Anthropic's error shape."""
    answer = client.post("/v1/messages", json={"model": "m", "max_tokens": 9, "messages": messages})
    assert answer.status_code == 400
    body = answer.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert problem in body["error"]["message"]


def test_messages_route_answers_and_streams_in_anthropics_shape(client: TestClient) -> None:
    """A valid conversation is answered "Noted: <last user text>", whole and as events."""
    body = {
        "model": "claude-standin",
        "max_tokens": 64,
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
            {"role": "user", "content": [{"type": "text", "text": "my cat is Miso"}]},
        ],
    }
    answer = client.post("/v1/messages", json=body).json()
    assert answer["type"] == "message" and answer["role"] == "assistant"
    assert answer["content"] == [{"type": "text", "text": "Noted: my cat is Miso"}]
    assert answer["stop_reason"] == "end_turn" and answer["usage"]["output_tokens"] >= 1
    with client.stream("POST", "/v1/messages", json={**body, "stream": True}) as stream:
        lines = [line for line in stream.iter_lines() if line.startswith("data: ")]
    events = [json.loads(line.removeprefix("data: ")) for line in lines]
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["message_start", "content_block_start"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    text = "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta")
    assert text == "Noted: my cat is Miso"
    assert client.get("/_standin/requests").json()[-1]["system"] == body["system"]


def test_messages_route_recognises_extraction_calls(client: TestClient) -> None:
    """An extraction job's call through an anthropic/ model: the marker is in ``system``."""
    body = {
        "model": "m",
        "max_tokens": 512,
        "system": SYSTEM["content"],
        "messages": [
            {"role": "user", "content": "<new_lines>\n- x, user: my name is Ana\n</new_lines>"}
        ],
    }
    answer = client.post("/v1/messages", json=body).json()
    parsed = json.loads(answer["content"][0]["text"])
    assert set(parsed) == {"memories", "summary"}
    assert len(client.get("/_standin/extraction_requests").json()) == 1


def test_messages_route_answers_scripted_tool_calls_as_tool_use(client: TestClient) -> None:
    """A scripted OpenAI-style tool call comes back as a tool_use block (stop_reason
    tool_use), whole and streamed (input_json_delta)."""
    function = {"name": "weather", "arguments": '{"city":"Pune"}'}
    call = {"id": "toolu_9", "type": "function", "function": function}
    body = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "weather?"}]}
    client.post("/_standin/replies", json=[{"content": None, "tool_calls": [call]}] * 2)
    answer = client.post("/v1/messages", json=body).json()
    assert answer["stop_reason"] == "tool_use"
    assert answer["content"] == [
        {"type": "tool_use", "id": "toolu_9", "name": "weather", "input": {"city": "Pune"}}
    ]
    with client.stream("POST", "/v1/messages", json={**body, "stream": True}) as stream:
        lines = [line for line in stream.iter_lines() if line.startswith("data: ")]
    events = [json.loads(line.removeprefix("data: ")) for line in lines]
    starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert starts[-1] == {"type": "tool_use", "id": "toolu_9", "name": "weather", "input": {}}
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
    assert json.loads(deltas[-1]["partial_json"]) == {"city": "Pune"}
    assert events[-2]["delta"]["stop_reason"] == "tool_use"


def test_tool_traffic_that_is_not_whole_is_refused_as_the_providers_do(client: TestClient) -> None:
    """OpenAI's route: a tool message that answers no call right before it, and a call left
    without its result (at the end too), are 400s; a whole group is answered. Anthropic's route:
    a whole tool_use / tool_result pair is answered, and a tool-call answer without text has
    no empty text block (streamed or not)."""
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    asked = {"role": "user", "content": "go"}
    calling = {"role": "assistant", "content": None, "tool_calls": [call]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "done"}
    for messages in ([asked, result], [asked, calling], [asked, calling, asked]):
        refused = client.post("/v1/chat/completions", json={"model": "m", "messages": messages})
        assert refused.status_code == 400, messages
        assert refused.json()["error"]["type"] == "invalid_request_error"
    assert _chat(client, [asked, calling, result])["choices"]
    pair = [
        {"role": "user", "content": "go"},
        USE_T1,
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
        },
    ]
    answer = client.post("/v1/messages", json={"model": "m", "max_tokens": 9, "messages": pair})
    assert answer.status_code == 200
    client.post("/_standin/replies", json=[{"content": None, "tool_calls": [call]}] * 2)
    body = {"model": "m", "max_tokens": 9, "messages": pair[:1]}
    blocks = client.post("/v1/messages", json=body).json()["content"]
    assert [b["type"] for b in blocks] == ["tool_use"]
    with client.stream("POST", "/v1/messages", json={**body, "stream": True}) as stream:
        lines = [line for line in stream.iter_lines() if line.startswith("data: ")]
    starts = [json.loads(x[6:]) for x in lines if '"content_block_start"' in x]
    assert [(e["index"], e["content_block"]["type"]) for e in starts] == [(0, "tool_use")]
