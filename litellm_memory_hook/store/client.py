"""The one place that builds the asyncio Redis client: one Redis server, a Redis Cluster, or the
master that Redis Sentinels name.

Settings (``callback_settings.memory`` or ``LITELLM_MEMORY_*``): ``redis.url`` names the server,
or, with ``redis.cluster: true``, any one node of a Redis Cluster (``redis://host:port`` or
``rediss://``, database 0; the other nodes are discovered from it). The hook, the extraction
worker, the memory API and the CLI all get their client here, so they agree on the server.

A Cluster works because every key of a user carries the hash tag ``{tenant:user}``
(:mod:`litellm_memory_hook.store.keys`): each Lua script and each WATCH/MULTI transaction names
keys of one user only, so one slot, on one node; the global keys (``mem:due``, ``mem:stats``,
``mem:sweep``) are only ever used alone. redis-py's asyncio ``RedisCluster`` provides all that the
package uses: ``register_script`` (EVALSHA routed by the first key; ``SCRIPT LOAD`` to every
primary on a miss), pipelines without a transaction (split per node), ``pipeline(transaction=
True)`` with ``watch`` on keys of one slot, and ``scan_iter`` over every primary (the sweep).
The cluster client is returned typed as :class:`redis.asyncio.Redis`, which is the command
surface the rest of the package is written against.

Every connection of these clients packs its commands with hiredis's C packer
(``hiredis.pack_command``), as redis-py's synchronous client does whenever hiredis is installed;
redis-py's asyncio connections pack in Python, which was 12% of the hook's instructions per turn
pair (callgrind: 11.8 M -> 10.4 M, mostly the append script's ~60 index terms and the read's
postings). The bytes sent are the same (``tests/integration/test_redis_client.py`` holds the two
packers equal).

With ``redis.sentinel_nodes`` and ``redis.service_name`` the client is redis-py's
``Sentinel(...).master_for(service)``, as LiteLLM's own cache makes it: its pool asks the
Sentinels for the master's address whenever it opens a connection, so after a failover the next
connection reaches the new master. Its connections pack with hiredis and keep the timeouts too.
A demoted master answers ``READONLY``; the Sentinel connection turns that into a connection error
(after dropping itself), which the retry the hook configures sends again once to the master the
Sentinels name now; :func:`reconnect` drops every pooled connection, so none still leads to the
old master.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

import hiredis
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import AbstractConnection, Connection, parse_url
from redis.asyncio.sentinel import (
    Sentinel,
    SentinelConnectionPool,
    SentinelManagedConnection,
    SentinelManagedSSLConnection,
)
from redis.exceptions import DataError
from redis.exceptions import TimeoutError as RedisTimeoutError

from litellm_memory_hook.errors import ConfigError
from litellm_memory_hook.settings import MemorySettings

_CLUSTER_SCHEMES = ("redis", "rediss")
_UTF8 = frozenset({"utf-8", "utf8", "UTF-8", "UTF8"})
_C = TypeVar("_C", bound=AbstractConnection)
_PACKED: dict[type[AbstractConnection], type[AbstractConnection]] = {}


def pack_with_hiredis(*args: Any) -> list[bytes]:
    """One command in the Redis protocol, packed by hiredis: what redis-py's synchronous client
    sends (its ``HiredisRespSerializer``), byte for byte what its asyncio ``pack_command`` packs.

    Args:
        args: the command name (a multi-word name such as ``"CONFIG GET"`` is split), then its
            arguments: ``str`` (UTF-8), ``bytes``, ``bytearray``, ``memoryview``, ``int`` or
            ``float``.

    Raises:
        DataError: an argument of another type (``None``, ``bool``, a list), as redis-py raises.
        UnicodeEncodeError: a ``str`` that UTF-8 cannot encode (a lone surrogate).
    """
    if isinstance(args[0], str):
        args = (*args[0].encode().split(), *args[1:])
    elif b" " in args[0]:
        args = (*args[0].split(), *args[1:])
    try:
        return [hiredis.pack_command(args)]
    except TypeError:
        pass  # a bytearray (hiredis takes bytes and memoryviews), or a type redis-py refuses
    args = tuple(bytes(a) if isinstance(a, bytearray | memoryview) else a for a in args)
    try:
        return [hiredis.pack_command(args)]
    except TypeError as exc:
        raise DataError(str(exc)) from exc


async def timed_send(
    base: type[AbstractConnection], connection: AbstractConnection, command: Any, check: bool
) -> None:
    """``base``'s ``send_packed_command`` bounded by the connection's socket timeout without a
    task per command: redis-py bounds a send with ``asyncio.wait_for``, which on Python 3.11
    makes a task for every command sent (profiled under ``bench proxy``: 0.8-2 ms of the
    proxy's CPU per memory request, outside the hook's own frames). ``asyncio.timeout`` bounds
    it in place; redis-py's send sees no timeout meanwhile, and a send cut by ours raises
    redis-py's ``TimeoutError`` with the connection dropped, as its own does."""
    timeout = connection.socket_timeout
    if not timeout:
        await base.send_packed_command(connection, command, check)
        return
    connection.socket_timeout = None  # one command at a time on a connection
    try:
        async with asyncio.timeout(timeout):
            await base.send_packed_command(connection, command, check)
    except TimeoutError:
        await connection.disconnect(nowait=True)
        raise RedisTimeoutError("Timeout writing to socket") from None
    finally:
        connection.socket_timeout = timeout


