"""Extraction worker liveness: every running worker's heartbeat in Redis, and how to read them.

A running extraction worker (the in-proxy task of each proxy process, each ``litellm-memory
worker`` process) writes a heartbeat every ``extraction.heartbeat_s`` seconds from a task of its
own, so a long job (a model call of up to ``extraction.timeout_s``) does not stop it::

    mem:{workers}:w:<worker>   hash   id, kind, host, pid, started_ms, beat_ms, interval_ms,
                                      jobs_done, jobs_failed; PEXPIRE :data:`HEARTBEAT_TTL_BEATS`
                                      heartbeats
    mem:{workers}:beats        zset   worker id -> beat_ms; PEXPIRE :data:`INDEX_KEEP_BEATS`
                                      heartbeats

(one pipeline, one Cluster slot: :func:`write_beat`). A worker that stops cleanly deletes both
entries (:func:`remove_beat`); a killed one's hash expires (Redis's own clock, so clock skew
between hosts does not matter) and its index member is removed by the next beat of another
worker once it is :data:`INDEX_KEEP_BEATS` heartbeats old. A worker is alive while its hash
exists (:func:`read_workers`). ``--once`` runs of ``litellm-memory worker`` (cron) write none:
between runs no worker is alive, and that is what readers report.

Nothing here runs on the chat request path: the writer is the worker's own task, and the
readers are the metrics scrape, ``litellm-memory doctor`` / ``stats`` and the queue route.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.exceptions import RedisClusterException, RedisError
from redis.typing import EncodableT

from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.periodic import Periodic
from litellm_memory_hook.store.errors import RateLimitedLog, classify, explain, fault_key
from litellm_memory_hook.store.keys import due_key, worker_beat_key, workers_index_key

logger = logging.getLogger("litellm_memory_hook")

#: a heartbeat expires this many heartbeat intervals after it was written: a killed worker is
#: reported alive for at most that long (15 s with the default 5 s interval).
HEARTBEAT_TTL_BEATS = 3
#: a beat removes index members whose last beat is older than this many intervals (their hash
#: expired long before; the margin leaves room for clocks that differ between hosts).
INDEX_KEEP_BEATS = 30
#: a read looks at most at this many workers (the most recent beats first).
MAX_WORKERS = 1000
#: a clean stop waits at most this long (seconds) to delete its heartbeat; then it ages out.
REMOVE_TIMEOUT_S = 2.0
#: Redis failures of the heartbeat (logged, never raised to the worker).
REDIS_FAILURES = (RedisError, RedisClusterException, OSError, StoreError)

#: ``kind`` of the worker task inside a proxy process (``extraction.worker_in_proxy``).
KIND_PROXY = "proxy"
#: ``kind`` of a ``litellm-memory worker`` process.
KIND_STANDALONE = "standalone"


def _now_ms() -> int:
    return int(time.time() * 1000)


def ttl_ms(interval_s: float) -> int:
    """How long a heartbeat lives without another (ms): :data:`HEARTBEAT_TTL_BEATS` intervals."""
    return max(1, int(interval_s * 1000 * HEARTBEAT_TTL_BEATS))


@dataclass(frozen=True)
class WorkerBeat:
    """One worker's heartbeat (the fields of its hash).

    Attributes:
        id: the worker id, also its leases' owner (``<host>:<pid>:<random hex>``).
        kind: :data:`KIND_PROXY` or :data:`KIND_STANDALONE`.
        host: the host name; pid: the process id.
        started_ms: when the worker started; beat_ms: this beat (epoch ms, the worker's clock).
        interval_ms: its heartbeat interval (ms).
        jobs_done: jobs it finished (any outcome but failed; a lease held by another worker
            is not a job); jobs_failed: jobs that failed (counted in ``mem:stats`` too).
    """

    id: str
    kind: str
    host: str
    pid: int
    started_ms: int
    beat_ms: int
    interval_ms: int
    jobs_done: int = 0
    jobs_failed: int = 0

    def fields(self) -> dict[str, str | int]:
        """The hash fields written by :func:`write_beat`."""
        return {
            "id": self.id,
            "kind": self.kind,
            "host": self.host,
            "pid": self.pid,
            "started_ms": self.started_ms,
            "beat_ms": self.beat_ms,
            "interval_ms": self.interval_ms,
            "jobs_done": self.jobs_done,
            "jobs_failed": self.jobs_failed,
        }

    @classmethod
    def from_hash(cls, raw: Mapping[bytes | str, bytes | str]) -> WorkerBeat | None:
        """The beat a hash holds; ``None`` when it is empty (expired) or not one of ours."""
        text = {
            (k.decode("utf-8", "replace") if isinstance(k, bytes) else str(k)): (
                v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
            )
            for k, v in raw.items()
        }
        try:
            return cls(
                id=text["id"],
                kind=text.get("kind", ""),
                host=text.get("host", ""),
                pid=int(text.get("pid", "0")),
                started_ms=int(text.get("started_ms", "0")),
                beat_ms=int(text["beat_ms"]),
                interval_ms=int(text.get("interval_ms", "0")),
                jobs_done=int(text.get("jobs_done", "0")),
                jobs_failed=int(text.get("jobs_failed", "0")),
            )
        except (KeyError, ValueError):
            return None

    def age_s(self, now_ms: int) -> float:
        """Seconds since this beat by the reader's clock (never below 0: clocks differ)."""
        return max(0.0, (now_ms - self.beat_ms) / 1000)

    def as_json(self, now_ms: int) -> dict[str, object]:
        """The fields, plus ``age_s`` at ``now_ms`` (``stats --json``, ``doctor``)."""
        return {**self.fields(), "age_s": round(self.age_s(now_ms), 3)}


async def write_beat(redis: aioredis.Redis, prefix: str, beat: WorkerBeat) -> None:
    """Write one heartbeat: the worker's hash with its expiry, its index score, the removal of
    index members :data:`INDEX_KEEP_BEATS` intervals old, the index's expiry (one pipeline
    without a transaction, one slot).

    Raises:
        RedisError, RedisClusterException, OSError: Redis failed.
    """
    life = ttl_ms(beat.interval_ms / 1000)
    keep = max(life, beat.interval_ms * INDEX_KEEP_BEATS)
    index = workers_index_key(prefix)
    key = worker_beat_key(prefix, beat.id)
    async with redis.pipeline(transaction=False) as pipe:
        fields: dict[EncodableT, EncodableT] = {k: v for k, v in beat.fields().items()}
        pipe.hset(key, mapping=fields)
        pipe.pexpire(key, life)
        pipe.zadd(index, {beat.id: beat.beat_ms})
        pipe.zremrangebyscore(index, "-inf", f"({beat.beat_ms - keep}")
        pipe.pexpire(index, keep)  # gone once no worker beat for that long
        await pipe.execute()


async def remove_beat(redis: aioredis.Redis, prefix: str, worker: str) -> None:
    """Delete a stopping worker's heartbeat and index member.

    Raises:
        RedisError, RedisClusterException, OSError: Redis failed.
    """
    async with redis.pipeline(transaction=False) as pipe:
        pipe.delete(worker_beat_key(prefix, worker))
        pipe.zrem(workers_index_key(prefix), worker)
        await pipe.execute()


async def read_workers(
    redis: aioredis.Redis, prefix: str, *, limit: int = MAX_WORKERS
) -> list[WorkerBeat]:
    """The live workers (those whose heartbeat hash has not expired), sorted by id: the
    ``limit`` most recent members of the index, then one pipeline of ``HGETALL`` (one slot).

    Raises:
        RedisError, RedisClusterException, OSError: Redis failed.
    """
    members = await redis.zrange(workers_index_key(prefix), 0, limit - 1, desc=True)
    ids = [m.decode("utf-8", "replace") if isinstance(m, bytes) else str(m) for m in members]
    if not ids:
        return []
    async with redis.pipeline(transaction=False) as pipe:
        for worker in ids:
            pipe.hgetall(worker_beat_key(prefix, worker))
        hashes = await pipe.execute()
    found = [WorkerBeat.from_hash(raw) for raw in hashes if raw]
    return sorted((b for b in found if b is not None), key=lambda b: b.id)


@dataclass(frozen=True)
class WorkerHealth:
    """The extraction workers and the queue they serve, as one reader saw them.

    Attributes:
        workers: the live workers (:func:`read_workers`).
        due: conversations in the due set; overdue: those whose due time has come.
        now_ms: the reader's clock when it read them (epoch ms).
    """

    workers: Sequence[WorkerBeat]
    due: int
    overdue: int
    now_ms: int

    @property
    def oldest_beat_age_s(self) -> float | None:
        """Seconds since the oldest live heartbeat (``None``: no worker alive). Normally under
        one interval; near :data:`HEARTBEAT_TTL_BEATS` intervals, a worker is stalled."""
        if not self.workers:
            return None
        return max(w.age_s(self.now_ms) for w in self.workers)

    @property
    def stranded(self) -> bool:
        """Jobs are queued and no worker is alive: they wait until one runs."""
        return self.due > 0 and not self.workers

    def kinds(self) -> str:
        """The live workers by kind, e.g. ``2 proxy, 1 standalone``."""
        counts: dict[str, int] = {}
        for worker in self.workers:
            counts[worker.kind or "unknown"] = counts.get(worker.kind or "unknown", 0) + 1
        return ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))


