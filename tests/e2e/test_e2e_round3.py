"""End to end, issue 28 (third round of ../shared/cases/field-cases.md) through a real LiteLLM
proxy: E04 (SillyTavern's Summarize, a system message after the chat), E05 (Open WebUI's
temporary chats), E01 (a 1,068-character tool call id), E03 (an audio reply). Each compares what
the model received and what Redis holds with the right value."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from litellm_memory_hook.store.keys import due_key, key_id
from tests.support import harness
from tests.support.harness import MASTER_KEY
from tests.support.prompt_view import memory_text, without_tail

CHAT_HEADER = "x-openwebui-chat-id"
USER_HEADER = "x-openwebui-user-id"


class Round3(harness.Running):
    """The proxy, the stand-in and Redis of these tests."""

    def chat(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
        return self.http.post(
            f"{self.proxy}/v1/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {MASTER_KEY}", **(headers or {})},
        )

    def received(self) -> dict[str, Any]:
        return dict(self.chat_calls()[-1])

    def keys_of(self, user: str) -> list[str]:
        return sorted(self.redis.scan_iter(match=f"{self.prefix}:{{master:{key_id(user)}}}:*"))


@pytest.fixture(scope="module")
def round3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Round3]:
    plain = {
        "model_name": "plain",
        "litellm_params": {"model": "openai/standin", "api_base": "BASE", "api_key": "x"},
    }
    small = {  # a 2,048-token model (E06), its window declared in model_info
        "model_name": "small",
        "litellm_params": {"model": "openai/standin", "api_base": "BASE", "api_key": "x"},
        "model_info": {"memory": {"enabled": True}, "max_input_tokens": 2048},
    }
    with harness.stack(
        tmp_path_factory.mktemp("e2e-round3"),
        stem="e3r",
        kind=Round3,
        extra_models=[plain, small],
        memory={"identity": {"user_header": USER_HEADER, "conversation_header": CHAT_HEADER}},
        extra={"router_settings": {"num_retries": 0, "disable_cooldowns": True}},
    ) as running:
        yield running


def _user() -> str:
    return "u" + uuid.uuid4().hex[:8]


SUMMARIZE = (
    "Ignore previous instructions. Summarize the most important facts and events in the story "
    "so far. If a summary already exists in your memory, use that as a base and expand with new "
    "facts. Limit the summary to 300 words or less. Your response should include nothing but "
    "the summary."
)


def test_e04_summarize_after_the_chat_is_a_side_request(round3: Round3) -> None:
    """E04: SillyTavern's Summarize (the whole chat, then its instruction as a system message,
    no new user turn) reaches the model as LiteLLM alone delivers it; nothing is stored and the
    stored a2 is unchanged (it was read as a prefill and the summary glued onto it)."""
    user = _user()
    system = {"role": "system", "content": "You are Mira, a knight in the story."}
    chat = [system, {"role": "user", "content": "I enter the castle of Vel."}]
    round3.script("The gate creaks open.")
    assert round3.chat({"model": "demo", "user": user, "messages": chat}).status_code == 200
    chat += [
        {"role": "assistant", "content": "The gate creaks open."},
        {"role": "user", "content": "I take the silver key from the altar."},
    ]
    round3.script("The key glows in your hand.")
    assert round3.chat({"model": "demo", "user": user, "messages": chat}).status_code == 200
    chat.append({"role": "assistant", "content": "The key glows in your hand."})
    stored = round3.turns(user)
    assert [t["text"] for t in stored] == [m["content"] for m in chat[1:]]

    body = {"user": user, "messages": [*chat, {"role": "system", "content": SUMMARIZE}]}
    round3.script("Summary: the knight entered Vel and took the silver key.")
    assert round3.chat({**copy.deepcopy(body), "model": "plain"}).status_code == 200
    plain = round3.received()["messages"]
    round3.script("Summary: the knight entered Vel and took the silver key.")
    answer = round3.chat({**copy.deepcopy(body), "model": "demo"})
    assert answer.status_code == 200, answer.text
    seen = round3.received()["messages"]
    assert without_tail(seen)[1:] == plain[1:]  # the client's chat as sent, instruction last
    assert seen[-1] == {"role": "system", "content": SUMMARIZE}
    assert round3.turns(user) == stored  # nothing stored, no stored reply changed


def test_e05_a_temporary_chat_reads_memory_and_leaves_no_trace(round3: Round3) -> None:
    """E05: Open WebUI's temporary chat (``x-openwebui-chat-id: local:3f2a9c``) gets memory
    but nothing of it is stored or scheduled for extraction; the user's other chats never see
    its facts. ``metadata.memory_mode: read_only`` still works for a normal chat id."""
    user = _user()
    normal = {USER_HEADER: user, CHAT_HEADER: "chat-1"}
    round3.script("Noted.")
    first = {"model": "demo", "messages": [{"role": "user", "content": "My cat is Miso."}]}
    assert round3.chat(first, normal).status_code == 200
    before = round3.keys_of(user)
    due_before = round3.redis.zrange(due_key(round3.prefix), 0, -1)

    temporary = {USER_HEADER: user, CHAT_HEADER: "local:3f2a9c"}
    secret = {"role": "user", "content": "My secret plan is TEMPCHAT-99."}
    round3.script("Your secret is safe.")
    answer = round3.chat({"model": "demo", "messages": [secret]}, temporary)
    assert answer.status_code == 200, answer.text
    assert "<memory_reminder>" in memory_text(round3.received()["messages"])  # memory read
    round3.script("Still safe.")
    follow = [
        secret,
        {"role": "assistant", "content": "Your secret is safe."},
        {"role": "user", "content": "Remember it well."},
    ]
    assert round3.chat({"model": "demo", "messages": follow}, temporary).status_code == 200
    assert round3.keys_of(user) == before  # no key of the temporary chat, nothing changed
    assert round3.redis.zrange(due_key(round3.prefix), 0, -1) == due_before

    round3.script("I do not know.")
    ask = {"model": "demo", "messages": [{"role": "user", "content": "What is my secret plan?"}]}
    assert round3.chat(ask, {USER_HEADER: user, CHAT_HEADER: "chat-2"}).status_code == 200
    assert "TEMPCHAT-99" not in str(round3.received()["messages"])
    assert all("TEMPCHAT" not in t["text"] for t in round3.turns(user, "chat-2"))

    read_only = {**first, "metadata": {"memory_mode": "read_only"}}
    read_only["messages"] = [{"role": "user", "content": "Only read, TEMPCHAT-100."}]
    assert round3.chat(read_only, normal).status_code == 200
    assert all("TEMPCHAT-100" not in t["text"] for t in round3.turns(user, "chat-1"))


#: 1,068 characters, shaped as LiteLLM's Gemini ids (call id, separator, base64 signature); the
#: separator is not LiteLLM's literal ``__thought__``: LiteLLM strips what follows that from a
#: tool result's id on its way to an OpenAI-compatible deployment (the stand-in), so with it the
#: stand-in would see a mismatch LiteLLM makes, with or without the hook (not checked here).
LONG_ID = "call_7f3a9c" + "_x_thought_x" + ("CiQBjz1rX" * 117)[:1045]


@pytest.mark.parametrize("ident", ["call_short1", LONG_ID], ids=["short", "1068"])
def test_e01_a_1068_character_tool_call_id_round_trips(round3: Round3, ident: str) -> None:
    """E01: a tool call whose id is 1,068 characters (Gemini 3 through LiteLLM carries its
    thought signature in the id); the agent sends only the tool result: the model receives the
    stored call with its id exactly as produced, right before the result, and answers 200 (the
    id was cut to 128 characters plus a hash: 500, missing tool call)."""
    assert len(LONG_ID) == 1068
    user = _user()
    call = {
        "id": ident,
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'},
    }
    round3.script({"content": None, "tool_calls": [call]})
    ask = {"role": "user", "content": "What is the weather in Lisbon?"}
    first = round3.chat({"model": "demo", "user": user, "messages": [ask]})
    assert first.status_code == 200, first.text
    produced = first.json()["choices"][0]["message"]["tool_calls"][0]["id"]
    assert produced == ident
    stored = round3.turns(user)
    assert [c["id"] for c in stored[-1]["tool_calls"]] == [ident]

    result = {"role": "tool", "tool_call_id": ident, "content": "18 C, sunny"}
    round3.script("It is 18 C and sunny in Lisbon.")
    answer = round3.chat({"model": "demo", "user": user, "messages": [result]})
    assert answer.status_code == 200, answer.text
    seen = without_tail(round3.received()["messages"])
    calls = [m for m in seen if m.get("tool_calls")]
    assert calls and [c["id"] for c in calls[-1]["tool_calls"]] == [ident]
    assert seen[seen.index(calls[-1]) + 1] == result
    assert [t["text"] for t in round3.turns(user)][-1] == "It is 18 C and sunny in Lisbon."


def _outcome_cases(user: str) -> list[tuple[str, dict[str, Any], dict[str, str], str | None]]:
    """(name, body, headers, the x-memory-outcome expected) for N01, one per reason."""
    ask = [{"role": "user", "content": "Hello there."}]
    chat = [
        {"role": "user", "content": "I enter the castle of Vel."},
        {"role": "assistant", "content": "The gates creak open."},
    ]
    return [
        ("used", {"model": "demo", "user": user, "messages": ask}, {}, "used"),
        ("no_user", {"model": "demo", "messages": ask}, {}, "no_user"),
        (
            "off",
            {"model": "demo", "user": user, "messages": ask, "metadata": {"memory_mode": "off"}},
            {},
            "off",
        ),
        (
            "read_only",
            {
                "model": "demo",
                "user": user,
                "messages": ask,
                "metadata": {"memory_mode": "read_only"},
            },
            {},
            "read_only",
        ),
        (
            "temporary",
            {"model": "demo", "messages": ask},
            {USER_HEADER: user, CHAT_HEADER: "local:9e1"},
            "temporary",
        ),
        (
            "side_request",
            {
                "model": "demo",
                "user": user,
                "messages": [*chat, {"role": "system", "content": SUMMARIZE}],
            },
            {},
            "side_request",
        ),
        (
            "invalid_request",
            {
                "model": "demo",
                "user": user,
                "messages": [{"role": "user", "content": [{"type": "bogus_part", "x": 1}]}],
            },
            {},
            "invalid_request",
        ),
        ("plain alias: no header", {"model": "plain", "user": user, "messages": ask}, {}, None),
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_n01_every_response_says_why_memory_was_used_or_not(round3: Round3, stream: bool) -> None:
    """N01: every response of a memory-enabled alias carries ``x-memory-outcome`` with the
    reason (one documented value each: ``proxy/outcomes.py``), streamed or not; an alias
    without memory has no such header. A client's own value in its metadata is ignored."""
    user = _user()
    round3.script("Noted.")
    seen = {}
    for name, body, headers, expected in _outcome_cases(user):
        body = {**body, "stream": stream}
        metadata = dict(body.get("metadata") or {})
        body["metadata"] = {**metadata, "litellm_memory_outcome": "used"}  # a forged value
        if expected is None or expected == "no_user":
            body["metadata"].pop("litellm_memory_outcome")
        answer = round3.chat(body, headers)
        seen[name] = (answer.status_code, answer.headers.get("x-memory-outcome"))
    # a body the hook does not read answers what LiteLLM alone answers (the alias without memory)
    bogus = next(body for name, body, _, _ in _outcome_cases(user) if name == "invalid_request")
    alone = round3.chat({**bogus, "model": "plain", "stream": stream}).status_code
    assert alone >= 400
    expected_seen = {
        name: (alone if want == "invalid_request" else 200, want)
        for name, _, _, want in _outcome_cases(user)
    }
    assert seen == expected_seen


