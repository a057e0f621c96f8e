"""``bench proxy`` in its short mode (``--requests 40``): it runs end to end through a real
proxy and the stand-in, and writes every field of its JSON report. Speed is not checked here
(the machine is shared); the long mode is run by hand."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import redis
import yaml

from benchmarks.proxy import PREFIX_STEM
from benchmarks.proxy_talk import conversation_lines
from tests.support.paths import REPO
from tests.support.redis_url import real_redis_url

SIDE_FIELDS = {
    "requests",
    "errors",
    "seconds",
    "rps",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "proxy_cpu_ms_per_request",
    "standin_cpu_ms_per_request",
    "worker_cpu_ms_per_request",
    "hook_ms_p50",
    "hook_ms_p99",
    "hook_samples",
    "round_rps",
    "proxy_rss_growth_kb",
    "proxy_rss_growth_bytes_per_request",
}


def test_conversation_lines_are_deterministic_and_realistic() -> None:
    lines = conversation_lines(3, 50)
    assert lines == conversation_lines(3, 50)
    assert lines != conversation_lines(4, 50)
    assert all(40 <= len(line) <= 400 for line in lines)
    assert len(set(lines)) > 40


def test_bench_proxy_short_mode_writes_the_report(tmp_path: Path) -> None:
    out = tmp_path / "proxy.json"
    command = [
        sys.executable,
        "-m",
        "litellm_memory_hook",
        "bench",
        "proxy",
        "--clients",
        "1,32",
        "--requests",
        "40",
        "--history",
        "20",
        "--redis-url",
        real_redis_url(),
        "--log-dir",
        str(tmp_path / "logs"),
        "--json",
        str(out),
    ]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "on/off" in done.stdout
    report = json.loads(out.read_text())

    assert report["config"]["clients"] == [1, 32] and report["config"]["context_side"] is True
    assert "context" in done.stdout and "on/context" in done.stdout
    assert report["config"]["requests_per_side"] == 40
    assert [r["clients"] for r in report["results"]] == [1, 32]
    for result in report["results"]:
        assert result["rounds"] >= 2
        for side in ("on", "off"):
            stats = result[side]
            assert set(stats) == SIDE_FIELDS
            assert stats["requests"] == 40
            assert stats["errors"] == 0
            assert stats["rps"] > 0
            assert 0 < stats["p50_ms"] <= stats["p95_ms"] <= stats["p99_ms"]
            assert stats["proxy_cpu_ms_per_request"] >= 0
            assert isinstance(stats["proxy_rss_growth_kb"], int)
            assert len(stats["round_rps"]) == result["rounds"]
        # the debug header is answered with the pre-call time only where the hook ran
        assert result["on"]["hook_samples"] > 0 and result["on"]["hook_ms_p50"] > 0
        assert result["off"]["hook_samples"] == 0
        assert result["ratio"] == pytest.approx(result["on"]["rps"] / result["off"]["rps"], 0.01)
        assert len(result["round_ratios"]) == result["rounds"]
        assert set(result["ratio_noise"]) == {"min", "max", "stdev"}
        assert result["cpu_ratio"] > 0
        # the context side: the plain alias sent the messages the hook built (the system
        # message and a window of the 20 seeded messages and more), cycled
        context = result["context"]
        assert set(context) == SIDE_FIELDS
        assert (context["requests"], context["errors"], context["hook_samples"]) == (40, 0, 0)
        assert len(context["round_rps"]) == result["rounds"]
        shape = result["context_request"]
        assert shape["lists"] == result["clients"]  # the warm-up's requests, one per client
        assert shape["messages_p50"] >= 21 and shape["chars_p50"] > 1000, shape
        assert result["context_ratio"] == pytest.approx(context["rps"] / result["off"]["rps"], 0.01)
        assert result["hook_ratio"] == pytest.approx(result["on"]["rps"] / context["rps"], 0.01)
        for name in ("context_cpu_ratio", "hook_cpu_ratio"):
            assert result[name] > 0
        assert set(result["context_ratio_noise"]) == {"min", "max", "stdev"}
    write = report["write"]
    assert write["samples"] == 40
    for name in (
        "pre_call_ms",
        "pre_call_cpu_ms",
        "post_call_ms",
        "write_ms",
        "post_call_cpu_ms",
        "sign_ms",
        "round_trip_ms",
        "round_trip_cpu_ms",
    ):
        assert write[name]["p50"] > 0 and write[name]["p99"] >= write[name]["p50"]

    # the run deleted its keys
    client = redis.Redis.from_url(real_redis_url())
    try:
        prefix = report["config"]["key_prefix"]
        assert prefix.startswith(PREFIX_STEM)
        assert not list(client.scan_iter(match=f"{prefix}*", count=1000))
    finally:
        client.close()


def test_bench_proxy_with_a_worker_process(tmp_path: Path) -> None:
    """``--extraction worker``: a separate ``litellm-memory worker`` process runs the extraction
    jobs (the proxy's own worker is off) and calls the stand-in directly; the report counts
    its jobs and its CPU."""
    out = tmp_path / "proxy.json"
    command = [
        *(sys.executable, "-m", "litellm_memory_hook", "bench", "proxy"),
        *("--clients", "4", "--requests", "48", "--history", "0", "--extraction", "worker"),
        *("--redis-url", real_redis_url(), "--log-dir", str(tmp_path / "logs")),
        *("--json", str(out)),
    ]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["config"]["extraction"] == "worker"
    config = yaml.safe_load((tmp_path / "logs" / "config.yaml").read_text())
    assert config["callback_settings"]["memory"]["extraction"]["worker_in_proxy"] is False
    # 4 users x (12 + 1 warm-up) messages each: every user reached the 12-message trigger
    assert report["extraction_stats"].get("jobs_committed", 0) >= 4, report["extraction_stats"]
    assert report["extraction_stats"].get("jobs_failed", 0) == 0
    assert report["results"][0]["on"]["worker_cpu_ms_per_request"] > 0
    assert report["results"][0]["off"]["errors"] == 0


def test_bench_proxy_rejects_an_unknown_extraction_mode() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "litellm_memory_hook", "bench", "proxy", "--extraction", "both"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "bad --extraction" in done.stdout + done.stderr


def test_process_rss_is_read_from_proc() -> None:
    """The proxy's resident memory comes from /proc/<pid>/status (KiB); a process that is
    gone reads 0."""
    import os

    from benchmarks.proxy import process_rss_kb

    assert process_rss_kb(os.getpid()) > 1000  # this Python holds more than 1 MiB
    assert process_rss_kb(2**22 + 7) == 0
