"""A Prometheus scrape read back: its samples by name and labels, one series' value, the
processes it names."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.proxy.metrics import HookMetrics

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    """Every sample of a scrape: (name, sorted labels) -> value."""
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def by_process(found: Samples, name: str, **labels: str) -> dict[str, float]:
    """The samples of one series by their ``process`` label (``""`` for a sample without one):
    the samples named ``name`` whose other labels are exactly ``labels``."""
    want = tuple(sorted(labels.items()))
    out: dict[str, float] = {}
    for (sample, have), figure in found.items():
        if sample == name and tuple(kv for kv in have if kv[0] != "process") == want:
            out[dict(have).get("process", "")] = figure
    return out


def value(found: Samples, name: str, **labels: str) -> float:
    """One series' value, summed over the ``process`` label (per-process series carry it, the
    Redis figures do not); KeyError when the scrape has no such sample."""
    per_process = by_process(found, name, **labels)
    if not per_process:
        raise KeyError((name, tuple(sorted(labels.items()))))
    return sum(per_process.values())


def processes(found: Samples) -> set[str]:
    """The ``process`` labels of a scrape."""
    return {dict(labels)["process"] for _, labels in found if "process" in dict(labels)}


def hook_is_wired() -> bool:
    """Whether the hook records per-request observations (``hook.metrics``, issue 10 item 4)."""
    return isinstance(getattr(MemoryHook(), "metrics", None), HookMetrics)
