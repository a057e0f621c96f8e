"""Memory sets and the user's index through the memory API: a set never outlives the index that
forget finds it through, and an import keeps the seq counter above its turns."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis.asyncio as aioredis

from litellm_memory_hook.memory_api import (
    ExportDocument,
    MemoryAPI,
    MemoryInputError,
    resolve_target,
)
from litellm_memory_hook.settings import MemorySettings, parse_alias_config
from litellm_memory_hook.store.keys import ConversationKeys
from litellm_memory_hook.store.redis_store import MemoryStore
from tests.support.hook_calls import Auth, chat_request, make_hook, model_response

ALIASES: dict[str, dict[str, Any]] = {"demo": {"memory": {"enabled": True}}}


def _lookup(name: str) -> Any:
    return parse_alias_config(ALIASES.get(name))


async def test_forget_after_a_pinned_edit_deletes_the_pinned_memory(
    real_redis: aioredis.Redis, prefix: str
) -> None:
    """Editing a pinned memory gives the memory set's keys the retention TTL again but not the
    user's index, which forget and export go through. Once the index has expired, forgetting the
    whole user leaves the pinned memory in Redis: the next chat still sees it. (Retention of 2 s
    stands in for 30 days; the same holds for delete_pinned / delete_memory and for an
    extraction commit, which refresh the set's TTL and not the index's.)"""
    settings = MemorySettings(key_prefix=prefix, retention_days=2 / 86400)
    api = MemoryAPI(real_redis, settings)
    target = resolve_target(settings, _lookup, tenant="master", user="alice", model="demo")
    item = await api.pin(target, "My daughter is Asha.")
    await asyncio.sleep(1.2)
    await api.edit(target, item.id, "My daughter is Asha, she is 7.")
    await asyncio.sleep(1.2)  # the index is gone (2 s after the pin); the set lives on
    await api.forget(target, whole_user=True)
    listing = await api.list(target)
    assert listing.pinned == [], [p.text for p in listing.pinned]


async def test_an_import_without_seq_does_not_reuse_the_imported_seqs(
    real_redis: aioredis.Redis, prefix: str
) -> None:
    """``seq`` of an exported conversation is optional (default 0), and _conversation_dump
    writes it to meta even when the document leaves it out. The import appends the turns at
    their seqs 1..2, then sets meta ``seq`` to "0": the next chat message gets seq 1 again, so
    two turns share a score in the sorted set (and the extraction cursor cannot tell them
    apart)."""
    document = ExportDocument.parse(_export_of_two_turns(1, 1000))
    hook = make_hook(real_redis, prefix)
    await MemoryAPI(real_redis, hook.settings).import_export(document, tenant="master", user="u-A")
    out = await hook.async_pre_call_hook(
        Auth(), None, chat_request("And a dog called Bo.", call_id="after"), "acompletion"
    )
    assert out is not None
    await hook.async_post_call_success_hook(out, Auth(), model_response("Nice."))
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    pairs: list[Any] = await real_redis.zrange(keys.turns, 0, -1, withscores=True)
    scores = [int(score) for _, score in pairs]
    assert scores == [1, 2, 3, 4], scores


async def test_every_memory_set_write_lists_the_set_in_the_user_index(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """Pin, edit, both deletes and an extraction commit each add the set to the user's index
    and give the index the retention TTL, in the same script: a set never outlives the index
    that forget and export find it through."""
    from litellm_memory_hook.store.memory_sets import ExtractionCommit, MemorySetStore

    store = MemorySetStore(any_redis, ttl_s=3600)
    keys = ConversationKeys.for_ids(prefix, "master", "alice", "demo")
    memory = keys.user_keys.memory_set("ns:demo")
    index = keys.user_keys.index
    pinned = await store.pin(memory, "Daughter is Asha", now_ms=1000, max_items=10)
    await any_redis.hset(memory.memories, "0000000001000-aaaaaa", "Likes tea")
    writes = [
        lambda: store.edit_pinned(memory, pinned, "Daughter is Asha, 7"),
        lambda: store.delete(memory, "0000000001000-aaaaaa", pinned=False, tomb="t", now_ms=2),
        lambda: store.delete(memory, pinned, pinned=True, tomb="", now_ms=3),
    ]
    for write in writes:
        await any_redis.delete(index)
        assert await write()
        assert await any_redis.smembers(index) in ({b"ns:demo"}, {"ns:demo"})
        assert 3500 < await any_redis.ttl(index) <= 3600
    await any_redis.delete(index)
    version = (await store.read(memory)).version
    commit = ExtractionCommit(
        read_version=version,
        read_cursor=0,
        delete_ids=(),
        add=("Grows basil",),
        summary="s",
        cursor=0,
    )
    assert await store.commit_extraction(keys, memory, commit, now_ms=5)
    assert await any_redis.smembers(index) in ({b"ns:demo"}, {"ns:demo"})
    assert 3500 < await any_redis.ttl(index) <= 3600


async def test_a_user_scope_read_keeps_a_conversation_scoped_pinned_set_in_the_index(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A pin in a conversation-scoped memory set (``memory_scope: conversation``) lists the set
    in the user's index as ``c:<c>``, the same member as the conversation. A user-scope recall
    read (``load_chats``, ``recall_scope: user`` on any of the user's aliases) takes that member
    for a conversation and, as the conversation has no meta and no turns (none yet, or they
    expired while an edit kept the pins alive), prune_chats.lua removes it from the index. The
    pinned set then no longer exists for forget and export: forgetting the whole user leaves
    it in Redis."""
    aliases = {"diary": {"memory": {"enabled": True, "memory_scope": "conversation"}}}
    settings = MemorySettings(key_prefix=prefix)
    api = MemoryAPI(any_redis, settings)
    target = resolve_target(
        settings,
        lambda name: parse_alias_config(aliases.get(name)),
        tenant="master",
        user="alice",
        model="diary",
        conversation="private",
    )
    await api.pin(target, "My bank PIN is 4321.")
    user = target.conversation.user_keys
    assert target.memory.scope == "c:private"
    store = MemoryStore(any_redis, ttl_s=settings.storage.retention_s)
    await store.load_chats(user, ["c:private"], query_terms=["pin"], max_chats=20)
    await api.forget(target, whole_user=True)
    assert await any_redis.exists(*target.memory.all()) == 0
    assert (await api.list(target)).pinned == []


