"""The one place that builds the asyncio Redis client: one Redis server, or a Redis Cluster.

Settings (``callback_settings.memory`` or ``LITELLM_MEMORY_*``): ``redis_url`` names the server,
or, with ``redis_cluster: true``, any one node of a Redis Cluster (``redis://host:port`` or
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
postings). The bytes sent are the same (``tests/test_redis_client.py`` holds the two packers equal).
"""

from __future__ import annotations

from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

import hiredis
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import AbstractConnection, Connection
from redis.exceptions import DataError

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


def hiredis_packing(base: type[_C]) -> type[_C]:
    """``base`` with :func:`pack_with_hiredis` as its packer, when the connection encodes text
    as redis-py does by default (UTF-8, strict); any other encoding keeps redis-py's packer.
    One subclass per ``base``, made once (``base`` itself when it already is one)."""
    if base in _PACKED.values():
        return base
    packed = _PACKED.get(base)
    if packed is None:

        def pack_command(self: AbstractConnection, *args: Any) -> list[bytes]:
            encoder = self.encoder
            if encoder.encoding in _UTF8 and encoder.encoding_errors == "strict":
                return pack_with_hiredis(*args)
            return base.pack_command(self, *args)

        packed = type(f"Hiredis{base.__name__}", (base,), {"pack_command": pack_command})
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
            f"redis_cluster needs a redis:// or rediss:// URL of a cluster node, not {url!r}"
        )
    if parts.path.strip("/") not in ("", "0"):
        raise ConfigError("a Redis Cluster has only database 0; drop the /<db> from redis_url")
    client = RedisCluster.from_url(url, **kwargs)
    _pack_cluster_with_hiredis(client)
    return cast(aioredis.Redis, client)


def client_for_settings(settings: MemorySettings, **options: Any) -> aioredis.Redis:
    """The client the settings name: ``redis_url``, ``redis_cluster``, ``redis_timeout_s``.

    Raises:
        ConfigError: see :func:`redis_client`.
    """
    return redis_client(
        settings.redis_url,
        cluster=settings.redis_cluster,
        timeout_s=settings.redis_timeout_s,
        **options,
    )


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
    """Drop the client's pooled connections (one server) or read the Cluster's slot map again,
    so the next command reaches the node that is primary now (after a failover answered
    ``READONLY``: the old connections still lead to the demoted node).

    Never raises: a failure here is the next command's failure to report.
    """
    try:
        if isinstance(client, RedisCluster):
            await client.nodes_manager.initialize()
        else:
            await client.connection_pool.disconnect()
    except Exception:  # the next command fails and is classified there
        return
