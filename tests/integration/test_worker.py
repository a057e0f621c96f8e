"""The extraction job and worker on fake and real Redis, with a scripted model (issue 7).

Triggers (every N messages, quiet, flush), one job per conversation under concurrency, a killed
worker's lease, the compare-and-set against a user's edit, tombstones, failures that keep what was
stored, the due set that never grows without bound, and the sweep.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Sequence
from typing import Any

import pytest
import redis.asyncio as aioredis

from litellm_memory_hook.core.escape import escape_data
from litellm_memory_hook.errors import ExtractionError
from litellm_memory_hook.extraction.changes import ChangePlan
from litellm_memory_hook.extraction.client import ModelReply
from litellm_memory_hook.extraction.parse import ExtractionResult
from litellm_memory_hook.extraction.prompt import EXTRACTION_MARKER
from litellm_memory_hook.extraction.worker import ExtractionWorker, plan_changes
from litellm_memory_hook.memory_api import MemoryAPI, resolve_target
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.settings import MemorySettings, parse_alias_config
from litellm_memory_hook.store.keys import ConversationKeys, due_key, stats_key, user_scope
from litellm_memory_hook.store.memory_sets import MemoryItem
from tests.support.hook_calls import ALIASES, Auth, chat_request, make_hook, model_response


class ScriptedModel:
    """A model that answers extraction prompts from a queue (or a function) and records them."""

    def __init__(self, replies: Sequence[str] = (), *, delay_s: float = 0.0) -> None:
        self.replies = list(replies)
        self.calls: list[list[dict[str, str]]] = []
        self.delay_s = delay_s
        self.gate: asyncio.Event | None = None

    async def complete(
        self, model: str, messages: list[dict[str, str]], *, json_mode: bool, timeout_s: float
    ) -> ModelReply:
        self.calls.append(messages)
        if self.gate is not None:
            await self.gate.wait()
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if not self.replies:
            raise ExtractionError("no scripted reply left")
        return ModelReply(self.replies.pop(0), 100, 20)


def _reply(memories: list[str], summary: str = "They talked.") -> str:
    return json.dumps({"memories": memories, "summary": summary})


def _lookup(name: str) -> Any:
    return parse_alias_config(ALIASES.get(name))


def _worker(client: aioredis.Redis, prefix: str, model: Any, **settings: Any) -> ExtractionWorker:
    return ExtractionWorker(
        client,
        MemorySettings(key_prefix=prefix, **settings),
        model,
        alias_lookup=_lookup,
    )


async def _talk(
    hook: MemoryHook, n: int, *, user: str = "u-A", start: int = 0, pad: str = "", **meta: Any
) -> None:
    for i in range(start, start + n):
        data = chat_request(f"message number {i} about my garden{pad}", user=user, call_id=f"c{i}")
        if meta:
            data["metadata"] = dict(meta)
        out = await hook.async_pre_call_hook(Auth(), None, data, "acompletion")
        assert out is not None
        await hook.async_post_call_success_hook(out, Auth(), model_response(f"reply {i}"))


def _keys(prefix: str, user: str = "u-A") -> ConversationKeys:
    return ConversationKeys.for_ids(prefix, "master", user, "demo")


async def _memories(client: aioredis.Redis, prefix: str, user: str = "u-A") -> list[str]:
    memory = _keys(prefix, user).user_keys.memory_set(user_scope("demo"))
    raw = await client.hgetall(memory.memories)
    return [raw[k].decode() for k in sorted(raw)]


async def test_twelve_messages_make_one_job_and_the_next_request_carries_its_result(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """Issue 7 done-when: 13 messages (7 turns, 14 stored messages: past the 12-message trigger)
    lead to one job; its memories reach a new conversation's head at once and this one's at its
    next epoch (the cache layout)."""
    hook = make_hook(any_redis, prefix)
    await _talk(hook, 5)
    assert await any_redis.zscore(due_key(prefix), _keys(prefix).ref) > time.time() * 1000
    await _talk(hook, 2, start=5)  # 14 messages since the cursor: due now
    model = ScriptedModel(
        [_reply(["Has a garden with tomatoes."], "They talked about the garden.")]
    )
    worker = _worker(any_redis, prefix, model)
    outcomes = await worker.run_due()
    assert [o.status for o in outcomes] == ["committed"]
    assert len(model.calls) == 1
    system, user = model.calls[0]
    assert system["content"].startswith(EXTRACTION_MARKER)
    assert "message number 0 about my garden" in user["content"]
    assert await _memories(any_redis, prefix) == ["Has a garden with tomatoes."]
    meta = await any_redis.hgetall(_keys(prefix).meta)
    assert meta[b"summary"] == b"They talked about the garden."
    assert int(meta[b"cursor"]) == 14
    assert await worker.run_due() == []  # done: left the due set
    out = await hook.async_pre_call_hook(
        Auth(), None, chat_request("What grows there?", call_id="q"), "acompletion"
    )
    assert out is not None
    # the cache layout: this conversation's head keeps its epoch's snapshot (its window still
    # holds the turns the job read); the new memories and summary come at its next epoch
    content = out["messages"][0]["content"]
    assert "Has a garden with tomatoes." not in content
    assert "They talked about the garden." not in content
    other = await hook.async_pre_call_hook(
        Auth(),
        None,
        chat_request("What grows there?", call_id="q2", metadata={"conversation_id": "new"}),
        "acompletion",
    )
    assert other is not None  # a new conversation starts with the newest memories
    assert "Has a garden with tomatoes." in other["messages"][0]["content"]
    assert "They talked about the garden." not in other["messages"][0]["content"]


async def test_quiet_and_flush_trigger_a_job(any_redis: aioredis.Redis, prefix: str) -> None:
    """A few messages become due after extraction_quiet_s of quiet; metadata.memory_flush makes
    the conversation due at once."""
    hook = make_hook(any_redis, prefix, extraction_quiet_s=0.3)
    await _talk(hook, 1)
    worker = _worker(any_redis, prefix, ScriptedModel([_reply(["Likes gardens."])]))
    assert await worker.run_due() == []  # not quiet long enough yet
    await asyncio.sleep(0.4)
    assert [o.status for o in await worker.run_due()] == ["committed"]

    hook2 = make_hook(any_redis, prefix, extraction_quiet_s=3600)
    await _talk(hook2, 1, user="u-B", memory_flush=True)
    worker2 = _worker(any_redis, prefix, ScriptedModel([_reply(["Waters plants daily."])]))
    assert [o.status for o in await worker2.run_due()] == ["committed"]
    assert await _memories(any_redis, prefix, "u-B") == ["Waters plants daily."]


async def test_pinned_memories_reach_the_model_exactly_and_no_job_changes_them(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """Pinned memories are shown to the extractor as fixed, and a reply that repeats one does not
    store it as an extracted memory; the chat request carries it exactly as typed."""
    settings = MemorySettings(key_prefix=prefix)
    api = MemoryAPI(any_redis, settings)
    target = resolve_target(settings, _lookup, tenant="master", user="u-A", model="demo")
    typed = "Mi hija se llama Asha <3 — cumpleaños: 3 de marzo"
    item = await api.pin(target, typed)
    hook = make_hook(any_redis, prefix)
    await _talk(hook, 1, memory_flush=True)
    model = ScriptedModel(
        [_reply([typed, "mi hija se llama asha 3 cumpleaños 3 de marzo", "Grows basil."])]
    )
    await _worker(any_redis, prefix, model).run_due()
    assert "Mi hija se llama Asha" in model.calls[0][1]["content"]
    assert await _memories(any_redis, prefix) == ["Grows basil."]
    listing = await api.list(target)
    assert [(p.id, p.text) for p in listing.pinned] == [(item.id, typed)]
    out = await hook.async_pre_call_hook(
        Auth(), None, chat_request("hola", call_id="z"), "acompletion"
    )
    assert out is not None
    # exactly as typed, escaped as data: only "<" becomes its look-alike
    assert escape_data(typed) == "Mi hija se llama Asha ‹3 — cumpleaños: 3 de marzo"
    assert escape_data(typed) in out["messages"][0]["content"]


async def test_two_workers_on_one_due_conversation_run_one_job(
    real_redis: aioredis.Redis, prefix: str
) -> None:
    """Issue 7 done-when: two workers claim the same due conversation; one runs the job, the
    other finds the lease taken; one model call, one commit."""
    hook = make_hook(real_redis, prefix)
    await _talk(hook, 1, memory_flush=True)
    model = ScriptedModel([_reply(["One fact."]), _reply(["Another fact."])], delay_s=0.2)
    a, b = _worker(real_redis, prefix, model), _worker(real_redis, prefix, model)
    ref = _keys(prefix).ref
    first, second = await asyncio.gather(a.run_job(ref), b.run_job(ref))
    assert sorted([first.status, second.status]) == ["busy", "committed"]
    assert len(model.calls) == 1
    assert await _memories(real_redis, prefix) == ["One fact."]


async def test_a_worker_killed_mid_job_loses_its_lease_and_the_job_runs_once_more(
    real_redis: aioredis.Redis, prefix: str
) -> None:
    """Issue 7 done-when: a worker that dies holding the lease (killed: it never finishes, as
    its claim is left in Redis) leaves the conversation due again when the lease expires;
    another worker then commits once."""
    hook = make_hook(real_redis, prefix)
    await _talk(hook, 1, memory_flush=True)
    dead = _worker(real_redis, prefix, ScriptedModel(), extraction_lease_s=0.5)
    assert await dead.queue.claim(
        _keys(prefix), "killed-worker", now_ms=int(time.time() * 1000), lease_ms=500
    )
    survivor = _worker(
        real_redis, prefix, ScriptedModel([_reply(["Survived."])]), extraction_lease_s=0.5
    )
    assert await survivor.run_due() in ([], [])  # lease held, not due yet
    await asyncio.sleep(0.7)
    outcomes = await survivor.run_due()
    assert [o.status for o in outcomes] == ["committed"]
    assert await _memories(real_redis, prefix) == ["Survived."]
    assert await real_redis.zcard(due_key(prefix)) == 0


async def test_a_stale_job_loses_to_the_users_edit(any_redis: aioredis.Redis, prefix: str) -> None:
    """Issue 7 done-when, C19, C20: while a job waits for the model, the user deletes a memory and
    pins a fact; the job's commit re-reads, and neither the deleted memory nor the pinned fact
    comes back as an extracted memory; the other results are kept."""
    settings = MemorySettings(key_prefix=prefix)
    api = MemoryAPI(any_redis, settings)
    target = resolve_target(settings, _lookup, tenant="master", user="u-A", model="demo")
    hook = make_hook(any_redis, prefix)
    await _talk(hook, 1, memory_flush=True)
    await _worker(
        any_redis, prefix, ScriptedModel([_reply(["I'm allergic to peanuts", "Has a cat."])])
    ).run_due()
    await _talk(hook, 1, start=1, memory_flush=True)
    model = ScriptedModel(
        [_reply(["I'm allergic to peanuts", "Has a cat.", "Plays chess.", "Works at night."])]
    )
    model.gate = asyncio.Event()
    worker = _worker(any_redis, prefix, model)
    job = asyncio.create_task(worker.run_due())
    while not model.calls:
        await asyncio.sleep(0.01)
    listing = await api.list(target)
    peanuts = next(m for m in listing.memories if "peanuts" in m.text)
    await api.delete_memory(target, peanuts.id)
    await api.pin(target, "Works at night.")
    model.gate.set()
    [outcome] = await job
    assert outcome.status == "committed"
    assert await _memories(any_redis, prefix) == ["Has a cat.", "Plays chess."]
    # and a later job over old turns that still mention it does not bring it back (tombstone)
    await _talk(hook, 1, start=2, memory_flush=True)
    await _worker(
        any_redis,
        prefix,
        ScriptedModel([_reply(["i'm allergic to peanuts!", "Has a cat.", "Plays chess."])]),
    ).run_due()
    assert await _memories(any_redis, prefix) == ["Has a cat.", "Plays chess."]


async def test_unusable_replies_keep_what_was_stored(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """C10: a reply without JSON, then a wrong shape after the retry, changes nothing; the job
    counts as failed, the retry message was sent once, and the conversation is due again only
    after extraction_backoff_s (30 s; issue 27: an unusable reply is a failed try like any other,
    never one job per message)."""
    hook = make_hook(any_redis, prefix)
    await _talk(hook, 1, memory_flush=True)
    await _worker(any_redis, prefix, ScriptedModel([_reply(["Has a cat."], "Cats.")])).run_due()
    await _talk(hook, 1, start=1, memory_flush=True)
    model = ScriptedModel(
        ["Sorry, I cannot do that.", json.dumps({"facts": ["x"], "summary": "y"})]
    )
    [outcome] = await _worker(any_redis, prefix, model).run_due()
    assert outcome.status == "failed"
    assert len(model.calls) == 2 and model.calls[1][-1]["content"] == "Reply with valid JSON only."
    assert await _memories(any_redis, prefix) == ["Has a cat."]
    meta = await any_redis.hgetall(_keys(prefix).meta)
    assert meta[b"summary"] == b"Cats." and int(meta[b"cursor"]) == 2
    due = await any_redis.zscore(due_key(prefix), _keys(prefix).ref)
    assert due is not None and due >= time.time() * 1000 + 25_000
    stats = await any_redis.hgetall(stats_key(prefix))
    assert int(stats[b"jobs_failed"]) == 1 and int(stats[b"jobs_retried"]) == 1
    assert int(stats[b"failures_reply"]) == 1


async def test_a_failed_model_call_runs_again_a_minute_later(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A model call that fails (connection refused, timeout: the model may answer later)
    counts as failed and keeps the conversation due extraction_backoff_s (30 s) later (a
    fresh-user test saw a dead model endpoint drop the job until the 600 s sweep); the retry
    then commits."""
    retry_ms = 30_000

    hook = make_hook(any_redis, prefix)
    await _talk(hook, 1, memory_flush=True)
    before = int(time.time() * 1000)
    [outcome] = await _worker(any_redis, prefix, ScriptedModel([])).run_due()
    assert (outcome.status, outcome.call_failed) == ("failed", True)
    due = await any_redis.zscore(due_key(prefix), _keys(prefix).ref)
    assert due is not None and before + retry_ms <= due <= before + retry_ms + 5000
    stats = await any_redis.hgetall(stats_key(prefix))
    assert int(stats[b"jobs_failed"]) == 1
    await any_redis.delete(_keys(prefix).extraction_failures)  # the backoff has passed
    await any_redis.zadd(due_key(prefix), {_keys(prefix).ref: 0})
    [outcome] = await _worker(any_redis, prefix, ScriptedModel([_reply(["Has a cat."])])).run_due()
    assert outcome.status == "committed"
    assert await _memories(any_redis, prefix) == ["Has a cat."]


