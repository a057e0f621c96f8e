"""Prometheus metrics of the memory hook, and its structured log lines.

Served by the proxy at ``GET /memory/metrics`` (Prometheus text format; the route is in
:mod:`litellm_memory_hook.proxy.ui`, mounted with the memory API). It needs a proxy-admin key
(the master key, or a key with the ``proxy_admin`` / ``proxy_admin_viewer`` role): the figures
cover every tenant. Prometheus sends the key as a bearer token::

    scrape_configs:
      - job_name: litellm-memory
        metrics_path: /memory/metrics
        authorization: {type: Bearer, credentials: sk-memory-demo}
        static_configs: [{targets: ["127.0.0.1:4000"]}]

Every metric lives in the hook's own :class:`~prometheus_client.CollectorRegistry` (never the
global one, so LiteLLM's own Prometheus integration and a second hook in tests stay apart):

* ``litellm_memory_requests_total{outcome}`` (counter): chat requests to memory-enabled aliases:
  ``memory`` (rebuilt from memory), ``no_user``, ``no_tenant`` (an authentication with no team,
  user or key id: no memory), ``mode_off``, ``no_new_turn``,
  ``rejected_no_user``, ``rejected_controls``, ``extraction_call``, ``side_request`` (a title or
  tag request of the app, passed through), ``invalid`` (messages the hook cannot rebuild,
  passed through), ``fail_open_error``, ``fail_open_config``, ``fail_open_breaker``;
* ``litellm_memory_fail_open_total{reason}`` (counter): requests passed through unchanged because
  memory failed: ``error``, ``config``, ``breaker`` (Redis failed a moment ago);
* ``litellm_memory_redis_errors_total{source}`` (counter): Redis failures seen by the ``hook``
  (each trips the breaker), the memory ``api`` and the ``metrics`` scrape and publisher;
* ``litellm_memory_redis_refusals_total{kind}`` (counter): writes Redis refused, by kind
  (``noperm``: the Redis user lacks a command or key, ``noscript``, ``oom``: the memory limit,
  ``wrongtype``: a key of another type, ``script``, ``refused``, ``error``: our own code), see
  :mod:`litellm_memory_hook.store.errors`; each is also said in one log line per period;
* ``litellm_memory_hook_events_total{event}`` (counter): every counter of ``hook.counters``
  (``turns_stored``, ``write_failures``, ``writes_lost``, ``streams_cut``,
  ``surrogate_requests`` (rebuilt requests whose messages hold a lone surrogate, stored with
  U+FFFD in its place) ...);
* ``litellm_memory_layer_characters{layer}`` (histogram): characters per layer of each rebuilt
  request (``rules`` ... ``reminder``, and ``window``);
* ``litellm_memory_hook_duration_milliseconds`` (histogram): the pre-call hook's time;
* ``litellm_memory_recall_hits_total`` (counter): rebuilt requests with a recalled line;
  ``litellm_memory_recalled_lines_total`` (counter): recalled lines;
* ``litellm_memory_extraction_jobs_total{outcome}`` (counter): extraction jobs by outcome
  (``committed``, ``failed``, ``retried``, ``discarded``, ``conflict``, ``nothing_new``);
  ``litellm_memory_extraction_runs_total``: jobs that called the model;
  ``litellm_memory_extraction_dropped_items_total{rule}``,
  ``litellm_memory_extraction_tokens_total{kind}``,
  ``litellm_memory_extraction_counter_total{counter}`` (any other ``mem:stats`` counter);
* ``litellm_memory_extraction_due_conversations`` and
  ``litellm_memory_extraction_overdue_conversations`` (gauges): conversations in the due set,
  and those whose time has come;
* ``litellm_memory_extraction_workers`` (gauge): extraction workers alive (a heartbeat in
  ``mem:{workers}``, :mod:`litellm_memory_hook.store.workers`): in-proxy tasks and
  ``litellm-memory worker`` processes; 0 with ``..._due_conversations`` above 0 means the queued
  jobs wait until a worker runs;
  ``litellm_memory_extraction_worker_heartbeat_age_seconds`` (gauge, only while one is alive):
  seconds since the oldest live heartbeat (normally under ``extraction.heartbeat_s``; near three
  intervals, a worker's event loop is stalled);
* ``litellm_memory_store_up`` (gauge): 1 when the scrape could read Redis.

The per-process figures (requests, fail-opens, Redis errors, hook events, layers, hook time,
recall) are counted by each proxy process (each uvicorn worker of ``--num_workers N``, each
replica). Every process publishes a snapshot of them to Redis (:class:`MetricsPublisher`, every
:data:`METRICS_PUBLISH_S` seconds and at shutdown; ``mem:{metrics}:p:<process>``, indexed by
``mem:{metrics}:processes``, both expiring after :data:`METRICS_TTL_PERIODS` periods), and a
scrape, whichever process answers it, renders the series of every live process, each with a
``process`` label (``<hostname>:<pid>:<random>``, see :func:`process_id`): its own live figures
(published before they are rendered) and the others' last snapshots (at most
:data:`METRICS_PUBLISH_S` seconds old). So a series never goes down, whichever process answers;
a process that stops is no longer rendered once its snapshot expires; aggregate with
``sum by (outcome) (rate(litellm_memory_requests_total[5m]))``. When Redis cannot be read, a
scrape renders the answering process's series only. Replicas on one Redis share the snapshots,
so every replica's scrape holds every process: scrape one target, or deduplicate with
``max by (process, ...)`` before summing. The extraction figures come from
``mem:stats`` and ``mem:due`` in Redis at scrape time and are shared by every replica and worker:
they carry no ``process`` label, every replica shows the same values, so aggregate them with
``max``, not ``sum``.

The families a scrape renders are built in :mod:`litellm_memory_hook.proxy.metrics_families`;
snapshots, their encoding and their keys in :mod:`litellm_memory_hook.proxy.metrics_snapshot`.

Structured log lines: :func:`log_event` writes one JSON object per line through the
``litellm_memory_hook`` logger (``{"event": "memory.rebuilt", "ref": ..., "hook_ms": ...,
"layers": {...}, "recalled": 2}``), and puts the same fields on the record as
``memory_event`` / ``memory_fields`` for JSON log formatters.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import redis.asyncio as aioredis
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client import Counter as PromCounter
from prometheus_client.core import Metric
from redis.exceptions import RedisClusterException, RedisError

from litellm_memory_hook.core.prompt import LAYER_NAMES
from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.periodic import Periodic
from litellm_memory_hook.proxy.metrics_families import HookCollector, ScrapeCollector
from litellm_memory_hook.proxy.metrics_snapshot import (
    MAX_PROCESSES,
    METRICS_PUBLISH_S,
    METRICS_TTL_PERIODS,
    PROCESS_LABEL,
    Snapshot,
    process_id,
    read_snapshots,
    wall_ms,
    write_snapshot,
)
from litellm_memory_hook.store.queue import ExtractionQueue
from litellm_memory_hook.store.workers import WorkerBeat, read_workers

logger = logging.getLogger("litellm_memory_hook")

#: ``Content-Type`` of the scrape answer.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: Redis failures of the metrics code (never raised to a scrape or a request).
REDIS_FAILURES = (StoreError, RedisError, RedisClusterException, OSError)

#: Layers observed per rebuilt request: the system message's layers, then the recent window.
LAYERS: tuple[str, ...] = (*LAYER_NAMES, "window")
LAYER_BUCKETS: tuple[float, ...] = (0, 100, 250, 500, 1000, 2000, 4000, 8000, 16000, 32000)
HOOK_MS_BUCKETS: tuple[float, ...] = (0.25, 0.5, 1, 2, 3, 5, 10, 25, 50, 100, 250, 500, 1000)


def log_event(event: str, level: int = logging.INFO, **fields: Any) -> None:
    """One structured log line through the ``litellm_memory_hook`` logger.

    The message is a JSON object ``{"event": "memory.<event>", **fields}``; the record also
    carries ``memory_event`` and ``memory_fields`` for formatters that emit JSON themselves.
    Nothing is formatted when the level is disabled.

    Args:
        event: a short name (``rebuilt``, ``fail_open``, ...); logged as ``memory.<event>``.
        level: a :mod:`logging` level.
        **fields: JSON-serialisable values (others are logged as their ``str``).
    """
    if not logger.isEnabledFor(level):
        return
    name = f"memory.{event}"
    line = json.dumps(
        {"event": name, **fields}, ensure_ascii=False, separators=(",", ":"), default=str
    )
    logger.log(level, "%s", line, extra={"memory_event": name, "memory_fields": fields})


class HookMetrics:
    """The metrics of one memory hook (one proxy process), in their own registries.

    Args:
        counters: the hook's ``counters`` (read at every scrape and publish, never written
            here).

    The hook calls :meth:`observe_rebuild` once per rebuilt request; a :class:`MetricsPublisher`
    calls :meth:`publish` every :data:`METRICS_PUBLISH_S` seconds; the scrape route calls
    :meth:`refresh` (publishes, then reads Redis) and then renders :attr:`registry`.

    Attributes:
        process: this process's id (:func:`process_id`), its ``process`` label.
        registry: what a scrape renders (every live process's series, then the Redis figures).
        peers: the other processes' snapshots read by the last :meth:`refresh`.
        workers: the live extraction workers' heartbeats read by the last :meth:`refresh`
            (at ``store_read_ms``, epoch ms); empty when Redis could not be read.
        published: the snapshot the last :meth:`refresh` published, rendered as this process's
            figures (``None``: it published none, this process's live figures are rendered).
    """

    def __init__(self, counters: Counter[str] | None = None) -> None:
        self.counters: Counter[str] = counters if counters is not None else Counter()
        self.own: Counter[str] = Counter()
        self.store_stats: dict[str, int] | None = None
        self.workers: list[WorkerBeat] = []
        self.store_read_ms = 0
        self.process = process_id()
        self.peers: list[Snapshot] = []
        self.published: Snapshot | None = None
        self._publish_lock = asyncio.Lock()
        self._publish_failing = False
        # This process's own figures, unlabelled (what a snapshot holds).
        self._local = CollectorRegistry(auto_describe=True)
        self.layer_chars = Histogram(
            "litellm_memory_layer_characters",
            "Characters per layer of each request rebuilt from memory.",
            ["layer"],
            buckets=LAYER_BUCKETS,
            registry=self._local,
        )
        # The labelled children, looked up once (``labels()`` costs a lock and a dict build per
        # call, eleven times a request).
        self._layer_children = {layer: self.layer_chars.labels(layer) for layer in LAYERS}
        self.hook_ms = Histogram(
            "litellm_memory_hook_duration_milliseconds",
            "Time of the pre-call hook for requests rebuilt from memory, milliseconds.",
            buckets=HOOK_MS_BUCKETS,
            registry=self._local,
        )
        self.recall_hits = PromCounter(
            "litellm_memory_recall_hits",
            "Requests rebuilt from memory with at least one recalled line.",
            registry=self._local,
        )
        self.recalled_lines = PromCounter(
            "litellm_memory_recalled_lines",
            "Recalled lines put into requests.",
            registry=self._local,
        )
        self._local.register(HookCollector(self))
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(ScrapeCollector(self))

    def observe_rebuild(
        self, ref: str, layer_chars: Mapping[str, int], hook_ms: float, *, recalled: int
    ) -> None:
        """Record one request rebuilt from memory and log it (debug level, structured).

        Args:
            ref: the conversation's reference (``tenant:user:conversation``, key form).
            layer_chars: characters per layer (``PreparedRequest.layer_chars``).
            hook_ms: the pre-call hook's time so far, milliseconds.
            recalled: recalled lines in the request.
        """
        children = self._layer_children
        for layer, chars in layer_chars.items():
            child = children.get(layer)
            if child is None:
                child = children[layer] = self.layer_chars.labels(layer)
            child.observe(chars)
        self.hook_ms.observe(hook_ms)
        if recalled > 0:
            self.recall_hits.inc()
            self.recalled_lines.inc(recalled)
        log_event(
            "rebuilt",
            logging.DEBUG,
            ref=ref,
            hook_ms=round(hook_ms, 3),
            layers=dict(layer_chars),
            recalled=recalled,
        )

    async def refresh(self, queue: ExtractionQueue | None, *, now_ms: int | None = None) -> bool:
        """Prepare the next render: read the extraction counters, the due set's length and the
        live extraction workers' heartbeats from Redis, publish this process's snapshot and read
        the other processes' snapshots. The render shows this process's figures as just
        published (not live: requests served while the other snapshots are read are left to the
        next scrape), so any later scrape, answered by whichever process, renders at least as
        much: no series goes down.

        A failure (a Cluster client that finds no node is one too) is logged, counted
        (``redis_errors{source="metrics"}``) and never raised: when the counters cannot be read,
        the next render has no Redis figures (``store_up`` 0) and this process's series only;
        when only the snapshots cannot be read, this process's series only. ``queue`` ``None``
        (the settings are bad, so there is no store) is the same as Redis down, uncounted.

        Args:
            queue: the extraction queue (its Redis client and key prefix), or ``None``.
            now_ms: the time, epoch milliseconds (default: the wall clock).

        Returns:
            Whether Redis could be read (counters and snapshots).
        """
        now = now_ms if now_ms is not None else wall_ms()
        if queue is None:
            self.store_stats = None
            self.workers = []
            self.peers = []
            self.published = None
            return False
        try:
            stats = await queue.stats()
            stats["due_now"] = int(await queue.redis.zcount(queue.due, "-inf", now))
            workers = await read_workers(queue.redis, queue.prefix)
        except REDIS_FAILURES as exc:
            self.store_stats = None
            self.workers = []
            self.peers = []
            self.published = None
            self._scrape_failed(exc)
            return False
        self.store_stats = stats
        self.workers, self.store_read_ms = workers, now
        self.published = await self.publish(queue.redis, queue.prefix, now_ms=now)
        try:
            self.peers = await self.read_peers(queue.redis, queue.prefix)
        except REDIS_FAILURES as exc:
            self.peers = []
            self._scrape_failed(exc)
            return False
        return True

    def _scrape_failed(self, exc: BaseException) -> None:
        """Count (``redis_errors{source="metrics"}``) and log a Redis failure of a scrape."""
        self.own["scrape_store_errors"] += 1
        log_event("metrics_store_error", logging.WARNING, error=str(exc))

    def snapshot(self, *, now_ms: int | None = None) -> Snapshot:
        """This process's per-process families as they are now (``at_ms``: ``now_ms``, epoch
        milliseconds, default the wall clock)."""
        at = now_ms if now_ms is not None else wall_ms()
        return Snapshot(self.process, at, list(self.local_families()))

    async def publish(
        self,
        redis: aioredis.Redis,
        prefix: str,
        *,
        now_ms: int | None = None,
        ttl_s: float = METRICS_PUBLISH_S * METRICS_TTL_PERIODS,
    ) -> Snapshot | None:
        """Write this process's snapshot to Redis: ``SET mem:{metrics}:p:<process>`` with a TTL,
        ``ZADD mem:{metrics}:processes`` scored by ``now_ms``, drop index members older than the
        TTL and refresh the index's TTL (one pipeline, one Cluster slot).

        Publishes are serialised, so a snapshot never overwrites a newer one of this process.
        A failure is counted (``redis_errors{source="metrics"}``), logged when it starts and
        when it ends (not every period) and never raised.

        Args:
            redis: the hook's asyncio Redis (or Cluster) client.
            prefix: the key prefix (``mem``).
            now_ms: the publish time, epoch milliseconds (default: the wall clock).
            ttl_s: seconds until the snapshot and the index expire without another publish.

        Returns:
            The snapshot written; ``None`` when Redis failed.
        """
        ttl_ms = max(1, int(ttl_s * 1000))
        async with self._publish_lock:
            at = now_ms if now_ms is not None else wall_ms()
            snapshot = self.snapshot(now_ms=at)
            try:
                await write_snapshot(redis, prefix, snapshot, ttl_ms=ttl_ms)
            except REDIS_FAILURES as exc:
                self.own["publish_store_errors"] += 1
                if not self._publish_failing:
                    log_event("metrics_publish_error", logging.WARNING, error=str(exc))
                self._publish_failing = True
                return None
            if self._publish_failing:
                log_event("metrics_publish_recovered")
            self._publish_failing = False
            return snapshot

    async def read_peers(
        self, redis: aioredis.Redis, prefix: str, *, limit: int = MAX_PROCESSES
    ) -> list[Snapshot]:
        """The last snapshots of the other live processes (this process's own is left out),
        sorted by process id: the ``limit`` most recently published members of the index,
        then one ``MGET`` of their snapshot keys (one slot). A process whose snapshot expired
        is left out; so is a snapshot that cannot be read.

        Raises:
            RedisError, RedisClusterException, OSError: Redis failed.
        """
        return await read_snapshots(redis, prefix, exclude=self.process, limit=limit)

    def render(self) -> bytes:
        """The registry in Prometheus text format."""
        return generate_latest(self.registry)

    def families(self) -> Iterable[Metric]:
        """The collected metric families of a scrape (tests and the CLI)."""
        return self.registry.collect()

    def local_families(self) -> Iterable[Metric]:
        """This process's per-process families, live and without the ``process`` label (what
        a snapshot holds)."""
        return self._local.collect()


class MetricsPublisher:
    """The background task that publishes a process's snapshot to Redis every ``period_s``
    seconds (:meth:`HookMetrics.publish`, TTL :data:`METRICS_TTL_PERIODS` periods), started
    with the proxy process and stopped at its shutdown with one last publish.

    Args:
        metrics: the process's hook metrics.
        redis: the hook's asyncio Redis (or Cluster) client.
        prefix: the key prefix (``mem``).
        period_s: seconds between publishes (:data:`METRICS_PUBLISH_S`).
    """

    def __init__(
        self,
        metrics: HookMetrics,
        redis: aioredis.Redis,
        prefix: str,
        *,
        period_s: float = METRICS_PUBLISH_S,
    ) -> None:
        self.metrics = metrics
        self.redis = redis
        self.prefix = prefix
        self.period_s = period_s
        self._periodic = Periodic(self._publish, period_s, name="litellm-memory-metrics-publisher")

    @property
    def ttl_s(self) -> float:
        """Seconds a snapshot lives without another publish."""
        return self.period_s * METRICS_TTL_PERIODS

    @property
    def running(self) -> bool:
        """Whether the task runs."""
        return self._periodic.running

    def start(self) -> None:
        """Start publishing (once), on the running event loop: the first publish is now."""
        self._periodic.start()

    async def _publish(self) -> None:
        await self.metrics.publish(self.redis, self.prefix, ttl_s=self.ttl_s)

    async def stop(self) -> None:
        """Stop after the publish in flight (:class:`~litellm_memory_hook.periodic.Periodic`)
        and publish once more: the process's last figures stay readable until their snapshot
        expires (:attr:`ttl_s` seconds). Nothing happens when it was not started."""
        if await self._periodic.stop():
            await self._publish()


__all__ = [
    "CONTENT_TYPE",
    "LAYERS",
    "METRICS_PUBLISH_S",
    "METRICS_TTL_PERIODS",
    "PROCESS_LABEL",
    "HookMetrics",
    "MetricsPublisher",
    "Snapshot",
    "log_event",
    "process_id",
]
