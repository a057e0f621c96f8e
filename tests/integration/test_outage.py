"""Recovery after Redis restarts, idle-connection closes and outages (issue 9 items 1-2, D09).

A private redis-server (AOF on, so a restart keeps the data) behind a hook built as the proxy
builds it (its own client with the reconnect options): after a restart every pooled connection
is stale, yet the next request has memory and its turn is stored; turns answered while Redis is
down wait in the outage buffer and are written, in order, once it is back; memory is back within
a second of Redis answering.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from litellm_memory_hook.core.models import stored_text
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.proxy.request_data import METADATA_KEY
from litellm_memory_hook.settings import MemorySettings
from litellm_memory_hook.store.keys import ConversationKeys
from tests.support.hook_calls import ALIASES, Auth, chat_request, model_response
from tests.support.prompt_view import without_tail
from tests.support.redis_servers import RedisServer, free_ports, redis_binaries

pytestmark = pytest.mark.skipif(redis_binaries() is None, reason="redis-server not installed")


@pytest.fixture
def server(tmp_path: Path) -> Any:
    """A private Redis with AOF (everysec), stopped afterwards."""
    [port] = free_ports(1)
    srv = RedisServer(tmp_path / "redis", port, ("--appendonly", "yes")).start()
    yield srv
    srv.stop()


def _hook(url: str, prefix: str) -> MemoryHook:
    return MemoryHook(
        settings=MemorySettings(
            key_prefix=prefix, redis_url=url, worker_in_proxy=False, redis_timeout_s=0.3
        ),
        alias_lookup=lambda model: ALIASES.get(model),
    )


async def _turn(hook: MemoryHook, text: str, call_id: str) -> dict[str, Any]:
    data = await hook.async_pre_call_hook(
        Auth(), None, chat_request(text, call_id=call_id), "acompletion"
    )
    assert data is not None
    await hook.async_post_call_success_hook(data, Auth(), model_response(f"re: {text}"))
    return data


def _texts(url: str, prefix: str) -> list[str]:
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    client = redis.Redis.from_url(url)
    try:
        return [stored_text(json.loads(m)) for m in client.zrange(keys.turns, 0, -1)]
    finally:
        client.close()


async def test_memory_survives_a_restart_and_idle_closes(server: RedisServer, prefix: str) -> None:
    """D09: after a Redis restart (data kept) and after the server closed idle connections
    (`CONFIG SET timeout 1`), the next requests have memory and are stored; nothing trips the
    breaker."""
    hook = _hook(server.url, prefix)
    await _turn(hook, "I ride my bike on Sundays.", "c1")
    await _turn(hook, "My bike is red.", "c2")
    server.stop()
    server.start()
    data = await _turn(hook, "Sometimes on Saturdays too.", "c3")
    assert "My bike is red." in json.dumps(data["messages"])  # memory used at once
    await asyncio.sleep(0.2)
    data = await _turn(hook, "What colour is my bike?", "c4")
    assert "Sometimes on Saturdays too." in json.dumps(data["messages"])
    client = redis.Redis.from_url(server.url)
    client.config_set("timeout", 1)
    client.close()
    await asyncio.sleep(2.2)  # the server closes our idle pooled connections
    data = await _turn(hook, "Is it still red?", "c5")
    assert "What colour is my bike?" in json.dumps(data["messages"])
    await hook.drain()
    assert len(_texts(server.url, prefix)) == 10
    assert hook.counters["breaker_trips"] == 0 and hook.counters["precall_errors"] == 0
    await hook.store.redis.aclose()


async def test_turns_answered_during_an_outage_are_written_when_redis_is_back(
    server: RedisServer, prefix: str
) -> None:
    """Issue 9 item 2: turns answered while Redis is down are kept in the outage buffer and
    written once it answers, in order, exactly once; memory is back within 1 s of Redis
    answering (the breaker probes)."""
    hook = _hook(server.url, prefix)
    await _turn(hook, "before", "b0")
    server.stop()
    for i in range(3):
        data = await _turn(hook, f"during {i}", f"d{i}")
        # the time the request spent in the hook, the failed try included (was 0.0 offline)
        assert data["metadata"][METADATA_KEY]["hook_ms"] > 0.0
    assert len(hook.engine.buffer) >= 1
    server.start()
    back = time.monotonic()
    with_memory = None
    while time.monotonic() - back < 3:
        data = await _turn(hook, "after", f"a{time.monotonic()}")
        if "before" in json.dumps(data["messages"]):
            with_memory = time.monotonic() - back
            break
        await asyncio.sleep(0.05)
    assert with_memory is not None and with_memory < 1.0
    await hook.drain()
    texts = _texts(server.url, prefix)
    assert texts[:8] == [
        "before",
        "re: before",
        "during 0",
        "re: during 0",
        "during 1",
        "re: during 1",
        "during 2",
        "re: during 2",
    ]
    assert hook.counters["writes_lost"] == 0
    await hook.store.redis.aclose()


#: the stored turns of the agent of the outage tests: a question, two tool steps, the answer.
AGENT_STEPS = [
    ("user", "Weather in Pune and Goa?"),
    ("assistant", ""),
    ("tool", "31C"),
    ("assistant", ""),
    ("tool", "28C"),
    ("assistant", "Pune 31C, Goa 28C."),
]


def _tool_call_response(call_id: str) -> Any:
    """A ModelResponse whose message is one tool call and no text."""
    from litellm.types.utils import ModelResponse

    call = {"id": call_id, "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return ModelResponse(choices=[{"index": 0, "message": message, "finish_reason": "tool_calls"}])


async def test_an_agents_tool_results_sent_alone_during_an_outage(
    server: RedisServer, prefix: str
) -> None:
    """Fresh-user report: an agent that sends only its new messages answers a tool call made
    while Redis is down. Its results reach the model after the buffered call and the buffered
    question (before, alone: an orphan tool message, a 400 from OpenAI and Anthropic), and the
    store ends with every step in order, each at the time it was said (before, the results were
    never stored, and buffered turns got the time Redis came back)."""
    hook = _hook(server.url, prefix)
    await _turn(hook, "before", "b0")
    server.stop()
    said = time.time() * 1000
    data = await hook.async_pre_call_hook(
        Auth(), None, chat_request("Weather in Pune and Goa?", call_id="d1"), "acompletion"
    )
    await hook.async_post_call_success_hook(data, Auth(), _tool_call_response("call_1"))
    for step, (result, answer) in enumerate(
        [("31C", _tool_call_response("call_2")), ("28C", model_response("Pune 31C, Goa 28C."))]
    ):
        body = chat_request("", call_id=f"d{step + 2}")
        message = {"role": "tool", "tool_call_id": f"call_{step + 1}", "content": result}
        body["messages"] = [dict(message)]
        data = await hook.async_pre_call_hook(Auth(), None, body, "acompletion")
        sent = data["messages"]
        assert [m["role"] for m in sent] == ["system", "user", *["assistant", "tool"] * (step + 1)]
        assert sent[1]["content"] == "Weather in Pune and Goa?"
        assert sent[-2]["tool_calls"][0]["id"] == f"call_{step + 1}"
        assert sent[-1] == message  # the client's message, as sent
        await hook.async_post_call_success_hook(data, Auth(), answer)
    await asyncio.sleep(1.5)
    server.start()
    await hook.drain()
    client = redis.Redis.from_url(server.url)
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    stored = [json.loads(m) for m in client.zrange(keys.turns, 0, -1)]
    client.close()
    assert [(t["role"], stored_text(t)) for t in stored[2:]] == AGENT_STEPS
    assert all(said <= t["ts"] < said + 1000 for t in stored[2:])  # not when Redis was back
    assert hook.counters["writes_lost"] == 0
    await hook.store.redis.aclose()


async def test_the_buffer_is_bounded(prefix: str) -> None:
    """The outage buffer holds at most write_buffer_max turns; older ones are dropped and
    counted as writes_lost (nothing unbounded grows in the proxy)."""
    [port] = free_ports(1)
    hook = MemoryHook(
        settings=MemorySettings(
            key_prefix=prefix,
            redis_url=f"redis://127.0.0.1:{port}/0",
            worker_in_proxy=False,
            redis_timeout_s=0.2,
            write_buffer_max=2,
        ),
        alias_lookup=lambda model: ALIASES.get(model),
    )
    for i in range(5):
        await _turn(hook, f"lost {i}", f"l{i}")
    assert len(hook.engine.buffer) == 2 and hook.counters["writes_lost"] == 3
    redis_client: aioredis.Redis = hook.store.redis
    await redis_client.aclose()


async def test_tool_results_sent_alone_while_redis_refuses_writes(
    server: RedisServer, prefix: str
) -> None:
    """Fresh-user reports: with Redis full (``maxmemory`` reached under ``noeviction``) reads
    work and writes fail, so an agent's steps wait in the outage buffer while its requests
    read Redis. Results sent alone get the buffered call and every turn before it, stored and
    buffered, step after step (before: the model got them alone, a 400 from OpenAI and
    Anthropic; then a write refusal opened the breaker, so the next steps were planned as if
    Redis were down and lost the stored history)."""
    hook = _hook(server.url, prefix)
    await _turn(hook, "before", "b0")
    admin = redis.Redis.from_url(server.url)
    admin.config_set("maxmemory", 1)
    try:
        data = await hook.async_pre_call_hook(
            Auth(), None, chat_request("Weather in Pune and Goa?", call_id="q1"), "acompletion"
        )
        await hook.async_post_call_success_hook(data, Auth(), _tool_call_response("call_1"))
        assert len(hook.engine.buffer) == 1
        replies = [_tool_call_response("call_2"), model_response("Pune 31C, Goa 28C.")]
        for step, (result, reply) in enumerate(zip(("31C", "28C"), replies, strict=True), 1):
            body = chat_request("", call_id=f"r{step}")
            body["messages"] = [{"role": "tool", "tool_call_id": f"call_{step}", "content": result}]
            data = await hook.async_pre_call_hook(Auth(), None, body, "acompletion")
            sent = data["messages"]
            assert "<memory" in sent[0]["content"]  # read from Redis: memory is on
            roles = ["user", "assistant", "user", *["assistant", "tool"] * step]
            assert [m["role"] for m in sent[1:]] == roles
            assert (
                sent[1]["content"] == "before" and sent[3]["content"] == "Weather in Pune and Goa?"
            )
            assert sent[-2]["tool_calls"][0]["id"] == f"call_{step}"
            await hook.async_post_call_success_hook(data, Auth(), reply)
        assert hook.counters["breaker_trips"] == 0
    finally:
        admin.config_set("maxmemory", 0)
        admin.close()
    await hook.drain()
    assert _texts(server.url, prefix) == ["before", "re: before", *(t for _, t in AGENT_STEPS)]
    assert hook.counters["writes_lost"] == 0
    await hook.store.redis.aclose()


async def test_a_whole_history_client_is_stored_once_while_redis_refuses_writes(
    server: RedisServer, prefix: str
) -> None:
    """Redis full: a client that sends its whole history aligns with the turns waiting in the
    outage buffer, so each of its messages is stored once. Before, every request stored the
    buffered exchanges again after the stored ones (found while checking the fresh-user
    reports: one, two, two, three, two, three, four)."""
    hook = _hook(server.url, prefix)
    history: list[dict[str, Any]] = []

    async def say(text: str, call_id: str) -> None:
        history.append({"role": "user", "content": text})
        body = chat_request("", call_id=call_id)
        body["messages"] = [dict(m) for m in history]
        data = await hook.async_pre_call_hook(Auth(), None, body, "acompletion")
        assert [m["content"] for m in without_tail(data["messages"])[1:]] == [
            m["content"] for m in history
        ]
        await hook.async_post_call_success_hook(data, Auth(), model_response(f"re: {text}"))
        history.append({"role": "assistant", "content": f"re: {text}"})

    await say("one", "w1")
    admin = redis.Redis.from_url(server.url)
    admin.config_set("maxmemory", 1)
    try:
        for number, text in enumerate(("two", "three", "four"), 2):
            await say(text, f"w{number}")
    finally:
        admin.config_set("maxmemory", 0)
        admin.close()
    await hook.drain()
    assert _texts(server.url, prefix) == [m["content"] for m in history]
    await hook.store.redis.aclose()


async def test_a_chat_during_an_outage_sees_the_turns_said_since(
    server: RedisServer, prefix: str
) -> None:
    """Redis down: a client that sends only its new message gets the turns said since Redis
    went down (they wait in the outage buffer) in its window, and a regenerate of the last
    reply is answered but not stored a second time (the buffered reply cannot be replaced
    before it is written)."""
    hook = _hook(server.url, prefix)
    await _turn(hook, "before", "b0")
    server.stop()
    await _turn(hook, "My sister lives in Porto.", "d1")
    data = await _turn(hook, "Where does my sister live?", "d2")
    sent = [m["content"] for m in without_tail(data["messages"])[1:]]
    assert sent == ["My sister lives in Porto.", "re: My sister lives in Porto.", sent[-1]]
    again = await _turn(hook, "Where does my sister live?", "d3")  # a regenerate
    assert [m["content"] for m in without_tail(again["messages"])[1:]][
        -1
    ] == "Where does my sister live?"
    assert hook.counters["outage_not_stored"] == 1
    server.start()
    await hook.drain()
    assert _texts(server.url, prefix) == [
        "before",
        "re: before",
        "My sister lives in Porto.",
        "re: My sister lives in Porto.",
        "Where does my sister live?",
        "re: Where does my sister live?",
    ]
    await hook.store.redis.aclose()


async def test_a_regenerate_while_redis_refuses_writes_shows_the_new_reply_only(
    server: RedisServer, prefix: str
) -> None:
    """Redis full: a regenerate's new reply waits in the outage buffer with the stored reply it
    replaces; until it is written, the window shows the new reply in place of the old one
    (fresh-user report: both, one after the other)."""
    hook = _hook(server.url, prefix)
    question = "Tell me about the moon, please."
    await _turn(hook, question, "m1")
    admin = redis.Redis.from_url(server.url)
    admin.config_set("maxmemory", 1)
    try:
        data = await hook.async_pre_call_hook(
            Auth(), None, chat_request(question, call_id="m2"), "acompletion"
        )
        await hook.async_post_call_success_hook(data, Auth(), model_response("The moon, again."))
        data = await _turn(hook, "And the sun?", "m3")
        sent = [m["content"] for m in without_tail(data["messages"])[1:]]
        assert sent == [question, "The moon, again.", "And the sun?"]
    finally:
        admin.config_set("maxmemory", 0)
        admin.close()
    await hook.drain()
    assert _texts(server.url, prefix) == [
        question,
        "The moon, again.",
        "And the sun?",
        "re: And the sun?",
    ]
    await hook.store.redis.aclose()


async def test_a_forget_drops_the_users_turns_waiting_in_the_outage_buffer(
    server: RedisServer, prefix: str
) -> None:
    """Redis full: a forget deletes what Redis holds and the user's turns waiting in this
    proxy's outage buffer, so nothing is written back after it (fresh-user report: the next
    request showed the forgotten turns and the buffer wrote them into the forgotten store)."""
    hook = _hook(server.url, prefix)
    await _turn(hook, "before", "f0")
    other = chat_request("not forgotten", user="u-B", call_id="f9")
    admin = redis.Redis.from_url(server.url)
    admin.config_set("maxmemory", 1)
    try:
        await _turn(hook, "a secret said while Redis was full", "f1")
        data = await hook.async_pre_call_hook(Auth(), None, other, "acompletion")
        await hook.async_post_call_success_hook(data, Auth(), model_response("ok"))
        assert len(hook.engine.buffer) == 2
        keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
        async with hook.forgetting(keys, whole_user=True) as taken:
            assert len(taken) == 1
            for key in keys.all():
                admin.delete(key)  # what the forget deletes in Redis (DEL works on a full Redis)
        data = await _turn(hook, "what did I say?", "f2")
        assert "secret" not in json.dumps(data["messages"])
    finally:
        admin.config_set("maxmemory", 0)
        admin.close()
    await hook.drain()
    assert _texts(server.url, prefix) == ["what did I say?", "re: what did I say?"]
    assert hook.counters["writes_forgotten"] == 1 and hook.counters["writes_lost"] == 0
    await hook.store.redis.aclose()


async def test_a_chat_during_an_outage_keeps_its_persona_and_the_reminder(
    server: RedisServer, prefix: str
) -> None:
    """Redis down: the stored memory is out of reach, but what the request itself gives still
    reaches the model: the persona it sent (escaped, as data) and the final reminder, whose
    script the turns said since Redis went down decide when the last message is too short."""
    hook = _hook(server.url, prefix)
    await _turn(hook, "before", "b0")
    server.stop()
    await _turn(hook, "Моя сестра живёт в Порту.", "d1")
    data = await hook.async_pre_call_hook(
        Auth(),
        None,
        chat_request("ok", call_id="d2", metadata={"persona": "Mira, a <calm> guide"}),
        "acompletion",
    )
    assert data is not None
    system = data["messages"][0]
    assert system["role"] == "system"
    assert "Mira, a" in system["content"] and "<calm>" not in system["content"]
    reminder = system["content"].rsplit("\n\n", 1)[-1]
    assert reminder.startswith("<memory_reminder>"), reminder
    assert "too short to tell; before it they wrote in Cyrillic" in reminder, reminder
    assert [m["content"] for m in without_tail(data["messages"])[1:]] == [
        "Моя сестра живёт в Порту.",
        "re: Моя сестра живёт в Порту.",
        "ok",
    ]
    assert "<memories>" not in system["content"] and "<summary>" not in system["content"]
    server.start()
    await hook.drain()
    await hook.store.redis.aclose()
