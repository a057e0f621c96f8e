"""What ``bench proxy`` reports: each side's throughput, latency and CPU (:class:`SideStats`), the
hook-on/off ratios per client count (:class:`ClientsResult`), the post-call write's cost measured
in process (:class:`WriteCost`), the whole report as JSON and as a table."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from litellm_memory_hook.tools.replay import percentile


@dataclass
class SideStats:
    """One side (hook on or off) at one number of clients."""

    requests: int = 0
    errors: int = 0
    seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    hook_ms: list[float] = field(default_factory=list)
    proxy_cpu_s: float = 0.0
    standin_cpu_s: float = 0.0
    worker_cpu_s: float = 0.0
    round_rps: list[float] = field(default_factory=list)
    #: the proxy's resident memory growth during this side's requests (KiB; after the warm-up
    #: requests, summed over the rounds): what the side leaves behind in the process
    proxy_rss_growth_kb: int = 0

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0

    def as_json(self) -> dict[str, Any]:
        lat = self.latencies_ms
        ok = max(self.requests, 1)
        return {
            "requests": self.requests,
            "errors": self.errors,
            "seconds": round(self.seconds, 3),
            "rps": round(self.rps, 2),
            "p50_ms": round(statistics.median(lat), 2) if lat else None,
            "p95_ms": round(percentile(lat, 95), 2) if lat else None,
            "p99_ms": round(percentile(lat, 99), 2) if lat else None,
            "proxy_cpu_ms_per_request": round(self.proxy_cpu_s * 1000 / ok, 3),
            "standin_cpu_ms_per_request": round(self.standin_cpu_s * 1000 / ok, 3),
            "worker_cpu_ms_per_request": round(self.worker_cpu_s * 1000 / ok, 3),
            "hook_ms_p50": round(statistics.median(self.hook_ms), 3) if self.hook_ms else None,
            "hook_ms_p99": round(percentile(self.hook_ms, 99), 3) if self.hook_ms else None,
            "hook_samples": len(self.hook_ms),
            "round_rps": [round(r, 2) for r in self.round_rps],
            "proxy_rss_growth_kb": self.proxy_rss_growth_kb,
            "proxy_rss_growth_bytes_per_request": round(self.proxy_rss_growth_kb * 1024 / ok, 1),
        }


@dataclass
class ClientsResult:
    """Hook on and off (and the context side, when run) at one number of clients."""

    clients: int
    rounds: int
    on: SideStats
    off: SideStats
    context: SideStats | None = None
    #: the message lists the context side sent: how many, their median messages and characters
    context_request: dict[str, float] | None = None

    @property
    def ratio(self) -> float:
        """Throughput with the hook over throughput without it."""
        return self.on.rps / self.off.rps if self.off.rps else 0.0

    @property
    def round_ratios(self) -> list[float]:
        return [a / b for a, b in zip(self.on.round_rps, self.off.round_rps, strict=True) if b]

    @property
    def cpu_ratio(self) -> float:
        """Proxy CPU per request without the hook over with it (a throughput ratio that the
        machine's other load disturbs less)."""
        return _cpu_ratio(self.off, self.on)

    def as_json(self) -> dict[str, Any]:
        ratios = self.round_ratios
        out: dict[str, Any] = {
            "clients": self.clients,
            "rounds": self.rounds,
            "on": self.on.as_json(),
            "off": self.off.as_json(),
            "ratio": round(self.ratio, 4),
            "round_ratios": [round(r, 4) for r in ratios],
            "ratio_noise": _noise(ratios),
            "cpu_ratio": round(self.cpu_ratio, 4),
        }
        if self.context is not None:
            context = self.context
            floor = [a / b for a, b in zip(context.round_rps, self.off.round_rps, strict=True) if b]
            out["context"] = context.as_json()
            # LiteLLM alone with the hook's messages against one message: the floor under
            # "ratio"; and the hook's own share, with the hook against the same messages.
            out["context_ratio"] = round(context.rps / self.off.rps if self.off.rps else 0.0, 4)
            out["context_ratio_noise"] = _noise(floor)
            out["context_cpu_ratio"] = round(_cpu_ratio(self.off, context), 4)
            out["hook_ratio"] = round(self.on.rps / context.rps if context.rps else 0.0, 4)
            out["hook_cpu_ratio"] = round(_cpu_ratio(context, self.on), 4)
            out["context_request"] = self.context_request
        return out


def _cpu_ratio(fast: SideStats, slow: SideStats) -> float:
    """Proxy CPU per request of ``fast`` over that of ``slow`` (as a throughput ratio)."""
    per_fast = fast.proxy_cpu_s / max(fast.requests, 1)
    per_slow = slow.proxy_cpu_s / max(slow.requests, 1)
    return per_fast / per_slow if per_slow > 0 else 0.0


def _noise(ratios: Sequence[float]) -> dict[str, float | None]:
    return {
        "min": round(min(ratios), 4) if ratios else None,
        "max": round(max(ratios), 4) if ratios else None,
        "stdev": round(statistics.stdev(ratios), 4) if len(ratios) > 1 else None,
    }


@dataclass
class WriteCost:
    """The in-process cost of the hook's two halves on a growing conversation (ms)."""

    samples: int
    pre_call_ms: list[float]
    pre_call_cpu_ms: list[float]
    post_call_ms: list[float]
    write_ms: list[float]
    post_call_cpu_ms: list[float]
    sign_ms: list[float]
    round_trip_ms: list[float] = field(default_factory=list)
    round_trip_cpu_ms: list[float] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        def spread(values: Sequence[float]) -> dict[str, float | None]:
            if not values:
                return {"p50": None, "p99": None}
            return {
                "p50": round(statistics.median(values), 3),
                "p99": round(percentile(values, 99), 3),
            }

        return {
            "samples": self.samples,
            "pre_call_ms": spread(self.pre_call_ms),
            "pre_call_cpu_ms": spread(self.pre_call_cpu_ms),
            "post_call_ms": spread(self.post_call_ms),
            "write_ms": spread(self.write_ms),
            "post_call_cpu_ms": spread(self.post_call_cpu_ms),
            "sign_ms": spread(self.sign_ms),
            "round_trip_ms": spread(self.round_trip_ms),
            "round_trip_cpu_ms": spread(self.round_trip_cpu_ms),
        }


@dataclass
class ProxyBenchReport:
    """Everything one run measured."""

    results: list[ClientsResult]
    write: WriteCost | None
    config: dict[str, Any]
    seconds: float
    extraction_stats: dict[str, int] = field(default_factory=dict)
    #: the profiled phase (:meth:`benchmarks.proxy_profile.ProfileBreakdown.as_json`), if run
    profile: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "results": [r.as_json() for r in self.results],
            "write": self.write.as_json() if self.write else None,
            "extraction_stats": self.extraction_stats,
            "profile": self.profile,
            "seconds": round(self.seconds, 1),
        }


