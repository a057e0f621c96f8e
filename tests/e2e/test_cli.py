"""The README's main job end to end: `litellm-memory serve` on the embedded Redis (REDIS_URL
unset, the checkout's config.yaml), memory across two requests, then `import`, `show` and
`replay` against that running proxy."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.harness import MASTER_KEY, REPO, chat_calls, free_port, wait_http
from tests.support.paths import LOCOMO
from tests.support.tiny_locomo import tiny_locomo

CLI = [sys.executable, "-m", "litellm_memory_hook"]
STANDIN_PORT = 4010  # the port config.yaml names for the demo alias


@dataclass
class Served:
    """A running `serve` and where it keeps its data."""

    base_url: str
    folder: Path
    env: dict[str, str]

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run `litellm-memory ARGS` in the serve folder with the checkout's config.yaml."""
        return subprocess.run(
            [*CLI, *args],
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    def import_locomo(self, data: Path, sample_id: str, user: str) -> str:
        """`litellm-memory import DATA --format locomo --fresh`; returns its output."""
        done = self.cli(
            "import",
            str(data),
            "--format",
            "locomo",
            "--sample-id",
            sample_id,
            "--user",
            user,
            "--fresh",
            "--config",
            str(REPO / "config.yaml"),
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def replay(self, data: Path, sample_id: str, user: str, report: Path) -> dict[str, Any]:
        """`litellm-memory replay` against this proxy; returns the JSON report."""
        done = self.cli(
            "replay",
            str(data),
            "--format",
            "locomo",
            "--sample-id",
            sample_id,
            "--user",
            user,
            "--base-url",
            self.base_url,
            "--report",
            str(report),
            "--config",
            str(REPO / "config.yaml"),
        )
        assert done.returncode == 0, done.stderr
        return dict(json.loads(report.read_text()))


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`litellm-memory serve` as the README runs it, with no REDIS_URL."""
    if not _port_free(STANDIN_PORT):
        pytest.fail(f"port {STANDIN_PORT} (the demo stand-in in config.yaml) is taken")
    folder = tmp_path_factory.mktemp("serve")
    port = free_port()
    drop = ("REDIS_URL", "LITELLM_MEMORY_REDIS__URL", "LITELLM_MEMORY_REDIS_URL")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    log = folder / "serve.log"
    process = subprocess.Popen(
        [*CLI, "serve", "--config", str(REPO / "config.yaml"), "--port", str(port)],
        cwd=folder,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/health/liveliness", process, 180, log)
        yield Served(f"http://127.0.0.1:{port}/v1", folder, env)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
    assert (folder / ".litellm-memory" / "memory.rdb").exists(), "the embedded Redis saved no data"


def _chat(served: Served, user: str, text: str) -> str:
    response = httpx.post(
        f"{served.base_url}/chat/completions",
        headers={"Authorization": f"Bearer {MASTER_KEY}"},
        json={"model": "demo", "user": user, "messages": [{"role": "user", "content": text}]},
        timeout=60,
    )
    response.raise_for_status()
    return str(response.json()["choices"][0]["message"]["content"])


def test_readme_curl_pair_shows_memory(served: Served) -> None:
    """The README's two requests: the second reaches the model with the first turn before it,
    and the stand-in's reply names the cat."""
    assert _chat(served, "alice", "My cat is called Miso.") == "Noted: My cat is called Miso."
    answer = _chat(served, "alice", "What is my cat called?")
    assert answer == "You told me: My cat is called Miso."
    records = chat_calls(httpx.get(f"http://127.0.0.1:{STANDIN_PORT}/_standin/requests").json())
    messages = records[-1]["messages"]
    last = [(m["role"], m["content"]) for m in messages if m["role"] != "system"]
    assert last == [
        ("user", "My cat is called Miso."),
        ("assistant", "Noted: My cat is called Miso."),
        ("user", "What is my cat called?"),
    ]
    shown = served.cli("show", "--user", "alice", "--config", str(REPO / "config.yaml"))
    assert shown.returncode == 0, shown.stderr
    assert "4 stored turns" in shown.stdout and "My cat is called Miso." in shown.stdout


def test_import_then_replay_through_the_running_proxy(served: Served, tmp_path: Path) -> None:
    """`import` writes where a chat request for that user reads; `replay` measures what reached
    the model from the stand-in's record: the old line by its rare word, the newest by the
    window."""
    data = tmp_path / "tiny.json"
    tiny_locomo(data)
    assert "imported 62 turns" in served.import_locomo(data, "tiny", "ana")
    result = served.replay(data, "tiny", "ana", tmp_path / "report.json")
    assert result["questions"] == 2 and result["evidence_cover"] == 1.0
    assert result["hook_ms_p50"] is not None and result["hook_ms_p50"] > 0
    assert set(result) >= {"median_prompt_chars", "median_full_history_chars", "hook_ms_p95"}
    again = served.import_locomo(data, "tiny", "ana")
    assert "seq 1-62" in again  # --fresh replaced, not appended


@pytest.mark.skipif(not LOCOMO.exists(), reason="shared/data/locomo is not beside the checkout")
def test_locomo_conv26_replay(served: Served, tmp_path: Path) -> None:
    """Issue 2's main job on real data: conv-26 imported and replayed through the proxy; the
    prompt stays within the sum of the layer budgets (window 8,000, memories 3,000, summary
    2,000, recall and the fixed text) while the full history is several times larger. The
    import schedules extraction, so the stand-in's extractor fills the memory layers too."""
    served.import_locomo(LOCOMO, "conv-26", "caroline")
    result = served.replay(LOCOMO, "conv-26", "caroline", tmp_path / "conv26.json")
    assert result["questions"] > 150
    assert result["median_prompt_chars"] < 16_000
    assert result["median_full_history_chars"] > 3 * result["median_prompt_chars"]
    assert result["evidence_cover"] > 0.3
