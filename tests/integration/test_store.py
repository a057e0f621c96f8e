"""The store on fakeredis and on a real Redis: appends, idempotency, index, TTL (C28, C30)."""

from __future__ import annotations

import redis.asyncio as aioredis

from litellm_memory_hook.core.models import IndexedTurn, Turn
from litellm_memory_hook.store.keys import ConversationKeys, MemoryKeys, due_key, user_scope
from litellm_memory_hook.store.redis_store import (
    LOAD_TERMS_PER_CALL,
    MemoryStore,
    unpack_postings,
)


def _keys(prefix: str, user: str = "u-A") -> ConversationKeys:
    return ConversationKeys.for_ids(prefix, "master", user, "c1")


def _turn(role: str, text: str, ts: int = 1000) -> IndexedTurn:
    return IndexedTurn(
        Turn(role=role, text=text, ts_ms=ts), tuple(sorted(set(text.lower().split())))
    )


async def test_append_assigns_seqs_and_is_idempotent_on_call_id(
    store: MemoryStore, prefix: str
) -> None:
    """A second append with the same litellm_call_id writes nothing (case C01: no double write)."""
    keys = _keys(prefix)
    first = await store.append(
        keys, [_turn("user", "hi"), _turn("assistant", "hello")], call_id="x1"
    )
    again = await store.append(
        keys, [_turn("user", "hi"), _turn("assistant", "hello")], call_id="x1"
    )
    assert (first.written, first.first_seq, first.last_seq) == (True, 1, 2)
    assert not again.written and again.last_seq == 2
    turns = await store.all_turns(keys)
    assert [(t.seq, t.role, t.text) for t in turns] == [
        (1, "user", "hi"),
        (2, "assistant", "hello"),
    ]


async def test_load_reads_tail_meta_and_postings_in_one_go(store: MemoryStore, prefix: str) -> None:
    """load returns the newest turns oldest first, meta, and the query's postings with df."""
    keys = _keys(prefix)
    await store.append(
        keys, [_turn("user", f"word{i} common") for i in range(10)], meta_if_new={"user": "u-A"}
    )
    state, postings = await store.load(
        keys, _memory(keys), tail=3, query_terms=["common", "word2", "absent"]
    )
    assert [t.seq for t in state.tail] == [8, 9, 10]
    assert state.meta["user"] == "u-A" and state.last_seq == 10
    assert postings.n_docs == 10
    assert postings.df == {"common": 10, "word2": 1}
    assert postings.seqs["word2"].tolist() == [3]


async def test_load_reads_every_term_of_a_long_query_and_the_users_chats(
    store: MemoryStore, prefix: str
) -> None:
    """A query longer than one ``unpack`` slice of the read script (LOAD_TERMS_PER_CALL) gets
    every term's postings, in order; the user's index is read when asked, not otherwise."""
    keys = _keys(prefix)
    await store.append(keys, [_turn("user", f"w{i} common") for i in range(3)])
    await store.touch_user_index(keys, _memory(keys))
    terms = [f"t{i}" for i in range(2 * LOAD_TERMS_PER_CALL + 500)]
    terms[LOAD_TERMS_PER_CALL + 7] = "w1"  # in the second slice
    terms[-1] = "common"  # in the last, short slice
    state, postings = await store.load(keys, _memory(keys), tail=2, query_terms=terms)
    assert postings.df == {"w1": 1, "common": 3}
    assert postings.seqs["w1"].tolist() == [2]
    assert [t.seq for t in state.tail] == [2, 3]
    assert postings.chats == []
    _, listed = await store.load(keys, _memory(keys), tail=2, list_chats=True)
    assert listed.chats == sorted([keys.index_member, _memory(keys).scope])