def report_table(report: ProxyBenchReport, title: str) -> Any:
    """A rich table: per number of clients, a row with the hook on, one with it off and (when
    run) one for the context side; the ratio column holds on/off and context/off with the
    spread of the rounds."""
    from rich.table import Table

    table = Table(title=title)
    for column in (
        "clients",
        "side",
        "req/s",
        "ratio to off",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "proxy CPU ms/req",
        "pre-call ms p50/p99",
        "errors",
    ):
        table.add_column(column, justify="right")
    for result in report.results:
        data = result.as_json()
        ratios = {
            "on": (data["ratio"], data["ratio_noise"]),
            "context": (data.get("context_ratio"), data.get("context_ratio_noise")),
        }
        sides = [s for s in ("on", "off", "context") if s in data]
        for side in sides:
            stats = data[side]
            ratio, noise = ratios.get(side, (None, None))
            table.add_row(
                str(result.clients) if side == "on" else "",
                side,
                _fmt(stats["rps"]),
                (
                    f"{ratio:.3f} ({_fmt(noise['min'], '.2f')}-{_fmt(noise['max'], '.2f')})"
                    if ratio is not None and noise is not None
                    else ""
                ),
                _fmt(stats["p50_ms"]),
                _fmt(stats["p95_ms"]),
                _fmt(stats["p99_ms"]),
                _fmt(stats["proxy_cpu_ms_per_request"], ".2f"),
                f"{_fmt(stats['hook_ms_p50'], '.2f')} / {_fmt(stats['hook_ms_p99'], '.2f')}"
                if side == "on"
                else "",
                str(stats["errors"]),
                end_section=side == sides[-1],
            )
    return table


def _fmt(value: object, spec: str = ".1f") -> str:
    return "-" if value is None else format(cast(float, value), spec)


__all__ = ["ClientsResult", "ProxyBenchReport", "SideStats", "WriteCost", "report_table"]
