"""Redis Sentinel (issue 27 item 3): a real master, one replica and three Sentinels (quorum 2) on
loopback; the hook, given only the Sentinels and the service name, writes turns of several
conversations while the master is killed (SIGKILL). After the Sentinels promote the replica,
every turn whose post-call the hook finished (stored at once or through its outage buffer) is
in the new master, once, in order, with no seq used twice.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from litellm_memory_hook.core.models import stored_text
from litellm_memory_hook.engine.memory_engine import RECONNECT_OPTIONS
from litellm_memory_hook.errors import ConfigError
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.settings import MemorySettings, load_settings
from litellm_memory_hook.store.client import client_for_settings, master_address
from litellm_memory_hook.store.keys import ConversationKeys
from litellm_memory_hook.tools.cli_connect import open_redis
from litellm_memory_hook.tools.cli_doctor import doctor_checks
from litellm_memory_hook.tools.cli_doctor_redis import WORKERS_CHECK, Check
from tests.support.hook_calls import ALIASES, Auth, chat_request, model_response
from tests.support.paths import REPO
from tests.support.redis_servers import SentinelSetup, free_ports, sentinel_mode_works

USERS = [f"u-{i}" for i in range(4)]


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[SentinelSetup]:
    """A master, a replica and three Sentinels, stopped afterwards."""
    why = sentinel_mode_works()
    if why is not None:
        pytest.skip(f"no Redis Sentinel test: {why}")
    setup = SentinelSetup(tmp_path / "sentinel", down_after_ms=1000, failover_ms=3000)
    try:
        setup.start()
    except Exception:
        setup.stop()
        raise
    yield setup
    setup.stop()


def _settings(setup: SentinelSetup, prefix: str, **extra: Any) -> MemorySettings:
    return MemorySettings(
        key_prefix=prefix,
        worker_in_proxy=False,
        redis_timeout_s=0.3,
        redis_sentinel_nodes=setup.nodes,
        redis_service_name=setup.service,
        **extra,
    )


def _doctor(setup: SentinelSetup, prefix: str, folder: Path) -> dict[str, Check]:
    """``litellm-memory doctor``'s Redis lines for a config naming only the Sentinels."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["callback_settings"]["memory"].update(
        key_prefix=prefix, redis_sentinel_nodes=setup.nodes, redis_service_name=setup.service
    )
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    checks = doctor_checks(path, folder, "127.0.0.1", free_ports(1)[0], 0)
    return {c.name: c for c in checks if c.name.startswith("redis") or c.name == WORKERS_CHECK}


def _stored(port: int, prefix: str, user: str) -> list[dict[str, Any]]:
    keys = ConversationKeys.for_ids(prefix, "master", user, "demo")
    client = redis.Redis(port=port, socket_timeout=5)
    try:
        return [json.loads(m) for m in client.zrange(keys.turns, 0, -1)]
    finally:
        client.close()


