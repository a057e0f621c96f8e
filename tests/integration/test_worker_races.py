"""Extraction jobs against what happens while the model answers (another job of the user, a
pin), an abandoned batched write, a step with nothing to read, and the sweep."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import TimeoutError as RedisTimeout

from litellm_memory_hook.core.indexing import indexed_chain
from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.extraction.worker import ExtractionWorker
from litellm_memory_hook.memory_api import MemoryAPI, resolve_target
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.settings import MemorySettings, parse_alias_config
from litellm_memory_hook.store.keys import ConversationKeys, due_key, sweep_key
from litellm_memory_hook.store.redis_store import MemoryStore
from tests.integration.test_worker import ScriptedModel, _memories, _reply, _talk, _worker
from tests.support.hook_calls import ALIASES, Auth, chat_request, make_hook, model_response


async def test_a_conflict_retry_brings_back_a_fact_another_job_replaced(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """Two conversations of one user share the memory set. Job B (default conversation) waits
    for the model while job A (conversation c2) replaces "Lives in Pune." by "Lives in Mumbai
    now.". B loses the compare-and-set; re-planned with the fresh set, the Pune fact it was
    shown (and kept) would be added again as new, which no serial order of the two jobs gives.
    B gives up instead and runs again on the new set. (Field case C29, a WATCH that silently
    does nothing: the commit is one Lua compare-and-set of the memory set's version and the
    conversation's cursor, so the loser of two concurrent commits sees a conflict, then a
    bounded retry; no WATCH is used.)"""
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
    # B's reply was drawn from a set that is gone: nothing of it is kept, and B runs again
    assert outcome_b.status == "conflict"
    assert await _memories(any_redis, prefix) == ["Lives in Mumbai now."]
    again = ScriptedModel([_reply(["Lives in Mumbai now.", "Plays chess."])])
    assert (await _worker(any_redis, prefix, again).run_job(ref_b)).status == "committed"
    assert "Lives in Mumbai now." in again.calls[0][1]["content"]
    assert sorted(await _memories(any_redis, prefix)) == ["Lives in Mumbai now.", "Plays chess."]


async def test_an_abandoned_batched_write_does_not_defer_extraction_forever(
    any_redis: aioredis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write too large for one script reserves its seqs and marks meta ``writing:<call id>``;
    if it fails part-way and is never retried (the outage buffer dropped it after
    write_buffer_max_age_s, or the proxy was restarted), nothing ever removes that field. The
    worker then defers the conversation's job every DEFER_MS, for good: a day later, and
    after new messages and a flush, the job is still "deferred" and the memories never change."""
    hook = make_hook(any_redis, prefix)
    await _talk(hook, 1)
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    failing = MemoryStore(any_redis, ttl_s=3600, batch_turns=2)
    real = failing._write_batch
    calls = {"n": 0}

    async def flaky(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] > 1:
            raise RedisTimeout("simulated timeout")
        return await real(*args, **kwargs)

    failing._write_batch = flaky  # type: ignore[assignment]
    chain = indexed_chain(
        [Turn(role="user", text=f"import line {i}", ts_ms=1000 + i) for i in range(6)]
    )
    with pytest.raises(StoreError):
        await failing.append(keys, chain, call_id="import-1")
    names = [k.decode() if isinstance(k, bytes) else k for k in await any_redis.hkeys(keys.meta)]
    assert any(name.startswith("writing:") for name in names)

    await _talk(hook, 1, start=1, memory_flush=True)  # life goes on
    later = time.time() + 86400  # a day later: nobody can still be finishing that write
    monkeypatch.setattr(time, "time", lambda: later)
    worker = _worker(any_redis, prefix, ScriptedModel([_reply(["Has a garden."])]))
    outcome = await worker.run_job(keys.ref)
    assert outcome.status != "deferred"


