"""Starting real processes for end-to-end tests: the stand-in model and a LiteLLM proxy."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path
from typing import Any

import yaml

from litellm_memory_hook.tools.processes import proxy_command, standin_command, wait_http

REPO = Path(__file__).resolve().parents[1]
MASTER_KEY = "sk-memory-demo"


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_standin(port: int, log: Path) -> subprocess.Popen[bytes]:
    """The package's stand-in model on ``port``."""
    handle = log.open("wb")
    process = subprocess.Popen(
        standin_command(port),
        stdout=handle,
        stderr=subprocess.STDOUT,
        cwd=REPO,
    )
    wait_http(f"http://127.0.0.1:{port}/v1/models", process, 60, log)
    return process


def derived_config(
    path: Path,
    *,
    standin_port: int,
    prefix: str,
    extra_models: list[dict[str, Any]] | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """The package's config.yaml with the stand-in's port, a test key prefix and extra aliases."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    for entry in config["model_list"]:
        params = entry["litellm_params"]
        if "api_base" in params:
            params["api_base"] = f"http://127.0.0.1:{standin_port}/v1"
    config["model_list"].extend(extra_models or [])
    config["callback_settings"]["memory"]["key_prefix"] = prefix
    config.update(extra or {})
    path.write_text(yaml.safe_dump(config, allow_unicode=True))
    return path


def start_proxy(config: Path, port: int, log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A real LiteLLM proxy process with ``config``; returns once it answers."""
    handle = log.open("wb")
    full_env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **env}
    process = subprocess.Popen(
        proxy_command(config, port, "127.0.0.1"),
        stdout=handle,
        stderr=subprocess.STDOUT,
        cwd=config.parent,
        env=full_env,
    )
    wait_http(f"http://127.0.0.1:{port}/health/liveliness", process, 180, log)
    return process


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate a process and wait for it."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
