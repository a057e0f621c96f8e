"""Requests at the edges of planning and recall, found by trying the proxy as a new operator: a
stored tool call whose id is over the stored limit, and a long history seeding an empty store."""

from __future__ import annotations

import json
from dataclasses import replace as dc_replace
from typing import Any

import pytest

from litellm_memory_hook.core.models import ConversationState, Turn
from litellm_memory_hook.core.plan import plan_turn
from litellm_memory_hook.core.stored_messages import message_to_turn
from litellm_memory_hook.engine.options import ContextOptions
from litellm_memory_hook.engine.rebuild import prepare
from litellm_memory_hook.store.keys import ConversationKeys, user_scope
from litellm_memory_hook.store.redis_store import MemoryStore

NOW = 1_700_000_000_000


def test_tool_result_sent_alone_answers_a_stored_call_with_a_long_id() -> None:
    """A new-message-only agent sends the result of the model's last tool call alone. When the
    call id is longer than 128 characters the store keeps ``start + _ + hash``; the replayed
    call must still carry the id the result answers, else OpenAI and Anthropic answer 400
    ("messages with role 'tool' must be a response to a preceeding message with
    'tool_calls'"). Seen through the proxy: the request passes through as sent (the lone
    tool message) and the provider refuses it."""
    long_id = "call_" + "x" * 200
    call = {"id": long_id, "type": "function", "function": {"name": "w", "arguments": "{}"}}
    # the reply as the post-call hook stores it
    stored = message_to_turn(
        {"role": "assistant", "content": None, "tool_calls": [call]}, ts_ms=NOW
    )
    assert stored is not None
    stored_call = dc_replace(stored, seq=2)
    tail = [Turn(role="user", text="weather?", ts_ms=NOW, seq=1), stored_call]
    state = ConversationState(meta={"seq": "2"}, tail=tail)
    result = {"role": "tool", "tool_call_id": long_id, "content": "31C"}
    plan = plan_turn([result], state, now_ms=NOW)
    assert plan is not None, "the lone tool result passes through without its call (a 400)"
    call_message, sent = plan.new
    assert [c["id"] for c in call_message["tool_calls"]] == [sent["tool_call_id"]]


async def test_first_request_of_a_long_history_recalls_its_own_older_lines(
    fake_redis: Any, prefix: str
) -> None:
    """A whole-history client's first request (a chat moved onto the proxy, or the first one
    after a forget) seeds the empty store. Its messages older than the 40-message window are
    dropped from the window, and recall, which reads only what was stored before the request,
    brings none of them back: the model gets neither the line the client sent nor the recalled
    copy the README promises ("Older lines outside the recent window are recalled by rare
    shared words"). The next request recalls the same line."""
    store = MemoryStore(fake_redis, ttl_s=3600)
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "c1")
    memory = keys.user_keys.memory_set(user_scope("demo"))
    history = _seema_history()
    prepared = await prepare(store, keys, memory, history, ContextOptions(), now_ms=NOW)
    assert prepared is not None
    sent = json.dumps(prepared.messages)
    assert "Seema lives in Pune" in sent, (
        "the client's own older line reached neither window nor recall"
    )


async def test_a_seeding_request_ranks_only_its_newest_older_lines(
    fake_redis: Any, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Indexing a seeding request's own older messages costs ~0.08 ms each on the request path:
    only the newest UNSTORED_RECALL_MAX of those the window leaves out are ranked (a
    10,000-message first request took 0.7 s more without the bound)."""
    from litellm_memory_hook.engine import layers

    store = MemoryStore(fake_redis, ttl_s=3600)
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "c2")
    memory = keys.user_keys.memory_set(user_scope("demo"))
    history = _seema_history()
    monkeypatch.setattr(layers, "UNSTORED_RECALL_MAX", 4)
    prepared = await prepare(store, keys, memory, history, ContextOptions(), now_ms=NOW)
    assert prepared is not None
    assert "Seema lives in Pune" not in json.dumps(prepared.messages)  # too old to be ranked
    monkeypatch.setattr(layers, "UNSTORED_RECALL_MAX", 200)
    prepared = await prepare(store, keys, memory, history, ContextOptions(), now_ms=NOW)
    assert prepared is not None
    assert "Seema lives in Pune" in json.dumps(prepared.messages)


def _seema_history() -> list[dict[str, Any]]:
    """A whole history whose first line (Seema's town) is 62 messages before the question."""
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "My sister Seema lives in Pune near the river"},
        {"role": "assistant", "content": "Nice."},
    ]
    for i in range(30):
        history.append({"role": "user", "content": f"filler chat number {i} about the weather"})
        history.append({"role": "assistant", "content": f"ok {i}"})
    history.append({"role": "user", "content": "Where does Seema live?"})
    return history