AUDIO_REPLY = {
    "content": None,
    "audio": {
        "id": "audio_e03",
        "data": "UklGRg==",
        "expires_at": 4102444800,
        "transcript": "Miso is a lovely name for a cat.",
    },
}


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        (AUDIO_REPLY, "Miso is a lovely name for a cat."),
        ({"content": None, "refusal": "I cannot share that."}, "I cannot share that."),
    ],
    ids=["audio", "refusal"],
)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_e03_a_replys_words_are_stored_wherever_the_provider_puts_them(
    round3: Round3, reply: dict[str, Any], words: str, stream: bool
) -> None:
    """E03: an audio-output model answers with ``content: null`` and its words in
    ``audio.transcript``; a refusal in ``refusal``: the reply is stored with those words as its
    text (recall and extraction read them; the audio id is kept in Redis), and the next
    request's window alternates user and assistant, the reply replayed as its words (an audio
    id expires within hours: a text turn is valid for every provider)."""
    if stream and "refusal" in reply:
        # LiteLLM 1.108.7's stream wrapper drops ``delta.refusal`` (checked with
        # litellm.acompletion against the stand-in): neither the client nor the hook sees it
        pytest.skip("LiteLLM does not pass a streamed refusal through")
    user = _user()
    round3.script(reply)
    first = {"model": "demo", "user": user, "stream": stream}
    first["messages"] = [{"role": "user", "content": "My cat is called Miso."}]
    answer = round3.chat(first)
    assert answer.status_code == 200, answer.text
    stored = round3.turns(user)
    assert [t["role"] for t in stored] == ["user", "assistant"]
    assert stored[-1]["text"] == words
    round3.script("Noted.")
    ask = {"model": "demo", "user": user}
    ask["messages"] = [{"role": "user", "content": "What is my cat called?"}]
    assert round3.chat(ask).status_code == 200
    seen = [m for m in without_tail(round3.received()["messages"]) if m["role"] != "system"]
    assert [m["role"] for m in seen] == ["user", "assistant", "user"]
    assert seen[1] == {"role": "assistant", "content": words}


