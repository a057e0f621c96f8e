"""What a fresh-user run found about `serve` and the commands around it:

* `worker` on a serve's `--data-dir` called http://127.0.0.1:4000/v1 whatever port that serve's
  proxy listened on (another proxy there would get users' conversations): it now calls the
  serve's own proxy, which `serve` records in its data folder (`serve.json`), unless
  `extraction.base_url` is set; a failed call names the URL.
* `--data-dir` alone did not let `stats`, `show`, `memories` run from another folder (no
  config.yaml there): they now read the config of the serve on that data folder; `stats` needs
  none at all.
* `kill -9` of serve left its proxy and stand-in running on their ports: they now end with it
  (Linux: PR_SET_PDEATHSIG; elsewhere a watchdog thread), and `doctor` warns about ports a dead
  serve's children still hold, naming their pids. The embedded Redis stays up, as documented:
  commands attach to it and the next serve adopts it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
import redis
from typer.testing import CliRunner

from litellm_memory_hook.errors import ExtractionError
from litellm_memory_hook.settings import load_settings
from litellm_memory_hook.store.embedded import ServeLock, answers, socket_path
from litellm_memory_hook.tools import cli
from litellm_memory_hook.tools.cli_doctor import doctor_checks
from litellm_memory_hook.tools.cli_memory import register
from litellm_memory_hook.tools.cli_worker import NamedModel, extraction_url
from litellm_memory_hook.tools.processes import (
    PARENT_ENV,
    SERVE_CONFIG,
    ServeRecord,
    port_taken,
    process_alive,
    running_serve,
)
from tests.support.harness import MASTER_KEY, REPO, free_port, wait_http

CLI = [sys.executable, "-m", "litellm_memory_hook"]
register(cli.app)


def _env(**extra: str) -> dict[str, str]:
    """No Redis URL from outside (the embedded Redis), plus ``extra``."""
    drop = (
        "REDIS_URL",
        "LITELLM_MEMORY_REDIS__URL",
        "LITELLM_MEMORY_REDIS_URL",
        "LITELLM_MEMORY_STORAGE__KEY_PREFIX",
        "LITELLM_MEMORY_KEY_PREFIX",
    )
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(extra)
    return env


def _gone(pids: list[int], timeout_s: float) -> list[int]:
    """The pids of ``pids`` still alive after waiting up to ``timeout_s`` s for all to end."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = [p for p in pids if process_alive(p)]
        if not alive:
            return []
        time.sleep(0.1)
    return [p for p in pids if process_alive(p)]


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``litellm-memory ARGS`` in ``cwd`` (no Redis URL: the embedded Redis)."""
    return subprocess.run(
        [*CLI, *args], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=180
    )


# -- children that end with their parent ----------------------------------------------------------

_PARENT = """
import sys, time
from litellm_memory_hook.tools.processes import popen_with_parent
import os
child = popen_with_parent([sys.executable, "-c", "import time; time.sleep(120)"], os.environ)
print(child.pid, flush=True)
time.sleep(120)
"""

_WATCHED = """
import time
from litellm_memory_hook.tools.processes import watch_parent
watch_parent()
time.sleep(120)
"""

_WATCHING_PARENT = f"""
import os, subprocess, sys, time
env = {{**os.environ, {PARENT_ENV!r}: str(os.getpid())}}
child = subprocess.Popen([sys.executable, "-c", {_WATCHED!r}], env=env)
print(child.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("code", [_PARENT, _WATCHING_PARENT], ids=["prctl", "watchdog"])
def test_a_child_ends_when_its_parent_is_killed(code: str) -> None:
    """kill -9 of the parent: its child (started with popen_with_parent, or watching its
    parent where prctl is missing) gets SIGTERM and ends within a few seconds."""
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        time.sleep(0.5)
        assert process_alive(child)
        parent.kill()
        parent.wait()
        assert _gone([child], 5) == []
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


# -- where the worker calls -----------------------------------------------------------------------


def test_the_worker_calls_the_proxy_of_the_serve_on_its_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No extraction.base_url set: the default while no serve holds the folder (a stale record
    of a serve that is gone does not count), the serve's proxy (its host and port) while one
    holds it; a set LITELLM_MEMORY_EXTRACTION__BASE_URL wins over both."""
    for name in ("LITELLM_MEMORY_EXTRACTION__BASE_URL", "LITELLM_MEMORY_EXTRACTION_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    settings = load_settings()
    assert extraction_url(settings, tmp_path) == "http://127.0.0.1:4000/v1"
    ServeRecord(os.getpid(), "0.0.0.0", 4321, 4331, str(tmp_path / "c.yaml")).write(tmp_path)
    assert running_serve(tmp_path) is None  # recorded, but no serve holds the folder
    assert extraction_url(settings, tmp_path) == "http://127.0.0.1:4000/v1"
    lock = ServeLock.acquire(tmp_path)
    try:
        assert extraction_url(settings, tmp_path) == "http://127.0.0.1:4321/v1"
        monkeypatch.setenv("LITELLM_MEMORY_EXTRACTION__BASE_URL", "http://10.0.0.5:9000/v1")
        assert extraction_url(load_settings(), tmp_path) == "http://10.0.0.5:9000/v1"
    finally:
        lock.release()


async def test_a_failed_extraction_call_names_the_url() -> None:
    """The worker's warning said "model 'demo' failed: Connection error." and not where."""

    class Down:
        async def complete(self, *args: object, **kwargs: object) -> None:
            raise ExtractionError("model 'demo' failed: Connection error.")

    model = NamedModel(Down(), "http://127.0.0.1:4999/v1")
    with pytest.raises(ExtractionError) as caught:
        await model.complete("demo", [], json_mode=True, timeout_s=1)
    assert str(caught.value) == (
        "model 'demo' failed: Connection error. (calling http://127.0.0.1:4999/v1)"
    )


# -- commands run from another folder -------------------------------------------------------------


def test_stats_needs_no_config(tmp_path: Path) -> None:
    """No config.yaml here, no --config, and a data folder no serve wrote: stats reads the
    environment's settings and the folder's embedded Redis (it needs no alias); show still
    needs a config and says which to give."""
    data = tmp_path / "data"
    data.mkdir()
    done = _run(["stats", "--json", "--no-scan", "--data-dir", str(data)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["due"] == 0
    assert "config: none" in done.stderr
    assert not answers(socket_path(data))  # started for the command, stopped after it
    shown = _run(["show", "--user", "alice", "--data-dir", str(data)], tmp_path)
    assert shown.returncode == 2, shown.stderr
    assert "cannot read config.yaml" in shown.stderr and "give --config" in shown.stderr


def test_an_explicit_config_is_read_even_with_a_serve_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--config given and missing is an error naming it, not the data folder's config."""
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(REPO / "config.yaml", data / SERVE_CONFIG)
    done = CliRunner().invoke(cli.app, ["stats", "--config", "mine.yaml", "--data-dir", str(data)])
    assert done.exit_code == 2 and "cannot read mine.yaml" in done.output, done.output


def test_counts_are_pluralised(tmp_path: Path) -> None:
    """An import of one line said "imported 1 turns"; the noun follows the count."""
    from litellm_memory_hook.tools.cli_common import counted

    assert [counted(n, "turn") for n in (0, 1, 2)] == ["0 turns", "1 turn", "2 turns"]
    assert counted(1, "memory", "memories") == "1 memory"
    assert counted(3, "memory", "memories") == "3 memories"
    lines = tmp_path / "chat.jsonl"
    lines.write_text(json.dumps({"role": "user", "content": "My cat is called Miso."}) + "\n")
    args = ["--config", str(REPO / "config.yaml"), "--data-dir", str(tmp_path / "data")]
    done = _run(["import", str(lines), "--format", "jsonl", "--user", "alice", *args], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "imported 1 turn (seq 1-1)" in done.stdout, done.stdout
    shown = _run(["show", "--user", "alice", *args], tmp_path)
    assert "1 stored turn\n" in shown.stdout, shown.stdout


# -- doctor ---------------------------------------------------------------------------------------

_LISTEN = """
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); print("up", flush=True)
time.sleep(120)
"""


@pytest.fixture
def listener() -> Iterator[tuple[subprocess.Popen[str], int]]:
    """A process listening on a free port (a proxy left behind by a killed serve)."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", _LISTEN, str(port)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "up"
    try:
        yield process, port
    finally:
        process.kill()
        process.wait()


def test_doctor_warns_about_ports_a_dead_serve_s_children_hold(
    tmp_path: Path, listener: tuple[subprocess.Popen[str], int]
) -> None:
    """A dead serve's record names a proxy that still listens on the recorded port: doctor
    warns, naming the port and that pid (it said "ready: 0 warning(s)"); nothing once the port
    is free."""
    process, port = listener
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    config = tmp_path / "config.yaml"
    shutil.copy(REPO / "config.yaml", config)
    ServeRecord(dead.pid, "127.0.0.1", port, 0, str(config), {"proxy": process.pid}).write(tmp_path)
    checks = doctor_checks(config, tmp_path, "127.0.0.1", free_port(), 0)
    found = [c for c in checks if c.name == "serve leftovers"]
    assert len(found) == 1 and found[0].status == "warn", checks
    assert f"proxy port 127.0.0.1:{port} (its proxy, pid {process.pid})" in found[0].detail
    assert f"kill {process.pid}" in found[0].detail
    process.kill()
    process.wait()
    assert port_taken("127.0.0.1", port) is None
    checks = doctor_checks(config, tmp_path, "127.0.0.1", free_port(), 0)
    assert not [c for c in checks if c.name == "serve leftovers"]


def test_doctor_says_nothing_of_a_running_serve_s_ports(
    tmp_path: Path, listener: tuple[subprocess.Popen[str], int]
) -> None:
    """The serve holding the folder owns its ports: no leftover warning."""
    process, port = listener
    config = tmp_path / "config.yaml"
    shutil.copy(REPO / "config.yaml", config)
    lock = ServeLock.acquire(tmp_path)
    try:
        ServeRecord(os.getpid(), "127.0.0.1", port, 0, str(config), {"proxy": process.pid}).write(
            tmp_path
        )
        checks = doctor_checks(config, tmp_path, "127.0.0.1", free_port(), 0)
        assert not [c for c in checks if c.name == "serve leftovers"]
    finally:
        lock.release()


# -- a real serve ---------------------------------------------------------------------------------


def test_serve_on_other_ports_the_worker_the_commands_and_kill_9(tmp_path: Path) -> None:
    """The fresh user's path: serve with the shipped config on free ports (--standin-port moves
    the stand-in, so serve writes serve-config.yaml) and worker_in_proxy off; one chat with
    memory_flush; from another folder with only --data-dir: `worker --once` extracts through
    this serve's proxy (it called 4000), `stats --no-scan`, `show`, `memories list` read the
    serve's config (they said "cannot read config.yaml"). Then kill -9 of serve: its proxy and
    stand-in end within seconds and free their ports (they were left running); the embedded
    Redis stays for the next serve to adopt, and doctor names no leftover."""
    app, elsewhere = tmp_path / "app", tmp_path / "elsewhere"
    app.mkdir()
    elsewhere.mkdir()
    shutil.copy(REPO / "config.yaml", app / "config.yaml")
    data = app / "data-w"
    port, standin = free_port(), free_port()
    log = app / "serve.log"
    serve = subprocess.Popen(
        [
            *CLI,
            "serve",
            "--port",
            str(port),
            "--standin-port",
            str(standin),
            "--data-dir",
            "data-w",
        ],
        cwd=app,
        env=_env(LITELLM_MEMORY_EXTRACTION__WORKER_IN_PROXY="false"),
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/health/liveliness", serve, 240, log)
        record = running_serve(data)
        assert record is not None and record.pid == serve.pid, log.read_text()[-2000:]
        assert (record.port, record.standin_port) == (port, standin)
        assert record.config == str((data / SERVE_CONFIG).resolve())
        children = [record.children["proxy"], record.children["stand-in"]]
        assert all(process_alive(p) for p in children)
        reply = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            headers={"Authorization": f"Bearer {MASTER_KEY}"},
            json={
                "model": "demo",
                "user": "alice",
                "messages": [{"role": "user", "content": "My cat is called Miso."}],
                "metadata": {"memory_flush": True},
            },
            timeout=60,
        )
        assert reply.status_code == 200, reply.text
        target = str(data.resolve())
        worker = _run(["worker", "--once", "--data-dir", target], elsewhere)
        assert worker.returncode == 0, worker.stdout + worker.stderr
        assert "1 extraction job" in worker.stdout and "committed" in worker.stdout, worker.stdout
        assert "Connection error" not in worker.stdout + worker.stderr
        stats = _run(["stats", "--no-scan", "--json", "--data-dir", target], elsewhere)
        assert stats.returncode == 0, stats.stderr
        assert json.loads(stats.stdout)["counters"].get("jobs_committed") == 1, stats.stdout
        shown = _run(["show", "--user", "alice", "--data-dir", target], elsewhere)
        assert shown.returncode == 0, shown.stderr
        assert "2 stored turns" in shown.stdout and "Miso" in shown.stdout, shown.stdout
        listed = _run(["memories", "list", "--user", "alice", "--data-dir", target], elsewhere)
        assert listed.returncode == 0, listed.stderr
        assert "0 pinned, 1 extracted" in listed.stdout, listed.stdout

        redis_pid = int((data / "redis.pid").read_text().strip())
        serve.kill()
        serve.wait()
        assert _gone(children, 10) == [], [psutil.Process(p).cmdline() for p in children]
        assert port_taken("127.0.0.1", port) is None
        assert port_taken("127.0.0.1", standin) is None
        assert answers(socket_path(data)) and process_alive(redis_pid)  # documented: adopted
        doctor = _run(
            [
                "doctor",
                "--json",
                "--data-dir",
                target,
                "--port",
                str(port),
                "--standin-port",
                str(standin),
            ],
            elsewhere,
        )
        names = [c["name"] for c in json.loads(doctor.stdout)]
        assert "serve leftovers" not in names and "config" in names, doctor.stdout
    finally:
        if serve.poll() is None:
            serve.send_signal(signal.SIGINT)
            serve.wait(timeout=60)
        client = redis.Redis(unix_socket_path=str(socket_path(data)))
        try:
            client.shutdown(nosave=True)
        except (redis.RedisError, OSError):
            pass
        finally:
            client.close()
