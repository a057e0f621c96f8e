"""The turns a request stores are held in the process between its pre-call and post-call
hooks (engine/held_turns.py): the record that crosses the model call stays small, whatever the
history; the bounds drop the oldest, and a write whose turns were dropped stores nothing."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import redis.asyncio as aioredis

from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.core.plan import Seed
from litellm_memory_hook.engine.held_turns import HeldTurns
from litellm_memory_hook.proxy.request_data import METADATA_KEY
from litellm_memory_hook.slices import LONG_WRITE_CHARS
from tests.support.hook_calls import Auth, chat_request, make_hook, model_response


def _turn(text: str) -> Turn:
    return Turn(role="user", text=text, ts_ms=1)


def test_taken_once_and_dropped_oldest_first_by_each_bound() -> None:
    now = [0.0]
    held = HeldTurns(max_items=2, max_chars=100, max_age_s=10.0, clock=lambda: now[0])
    a = held.hold([_turn("a")], [])
    taken = held.take(a)
    assert taken is not None and taken.pending == (_turn("a"),)
    assert held.take(a) is None and held.take(None) is None
    b, c, d = (held.hold([_turn(x)], []) for x in "bcd")  # three over two items: b goes
    assert held.take(b) is None and held.dropped == 1 and len(held) == 2
    e = held.hold([_turn("x" * 100)], [])  # three items: c goes; 101 characters: d goes
    assert held.take(c) is None and held.take(d) is None and held.dropped == 3
    now[0] = 11.0  # older than 10 s
    assert held.take(e) is None and held.dropped == 4 and len(held) == 0


async def test_a_whole_historys_record_stays_small(fake_redis: aioredis.Redis, prefix: str) -> None:
    """A first request carrying a 1.3 MB history: the record in its metadata is under 2 KB
    (it was the whole history, serialised and signed twice), and every turn is stored."""
    hook = make_hook(fake_redis, prefix)
    data = chat_request("And now?", call_id="big")
    history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"word{i} " * 110}
        for i in range(2000)
    ]
    data["messages"] = [*history, {"role": "user", "content": "And now?"}]
    out = await hook.async_pre_call_hook(Auth(), None, data, "acompletion")
    assert out is not None
    assert len(json.dumps(out["metadata"][METADATA_KEY])) < 2000
    await hook.async_post_call_success_hook(out, Auth(), model_response("Fine."))
    await hook.drain()
    from litellm_memory_hook.store.keys import ConversationKeys

    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    assert await hook.store.count_turns(keys) == 2002


async def test_turns_no_longer_held_are_not_stored(fake_redis: aioredis.Redis, prefix: str) -> None:
    hook = make_hook(fake_redis, prefix)
    data = await hook.async_pre_call_hook(Auth(), None, chat_request(), "acompletion")
    assert data is not None
    hook.engine.held = HeldTurns()  # what a bound does: the entry is gone
    await hook.async_post_call_success_hook(data, Auth(), model_response("hi"))
    assert hook.counters["held_lost"] == 1
    from litellm_memory_hook.store.keys import ConversationKeys

    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    assert await hook.store.count_turns(keys) == 0


async def test_a_seed_becomes_turns_after_the_reply_as_the_client_sent_it(
    fake_redis: aioredis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole-history client's first request: of its older messages, only those the request
    sends are made into turns before the model call; the others after the reply. A message
    LiteLLM changes in place after the hook (a provider's transformation, a cache mark) is
    stored as the client sent it, and every message is stored once, in order."""
    hook = make_hook(fake_redis, prefix)
    made: list[str] = []
    real_turn = Seed.turn

    def counted(seed: Seed, index: int) -> Turn | None:
        made.append(str(seed.messages[index].get("content")))
        return real_turn(seed, index)

    monkeypatch.setattr(Seed, "turn", counted)
    history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"line {i} " + "x " * 400}
        for i in range(60)
    ]
    expected = [m["content"] for m in history]
    data = chat_request("And now?", call_id="seed")
    data["messages"] = [*history, {"role": "user", "content": "And now?"}]
    out = await hook.async_pre_call_hook(Auth(), None, data, "acompletion")
    assert out is not None
    before_reply = list(made)
    sent = [m for m in out["messages"] if m.get("role") != "system"]
    # the window sends a few of the 60 older messages: those, and only those, are turns now
    assert 0 < len(before_reply) == len(sent) - 1 < 60
    for message in sent:  # what LiteLLM may do to what it sends, after the hook
        if isinstance(message.get("content"), str):
            message["content"] = "CHANGED BY THE PROVIDER"
    await hook.async_post_call_success_hook(out, Auth(), model_response("Fine."))
    await hook.drain()
    assert len(made) == 60  # each older message made into a turn once
    from litellm_memory_hook.store.keys import ConversationKeys

    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    stored = [t.text for t in await hook.store.fetch_turns(keys, range(1, 63))]
    assert stored == [*expected, "And now?", "Fine."]
    assert "CHANGED BY THE PROVIDER" in [m["content"] for m in history]  # it did change them