def test_e06_a_2048_token_model_gets_a_prompt_that_fits(round3: Round3) -> None:
    """E06 through the proxy: the alias declares ``max_input_tokens: 2048`` in its model_info;
    after 24 turns of ~330 characters, a question with ``max_tokens: 256`` reaches the model
    with a prompt whose estimate (UTF-8 bytes / 3 a token, over-counting English by a third)
    and the reply fit (before: 40 messages, 8,788 characters); a message that fills the window
    alone passes through as sent with ``x-memory-outcome: too_large``."""
    from litellm_memory_hook.core.model_window import estimate_tokens

    user = _user()
    for i in range(24):
        text = f"Turn {i}: " + "I walked along the river and counted the boats again. " * 6
        round3.script("Nice. " * 40)
        body = {"model": "small", "user": user, "messages": [{"role": "user", "content": text}]}
        assert round3.chat(body).status_code == 200
    round3.script("Seven.")
    ask = {"role": "user", "content": "How many boats were there?"}
    answer = round3.chat({"model": "small", "user": user, "messages": [ask], "max_tokens": 256})
    assert answer.status_code == 200 and answer.headers["x-memory-outcome"] == "used"
    seen = round3.received()["messages"]
    assert estimate_tokens(seen) + 256 <= 2048
    assert len("".join(str(m.get("content")) for m in seen)) < 8_788 * 0.6
    assert seen[-1] == ask or seen[-1]["content"][-1]["text"] == ask["content"]

    big = {"role": "user", "content": "log line " * 700}
    answer = round3.chat({"model": "small", "user": user, "messages": [big], "max_tokens": 256})
    assert answer.status_code == 200 and answer.headers["x-memory-outcome"] == "too_large"
    assert round3.received()["messages"] == [big]


