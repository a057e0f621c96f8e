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
"""

from __future__ import annotations

from typing import Any, cast
from urllib.parse import urlsplit

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

from litellm_memory_hook.errors import ConfigError
from litellm_memory_hook.settings import MemorySettings

_CLUSTER_SCHEMES = ("redis", "rediss")


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
    if not cluster:
        return aioredis.from_url(url, **kwargs)
    parts = urlsplit(url)
    if parts.scheme not in _CLUSTER_SCHEMES:
        raise ConfigError(
            f"redis_cluster needs a redis:// or rediss:// URL of a cluster node, not {url!r}"
        )
    if parts.path.strip("/") not in ("", "0"):
        raise ConfigError("a Redis Cluster has only database 0; drop the /<db> from redis_url")
    return cast(aioredis.Redis, RedisCluster.from_url(url, **kwargs))


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
