"""Redis Cluster (issue 9 item 8, case C28) end to end: a real LiteLLM proxy configured with
``redis_cluster: true`` on a real 3-master cluster started by the tests."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from redis.cluster import RedisCluster as SyncCluster

from tests.support import harness
from tests.support.harness import MASTER_KEY, chat_calls
from tests.support.redis_servers import RedisCluster

pytestmark = pytest.mark.cluster


# -- end to end: a real proxy on the cluster -----------------------------------------------------


@pytest.fixture(scope="module")
def cluster_proxy(
    redis_cluster: RedisCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, httpx.Client, SyncCluster, str, Path]]:
    """Stand-in + a LiteLLM proxy whose memory Redis is the cluster (``redis.cluster: true``
    through ``LITELLM_MEMORY_REDIS__CLUSTER``), with a 1 s extraction quiet time."""
    with harness.stack(
        tmp_path_factory.mktemp("e2e-cluster"),
        stem="e2c",
        memory={"extraction": {"quiet_s": 1.0, "poll_s": 0.2}},
        redis_env={
            "LITELLM_MEMORY_REDIS__URL": redis_cluster.url,
            "LITELLM_MEMORY_REDIS__CLUSTER": "true",
        },
        keys=SyncCluster.from_url(redis_cluster.url, decode_responses=True),
    ) as running:
        yield running.proxy, running.standin, running.redis, running.prefix, running.log


def test_end_to_end_through_a_proxy_on_the_cluster(
    cluster_proxy: tuple[str, httpx.Client, SyncCluster, str, Path],
) -> None:
    """Through a real proxy on the cluster: memory across requests (streaming and not), a
    memory pinned over HTTP reaches the model, the in-proxy worker's extraction commits, the
    turns sit in the user's slot; nothing in the proxy log about CROSSSLOT or the hook failing."""
    base, standin, sync, prefix, log = cluster_proxy
    client = openai.OpenAI(base_url=f"{base}/v1", api_key=MASTER_KEY, max_retries=0, timeout=60)
    user = "u" + uuid.uuid4().hex[:8]
    client.chat.completions.create(
        model="demo", user=user, messages=[{"role": "user", "content": "My cat is called Miso."}]
    )
    stream = client.chat.completions.create(
        model="demo",
        user=user,
        stream=True,
        messages=[{"role": "user", "content": "I live in Pune."}],
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    pinned = httpx.post(
        f"{base}/memory/v1/pinned",
        headers={"Authorization": f"Bearer {MASTER_KEY}"},
        json={"user": user, "model": "demo", "text": "My birthday is on 3 March."},
        timeout=30,
    )
    assert pinned.status_code == 201, pinned.text
    standin.post(
        "/_standin/extraction_replies",
        json=[json.dumps({"memories": ["Has a cat called Miso."], "summary": "Cats and Pune."})],
    ).raise_for_status()
    flushed = httpx.post(
        f"{base}/memory/v1/flush",
        headers={"Authorization": f"Bearer {MASTER_KEY}"},
        json={"user": user, "model": "demo"},
        timeout=30,
    )
    assert flushed.status_code == 202, flushed.text
    meta_key = f"{prefix}:{{master:{user}}}:c:demo:meta"
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not sync.hget(meta_key, "summary"):
        time.sleep(0.1)
    assert sync.hget(meta_key, "summary") == "Cats and Pune."
    client.chat.completions.create(
        model="demo", user=user, messages=[{"role": "user", "content": "What is my cat called?"}]
    )
    body: dict[str, Any] = chat_calls(standin.get("/_standin/requests").json())[-1]
    text = json.dumps(body, ensure_ascii=False)
    assert "My cat is called Miso." in text and "I live in Pune." in text
    assert "My birthday is on 3 March." in text and "Has a cat called Miso." in text
    turns = sync.zrange(f"{prefix}:{{master:{user}}}:c:demo:turns", 0, -1)
    assert [json.loads(t)["role"] for t in turns] == ["user", "assistant"] * 3
    written = log.read_text(errors="replace")
    assert "CROSSSLOT" not in written and "memory hook: pre-call failed" not in written
    assert "write failed" not in written
