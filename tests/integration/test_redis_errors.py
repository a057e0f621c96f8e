"""Redis errors by kind (issue 27 item 2): a refusal is not an outage.

Unit tests of :mod:`litellm_memory_hook.store.errors` and the per-node breakers, then a hook
in-process on a private redis-server with ACL users: one without ``@scripting`` (field case
E07), one without the due set's key. Through the real proxy: ``test_redis_errors_proxy.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.exceptions import (
    ConnectionError as RedisConnectionError,
)
from redis.exceptions import (
    NoPermissionError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    ResponseError,
)
from redis.exceptions import (
    TimeoutError as RedisTimeoutError,
)

from litellm_memory_hook.core.models import stored_text
from litellm_memory_hook.engine.breakers import NodeBreakers
from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.settings import MemorySettings
from litellm_memory_hook.store.errors import RateLimitedLog, RedisFault, classify, detail, explain
from litellm_memory_hook.store.keys import ConversationKeys
from tests.support.hook_calls import ALIASES, Auth, chat_request, model_response
from tests.support.redis_servers import (
    RedisServer,
    add_acl_user,
    free_ports,
    redis_binaries,
    set_acl_rules,
)


def _wrapped(exc: BaseException) -> StoreError:
    try:
        raise StoreError(f"append x: {exc}") from exc
    except StoreError as wrapped:
        return wrapped


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (RedisConnectionError("Connection refused"), RedisFault.UNREACHABLE),
        (RedisTimeoutError("Timeout reading from socket"), RedisFault.UNREACHABLE),
        (RedisClusterException("slot not covered"), RedisFault.UNREACHABLE),
        (OSError("reset"), RedisFault.UNREACHABLE),
        (TimeoutError(), RedisFault.UNREACHABLE),
        (ReadOnlyError("You can't write against a read only replica."), RedisFault.READONLY),
        (
            NoPermissionError("this user has no permissions to run the 'evalsha' command"),
            RedisFault.NOPERM,
        ),
        (OutOfMemoryError("command not allowed when used memory > 'maxmemory'."), RedisFault.OOM),
        (
            ResponseError(
                "WRONGTYPE Operation against a key holding the wrong kind of value script: "
                + "a" * 40
                + ", on @user_script:1."
            ),
            RedisFault.WRONGTYPE,
        ),
        (
            ResponseError("ERR user_script:12: Script attempted to access nonexistent global"),
            RedisFault.SCRIPT,
        ),
        (ResponseError("ERR unknown command 'EVALSHA_RO'"), RedisFault.REFUSED),
        (KeyError("record"), RedisFault.ERROR),
        (StoreError("load x: gone"), RedisFault.UNREACHABLE),
    ],
)
def test_classify_reads_the_kind_through_the_store_error(exc: Exception, kind: RedisFault) -> None:
    assert classify(exc) is kind
    # the store wraps whatever its client raised: an exception that is not Redis's own (a
    # Cluster client's AttributeError during a failover) is an outage there, never a bug of ours
    wrapped = RedisFault.UNREACHABLE if kind is RedisFault.ERROR else kind
    assert classify(_wrapped(exc)) is wrapped


def test_transient_refused_and_said() -> None:
    """Outages and failovers are retried in order and not said as refusals; a full Redis is
    said and retried in order; the rest is set aside in its conversation."""
    assert [k for k in RedisFault if k.transient] == [
        RedisFault.UNREACHABLE,
        RedisFault.READONLY,
        RedisFault.OOM,
    ]
    assert [k for k in RedisFault if not k.said] == [RedisFault.UNREACHABLE, RedisFault.READONLY]


def test_explain_names_the_permission_and_the_memory_limit() -> None:
    noperm = NoPermissionError("this user has no permissions to run the 'evalsha' command")
    text = explain(RedisFault.NOPERM, _wrapped(noperm), prefix="mem")
    assert "lacks a permission" in text and "'evalsha'" in text and "~mem:*" in text
    oom = OutOfMemoryError(
        "command not allowed when used memory > 'maxmemory'. script: " + "b" * 40 + ", on @x:1."
    )
    assert detail(oom) == "command not allowed when used memory > 'maxmemory'."
    assert "memory limit" in explain(RedisFault.OOM, oom) and "maxmemory" in explain(
        RedisFault.OOM, oom
    )


def test_rate_limited_log_says_once_per_period_with_the_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [100.0]
    log = RateLimitedLog(60.0, clock=lambda: now[0])
    caplog.set_level(logging.WARNING, logger="litellm_memory_hook")
    said = [log.emit("noperm:x", logging.ERROR, "refused") for _ in range(5)]
    assert said == [True, False, False, False, False]
    assert log.emit("oom:y", logging.ERROR, "full")  # another cause has its own line
    now[0] += 59.9
    assert not log.emit("noperm:x", logging.ERROR, "refused")
    now[0] += 0.2
    assert log.emit("noperm:x", logging.ERROR, "refused")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["refused", "full", "refused (5 more since the last line)"]


def test_node_breakers_trip_probe_and_close_per_node() -> None:
    now = [0.0]
    breakers = NodeBreakers(5.0, 0.5, clock=lambda: now[0])
    assert breakers.trip("a:1") and not breakers.trip("a:1")  # the second renews, not new
    assert breakers.is_open("a:1") and not breakers.is_open("b:2")
    assert breakers.tripped("a:1") and not breakers.tripped("b:2")
    now[0] = 0.6
    assert not breakers.is_open("a:1")  # the probe
    assert breakers.is_open("a:1")  # the others wait for the next probe
    breakers.ok("a:1")
    assert not breakers.is_open("a:1") and breakers.open_nodes() == []
    breakers.trip("b:2")
    now[0] = 6.0
    assert breakers.open_nodes() == [] and not breakers.is_open("b:2")  # the trip ended


pytestmark_acl = pytest.mark.skipif(redis_binaries() is None, reason="redis-server not installed")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    """A private Redis (ACL users need a server of our own), stopped afterwards."""
    [port] = free_ports(1)
    srv = RedisServer(tmp_path / "redis", port).start()
    yield srv
    srv.stop()


def _hook(url: str, prefix: str, **settings: Any) -> MemoryHook:
    return MemoryHook(
        settings=MemorySettings(
            key_prefix=prefix,
            redis_url=url,
            worker_in_proxy=False,
            redis_timeout_s=0.3,
            **settings,
        ),
        alias_lookup=lambda model: ALIASES.get(model),
    )


async def _turn(hook: MemoryHook, user: str, text: str, call_id: str) -> dict[str, Any]:
    data = await hook.async_pre_call_hook(
        Auth(), None, chat_request(text, user=user, call_id=call_id), "acompletion"
    )
    assert data is not None
    await hook.async_post_call_success_hook(data, Auth(), model_response(f"re: {text}"))
    return data


def _texts(server: RedisServer, prefix: str, user: str) -> list[str]:
    keys = ConversationKeys.for_ids(prefix, "master", user, "demo")
    client = redis.Redis(port=server.port)
    try:
        return [stored_text(json.loads(m)) for m in client.zrange(keys.turns, 0, -1)]
    finally:
        client.close()


async def _until(check: Any, timeout_s: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not check():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.05)


def _lines(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


USERS = [f"u-{i}" for i in range(4)]


@pytestmark_acl
async def test_a_user_without_scripting_gets_one_clear_line_and_no_turn_is_lost(
    server: RedisServer, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """E07: an ACL user allowed every command but ``@scripting``. Chat goes on; the refusal
    is said once in the period, naming the command, and counted by kind, never as an outage;
    every turn is kept, and stored once the permission is granted."""
    caplog.set_level(logging.INFO, logger="litellm_memory_hook")
    url = add_acl_user(server, "memhook", "pw", "~*", "&*", "+@all", "-@scripting")
    hook = _hook(url, prefix, refused_write_retry_s=0.2)
    for round_ in range(2):
        for user in USERS:
            text = f"{user} says hello, round {round_}"
            data = await _turn(hook, user, text, f"{user}-{round_}")
            assert data["messages"][-1] == {"role": "user", "content": text}  # chat goes on
    await _until(lambda: hook.counters["redis_refused_noperm"] >= 12, 5)  # retried meanwhile
    said = _lines(caplog, "lacks a permission")
    # once for the reads (the requests went on without memory), once for the writes
    assert len(said) == 2, said
    assert all("no permissions to run the 'evalsha' command" in line for line in said)
    assert f"~{prefix}:*" in said[0] and "set aside" in said[1]
    assert _lines(caplog, "Redis is unreachable") == []
    # each conversation's oldest write was tried and refused; the others wait behind it
    assert hook.counters["writes_set_aside"] == 4 == hook.counters["writes_set_aside_noperm"]
    assert len(hook.engine.buffer) == 8 and hook.engine.buffer.set_aside == 4
    assert hook.counters["writes_lost"] == 0 and hook.counters["breaker_trips"] == 0
    refusals = {
        sample.labels["kind"]: sample.value
        for family in hook.metrics.local_families()
        if family.name == "litellm_memory_redis_refusals"
        for sample in family.samples
        if sample.name.endswith("_total")
    }
    assert refusals["noperm"] == hook.counters["redis_refused_noperm"] >= 12  # 8 reads, retries
    assert refusals["oom"] == 0

    set_acl_rules(server, "memhook", "+@scripting")
    await _until(lambda: len(hook.engine.buffer) == 0, 5)
    for user in USERS:
        assert _texts(server, prefix, user) == [
            f"{user} says hello, round 0",
            f"re: {user} says hello, round 0",
            f"{user} says hello, round 1",
            f"re: {user} says hello, round 1",
        ]
    assert hook.counters["write_retried_ok"] == 8 and hook.counters["writes_lost"] == 0
    await hook.store.redis.aclose()


@pytestmark_acl
async def test_refused_writes_past_their_age_are_counted_and_said_by_kind(
    server: RedisServer, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """E07: what cannot be written is never dropped silently: past ``write_buffer_max_age_s``
    each dropped write is counted under its kind and said with it."""
    caplog.set_level(logging.INFO, logger="litellm_memory_hook")
    url = add_acl_user(server, "memhook", "pw", "~*", "&*", "+@all", "-@scripting")
    hook = _hook(url, prefix, refused_write_retry_s=0.1, write_buffer_max_age_s=0.6)
    for user in USERS[:2]:
        await _turn(hook, user, f"{user} wrote this", f"{user}-a")
    await _until(lambda: len(hook.engine.buffer) == 0, 5)
    assert hook.counters["writes_lost"] == 2 == hook.counters["writes_lost_noperm"]
    dropped = _lines(caplog, "last failure: noperm")
    assert len(dropped) == 2 and all("for Redis" in line for line in dropped)
    await hook.store.redis.aclose()


@pytestmark_acl
async def test_a_user_without_the_due_set_stores_every_turn(
    server: RedisServer, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An ACL allowing the users' keys but not the due set: the turns are stored (the append
    worked), the schedule's refusal is counted and said once, and no write is held (before,
    every write waited behind the first one's schedule, retried until dropped)."""
    caplog.set_level(logging.INFO, logger="litellm_memory_hook")
    url = add_acl_user(server, "memhook", "pw", f"~{prefix}:{{*", "&*", "+@all")
    hook = _hook(url, prefix)
    for user in USERS:
        await _turn(hook, user, f"{user} likes tea", f"{user}-t")
    await hook.drain()
    for user in USERS:
        assert _texts(server, prefix, user) == [f"{user} likes tea", f"re: {user} likes tea"]
    assert hook.counters["followup_refused"] == 4 == hook.counters["redis_refused_noperm"]
    assert len(hook.engine.buffer) == 0 and hook.counters["write_failures"] == 0
    said = _lines(caplog, "scheduling their extraction failed")
    assert len(said) == 1 and "no permissions" in said[0]
    await hook.store.redis.aclose()


