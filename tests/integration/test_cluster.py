"""Redis Cluster (issue 9 item 8, case C28): a real 3-master cluster started by the tests.

The store, hook, context and worker suites already run against the cluster (the ``cluster``
parameter of the ``any_redis`` fixture in conftest.py). This module adds what is specific to a
cluster: every key of a user in one slot as the server computes it, users spread over every
node doing everything the product does (chat, extraction with its WATCH/MULTI commit, the
memory API, the sweep's SCAN of every node, forget), a control that the cluster does reject
cross-slot scripts and transactions (so a pass means something). Through a real LiteLLM proxy
configured with ``redis_cluster: true``: tests/e2e/test_cluster.py.
"""

from __future__ import annotations

import json

import pytest
import redis.asyncio as aioredis
from redis.crc import key_slot
from redis.exceptions import RedisClusterException, ResponseError

from litellm_memory_hook.extraction.worker import ExtractionWorker
from litellm_memory_hook.memory_api import MemoryAPI, resolve_target
from litellm_memory_hook.settings import MemorySettings
from litellm_memory_hook.store.keys import ConversationKeys, due_key, stats_key, user_scope
from litellm_memory_hook.store.redis_store import MemoryStore
from tests.integration.test_worker import ScriptedModel, _lookup, _reply
from tests.support.hook_calls import Auth, chat_request, make_hook, model_response

pytestmark = pytest.mark.cluster


def _every_key(prefix: str, user: str) -> list[str]:
    keys = ConversationKeys.for_ids(prefix, "master", user, "demo")
    users = keys.user_keys
    return [
        *keys.all(),
        users.index,
        *users.memory_set(user_scope("demo")).all(),
        *users.keys_of(keys.index_member),
        *users.conversation("other").all(),
    ]


def _node_of(client: aioredis.Redis, key: str) -> str:
    node = client.get_node_from_key(key)  # type: ignore[attr-defined]
    return f"{node.host}:{node.port}"


def _users_on_every_node(client: aioredis.Redis, prefix: str, nodes: int = 3) -> list[str]:
    """One user id per cluster node (by the slot of the user's hash tag)."""
    found: dict[str, str] = {}
    for i in range(1000):
        user = f"u{i}"
        node = _node_of(client, ConversationKeys.for_ids(prefix, "master", user, "demo").meta)
        found.setdefault(node, user)
        if len(found) == nodes:
            break
    return list(found.values())


async def test_the_server_puts_every_key_of_a_user_in_one_slot(
    cluster_redis: aioredis.Redis, prefix: str
) -> None:
    """Case C28: CLUSTER KEYSLOT (the server's own answer) is one slot for every key of a
    user, plain or hashed ids alike, and equals redis-py's key_slot."""
    await cluster_redis.ping()  # the client learns the slot map
    for user in ("u-A", "alice@example.com", "सीमा", " victim", "a{b}c"):
        names = _every_key(prefix, user)
        slots = {int(await cluster_redis.cluster_keyslot(name)) for name in names}  # type: ignore[attr-defined]
        assert len(slots) == 1, user
        assert slots == {key_slot(names[0].encode())}


async def test_the_cluster_rejects_cross_slot_scripts_and_transactions(
    cluster_redis: aioredis.Redis, prefix: str
) -> None:
    """Control: a script or a transaction naming two users' keys (or a user's key and the due
    set) fails on this cluster, so the suites passing here show that the product never does
    that (case C28)."""
    await cluster_redis.ping()
    a, b = _users_on_every_node(cluster_redis, prefix, 2)
    key_a = ConversationKeys.for_ids(prefix, "master", a, "demo").meta
    key_b = ConversationKeys.for_ids(prefix, "master", b, "demo").meta
    script = cluster_redis.register_script("return #KEYS")
    with pytest.raises((RedisClusterException, ResponseError)):
        await script(keys=[key_a, key_b])
    with pytest.raises((RedisClusterException, ResponseError)):
        async with cluster_redis.pipeline(transaction=True) as pipe:
            pipe.hset(key_a, "x", "1")
            pipe.zadd(due_key(prefix), {"x": 1})
            await pipe.execute()


