"""End to end, issue 8: real clients as they are, through a real LiteLLM proxy.

For everything the client sent, the model receives what it would have received without the hook,
plus memory: every field, the client's order, system parts with ``cache_control``; whole-history
clients are followed through edits, deletions and branches; prefills; side requests left alone;
the alias's rules on every request; bad controls a 400. Each case (D01-D04, D06, D14 of
../shared/cases/field-cases.md) compares what the model received through a memory alias with
what it received through a plain alias (LiteLLM alone), and checks what Redis holds.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import harness
from tests.support.harness import MASTER_KEY
from tests.support.prompt_view import memory_text, without_tail

RULES = "You are Mira, a warm and concise companion."


class Clients(harness.Running):
    """The proxy, the stand-in and Redis of these tests."""

    def chat(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
        """POST a chat body as a client would send it (master key)."""
        return self.http.post(
            f"{self.proxy}/v1/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {MASTER_KEY}", **(headers or {})},
        )

    def received(self) -> dict[str, Any]:
        """The last chat body the model received (extraction calls left out)."""
        return dict(self.chat_calls()[-1])

    def both(self, body: dict[str, Any], **kwargs: Any) -> tuple[list[Any], list[Any]]:
        """Send the same body to the plain alias and to the memory alias; the messages each
        delivered to the model (plain first)."""
        plain = copy.deepcopy(body)
        plain["model"] = "plain"
        assert self.chat(plain, **kwargs).status_code == 200
        seen_plain = self.received()["messages"]
        memory = copy.deepcopy(body)
        memory["model"] = "demo"
        answer = self.chat(memory, **kwargs)
        assert answer.status_code == 200, answer.text
        return seen_plain, self.received()["messages"]


@pytest.fixture(scope="module")
def clients(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clients]:
    """Stand-in + proxy with the package's config, a plain alias, Open WebUI's headers."""
    plain = {
        "model_name": "plain",
        "litellm_params": {"model": "openai/standin", "api_base": "BASE", "api_key": "x"},
    }
    with harness.stack(
        tmp_path_factory.mktemp("e2e-clients"),
        stem="e2c",
        kind=Clients,
        extra_models=[plain],
        memory={
            "identity": {
                "user_header": "x-openwebui-user-id",
                "conversation_header": "x-openwebui-chat-id",
            }
        },
        # fuzzed bodies must not put the deployments in cooldown or be retried
        extra={"router_settings": {"num_retries": 0, "disable_cooldowns": True}},
    ) as running:
        yield running


def _user() -> str:
    return "u" + uuid.uuid4().hex[:8]


def without_memory(messages: list[dict[str, Any]], client_led: bool) -> list[dict[str, Any]]:
    """The messages a memory alias delivered, with what the hook adds taken out again: the
    system message it put first (when the client had none) or, in the client's first system
    message, the alias rules before and the memory block after the client's content."""
    out = without_tail(copy.deepcopy(messages))  # the cache layout's tail, when there is one
    first = out[0]
    if not client_led:
        assert first["role"] == "system" and first["content"].startswith(RULES)
        return out[1:]
    content = first["content"]
    if isinstance(content, list):
        assert content[0] == {"type": "text", "text": RULES}
        last = content[-1]
        ours = last.get("type") == "text" and str(last.get("text", "")).startswith("<memory_")
        first["content"] = content[1:-1] if ours else content[1:]
    else:
        assert content.startswith(RULES + "\n\n")
        body = content[len(RULES) + 2 :]
        cut = min(
            (
                i
                for i in (body.find("\n\n<memory_context>"), body.find("\n\n<memory_reminder>"))
                if i >= 0
            ),
            default=len(body),
        )
        first["content"] = body[:cut]
    return out


def _call(ident: str, name: str = "get_weather", args: str = '{"city": "Paris"}') -> dict[str, Any]:
    return {"id": ident, "type": "function", "function": {"name": name, "arguments": args}}


