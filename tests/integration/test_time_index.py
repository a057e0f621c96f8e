"""The time index (``times``: score = a turn's ts, member = its seq) on every way turns are
stored and removed: one-script appends, batched writes, regenerations, deletes, trims, forgets,
the TTL, imports, export and import of a user, and conversations stored before the index
existed. On fakeredis, a real Redis and a real Redis Cluster."""

from __future__ import annotations

import redis.asyncio as aioredis

from litellm_memory_hook.core.indexing import stored_terms
from litellm_memory_hook.core.models import IndexedTurn, Turn
from litellm_memory_hook.engine.identity import Identity
from litellm_memory_hook.store import transfer
from litellm_memory_hook.store.keys import ConversationKeys, user_scope
from litellm_memory_hook.store.redis_store import DateSeqs, MemoryStore
from litellm_memory_hook.store.retention import trim_oldest
from litellm_memory_hook.tools.histories import HistoryLine
from litellm_memory_hook.tools.importer import delete_conversation, import_lines

MINUTE = 60_000
T0 = 1_683_000_000_000  # 2023-05-02 04:00 UTC


def _keys(prefix: str, conversation: str = "c1") -> ConversationKeys:
    return ConversationKeys.for_ids(prefix, "master", "u-A", conversation)


def _turn(text: str, ts: int, role: str = "user") -> IndexedTurn:
    return IndexedTurn(Turn(role=role, text=text, ts_ms=ts), tuple(sorted(set(text.split()))))


async def _index(client: aioredis.Redis, keys: ConversationKeys) -> list[tuple[int, int]]:
    """The time index as ``(seq, ts)``, by ts (members are seqs as 4 bytes, big-endian)."""
    found = await client.zrange(keys.times, 0, -1, withscores=True)
    assert all(len(member) == 4 for member, _ in found)
    return [(int.from_bytes(member, "big"), int(score)) for member, score in found]


async def _spans(
    store: MemoryStore, keys: ConversationKeys, spans: list[tuple[int, int]]
) -> list[DateSeqs]:
    _, postings = await store.load(
        keys, keys.user_keys.memory_set(user_scope("demo")), tail=1, date_spans=spans
    )
    return postings.spans