async def test_a_job_without_a_user_is_dropped(any_redis: aioredis.Redis, prefix: str) -> None:
    """C17: a due entry whose conversation has no stored user (or that expired) is dropped and
    logged; a malformed entry too; the due set does not keep them."""
    keys = _keys(prefix, "ghost")
    await any_redis.zadd(due_key(prefix), {keys.ref: 1, "not-a-ref": 1})
    model = ScriptedModel([_reply(["leak"])])
    outcomes = await _worker(any_redis, prefix, model).run_due()
    assert sorted(o.status for o in outcomes) == ["discarded", "discarded"]
    assert model.calls == []
    assert await any_redis.zcard(due_key(prefix)) == 0


async def test_a_job_during_a_batched_write_is_deferred_and_counted(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A conversation with a batched write under way (a ``writing:`` meta field) is not
    extracted yet: the job is deferred, stays due, calls no model, and is counted as
    ``jobs_deferred`` (every job run then has an outcome counter: the benchmark waits on them)."""
    hook = make_hook(any_redis, prefix)
    await _talk(hook, 2)
    keys = _keys(prefix)
    await any_redis.hset(keys.meta, "writing:imp-1", "5")
    await any_redis.zadd(due_key(prefix), {keys.ref: 0})
    model = ScriptedModel([_reply(["Has a garden."])])
    [outcome] = await _worker(any_redis, prefix, model).run_due()
    assert outcome.status == "deferred" and model.calls == []
    stats = await any_redis.hgetall(stats_key(prefix))
    assert int(stats[b"jobs_run"]) == 1 and int(stats[b"jobs_deferred"]) == 1
    assert await any_redis.zscore(due_key(prefix), keys.ref) is not None


async def test_a_long_backlog_is_extracted_in_batches(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """An imported backlog is extracted in several jobs of at most extraction_lines_chars each,
    oldest first, each seeing the memories of the one before."""
    hook = make_hook(any_redis, prefix)
    await _talk(hook, 10, memory_flush=True, pad=" and the roses" * 10)
    model = ScriptedModel(
        [
            _reply(["Fact A."]),
            _reply(["Fact A.", "Fact B."]),
            _reply(["Fact A.", "Fact B.", "Fact C."]),
        ]
        * 3
    )
    worker = _worker(any_redis, prefix, model, extraction_lines_chars=500)
    statuses = []
    for _ in range(10):
        outcomes = await worker.run_due()
        if not outcomes:
            break
        statuses += [o.status for o in outcomes]
    assert len(statuses) >= 2 and set(statuses) == {"committed"}
    assert "Fact A." in model.calls[1][1]["content"]
    meta = await any_redis.hgetall(_keys(prefix).meta)
    assert int(meta[b"cursor"]) == 20


async def test_the_sweep_schedules_conversations_whose_cursor_lags(
    real_redis: aioredis.Redis, prefix: str
) -> None:
    """A conversation with new messages but no due entry (a schedule lost in an outage) is
    scheduled again by the sweep (SCAN, not KEYS)."""
    hook = make_hook(real_redis, prefix)
    await _talk(hook, 1)
    await real_redis.delete(due_key(prefix))
    worker = _worker(real_redis, prefix, ScriptedModel(), extraction_sweep_s=60)
    assert await worker.sweep() == 1
    assert await real_redis.zscore(due_key(prefix), _keys(prefix).ref) is not None


def test_plan_changes_keeps_unchanged_facts_and_caps() -> None:
    """C18: an unchanged fact keeps its id (no delete, no add); a changed fact (a rewrite of a
    shown memory the list left out) replaces the old one; a fact stored but not shown is not
    added twice; past the cap the oldest go, within the per-job bound (issue 27 item 5: with
    the default 20% of a 3-memory set, none; with 100%, two)."""
    shown = [
        MemoryItem("0000000000001-aaaaaa", "Lives in Pune"),
        MemoryItem("0000000000002-bbbbbb", "Likes tea"),
    ]
    others = [MemoryItem("0000000000000-cccccc", "Has a dog")]

    def plan(memories: list[str], max_memories: int, share: float = 0.2) -> ChangePlan:
        result = ExtractionResult(memories=tuple(memories), summary=None)
        return plan_changes(
            shown, others, result, max_memories=max_memories, max_removed_share=share
        )

    changed = plan(["lives in pune.", "Likes coffee now", "has a dog"], 10)
    assert changed.delete_ids == ["0000000000002-bbbbbb"] and changed.add == ["Likes coffee now"]
    assert [(r.reason, r.by) for r in changed.removed] == [("update", "Likes coffee now")]
    capped = plan(["Lives in Pune", "Likes tea", "New 1", "New 2"], 3)
    assert capped.add == [] and capped.delete_ids == [] and capped.over_cap == 2
    capped = plan(["Lives in Pune", "Likes tea", "New 1", "New 2"], 3, share=1.0)
    assert capped.add == ["New 1", "New 2"]
    assert capped.delete_ids == ["0000000000000-cccccc", "0000000000001-aaaaaa"]
    assert {r.reason for r in capped.removed} == {"cap"}


async def test_a_worker_stopped_mid_job_leaves_the_job_due(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A worker stopped (cancelled) while the model answers releases its lease and leaves the
    conversation due at once, so the next worker runs it; nothing was committed."""
    hook = make_hook(any_redis, prefix)
    await _talk(hook, 1, memory_flush=True)
    stuck = ScriptedModel([_reply(["never"])])
    stuck.gate = asyncio.Event()
    worker = _worker(any_redis, prefix, stuck)
    worker.start()
    while not stuck.calls:
        await asyncio.sleep(0.01)
    await worker.stop(timeout_s=0.1)
    assert await _memories(any_redis, prefix) == []
    assert not await any_redis.exists(_keys(prefix).lease)
    outcomes = await _worker(any_redis, prefix, ScriptedModel([_reply(["Next."])])).run_due()
    assert [o.status for o in outcomes] == ["committed"]


async def test_an_unreachable_redis_is_logged_once_not_every_poll(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """While Redis is unreachable the polling worker logs one warning line (no traceback), not
    one traceback per poll (a fresh-user test saw ten in a 10 s outage)."""
    dead = aioredis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.1)
    worker = _worker(dead, "unreach", ScriptedModel([]), extraction_poll_s=0.05)
    caplog.set_level(logging.WARNING, logger="litellm_memory_hook")
    task = asyncio.create_task(worker.run_forever())
    await asyncio.sleep(0.6)
    await worker.stop()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await dead.aclose()
    lines = [r for r in caplog.records if "polling failed" in r.getMessage()]
    assert len(lines) == 1 and "Redis unreachable" in lines[0].getMessage(), lines
    assert all(r.exc_info is None for r in caplog.records)