def test_d01_a_tool_call_turn_keeps_its_empty_content(clients: Clients) -> None:
    """D01: an assistant turn that only calls a tool keeps "content": "" on this request and
    when the stored turn is replayed to a client that sends only its new message."""
    user = _user()
    history = [
        {"role": "user", "content": "What is the weather in Paris right now?"},
        {"role": "assistant", "content": "", "tool_calls": [_call("call_x1")]},
        {"role": "tool", "tool_call_id": "call_x1", "content": "18 C, sunny"},
    ]
    plain, memory = clients.both({"user": user, "messages": history})
    assert without_memory(memory, client_led=False) == plain
    assert memory[2]["content"] == ""
    clients.both({"user": user, "messages": [{"role": "user", "content": "And tomorrow?"}]})
    replayed = clients.received()["messages"]
    tool_turn = next(m for m in replayed if m.get("tool_calls"))
    assert tool_turn["content"] == "" and tool_turn["tool_calls"][0]["id"] == "call_x1"
    stored = clients.turns(user)
    assert stored[1]["msg"]["content"] == ""


def test_d02_reasoning_content_is_kept(clients: Clients) -> None:
    """D02: reasoning_content on assistant turns reaches the model as in the baseline, and is
    stored with the turn for later replay."""
    user = _user()
    history = [
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "Need current weather; call the tool.",
            "tool_calls": [_call("call_r1", args='{"city": "Oslo"}')],
        },
        {"role": "tool", "tool_call_id": "call_r1", "content": "2 C, snow"},
        {
            "role": "assistant",
            "content": "It is 2 C with snow in Oslo.",
            "reasoning_content": "Tool says 2 C snow.",
        },
        {"role": "user", "content": "Should I take a coat?"},
    ]
    plain, memory = clients.both({"user": user, "messages": history})
    assert without_memory(memory, client_led=False) == plain
    assert [m.get("reasoning_content") for m in memory if m["role"] == "assistant"] == [
        "Need current weather; call the tool.",
        "Tool says 2 C snow.",
    ]
    stored = clients.turns(user)
    assert stored[3]["msg"]["reasoning_content"] == "Tool says 2 C snow."


@pytest.mark.parametrize("between", [[], [{"role": "system", "content": "[Be poetic]"}]])
def test_d03_a_prefill_gets_memory_stays_last_and_is_stored(
    clients: Clients, between: list[dict[str, str]]
) -> None:
    """D03: a request ending with an assistant prefill gets memory and the alias rules, keeps
    the prefill last, and stores the user turn and the completed reply (prefill + text); also
    with the frontend's instructions, a system message, between the user message and the
    prefill (fresh-user report: that request got no memory and was never stored)."""
    user = _user()
    clients.chat(
        {
            "model": "demo",
            "user": user,
            "messages": [{"role": "user", "content": "My dog is called Pepper."}],
        }
    )
    clients.script(" Pepper, of course!")
    body = {
        "model": "demo",
        "user": user,
        "messages": [
            {"role": "user", "content": "What is my dog called?"},
            *between,
            {"role": "assistant", "content": "Mira smiles and says:"},
        ],
    }
    assert clients.chat(body).status_code == 200
    seen = clients.received()["messages"]
    assert seen[0]["role"] == "system" and seen[0]["content"].startswith(RULES)
    assert "<memory_reminder>" in memory_text(seen)  # memory, and the earlier turn:
    assert {"role": "user", "content": "My dog is called Pepper."} in seen
    assert seen[-1] == {"role": "assistant", "content": "Mira smiles and says:"}
    assert seen[-2 - len(between) :] == [
        {"role": "user", "content": "What is my dog called?"},
        *between,
        {"role": "assistant", "content": "Mira smiles and says:"},
    ]
    texts = [t["text"] for t in clients.turns(user)]
    assert texts[-2:] == ["What is my dog called?", "Mira smiles and says: Pepper, of course!"]


def test_d04_speaker_names_survive_on_every_role(clients: Clients) -> None:
    """D04: a group chat's assistant names reach the model on the first and the second request,
    and are stored."""
    user = _user()
    history = [
        {"role": "user", "name": "Ana", "content": "Who wants pizza?"},
        {"role": "assistant", "name": "Scout", "content": "Me!"},
        {"role": "assistant", "name": "Heavy", "content": "Heavy wants pizza."},
        {"role": "user", "name": "Ana", "content": "Then pizza it is."},
    ]
    for _ in range(2):
        plain, memory = clients.both({"user": user, "messages": history})
        assert without_memory(memory, client_led=False) == plain
        assert [m.get("name") for m in without_tail(memory)[1:]] == ["Ana", "Scout", "Heavy", "Ana"]
    assert [t.get("name") for t in clients.turns(user)][:3] == ["Ana", "Scout", "Heavy"]


