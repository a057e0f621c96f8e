"""Fixtures shared by every test folder: fake and real Redis, a Redis Cluster, the store, a hook
wired to them, key prefixes and a fake clock. Their plain helpers are in tests/support/."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import uuid
from collections.abc import AsyncIterator, Iterator

import fakeredis
import pytest
import redis.asyncio as aioredis

from litellm_memory_hook.engine import rebuild as rebuild_module
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.store import writes as store_writes_module
from litellm_memory_hook.store.client import redis_client
from litellm_memory_hook.store.redis_store import MemoryStore
from tests.support.hook_calls import Clock, make_hook
from tests.support.redis_servers import RedisCluster, redis_binaries
from tests.support.redis_url import cli_key_prefix, real_redis_url


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "cluster: runs against a 3-master Redis Cluster the tests start (MEMORY_TEST_CLUSTER)",
    )


def cluster_mode() -> str:
    """``MEMORY_TEST_CLUSTER``: ``auto`` (default: run the cluster tests when ``redis-server``
    and ``redis-cli`` are installed, else skip them), ``1`` (run them; missing binaries fail),
    ``0`` (skip them)."""
    return os.environ.get("MEMORY_TEST_CLUSTER", "auto").strip().lower()


@pytest.fixture
def prefix() -> str:
    """A key prefix unique to the test, so tests never see each other's keys."""
    return "t" + uuid.uuid4().hex[:10]


@pytest.fixture
def key_prefix(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A key prefix of this test only, given to CLI commands and hooks built from the
    environment (:func:`cli_key_prefix`: the key prefix's variable, and the tests' Redis as
    REDIS_URL); its keys are deleted after the test."""
    yield from cli_key_prefix(monkeypatch, "tk")


async def _cleanup(client: aioredis.Redis, prefix: str) -> None:
    async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
        await client.delete(key)


@pytest.fixture
async def real_redis(prefix: str) -> AsyncIterator[aioredis.Redis]:
    """The package's own client (:func:`redis_client`) of the real Redis; the test's keys are
    deleted afterwards."""
    client = redis_client(real_redis_url())
    try:
        await client.ping()
    except Exception as exc:  # pragma: no cover - CI always has one
        pytest.fail(f"no Redis at {real_redis_url()}: {exc}")
    yield client
    await _cleanup(client, prefix)
    await client.aclose()


@pytest.fixture
async def fake_redis() -> AsyncIterator[aioredis.Redis]:
    """A fakeredis asyncio client with Lua."""
    client = fakeredis.FakeAsyncRedis(decode_responses=False)
    yield client
    await client.aclose()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """A real Redis Cluster (3 masters, no replicas) started once for the session: ``redis-server
    --cluster-enabled yes`` on free ports, ``redis-cli --cluster create``, ``cluster_state:ok``
    on every node; stopped at the end. Skipped (or failed) as :func:`cluster_mode` says."""
    mode = cluster_mode()
    if mode in ("0", "no", "off", "false"):
        pytest.skip("MEMORY_TEST_CLUSTER=0")
    if redis_binaries() is None:
        if mode in ("1", "yes", "on", "true"):
            pytest.fail("MEMORY_TEST_CLUSTER=1 but redis-server / redis-cli are not installed")
        pytest.skip("redis-server / redis-cli not installed: no Redis Cluster tests")
    cluster = RedisCluster(tmp_path_factory.mktemp("redis-cluster"))
    try:
        cluster.start()
    except Exception:
        cluster.stop()
        raise
    yield cluster
    cluster.stop()


@pytest.fixture
async def cluster_redis(redis_cluster: RedisCluster, prefix: str) -> AsyncIterator[aioredis.Redis]:
    """A cluster client (the package's own :func:`redis_client`); the test's keys are deleted
    afterwards (SCAN on every node)."""
    client = redis_client(redis_cluster.url, cluster=True)
    yield client
    await _cleanup(client, prefix)
    await client.aclose()


@pytest.fixture(params=["fake", "real", pytest.param("cluster", marks=pytest.mark.cluster)])
async def any_redis(request: pytest.FixtureRequest, prefix: str) -> AsyncIterator[aioredis.Redis]:
    """The same test on fakeredis, on the real Redis and on a real Redis Cluster."""
    if request.param == "fake":
        client: aioredis.Redis = fakeredis.FakeAsyncRedis(decode_responses=False)
    elif request.param == "cluster":
        cluster: RedisCluster = request.getfixturevalue("redis_cluster")
        client = redis_client(cluster.url, cluster=True)
    else:
        client = redis_client(real_redis_url())
    yield client
    if request.param != "fake":
        await _cleanup(client, prefix)
    await client.aclose()


@pytest.fixture
def store(any_redis: aioredis.Redis) -> MemoryStore:
    """A store on fake and on real Redis."""
    return MemoryStore(any_redis, ttl_s=3600)


@pytest.fixture
def hook(any_redis: aioredis.Redis, prefix: str) -> MemoryHook:
    """A hook on fake and on real Redis."""
    return make_hook(any_redis, prefix)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    """A fake clock for the hook's request and reply times (starts at 2025-10-09)."""
    fake = Clock()
    monkeypatch.setattr(rebuild_module, "time", fake)
    monkeypatch.setattr(store_writes_module, "time", fake)
    yield fake
