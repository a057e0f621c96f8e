"""Concurrency through a real proxy (issue 9 item 9): many conversations, 32 concurrent clients,
nothing lost, counted in Redis.

Each conversation is a chat: its turns are sent one after another (a client waits for the
reply), while 32 clients work through the conversations in parallel; every fourth request
streams. Users have two conversations each (``metadata.conversation_id``), so writes to one
user's slot also race. Afterwards, in Redis: every conversation holds exactly its turns, in
order, seqs without a gap, each reply once, no partial reply, and the proxy logged no failed
write.

Short mode (default, for ``.ci/run``): 40 conversations x 10 turns. Long mode
(``MEMORY_LOAD_FULL=1``): 200 conversations x 20 turns, as the issue asks, also on the Redis
Cluster.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import redis
from redis.cluster import RedisCluster as SyncCluster

from litellm_memory_hook.core.models import stored_text
from tests.support import harness
from tests.support.harness import MASTER_KEY
from tests.support.redis_url import real_redis_url

logger = logging.getLogger(__name__)

FULL = os.environ.get("MEMORY_LOAD_FULL", "").strip().lower() in ("1", "true", "yes")
CONVERSATIONS, TURNS = (200, 20) if FULL else (40, 10)
CLIENTS = 32


@dataclass
class LoadStack:
    base: str
    redis: redis.Redis | SyncCluster
    prefix: str
    log: Path


@pytest.fixture(
    scope="module",
    params=[
        "single",
        pytest.param(
            "cluster",
            marks=[
                pytest.mark.cluster,
                pytest.mark.skipif(not FULL, reason="the cluster run is part of MEMORY_LOAD_FULL"),
            ],
        ),
    ],
)
def load_stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LoadStack]:
    """Stand-in + proxy on the real Redis (or on the test cluster)."""
    folder = tmp_path_factory.mktemp(f"load-{request.param}")
    client: redis.Redis | SyncCluster
    if request.param == "cluster":
        cluster = request.getfixturevalue("redis_cluster")
        env = {"LITELLM_MEMORY_REDIS__URL": cluster.url, "LITELLM_MEMORY_REDIS__CLUSTER": "true"}
        client = SyncCluster.from_url(cluster.url, decode_responses=True)
    else:
        env = {"LITELLM_MEMORY_REDIS__URL": real_redis_url()}
        client = redis.Redis.from_url(real_redis_url(), decode_responses=True)
    with harness.stack(folder, stem="ld", redis_env=env, keys=client) as running:
        yield LoadStack(f"{running.proxy}/v1", client, running.prefix, running.log)


async def _conversation(
    http: httpx.AsyncClient, base: str, user: str, conversation: str, turns: int
) -> None:
    for turn in range(turns):
        body = {
            "model": "demo",
            "user": user,
            "metadata": {"conversation_id": conversation},
            "messages": [{"role": "user", "content": f"{conversation} turn {turn}: I like tea"}],
        }
        if turn % 4 == 3:
            body["stream"] = True
            async with http.stream("POST", f"{base}/chat/completions", json=body) as response:
                assert response.status_code == 200
                async for _ in response.aiter_lines():
                    pass
        else:
            response = await http.post(f"{base}/chat/completions", json=body)
            assert response.status_code == 200, response.text


async def _drive(base: str, jobs: list[tuple[str, str]], turns: int) -> float:
    queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    for job in jobs:
        queue.put_nowait(job)
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    headers = {"Authorization": f"Bearer {MASTER_KEY}"}
    started = time.perf_counter()
    async with httpx.AsyncClient(limits=limits, headers=headers, timeout=120) as http:

        async def client() -> None:
            while not queue.empty():
                user, conversation = queue.get_nowait()
                await _conversation(http, base, user, conversation, turns)

        await asyncio.gather(*(client() for _ in range(CLIENTS)))
    return time.perf_counter() - started


def test_concurrent_conversations_lose_nothing(load_stack: LoadStack) -> None:
    """Issue 9 item 9: N conversations x T turns from 32 concurrent clients through the real
    proxy: every turn stored exactly once, in order, counted in Redis."""
    run = uuid.uuid4().hex[:6]
    jobs = [(f"lu{run}-{i // 2}", f"c{i}") for i in range(CONVERSATIONS)]
    elapsed = asyncio.run(_drive(load_stack.base, jobs, TURNS))
    time.sleep(0.5)  # the last streams' writes finish after their final chunk
    requests = CONVERSATIONS * TURNS
    logger.info(
        "load: %d requests (%d conversations x %d turns, %d clients) in %.1f s: %.0f req/s",
        requests,
        CONVERSATIONS,
        TURNS,
        CLIENTS,
        elapsed,
        requests / elapsed,
    )
    stored = 0
    for user, conversation in jobs:
        key = f"{load_stack.prefix}:{{master:{user}}}:c:{conversation}"
        turns = [_with_text(m) for m in load_stack.redis.zrange(f"{key}:turns", 0, -1)]
        expected = [
            text
            for turn in range(TURNS)
            for text in (
                f"{conversation} turn {turn}: I like tea",
                f"Noted: {conversation} turn {turn}: I like tea",
            )
        ]
        assert [t["text"] for t in turns] == expected, conversation
        assert [t["seq"] for t in turns] == list(range(1, 2 * TURNS + 1))
        assert not any(t.get("partial") for t in turns)
        # a field per call id, and the copy of the extraction cursor (``:cursor``)
        calls = load_stack.redis.hkeys(f"{key}:calls")
        assert len([c for c in calls if not c.startswith(":")]) == TURNS
        stored += len(turns)
    assert stored == 2 * requests
    log = load_stack.log.read_text(errors="replace")
    assert "write failed" not in log and "not stored after retries" not in log
    assert "pre-call failed" not in log


def _with_text(member: bytes) -> dict[str, object]:
    turn = json.loads(member)
    return {**turn, "text": stored_text(turn)}
