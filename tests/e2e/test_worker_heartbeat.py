"""Extraction worker liveness with real processes on the real Redis (REDIS_URL): `litellm-memory
worker` processes, one stopped cleanly (its heartbeat is deleted at once), one killed (its
heartbeat ages out); a real proxy's in-proxy worker beats and its shutdown deletes the beat."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from typer.testing import CliRunner

from litellm_memory_hook.store.keys import due_key, worker_beat_key, workers_index_key
from litellm_memory_hook.store.workers import (
    HEARTBEAT_TTL_BEATS,
    KIND_PROXY,
    KIND_STANDALONE,
    WorkerBeat,
)
from litellm_memory_hook.tools import cli
from litellm_memory_hook.tools.cli_doctor_redis import WORKERS_CHECK
from tests.integration.test_worker_heartbeat import BEAT_S
from tests.support.harness import REPO, start_worker
from tests.support.redis_url import real_redis_url

# -- real worker processes ------------------------------------------------------------------------


@pytest.fixture
def config(tmp_path: Path, key_prefix: str) -> Path:
    """The checkout's config.yaml with its own Redis and key prefix left to the environment,
    the in-proxy worker off and a 0.2 s heartbeat."""
    raw = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))
    memory = raw["callback_settings"]["memory"]
    memory.get("storage", {}).pop("key_prefix", None)
    memory.pop("redis", None)
    memory["extraction"] = {"worker_in_proxy": False, "heartbeat_s": BEAT_S}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


def _doctor(config: Path) -> dict[str, str]:
    """The doctor's extraction workers line."""
    result = CliRunner().invoke(
        cli.app, ["doctor", "--json", "--config", str(config), "--standin-port", "0"]
    )
    checks = {c["name"]: c for c in json.loads(result.stdout)}
    return checks[WORKERS_CHECK]


def _stats(config: Path) -> dict[str, Any]:
    result = CliRunner().invoke(cli.app, ["stats", "--json", "--no-scan", "--config", str(config)])
    assert result.exit_code == 0, result.output
    stats: dict[str, Any] = json.loads(result.stdout)
    return stats


def _wait(predicate: Any, timeout_s: float = 10.0) -> float:
    """Poll until ``predicate()``; returns the seconds it took."""
    started = time.monotonic()
    while not predicate():
        assert time.monotonic() - started < timeout_s, "timed out"
        time.sleep(0.02)
    return time.monotonic() - started


@pytest.mark.redis
def test_real_workers_stopped_and_killed(config: Path, key_prefix: str, tmp_path: Path) -> None:
    """A real `litellm-memory worker`: alive in doctor and stats while it runs; SIGTERM deletes
    its heartbeat before the process exits; a SIGKILLed one ages out within 3 heartbeats; with
    a job queued and no worker, doctor warns (exit code still 0)."""
    client = redis.Redis.from_url(real_redis_url())
    client.zadd(due_key(key_prefix), {"master:nobody:demo": int(time.time() * 1000) + 600_000})

    def live() -> list[str]:
        ids = client.zrange(workers_index_key(key_prefix), 0, -1)
        return [i.decode() for i in ids if client.exists(worker_beat_key(key_prefix, i.decode()))]

    try:
        stranded = _doctor(config)
        assert stranded["status"] == "warn", stranded
        assert "none alive and 1 conversation(s) queued" in stranded["detail"]
        assert "extraction.worker_in_proxy is false" in stranded["detail"]

        stopped = start_worker(config, tmp_path)[0]
        try:
            _wait(lambda: len(live()) == 1)
            check = _doctor(config)
            assert check["status"] == "ok" and check["detail"].startswith("1 alive (1 standalone)")
            [shown] = _stats(config)["workers"]
            assert (shown["kind"], shown["pid"]) == (KIND_STANDALONE, stopped.pid)
            stopped.send_signal(signal.SIGTERM)
            stopped.communicate(timeout=30)
            assert stopped.returncode == 0
            assert live() == []  # deleted by the stop, not aged out
            assert client.zcard(workers_index_key(key_prefix)) == 0
        finally:
            if stopped.poll() is None:
                stopped.kill()
                stopped.wait()

        killed = start_worker(config, tmp_path)[0]
        try:
            _wait(lambda: len(live()) == 1)
            killed.kill()
            killed.wait()
            assert len(live()) == 1  # a killed worker cannot say so
            aged = _wait(lambda: live() == [])
            assert aged <= BEAT_S * HEARTBEAT_TTL_BEATS + 1.0
            assert _doctor(config)["status"] == "warn"
        finally:
            if killed.poll() is None:
                killed.kill()
                killed.wait()
    finally:
        client.close()


def test_a_real_proxy_worker_beats_and_its_shutdown_deletes_the_beat(tmp_path: Path) -> None:
    """A real LiteLLM proxy (worker_in_proxy, the default 5 s heartbeat): its worker is alive
    with kind ``proxy`` once it started; SIGTERM deletes the beat (it would live 15 s more)."""
    from tests.support.harness import derived_config, free_port, start_proxy, stop

    prefix = "thp" + os.urandom(4).hex()
    config = derived_config(tmp_path / "config.yaml", standin_port=free_port(), prefix=prefix)
    client = redis.Redis.from_url(real_redis_url())

    def beats() -> list[WorkerBeat]:
        ids = [i.decode() for i in client.zrange(workers_index_key(prefix), 0, -1)]
        found = [WorkerBeat.from_hash(client.hgetall(worker_beat_key(prefix, i))) for i in ids]
        return [b for b in found if b is not None]

    process = start_proxy(
        config, free_port(), tmp_path / "proxy.log", {"REDIS_URL": real_redis_url()}
    )
    try:
        _wait(lambda: len(beats()) == 1, timeout_s=60)
        [beat] = beats()
        assert beat.kind == KIND_PROXY and beat.interval_ms == 5000
    finally:
        stop(process)
    try:
        assert beats() == [], (tmp_path / "proxy.log").read_text()[-2000:]
    finally:
        for key in client.scan_iter(match=f"{prefix}:*"):
            client.delete(key)
        client.close()