def test_d06_an_open_webui_title_task_is_neither_memory_nor_stored(clients: Clients) -> None:
    """D06: Open WebUI's title task gets no memory and is not stored; the next request's window
    holds only the real turns."""
    user = _user()
    first = "I am planning a trip to Kyoto in April."
    clients.script("Lovely!")
    clients.chat({"model": "demo", "user": user, "messages": [{"role": "user", "content": first}]})
    task = (
        "### Task:\nGenerate a concise, 3-5 word title with an emoji summarizing the chat "
        f'history.\n### Output:\nJSON format: {{ "title": "your concise title here" }}\n'
        f"<chat_history>\nUSER: {first}\nASSISTANT: Lovely!\n</chat_history>"
    )
    clients.script('{"title": "🌸 Kyoto trip"}')
    plain, memory = clients.both({"user": user, "messages": [{"role": "user", "content": task}]})
    assert memory == [{"role": "system", "content": RULES}, *plain]
    assert [t["text"] for t in clients.turns(user)] == [first, "Lovely!"]
    history = [
        {"role": "user", "content": first},
        {"role": "assistant", "content": "Lovely!"},
        {"role": "user", "content": "What should I pack?"},
    ]
    clients.chat({"model": "demo", "user": user, "messages": history})
    seen = clients.received()["messages"]
    assert [m["content"] for m in without_tail(seen)[1:]] == [
        first,
        "Lovely!",
        "What should I pack?",
    ]


def test_d14_cache_control_on_system_parts_is_kept(clients: Clients) -> None:
    """D14: the client's system prompt as parts with cache_control reaches the model as sent
    (rules before, memory after, as separate parts); the user part keeps its marker too."""
    user = _user()
    rules = "Rules of the code review. " * 80
    body = {
        "user": user,
        "messages": [
            {
                "role": "system",
                "content": [
                    {"type": "text", "text": rules, "cache_control": {"type": "ephemeral"}}
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "text": "Refactor the parser module.",
                        "cache_control": {"type": "ephemeral"},
                    }
                ],
            },
        ],
    }
    plain, memory = clients.both(body)
    assert without_memory(memory, client_led=True) == plain
    assert memory[0]["content"][1] == plain[0]["content"][0]


def test_edit_delete_branch_and_trimmed_history_are_followed(clients: Clients) -> None:
    """Issue 8 item 4: an edited earlier message, a deleted exchange, a branch from an older
    reply and a client that trims its own history: the model sees the client's messages, and
    the store follows (older than the 5 s grace, so the store is aged here)."""
    user = _user()
    history: list[dict[str, Any]] = []
    for i in range(3):
        history.append({"role": "user", "content": f"question {i}"})
        clients.script(f"answer {i}")
        assert clients.chat({"model": "demo", "user": user, "messages": history}).status_code == 200
        history.append({"role": "assistant", "content": f"answer {i}"})
    _age(clients, user)
    edited = copy.deepcopy(history)
    edited[2]["content"] = "question 1, edited"
    clients.script("answer 1 again")
    clients.chat({"model": "demo", "user": user, "messages": [*edited[:3]]})
    seen = clients.received()["messages"]
    assert [m["content"] for m in without_tail(seen)[1:]] == [
        "question 0",
        "answer 0",
        "question 1, edited",
    ]
    assert [t["text"] for t in clients.turns(user)] == [
        "question 0",
        "answer 0",
        "question 1, edited",
        "answer 1 again",
    ]
    _age(clients, user)
    trimmed = [
        {"role": "user", "content": "question 1, edited"},
        {"role": "assistant", "content": "answer 1 again"},
        {"role": "user", "content": "question 3"},
    ]
    clients.script("answer 3")
    clients.chat({"model": "demo", "user": user, "messages": trimmed})
    assert [t["text"] for t in clients.turns(user)][-2:] == ["question 3", "answer 3"]
    assert len(clients.turns(user)) == 6
    _age(clients, user)
    branch = [
        {"role": "user", "content": "question 0"},
        {"role": "assistant", "content": "answer 0"},
        {"role": "user", "content": "another path"},
    ]
    clients.script("branch answer")
    clients.chat({"model": "demo", "user": user, "messages": branch})
    assert [t["text"] for t in clients.turns(user)] == [
        "question 0",
        "answer 0",
        "another path",
        "branch answer",
    ]


