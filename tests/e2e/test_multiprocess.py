"""Several proxy processes on one Redis: a LiteLLM proxy run with ``--num_workers 2`` (two
uvicorn worker processes behind one port), as production runs it, with the stand-in model and
the tests' real Redis."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
import redis as sync_redis

from tests.support import harness
from tests.support.harness import MASTER_KEY
from tests.support.metrics_samples import Samples, by_process, samples, value
from tests.support.redis_url import real_redis_url

WORKERS = 2


class TwoWorkers:
    """A running ``--num_workers 2`` proxy: its URL, key prefix, config and Redis client."""

    def __init__(self, url: str, prefix: str, config: Path, keys: sync_redis.Redis) -> None:
        self.url = url
        self.prefix = prefix
        self.config = config
        self.keys = keys

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``litellm-memory ARGS --config <the proxy's config>`` on the same Redis."""
        env = {**os.environ, "REDIS_URL": real_redis_url()}
        env.pop("LITELLM_MEMORY_REDIS__URL", None)
        env.pop("LITELLM_MEMORY_REDIS_URL", None)
        return subprocess.run(
            [sys.executable, "-m", "litellm_memory_hook", *args, "--config", str(self.config)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoWorkers]:
    """The stand-in and one proxy with ``--num_workers 2``. The tests of this module run in file
    order: the first needs a proxy that has served no chat request yet."""
    folder = tmp_path_factory.mktemp("e2e-workers")
    drop = ("LITELLM_MEMORY_REDIS__URL", "LITELLM_MEMORY_REDIS_URL")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    with harness.stack(
        folder,
        stem="e2w",
        memory={"extraction": {"quiet_s": 1}},
        env=env,
        proxy_args=["--num_workers", str(WORKERS)],
    ) as running:
        time.sleep(5)  # the second worker process starts after the first answers
        yield TwoWorkers(running.proxy, running.prefix, folder / "config.yaml", running.redis)
    shutil.rmtree(folder, ignore_errors=True)


def test_flushed_import_is_extracted_before_any_chat_request(two_workers: TwoWorkers) -> None:
    """README: a worker is "a background task inside each proxy", and a flush (CLI or API)
    makes a conversation due "at once". An imported history flushed from the CLI on a proxy
    that has served no chat request since it started (a restart, a quiet night) is extracted.
    (The in-proxy worker started only at a process's first memory chat request, so due jobs
    waited for chat traffic; fails on the code before the fix.)"""
    user = "fresh-" + uuid.uuid4().hex[:6]
    lines = two_workers.config.parent / "history.jsonl"
    lines.write_text(
        '{"role": "user", "content": "My dog is called Biscuitron."}\n'
        '{"role": "assistant", "content": "A fine name."}\n'
    )
    imported = two_workers.cli("import", str(lines), "--format", "jsonl", "--user", user)
    assert imported.returncode == 0, imported.stderr
    flushed = two_workers.cli("memories", "flush", "--user", user)
    assert flushed.returncode == 0, flushed.stderr
    key = f"{two_workers.prefix}:{{master:{user}}}:ns:demo:memories"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not two_workers.keys.hlen(key):
        time.sleep(0.5)
    assert "User: My dog is called Biscuitron." in two_workers.keys.hvals(key)


def test_metrics_count_the_requests_of_every_worker_process(two_workers: TwoWorkers) -> None:
    """One scrape target, two worker processes: once every process has published its snapshot
    (every METRICS_PUBLISH_S, 5 s), every scrape of ``/memory/metrics``, whichever process
    answers it, renders both processes' series (label ``process``), and summed over
    ``process`` they count every memory request the proxy served. (Each process rendered only
    its own counters, and a scrape is answered by whichever process accepts the connection, so
    scrapes alternated between the workers' figures: a Prometheus counter that goes down,
    rates that are wrong; fails on the code before the fix.)"""
    user = "metrics-" + uuid.uuid4().hex[:6]
    sent = 16
    for n in range(sent):  # a new connection each time, so the kernel spreads them
        with openai.OpenAI(
            base_url=f"{two_workers.url}/v1", api_key=MASTER_KEY, max_retries=0, timeout=60
        ) as client:
            client.chat.completions.create(
                model="demo", user=user, messages=[{"role": "user", "content": f"line {n}"}]
            )

    def scrape() -> Samples:
        with httpx.Client(timeout=30) as http:  # a new connection each time
            answer = http.get(
                f"{two_workers.url}/memory/metrics",
                headers={"Authorization": f"Bearer {MASTER_KEY}"},
            )
        assert answer.status_code == 200, answer.text
        return samples(answer.text)

    def memory_requests(found: Samples) -> float:
        return value(found, "litellm_memory_requests_total", outcome="memory")

    deadline = time.monotonic() + 15  # three publish periods
    while memory_requests(scrape()) != sent and time.monotonic() < deadline:
        time.sleep(0.5)
    seen, labels = [], set()
    for _ in range(8):
        found = scrape()
        seen.append(memory_requests(found))
        labels.add(frozenset(by_process(found, "litellm_memory_requests_total", outcome="memory")))
    assert seen == [sent] * len(seen)
    assert len(labels) == 1 and len(next(iter(labels))) == WORKERS  # both, in every scrape


def test_each_worker_process_runs_an_extraction_worker_that_beats(two_workers: TwoWorkers) -> None:
    """Each uvicorn worker process runs its own in-proxy extraction worker, and each writes a
    heartbeat: `stats` lists two of kind ``proxy`` with different pids, and a scrape counts
    them, whichever process answers it."""
    import json

    stats = two_workers.cli("stats", "--json", "--no-scan")
    assert stats.returncode == 0, stats.stderr
    workers = json.loads(stats.stdout)["workers"]
    assert [w["kind"] for w in workers] == ["proxy"] * WORKERS
    assert len({w["pid"] for w in workers}) == WORKERS
    for _ in range(4):
        with httpx.Client(timeout=30) as http:  # a new connection each time
            answer = http.get(
                f"{two_workers.url}/memory/metrics",
                headers={"Authorization": f"Bearer {MASTER_KEY}"},
            )
        assert value(samples(answer.text), "litellm_memory_extraction_workers") == WORKERS
