"""The breaker (issue 27 item 7): a probe waits one timeout, and on a Cluster a failed primary
turns memory off for its own users only.

Private redis-server processes: one frozen with SIGSTOP (a Redis that answers nothing), and a
3-primary Cluster with one primary killed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from litellm_memory_hook.engine.record import TurnRecord
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.proxy.request_data import METADATA_KEY
from litellm_memory_hook.settings import MemorySettings
from litellm_memory_hook.store.client import node_of
from litellm_memory_hook.store.keys import ConversationKeys
from tests.support.hook_calls import ALIASES, Auth, chat_request, model_response
from tests.support.redis_servers import RedisCluster, RedisServer, free_ports, redis_binaries

pytestmark = pytest.mark.skipif(redis_binaries() is None, reason="redis-server not installed")

TIMEOUT_S = 0.4


def _hook(url: str, prefix: str, **settings: Any) -> MemoryHook:
    settings.setdefault("redis_timeout_s", TIMEOUT_S)
    return MemoryHook(
        settings=MemorySettings(
            key_prefix=prefix, redis_url=url, worker_in_proxy=False, **settings
        ),
        alias_lookup=lambda model: ALIASES.get(model),
    )


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    [port] = free_ports(1)
    srv = RedisServer(tmp_path / "redis", port).start()
    yield srv
    if srv.process is not None:
        os.kill(srv.process.pid, signal.SIGCONT)
    srv.stop()


async def test_a_probe_waits_one_timeout_not_two(server: RedisServer, prefix: str) -> None:
    """A frozen Redis (SIGSTOP: it answers nothing): the first write waits the timeout twice
    (the reconnect retry mends a silently dropped connection) and trips the breaker; a write
    that probes the half-open breaker gives up after one timeout. Both are kept and stored
    once Redis answers."""
    hook = _hook(server.url, prefix)
    records = []
    for i, user in enumerate(("u-A", "u-B")):  # two conversations: no write queues on another
        data = await hook.async_pre_call_hook(
            Auth(), None, chat_request(f"turn {i}", user=user, call_id=f"c{i}"), "acompletion"
        )
        assert data is not None
        records.append(TurnRecord.from_wire(data["metadata"][METADATA_KEY]))
    assert server.process is not None
    os.kill(server.process.pid, signal.SIGSTOP)
    started = time.monotonic()
    await hook.engine.commit(records[0], {"role": "assistant", "content": "re 0"}, "c0")
    first = time.monotonic() - started
    assert hook.counters["breaker_trips"] == 1
    await asyncio.sleep(0.55)  # the breaker's next probe is due
    keys = ConversationKeys.for_ids(prefix, "master", "u-B", "demo")
    assert hook.engine.health.probing(keys)
    started = time.monotonic()
    await hook.engine.commit(records[1], {"role": "assistant", "content": "re 1"}, "c1")
    probe = time.monotonic() - started
    assert first >= 2 * TIMEOUT_S * 0.9
    assert TIMEOUT_S * 0.9 <= probe < 1.5 * TIMEOUT_S, probe
    assert len(hook.engine.buffer) == 2 and hook.counters["writes_lost"] == 0
    os.kill(server.process.pid, signal.SIGCONT)
    await hook.drain()
    for user in ("u-A", "u-B"):  # both kept and written
        other = ConversationKeys.for_ids(prefix, "master", user, "demo")
        assert await hook.store.count_turns(other) == 2, user
    await hook.store.redis.aclose()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RedisCluster]:
    # the healthy primaries go on serving their slots once the others have marked the dead one
    # failed (cluster-node-timeout): with full coverage required, the whole cluster answers
    # CLUSTERDOWN from then on, which a slow run reached before the healthy users' requests
    nodes = RedisCluster(
        tmp_path / "cluster", extra=("--cluster-require-full-coverage", "no")
    ).start()
    yield nodes
    nodes.stop()


async def test_a_failed_primary_turns_memory_off_for_its_users_only(
    cluster: RedisCluster, prefix: str
) -> None:
    """Kill one primary of three: a write for a user on it trips that node's breaker only
    (kept in the buffer); users on the healthy primaries keep memory (no breaker
    pass-through) and their turns are stored (before, the breaker was process-wide: 33 of 145
    requests went without memory)."""
    # a killed primary refuses at once: the healthy users' timeout is long enough that a loaded
    # machine (the full suite on two cores) never times them out, which tripped their breakers
    hook = _hook(cluster.url, prefix, redis_cluster=True, redis_breaker_s=30.0, redis_timeout_s=5.0)
    users = [f"u-{i}" for i in range(30)]
    for user in users:  # the client reads the slot map; every user gets a first turn
        data = await hook.async_pre_call_hook(
            Auth(), None, chat_request("hello", user=user, call_id=f"{user}-0"), "acompletion"
        )
        assert data is not None
        await hook.async_post_call_success_hook(data, Auth(), model_response("hi"))
    node = {
        u: node_of(hook.store.redis, ConversationKeys.for_ids(prefix, "master", u, "demo").turns)
        for u in users
    }
    dead_port = cluster.ports[1]
    dead = f"127.0.0.1:{dead_port}"
    on_dead = [u for u in users if node[u] == dead]
    healthy = [u for u in users if node[u] != dead]
    assert on_dead and healthy, node
    data = await hook.async_pre_call_hook(
        Auth(), None, chat_request("again", user=on_dead[0], call_id="dead-1"), "acompletion"
    )
    assert data is not None
    cluster.servers[1].kill()
    # the write path (the pre-call still trips the whole client: it names no keys yet)
    record = TurnRecord.from_wire(data["metadata"][METADATA_KEY])
    await hook.engine.commit(record, {"role": "assistant", "content": "ok"}, "dead-1")
    for user in healthy:
        data = await hook.async_pre_call_hook(
            Auth(), None, chat_request("again", user=user, call_id=f"{user}-1"), "acompletion"
        )
        assert data is not None
        await hook.async_post_call_success_hook(data, Auth(), model_response("ok"))
    assert (
        dead in hook.engine.health.nodes.open_nodes()
        and hook.engine.health.nodes.open_nodes() == [dead]
    )
    assert hook.engine.health.down_until == 0.0  # the whole client's breaker stays closed
    for user in healthy:
        keys = ConversationKeys.for_ids(prefix, "master", user, "demo")
        assert not hook.engine.health.open(keys)
        assert await hook.store.count_turns(keys) == 4, user
    assert hook.counters["breaker_passthrough"] == 0 and hook.counters["precall_errors"] == 0
    writes = [item for item in hook.engine.buffer._items if item.schedule_at is None]
    assert len(writes) == 1 and hook.counters["writes_lost"] == 0
    await hook.store.redis.aclose()


async def test_the_due_sets_node_failing_leaves_other_users_memory_and_turns(
    cluster: RedisCluster, prefix: str
) -> None:
    """The extraction due set is one key for every user, on one primary. With that primary
    killed, users on the healthy primaries keep memory and every turn is stored at once (before,
    their writes failed at the schedule step and tripped their own node's breaker); only the
    due set's node is tripped, one schedule per conversation waits in the buffer (not their
    turns), and once the node is back every conversation is due."""
    from litellm_memory_hook.store.keys import due_key

    dead = f"127.0.0.1:{cluster.ports[1]}"
    probe = _hook(cluster.url, prefix, redis_cluster=True)
    await probe.store.redis.ping()
    await probe.store.redis.initialize()  # the slot map, to place keys
    prefix = next(  # a prefix whose due set lives on the primary that dies
        f"{prefix}{i}"
        for i in range(1000)
        if node_of(probe.store.redis, due_key(f"{prefix}{i}")) == dead
    )
    await probe.store.redis.aclose()
    hook = _hook(cluster.url, prefix, redis_cluster=True, redis_breaker_s=30.0, redis_timeout_s=5.0)
    users = [f"u-{i}" for i in range(12)]
    for user in users:
        data = await hook.async_pre_call_hook(
            Auth(), None, chat_request("hello", user=user, call_id=f"{user}-0"), "acompletion"
        )
        assert data is not None
        await hook.async_post_call_success_hook(data, Auth(), model_response("hi"))
    healthy = [
        u
        for u in users
        if node_of(hook.store.redis, ConversationKeys.for_ids(prefix, "master", u, "demo").turns)
        != dead
    ]
    assert healthy
    cluster.servers[1].kill()
    for user in healthy:
        data = await hook.async_pre_call_hook(
            Auth(), None, chat_request("again", user=user, call_id=f"{user}-1"), "acompletion"
        )
        assert data is not None
        await hook.async_post_call_success_hook(data, Auth(), model_response("ok"))
    for user in healthy:  # stored at once, memory on
        keys = ConversationKeys.for_ids(prefix, "master", user, "demo")
        assert not hook.engine.health.open(keys)
        assert await hook.store.count_turns(keys) == 4, user
    assert hook.engine.health.nodes.open_nodes() == [dead]
    assert hook.counters["breaker_passthrough"] == 0 and hook.counters["writes_lost"] == 0
    waiting = list(hook.engine.buffer._items)
    assert all(item.schedule_at is not None for item in waiting)
    assert sorted(item.conversation[1] for item in waiting) == sorted(
        ConversationKeys.for_ids(prefix, "master", u, "demo").ref for u in healthy
    )
    cluster.servers[1].start()  # back on its folder: same node id, same slots
    await hook.engine.buffer.drain(timeout_s=60)
    assert len(hook.engine.buffer) == 0
    for user in healthy:
        keys = ConversationKeys.for_ids(prefix, "master", user, "demo")
        assert await hook.queue.due_time(keys) is not None, user
    assert hook.counters["schedules_retried_ok"] == len(healthy)
    await hook.store.redis.aclose()
