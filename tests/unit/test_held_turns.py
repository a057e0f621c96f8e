"""The turns a request stores are held in the process between its pre-call and post-call
hooks (engine/held_turns.py): the record that crosses the model call stays small, whatever the
history; the bounds drop the oldest, and a write whose turns were dropped stores nothing."""

from __future__ import annotations

import json

import pytest
import redis.asyncio as aioredis

from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.core.plan import Seed
from litellm_memory_hook.engine.held_turns import HeldTurns
from litellm_memory_hook.proxy.request_data import METADATA_KEY
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