async def test_postings_keep_only_the_newest_but_count_all(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A term's postings are capped at the newest N; its df stays exact."""
    store = MemoryStore(any_redis, ttl_s=3600, postings_cap=5)
    keys = _keys(prefix)
    await store.append(keys, [_turn("user", "same") for _ in range(12)])
    value = await any_redis.hget(keys.postings, "same")
    df, seqs = unpack_postings(value)
    assert (df, seqs.tolist()) == (12, [8, 9, 10, 11, 12])


async def test_replace_removes_old_reply_and_its_index_entries(
    store: MemoryStore, prefix: str
) -> None:
    """A regenerate removes the old reply from turns and from the recall index."""
    keys = _keys(prefix)
    await store.append(keys, [_turn("user", "tell me a joke"), _turn("assistant", "zebra pun")])
    old = (await store.all_turns(keys))[1]
    await store.append(
        keys,
        [_turn("assistant", "penguin pun")],
        replace=[IndexedTurn(old, ("pun", "zebra"))],
        call_id="r2",
    )
    turns = await store.all_turns(keys)
    assert [t.text for t in turns] == ["tell me a joke", "penguin pun"]
    _, postings = await store.load(
        keys, _memory(keys), tail=5, query_terms=["zebra", "pun", "penguin"]
    )
    assert "zebra" not in postings.df
    assert postings.df["pun"] == 1 and postings.seqs["pun"].tolist() == [3]
    assert postings.n_docs == 2


async def test_every_key_gets_the_retention_ttl(any_redis: aioredis.Redis, prefix: str) -> None:
    """Case C30: every key the hook creates has a TTL, refreshed on write; the user index too."""
    store = MemoryStore(any_redis, ttl_s=1234)
    keys = _keys(prefix)
    await store.append(keys, [_turn("user", "hi there")], call_id="c")
    memory = _memory(keys)
    await any_redis.hset(memory.pinned, "0000000000001-abcdef", "typed by hand")
    await store.touch_user_index(keys, memory)
    for key in (
        keys.meta,
        keys.turns,
        keys.calls,
        keys.postings,
        keys.user_keys.index,
        memory.pinned,
    ):
        ttl = await any_redis.ttl(key)
        assert 1200 < ttl <= 1234, key
    await any_redis.expire(keys.turns, 5)
    await store.append(keys, [_turn("user", "again")])
    assert await any_redis.ttl(keys.turns) > 1200


async def test_conversations_of_two_users_never_mix(store: MemoryStore, prefix: str) -> None:
    """Case C17: the same conversation id for two users gives two separate conversations."""
    a, b = _keys(prefix, "u-A"), _keys(prefix, "u-B")
    await store.append(a, [_turn("user", "my cat is Miso")])
    state_b, postings_b = await store.load(b, _memory(b), tail=10, query_terms=["miso"])
    assert state_b.tail == [] and postings_b.df == {}
    assert a.meta != b.meta


async def test_unicode_text_round_trips(store: MemoryStore, prefix: str) -> None:
    """Devanagari, emoji and quotes survive the Lua append byte for byte."""
    keys = _keys(prefix)
    text = 'मेरी बहन "सीमा" 👩‍👩‍👧 \\ end'
    await store.append(
        keys, [IndexedTurn(Turn(role="user", text=text, ts_ms=5, name="Aditi"), ("सीमा",))]
    )
    [turn] = await store.all_turns(keys)
    assert turn.text == text and turn.name == "Aditi" and turn.ts_ms == 5


async def test_pinned_memories_load_in_field_order(store: MemoryStore, prefix: str) -> None:
    """Pinned memories come back in field-name (creation) order even when Redis stores the hash
    as a hash table (values over 64 bytes, or more than 128 fields)."""
    keys = _keys(prefix)
    fields = {f"{i:013d}": f"pinned fact number {i} " + "x" * 80 for i in range(200)}
    shuffled = dict(sorted(fields.items(), key=lambda kv: hash(kv[0]) % 97))
    await store.redis.hset(_memory(keys).pinned, mapping=shuffled)
    state, _ = await store.load(keys, _memory(keys), tail=1)
    assert state.pinned == [fields[name] for name in sorted(fields)]


def _memory(keys: ConversationKeys) -> MemoryKeys:
    """The memory set a request to the alias ``demo`` uses (``memory_scope: user``)."""
    return keys.user_keys.memory_set(user_scope("demo"))


async def test_forget_user_deletes_every_key_through_the_index(
    store: MemoryStore, any_redis: aioredis.Redis, prefix: str
) -> None:
    """forget_user removes the user's conversations, memory sets and index (no KEYS), and their
    due entries; another user's keys stay."""
    keys, other = _keys(prefix, "u-A"), _keys(prefix, "u-B")
    for k in (keys, other):
        await store.append(k, [_turn("user", "my cat is Miso")])
        await any_redis.hset(_memory(k).pinned, "0000000000001-abcdef", "pinned")
        await store.touch_user_index(k, _memory(k))
        await any_redis.zadd(due_key(prefix), {k.ref: 1})
    assert await store.forget_user(keys.user_keys) >= 5
    left = [key async for key in any_redis.scan_iter(match=f"{prefix}:*")]
    # the user's forget tokens stay (the memory API's forget replaces them first)
    kept = {due_key(prefix).encode(), keys.user_keys.forgets.encode()}
    assert left and all(b"u-B" in key or key in kept for key in left)
    assert await any_redis.zrange(due_key(prefix), 0, -1) == [other.ref.encode()]


async def test_append_with_memory_touches_the_user_index_in_the_same_write(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """``append(memory=...)`` does what ``touch_user_index`` does (index members, TTLs of the
    index and of the memory set), for a one-script write and for a batched one, and nothing
    when the call id was already stored."""
    store = MemoryStore(any_redis, ttl_s=1234, batch_turns=3)
    keys = _keys(prefix)
    memory = _memory(keys)
    await any_redis.hset(memory.pinned, "0000000000001-abcdef", "typed by hand")
    await any_redis.expire(memory.pinned, 5)
    done = await store.append(keys, [_turn("user", "hi there")], call_id="c1", memory=memory)
    assert done.written
    members = {m.decode() for m in await any_redis.smembers(keys.user_keys.index)}
    assert members == {keys.index_member, memory.scope}
    for key in (keys.meta, keys.turns, keys.user_keys.index, memory.pinned):
        assert 1200 < await any_redis.ttl(key) <= 1234, key
    assert await any_redis.exists(memory.memories) == 0  # a TTL never creates a key

    # a duplicate call id writes nothing and touches nothing
    await any_redis.delete(keys.user_keys.index)
    again = await store.append(keys, [_turn("user", "hi there")], call_id="c1", memory=memory)
    assert not again.written
    assert await any_redis.exists(keys.user_keys.index) == 0

    # a write larger than one script (batches of 3): the index is touched after the last batch
    other = _keys(prefix, "u-B")
    other_memory = _memory(other)
    many = [_turn("user", f"line {i} about plums") for i in range(8)]
    result = await store.append(other, many, call_id="seed", memory=other_memory)
    assert (result.written, result.first_seq, result.last_seq) == (True, 1, 8)
    members = {m.decode() for m in await any_redis.smembers(other.user_keys.index)}
    assert members == {other.index_member, other_memory.scope}
    assert 1200 < await any_redis.ttl(other.user_keys.index) <= 1234