async def worker_health(
    redis: aioredis.Redis, prefix: str, *, now_ms: int | None = None
) -> WorkerHealth:
    """Read the live workers and the due set's length and overdue count.

    Raises:
        StoreError: Redis failed.
    """
    now = now_ms if now_ms is not None else _now_ms()
    due = due_key(prefix)
    try:
        workers = await read_workers(redis, prefix)
        async with redis.pipeline(transaction=False) as pipe:
            pipe.zcard(due)
            pipe.zcount(due, "-inf", now)
            queued, overdue = await pipe.execute()
    except (RedisError, RedisClusterException, OSError) as exc:
        raise StoreError(f"worker heartbeats: {exc}") from exc
    return WorkerHealth(workers, int(queued), int(overdue), now)


class Heartbeat:
    """The task that writes one worker's heartbeat every ``interval_s`` seconds, from its
    start to :meth:`stop` (which deletes it).

    Args:
        redis: the worker's asyncio Redis (or Cluster) client.
        prefix: the key prefix (``mem``).
        beat: the worker's fields at a time (epoch ms) -> the beat to write.
        interval_s: seconds between beats (``extraction.heartbeat_s``).
        refusal_log_s: a refusal is said at most once per this many seconds.

    Redis failures are logged when they start and when they end, never raised; a refusal
    (:mod:`litellm_memory_hook.store.errors`) is said by its kind once per ``refusal_log_s``.
    """

    def __init__(
        self,
        redis: aioredis.Redis,
        prefix: str,
        beat: Callable[[int], WorkerBeat],
        interval_s: float,
        refusal_log_s: float = 60.0,
    ) -> None:
        self.redis = redis
        self.prefix = prefix
        self.beat = beat
        self.interval_s = interval_s
        self._periodic = Periodic(
            self.beat_once, interval_s, name="litellm-memory-worker-heartbeat"
        )
        self._failing = False
        self._refusals = RateLimitedLog(refusal_log_s)

    @property
    def running(self) -> bool:
        """Whether the task runs."""
        return self._periodic.running

    def start(self) -> None:
        """Start beating (once), on the running event loop: the first beat is now."""
        self._periodic.start()

    async def beat_once(self) -> bool:
        """Write one heartbeat now; False when Redis failed (logged once per outage)."""
        beat = self.beat(_now_ms())
        try:
            await write_beat(self.redis, self.prefix, beat)
        except REDIS_FAILURES as exc:
            kind = classify(exc)
            if kind.said:
                # a refusal (a missing ACL permission, the memory limit): said with what to
                # change, once per period for as long as it lasts
                self._refusals.emit(
                    f"heartbeat:{fault_key(kind, exc)}",
                    logging.ERROR,
                    f"memory worker {beat.id}: heartbeat refused ({kind.value}): "
                    f"{explain(kind, exc, prefix=self.prefix)}",
                )
            elif not self._failing:
                logger.warning("memory worker %s: heartbeat failed: %s", beat.id, exc)
            self._failing = True
            return False
        if self._failing:
            logger.warning("memory worker %s: heartbeat written again", beat.id)
        self._failing = False
        return True

    async def stop(self) -> None:
        """Stop beating after the beat in flight (:class:`~litellm_memory_hook.periodic.
        Periodic`) and delete the heartbeat (at most :data:`REMOVE_TIMEOUT_S` seconds; when
        Redis does not answer, it expires on its own). Nothing happens when it was never
        started."""
        if not await self._periodic.stop():
            return
        worker = self.beat(_now_ms()).id
        try:
            async with asyncio.timeout(REMOVE_TIMEOUT_S):
                await remove_beat(self.redis, self.prefix, worker)
        except (*REDIS_FAILURES, TimeoutError) as exc:
            logger.warning("memory worker %s: heartbeat not deleted (expires): %s", worker, exc)


__all__ = [
    "HEARTBEAT_TTL_BEATS",
    "KIND_PROXY",
    "KIND_STANDALONE",
    "Heartbeat",
    "WorkerBeat",
    "WorkerHealth",
    "read_workers",
    "remove_beat",
    "ttl_ms",
    "worker_health",
    "write_beat",
]
