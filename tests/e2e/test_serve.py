"""`serve` tells the truth (issue 10 item 3): the embedded Redis has a stable socket in the data
folder, one `serve` owns a data folder (a second one is refused and the first keeps working),
other commands attach without stopping it, and a taken proxy or stand-in port stops `serve`
before it starts anything. The last tests run the real `litellm-memory serve` and walk the
README's path: chat, pin over HTTP, show, export, forget over HTTP, nothing left."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import pytest
import redis
import yaml

from litellm_memory_hook.store.embedded import (
    STOP_TIMEOUT_S,
    DataDirBusyError,
    ServeLock,
    answers,
    serve_lock_holder,
    socket_path,
    start_embedded,
)
from tests.support.harness import MASTER_KEY, derived_config, free_port, wait_http
from tests.support.paths import REPO

CLI = [sys.executable, "-m", "litellm_memory_hook"]


def _env() -> dict[str, str]:
    """The environment without any Redis URL, so serve and the commands use the embedded one."""
    drop = (
        "REDIS_URL",
        "LITELLM_MEMORY_REDIS__URL",
        "LITELLM_MEMORY_REDIS_URL",
        "LITELLM_MEMORY_STORAGE__KEY_PREFIX",
        "LITELLM_MEMORY_KEY_PREFIX",
    )
    return {k: v for k, v in os.environ.items() if k not in drop}


# -- the embedded Redis ---------------------------------------------------------------------------


def test_socket_is_in_the_data_folder(tmp_path: Path) -> None:
    """The socket is <folder>/redis.sock; a folder whose path is too long for a unix socket
    gets a stable path in the temp folder, the same for the same folder."""
    assert socket_path(tmp_path / "data") == (tmp_path / "data").resolve() / "redis.sock"
    deep = tmp_path / ("x" * 120)
    assert socket_path(deep) == socket_path(deep)
    assert socket_path(deep).name.startswith("litellm-memory-")
    assert len(str(socket_path(deep))) < 100


def test_attach_never_stops_the_owner_s_server(tmp_path: Path) -> None:
    """A second start on the folder attaches to the running server (started False); its stop
    does nothing; the owner's stop saves and shuts it down; AOF is on and data survives."""
    folder = tmp_path / "data"
    owner = start_embedded(folder, owner=True)
    try:
        assert owner.started and owner.socket == str(folder.resolve() / "redis.sock")
        client = redis.Redis(unix_socket_path=owner.socket)
        client.set("k", "v")
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
        client.close()
        guest = start_embedded(folder)
        assert not guest.started and guest.socket == owner.socket
        guest.stop()
        assert answers(owner.socket)
    finally:
        owner.stop()
    assert not answers(owner.socket)
    assert (folder / "memory.rdb").exists() and (folder / "appendonly.aof").exists()
    again = start_embedded(folder, owner=True)
    try:
        assert redis.Redis(unix_socket_path=again.socket).get("k") == b"v"
    finally:
        again.stop()


def test_rdb_only_folder_keeps_its_data_when_aof_is_switched_on(tmp_path: Path) -> None:
    """A data folder from before (RDB only) keeps its data: AOF is switched on at run time."""
    folder = tmp_path / "data"
    first = start_embedded(folder, owner=True)
    client = redis.Redis(unix_socket_path=first.socket)
    client.config_set("appendonly", "no")
    client.set("old", "1")
    client.close()
    first.stop()
    for name in ("appendonly.aof", "appendonlydir"):
        target = folder / name
        if target.is_dir():
            for child in target.iterdir():
                child.unlink()
            target.rmdir()
        elif target.exists():
            target.unlink()
    second = start_embedded(folder, owner=True)
    try:
        client = redis.Redis(unix_socket_path=second.socket)
        assert client.get("old") == b"1"
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        client.set("new", "2")  # written while the first AOF may still be being written
        client.close()
    finally:
        started = time.monotonic()
        second.stop()
        stop_s = time.monotonic() - started
    # Redis 6.2 refuses SHUTDOWN while it writes the first AOF: stop waits for it and saves,
    # instead of waiting out its timeout and killing the server (which lost "new")
    assert stop_s < STOP_TIMEOUT_S / 2
    third = start_embedded(folder, owner=True)
    try:
        client = redis.Redis(unix_socket_path=third.socket)
        assert (client.get("old"), client.get("new")) == (b"1", b"2")
        client.close()
    finally:
        third.stop()


