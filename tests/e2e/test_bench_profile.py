"""``bench proxy --profile`` (issue 30) with real processes: a recording that cannot attach
fails in one line, and the short mode end to end through a real proxy (skipped where py-spy
cannot attach to a process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import proxy_profile as pp
from benchmarks import py_spy
from tests.support.paths import REPO
from tests.support.redis_url import real_redis_url


def test_a_recording_that_cannot_attach_fails_in_one_line(tmp_path: Path) -> None:
    if py_spy.py_spy_path() is None:
        pytest.skip("py-spy is not installed")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    recording = py_spy.Recording(gone.pid, tmp_path / "p.txt")
    with pytest.raises(py_spy.ProfilerError) as raised, recording:
        pass
    assert "\n" not in str(raised.value) and "py-spy" in str(raised.value)


def test_bench_proxy_profile_short_mode(tmp_path: Path) -> None:
    """``--profile`` after a short run: the table and the JSON name every category, the memory
    side's pre-call and the totals are positive, and the raw files are kept in the log dir."""
    problem = py_spy.profiler_problem()
    if problem:
        pytest.skip(problem)
    out = tmp_path / "proxy.json"
    command = [
        *(sys.executable, "-m", "litellm_memory_hook", "bench", "proxy"),
        *("--clients", "4", "--requests", "40", "--history", "20", "--extraction", "off"),
        *("--profile", "--profile-requests", "80"),
        *("--redis-url", real_redis_url(), "--log-dir", str(tmp_path / "logs")),
        *("--json", str(out)),
    ]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "proxy CPU ms per request by category" in done.stdout
    assert "leaf frames of the difference" in done.stdout
    for name in pp.CATEGORIES:
        assert name in done.stdout, name
    report = json.loads(out.read_text())
    assert report["config"]["profile_requests"] == 80
    profile = report["profile"]
    assert [r["category"] for r in profile["categories"]] == list(pp.CATEGORIES)
    assert profile["requests"] == {"memory": 80, "context": 80}
    assert profile["errors"] == {"memory": 0, "context": 0}
    for side in ("memory", "context"):
        assert profile["samples"][side] > 0 and profile["cpu_ms_per_request"][side] > 0
        assert profile["total"][f"{side}_ms"] > 0
        assert profile["total"][f"{side}_ms"] == pytest.approx(
            profile["cpu_ms_per_request"][side], rel=0.01
        )
    rows = {r["category"]: r for r in profile["categories"]}
    assert rows[pp.HOOK_PRE]["memory_ms"] > 0 and profile["hook_total"]["memory_ms"] > 0
    assert rows[pp.LITELLM]["context_ms"] > 0
    assert 0 < len(profile["top_leaves"]) <= 15
    for side in ("memory", "context"):
        assert pp.parse_raw((tmp_path / "logs" / f"profile-{side}.txt").read_text())