@pytestmark_acl
async def test_readonly_after_a_failover_reconnects_and_keeps_the_turn(
    server: RedisServer, tmp_path: Path, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """READONLY (the node became a replica): the write drops the pooled connections and
    tries once more, then waits in the buffer as for an outage (not said as a refusal, no
    breaker); once the node is a primary again it is written."""
    caplog.set_level(logging.INFO, logger="litellm_memory_hook")
    [port] = free_ports(1)
    other = RedisServer(tmp_path / "other", port).start()
    admin = redis.Redis(port=server.port)
    try:
        hook = _hook(server.url, prefix)
        data = await hook.async_pre_call_hook(
            Auth(), None, chat_request("said before the failover", call_id="r1"), "acompletion"
        )
        assert data is not None
        admin.replicaof("127.0.0.1", other.port)  # demoted: writes answer READONLY
        await hook.async_post_call_success_hook(data, Auth(), model_response("kept"))
        assert hook.counters["redis_readonly_reconnects"] >= 1
        assert hook.counters["write_failures_readonly"] == 1 and len(hook.engine.buffer) == 1
        assert hook.counters["breaker_trips"] == 0 and hook.counters["writes_set_aside"] == 0
        admin.replicaof("NO", "ONE")  # promoted again
        await hook.drain()
        assert _texts(server, prefix, "u-A") == ["said before the failover", "kept"]
        assert hook.counters["writes_lost"] == 0
        assert _lines(caplog, "became a replica") != []
        await hook.store.redis.aclose()
    finally:
        admin.close()
        other.stop()
