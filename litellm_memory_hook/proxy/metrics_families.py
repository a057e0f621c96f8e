"""The Prometheus families a scrape renders, and the hook counters behind their labels.

Two collectors: :class:`HookCollector` turns the hook's counters (``hook.counters``, plus the
metrics code's own) into the per-process counter families (requests by outcome, fail-opens by
reason, Redis errors by source, refusals by kind, every hook event); :class:`ScrapeCollector`
renders every live process's per-process families, each sample labelled ``process``, then the
figures read from Redis at scrape time (``mem:stats``, ``mem:due``, the worker heartbeats; no
``process`` label). The metric names and what they count: :mod:`litellm_memory_hook.proxy.metrics`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from litellm_memory_hook.proxy.metrics_snapshot import PROCESS_LABEL
from litellm_memory_hook.store.errors import FAULT_KINDS

if TYPE_CHECKING:
    from litellm_memory_hook.proxy.metrics import HookMetrics

#: hook counter -> ``outcome`` label of ``litellm_memory_requests_total``.
REQUEST_OUTCOMES: Mapping[str, str] = {
    "rebuilt": "memory",
    "no_user_passthrough": "no_user",
    "no_tenant_passthrough": "no_tenant",
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
#: ``kind`` labels of ``litellm_memory_redis_refusals_total`` (hook counter
#: ``redis_refused_<kind>``).
REFUSAL_KINDS: tuple[str, ...] = tuple(kind.value for kind in FAULT_KINDS if kind.said)
JOB_OUTCOMES: tuple[str, ...] = (
    "committed",
    "failed",
    "retried",
    "discarded",
    "conflict",
    "nothing_new",
)
#: ``mem:stats`` counters of the memory-set guard, rendered (0 until counted) as
#: ``litellm_memory_extraction_counter_total{counter}``: removals an extraction reply asked for
#: and was refused (over the per-job bound, or left out of a list), new summaries refused
#: (instruction-like, or losing most of the old one's facts), memories restored from a set's
#: history (:mod:`litellm_memory_hook.extraction.changes`,
#: :mod:`litellm_memory_hook.store.memory_history`).
GUARD_COUNTERS: tuple[str, ...] = ("deletes_refused", "summaries_refused", "memories_restored")


class HookCollector(Collector):
    """The hook's counters and the last Redis snapshot, read at collection time."""

    def __init__(self, metrics: HookMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        counts = Counter(self._metrics.counters)
        counts.update(self._metrics.own)
        requests = CounterMetricFamily(
            "litellm_memory_requests",
            "Chat requests to memory-enabled aliases, by outcome (per process).",
            labels=["outcome"],
        )
        for counter, outcome in REQUEST_OUTCOMES.items():
            requests.add_metric([outcome], counts[counter])
        yield requests
        fail_open = CounterMetricFamily(
            "litellm_memory_fail_open",
            "Requests passed through unchanged because memory failed (per process).",
            labels=["reason"],
        )
        for counter, reason in FAIL_OPEN_REASONS.items():
            fail_open.add_metric([reason], counts[counter])
        yield fail_open
        redis_errors = CounterMetricFamily(
            "litellm_memory_redis_errors",
            "Redis failures of the hook, the memory API and the metrics scrape and publisher "
            "(per process).",
            labels=["source"],
        )
        for counter, source in REDIS_ERROR_SOURCES.items():
            redis_errors.add_metric([source], counts[counter])
        redis_errors.add_metric(
            ["metrics"], counts["scrape_store_errors"] + counts["publish_store_errors"]
        )
        yield redis_errors
        refusals = CounterMetricFamily(
            "litellm_memory_redis_refusals",
            "Writes Redis refused, by kind: a missing ACL permission, the memory limit, a key "
            "of another type ... (per process).",
            labels=["kind"],
        )
        for kind in REFUSAL_KINDS:
            refusals.add_metric([kind], counts[f"redis_refused_{kind}"])
        yield refusals
        events = CounterMetricFamily(
            "litellm_memory_hook_events",
            "Every counter of the hook (hook.counters), by name (per process).",
            labels=["event"],
        )
        for name in sorted(self._metrics.counters):
            if not name.startswith("chars_"):  # per-layer sums: see the layer histogram
                events.add_metric([name], self._metrics.counters[name])
        yield events


class ScrapeCollector(Collector):
    """What a scrape renders: the per-process families of this process (as the scrape's
    :meth:`HookMetrics.refresh` published them, else live) and of every other live process
    (their last snapshots, read by the same refresh), each sample labelled ``process``; then the
    figures read from Redis (no ``process`` label)."""

    def __init__(self, metrics: HookMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        metrics = self._metrics
        merged: dict[str, Metric] = {}
        published = metrics.published
        own = published.families if published is not None else metrics.local_families()
        merge(merged, own, metrics.process)
        for peer in metrics.peers:
            if peer.process != metrics.process:
                merge(merged, peer.families, peer.process)
        yield from merged.values()
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
        for name, value in sorted({**dict.fromkeys(GUARD_COUNTERS, 0), **stats}.items()):
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
        workers = self._metrics.workers
        yield GaugeMetricFamily(
            "litellm_memory_extraction_workers",
            "Extraction workers alive (a heartbeat in mem:{workers}): in-proxy and standalone.",
            value=len(workers),
        )
        if workers:
            now = self._metrics.store_read_ms
            yield GaugeMetricFamily(
                "litellm_memory_extraction_worker_heartbeat_age_seconds",
                "Seconds since the oldest live extraction worker heartbeat.",
                value=max(w.age_s(now) for w in workers),
            )


def merge(merged: dict[str, Metric], families: Iterable[Metric], process: str) -> None:
    """Add the samples of ``families`` to the families of ``merged`` (by name; the first
    family of a name gives its type and help), each labelled ``process``."""
    for family in families:
        out = merged.get(family.name)
        if out is None:
            out = merged[family.name] = Metric(
                family.name, family.documentation, family.type, family.unit
            )
        for sample in family.samples:
            labels = {**sample.labels, PROCESS_LABEL: process}
            out.add_sample(sample.name, labels, sample.value, sample.timestamp)
