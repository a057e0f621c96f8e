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
  ``memory`` (rebuilt from memory), ``no_user``, ``mode_off``, ``no_new_turn``,
  ``rejected_no_user``, ``rejected_controls``, ``extraction_call``, ``side_request`` (a title or
  tag request of the app, passed through), ``invalid`` (messages the hook cannot rebuild,
  passed through), ``fail_open_error``, ``fail_open_config``, ``fail_open_breaker``;
* ``litellm_memory_fail_open_total{reason}`` (counter): requests passed through unchanged because
  memory failed: ``error``, ``config``, ``breaker`` (Redis failed a moment ago);
* ``litellm_memory_redis_errors_total{source}`` (counter): Redis failures seen by the ``hook``
  (each trips the breaker), the memory ``api`` and the ``metrics`` scrape;
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
* ``litellm_memory_store_up`` (gauge): 1 when the scrape could read Redis.

The per-process figures (requests, layers, hook time, recall, Redis errors of the hook) are this
proxy's own: sum them over replicas. The extraction figures come from ``mem:stats`` and
``mem:due`` in Redis at scrape time and are shared by every replica and worker: every replica
shows the same values, so aggregate them with ``max``, not ``sum``.

Structured log lines: :func:`log_event` writes one JSON object per line through the
``litellm_memory_hook`` logger (``{"event": "memory.rebuilt", "ref": ..., "hook_ms": ...,
"layers": {...}, "recalled": 2}``), and puts the same fields on the record as
``memory_event`` / ``memory_fields`` for JSON log formatters.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client import Counter as PromCounter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from redis.exceptions import RedisClusterException, RedisError

from litellm_memory_hook.core.prompt import LAYER_NAMES
from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.store.queue import ExtractionQueue

logger = logging.getLogger("litellm_memory_hook")

#: ``Content-Type`` of the scrape answer.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: Layers observed per rebuilt request: the system message's layers, then the recent window.
LAYERS: tuple[str, ...] = (*LAYER_NAMES, "window")
LAYER_BUCKETS: tuple[float, ...] = (0, 100, 250, 500, 1000, 2000, 4000, 8000, 16000, 32000)
HOOK_MS_BUCKETS: tuple[float, ...] = (0.25, 0.5, 1, 2, 3, 5, 10, 25, 50, 100, 250, 500, 1000)

#: hook counter -> ``outcome`` label of ``litellm_memory_requests_total``.
REQUEST_OUTCOMES: Mapping[str, str] = {
    "rebuilt": "memory",
    "no_user_passthrough": "no_user",
    "mode_off": "mode_off",
    "no_new_turn": "no_new_turn",
    "rejected_no_user": "rejected_no_user",
    "extraction_calls_passed": "extraction_call",
    "side_requests": "side_request",
    "invalid_passthrough": "invalid",
    "rejected_controls": "rejected_controls",
    "precall_errors": "fail_open_error",
    "config_errors": "fail_open_config",
    "breaker_passthrough": "fail_open_breaker",
}
#: hook counter -> ``reason`` label of ``litellm_memory_fail_open_total``.
FAIL_OPEN_REASONS: Mapping[str, str] = {
    "precall_errors": "error",
    "config_errors": "config",
    "breaker_passthrough": "breaker",
}
#: hook counter -> ``source`` label of ``litellm_memory_redis_errors_total``.
REDIS_ERROR_SOURCES: Mapping[str, str] = {"breaker_trips": "hook", "api_store_errors": "api"}
JOB_OUTCOMES: tuple[str, ...] = (
    "committed",
    "failed",
    "retried",
    "discarded",
    "conflict",
    "nothing_new",
)


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