def _age(clients: Clients, user: str, by_ms: int = 60_000) -> None:
    """Make the stored turns older (the grace period protects turns stored moments ago)."""
    key = f"{clients.prefix}:{{master:{user}}}:c:demo:turns"
    members = clients.redis.zrange(key, 0, -1, withscores=True)
    for member, score in members:
        turn = json.loads(member)
        turn["ts"] = int(turn["ts"]) - by_ms
        clients.redis.zrem(key, member)
        clients.redis.zadd(
            key, {json.dumps(turn, ensure_ascii=False, separators=(",", ":")): score}
        )


def test_bad_controls_are_a_clear_400(clients: Clients) -> None:
    """Issue 8 item 7: memory_mode "bogus", a non-string conversation_id and an unknown
    timezone each get a 400 naming the field."""
    for metadata, field in (
        ({"memory_mode": "bogus"}, "memory_mode"),
        ({"conversation_id": 12}, "conversation_id"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
    ):
        answer = clients.chat(
            {
                "model": "demo",
                "user": _user(),
                "metadata": metadata,
                "messages": [{"role": "user", "content": "hi"}],
            }
        )
        assert answer.status_code == 400 and field in answer.text


def test_a_200000_character_message_reaches_the_model_whole(clients: Clients) -> None:
    """The first rule at any size: a 200,000-character message (a pasted document) reaches the
    model exactly as it would without the hook, streaming or not; what is stored for later
    requests is bounded (stored_text_chars, 32,000 by default), and the next request replays
    that bounded turn within the window."""
    words = [f"w{i % 997}x{i % 13}" for i in range(40_000)]
    document = " ".join(words)[:200_000]
    assert len(document) == 200_000
    user = _user()
    opener = [{"role": "user", "content": "I will paste a long report next."}]
    clients.both({"user": user, "messages": opener})
    for stream in (False, True):
        text = document[1:] + "." if stream else document  # the same text again is a regenerate
        body: dict[str, Any] = {"user": user, "messages": [{"role": "user", "content": text}]}
        if stream:
            body["stream"] = True
        plain, memory = clients.both(body)
        assert plain == [{"role": "user", "content": text}]
        assert memory[-1] == {"role": "user", "content": text}
        assert without_memory(memory, client_led=False)[-1] == plain[-1]
    stored = [t for t in clients.turns(user) if t["role"] == "user"]
    assert len(stored) == 3
    assert all(len(t["text"]) <= 32_000 for t in stored)
    kept = stored[1]["text"]
    assert kept.startswith("…") and document.endswith(kept[1:])  # the tail, marked as cut
    clients.both({"user": user, "messages": [{"role": "user", "content": "Summarise it."}]})
    seen = clients.received()["messages"]
    assert seen[-1] == {"role": "user", "content": "Summarise it."}
    assert sum(len(str(m.get("content"))) for m in seen[1:-1]) <= 32_000 + 100


def test_the_alias_rules_apply_without_memory(clients: Clients) -> None:
    """Issue 8 item 6: memory off, read-only and no user id: the alias's system_prompt still
    reaches the model."""
    for extra in ({"metadata": {"memory_mode": "off"}, "user": _user()}, {}, {"user": ""}):
        clients.chat({"model": "demo", "messages": [{"role": "user", "content": "hi"}], **extra})
        seen = clients.received()["messages"]
        assert seen[0]["role"] == "system" and seen[0]["content"].startswith(RULES)


def test_open_webui_recipe(clients: Clients) -> None:
    """Open WebUI with ENABLE_FORWARD_USER_INFO_HEADERS: the user and the chat come from its
    headers (user_header / conversation_header); a new chat id is a new conversation, and the
    user's memories are shared across them."""
    user = _user()
    headers = {
        "X-OpenWebUI-User-Id": user,
        "X-OpenWebUI-Chat-Id": "chat-1",
        "X-OpenWebUI-User-Name": "Ana",
    }
    body = {
        "model": "demo",
        "stream": True,
        "messages": [{"role": "user", "content": "My cat is Miso."}],
    }
    with clients.http.stream(
        "POST",
        f"{clients.proxy}/v1/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {MASTER_KEY}", **headers},
    ) as answer:
        assert answer.status_code == 200
        answer.read()
    assert [t["text"] for t in clients.turns(user, "chat-1")][:1] == ["My cat is Miso."]