async def test_a_killed_master_loses_no_acknowledged_turn(
    sentinels: SentinelSetup, prefix: str
) -> None:
    old_port = sentinels.master_port()
    assert old_port == sentinels.servers[0].port
    hook = MemoryHook(
        settings=_settings(sentinels, prefix, redis_breaker_s=1.0),
        alias_lookup=lambda model: ALIASES.get(model),
    )
    acknowledged: dict[str, list[str]] = {user: [] for user in USERS}
    stop = asyncio.Event()

    async def writer(user: str) -> None:
        turn = 0
        while not stop.is_set():
            text = f"{user} says thing {turn}"
            data = await hook.async_pre_call_hook(
                Auth(), None, chat_request(text, user=user, call_id=f"{user}-{turn}"), "acompletion"
            )
            assert data is not None  # chat goes on, with or without memory
            await hook.async_post_call_success_hook(data, Auth(), model_response(f"re: {text}"))
            acknowledged[user].append(text)  # the hook finished this post-call
            turn += 1
            await asyncio.sleep(0.02)

    writers = [asyncio.create_task(writer(user)) for user in USERS]
    started = time.monotonic()
    while min(map(len, acknowledged.values())) < 10:  # the first request warms up (imports)
        assert time.monotonic() - started < 20, "no turns written before the kill"
        await asyncio.sleep(0.05)
    before_kill = sum(map(len, acknowledged.values()))
    assert before_kill > 0 and hook.counters["write_failures"] == 0
    pool = hook.store.redis.connection_pool
    assert pool.connection_class.__name__ == "HiredisSentinelManagedConnection"

    sentinels.server(old_port).kill()  # SIGKILL mid-traffic
    killed = time.monotonic()
    loop = asyncio.get_running_loop()
    new_port = old_port
    while new_port in (old_port, None):
        assert time.monotonic() - killed < 30, "no failover within 30 s"
        await asyncio.sleep(0.1)
        new_port = await loop.run_in_executor(None, sentinels.master_port)
    failover_s = time.monotonic() - killed
    assert new_port == sentinels.servers[1].port  # the replica was promoted

    await asyncio.sleep(2.0)  # traffic goes on against the new master
    stop.set()
    await asyncio.gather(*writers)
    await asyncio.wait_for(hook.drain(), 30)
    back_s = time.monotonic() - killed

    written = sum(map(len, acknowledged.values()))
    assert written > before_kill
    # the kill was felt: requests went on without memory and turns waited in the buffer
    assert hook.counters["breaker_trips"] >= 1 and hook.counters["write_retried_ok"] >= 1
    assert hook.counters["writes_lost"] == 0 and len(hook.engine.buffer) == 0
    for user in USERS:
        stored = _stored(new_port, prefix, user)
        seqs = [turn["seq"] for turn in stored]
        assert len(seqs) == len(set(seqs)) and seqs == sorted(seqs), (user, seqs)
        expected = [t for text in acknowledged[user] for t in (text, f"re: {text}")]
        assert [stored_text(turn) for turn in stored] == expected, user
    # new writes after the drain go to the new master, through the same client
    assert await master_address(hook.store.redis) == f"127.0.0.1:{new_port}"
    print(  # noqa: T201 - the figures of the run, with -s
        f"sentinel failover: {written} turns acknowledged ({before_kill} before the kill), "
        f"0 lost; failover {failover_s:.1f} s, buffer drained {back_s:.1f} s after the kill; "
        f"{hook.counters['write_retried_ok']} written from the buffer, "
        f"{hook.counters['duplicate_writes_skipped']} retries found already stored"
    )
    await hook.store.redis.aclose()


