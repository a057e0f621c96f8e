"""`litellm-memory doctor` (issue 10 item 1): Redis reachable, version, cluster or not, Lua,
persistence and eviction policy with recommendations, the memory-enabled aliases, the LiteLLM
version and free ports; against the test Redis, throwaway redis-servers configured badly on
purpose, the embedded Redis, and with Redis down."""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from typer.testing import CliRunner

from litellm_memory_hook.store.embedded import ServeLock, redis_binary, start_embedded
from litellm_memory_hook.tools import cli
from litellm_memory_hook.tools.cli_doctor import LITELLM_BELOW, LITELLM_OLDEST, LITELLM_VERSION
from litellm_memory_hook.tools.cli_doctor_redis import (
    _persistence_check,
    _policy_check,
    redis_checks,
)
from litellm_memory_hook.tools.cli_memory import register
from tests.support.harness import REPO, free_port
from tests.support.redis_url import real_redis_url

REDIS_URL = real_redis_url()
register(cli.app)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No Redis URL or cluster flag from the outside; each test sets what it needs."""
    for name in ("REDIS_URL", "LITELLM_MEMORY_REDIS_URL", "LITELLM_MEMORY_REDIS_CLUSTER"):
        monkeypatch.delenv(name, raising=False)
    for name in ("LITELLM_MEMORY_REDIS__URL", "LITELLM_MEMORY_REDIS__CLUSTER"):
        monkeypatch.delenv(name, raising=False)


def doctor(*args: str) -> tuple[int, dict[str, dict[str, str]], list[dict[str, str]]]:
    """`doctor --json ARGS` with the checkout's config; (exit code, checks by name, all)."""
    result = CliRunner().invoke(
        cli.app, ["doctor", "--json", "--config", str(REPO / "config.yaml"), *args]
    )
    checks: list[dict[str, str]] = json.loads(result.stdout)
    return result.exit_code, {c["name"]: c for c in checks}, checks