def test_librechat_and_langchain_shapes(clients: Clients) -> None:
    """LibreChat sends `user` and its own title request (no memory, not stored); LangChain's
    ChatOpenAI body (n, temperature, stream false) gets memory and keeps its fields."""
    user = _user()
    clients.chat(
        {"model": "demo", "user": user, "messages": [{"role": "user", "content": "I love hiking."}]}
    )
    title = (
        "Provide a concise, 5-word-or-less title for the conversation, using title case "
        "conventions. Only return the title itself.\n\nConversation:\nUser: I love hiking."
        "\nAI: Noted."
    )
    clients.chat({"model": "demo", "user": user, "messages": [{"role": "user", "content": title}]})
    assert clients.received()["messages"][1:] == [{"role": "user", "content": title}]
    assert len(clients.turns(user)) == 2
    body = {
        "model": "demo",
        "user": user,
        "n": 1,
        "temperature": 0.7,
        "stream": False,
        "messages": [{"role": "user", "content": "Where do I like to go?"}],
    }
    clients.chat(body)
    received = clients.received()
    assert received["temperature"] == 0.7 and "I love hiking." in json.dumps(received["messages"])


def test_agent_loop_with_parallel_tool_calls(clients: Clients) -> None:
    """An agent loop (Continue / Cline style, whole history with tools): the model's parallel
    tool calls, the client's two results and the final answer are stored once each, in order,
    and every request reaches the model as the plain alias would deliver it (plus memory)."""
    user = _user()
    calls = [_call("c1", args='{"city": "Pune"}'), _call("c2", args='{"city": "Oslo"}')]
    clients.script({"content": None, "tool_calls": calls})
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Weather in Pune and Oslo?"},
    ]
    clients.chat({"model": "demo", "user": user, "messages": history})
    history += [
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "c1", "content": "31 C"},
        {"role": "tool", "tool_call_id": "c2", "content": "2 C"},
    ]
    clients.script("Pune 31 C, Oslo 2 C.", "Pune 31 C, Oslo 2 C.")
    plain, memory = clients.both({"user": user, "messages": history})
    assert without_memory(memory, client_led=True) == plain
    roles = [(t["role"], t.get("tool_call_id", "")) for t in clients.turns(user)]
    assert roles == [
        ("user", ""),
        ("assistant", ""),
        ("tool", "c1"),
        ("tool", "c2"),
        ("assistant", ""),
    ]


# -- the property: any valid message list, same delivery apart from memory ----------------------

_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=40
).filter(lambda s: s.strip() != "")
_cache = st.one_of(st.none(), st.just({"type": "ephemeral"}))


