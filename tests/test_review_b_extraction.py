"""Review findings (extraction path): each test fails on the current code."""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis

from litellm_memory_hook.store.keys import ConversationKeys

from .test_worker import ScriptedModel, _memories, _reply, _talk, _worker
from .conftest import make_hook


async def test_a_conflict_retry_brings_back_a_fact_another_job_replaced(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """Two conversations of one user share the memory set. Job B (default conversation) waits
    for the model while job A (conversation c2) replaces "Lives in Pune." by "Lives in Mumbai
    now.". B loses the compare-and-set and re-plans with the fresh set: the Pune fact it was
    shown (and kept) is no longer live, so it is added again as a new memory. Any serial order
    of the two jobs leaves no Pune fact."""
    hook = make_hook(any_redis, prefix)
    await _talk(hook, 1, memory_flush=True)
    await _worker(any_redis, prefix, ScriptedModel([_reply(["Lives in Pune."])])).run_due()
    assert await _memories(any_redis, prefix) == ["Lives in Pune."]

    await _talk(hook, 1, start=1, memory_flush=True)  # default conversation: job B
    await _talk(hook, 1, start=2, conversation_id="c2")  # conversation c2: job A
    ref_b = ConversationKeys.for_ids(prefix, "master", "u-A", "demo").ref
    ref_a = ConversationKeys.for_ids(prefix, "master", "u-A", "c2").ref

    model_b = ScriptedModel([_reply(["Lives in Pune.", "Plays chess."])])
    model_b.gate = asyncio.Event()
    job_b = asyncio.create_task(_worker(any_redis, prefix, model_b).run_job(ref_b))
    while not model_b.calls:
        await asyncio.sleep(0.01)
    assert "Lives in Pune." in model_b.calls[0][1]["content"]  # shown to B

    outcome_a = await _worker(
        any_redis, prefix, ScriptedModel([_reply(["Lives in Mumbai now."])])
    ).run_job(ref_a)
    assert outcome_a.status == "committed"
    assert await _memories(any_redis, prefix) == ["Lives in Mumbai now."]

    model_b.gate.set()
    outcome_b = await job_b
    assert outcome_b.status == "committed"
    stored = await _memories(any_redis, prefix)
    assert "Plays chess." in stored
    assert "Lives in Pune." not in stored, stored
