"""The post-call write's cost, measured in process for ``bench proxy``: the hook as the proxy makes
it, on the run's Redis, timed around its pre-call and post-call (:func:`write_cost`)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from benchmarks.proxy_report import WriteCost
from benchmarks.proxy_talk import MEMORY_ALIAS, SYSTEM_PROMPT, conversation_lines


async def write_cost(redis_url: str, prefix: str, samples: int) -> WriteCost:
    """Time both hook halves in-process on a conversation growing to ``samples`` turn pairs
    (worker off; the extraction schedule is still written)."""
    from litellm.types.utils import ModelResponse

    from litellm_memory_hook.proxy.hook import MemoryHook
    from litellm_memory_hook.proxy.request_data import METADATA_KEY
    from litellm_memory_hook.settings import (
        ExtractionSettings,
        MemorySettings,
        RedisSettings,
        StorageSettings,
    )
    from litellm_memory_hook.store.client import redis_client

    class _Auth:
        token = "litellm_proxy_master_key"
        team_id = None
        user_id = "default_user_id"

    client = redis_client(redis_url)  # the client the hook makes in the proxy
    settings = MemorySettings(
        redis=RedisSettings(url=redis_url),
        storage=StorageSettings(key_prefix=prefix),
        extraction=ExtractionSettings(worker_in_proxy=False),
    )
    hook = MemoryHook(
        settings=settings,
        redis=client,
        alias_lookup=lambda model: {"memory": {"enabled": True, "system_prompt": SYSTEM_PROMPT}},
    )
    write_ms: list[float] = []
    writer = hook.engine.writer
    original = writer.write

    async def timed_write(*args: Any, **kwargs: Any) -> None:
        started = time.perf_counter()
        try:
            await original(*args, **kwargs)
        finally:
            write_ms.append((time.perf_counter() - started) * 1000)

    writer.write = timed_write  # type: ignore[method-assign]
    lines = conversation_lines(99, samples + 10)
    pre: list[float] = []
    pre_cpu: list[float] = []
    post: list[float] = []
    post_cpu: list[float] = []
    sign: list[float] = []
    try:
        for i, line in enumerate(lines):
            data: dict[str, Any] = {
                "model": MEMORY_ALIAS,
                "user": "write-bench",
                "messages": [{"role": "user", "content": line}],
                "litellm_call_id": str(uuid.uuid4()),
            }
            started, cpu = time.perf_counter(), time.thread_time()
            await hook.async_pre_call_hook(_Auth(), None, data, "acompletion")
            pre_ms = (time.perf_counter() - started) * 1000
            pre_cpu_ms = (time.thread_time() - cpu) * 1000
            record = data["metadata"][METADATA_KEY]
            started = time.perf_counter()
            hook.engine.signer.sign(record)
            sign_ms = (time.perf_counter() - started) * 1000
            response = ModelResponse(
                id=f"r{i}",
                choices=[
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": f"Noted: {line[:40]}"},
                        "finish_reason": "stop",
                    }
                ],
            )
            started, cpu = time.perf_counter(), time.thread_time()
            await hook.async_post_call_success_hook(data, _Auth(), response)
            post_ms = (time.perf_counter() - started) * 1000
            cpu_ms = (time.thread_time() - cpu) * 1000
            if i >= 10:  # warm-up
                pre.append(pre_ms)
                pre_cpu.append(pre_cpu_ms)
                post.append(post_ms)
                post_cpu.append(cpu_ms)
                sign.append(sign_ms)
        if hook.counters.get("postcall_errors") or hook.counters.get("precall_errors"):
            raise RuntimeError(f"the hook failed during the write benchmark: {hook.counters}")
        # The floor under both halves: one redis-py round trip (a PING) on the same client.
        trip: list[float] = []
        trip_cpu: list[float] = []
        for _ in range(samples + 10):
            started, cpu = time.perf_counter(), time.thread_time()
            await client.ping()
            trip.append((time.perf_counter() - started) * 1000)
            trip_cpu.append((time.thread_time() - cpu) * 1000)
        return WriteCost(
            samples, pre, pre_cpu, post, write_ms[10:], post_cpu, sign, trip[10:], trip_cpu[10:]
        )
    finally:
        await hook.drain()
        await client.aclose()


__all__ = ["write_cost"]