def test_serve_lock_is_exclusive(tmp_path: Path) -> None:
    """One ServeLock per folder: a second is refused naming the holder's pid; after release
    the folder is free again."""
    lock = ServeLock.acquire(tmp_path)
    try:
        assert serve_lock_holder(tmp_path) == os.getpid()
        with pytest.raises(DataDirBusyError, match=f"pid {os.getpid()}"):
            ServeLock.acquire(tmp_path)
    finally:
        lock.release()
    assert serve_lock_holder(tmp_path) is None
    ServeLock.acquire(tmp_path).release()


# -- ports ----------------------------------------------------------------------------------------


@pytest.fixture
def config(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A config whose demo alias uses a stand-in on a free port; yields (path, that port)."""
    port = free_port()
    yield derived_config(tmp_path / "config.yaml", standin_port=port, prefix="mem"), port


def _serve(config: Path, folder: Path, port: int, standin: int, log: Path) -> list[str]:
    return [
        *CLI,
        "serve",
        "--config",
        str(config),
        "--port",
        str(port),
        "--standin-port",
        str(standin),
        "--data-dir",
        str(folder),
    ]


def test_serve_refuses_a_memory_block_it_would_ignore(
    config: tuple[Path, int], tmp_path: Path
) -> None:
    """An alias whose memory block has a misspelt key would start and then run without memory
    (and without its system_prompt) on every request: serve exits 2 naming the alias and the
    key, and starts nothing."""
    path, standin = config
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    demo = next(e for e in raw["model_list"] if (e.get("model_info") or {}).get("memory"))
    demo["model_info"]["memory"]["enabeld"] = True
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    done = subprocess.run(
        _serve(path, tmp_path / "data", free_port(), standin, tmp_path / "log"),
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert f"alias {demo['model_name']}" in output and "enabeld" in output, output
    assert "proxy with memory" not in output and "Traceback" not in output
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("taken", ["proxy", "stand-in"])
def test_serve_refuses_a_taken_port(config: tuple[Path, int], tmp_path: Path, taken: str) -> None:
    """With the proxy or the stand-in port taken, serve exits 2 with one line naming the port
    and the option to change, and starts nothing (no stand-in, no Redis, no lock)."""
    path, standin = config
    port = free_port()
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", port if taken == "proxy" else standin))
        blocker.listen()
        done = subprocess.run(
            _serve(path, tmp_path / "data", port, standin, tmp_path / "log"),
            capture_output=True,
            text=True,
            timeout=120,
            env=_env(),
            check=False,
        )
    busy = port if taken == "proxy" else standin
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{taken} port 127.0.0.1:{busy} is already in use" in done.stdout + done.stderr
    option = "--port " if taken == "proxy" else "--standin-port"
    assert len((done.stdout + done.stderr).strip().splitlines()) == 1
    assert option in done.stdout + done.stderr
    assert "proxy with memory" not in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    assert not answers(socket_path(tmp_path / "data"))
    if taken == "proxy":
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", standin)) != 0  # no stand-in was left running


# -- the real serve -------------------------------------------------------------------------------


@dataclass
class Served:
    """A running serve."""

    process: subprocess.Popen[bytes]
    base: str
    folder: Path
    config: Path
    log: Path

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`litellm-memory ARGS --config C --data-dir D` against this serve's embedded Redis."""
        return subprocess.run(
            [*CLI, *args, "--config", str(self.config), "--data-dir", str(self.folder)],
            capture_output=True,
            text=True,
            timeout=120,
            env=_env(),
            check=False,
        )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`litellm-memory serve` on free ports with its own data folder, started as a script
    starts it in the background (`serve &`): with SIGINT ignored, which it and its children
    inherit (found by a fresh-user test: `kill -INT` then did nothing)."""
    folder = tmp_path_factory.mktemp("serve")
    standin = free_port()
    config = derived_config(folder / "config.yaml", standin_port=standin, prefix="mem")
    port = free_port()
    log = folder / "serve.log"
    process = subprocess.Popen(
        _serve(config, folder / "data", port, standin, log),
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        cwd=folder,
        env=_env(),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    served = Served(process, f"http://127.0.0.1:{port}", folder / "data", config, log)
    try:
        wait_http(f"{served.base}/health/liveliness", process, 240, log)
        yield served
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _chat(served: Served, user: str, text: str) -> str:
    response = httpx.post(
        f"{served.base}/v1/chat/completions",
        headers={"Authorization": f"Bearer {MASTER_KEY}"},
        json={"model": "demo", "user": user, "messages": [{"role": "user", "content": text}]},
        timeout=60,
    )
    response.raise_for_status()
    return str(response.json()["choices"][0]["message"]["content"])


def test_serve_prints_the_truth(served: Served) -> None:
    """serve prints the socket of its embedded Redis (in the data folder) and the proxy URL
    only once the proxy answers there."""
    deadline = time.monotonic() + 30  # serve polls the proxy too; its line may come later
    while "proxy with memory" not in served.log.read_text(errors="replace"):
        assert time.monotonic() < deadline, served.log.read_text(errors="replace")[-2000:]
        time.sleep(0.2)
    text = served.log.read_text(errors="replace")
    sock = str(served.folder.resolve() / "redis.sock")
    assert f"embedded Redis: {sock}" in text
    assert f"proxy with memory: {served.base}" in text
    assert answers(sock)
    assert serve_lock_holder(served.folder) == served.process.pid


def test_second_serve_on_the_same_data_dir_is_refused(served: Served, tmp_path: Path) -> None:
    """A second serve on the same data folder (other, free ports) exits 2 naming the first's
    pid; the first's Redis and proxy keep working."""
    done = subprocess.run(
        _serve(served.config, served.folder, free_port(), free_port(), tmp_path / "log"),
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    needle = f"in use by another `litellm-memory serve` (pid {served.process.pid})"
    assert needle in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert served.process.poll() is None
    assert _chat(served, "zoe", "Still there?") == "Noted: Still there?"
    assert answers(socket_path(served.folder))


def test_readme_path_chat_pin_show_export_forget(served: Served) -> None:
    """The issue's path on a real serve: a conversation, a pinned memory over HTTP, `show`
    sees it (and leaves the embedded Redis running), `export` holds both, DELETE
    /memory/v1/users/{user} forgets the user, and no key of theirs is left in Redis."""
    _chat(served, "alice", "My cat is called Miso.")
    _chat(served, "alice", "What is my cat called?")
    headers = {"Authorization": f"Bearer {MASTER_KEY}"}
    api = f"{served.base}/memory/v1"
    pinned = httpx.post(
        f"{api}/pinned",
        headers=headers,
        json={"user": "alice", "model": "demo", "text": "My daughter Asha was born on 3 March."},
        timeout=30,
    )
    assert pinned.status_code == 201, pinned.text
    shown = served.cli("show", "--user", "alice")
    assert shown.returncode == 0, shown.stderr
    assert "Asha" in shown.stdout and "4 stored turns" in shown.stdout
    # the reminder follows the last stored user message, as the chat's did ("English")
    assert "the last stored user message" in shown.stdout
    assert "English" in shown.stdout and "Latin letters" not in shown.stdout
    nobody = served.cli("show", "--user", "nobody-yet")
    assert nobody.returncode == 0, nobody.stderr
    assert "a placeholder" in nobody.stdout and "Latin letters" not in nobody.stdout
    assert answers(socket_path(served.folder))  # show attached; it did not stop the server
    exported = served.cli("export", "--user", "alice")
    assert exported.returncode == 0, exported.stderr
    document = json.loads(exported.stdout)
    assert [len(c["turns"]) for c in document["conversations"]] == [4]
    assert "Asha" in json.dumps(document["memory_sets"])
    http_export = httpx.get(
        f"{api}/export", params={"user": "alice", "model": "demo"}, headers=headers, timeout=30
    ).json()
    assert http_export["conversations"] == document["conversations"]
    forgot = httpx.delete(f"{api}/users/alice", params={"model": "demo"}, headers=headers)
    assert forgot.status_code == 200 and forgot.json()["conversations"] == 1, forgot.text
    client = redis.Redis(unix_socket_path=str(socket_path(served.folder)))
    try:
        left = [k for k in client.scan_iter(match="mem:*") if b"{master:alice}" in k]
        due = [m for m in client.zrange("mem:due", 0, -1) if m.startswith(b"master:alice:")]
    finally:
        client.close()
    # only the forget token is left (it refuses writes begun before the forget)
    assert (left, due) == ([b"mem:{master:alice}:forgets"], [])
    listing = httpx.get(
        f"{api}/memories", params={"user": "alice", "model": "demo"}, headers=headers
    ).json()
    assert listing == {"pinned": [], "memories": [], "version": 0}


def test_a_killed_embedded_redis_is_reaped_and_started_again(served: Served) -> None:
    """kill -9 of serve's embedded Redis: serve reaps it, so no defunct redis-server stays
    under it (found by a fresh-user run); it answers again, started by serve or by `stats`,
    whichever comes first (serve then keeps it: tests/integration/test_serve_supervise.py)."""
    pid = int((served.folder / "redis.pid").read_text().strip())
    assert pid in [c.pid for c in psutil.Process(served.process.pid).children()]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 15
    while psutil.pid_exists(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not psutil.pid_exists(pid)  # a zombie still exists until its parent reaps it
    stats = served.cli("stats")
    assert stats.returncode == 0, stats.stderr
    assert answers(socket_path(served.folder))
    assert served.process.poll() is None  # serve runs on


def test_stop_saves_and_releases(served: Served) -> None:
    """Ctrl-C (SIGINT, though started with it ignored): serve exits 0 and leaves no child
    running, the embedded Redis is shut down after saving, the data folder is free again.
    (Runs last: it stops the module's serve.)"""
    children = psutil.Process(served.process.pid).children(recursive=True)
    assert children  # the stand-in, the proxy and the embedded Redis
    served.process.send_signal(signal.SIGINT)
    assert served.process.wait(timeout=60) == 0
    assert not [c.pid for c in children if c.is_running() and c.status() != "zombie"]
    assert not answers(socket_path(served.folder))
    assert serve_lock_holder(served.folder) is None
    assert (served.folder / "memory.rdb").exists()


def test_serve_points_the_demo_alias_at_its_standin_port(tmp_path: Path) -> None:
    """Found by a fresh-user test: `serve --standin-port 4110` runs the proxy with a copy of the
    config whose stand-in aliases point at 4110 (the default port keeps the config as it is)."""
    import yaml

    from litellm_memory_hook.tools.processes import config_for_standin

    config = REPO / "config.yaml"
    assert config_for_standin(config, 4010, tmp_path) == config
    derived = config_for_standin(config, 4110, tmp_path)
    assert derived.parent == tmp_path
    loaded = yaml.safe_load(derived.read_text())
    demo = next(e for e in loaded["model_list"] if e["model_name"] == "demo")
    assert demo["litellm_params"]["api_base"] == "http://127.0.0.1:4110/v1"
    # an anthropic/ alias names the stand-in's root, as the README shows (fresh-user report)
    shipped = yaml.safe_load(config.read_text())
    shipped["model_list"].append(
        {
            "model_name": "claude",
            "litellm_params": {"model": "anthropic/x", "api_base": "http://127.0.0.1:4010/"},
        }
    )
    (tmp_path / "with-claude.yaml").write_text(yaml.safe_dump(shipped))
    derived = config_for_standin(tmp_path / "with-claude.yaml", 4110, tmp_path / "d")
    loaded = yaml.safe_load(derived.read_text())
    bases = {e["model_name"]: e["litellm_params"].get("api_base") for e in loaded["model_list"]}
    assert bases["claude"] == "http://127.0.0.1:4110" and bases["demo"].endswith(":4110/v1")
    assert (
        loaded["litellm_settings"]["callbacks"] == "litellm_memory_hook.proxy_callback.memory_hook"
    )


def test_a_mistyped_data_dir_fails_instead_of_starting_an_empty_redis(tmp_path: Path) -> None:
    """Reading and changing commands on a ``--data-dir`` that does not exist fail with one line
    (exit 2) and create nothing; an import creates the folder (it writes the memory there)."""
    missing = tmp_path / "no-such-dir"
    config = str(REPO / "config.yaml")
    for command in (
        ["show", "--user", "alice"],
        ["export", "--user", "alice"],
        ["stats"],
        ["forget", "--user", "alice", "--yes"],
    ):
        done = subprocess.run(
            [*CLI, *command, "--config", config, "--data-dir", str(missing)],
            cwd=tmp_path,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert "does not exist, so it holds no memory" in done.stderr, command
        assert "Traceback" not in done.stderr
        assert not missing.exists(), command
    lines = tmp_path / "chat.jsonl"
    lines.write_text(json.dumps({"role": "user", "content": "My cat is called Miso."}) + "\n")
    command = ["import", str(lines), "--format", "jsonl", "--user", "alice", "--config", config]
    imported = subprocess.run(
        [*CLI, *command, "--data-dir", str(missing)],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert imported.returncode == 0, imported.stdout + imported.stderr
    assert missing.is_dir()  # the Redis the import started stopped with it (no serve holds it)