async def test_an_import_with_seqs_over_the_index_limit_is_refused_whole(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """The recall index packs seqs as uint32: a document made from another chat store that
    numbers its lines by epoch ms was stored at those seqs, and the index listed seq mod 2**32
    (review: recall pointed at lines that do not exist). Such a document is refused, naming the
    limit, before anything is written; a conversation ``seq`` over it fails validation."""
    base = 1_700_000_000_000  # epoch ms, > 2**32
    data = _export_of_two_turns(base, base, seq=base + 1)
    conversation = data["conversations"][0]
    settings = MemorySettings(key_prefix=prefix)
    with pytest.raises(MemoryInputError, match="over 4294967295"):
        await MemoryAPI(any_redis, settings).import_export(
            ExportDocument.parse({**data, "conversations": [{**conversation, "seq": 2}]}),
            tenant="master",
            user="u-A",
        )
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    assert await any_redis.exists(keys.meta, keys.turns) == 0
    with pytest.raises(MemoryInputError, match="seq"):
        ExportDocument.parse(data)


async def test_a_write_read_before_a_fresh_import_of_an_export_is_refused(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A fresh import of a whole export through the API sets a forget token for the user first:
    a regenerate that read the conversation before it does not replace the imported turn that
    now holds the seq it read (the same as ``import --fresh`` of a file)."""
    from litellm_memory_hook.core.indexing import indexed_chain, stored_terms
    from litellm_memory_hook.core.models import Turn

    settings = MemorySettings(key_prefix=prefix)
    api = MemoryAPI(any_redis, settings)
    store = MemoryStore(any_redis, ttl_s=3600)
    target = resolve_target(settings, _lookup, tenant="master", user="u-A", model="demo")
    keys, memory = target.conversation, target.memory
    question = Turn(role="user", text="Tell me about zebras?", ts_ms=1)
    chain = indexed_chain([question, Turn(role="assistant", text="Stripes.", ts_ms=2)])
    await store.append(keys, chain, call_id="r0", memory=memory)
    document = await api.export(target, whole_user=True)
    state, _ = await store.load(keys, memory, tail=10)  # a regenerate's read, before the import
    await api.import_export(document, tenant="master", user="u-A", fresh=True)
    result = await store.append(
        keys,
        indexed_chain([Turn(role="assistant", text="Black and white.", ts_ms=3)], question.text),
        call_id="r1",
        replace=[stored_terms(state.tail[1])],
        memory=memory,
        forget_token=state.forget_token,
    )
    assert result.forgotten
    assert [t.text for t in await store.all_turns(keys)] == [question.text, "Stripes."]


def _export_of_two_turns(first: int, ts: int, **conversation: Any) -> dict[str, Any]:
    """An export of u-A's demo conversation holding two turns, at seqs ``first`` and
    ``first + 1`` and times ``ts`` and ``ts + 1``, with ``conversation`` fields added."""
    turns = [
        {"seq": first, "role": "user", "text": "My cat is Miso.", "ts": ts},
        {"seq": first + 1, "role": "assistant", "text": "Cute!", "ts": ts + 1},
    ]
    return {
        "format": "litellm-memory-export",
        "version": 1,
        "exported_ms": 1,
        "key_prefix": "mem",
        "tenant": "master",
        "user": "u-A",
        "conversations": [
            {
                "id": "demo",
                "key": "demo",
                "alias": "demo",
                "namespace": "demo",
                "memory_set": "ns:demo",
                "meta": {"tenant": "master", "user": "u-A"},
                **conversation,
                "turns": turns,
            }
        ],
    }
