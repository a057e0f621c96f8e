"""The package's Redis client packs commands with hiredis, byte for byte as redis-py would.

:func:`litellm_memory_hook.store.client.redis_client` gives every connection (one server over
TCP, TLS or a unix socket, and every node of a Cluster) hiredis's C packer in place of redis-py's
asyncio packer written in Python. These tests hold the bytes equal over arbitrary commands, the
errors the same, and the packer in use on real servers.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from redis.asyncio.connection import (
    Connection,
    SSLConnection,
    UnixDomainSocketConnection,
)
from redis.exceptions import DataError

from litellm_memory_hook.store.client import hiredis_packing, pack_with_hiredis, redis_client
from tests.support.redis_servers import RedisCluster
from tests.support.redis_url import real_redis_url

_PYTHON_PACKER = Connection()


def _python_packed(*args: Any) -> bytes:
    """What redis-py's own asyncio connection sends for the command."""
    return b"".join(bytes(chunk) for chunk in _PYTHON_PACKER.pack_command(*args))


_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
_ARG = st.one_of(
    _TEXT,
    st.binary(max_size=40),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.binary(max_size=20).map(memoryview),
    st.binary(max_size=20).map(bytearray),
)
_NAME = st.one_of(
    st.sampled_from(["SET", "EVALSHA", "HMGET", "CONFIG GET", "CLIENT SETNAME"]),
    st.sampled_from([b"ZADD", b"CLUSTER SLOTS"]),
)


@settings(max_examples=400, deadline=None)
@given(_NAME, st.lists(_ARG, max_size=12))
def test_hiredis_packs_every_command_as_redis_py_does(name: str | bytes, args: list[Any]) -> None:
    assert b"".join(pack_with_hiredis(name, *args)) == _python_packed(name, *args)


def test_large_values_pack_whole_and_equal() -> None:
    big = "ü" * 20_000  # past redis-py's 6,000-byte buffer cutoff, where it sends chunks
    assert b"".join(pack_with_hiredis("SET", "k", big, b"x" * 9_000)) == _python_packed(
        "SET", "k", big, b"x" * 9_000
    )


@pytest.mark.parametrize("bad", [None, True, [1], {"a": 1}, object()])
def test_an_argument_of_another_type_is_a_data_error_as_in_redis_py(bad: Any) -> None:
    with pytest.raises(DataError):
        _python_packed("SET", "k", bad)
    with pytest.raises(DataError):
        pack_with_hiredis("SET", "k", bad)


def test_a_lone_surrogate_fails_to_encode_in_both() -> None:
    with pytest.raises(UnicodeEncodeError):
        _python_packed("SET", "k", "a\ud800")
    with pytest.raises(UnicodeEncodeError):
        pack_with_hiredis("SET", "k", "a\ud800")


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("redis://127.0.0.1:6379/0", Connection),
        ("rediss://127.0.0.1:6380/0", SSLConnection),
        ("unix:///tmp/litellm-memory-test.sock", UnixDomainSocketConnection),
    ],
)
def test_every_scheme_keeps_its_connection_kind_and_packs_with_hiredis(
    url: str, base: type[Connection]
) -> None:
    client = redis_client(url)
    cls = client.connection_pool.connection_class
    assert issubclass(cls, base)
    assert cls is hiredis_packing(base)
    assert cls.pack_command is not base.pack_command


def test_another_encoding_keeps_redis_py_packer() -> None:
    latin = hiredis_packing(Connection)(encoding="latin-1")
    latin_packed = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n\xe9\r\n"
    assert b"".join(latin.pack_command("SET", "k", "é")) == latin_packed
    utf8 = hiredis_packing(Connection)()
    assert b"".join(utf8.pack_command("SET", "k", "é")) == _python_packed("SET", "k", "é")


_VALUES: list[Any] = ["日本語 ü", b"\x00\xff binary", 12345, 2.5, "", "x" * 20_000]


@pytest.mark.redis
async def test_a_real_server_stores_what_the_packed_commands_say(prefix: str) -> None:
    client = redis_client(real_redis_url())
    try:
        keys = [f"{prefix}:v{i}" for i in range(len(_VALUES))]
        async with client.pipeline(transaction=False) as pipe:
            for key, value in zip(keys, _VALUES, strict=True):
                pipe.set(key, value)
            await pipe.execute()
        stored = await client.mget(keys)
        assert stored == [v if isinstance(v, bytes) else str(v).encode() for v in _VALUES]
        # a script with many arguments, as the append script is called
        echo = client.register_script("return ARGV")
        args = [f"term{i}" for i in range(300)]
        assert await echo(keys=[keys[0]], args=args) == [a.encode() for a in args]
        connection = await client.connection_pool.get_connection()
        try:
            assert type(connection) is hiredis_packing(Connection)
        finally:
            await client.connection_pool.release(connection)
        await client.delete(*keys)
    finally:
        await client.aclose()


@pytest.mark.cluster
async def test_every_cluster_node_packs_with_hiredis(
    redis_cluster: RedisCluster, prefix: str
) -> None:
    client = redis_client(redis_cluster.url, cluster=True)
    try:
        # keys in different slots: one per node, so every node gets a connection
        keys = [f"{prefix}:{{u{i}}}:k" for i in range(12)]
        async with client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.set(key, "ü")
            await pipe.execute()
        assert await client.mget(keys[:1]) == ["ü".encode()]
        nodes = client.get_nodes()  # type: ignore[attr-defined]
        assert len(nodes) == 3
        for node in nodes:
            assert node.connection_class is hiredis_packing(Connection)
        for key in keys:
            assert await client.get(key) == "ü".encode()
        for key in keys:
            await client.delete(key)
    finally:
        await client.aclose()


async def test_a_command_is_sent_without_a_task_of_its_own() -> None:
    """redis-py bounds each send with ``asyncio.wait_for``, a new task per command on Python
    3.11 (profiled in the proxy: 0.8-2 ms of CPU per memory request). The package's
    connections bound it in place: 50 commands through a client with a socket timeout make no
    task, and the replies are right."""
    import asyncio

    client = redis_client(real_redis_url(), timeout_s=2.0)
    made: list[object] = []
    loop = asyncio.get_running_loop()

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        made.append(coro)
        return asyncio.Task(coro, loop=loop, **kwargs)

    await client.ping()  # connected before counting
    loop.set_task_factory(factory)
    try:
        replies = [await client.echo(f"x{i}") for i in range(50)]
    finally:
        loop.set_task_factory(None)
        await client.aclose()
    assert replies == [f"x{i}".encode() for i in range(50)]
    assert made == []


async def test_a_send_past_the_socket_timeout_raises_redis_timeout_and_drops_the_connection() -> (
    None
):
    """A send that does not finish within the socket timeout raises redis-py's TimeoutError
    (what its retry and our fault kinds read as an outage) after about that long, drops the
    connection, and leaves the connection's timeout as it was."""
    import asyncio
    import time

    from redis.asyncio.connection import Connection
    from redis.exceptions import TimeoutError as RedisTimeoutError

    class Stuck(Connection):
        async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            await asyncio.sleep(10)

    connection = hiredis_packing(Stuck)(host="127.0.0.1", port=1, socket_timeout=0.05)
    dropped: list[bool] = []

    async def disconnect(nowait: bool = False, error: object = None) -> None:
        dropped.append(nowait)

    connection.disconnect = disconnect  # type: ignore[method-assign]
    started = time.monotonic()
    with pytest.raises(RedisTimeoutError):
        await connection.send_packed_command([b"PING\r\n"])
    assert time.monotonic() - started < 1.0
    assert dropped == [True] and connection.socket_timeout == 0.05