def hiredis_packing(base: type[_C]) -> type[_C]:
    """``base`` with :func:`pack_with_hiredis` as its packer, when the connection encodes text
    as redis-py does by default (UTF-8, strict); any other encoding keeps redis-py's packer;
    and :func:`timed_send` as its send. One subclass per ``base``, made once (``base`` itself
    when it already is one)."""
    if base in _PACKED.values():
        return base
    packed = _PACKED.get(base)
    if packed is None:

        def pack_command(self: AbstractConnection, *args: Any) -> list[bytes]:
            encoder = self.encoder
            if encoder.encoding in _UTF8 and encoder.encoding_errors == "strict":
                return pack_with_hiredis(*args)
            return base.pack_command(self, *args)

        async def send_packed_command(
            self: AbstractConnection, command: Any, check_health: bool = True
        ) -> None:
            await timed_send(base, self, command, check_health)

        packed = type(
            f"Hiredis{base.__name__}",
            (base,),
            {"pack_command": pack_command, "send_packed_command": send_packed_command},
        )
        _PACKED[base] = packed
    return cast(type[_C], packed)


def _pack_cluster_with_hiredis(client: RedisCluster) -> None:
    """Every node connection of ``client`` packs with hiredis: the class its startup nodes and
    the nodes it discovers later (made from the same ``connection_kwargs``) connect with."""
    kwargs = client.connection_kwargs
    kwargs["connection_class"] = hiredis_packing(kwargs.get("connection_class", Connection))
    for node in client.nodes_manager.startup_nodes.values():
        node.connection_class = hiredis_packing(node.connection_class)


def redis_client(
    url: str, *, cluster: bool = False, timeout_s: float | None = None, **options: Any
) -> aioredis.Redis:
    """An asyncio client of ``url`` with ``decode_responses=False`` (postings are binary).

    Args:
        url: ``redis://``, ``rediss://`` or (not with ``cluster``) ``unix://``.
        cluster: ``url`` names a node of a Redis Cluster; the client follows the cluster's slot
            map (``MOVED``/``ASK`` redirects, node discovery).
        timeout_s: socket and connect timeout (seconds); ``None``: redis-py's default.
        options: passed on to the client's constructor (e.g. ``retry``,
            ``health_check_interval``).

    Raises:
        ConfigError: ``cluster`` with a URL a Cluster cannot use (a unix socket, a database
            other than 0).
    """
    kwargs: dict[str, Any] = {"decode_responses": False, **options}
    if timeout_s is not None:
        kwargs.setdefault("socket_timeout", timeout_s)
        kwargs.setdefault("socket_connect_timeout", timeout_s)
    parts = urlsplit(url)
    if not cluster:
        single = aioredis.from_url(url, **kwargs)
        pool = single.connection_pool  # makes its connections when first asked, of this class
        pool.connection_class = hiredis_packing(pool.connection_class)
        return single
    if parts.scheme not in _CLUSTER_SCHEMES:
        raise ConfigError(
            f"redis.cluster needs a redis:// or rediss:// URL of a cluster node, not {url!r}"
        )
    if parts.path.strip("/") not in ("", "0"):
        raise ConfigError("a Redis Cluster has only database 0; drop the /<db> from redis.url")
    client = RedisCluster.from_url(url, **kwargs)
    _pack_cluster_with_hiredis(client)
    return cast(aioredis.Redis, client)


