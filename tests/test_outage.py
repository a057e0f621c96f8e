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
from litellm_memory_hook.proxy.hook import METADATA_KEY, MemoryHook
from litellm_memory_hook.settings import MemorySettings
from litellm_memory_hook.store.keys import ConversationKeys

from .conftest import ALIASES, Auth, chat_request, model_response
from .redis_servers import RedisServer, free_ports, redis_binaries

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
    assert len(hook.buffer) >= 1
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
    assert len(hook.buffer) == 2 and hook.counters["writes_lost"] == 3
    redis_client: aioredis.Redis = hook.store.redis
    await redis_client.aclose()
