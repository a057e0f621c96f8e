"""LiteLLM's real key check (401 conversion) and the memory routes mounted on LiteLLM's real proxy
app, in a subprocess, on the real Redis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import redis.asyncio as aioredis

from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.settings import MemorySettings
from tests.integration.test_routes import ALIASES, REDIS_URL, target

pytestmark = pytest.mark.redis


REAL_PROXY_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, os, sys
    import httpx
    import litellm.proxy.proxy_server as ps
    from litellm_memory_hook.proxy import mounting
    from litellm_memory_hook.proxy.hook import MemoryHook
    from litellm_memory_hook.settings import MemorySettings

    prefix, url = sys.argv[1], sys.argv[2]
    hook = MemoryHook(
        settings=MemorySettings(key_prefix=prefix, redis_url=url, worker_in_proxy=False),
        alias_lookup=lambda name: {"memory": {"enabled": True}} if name == "demo" else None,
    )
    stopped = []

    async def fake_shutdown():
        stopped.append(True)

    hook.shutdown = fake_shutdown
    ps.master_key = "sk-test-master"
    out = {}
    before = len(ps.app.routes)
    out["mount"] = [mounting.mount(hook), mounting.mount(hook)]
    out["added"] = len(ps.app.routes) - before

    async def main():
        transport = httpx.ASGITransport(app=ps.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy.test") as c:
            q = "/memory/v1/memories?user=alice&model=demo"
            for name, headers in (
                ("missing", {}),
                ("wrong", {"Authorization": "Bearer sk-wrong"}),
                ("master", {"Authorization": "Bearer sk-test-master"}),
                ("litellm_header", {"x-litellm-api-key": "sk-test-master"}),
            ):
                r = await c.get(q, headers=headers)
                out[name] = [r.status_code, r.json()]
            r = await c.post(
                "/memory/v1/pinned",
                headers={"Authorization": "Bearer sk-test-master"},
                json={"user": "alice", "model": "demo", "text": "Mi gato se llama Miso."},
            )
            out["pin"] = [r.status_code, r.json()]
            r = await c.get("/openapi.json")
            out["openapi"] = sorted(p for p in r.json()["paths"] if p.startswith("/memory/"))
        await ps.proxy_shutdown_event()
        out["stopped"] = stopped
        await hook.store.redis.aclose()

    asyncio.run(main())
    print("RESULT " + json.dumps(out))
    """
)


async def test_real_litellm_auth_and_mount(key_prefix: str, real_redis: aioredis.Redis) -> None:
    """On LiteLLM's real proxy app (no database, a master key): mount() adds the routes once,
    a missing or wrong key gets 401 with a clear detail (LiteLLM alone: 500 / 400), the master
    key (Authorization or x-litellm-api-key) works and writes tenant 'master', /openapi.json
    lists the routes, and the proxy's shutdown event runs the hook's shutdown."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, "-c", REAL_PROXY_SCRIPT, key_prefix, REDIS_URL],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, done.stdout[-3000:] + done.stderr[-3000:]
    out = json.loads(lines[-1].removeprefix("RESULT "))
    assert out["mount"] == [True, True]
    # the memory API's router, the inspector's (one entry each on FastAPI 0.16x, or their
    # routes) and the count_tokens route in front of LiteLLM's
    assert out["added"] == 3 or out["added"] > 8
    assert out["missing"][0] == 401
    assert "missing API key" in out["missing"][1]["detail"]
    assert out["wrong"] == [401, {"detail": "invalid API key"}]
    assert out["master"] == [200, {"pinned": [], "memories": [], "version": 0}]
    assert out["litellm_header"][0] == 200
    assert out["pin"][0] == 201 and out["pin"][1]["text"] == "Mi gato se llama Miso."
    assert {
        "/memory/v1/export",
        "/memory/v1/flush",
        "/memory/v1/memories",
        "/memory/v1/memories/{id}",
        "/memory/v1/pinned",
        "/memory/v1/pinned/{id}",
        "/memory/v1/summary",
        "/memory/v1/users/{user}",
    } <= set(out["openapi"])
    assert out["stopped"] == [True]
    hook = MemoryHook(
        settings=MemorySettings(key_prefix=key_prefix, redis_url=REDIS_URL),
        redis=real_redis,
        alias_lookup=lambda name: ALIASES.get(name),
    )
    pinned = await real_redis.hvals(target(hook, tenant="master").memory.pinned)
    assert pinned == [b"Mi gato se llama Miso."]
