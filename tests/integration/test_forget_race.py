"""A forget against writes already under way (fresh-user report: a streamed request running when
its user was forgotten stored its turn after the forget answered 200; a forget that failed with
503 threw away the turns waiting in the outage buffer).

Every write whose read came before a forget is refused in Redis (the forget token,
``store/forgets.py``): a request's turn, a long batched seed, an extraction commit, a turn that
waited in an outage buffer of any process. A forget that fails gives the buffered turns back.
Runs on fakeredis, the real Redis and (with ``MEMORY_TEST_CLUSTER=1``) a real Redis Cluster;
the outage cases on a private redis-server.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from litellm_memory_hook.core.indexing import indexed_chain, stored_terms
from litellm_memory_hook.core.models import Turn, stored_text
from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.memory_api import MemoryAPI, MemoryTarget, resolve_target
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.settings import MemorySettings, parse_alias_config
from litellm_memory_hook.store.forgets import mark_forgotten
from litellm_memory_hook.store.keys import ConversationKeys, user_scope
from litellm_memory_hook.store.redis_store import MemoryStore
from tests.integration.test_worker import ScriptedModel, _reply, _worker
from tests.support.hook_calls import ALIASES, Auth, chat_request, make_hook, model_response
from tests.support.redis_servers import RedisServer, free_ports, redis_binaries


def _target(hook: MemoryHook, user: str = "u-A", conversation: str | None = None) -> MemoryTarget:
    return resolve_target(
        hook.settings,
        lambda name: parse_alias_config(ALIASES.get(name)),
        tenant="master",
        user=user,
        model="demo",
        conversation=conversation,
    )


async def _pre(hook: MemoryHook, text: str, call_id: str, **extra: Any) -> dict[str, Any]:
    data = await hook.async_pre_call_hook(
        Auth(), None, chat_request(text, call_id=call_id, **extra), "acompletion"
    )
    assert data is not None
    return data


async def _post(hook: MemoryHook, data: dict[str, Any], reply: str) -> None:
    await hook.async_post_call_success_hook(data, Auth(), model_response(reply))


async def _texts(client: aioredis.Redis, keys: ConversationKeys) -> list[str]:
    return [stored_text(json.loads(m)) for m in await client.zrange(keys.turns, 0, -1)]


@pytest.mark.parametrize("whole_user", [True, False])
async def test_a_turn_under_way_when_its_conversation_is_forgotten_is_not_stored(
    any_redis: aioredis.Redis, prefix: str, whole_user: bool
) -> None:
    """The model is still answering when the user (or the conversation) is forgotten: the
    reply's write is refused, so nothing of the turn, of the index or of the due set is made
    again; the next request, begun after the forget, is stored as a new conversation."""
    hook = make_hook(any_redis, prefix)
    await _post(hook, await _pre(hook, "My PIN is 4512.", "c0"), "Noted.")
    running = await _pre(hook, "And my password is hunter2.", "c1")
    target = _target(hook, conversation=None if whole_user else "demo")
    await MemoryAPI(any_redis, hook.settings).forget(target, whole_user=whole_user)
    await _post(hook, running, "I will remember that.")
    keys = target.conversation
    assert await any_redis.exists(*keys.all()) == 0
    assert not await any_redis.sismember(keys.user_keys.index, keys.index_member)
    assert hook.counters["writes_forgotten"] == 1
    assert hook.counters["turns_stored"] == 2  # the first turn's, before the forget
    after = await _pre(hook, "Hello again.", "c2")
    assert "hunter2" not in json.dumps(after["messages"]) and "4512" not in json.dumps(after)
    await _post(hook, after, "Hi.")
    assert await _texts(any_redis, keys) == ["Hello again.", "Hi."]


async def test_a_conversation_forget_refuses_only_that_conversations_writes(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """Forgetting one conversation refuses its write under way, not the write of the user's other
    conversation running at the same time; a second forget refuses a turn begun between the
    two."""
    hook = make_hook(any_redis, prefix)
    trip = await _pre(hook, "Plan my trip.", "t1", metadata={"conversation_id": "trip"})
    work = await _pre(hook, "Plan my week.", "w1", metadata={"conversation_id": "work"})
    api = MemoryAPI(any_redis, hook.settings)
    await api.forget(_target(hook, conversation="trip"), whole_user=False)
    await _post(hook, trip, "Where to?")
    await _post(hook, work, "Busy one.")
    assert await _texts(any_redis, _target(hook, conversation="trip").conversation) == []
    work_keys = _target(hook, conversation="work").conversation
    assert await _texts(any_redis, work_keys) == ["Plan my week.", "Busy one."]
    between = await _pre(hook, "Add Friday.", "w2", metadata={"conversation_id": "work"})
    await api.forget(_target(hook), whole_user=True)
    await _post(hook, between, "Added.")
    assert await any_redis.exists(*work_keys.all()) == 0
    assert hook.counters["writes_forgotten"] == 2


async def test_a_batched_write_read_before_a_forget_writes_nothing(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A write too large for one script (a long history seeding a conversation) is refused
    by its begin script, before any seq is reserved."""
    store = MemoryStore(any_redis, ttl_s=3600, batch_turns=2)
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    state, _ = await store.load(keys, keys.user_keys.memory_set("ns:demo"), tail=10)
    assert state.forget_token == "/"  # read, no forget yet
    hook = make_hook(any_redis, prefix)
    await MemoryAPI(any_redis, hook.settings).forget(_target(hook), whole_user=True)
    turns = [Turn(role="user", text=f"line {i}", ts_ms=1000 + i) for i in range(5)]
    result = await store.append(
        keys, indexed_chain(turns), call_id="seed", forget_token=state.forget_token
    )
    assert result.forgotten and not result.written
    assert await any_redis.exists(keys.meta, keys.turns) == 0
    # read after the forget: written
    state, _ = await store.load(keys, keys.user_keys.memory_set("ns:demo"), tail=10)
    result = await store.append(
        keys, indexed_chain(turns), call_id="seed", forget_token=state.forget_token
    )
    assert result.written and (result.first_seq, result.last_seq) == (1, 5)