class SentinelRedis(aioredis.Redis):
    """The master client of a Sentinel setup; closing it closes its Sentinel connections too."""

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        """Close the client (and its pool, as redis-py does) and the Sentinel clients."""
        await super().aclose(close_connection_pool)
        manager = getattr(self.connection_pool, "sentinel_manager", None)
        if isinstance(manager, Sentinel):
            await manager.aclose()


def _sentinel_address(node: str) -> tuple[str, int]:
    host, _, port = node.rpartition(":")
    return host.strip("[]"), int(port)


def sentinel_client(
    nodes: list[str],
    service_name: str,
    *,
    url: str = "redis://",
    sentinel_password: str | None = None,
    timeout_s: float | None = None,
    **options: Any,
) -> aioredis.Redis:
    """An asyncio client of the master that the Sentinels at ``nodes`` name for
    ``service_name``, following failovers (``decode_responses=False``).

    Args:
        nodes: ``host:port`` of each Sentinel.
        service_name: the master's name in the Sentinels' configuration.
        url: the master's user, password, database and TLS (``rediss://``); its host and port
            are not used (the Sentinels give the address).
        sentinel_password: the Sentinels' own password, if they have one.
        timeout_s: socket and connect timeout of the master's and the Sentinels' connections.
        options: passed on to the master's connection pool (e.g. ``retry``).

    Raises:
        ConfigError: no node, no service name, or a ``unix://`` URL.
    """
    if not nodes:
        raise ConfigError("redis.sentinel_nodes is empty: name at least one Sentinel host:port")
    if not service_name:
        raise ConfigError(
            "redis.sentinel_nodes needs redis.service_name (the master's name in the "
            "Sentinels' configuration, e.g. mymaster)"
        )
    if urlsplit(url).scheme not in _CLUSTER_SCHEMES:
        raise ConfigError("with Redis Sentinel, redis.url must be redis:// or rediss://")
    parsed = parse_url(url)
    tls = parsed.pop("connection_class", Connection) is not Connection
    master: dict[str, Any] = {
        key: parsed[key] for key in ("username", "password", "db") if key in parsed
    }
    watchers: dict[str, Any] = {"password": sentinel_password}
    if tls:
        watchers["ssl"] = True
    if timeout_s is not None:
        for key in ("socket_timeout", "socket_connect_timeout"):
            master[key] = timeout_s
            watchers[key] = timeout_s
    managed = SentinelManagedSSLConnection if tls else SentinelManagedConnection
    make: Any = Sentinel  # redis-py leaves its constructor untyped
    sentinel = make(
        [_sentinel_address(node) for node in nodes],
        sentinel_kwargs=watchers,
        decode_responses=False,
        connection_class=hiredis_packing(managed),
        **master,
    )
    client = sentinel.master_for(
        service_name,
        redis_class=SentinelRedis,
        connection_pool_class=SentinelConnectionPool,
        **options,
    )
    return cast(aioredis.Redis, client)


def client_for_settings(
    settings: MemorySettings,
    *,
    url: str | None = None,
    timeout_s: float | None = None,
    **options: Any,
) -> aioredis.Redis:
    """The client the settings name: ``redis.url``, ``redis.cluster``, ``redis.timeout_s``;
    with ``redis.sentinel_nodes``, the master the Sentinels name (:func:`sentinel_client`).

    Args:
        settings: the global settings.
        url: another URL than ``redis.url`` (the CLI's embedded Redis); not with Sentinel.
        timeout_s: another timeout than ``redis.timeout_s``.
        options: passed on to the client (e.g. ``retry``).

    Raises:
        ConfigError: see :func:`redis_client` and :func:`sentinel_client`.
    """
    timeout = settings.redis.timeout_s if timeout_s is None else timeout_s
    if settings.redis.sentinel_nodes:
        if settings.redis.cluster:
            raise ConfigError("redis.cluster and redis.sentinel_nodes cannot both be set")
        return sentinel_client(
            settings.redis.sentinel_nodes,
            settings.redis.service_name or "",
            url=settings.redis.url,
            sentinel_password=settings.redis.sentinel_password,
            timeout_s=timeout,
            **options,
        )
    return redis_client(
        url or settings.redis.url,
        cluster=settings.redis.cluster and not (url or "").startswith("unix:"),
        timeout_s=timeout,
        **options,
    )