@st.composite
def _content(draw: st.DrawFn) -> Any:
    if draw(st.booleans()):
        return draw(_text)
    parts = []
    for _ in range(draw(st.integers(1, 2))):
        part: dict[str, Any] = {"type": "text", "text": draw(_text)}
        marker = draw(_cache)
        if marker:
            part["cache_control"] = marker
        parts.append(part)
    return parts


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A valid OpenAI message list: optional system / developer lead, turns of user, assistant
    (names, reasoning, refusal-free), tool-call groups, a later system message, a user turn last."""
    messages: list[dict[str, Any]] = []
    for role in draw(st.lists(st.sampled_from(["system", "developer"]), max_size=2)):
        messages.append({"role": role, "content": draw(_content())})
    for i in range(draw(st.integers(0, 3))):
        user: dict[str, Any] = {"role": "user", "content": draw(_content())}
        if draw(st.booleans()):
            user["name"] = draw(st.sampled_from(["Ana", "Bo"]))
        messages.append(user)
        kind = draw(st.sampled_from(["text", "tools", "reasoning"]))
        if kind == "tools":
            ident = f"call_{i}_{draw(st.integers(0, 999))}"
            messages.append(
                {
                    "role": "assistant",
                    "content": draw(st.sampled_from(["", None])),
                    "tool_calls": [_call(ident)],
                }
            )
            messages.append({"role": "tool", "tool_call_id": ident, "content": draw(_text)})
            messages.append({"role": "assistant", "content": draw(_text)})
        else:
            reply: dict[str, Any] = {"role": "assistant", "content": draw(_text)}
            if kind == "reasoning":
                reply["reasoning_content"] = draw(_text)
            if draw(st.booleans()):
                reply["name"] = "Mira"
            messages.append(reply)
        if draw(st.integers(0, 5)) == 0:
            messages.append({"role": "system", "content": draw(_text)})
    messages.append({"role": "user", "content": draw(_content())})
    return messages


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(messages=conversations())
def test_any_valid_message_list_reaches_the_model_as_without_the_hook_plus_memory(
    clients: Clients, messages: list[dict[str, Any]]
) -> None:
    """Issue 8 done-when: random valid message lists (all roles and fields above) sent to a
    memory alias and to a plain alias: apart from the added memory, the model received the same
    messages with the same fields in the same order; on the first request of a conversation and
    on the next one, which repeats the history with the reply and adds a message."""
    user = _user()
    led = messages[0]["role"] in ("system", "developer")
    plain, memory = clients.both({"user": user, "messages": messages})
    assert without_memory(memory, client_led=led) == plain
    follow = [
        *messages,
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "and then?"},
    ]
    plain, memory = clients.both({"user": user, "messages": follow})
    assert without_memory(memory, client_led=led) == plain


# -- bad input never changes the proxy's answer except by adding memory (issue 9 item 4) ------

_json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=12), st.just("")
)
_json = st.recursive(
    _json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_role = st.sampled_from(["user", "assistant", "system", "tool", "developer", "function", "bot", 7])
_part = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("text"), "text": st.one_of(st.text(max_size=12), _json)}
    ),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["image_url", "input_audio", "weird"]), "image_url": _json}
    ),
    _json,
)
_fuzz_message = st.one_of(
    st.fixed_dictionaries(
        {
            "role": _role,
            "content": st.one_of(
                st.text(max_size=20), st.none(), st.lists(_part, max_size=2), _json
            ),
        },
        optional={
            "name": _json,
            "tool_calls": st.one_of(
                st.lists(
                    st.fixed_dictionaries(
                        {
                            "id": _json,
                            "type": st.just("function"),
                            "function": st.one_of(
                                _json, st.fixed_dictionaries({"name": _json, "arguments": _json})
                            ),
                        }
                    ),
                    max_size=2,
                ),
                _json,
            ),
            "tool_call_id": _json,
        },
    ),
    _json,
)


def test_a_part_the_proxy_rejects_is_named_at_the_client_s_index(clients: Clients) -> None:
    """A user message with a content part LiteLLM does not accept (an Anthropic-style
    ``tool_result``, an unknown type) gets the same answer through a memory alias as through a
    plain alias (LiteLLM's own error, a 500 in this version), naming the client's own message
    index (a fresh-user test saw the index of the rebuilt list), and stores nothing; the
    conversation's memory is untouched."""
    user = _user()
    assert (
        clients.chat(
            {
                "model": "demo",
                "user": user,
                "messages": [{"role": "user", "content": "My cat is called Miso."}],
            }
        ).status_code
        == 200
    )
    stored = clients.turns(user)
    assert len(stored) == 2
    for part in (
        {"type": "tool_result", "tool_use_id": "t1", "content": "42"},
        {"type": "weird", "text": "hello"},
    ):
        messages = [
            {"role": "user", "content": "My cat is called Miso."},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": [{"type": "text", "text": "and?"}, part]},
        ]
        answers = []
        for model in ("plain", "demo"):
            answer = clients.chat({"model": model, "user": user, "messages": messages})
            detail = answer.json()["error"]["message"].replace(repr(model), "MODEL")
            answers.append((answer.status_code, detail))
        assert answers[0][0] >= 400 and "index 2" in answers[0][1], answers[0]
        assert answers[1] == answers[0]
    assert clients.turns(user) == stored


def _status_class(code: int) -> int:
    return code // 100


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(messages=st.one_of(st.lists(_fuzz_message, max_size=4), _json))
def test_fuzzed_bodies_get_the_same_status_with_and_without_the_hook(
    clients: Clients, messages: Any
) -> None:
    """Issue 9 item 4: arbitrary bodies sent to a memory alias and to a plain alias get the same
    status class and, when rejected, the same error (its message indexes the client's messages,
    not the rebuilt list); a body the proxy would reject reaches it untouched and is not stored;
    our code logs no exception."""
    user = _user()
    size_before = clients.log.stat().st_size
    answers = []
    details = []
    for model in ("plain", "demo"):
        answer = clients.chat({"model": model, "user": user, "messages": messages})
        answers.append(_status_class(answer.status_code))
        details.append(answer.text.replace(repr(model), "MODEL") if answer.is_error else "")
    assert answers[0] == answers[1], (messages, answers)
    # a rejected body was rejected as the client sent it: the same error, the same indexes
    assert details[0] == details[1], messages
    with clients.log.open("rb") as log:
        log.seek(size_before)
        tail = log.read().decode("utf-8", "replace")
    assert (
        "memory hook: pre-call failed" not in tail and "memory hook: post-call failed" not in tail
    )
    if answers[0] != 2:
        assert clients.turns(user) == []
