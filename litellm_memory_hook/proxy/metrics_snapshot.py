"""One proxy process's metric figures in Redis, so that a scrape answered by any process renders
every process's series.

A :class:`Snapshot` is one process's per-process families at a time (epoch milliseconds),
encoded as compact JSON. :func:`write_snapshot` stores it at ``mem:{metrics}:p:<process>``,
indexed by ``mem:{metrics}:processes`` (scored by the publish time), both expiring after
:data:`METRICS_TTL_PERIODS` periods of :data:`METRICS_PUBLISH_S` seconds; :func:`read_snapshots`
reads the other live processes' last ones. The publishing task is
:class:`litellm_memory_hook.proxy.metrics.MetricsPublisher`.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import time
from dataclasses import dataclass

import orjson
import redis.asyncio as aioredis
from prometheus_client.core import Metric

from litellm_memory_hook.store.keys import metrics_index_key, metrics_snapshot_key

#: seconds between two snapshots a proxy process publishes to Redis (the metrics publisher):
#: the most that another process's figures in a scrape lag behind.
METRICS_PUBLISH_S = 5.0
#: a snapshot (and the process index) expires this many publish periods after it was written:
#: a process that stopped is rendered for at most that long (15 s).
METRICS_TTL_PERIODS = 3
#: a scrape renders at most this many other processes (the most recently published first).
MAX_PROCESSES = 1000
#: the version field of a snapshot; a scrape skips snapshots of another version.
SNAPSHOT_VERSION = 1
#: the label that tells the processes' series apart.
PROCESS_LABEL = "process"
_UNSAFE_HOST = re.compile(r"[^A-Za-z0-9_.-]")


def process_id() -> str:
    """A new id of this process for its ``process`` label and snapshot key:
    ``<hostname>:<pid>:<6 random hex digits>`` (the host name cut to 64 characters of
    ``[A-Za-z0-9_.-]``), so a restarted process with the same pid is a new series."""
    host = _UNSAFE_HOST.sub("_", socket.gethostname())[:64] or "host"
    return f"{host}:{os.getpid()}:{secrets.token_hex(3)}"


def wall_ms() -> int:
    """The wall clock, epoch milliseconds."""
    return int(time.time() * 1000)


@dataclass(frozen=True)
class Snapshot:
    """One process's per-process metric families as it last published them.

    Attributes:
        process: the process id (:func:`process_id`).
        at_ms: when it was built, epoch milliseconds (the publisher's clock).
        families: the metric families, samples unlabelled by ``process``.
    """

    process: str
    at_ms: int
    families: list[Metric]

    def encode(self) -> bytes:
        """Compact JSON: ``{"v": 1, "process": str, "at_ms": int, "families": [[name, type,
        help, unit, [[sample name, {label: value}, value], ...]], ...]}``."""
        return orjson.dumps(
            {
                "v": SNAPSHOT_VERSION,
                "process": self.process,
                "at_ms": self.at_ms,
                "families": [
                    [
                        f.name,
                        f.type,
                        f.documentation,
                        f.unit,
                        [[s.name, s.labels, s.value] for s in f.samples],
                    ]
                    for f in self.families
                ],
            }
        )

    @classmethod
    def decode(cls, raw: bytes | str) -> Snapshot | None:
        """The snapshot :meth:`encode` wrote; ``None`` when ``raw`` is not one (another
        version, damaged). A family or sample that cannot be read is skipped."""
        try:
            data = orjson.loads(raw)
            if not isinstance(data, dict) or data.get("v") != SNAPSHOT_VERSION:
                return None
            process, at_ms = str(data["process"]), int(data["at_ms"])
            rows = data["families"]
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None
        families: list[Metric] = []
        for row in rows if isinstance(rows, list) else ():
            try:
                name, typ, documentation, unit, found = row
                family = Metric(str(name), str(documentation), str(typ), str(unit))
                for sample_name, labels, value in found:
                    if value is None:  # orjson writes NaN and infinities as null
                        continue
                    family.add_sample(
                        str(sample_name),
                        {str(k): str(v) for k, v in labels.items()},
                        float(value),
                    )
            except (TypeError, ValueError, AttributeError):
                continue
            families.append(family)
        return cls(process, at_ms, families)


async def write_snapshot(
    redis: aioredis.Redis, prefix: str, snapshot: Snapshot, *, ttl_ms: int
) -> None:
    """Store ``snapshot``: ``SET mem:{metrics}:p:<process>`` with a TTL of ``ttl_ms``, ``ZADD
    mem:{metrics}:processes`` scored by its ``at_ms``, drop index members older than the TTL and
    refresh the index's TTL (one pipeline, one Cluster slot).

    Raises:
        RedisError, RedisClusterException, OSError: Redis failed.
    """
    index = metrics_index_key(prefix)
    at = snapshot.at_ms
    blob = snapshot.encode()
    async with redis.pipeline(transaction=False) as pipe:
        pipe.set(metrics_snapshot_key(prefix, snapshot.process), blob, px=ttl_ms)
        pipe.zadd(index, {snapshot.process: at})
        pipe.zremrangebyscore(index, "-inf", f"({at - ttl_ms}")
        pipe.pexpire(index, ttl_ms)
        await pipe.execute()


async def read_snapshots(
    redis: aioredis.Redis, prefix: str, *, exclude: str, limit: int = MAX_PROCESSES
) -> list[Snapshot]:
    """The last snapshots of the live processes but ``exclude`` (this process), sorted by
    process id: the ``limit`` most recently published members of the index, then one ``MGET``
    of their snapshot keys (one slot). A process whose snapshot expired is left out; so is a
    snapshot that cannot be read.

    Raises:
        RedisError, RedisClusterException, OSError: Redis failed.
    """
    members = await redis.zrange(metrics_index_key(prefix), 0, limit - 1, desc=True)
    ids = [m.decode("utf-8", "replace") if isinstance(m, bytes) else str(m) for m in members]
    ids = [i for i in ids if i != exclude]
    if not ids:
        return []
    blobs = await redis.mget([metrics_snapshot_key(prefix, i) for i in ids])
    found: list[Snapshot] = []
    for process, blob in zip(ids, blobs, strict=True):
        snapshot = None if blob is None else Snapshot.decode(blob)
        if snapshot is not None and snapshot.process == process:
            found.append(snapshot)
    return sorted(found, key=lambda snapshot: snapshot.process)
