"""`serve` brings its embedded Redis back after a kill -9 (issue 27 item 8): through a real
`litellm-memory serve`, memory is back within seconds on the same data."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psutil
import redis

from litellm_memory_hook.core.models import stored_text
from litellm_memory_hook.store.embedded import answers
from tests.integration.test_serve_supervise import CLI, RESTART_LINE
from tests.support.harness import MASTER_KEY, derived_config, free_port, wait_http

# -- through a real serve --------------------------------------------------------------------------


def _env() -> dict[str, str]:
    drop = (
        "REDIS_URL",
        "LITELLM_MEMORY_REDIS__URL",
        "LITELLM_MEMORY_REDIS_URL",
        "LITELLM_MEMORY_STORAGE__KEY_PREFIX",
        "LITELLM_MEMORY_KEY_PREFIX",
    )
    return {k: v for k, v in os.environ.items() if k not in drop}


def _chat(base: str, user: str, text: str) -> None:
    response = httpx.post(
        f"{base}/v1/chat/completions",
        headers={"Authorization": f"Bearer {MASTER_KEY}"},
        json={"model": "demo", "user": user, "messages": [{"role": "user", "content": text}]},
        timeout=60,
    )
    response.raise_for_status()


def _stored(socket: str, user: str) -> list[str]:
    """The texts of the user's stored user turns (empty when Redis does not answer)."""
    try:
        client = redis.Redis(unix_socket_path=socket, socket_timeout=2)
        try:
            raw = client.zrange(f"mem:{{master:{user}}}:c:demo:turns", 0, -1)
        finally:
            client.close()
    except (redis.RedisError, OSError):
        return []
    turns: list[dict[str, Any]] = [json.loads(member) for member in raw]
    return [stored_text(turn) for turn in turns if turn.get("role") == "user"]


def test_serve_brings_its_redis_back_after_kill_9(tmp_path: Path) -> None:
    """A real serve: kill -9 of its embedded redis-server; within a few seconds a new server
    answers and a chat request's turn is stored again; serve printed exactly one restart line
    (and the ready line with the inspector and the key); Ctrl-C: the last line says what
    stopped and where the memory stays."""
    standin, port = free_port(), free_port()
    config = derived_config(tmp_path / "config.yaml", standin_port=standin, prefix="mem")
    folder = tmp_path / "data"
    log = tmp_path / "serve.log"
    command = [*CLI, "serve", "--config", str(config), "--port", str(port)]
    command += ["--standin-port", str(standin), "--data-dir", str(folder)]
    process = subprocess.Popen(
        command, stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=tmp_path, env=_env()
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/health/liveliness", process, 240, log)
        deadline = time.monotonic() + 30
        while "proxy with memory" not in log.read_text(errors="replace"):
            assert time.monotonic() < deadline, log.read_text(errors="replace")[-2000:]
            time.sleep(0.2)
        text = log.read_text(errors="replace")
        assert (
            f"proxy with memory: {base}  inspector: {base}/memory/ui  key: {MASTER_KEY}  "
            "(Ctrl-C stops)"
        ) in text
        socket = str(folder.resolve() / "redis.sock")
        user = "u" + uuid.uuid4().hex[:8]
        _chat(base, user, "Before the crash.")
        assert _stored(socket, user) == ["Before the crash."]
        time.sleep(1.2)  # appendfsync everysec: the turn is on disk

        old = int((folder / "redis.pid").read_text().strip())
        os.kill(old, signal.SIGKILL)
        killed = time.monotonic()
        while not RESTART_LINE.search(log.read_text(errors="replace")):
            assert time.monotonic() - killed < 10, log.read_text(errors="replace")[-3000:]
            time.sleep(0.1)
        assert answers(socket)
        new = int((folder / "redis.pid").read_text().strip())
        assert new != old and new in [c.pid for c in psutil.Process(process.pid).children()]

        stored = False
        n = 0
        while not stored:  # the hook's breaker may keep memory off a few seconds more
            assert time.monotonic() - killed < 30, log.read_text(errors="replace")[-3000:]
            n += 1
            _chat(base, user, f"After the crash {n}.")
            time.sleep(0.5)
            stored = f"After the crash {n}." in _stored(socket, user)
        assert _stored(socket, user)[0] == "Before the crash."
        text = log.read_text(errors="replace")
        assert len(RESTART_LINE.findall(text)) == 1, text[-3000:]
        assert "another command had started it" not in text
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    assert process.returncode == 0
    last = log.read_text(errors="replace").strip().splitlines()[-1]
    assert last == (
        "serve stopped: the stand-in model, the proxy, the embedded Redis (saved); the memory "
        f"stays in {folder.resolve()}/ (the next serve there uses it)"
    )