async def test_users_on_every_node_do_everything(
    cluster_redis: aioredis.Redis, prefix: str
) -> None:
    """Users whose slots sit on each of the 3 nodes: chat (scripts, one-round-trip reads),
    extraction (lease, WATCH/MULTI commit of memories + summary + cursor), the memory API
    (pin, edit, delete, list), the sweep (SCAN on every node), forget; no CROSSSLOT anywhere."""
    await cluster_redis.ping()
    users = _users_on_every_node(cluster_redis, prefix)
    nodes = {
        _node_of(cluster_redis, ConversationKeys.for_ids(prefix, "master", u, "x").meta)
        for u in users
    }
    assert len(nodes) == 3
    hook = make_hook(cluster_redis, prefix, extraction_quiet_s=0)
    for user in users:
        for i in range(3):
            data = chat_request(f"I grow tomatoes, note {i}", user=user, call_id=f"{user}-{i}")
            out = await hook.async_pre_call_hook(Auth(), None, data, "acompletion")
            assert out is not None
            await hook.async_post_call_success_hook(out, Auth(), model_response(f"ok {i}"))
        again = await hook.async_pre_call_hook(
            Auth(),
            None,
            chat_request("What do I grow?", user=user, call_id=f"{user}-q"),
            "acompletion",
        )
        assert again is not None and "note 2" in json.dumps(again["messages"])
    assert hook.counters["precall_errors"] == 0 and hook.counters["write_failures"] == 0

    settings = MemorySettings(key_prefix=prefix, extraction_quiet_s=0)
    model = ScriptedModel([_reply(["Grows tomatoes."], "Tomatoes.")] * len(users))
    worker = ExtractionWorker(cluster_redis, settings, model, alias_lookup=_lookup)
    outcomes = await worker.run_due(limit=10)
    assert sorted(o.status for o in outcomes) == ["committed"] * len(users)

    api = MemoryAPI(cluster_redis, settings)
    for user in users:
        target = resolve_target(settings, _lookup, tenant="master", user=user, model="demo")
        listing = await api.list(target)
        assert [m.text for m in listing.memories] == ["Grows tomatoes."]
        item = await api.pin(target, "My garden is in Pune.")
        await api.edit(target, item.id, "My garden is in Nashik.")
        assert [p.text for p in (await api.list(target)).pinned] == ["My garden is in Nashik."]
        await api.delete_pinned(target, item.id)
        meta = await cluster_redis.hgetall(target.conversation.meta)
        assert meta[b"summary"] == b"Tomatoes."

    for user in users:  # a lost schedule: the sweep finds every node's conversations
        keys = ConversationKeys.for_ids(prefix, "master", user, "demo")
        await cluster_redis.hset(keys.meta, "cursor", 0)
        await cluster_redis.zrem(due_key(prefix), keys.ref)
    assert await worker.sweep() == len(users)
    assert await cluster_redis.hget(stats_key(prefix), "jobs_committed") == str(len(users)).encode()

    store = MemoryStore(cluster_redis, ttl_s=3600)
    for user in users:
        keys = ConversationKeys.for_ids(prefix, "master", user, "demo")
        assert await store.forget_user(keys.user_keys) > 0
        assert not await cluster_redis.exists(*keys.all())


async def test_export_and_forget_through_the_memory_api(
    cluster_redis: aioredis.Redis, prefix: str
) -> None:
    """Export and forget of a whole user, as the memory API does them, work on the cluster
    (the due set is read and written outside the user's transactions)."""
    await cluster_redis.ping()
    hook = make_hook(cluster_redis, prefix)
    settings = MemorySettings(key_prefix=prefix)
    api = MemoryAPI(cluster_redis, settings)
    (user,) = _users_on_every_node(cluster_redis, prefix, 1)
    out = await hook.async_pre_call_hook(
        Auth(), None, chat_request("I like tea", user=user, call_id="e1"), "acompletion"
    )
    assert out is not None
    await hook.async_post_call_success_hook(out, Auth(), model_response("Tea, nice."))
    target = resolve_target(settings, _lookup, tenant="master", user=user, model="demo")
    document = await api.export(target, whole_user=True)
    assert [t["text"] for t in document.conversations[0].turns] == ["I like tea", "Tea, nice."]
    result = await api.forget(target, whole_user=True)
    assert result.deleted_keys > 0
    assert await cluster_redis.zscore(due_key(prefix), target.conversation.ref) is None