async def test_a_job_with_no_message_to_read_does_not_rewrite_the_memories(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """After an extraction, the only new turns are an agent's tool step (an assistant message
    with tool_calls and no text, then the tool result: a slow tool makes the conversation due
    by quiet). _batch keeps none of them but moves ``through`` past them, so the job still asks
    the model, with new_lines "(none)", and commits whatever comes back: a reply of
    ``{"memories": [], "summary": ""}`` deletes every shown memory and the summary although no
    message was read. Nothing to read should just move the cursor."""
    hook = make_hook(any_redis, prefix)
    await _talk(hook, 1, memory_flush=True)
    await _worker(
        any_redis, prefix, ScriptedModel([_reply(["Has a garden."], "They talked gardens.")])
    ).run_due()
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    call = {"id": "t1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    store = MemoryStore(any_redis, ttl_s=3600)
    step = [
        Turn(role="assistant", text="", ts_ms=5000, tool_calls=(call,)),
        Turn(role="tool", text='{"temp": 21}', ts_ms=5001, tool_call_id="t1"),
    ]
    assert (await store.append(keys, indexed_chain(step), call_id="tool-step")).written
    await any_redis.zadd(due_key(prefix), {keys.ref: 0})  # due by quiet

    model = ScriptedModel([_reply([], "")])
    outcome = await _worker(any_redis, prefix, model).run_job(keys.ref)
    assert model.calls == [], outcome
    assert await _memories(any_redis, prefix) == ["Has a garden."]
    assert (await any_redis.hget(keys.meta, "summary")) == b"They talked gardens."


async def test_the_sweep_leaves_conversations_of_an_alias_without_extraction_alone(
    real_redis: aioredis.Redis, prefix: str
) -> None:
    """An alias with ``extraction: false``: the hook never schedules its conversations, but
    their cursor stays 0 below their seq, so every sweep puts each of them in the due set, a
    worker runs a job that reads it and discards it, and the next sweep does it again, for
    every such conversation, as long as they live."""
    aliases = {"noext": {"memory": {"enabled": True, "extraction": False}}}
    hook = MemoryHook(
        settings=MemorySettings(key_prefix=prefix, worker_in_proxy=False),
        redis=real_redis,
        alias_lookup=lambda model: aliases.get(model),
    )
    data = chat_request("My cat is called Miso.", model="noext", call_id="n1")
    out = await hook.async_pre_call_hook(Auth(), None, data, "acompletion")
    assert out is not None
    await hook.async_post_call_success_hook(out, Auth(), model_response("Nice."))
    assert await real_redis.zcard(due_key(prefix)) == 0  # the hook schedules nothing

    worker = ExtractionWorker(
        real_redis,
        MemorySettings(key_prefix=prefix, extraction_sweep_s=60, extraction_quiet_s=0),
        ScriptedModel(),
        alias_lookup=lambda name: parse_alias_config(aliases.get(name)),
    )
    rounds: list[object] = []
    for _ in range(2):
        await real_redis.delete(sweep_key(prefix))  # the next sweep interval
        rounds.append(await worker.sweep())
        rounds.append([o.status for o in await worker.run_due()])
    assert rounds == [0, [], 0, []]


async def test_a_pin_made_while_the_model_answers_drops_what_repeats_it(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """parse_extraction drops an item that repeats a pinned memory: equal key, or containing a
    pinned key of two or more words. When the user pins while the job waits for the model, the
    commit loses the compare-and-set and _filter_again "applies the pins again", but only by
    key equality: "Her daughter is Asha, who is 7." survives next to the pinned "Daughter is
    Asha", although the same reply with the pin in place before the job drops it."""
    settings = MemorySettings(key_prefix=prefix)
    api = MemoryAPI(any_redis, settings)
    target = resolve_target(
        settings,
        lambda n: parse_alias_config(ALIASES.get(n)),
        tenant="master",
        user="u-A",
        model="demo",
    )
    hook = make_hook(any_redis, prefix)
    await _talk(hook, 1, memory_flush=True)
    model = ScriptedModel([_reply(["Her daughter is Asha, who is 7.", "Grows basil."])])
    model.gate = asyncio.Event()
    job = asyncio.create_task(_worker(any_redis, prefix, model).run_due())
    while not model.calls:
        await asyncio.sleep(0.01)
    await api.pin(target, "Daughter is Asha")
    model.gate.set()
    [outcome] = await job
    assert outcome.status == "committed"
    assert await _memories(any_redis, prefix) == ["Grows basil."]


async def test_a_job_that_redis_failed_runs_again(
    any_redis: aioredis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Redis error in the middle of a job (a blip: Redis answers again when the job ends)
    leaves it due a few seconds later; before, the job's end took it out of the due set and it
    waited for the next message or the sweep."""
    hook = make_hook(any_redis, prefix)
    await _talk(hook, 1, memory_flush=True)
    worker = _worker(any_redis, prefix, ScriptedModel([_reply(["Has a garden."])]))
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")

    async def blip(*args: Any, **kwargs: Any) -> Any:
        raise StoreError("read memories: Connection reset by peer")

    monkeypatch.setattr(worker.memsets, "read", blip)
    before = time.time() * 1000
    outcome = await worker.run_job(keys.ref)
    assert outcome.status == "failed" and outcome.store_failed
    due = await worker.queue.due_time(keys)
    assert due is not None and before + 4_000 <= due <= time.time() * 1000 + 5_000


async def test_the_lease_outlasts_the_longest_job(any_redis: aioredis.Redis, prefix: str) -> None:
    """A job may make two model calls of extraction_timeout_s each: its lease (and the due
    entry a killed worker leaves) lasts at least that plus 30 s, so a second worker does not
    run the same job while the first still waits for the model (review: 120 s < 2 x 60 s)."""
    from litellm_memory_hook.extraction.worker import lease_s

    assert lease_s(MemorySettings()) == 150
    assert lease_s(MemorySettings(extraction_lease_s=600)) == 600
    hook = make_hook(any_redis, prefix)
    await _talk(hook, 1, memory_flush=True)
    model = ScriptedModel([_reply(["Has a garden."])])
    model.gate = asyncio.Event()
    worker = _worker(any_redis, prefix, model)
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    job = asyncio.create_task(worker.run_job(keys.ref))
    while not model.calls:
        await asyncio.sleep(0.01)
    due = await worker.queue.due_time(keys)
    ttl_ms = await any_redis.pttl(keys.lease)
    model.gate.set()
    assert (await job).status == "committed"
    assert due is not None and due >= time.time() * 1000 + 140_000
    assert ttl_ms > 140_000


async def test_a_job_past_a_long_tool_loop_reads_the_messages_after_it(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A job reads at most MAX_TURNS_PER_JOB turns after the cursor. When they are all an
    agent's tool steps (nothing a person said), the job moves the cursor past them without a
    model call, but it says nothing of the turns beyond them (``more``): its end takes the
    conversation out of the due set, and the user's message after the loop waits for the next
    message or the sweep, where a job that read lines runs again at once."""
    from litellm_memory_hook.extraction.worker import MAX_TURNS_PER_JOB

    hook = make_hook(any_redis, prefix)
    await _talk(hook, 1, memory_flush=True)
    await _worker(any_redis, prefix, ScriptedModel([_reply(["Has a garden."])])).run_due()
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    steps: list[Turn] = []
    for i in range(MAX_TURNS_PER_JOB // 2):
        call = {"id": f"t{i}", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        steps.append(Turn(role="assistant", text="", ts_ms=5000 + 2 * i, tool_calls=(call,)))
        steps.append(Turn(role="tool", text="a.txt", ts_ms=5001 + 2 * i, tool_call_id=f"t{i}"))
    steps.append(Turn(role="user", text="I moved to Berlin last week.", ts_ms=9000))
    steps.append(Turn(role="assistant", text="How is Berlin?", ts_ms=9001))
    store = MemoryStore(any_redis, ttl_s=3600)
    assert (await store.append(keys, indexed_chain(steps), call_id="agent-loop")).written
    await any_redis.zadd(due_key(prefix), {keys.ref: 0})  # due by quiet

    model = ScriptedModel([_reply(["Has a garden.", "Lives in Berlin."])])
    worker = _worker(any_redis, prefix, model)
    statuses = []
    for _ in range(3):
        statuses += [o.status for o in await worker.run_due()]
    assert len(model.calls) == 1, statuses
    assert await _memories(any_redis, prefix) == ["Has a garden.", "Lives in Berlin."]


async def test_one_alias_with_a_bad_memory_block_does_not_stop_the_sweep(
    real_redis: aioredis.Redis, prefix: str
) -> None:
    """The sweep now looks up each conversation's alias (to leave aliases without extraction
    alone). The proxy's lookup (MemoryHook.alias_config) and the CLI worker's raise ConfigError
    for an alias whose ``model_info.memory`` block became invalid (a typo in an edit of the
    config): the sweep then raises at that alias's first conversation, and no conversation of
    any other alias is scheduled again, at every sweep. Before, each such job failed on its
    own."""
    hook = make_hook(real_redis, prefix)
    await _talk(hook, 1)  # alias demo, user u-A
    data = chat_request("I grow tomatoes.", model="tiny", user="u-B", call_id="t1")
    out = await hook.async_pre_call_hook(Auth(), None, data, "acompletion")
    assert out is not None
    await hook.async_post_call_success_hook(out, Auth(), model_response("Nice."))
    await real_redis.delete(due_key(prefix))  # the schedules were lost (an outage)

    def lookup(name: str) -> Any:
        broken = {"memory": {"enabled": True, "window": {"max_chars": 5}}}  # invalid now
        return parse_alias_config(broken if name == "tiny" else ALIASES.get(name))

    worker = ExtractionWorker(
        real_redis,
        MemorySettings(key_prefix=prefix, extraction_sweep_s=60),
        ScriptedModel(),
        alias_lookup=lookup,
    )
    assert await worker.sweep() >= 1
    demo = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    assert await real_redis.zscore(due_key(prefix), demo.ref) is not None
