"""No write blocks the others (issue 27 item 6), with the hook in-process on the tests' Redis.

Found in the field: one user's key of the wrong type left 0 of 100 other users' turns stored
while chat answered 200 (every later write queued behind the refused one, which was retried
until dropped). Now the refused write is set aside in its conversation and the others are
written at once. Through the real proxy: ``test_write_isolation_proxy.py``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import redis.asyncio as aioredis

from litellm_memory_hook.core.models import stored_text
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.store.keys import ConversationKeys
from tests.support.hook_calls import Auth, chat_request, make_hook, model_response


async def _turn(hook: MemoryHook, user: str, text: str, call_id: str) -> dict[str, Any]:
    data = await hook.async_pre_call_hook(
        Auth(), None, chat_request(text, user=user, call_id=call_id), "acompletion"
    )
    assert data is not None
    await hook.async_post_call_success_hook(data, Auth(), model_response(f"re: {text}"))
    return data


async def _texts(client: aioredis.Redis, prefix: str, user: str) -> list[str]:
    keys = ConversationKeys.for_ids(prefix, "master", user, "demo")
    return [stored_text(json.loads(m)) for m in await client.zrange(keys.turns, 0, -1)]


async def test_one_poisoned_key_leaves_every_other_users_writes_stored(
    real_redis: aioredis.Redis, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A string at one user's turns key (WRONGTYPE in the append script): that user's chat
    goes on and their writes are set aside, counted and said once; the 100 other users'
    turns are all stored, at once (nothing waits in the buffer behind the poisoned one)."""
    caplog.set_level(logging.INFO, logger="litellm_memory_hook")
    hook = make_hook(real_redis, prefix, refused_write_retry_s=60.0)
    poisoned = ConversationKeys.for_ids(prefix, "master", "u-poisoned", "demo")
    await real_redis.set(poisoned.turns, "not a sorted set")
    await _turn(hook, "u-poisoned", "I go first", "p-1")  # refused: set aside
    others = [f"u-{i:03d}" for i in range(100)]
    for user in others:
        await _turn(hook, user, f"{user} here", f"{user}-1")
    await _turn(hook, "u-poisoned", "and again", "p-2")  # queued behind its own write only
    await hook.drain()  # returns with only set-aside writes left
    stored = [await _texts(real_redis, prefix, user) for user in others]
    assert stored == [[f"{user} here", f"re: {user} here"] for user in others]
    assert len(hook.engine.buffer) == 2 and hook.engine.buffer.set_aside == 1
    # refused: its two reads (the requests went on without memory) and its first write
    assert hook.counters["redis_refused_wrongtype"] == 3
    assert hook.counters["writes_set_aside_wrongtype"] == 1
    assert hook.counters["turns_stored"] == 200 and hook.counters["writes_lost"] == 0
    assert hook.counters["breaker_trips"] == 0 and hook.counters["breaker_passthrough"] == 0
    assert hook.counters["precall_errors"] == 2  # the poisoned reads only: the others had memory
    said = [r.getMessage() for r in caplog.records if "another type" in r.getMessage()]
    assert len(said) == 2, said  # once for the reads, once for the writes, in the period
    assert "master:u-poisoned:demo are set aside" in said[1]
    assert await real_redis.get(poisoned.turns) == b"not a sorted set"  # never overwritten


async def test_an_exception_of_the_client_keeps_the_write(
    real_redis: aioredis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any exception of the client (here an AttributeError, as redis-py's Cluster client
    raised during a failover), not only a RedisError, takes the outage path: the write waits
    in the buffer and is stored on the next try; before, it was lost."""
    hook = make_hook(real_redis, prefix)
    real_script = hook.store._append
    calls = {"n": 0}

    async def flaky(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise AttributeError("'NoneType' object has no attribute 'name'")
        return await real_script(*args, **kwargs)

    monkeypatch.setattr(hook.store, "_append", flaky)
    await _turn(hook, "u-A", "kept through a client error", "c-1")
    assert hook.counters["write_failures_unreachable"] == 1
    await hook.drain()
    assert await _texts(real_redis, prefix, "u-A") == [
        "kept through a client error",
        "re: kept through a client error",
    ]
    assert hook.counters["writes_lost"] == 0 and hook.counters["postcall_errors"] == 0