class _HookCollector(Collector):
    """The hook's counters and the last Redis snapshot, read at collection time."""

    def __init__(self, metrics: HookMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        counts = Counter(self._metrics.counters)
        counts.update(self._metrics.own)
        requests = CounterMetricFamily(
            "litellm_memory_requests",
            "Chat requests to memory-enabled aliases, by outcome (this process).",
            labels=["outcome"],
        )
        for counter, outcome in REQUEST_OUTCOMES.items():
            requests.add_metric([outcome], counts[counter])
        yield requests
        fail_open = CounterMetricFamily(
            "litellm_memory_fail_open",
            "Requests passed through unchanged because memory failed (this process).",
            labels=["reason"],
        )
        for counter, reason in FAIL_OPEN_REASONS.items():
            fail_open.add_metric([reason], counts[counter])
        yield fail_open
        redis_errors = CounterMetricFamily(
            "litellm_memory_redis_errors",
            "Redis failures seen by the hook, the memory API and metrics scrapes (this process).",
            labels=["source"],
        )
        for counter, source in REDIS_ERROR_SOURCES.items():
            redis_errors.add_metric([source], counts[counter])
        redis_errors.add_metric(["metrics"], counts["scrape_store_errors"])
        yield redis_errors
        events = CounterMetricFamily(
            "litellm_memory_hook_events",
            "Every counter of the hook (hook.counters), by name (this process).",
            labels=["event"],
        )
        for name in sorted(self._metrics.counters):
            if not name.startswith("chars_"):  # per-layer sums: see the layer histogram
                events.add_metric([name], self._metrics.counters[name])
        yield events
        yield from self._store_families()

    def _store_families(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "litellm_memory_store_up", "1 when the last scrape could read Redis, else 0."
        )
        stats = self._metrics.store_stats
        up.add_metric([], 0 if stats is None else 1)
        yield up
        if stats is None:
            return
        jobs = CounterMetricFamily(
            "litellm_memory_extraction_jobs",
            "Extraction jobs by outcome (mem:stats: every replica and worker).",
            labels=["outcome"],
        )
        for outcome in JOB_OUTCOMES:
            jobs.add_metric([outcome], stats.get(f"jobs_{outcome}", 0))
        yield jobs
        yield CounterMetricFamily(
            "litellm_memory_extraction_runs",
            "Extraction jobs that called the model (mem:stats jobs_run).",
            value=stats.get("jobs_run", 0),
        )
        dropped = CounterMetricFamily(
            "litellm_memory_extraction_dropped_items",
            "Extracted items the cleaning dropped, by rule (mem:stats dropped_<rule>).",
            labels=["rule"],
        )
        tokens = CounterMetricFamily(
            "litellm_memory_extraction_tokens",
            "Tokens of extraction calls (mem:stats tokens_<kind>).",
            labels=["kind"],
        )
        other = CounterMetricFamily(
            "litellm_memory_extraction_counter",
            "Other mem:stats counters, by name.",
            labels=["counter"],
        )
        known = {f"jobs_{o}" for o in JOB_OUTCOMES} | {"jobs_run", "due", "due_now"}
        for name, value in sorted(stats.items()):
            if name in known:
                continue
            if name.startswith("dropped_"):
                dropped.add_metric([name.removeprefix("dropped_")], value)
            elif name.startswith("tokens_"):
                tokens.add_metric([name.removeprefix("tokens_")], value)
            else:
                other.add_metric([name], value)
        yield from (dropped, tokens, other)
        yield GaugeMetricFamily(
            "litellm_memory_extraction_due_conversations",
            "Conversations in the extraction due set (mem:due).",
            value=stats.get("due", 0),
        )
        yield GaugeMetricFamily(
            "litellm_memory_extraction_overdue_conversations",
            "Conversations in the due set whose due time has come.",
            value=stats.get("due_now", 0),
        )


class HookMetrics:
    """The metrics of one memory hook, in their own registry.

    Args:
        counters: the hook's ``counters`` (read at every scrape, never written here).

    The hook calls :meth:`observe_rebuild` once per rebuilt request; the scrape route calls
    :meth:`refresh` (reads Redis) and then :meth:`render`.
    """

    def __init__(self, counters: Counter[str] | None = None) -> None:
        self.counters: Counter[str] = counters if counters is not None else Counter()
        self.own: Counter[str] = Counter()
        self.store_stats: dict[str, int] | None = None
        self.registry = CollectorRegistry(auto_describe=True)
        self.layer_chars = Histogram(
            "litellm_memory_layer_characters",
            "Characters per layer of each request rebuilt from memory.",
            ["layer"],
            buckets=LAYER_BUCKETS,
            registry=self.registry,
        )
        # The labelled children, looked up once (``labels()`` costs a lock and a dict build per
        # call, eleven times a request).
        self._layer_children = {layer: self.layer_chars.labels(layer) for layer in LAYERS}
        self.hook_ms = Histogram(
            "litellm_memory_hook_duration_milliseconds",
            "Time of the pre-call hook for requests rebuilt from memory, milliseconds.",
            buckets=HOOK_MS_BUCKETS,
            registry=self.registry,
        )
        self.recall_hits = PromCounter(
            "litellm_memory_recall_hits",
            "Requests rebuilt from memory with at least one recalled line.",
            registry=self.registry,
        )
        self.recalled_lines = PromCounter(
            "litellm_memory_recalled_lines",
            "Recalled lines put into requests.",
            registry=self.registry,
        )
        self.registry.register(_HookCollector(self))

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
        """Read the extraction counters and the due set's length from Redis for the next render.

        A failure (a Cluster client that finds no node is one too) is logged, counted
        (``redis_errors{source="metrics"}``) and leaves the Redis figures out of the next render
        (``store_up`` 0); it never raises. ``queue`` ``None`` (the settings are bad, so there is
        no store) leaves them out too.

        Returns:
            Whether Redis could be read.
        """
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        if queue is None:
            self.store_stats = None
            return False
        try:
            stats = await queue.stats()
            stats["due_now"] = int(await queue.redis.zcount(queue.due, "-inf", now))
        except (StoreError, RedisError, RedisClusterException, OSError) as exc:
            self.store_stats = None
            self.own["scrape_store_errors"] += 1
            log_event("metrics_store_error", logging.WARNING, error=str(exc))
            return False
        self.store_stats = stats
        return True

    def render(self) -> bytes:
        """The registry in Prometheus text format."""
        return generate_latest(self.registry)

    def families(self) -> Iterable[Metric]:
        """The collected metric families (tests and the CLI)."""
        return self.registry.collect()


__all__ = [
    "CONTENT_TYPE",
    "LAYERS",
    "HookMetrics",
    "log_event",
]