async def test_an_extraction_under_way_when_the_user_is_forgotten_commits_nothing(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A conversation's first extraction reads version 0 and cursor 0, as a forgotten
    conversation has them: while the model answers, the user is forgotten; the commit is
    refused, so no memory or summary drawn from the forgotten turns is written."""
    hook = make_hook(any_redis, prefix)
    data = await _pre(hook, "I am allergic to peanuts.", "c0", metadata={"memory_flush": True})
    await _post(hook, data, "Noted.")
    model = ScriptedModel([_reply(["Allergic to peanuts."], "They talked about peanuts.")])
    model.gate = asyncio.Event()
    job = asyncio.create_task(_worker(any_redis, prefix, model).run_due())
    while not model.calls:
        await asyncio.sleep(0.01)
    target = _target(hook)
    await MemoryAPI(any_redis, hook.settings).forget(target, whole_user=True)
    model.gate.set()
    [outcome] = await job
    assert outcome.status == "discarded"
    memory = target.conversation.user_keys.memory_set(user_scope("demo"))
    assert await any_redis.exists(*memory.all(), *target.conversation.all()) == 0


# -- the outage buffer -----------------------------------------------------------------------


def _private_hook(url: str, prefix: str) -> MemoryHook:
    return MemoryHook(
        settings=MemorySettings(
            key_prefix=prefix, redis_url=url, worker_in_proxy=False, redis_timeout_s=0.3
        ),
        alias_lookup=lambda model: ALIASES.get(model),
    )


@pytest.fixture
def server(tmp_path: Path) -> Any:
    if redis_binaries() is None:
        pytest.skip("redis-server not installed")
    [port] = free_ports(1)
    args = ("--maxmemory-policy", "noeviction", "--appendonly", "yes")  # kept over a restart
    srv = RedisServer(tmp_path / "redis", port, args).start()
    yield srv
    srv.stop()


async def test_turns_in_another_processs_buffer_are_refused_after_a_forget(
    server: RedisServer, prefix: str
) -> None:
    """Redis is full (``maxmemory`` just under what it holds): a proxy's turns wait in its
    outage buffer. The user is forgotten from somewhere else (the CLI, another proxy: this
    buffer is out of their reach). The full Redis refuses the forget token but takes the
    deletes, which make room; the token is then set, so the buffered turn is refused, not
    written into the forgotten user once Redis takes writes."""
    hook = _private_hook(server.url, prefix)
    history = [{"role": "user", "content": f"line {i} " + "x" * 3000} for i in range(150)]
    seed = chat_request("before", call_id="f0")
    seed["messages"] = [*history, *seed["messages"]]
    data = await hook.async_pre_call_hook(Auth(), None, seed, "acompletion")
    await _post(hook, data, "ok")
    admin = redis.Redis.from_url(server.url)
    used = int(admin.info("memory")["used_memory"])
    admin.config_set("maxmemory", used - 20_000)
    client = aioredis.from_url(server.url)
    try:
        await _post(hook, await _pre(hook, "a secret said while Redis was full", "f1"), "ok")
        assert len(hook.engine.buffer) == 1
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            admin.hset("probe", "a", "b")  # full: writes are refused
        await client.ping()  # its connection's memory counted before the limit is set again
        admin.config_set("maxmemory", int(admin.info("memory")["used_memory"]) - 20_000)
        await MemoryAPI(client, hook.settings).forget(_target(hook), whole_user=True)
        user = _target(hook).conversation.user_keys
        assert sorted(admin.hkeys(user.forgets)) == [b"n", b"u"]  # set after the deletes
        await hook.drain()
    finally:
        admin.config_set("maxmemory", 0)
        await client.aclose()
    keys = _target(hook).conversation
    assert admin.exists(*keys.all()) == 0
    assert hook.counters["writes_lost"] == 0
    # refused by its token, or (if it landed between the deletes and the token) deleted again
    assert hook.counters["writes_forgotten"] + hook.counters["write_retried_ok"] >= 1
    admin.close()
    await hook.store.redis.aclose()


async def test_a_forget_that_fails_gives_the_buffered_turns_back(
    server: RedisServer, prefix: str
) -> None:
    """Redis is down: the turns wait in the buffer; a forget through this proxy fails (the API
    answers 503: nothing was forgotten), so the turns stay in the buffer and are written, in
    order, once Redis is back (before, they were dropped as forgotten)."""
    hook = _private_hook(server.url, prefix)
    await _post(hook, await _pre(hook, "before", "g0"), "ok")
    server.stop()
    await _post(hook, await _pre(hook, "said while Redis was down", "g1"), "noted")
    assert len(hook.engine.buffer) == 1
    target = _target(hook)
    with pytest.raises(StoreError):
        async with hook.forgetting(target.conversation, whole_user=True):
            await MemoryAPI(hook.store.redis, hook.settings).forget(target, whole_user=True)
    assert len(hook.engine.buffer) == 1 and hook.counters["writes_forgotten"] == 0
    server.start()
    await hook.drain()
    client = aioredis.from_url(server.url)
    assert await _texts(client, target.conversation) == [
        "before",
        "ok",
        "said while Redis was down",
        "noted",
    ]
    await client.aclose()
    await hook.store.redis.aclose()


@pytest.mark.parametrize("whole_user", [True, False])
async def test_a_forget_on_a_redis_too_full_for_its_token_still_refuses_the_buffered_turn(
    server: RedisServer, prefix: str, whole_user: bool
) -> None:
    """Redis is full and stays full even after the user's keys are deleted (``maxmemory 1``):
    a new token may be refused, and the forget then deletes the tokens instead (a full Redis
    takes deletes); the turn waiting in the outage buffer read a token, finds it changed or
    gone and is refused (fresh-user report: the forget answered 200, left no token, and the
    turn was written back once Redis had room)."""
    hook = _private_hook(server.url, prefix)
    await _post(hook, await _pre(hook, "before", "h0"), "ok")
    admin = redis.Redis.from_url(server.url)
    client = aioredis.from_url(server.url)
    await client.ping()
    admin.config_set("maxmemory", 1)
    try:
        await _post(hook, await _pre(hook, "my PIN is 4321", "h1"), "noted")
        assert len(hook.engine.buffer) == 1
        target = _target(hook, conversation=None if whole_user else "demo")
        await MemoryAPI(client, hook.settings).forget(target, whole_user=whole_user)
        if not whole_user:  # its field could not be set anew: it was deleted
            assert not admin.hexists(target.conversation.user_keys.forgets, "c:demo")
    finally:
        admin.config_set("maxmemory", 0)
        await client.aclose()
    await hook.drain()
    assert admin.exists(*_target(hook).conversation.all()) == 0
    assert hook.counters["writes_forgotten"] == 1
    admin.close()
    await hook.store.redis.aclose()


async def test_a_request_that_could_not_read_redis_is_refused_after_a_forget(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A request made while Redis could not be read carries the time it started: its turn,
    written once Redis answers, is refused when a forget came after that time (review: such a
    turn was written unchecked), and stored when the forget came before it."""
    hook = make_hook(any_redis, prefix)
    target = _target(hook)
    api = MemoryAPI(any_redis, hook.settings)
    await api.forget(target, whole_user=True)  # before the next request: does not refuse it
    hook.engine.health.trip()  # Redis "down": the pre-call runs offline
    early = await _pre(hook, "said before the second forget", "o1")
    await asyncio.sleep(0.01)
    await api.forget(target, whole_user=True)
    await asyncio.sleep(0.01)  # a request in the forget's own millisecond is refused (safe side)
    later = await _pre(hook, "said after it", "o2")
    hook.engine.health.ok()
    await _post(hook, early, "noted")
    await _post(hook, later, "noted too")
    await hook.drain()
    assert await _texts(any_redis, target.conversation) == ["said after it", "noted too"]
    assert hook.counters["writes_forgotten"] == 1


async def test_a_seed_under_way_when_its_user_is_forgotten_writes_no_batch(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A long first request is written in batches; the conversation joins the user's index
    only after the last one, so a forget of the whole user between two batches deletes nothing
    of it: each batch checks the forget token too (review: every batch was written after the
    forget)."""
    store = MemoryStore(any_redis, ttl_s=3600, batch_turns=2)
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    memory = keys.user_keys.memory_set("ns:demo")
    state, _ = await store.load(keys, memory, tail=10)
    hook = make_hook(any_redis, prefix)
    api = MemoryAPI(any_redis, hook.settings)
    batches = store._write_batch
    calls = 0

    async def forget_after_the_first_batch(**kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            await api.forget(_target(hook), whole_user=True)
        return await batches(**kwargs)

    store._write_batch = forget_after_the_first_batch  # type: ignore[method-assign]
    turns = [Turn(role="user", text=f"secret line {i}", ts_ms=1000 + i) for i in range(6)]
    result = await store.append(
        keys, indexed_chain(turns), call_id="seed", memory=memory, forget_token=state.forget_token
    )
    assert result.forgotten and calls == 2
    assert await any_redis.exists(keys.meta, keys.turns, keys.user_keys.index) == 0


async def test_a_stale_batched_replace_never_deletes_turns_stored_after_a_forget(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """Seqs start again after a forget: a batched write that read the conversation before the
    forget and replaces its turns 1-2 must not delete the turns 1-2 stored after it (review)."""
    store = MemoryStore(any_redis, ttl_s=3600, batch_turns=2)
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    memory = keys.user_keys.memory_set("ns:demo")
    old = [Turn(role="user", text="old a", ts_ms=1), Turn(role="assistant", text="old b", ts_ms=2)]
    await store.append(keys, indexed_chain(old), call_id="r0", memory=memory)
    state, _ = await store.load(keys, memory, tail=10)
    hook = make_hook(any_redis, prefix)
    await MemoryAPI(any_redis, hook.settings).forget(_target(hook), whole_user=True)
    new = [Turn(role="user", text="new a", ts_ms=3), Turn(role="assistant", text="new b", ts_ms=4)]
    await store.append(keys, indexed_chain(new), call_id="r2")
    edit = [Turn(role="user", text=f"edited {i}", ts_ms=5 + i) for i in range(3)]
    result = await store.append(
        keys,
        indexed_chain(edit),
        call_id="r1",
        replace=[stored_terms(t) for t in state.tail],
        forget_token=state.forget_token,
    )
    assert result.forgotten
    assert await _texts(any_redis, keys) == ["new a", "new b"]


async def test_a_conversation_forget_on_a_full_redis_refuses_a_new_conversations_buffered_turn(
    server: RedisServer, prefix: str
) -> None:
    """Redis is full: a turn of a new conversation waits in the outage buffer (its conversation
    has no token of its own yet). Its conversation is forgotten: the new token is refused, so
    the forget deletes the conversation's and the user's tokens, and the turn, which read the
    user's, is refused (fresh-user report: it was written once Redis had room, then extracted
    into the user's shared memories)."""
    hook = _private_hook(server.url, prefix)
    keep = await _pre(hook, "keep this", "k0", metadata={"conversation_id": "keep"})
    await _post(hook, keep, "ok")
    admin = redis.Redis.from_url(server.url)
    client = aioredis.from_url(server.url)
    await client.ping()
    admin.config_set("maxmemory", 1)
    try:
        new = await _pre(hook, "my bank pin is 9876", "k1", metadata={"conversation_id": "c2"})
        await _post(hook, new, "noted")
        assert len(hook.engine.buffer) == 1
        target = _target(hook, conversation="c2")
        await MemoryAPI(client, hook.settings).forget(target, whole_user=False)
    finally:
        admin.config_set("maxmemory", 0)
        await client.aclose()
    await hook.drain()
    assert admin.exists(*target.conversation.all()) == 0
    assert hook.counters["writes_forgotten"] == 1
    kept = _target(hook, conversation="keep").conversation
    assert [stored_text(json.loads(m)) for m in admin.zrange(kept.turns, 0, -1)] == [
        "keep this",
        "ok",
    ]
    admin.close()
    await hook.store.redis.aclose()


async def test_a_write_read_after_a_forget_is_stored_when_the_forget_token_expires_meanwhile(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """After a forget of the whole user the forgets hash holds only ``u = f:...`` and expires
    ``write_buffer_max_age_s`` + 1 h after the forget. A request that reads the user after the
    forget carries that token; when the hash expires before its write (a long stream, or a turn
    waiting in the outage buffer), forgotten.lua sees the token changed (gone) and refuses the
    turn as if a new forget had come: a turn said after the forget is lost. (A 1 s token TTL
    stands in for the 70 minutes.)"""
    store = MemoryStore(any_redis, ttl_s=3600)
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    memory = keys.user_keys.memory_set("ns:demo")
    await store.append(keys, indexed_chain([Turn(role="user", text="old", ts_ms=1)]), memory=memory)
    assert await mark_forgotten(any_redis, keys.user_keys, None, ttl_s=1)
    await store.forget_user(keys.user_keys)
    state, _ = await store.load(keys, memory, tail=10)  # the next request, after the forget
    assert state.forget_token.startswith("f:")
    await asyncio.sleep(1.2)  # the forget token expires while the model answers
    turns = [Turn(role="user", text="said after the forget", ts_ms=2)]
    result = await store.append(
        keys, indexed_chain(turns), call_id="n1", memory=memory, forget_token=state.forget_token
    )
    assert not result.forgotten
    assert await _texts(any_redis, keys) == ["said after the forget"]


async def test_a_forget_on_a_full_redis_refuses_a_write_read_before_it_in_a_hash_without_n(
    any_redis: aioredis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forgets hash written by the previous version has no field ``n`` (only a write or a
    forget since the upgrade adds it). A whole-user forget on a full Redis cannot set its token
    and deletes the tokens instead (clear_tokens, now HDEL of every field but ``n``): the hash
    is left empty, so Redis deletes it, and forgotten.lua takes the missing hash for an expiry.
    A request that read the user before the forget then stores its turn after it, where the
    previous version refused it."""
    hook = make_hook(any_redis, prefix)
    await _post(hook, await _pre(hook, "My PIN is 4512.", "c0"), "Noted.")
    user = _target(hook).conversation.user_keys
    await any_redis.hdel(user.forgets, "n")  # as the previous version left it
    running = await _pre(hook, "And my password is hunter2.", "c1")

    async def full(*args: Any, **kwargs: Any) -> bool:
        return False  # a full Redis (maxmemory, noeviction) refuses the new token

    monkeypatch.setattr("litellm_memory_hook.memory_api.forget_export.mark_forgotten", full)
    await MemoryAPI(any_redis, hook.settings).forget(_target(hook), whole_user=True)
    await _post(hook, running, "I will remember that.")
    assert await _texts(any_redis, _target(hook).conversation) == []


async def test_a_write_that_read_a_writes_token_is_refused_when_the_hash_is_gone(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A forgets hash written before the field n existed, cleared by a forget on a full Redis,
    is gone: a write that read a write's tokens (w:) is refused, as a forget's; one that read
    only a forget's token (f:) takes it for the hash's expiry and is stored."""
    store = MemoryStore(any_redis, ttl_s=3600)
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    memory = keys.user_keys.memory_set("ns:demo")
    forgets = keys.user_keys.forgets
    turn = [Turn(role="user", text="said before the forget", ts_ms=1)]
    await any_redis.hset(forgets, mapping={"u": "w:old", "c:demo": "w:old"})  # no n
    await any_redis.delete(forgets)  # cleared: the hash is gone
    read_w = await store.append(
        keys, indexed_chain(turn), call_id="w1", memory=memory, forget_token="w:old/w:old"
    )
    assert read_w.forgotten
    read_f = await store.append(
        keys, indexed_chain(turn), call_id="f1", memory=memory, forget_token="f:1-ab/"
    )
    assert not read_f.forgotten
    assert await _texts(any_redis, keys) == ["said before the forget"]