async def test_a_write_indexes_every_turn_by_its_time(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """One-script appends: each stored turn joins the index with its own ts, in whatever order
    the times come (a turn said at minute 1 stored after minute 10); a repeated call id adds
    nothing."""
    store = MemoryStore(any_redis, ttl_s=3600)
    keys = _keys(prefix)
    await store.append(keys, [_turn("a", T0 + 10 * MINUTE), _turn("b", T0 + 11 * MINUTE)])
    await store.append(keys, [_turn("c", T0 + MINUTE)], call_id="x")
    await store.append(keys, [_turn("c", T0 + MINUTE)], call_id="x")
    assert await _index(any_redis, keys) == [
        (3, T0 + MINUTE),
        (1, T0 + 10 * MINUTE),
        (2, T0 + 11 * MINUTE),
    ]
    assert await _spans(store, keys, [(T0, T0 + 2 * MINUTE)]) == [DateSeqs(1, ((3, 4),))]


async def test_a_batched_write_indexes_every_batch(any_redis: aioredis.Redis, prefix: str) -> None:
    """A write larger than one script (begin_write.lua, then write_turns.lua batches of 3 turns)
    puts each turn in the index with its time; a request's turn stored between two such writes
    too."""
    store = MemoryStore(any_redis, ttl_s=3600, batch_turns=3)
    keys = _keys(prefix)
    await store.append(keys, [_turn(f"w{i}", T0 + (20 + i) * MINUTE) for i in range(7)])
    await store.append(keys, [_turn("now", T0 + 40 * MINUTE)])
    await store.append(keys, [_turn(f"old{i}", T0 + i * MINUTE) for i in range(5)], call_id="i")
    assert await _index(any_redis, keys) == [
        *((9 + i, T0 + i * MINUTE) for i in range(5)),
        *((1 + i, T0 + (20 + i) * MINUTE) for i in range(7)),
        (8, T0 + 40 * MINUTE),
    ]
    assert await _spans(store, keys, [(T0 + 3 * MINUTE, T0 + 22 * MINUTE)]) == [
        DateSeqs(4, ((1, 3), (12, 14)))
    ]


async def test_a_regenerated_reply_keeps_one_entry(any_redis: aioredis.Redis, prefix: str) -> None:
    """A regenerate replaces the stored reply (``replace``) in the script that stores the new
    one: the old seq leaves the index, the new seq joins it with the new reply's time."""
    store = MemoryStore(any_redis, ttl_s=3600)
    keys = _keys(prefix)
    await store.append(
        keys, [_turn("question", T0), _turn("first answer", T0 + MINUTE, "assistant")]
    )
    [old] = [t for t in await store.all_turns(keys) if t.seq == 2]
    await store.append(
        keys,
        [_turn("second answer", T0 + 5 * MINUTE, "assistant")],
        replace=[stored_terms(old)],
    )
    assert await _index(any_redis, keys) == [(1, T0), (3, T0 + 5 * MINUTE)]
    assert await any_redis.zcard(keys.times) == await any_redis.zcard(keys.turns) == 2


async def test_deletes_and_trims_take_turns_out_of_the_index(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """delete_turns and trim_oldest (the oldest by seq, in batches) remove exactly the index
    entries of the turns they remove; the index keeps the retention TTL."""
    store = MemoryStore(any_redis, ttl_s=3600, batch_turns=4)
    keys = _keys(prefix)
    # seqs 1-10 said at minutes 10..19, then seqs 11-20 imported at minutes 0..9
    await store.append(keys, [_turn(f"new{i}", T0 + (10 + i) * MINUTE) for i in range(10)])
    await store.append(keys, [_turn(f"old{i}", T0 + i * MINUTE) for i in range(10)])
    [fifth] = [t for t in await store.all_turns(keys) if t.seq == 5]
    assert await store.delete_turns(keys, [stored_terms(fifth)]) == 1
    assert 5 not in [seq for seq, _ in await _index(any_redis, keys)]
    # 19 turns, bound 12 (trim step 1): the 7 oldest by seq go (1-4, 6-8)
    assert await trim_oldest(store, keys, 12) == 7
    assert await _index(any_redis, keys) == [
        *((11 + i, T0 + i * MINUTE) for i in range(10)),
        (9, T0 + 18 * MINUTE),
        (10, T0 + 19 * MINUTE),
    ]
    assert 3000 < await any_redis.ttl(keys.times) <= 3600
    assert await _spans(store, keys, [(T0, T0 + 20 * MINUTE)]) == [DateSeqs(12, ((9, 21),))]


async def test_every_turn_gone_leaves_no_index(any_redis: aioredis.Redis, prefix: str) -> None:
    """Deleting every turn leaves no ``times`` key (an empty sorted set is no key), and the
    next write starts a complete index again."""
    store = MemoryStore(any_redis, ttl_s=3600)
    keys = _keys(prefix)
    await store.append(keys, [_turn("a", T0), _turn("b", T0 + MINUTE)])
    await store.delete_turns(keys, [stored_terms(t) for t in await store.all_turns(keys)])
    assert not await any_redis.exists(keys.times)
    await store.append(keys, [_turn("c", T0 + 2 * MINUTE)])
    assert await _index(any_redis, keys) == [(3, T0 + 2 * MINUTE)]


async def test_a_conversation_stored_before_the_index_keeps_the_binary_search(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A conversation stored before the index existed (turns, no ``times``): its writes add no
    partial index, and dates are found by the binary search over the turns' times as before
    (right when they are in seq order). Once every turn is gone, the next write indexes."""
    store = MemoryStore(any_redis, ttl_s=3600)
    keys = _keys(prefix)
    await store.append(keys, [_turn(f"w{i}", T0 + i * MINUTE) for i in range(4)])
    await any_redis.delete(keys.times)  # as an older version left it
    await store.append(keys, [_turn("later", T0 + 10 * MINUTE)])
    assert not await any_redis.exists(keys.times)
    assert await _spans(store, keys, [(T0 + MINUTE, T0 + 3 * MINUTE)]) == [DateSeqs(2, ((2, 4),))]
    await store.delete_turns(keys, [stored_terms(t) for t in await store.all_turns(keys)])
    await store.append(keys, [_turn("again", T0 + 20 * MINUTE)])
    assert await _index(any_redis, keys) == [(6, T0 + 20 * MINUTE)]


async def test_an_index_missing_turns_is_not_used(any_redis: aioredis.Redis, prefix: str) -> None:
    """An index that does not hold every stored turn (an older proxy wrote turns during a
    rolling upgrade) is never read: the span script compares its size with the turns' and
    binary-searches the times instead; writes leave it as it is."""
    store = MemoryStore(any_redis, ttl_s=3600)
    keys = _keys(prefix)
    await store.append(keys, [_turn(f"w{i}", T0 + i * MINUTE) for i in range(4)])
    await any_redis.zrem(keys.times, (3).to_bytes(4, "big"))
    await store.append(keys, [_turn("later", T0 + 10 * MINUTE)])
    assert [seq for seq, _ in await _index(any_redis, keys)] == [1, 2, 4]
    assert await _spans(store, keys, [(T0 + 2 * MINUTE, T0 + 11 * MINUTE)]) == [
        DateSeqs(3, ((3, 6),))
    ]


async def test_forgets_and_fresh_imports_delete_the_index(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """The index is one of the conversation's keys: a forget of the user deletes it, and so does
    ``import --fresh`` (delete_conversation) before it writes the file's lines, whose times
    then make the whole index."""
    store = MemoryStore(any_redis, ttl_s=3600)
    keys = _keys(prefix)
    memory = keys.user_keys.memory_set(user_scope("demo"))
    await store.append(keys, [_turn("hello there", T0)], memory=memory)
    assert await any_redis.exists(keys.times)
    assert keys.times in keys.user_keys.keys_of(keys.index_member)
    await store.forget_user(keys.user_keys)
    assert not await any_redis.exists(keys.times)

    await store.append(keys, [_turn("hello there", T0)], memory=memory)
    who = Identity("master", "u-A", "c1", "demo", keys, memory, "demo")
    await delete_conversation(store, who)
    assert not await any_redis.exists(keys.times)
    lines = [HistoryLine("user", f"line {i}", T0 - (5 - i) * MINUTE) for i in range(3)]
    await import_lines(store, who, lines)
    assert await _index(any_redis, keys) == [
        (1, T0 - 5 * MINUTE),
        (2, T0 - 4 * MINUTE),
        (3, T0 - 3 * MINUTE),
    ]


async def test_an_import_after_newer_chat_is_indexed(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """``import`` appends older lines after the chat (out of time order): they join the index
    with their own times, and a span of their day finds them alone."""
    store = MemoryStore(any_redis, ttl_s=3600)
    keys = _keys(prefix)
    memory = keys.user_keys.memory_set(user_scope("demo"))
    await store.append(keys, [_turn(f"chat {i}", T0 + 10 * MINUTE + i) for i in range(3)])
    who = Identity("master", "u-A", "c1", "demo", keys, memory, "demo")
    lines = [HistoryLine("user", f"old line {i}", T0 + i * MINUTE) for i in range(4)]
    result = await import_lines(store, who, lines)
    assert (result.first_seq, result.last_seq) == (4, 7)
    assert await _spans(store, keys, [(T0 + MINUTE, T0 + 3 * MINUTE)]) == [DateSeqs(2, ((5, 7),))]


async def test_an_export_imported_again_rebuilds_the_index(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """restore_conversation (export, then import into an empty conversation) writes the turns
    at their seqs with their times: the index holds each of them, with the retention TTL."""
    store = MemoryStore(any_redis, ttl_s=3600)
    source, target = _keys(prefix, "from"), _keys(prefix, "to")
    await store.append(source, [_turn(f"new {i}", T0 + (10 + i) * MINUTE) for i in range(3)])
    await store.append(source, [_turn(f"old {i}", T0 + i * MINUTE) for i in range(2)])
    dump = await transfer.read_conversation(any_redis, source)
    assert await transfer.restore_conversation(store, target, dump, memory_scope="ns:demo") == 5
    assert await _index(any_redis, target) == await _index(any_redis, source)
    assert 3000 < await any_redis.ttl(target.times) <= 3600


async def _unordered(client: aioredis.Redis, keys: ConversationKeys) -> bool:
    return await client.hget(keys.meta, "ts_unordered") is not None


async def test_times_in_order_leave_the_conversation_unmarked(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A batched seed of turns of one time (a seeding request), appends and a regenerated reply
    all keep the times in seq order: no ``ts_unordered`` mark, so seq_spans.lua keeps the binary
    search over the turns (one run from the span's first seq to the first seq after it, the
    regenerated reply's old seq 9 inside it, as before the index)."""
    store = MemoryStore(any_redis, ttl_s=3600, batch_turns=3)
    keys = _keys(prefix)
    await store.append(keys, [_turn(f"seed{i}", T0) for i in range(7)])
    await store.append(keys, [_turn("q", T0 + MINUTE), _turn("a", T0 + MINUTE, "assistant")])
    [old] = [t for t in await store.all_turns(keys) if t.seq == 9]
    await store.append(
        keys, [_turn("a again", T0 + 2 * MINUTE, "assistant")], replace=[stored_terms(old)]
    )
    await store.append(keys, [_turn("later", T0 + 3 * MINUTE)])
    assert not await _unordered(any_redis, keys)
    assert await _spans(store, keys, [(T0 + MINUTE, T0 + 3 * MINUTE)]) == [DateSeqs(3, ((8, 11),))]


async def test_a_turn_said_before_the_last_stored_one_marks_the_times_unordered(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """An append whose time is before the newest stored turn's marks the conversation, and its
    dates are then found through the index: the older line is found on its day, where a binary
    search over the turns' times would find none."""
    store = MemoryStore(any_redis, ttl_s=3600)
    keys = _keys(prefix)
    await store.append(keys, [_turn(f"new{i}", T0 + (30 + i) * MINUTE) for i in range(5)])
    assert not await _unordered(any_redis, keys)
    await store.append(keys, [_turn("older", T0 + MINUTE)])
    assert await _unordered(any_redis, keys)
    assert await _spans(store, keys, [(T0, T0 + 2 * MINUTE)]) == [DateSeqs(1, ((6, 7),))]


async def test_a_batched_write_of_older_lines_marks_the_times_unordered(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A write of several batches (begin_write.lua, then write_turns.lua of 2 turns) whose times are
    before the stored turns' (an import after newer chat) marks the conversation; its lines
    are found on their day through the index."""
    store = MemoryStore(any_redis, ttl_s=3600, batch_turns=2)
    keys = _keys(prefix)
    await store.append(keys, [_turn("now", T0 + 60 * MINUTE)])
    await store.append(keys, [_turn(f"old{i}", T0 + i * MINUTE) for i in range(5)])
    assert await _unordered(any_redis, keys)
    assert await _spans(store, keys, [(T0 + 2 * MINUTE, T0 + 4 * MINUTE)]) == [
        DateSeqs(2, ((4, 6),))
    ]
