"""`litellm-memory status` and `stop` against a real `serve` (its embedded Redis, stand-in and
LiteLLM proxy), and a quiet terminal: LiteLLM's banner and access log go to
<data-dir>/proxy.log unless --verbose."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from litellm_memory_hook.store.embedded import answers, socket_path
from litellm_memory_hook.tools.processes import process_alive
from tests.support.harness import MASTER_KEY, derived_config, free_port, wait_http

CLI = [sys.executable, "-m", "litellm_memory_hook"]


def _env() -> dict[str, str]:
    drop = (
        "REDIS_URL",
        "LITELLM_MEMORY_REDIS__URL",
        "LITELLM_MEMORY_REDIS_URL",
        "LITELLM_MEMORY_STORAGE__KEY_PREFIX",
        "LITELLM_MEMORY_KEY_PREFIX",
    )
    return {k: v for k, v in os.environ.items() if k not in drop}


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**_env(), "COLUMNS": "200"},
        cwd=cwd,
        check=False,
    )


def test_status_and_stop_of_a_real_serve(tmp_path: Path) -> None:
    standin, port = free_port(), free_port()
    config = derived_config(tmp_path / "config.yaml", standin_port=standin, prefix="mem")
    data = tmp_path / "data"
    terminal = tmp_path / "terminal.log"
    none = _cli("status", "--data-dir", str(data), cwd=tmp_path)
    assert none.returncode == 1 and f"no serve runs on {data.resolve()}/" in none.stdout, none

    command = [*CLI, "serve", "--config", str(config), "--port", str(port)]
    command += ["--standin-port", str(standin), "--data-dir", str(data)]
    serve = subprocess.Popen(
        command,
        stdout=terminal.open("wb"),
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
        env=_env(),
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/health/liveliness", serve, 240, terminal)
        deadline = time.monotonic() + 30
        while "proxy with memory" not in terminal.read_text(errors="replace"):
            assert time.monotonic() < deadline, terminal.read_text(errors="replace")
            time.sleep(0.2)
        chat = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            headers={"Authorization": f"Bearer {MASTER_KEY}"},
            json={
                "model": "demo",
                "user": "alice",
                "messages": [{"role": "user", "content": "hi"}],
            },
            timeout=60,
        )
        assert chat.status_code == 200, chat.text

        # a quiet terminal: serve's own lines only; LiteLLM's banner and access log in the file
        seen = terminal.read_text(errors="replace")
        proxy_log = (data / "proxy.log").read_text(errors="replace")
        assert "POST /v1/chat/completions" in proxy_log and "Uvicorn running" in proxy_log
        assert "POST /v1/chat/completions" not in seen and "Uvicorn running" not in seen, seen
        assert f"(its output: {data / 'proxy.log'})" in seen, seen

        shown = _cli("status", "--data-dir", str(data), cwd=tmp_path)
        assert shown.returncode == 0, shown.stdout + shown.stderr
        lines = shown.stdout.splitlines()
        assert lines[0] == f"serve: pid {serve.pid} on {data.resolve()}/"
        assert f"  proxy URL: http://127.0.0.1:{port}/v1" in lines
        assert f"  inspector: http://127.0.0.1:{port}/memory/ui" in lines
        assert f"  stand-in URL: http://127.0.0.1:{standin}/v1" in lines  # one "stand-in:" line
        assert any(line.startswith("  proxy: pid ") and line.endswith(" alive") for line in lines)
        assert any(
            line.startswith("  stand-in: pid ") and line.endswith(" alive") for line in lines
        )
        socket = socket_path(data.resolve())
        assert any(line.startswith(f"  embedded Redis: {socket} (pid ") for line in lines), lines
        assert any("answers)" in line for line in lines), lines

        as_json = json.loads(_cli("status", "--json", "--data-dir", str(data), cwd=tmp_path).stdout)
        assert as_json["running"] is True and as_json["pid"] == serve.pid
        assert {n: c["alive"] for n, c in as_json["children"].items()} == {
            "proxy": True,
            "stand-in": True,
        }
        assert as_json["redis"]["answers"] is True and process_alive(as_json["redis"]["pid"])
        children = [c["pid"] for c in as_json["children"].values()]

        # stop: SIGTERM to serve, which stops its children and the embedded Redis
        stopped = _cli("stop", "--data-dir", str(data), cwd=tmp_path)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert stopped.stdout.strip() == (
            f"stopped serve, proxy, stand-in, its embedded Redis (pid {serve.pid}); "
            f"the memory stays in {data.resolve()}/"
        )
        assert serve.wait(timeout=5) == 0
        assert not any(process_alive(pid) for pid in children)
        assert not answers(socket)
        assert "serve stopped:" in terminal.read_text(errors="replace")
        after = _cli("status", "--data-dir", str(data), cwd=tmp_path)
        assert after.returncode == 1
        assert f"(the last one, pid {serve.pid}, has stopped)" in after.stdout, after.stdout
        again = _cli("stop", "--data-dir", str(data), cwd=tmp_path)
        assert again.returncode == 1 and "no serve runs on" in again.stdout
    finally:
        if serve.poll() is None:
            serve.terminate()
            serve.wait(timeout=60)