async def test_a_whole_history_is_stored_behind_the_reply_and_its_next_request_waits_for_none(
    fake_redis: aioredis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The post-call hook of a whole-history client's first request returns before its history
    is stored (LiteLLM awaits that hook before it answers: 0.1-0.3 s at 1 MB); the client's
    next request, made while the write still waits, plans with those turns and stores only its
    own: every message stored once, in order."""
    hook = make_hook(fake_redis, prefix)
    gate = asyncio.Event()
    real_append = hook.store.append

    async def held_append(*args: Any, **kwargs: Any) -> Any:
        await gate.wait()
        return await real_append(*args, **kwargs)

    monkeypatch.setattr(hook.store, "append", held_append)
    history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"line {i}"} for i in range(40)
    ]
    first = chat_request("And now?", call_id="first")
    first["messages"] = [*history, {"role": "user", "content": "And now?"}]
    out = await hook.async_pre_call_hook(Auth(), None, first, "acompletion")
    assert out is not None
    await asyncio.wait_for(
        hook.async_post_call_success_hook(out, Auth(), model_response("Fine.")), timeout=5
    )
    second = chat_request("Then?", call_id="second")
    second["messages"] = [
        *history,
        {"role": "user", "content": "And now?"},
        {"role": "assistant", "content": "Fine."},
        {"role": "user", "content": "Then?"},
    ]
    out2 = await hook.async_pre_call_hook(Auth(), None, second, "acompletion")
    assert out2 is not None
    await hook.async_post_call_success_hook(out2, Auth(), model_response("Done."))
    gate.set()
    await hook.drain()
    from litellm_memory_hook.store.keys import ConversationKeys

    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    stored = [t.text for t in await hook.store.fetch_turns(keys, range(1, 60))]
    assert stored == [m["content"] for m in history] + ["And now?", "Fine.", "Then?", "Done."]
    assert hook.counters["long_writes_after_reply"] == 1
    assert hook.counters["write_retried_ok"] == 1  # the second, queued behind the first


async def test_a_pasted_log_is_stored_behind_the_reply(
    fake_redis: aioredis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One new message longer than LONG_WRITE_CHARS (a pasted log, with ``stored_text_chars``
    above it) is long too: the post-call hook returns before it is stored, and the drain
    stores it whole; a short one is stored before the hook returns, as always."""
    hook = make_hook(fake_redis, prefix, stored_text_chars=4 * LONG_WRITE_CHARS)
    gate = asyncio.Event()
    real_append = hook.store.append

    async def held_append(*args: Any, **kwargs: Any) -> Any:
        await gate.wait()
        return await real_append(*args, **kwargs)

    monkeypatch.setattr(hook.store, "append", held_append)
    log = "ERROR at line 7\n" * (LONG_WRITE_CHARS // 16 + 1)
    out = await hook.async_pre_call_hook(Auth(), None, chat_request(log), "acompletion")
    assert out is not None
    await asyncio.wait_for(
        hook.async_post_call_success_hook(out, Auth(), model_response("A loop.")), timeout=5
    )
    gate.set()
    await hook.drain()
    from litellm_memory_hook.store.keys import ConversationKeys

    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    stored = await hook.store.fetch_turns(keys, [1, 2])
    assert [len(t.text) for t in stored] == [len(log), len("A loop.")]
    assert hook.counters["long_writes_after_reply"] == 1
    short = await hook.async_pre_call_hook(
        Auth(), None, chat_request("hi", call_id="c2"), "acompletion"
    )
    assert short is not None
    await hook.async_post_call_success_hook(short, Auth(), model_response("hello"))
    assert await hook.store.count_turns(keys) == 4  # stored before the hook returned
    assert hook.counters["long_writes_after_reply"] == 1