@pytest.fixture
def throwaway_redis(tmp_path: Path) -> Iterator[Any]:
    """A factory of redis-server processes on free ports with the given arguments."""
    processes: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> str:
        port = free_port()
        process = subprocess.Popen(
            [
                redis_binary(),
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(tmp_path),
                *args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        processes.append(process)
        url = f"redis://127.0.0.1:{port}/0"
        for _ in range(100):
            try:
                redis.Redis.from_url(url).ping()
                return url
            except redis.ConnectionError:
                time.sleep(0.05)
        raise AssertionError("redis-server did not start")

    yield start
    for process in processes:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.redis
def test_doctor_on_the_test_redis(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every check is there: config, aliases (demo), LiteLLM at the pinned version, Redis
    reachable, version 6.2+, standalone, Lua, persistence, eviction policy, ports."""
    monkeypatch.setenv("REDIS_URL", REDIS_URL)
    code, checks, ordered = doctor("--port", str(free_port()), "--standin-port", str(free_port()))
    names = [c["name"] for c in ordered]
    assert names[:3] == ["config", "memory aliases", "litellm"]
    assert {
        "redis reachable",
        "redis version",
        "redis mode",
        "lua scripts",
        "redis permissions",
        "persistence",
        "maxmemory-policy",
        "proxy port",
        "stand-in port",
    } <= set(names)
    assert (
        checks["memory aliases"]["status"] == "ok" and "demo" in checks["memory aliases"]["detail"]
    )
    supported = f"supported: >={LITELLM_OLDEST},<{LITELLM_BELOW}"
    assert checks["litellm"] == {
        "name": "litellm",
        "status": "ok",
        "detail": f"{LITELLM_VERSION} ({supported})",  # the venv holds CI's locked version
    }
    for name in (
        "redis reachable",
        "redis version",
        "redis mode",
        "lua scripts",
        "redis permissions",
        "proxy port",
    ):
        assert checks[name]["status"] == "ok", checks[name]
    assert checks["redis mode"]["detail"] == "standalone"
    assert code == 0


def test_doctor_with_redis_down_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """Redis not answering: the reachability check fails naming the URL, exit code 1; the
    table form ends with 'problems found'."""
    url = f"redis://127.0.0.1:{free_port()}/0"
    monkeypatch.setenv("REDIS_URL", url)
    code, checks, _ = doctor()
    table = CliRunner().invoke(cli.app, ["doctor", "--config", str(REPO / "config.yaml")])
    assert code == 1
    assert checks["redis reachable"]["status"] == "fail"
    assert url in checks["redis reachable"]["detail"]
    assert table.exit_code == 1 and "problems found" in table.stdout


def test_doctor_recommends_aof_and_noeviction(
    throwaway_redis: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An evicting Redis with RDB only: the policy fails (E16: an evicted key loses turns or a
    conversation's numbering), persistence warns and recommends AOF; with AOF and noeviction
    both are ok."""
    bad = throwaway_redis("--maxmemory-policy", "allkeys-lru", "--save", "60", "1")
    monkeypatch.setenv("REDIS_URL", bad)
    code, checks, _ = doctor()
    assert code == 1
    assert checks["maxmemory-policy"]["status"] == "fail"
    assert "allkeys-lru" in checks["maxmemory-policy"]["detail"]
    assert "set maxmemory-policy noeviction" in checks["maxmemory-policy"]["detail"]
    assert checks["persistence"]["status"] == "warn"
    assert "RDB snapshots only" in checks["persistence"]["detail"]
    assert "appendonly yes" in checks["persistence"]["detail"]
    good = throwaway_redis("--appendonly", "yes", "--maxmemory-policy", "noeviction")
    monkeypatch.setenv("REDIS_URL", good)
    _, checks, _ = doctor()
    assert checks["persistence"]["status"] == "ok"
    assert checks["persistence"]["detail"].startswith("AOF on (appendfsync everysec)")
    assert checks["maxmemory-policy"]["status"] == "ok"


def test_doctor_flags_a_cluster_setting_on_a_standalone_redis(
    throwaway_redis: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """redis.cluster: true against a standalone server fails, naming both: the cluster client
    cannot use it, so every request would go without memory (fresh-operator run: doctor said
    "ready" with a warning)."""
    monkeypatch.setenv("REDIS_URL", throwaway_redis())
    monkeypatch.setenv("LITELLM_MEMORY_REDIS__CLUSTER", "true")
    code, checks, _ = doctor()
    assert checks["redis mode"]["status"] == "fail"
    assert "redis.cluster is true" in checks["redis mode"]["detail"]
    assert code == 1


def test_doctor_on_the_embedded_redis(tmp_path: Path) -> None:
    """Without a Redis URL: no embedded Redis running is only information; with one running
    (as serve runs it), doctor checks it: AOF on, noeviction."""
    folder = tmp_path / "data"
    _, checks, _ = doctor("--data-dir", str(folder))
    assert checks["redis"]["status"] == "info" and "serve starts one" in checks["redis"]["detail"]
    embedded = start_embedded(folder, owner=True)
    try:
        code, checks, _ = doctor("--data-dir", str(folder))
    finally:
        embedded.stop()
    assert code == 0
    assert checks["redis"]["detail"].startswith(f"embedded, socket {embedded.socket}")
    assert checks["persistence"]["status"] == "ok"
    assert checks["maxmemory-policy"]["status"] == "ok"


def test_doctor_fails_when_the_running_serves_embedded_redis_is_gone(tmp_path: Path) -> None:
    """A serve holds the folder but its embedded Redis does not answer (it died: kill -9, out of
    memory): the proxy runs without memory, so doctor fails, naming the serve and what to do
    (fresh-user run: doctor said "no embedded Redis running: serve starts one", info, and
    "ready", exit 0, while every request went without memory)."""
    folder = tmp_path / "data"
    lock = ServeLock.acquire(folder)
    try:
        code, checks, _ = doctor("--data-dir", str(folder), "--standin-port", "0")
    finally:
        lock.release()
    assert checks["redis"]["status"] == "fail"
    assert f"serve (pid {os.getpid()})" in checks["redis"]["detail"]
    assert "does not answer" in checks["redis"]["detail"]
    assert code == 1


def test_a_command_that_starts_a_serves_redis_again_says_it_stays(tmp_path: Path) -> None:
    """A command run while a serve holds the folder and its embedded Redis is gone starts it
    again and leaves it running for that serve: it says so (fresh-user run: "started for this
    command", which reads as stopped again when the command exits)."""
    folder = tmp_path / "data"
    lock = ServeLock.acquire(folder)
    try:
        result = CliRunner().invoke(
            cli.app,
            [
                "stats",
                "--no-scan",
                "--config",
                str(REPO / "config.yaml"),
                "--data-dir",
                str(folder),
            ],
        )
    finally:
        start_embedded(folder, owner=True).stop()
        lock.release()
    assert result.exit_code == 0, result.output
    said = " ".join(result.stderr.split())  # the console wraps long lines
    assert f"started again, left running for serve pid {os.getpid()}" in said


def test_doctor_reports_taken_ports(tmp_path: Path) -> None:
    """A proxy port another program listens on fails, exit code 1: serve would refuse to start
    (it was a warning, exit 0, while README said doctor exits 1 when serve cannot run)."""
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        code, checks, _ = doctor(
            "--port", str(port), "--standin-port", "0", "--data-dir", str(tmp_path)
        )
    assert checks["proxy port"]["status"] == "fail"
    assert checks["proxy port"]["detail"] == (
        f"127.0.0.1:{port} already in use by another program: serve would refuse to start; "
        "stop it or pick another port with --port"
    )
    assert code == 1


class _Answer(http.server.BaseHTTPRequestHandler):
    """Answers /health/liveliness as the LiteLLM proxy does (200), anything else 404."""

    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health/liveliness" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_a_port_that_answers_as_serve_is_information(tmp_path: Path) -> None:
    """A port held by what answers as serve's proxy does (a running serve: doctor checking a
    live deployment) is information, exit 0; one that answers something else (a 404) is
    another program, a failure."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = str(server.server_address[1])
        args = ("--standin-port", "0", "--data-dir", str(tmp_path))
        code, checks, _ = doctor("--port", port, *args)
        assert checks["proxy port"]["status"] == "info", checks["proxy port"]
        assert "already running?" in checks["proxy port"]["detail"]
        assert code == 0
        proxy = str(free_port())
        code, checks, _ = doctor(
            "--port", proxy, "--standin-port", port, "--data-dir", str(tmp_path)
        )
        assert checks["stand-in port"]["status"] == "fail", checks["stand-in port"]
        assert checks["stand-in port"]["detail"].endswith(
            "pick another port with --standin-port (0: no stand-in)"
        )
        assert code == 1
    finally:
        server.shutdown()
        server.server_close()


def test_doctor_with_a_missing_config_fails(tmp_path: Path) -> None:
    """A config that cannot be read fails the config check, exit code 1."""
    result = CliRunner().invoke(
        cli.app, ["doctor", "--json", "--config", str(tmp_path / "nope.yaml")]
    )
    checks = {c["name"]: c for c in json.loads(result.stdout)}
    assert result.exit_code == 1
    assert checks["config"]["status"] == "fail" and "cannot read" in checks["config"]["detail"]


def test_persistence_and_policy_rules() -> None:
    """The recommendations: AOF with fsync 'no' warns, no persistence at all warns that a
    restart loses everything; every evicting policy fails, volatile-* too (every key has a
    TTL); a policy INFO does not report warns."""
    assert _persistence_check({"aof_enabled": 1}, {"appendfsync": "no"}).status == "warn"
    none = _persistence_check({"aof_enabled": 0}, {"save": ""})
    assert none.status == "warn" and "loses every memory" in none.detail
    lru = _policy_check(
        {
            "maxmemory_policy": "volatile-lru",
            "maxmemory": 10,
            "used_memory_human": "1M",
            "maxmemory_human": "10M",
        }
    )
    assert lru.status == "fail" and "volatile-*" in lru.detail
    for policy in ("allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-ttl", "volatile-lfu"):
        assert _policy_check({"maxmemory_policy": policy}).status == "fail", policy
    assert _policy_check({}).status == "warn"
    ok = _policy_check(
        {"maxmemory_policy": "noeviction", "maxmemory": 0, "used_memory_human": "1M"}
    )
    assert ok.status == "ok" and "no limit" in ok.detail


def test_doctor_fails_a_memory_block_that_would_be_ignored(tmp_path: Path) -> None:
    """A misspelt ``memory`` key on an alias or under callback_settings, and a bad key inside
    an alias's memory block, are failures (the proxy would start and run without memory on that
    alias, dropping its system_prompt: a fresh-user test saw ``enabeld: true`` do that); an
    extraction_model that is no model_name of the config is a warning. serve refuses the
    failures (config_failures)."""
    import yaml

    from litellm_memory_hook.tools.cli_doctor import config_failures
    from litellm_memory_hook.tools.proxyconfig import ProxyConfig

    raw = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))
    demo = next(e for e in raw["model_list"] if (e.get("model_info") or {}).get("memory"))
    base = demo["model_info"]["memory"]
    cases = {
        "alias key": ({"memroy": base}, None),
        "alias block": ({"memory": {**base, "enabeld": True}}, None),
        "settings key": (None, "memroy"),
    }
    for label, (info, settings_key) in cases.items():
        changed = yaml.safe_load(yaml.safe_dump(raw))
        entry = next(e for e in changed["model_list"] if e["model_name"] == demo["model_name"])
        if info is not None:
            entry["model_info"] = info
        if settings_key is not None:
            changed["callback_settings"] = {settings_key: changed["callback_settings"]["memory"]}
        path = tmp_path / f"{label.replace(' ', '-')}.yaml"
        path.write_text(yaml.safe_dump(changed), encoding="utf-8")
        result = CliRunner().invoke(cli.app, ["doctor", "--json", "--config", str(path)])
        checks = json.loads(result.stdout)
        failing = [c for c in checks if c["status"] == "fail"]
        assert result.exit_code == 1 and failing, (label, checks)
        assert config_failures(ProxyConfig.load(path)), label
    changed = yaml.safe_load(yaml.safe_dump(raw))
    entry = next(e for e in changed["model_list"] if e["model_name"] == demo["model_name"])
    entry["model_info"]["memory"]["extraction_model"] = "nosuchalias"
    path = tmp_path / "extraction.yaml"
    path.write_text(yaml.safe_dump(changed), encoding="utf-8")
    checks = json.loads(
        CliRunner().invoke(cli.app, ["doctor", "--json", "--config", str(path)]).stdout
    )
    assert any(c["status"] == "warn" and "'nosuchalias'" in c["detail"] for c in checks), checks
    assert config_failures(ProxyConfig.load(path)) == []
    assert config_failures(ProxyConfig.load(REPO / "config.yaml")) == []


def test_doctor_names_environment_variables_the_file_overrides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A LITELLM_MEMORY_* variable for a key config.yaml also sets does nothing (the file
    wins): doctor warns and names it (a fresh-user test set LITELLM_MEMORY_KEY_PREFIX and saw no
    effect); a variable for a key the file leaves out is used and not named."""
    from litellm_memory_hook.settings import load_settings, shadowed_env

    monkeypatch.setenv("LITELLM_MEMORY_STORAGE__KEY_PREFIX", "zzmine")
    monkeypatch.setenv("LITELLM_MEMORY_RECALL__K", "6")
    _, by_name, _ = doctor()
    assert by_name["environment"]["status"] == "warn"
    assert "LITELLM_MEMORY_STORAGE__KEY_PREFIX ignored" in by_name["environment"]["detail"]
    assert "RECALL__K" not in by_name["environment"]["detail"]
    section = {"memory": {"storage": {"key_prefix": "mem"}}}
    assert shadowed_env(section) == ["LITELLM_MEMORY_STORAGE__KEY_PREFIX"]
    settings = load_settings(section)
    assert (settings.storage.key_prefix, settings.recall.k) == ("mem", 6)


def test_doctor_checks_the_ports_serve_would_take(tmp_path: Path) -> None:
    """doctor checked the stand-in port its config's api_base names (4010) whatever port serve
    was given: it takes --standin-port as serve does (0: no stand-in, no check)."""
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        taken = blocker.getsockname()[1]
        proxy = str(free_port())
        args = ("--port", proxy, "--data-dir", str(tmp_path))
        _, checks, ordered = doctor(*args, "--standin-port", str(taken))
        assert [c["name"] for c in ordered].count("stand-in port") == 1
        assert checks["stand-in port"]["status"] == "fail"
        assert f"127.0.0.1:{taken} already in use" in checks["stand-in port"]["detail"]
        free = free_port()
        _, checks, _ = doctor(*args, "--standin-port", str(free))
        assert checks["stand-in port"] == {
            "name": "stand-in port",
            "status": "ok",
            "detail": f"127.0.0.1:{free} free",
        }
        _, checks, _ = doctor(*args, "--standin-port", "0")
        assert "stand-in port" not in checks and checks["proxy port"]["status"] == "ok"


@pytest.mark.parametrize(
    "exc",
    [
        redis.AuthenticationError("Authentication required."),
        redis.ResponseError("NOAUTH Authentication required."),
        redis.ResponseError(
            "HELLO must be called with the client already authenticated, otherwise the HELLO "
            "<proto> AUTH <user> <pass> option can be used to authenticate the client"
        ),
    ],
)
def test_a_redis_that_wants_a_password_is_named_so(exc: Exception) -> None:
    """A server with requirepass answers the handshake with "HELLO must be called with the
    client already authenticated" (operator run: doctor printed just that); doctor says that
    authentication is required and where the password goes."""
    from litellm_memory_hook.tools.cli_doctor_redis import redis_problem

    assert redis_problem(exc).startswith("authentication required or refused")
    assert redis_problem(redis.ConnectionError("Connection refused")) == "Connection refused"


async def test_stats_without_the_scan_still_counts_the_keys(real_redis: Any, prefix: str) -> None:
    """`stats --no-scan` leaves out the SCAN counts, not DBSIZE, which costs nothing (it showed
    "-" for the keys in the database)."""
    from litellm_memory_hook.tools.cli_stats import store_stats

    await real_redis.set(f"{prefix}:x", 1)
    stats = await store_stats(real_redis, prefix, scan=False)
    assert stats.db_keys is not None and stats.db_keys >= 1
    assert stats.conversations is None or stats.conversations == 0


@pytest.mark.parametrize(
    ("rules", "denied"),
    [
        (("~*", "&*", "+@all", "-@scripting"), "EVALSHA"),
        (("~mem:{*", "&*", "+@all"), "mem:due"),
    ],
)
def test_doctor_fails_a_redis_user_without_the_commands_memory_needs(
    tmp_path: Path, rules: tuple[str, ...], denied: str
) -> None:
    """E07: a user without scripting, or without the global due set, fails the permissions
    check naming what is missing (asked with ACL DRYRUN; no CONFIG needed); a user allowed
    everything on the prefix passes."""
    from tests.support.redis_servers import RedisServer, add_acl_user, free_ports

    [port] = free_ports(1)
    server = RedisServer(tmp_path / "acl", port).start()
    try:
        url = add_acl_user(server, "limited", "pw", *rules)
        checks = {c.name: c for c in redis_checks(url, cluster_setting=False, prefix="mem")}
        assert checks["redis permissions"].status == "fail", checks["redis permissions"]
        assert denied in checks["redis permissions"].detail
        assert "limited" in checks["redis permissions"].detail
        url = add_acl_user(server, "full", "pw", "~mem:*", "&*", "+@all", "-config")
        checks = {c.name: c for c in redis_checks(url, cluster_setting=False, prefix="mem")}
        assert checks["redis permissions"].status == "ok", checks["redis permissions"]
        assert checks["maxmemory-policy"].status == "ok"  # read from INFO, CONFIG denied
    finally:
        server.stop()