async def test_a_demoted_master_answering_readonly_sends_the_write_to_the_new_one(
    sentinels: SentinelSetup, prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A manual failover (SENTINEL FAILOVER): the old master lives on as a replica, and the
    client's pooled connection still leads to it. The next write there answers READONLY; the
    Sentinel connection drops itself, and the hook's retry asks the Sentinels again and writes
    to the new master, in the same call. ``doctor`` reports the master the Sentinels name, before
    and after, and the CLI's client (as ``worker`` and every command open it) reaches it."""
    for name in ("REDIS_URL", "LITELLM_MEMORY_REDIS__URL", "LITELLM_MEMORY_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    client = client_for_settings(_settings(sentinels, prefix), **RECONNECT_OPTIONS)
    old, new = (server.port for server in sentinels.servers)
    found = await asyncio.to_thread(_doctor, sentinels, prefix, tmp_path)
    assert found["redis sentinel"].status == "ok", found
    assert f"master 127.0.0.1:{old} (3 of 3 Sentinels answer)" in found["redis sentinel"].detail
    assert found["redis reachable"].status == "ok" and str(old) in found["redis reachable"].detail
    assert found["redis permissions"].status == "ok"
    await client.set(f"{prefix}:k", b"1")
    watcher = sentinels.watchers[0].client()
    demoted = redis.Redis(port=old, socket_timeout=1, decode_responses=True)
    try:
        watcher.execute_command("SENTINEL", "FAILOVER", sentinels.service)
        deadline = time.monotonic() + 30
        while demoted.info("replication")["role"] != "slave" or sentinels.master_port() != new:
            assert time.monotonic() < deadline, "no failover within 30 s"
            await asyncio.sleep(0.1)
    finally:
        watcher.close()
        demoted.close()
    await client.set(f"{prefix}:k", b"2")  # READONLY on the old connection, then the new master
    assert await master_address(client) == f"127.0.0.1:{new}"
    direct = redis.Redis(port=new)
    try:
        assert direct.get(f"{prefix}:k") == b"2"
    finally:
        direct.close()
    await client.aclose()
    found = await asyncio.to_thread(_doctor, sentinels, prefix, tmp_path)
    assert f"master 127.0.0.1:{new} " in found["redis sentinel"].detail, found
    assert str(new) in found["redis reachable"].detail
    cli = open_redis(_settings(sentinels, prefix), tmp_path)
    assert await cli.get(f"{prefix}:k") == b"2"
    assert not (tmp_path / "redis.sock").exists()  # no embedded Redis was started
    await cli.aclose()


def test_litellm_s_sentinel_variables_and_the_setting_forms(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """LiteLLM's own variables configure Sentinel too; ``host:port`` lists, comma-separated
    text and LiteLLM's ``[["host", port]]`` all give ``host:port`` nodes."""
    monkeypatch.setenv("REDIS_SENTINEL_NODES", '[["10.0.0.5", 26379], ["10.0.0.6", "26380"]]')
    monkeypatch.setenv("REDIS_SERVICE_NAME", "mymaster")
    monkeypatch.setenv("REDIS_SENTINEL_PASSWORD", "s3")
    settings = load_settings()
    assert settings.redis.sentinel_nodes == ["10.0.0.5:26379", "10.0.0.6:26380"]
    assert (settings.redis.service_name, settings.redis.sentinel_password) == ("mymaster", "s3")
    monkeypatch.setenv("LITELLM_MEMORY_REDIS__SENTINEL_NODES", "a:1, b:2")
    assert load_settings().redis.sentinel_nodes == ["a:1", "b:2"]
    file = load_settings({"memory": {"redis": {"sentinel_nodes": ["c:3"]}}})
    assert file.redis.sentinel_nodes == ["c:3"]  # the file wins
    with pytest.raises(ConfigError, match=r"redis\.sentinel_nodes .*'c' is not host:port"):
        load_settings({"memory": {"redis": {"sentinel_nodes": ["c"]}}})


async def test_sentinel_settings_that_cannot_work_are_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"needs redis\.service_name"):
        client_for_settings(MemorySettings(redis_sentinel_nodes=["a:1"]))
    with pytest.raises(ConfigError, match="cannot both be set"):
        client_for_settings(
            MemorySettings(redis_sentinel_nodes=["a:1"], redis_service_name="m", redis_cluster=True)
        )
    with pytest.raises(ConfigError, match="redis:// or rediss://"):
        client_for_settings(
            MemorySettings(
                redis_sentinel_nodes=["a:1"], redis_service_name="m", redis_url="unix:///x.sock"
            )
        )
    client = client_for_settings(
        MemorySettings(
            redis_sentinel_nodes=["a:1"],
            redis_service_name="m",
            redis_url="rediss://memuser:pw@ignored:1/3",
            redis_sentinel_password="spw",
        )
    )
    kwargs = client.connection_pool.connection_kwargs
    assert (kwargs["username"], kwargs["password"], kwargs["db"]) == ("memuser", "pw", 3)
    assert client.connection_pool.connection_class.__name__ == (
        "HiredisSentinelManagedSSLConnection"
    )
    sentinel = client.connection_pool.sentinel_manager  # type: ignore[attr-defined]
    assert sentinel.sentinel_kwargs["password"] == "spw"
    await client.aclose()