async def master_address(client: aioredis.Redis) -> str | None:
    """``host:port`` of the master a Sentinel client's Sentinels name now (one round trip to a
    Sentinel); ``None`` for a client without Sentinel.

    Raises:
        redis.exceptions.ConnectionError: no Sentinel answered with a healthy master
            (``MasterNotFoundError``).
    """
    pool = client.connection_pool if not isinstance(client, RedisCluster) else None
    if not isinstance(pool, SentinelConnectionPool):
        return None
    host, port = await pool.sentinel_manager.discover_master(pool.service_name)
    return f"{host}:{port}"


def sentinel_master_url(settings: MemorySettings, *, timeout_s: float = 3.0) -> tuple[str, str]:
    """Ask the configured Sentinels (synchronously, for the CLI's checks) which node is the
    master now.

    Returns:
        ``(url, detail)``: ``redis.url`` with the master's host and port in place of its own
        (user, password, database and scheme kept), and ``"service S: master H:P (N of M
        Sentinels answer)"``.

    Raises:
        ConfigError: Sentinel is not configured, or no service name.
        redis.exceptions.ConnectionError: no Sentinel names a healthy master.
    """
    from redis.sentinel import Sentinel as SyncSentinel

    if not settings.redis.sentinel_nodes or not settings.redis.service_name:
        raise ConfigError("redis.sentinel_nodes and redis.service_name are both needed")
    addresses = [_sentinel_address(node) for node in settings.redis.sentinel_nodes]
    make: Any = SyncSentinel  # redis-py leaves its constructor untyped
    sentinel = make(
        addresses,
        sentinel_kwargs={
            "password": settings.redis.sentinel_password,
            "socket_timeout": timeout_s,
            "socket_connect_timeout": timeout_s,
        },
    )
    try:
        host, port = sentinel.discover_master(settings.redis.service_name)
        answering = 0
        for watcher in sentinel.sentinels:
            try:
                answering += bool(watcher.ping())
            except Exception:  # a Sentinel down: counted as not answering
                continue
    finally:
        for watcher in sentinel.sentinels:
            watcher.close()
    parts = urlsplit(settings.redis.url)
    auth = parts.netloc.rpartition("@")[0]
    netloc = (f"{auth}@" if auth else "") + f"{host}:{port}"
    detail = (
        f"service {settings.redis.service_name}: master {host}:{port} "
        f"({answering} of {len(addresses)} Sentinels answer)"
    )
    return parts._replace(netloc=netloc).geturl(), detail


def node_of(client: aioredis.Redis, key: str) -> str:
    """The Redis node that serves ``key``: ``""`` for one server (every key on it); on a
    Cluster, the ``host:port`` of the primary holding the key's slot, as the client's slot map
    says now (``"?"`` before the client has read the map, or for a slot no node covers).

    Pure lookup in the client's memory: no round trip.
    """
    if not isinstance(client, RedisCluster):
        return ""
    try:
        node = client.nodes_manager.get_node_from_slot(client.keyslot(key))
    except Exception:  # SlotNotCoveredError, an empty map before the first command
        return "?"
    return str(node.name)


async def reconnect(client: aioredis.Redis) -> None:
    """Drop the client's pooled connections (one server; with Sentinel, the next connection
    asks the Sentinels for the master again) or read the Cluster's slot map again, so the next
    command reaches the node that is primary now (after a failover answered ``READONLY``: the
    old connections still lead to the demoted node).

    Never raises: a failure here is the next command's failure to report.
    """
    try:
        if isinstance(client, RedisCluster):
            await client.nodes_manager.initialize()
        else:
            await client.connection_pool.disconnect()
    except Exception:  # the next command fails and is classified there
        return