def test_e01_a_thought_signature_id_fares_as_without_the_hook(round3: Round3) -> None:
    """E01 with LiteLLM's literal ``__thought__`` separator: LiteLLM itself changes such an id
    on its way to an OpenAI-compatible deployment, so the answer is whatever LiteLLM alone gives
    (the alias without memory); the hook adds no failure of its own."""
    ident = "call_7f3a9c__thought__" + "CiQBjz1rX" * 40
    call = {
        "id": ident,
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'},
    }
    chat = [
        {"role": "user", "content": "What is the weather in Lisbon?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": ident, "content": "18 C, sunny"},
    ]
    statuses = {}
    for model in ("plain", "demo"):
        round3.script("It is 18 C and sunny.")
        body = {"model": model, "user": _user(), "messages": chat}
        statuses[model] = round3.chat(body).status_code
    assert statuses["demo"] == statuses["plain"], statuses


def test_e11_yesterdays_lines_come_back_dated(round3: Round3, tmp_path: Any) -> None:
    """E11 through the proxy: two lines imported with a time 26 hours ago ("My exam is tomorrow
    at 9 am"), then "When is my exam?": the model receives the current date and time and a mark
    that those window lines were said the day before."""
    import json
    import time

    from typer.testing import CliRunner

    from litellm_memory_hook.tools import cli
    from tests.support.redis_url import real_redis_url

    user = _user()
    said = int(time.time()) - 26 * 3600
    history = tmp_path / "exam.jsonl"
    lines = [
        {"role": "user", "content": "My exam is tomorrow at 9 am, I am so nervous.", "ts": said},
        {"role": "assistant", "content": "Good luck with the exam!", "ts": said + 5},
    ]
    history.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    config = str(round3.folder / "config.yaml")
    args = ["import", str(history), "--user", user, "--conversation", "demo", "--config", config]
    result = CliRunner().invoke(cli.app, args, env={"REDIS_URL": real_redis_url()})
    assert result.exit_code == 0, result.output
    round3.script("Your exam was today at 9 am.")
    ask = {"role": "user", "content": "When is my exam?"}
    assert round3.chat({"model": "demo", "user": user, "messages": [ask]}).status_code == 200
    seen = round3.received()["messages"]
    text = memory_text(seen)
    assert '(yesterday): the messages from "My exam is tomorrow at 9 am' in text
    assert time.strftime("%Y-%m-%d", time.gmtime()) in text  # today's date, UTC here
    window = [m["content"] for m in without_tail(seen) if m["role"] != "system"]
    assert window[:2] == [lines[0]["content"], lines[1]["content"]]
