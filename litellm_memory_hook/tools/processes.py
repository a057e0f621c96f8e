"""The child processes ``serve`` runs (the stand-in model, the LiteLLM proxy) and waiting for them.

Shared by the CLI and the end-to-end tests, so both start exactly the same commands.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx


def standin_command(port: int) -> list[str]:
    """The command line of the package's stand-in model on ``port``."""
    return [sys.executable, "-m", "litellm_memory_hook", "standin", "--port", str(port)]


def proxy_command(config: Path, port: int, host: str) -> list[str]:
    """The command line of a LiteLLM proxy with ``config`` (the ``litellm`` CLI of this Python)."""
    return [
        sys.executable,
        "-c",
        "from litellm.proxy.proxy_cli import run_server; run_server()",
        "--config",
        str(config),
        "--port",
        str(port),
        "--host",
        host,
    ]


def wait_http(
    url: str, process: subprocess.Popen[bytes], timeout_s: float, log: Path | None = None
) -> None:
    """Wait until ``url`` answers with any HTTP status (polled every 0.3 s).

    Raises:
        RuntimeError: ``process`` exited first (the message ends with the last 4,000 characters
            of ``log`` when given), or ``timeout_s`` seconds passed.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            text = log.read_text(errors="replace")[-4000:] if log and log.exists() else ""
            raise RuntimeError(
                f"process exited with {process.returncode} before {url} answered:\n{text}"
            )
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.HTTPError:
            time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer within {timeout_s:.0f} s")
