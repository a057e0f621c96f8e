"""The time index (``times``: score = a turn's ts, member = its seq) on every way turns are
stored and removed: one-script appends, batched writes, regenerations, deletes, trims, forgets,
the TTL, imports, export and import of a user, and conversations stored before the index
existed. On fakeredis, a real Redis and a real Redis Cluster.

A conversation begun now keeps the run form (meta ``truns``): an entry for the first stored turn
and for each stored turn said before the one stored before it, and nothing else, whatever way its
turns came and went (:func:`_runs`); an index an older version made (an entry for every turn)
is kept as it was."""

from __future__ import annotations

import redis.asyncio as aioredis
from hypothesis import given, settings
from hypothesis import strategies as st

from litellm_memory_hook.core import recall
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


def runs_of(turns: list[Turn]) -> list[tuple[int, int]]:
    """The run form of the index of these stored turns (seq order), as :func:`_index` gives it:
    the first turn and each turn said before the turn before it, by ts then seq."""
    starts = [t for i, t in enumerate(turns) if i == 0 or turns[i - 1].ts_ms > t.ts_ms]
    return sorted(((t.seq, t.ts_ms) for t in starts), key=lambda e: (e[1], e[0]))


async def _runs(store: MemoryStore, keys: ConversationKeys) -> list[tuple[int, int]]:
    """The index the stored turns give in the run form; the stored index must be it."""
    expected = runs_of(await store.all_turns(keys))
    assert await _index(store.redis, keys) == expected
    assert await store.redis.hget(keys.meta, "truns") == b"1"
    return expected


async def _as_older_versions_left_it(client: aioredis.Redis, keys: ConversationKeys) -> None:
    """Make the conversation's index the full form an older version wrote: an entry for every
    stored turn, no ``truns`` mark."""
    turns = [Turn.from_member(m) for m in await client.zrange(keys.turns, 0, -1)]
    await client.delete(keys.times)
    if turns:
        await client.zadd(keys.times, {t.seq.to_bytes(4, "big"): t.ts_ms for t in turns})
    await client.hdel(keys.meta, "truns")


async def _spans(
    store: MemoryStore, keys: ConversationKeys, spans: list[tuple[int, int]]
) -> list[DateSeqs]:
    _, postings = await store.load(
        keys, keys.user_keys.memory_set(user_scope("demo")), tail=1, date_spans=spans
    )
    return postings.spans


async def test_a_write_indexes_the_turns_that_start_runs(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """One-script appends: the first turn starts the index, a turn said after the one before it
    adds nothing, one said before it (minute 1 stored after minute 11) starts a run; a repeated
    call id adds nothing."""
    store = MemoryStore(any_redis, ttl_s=3600)
    keys = _keys(prefix)
    await store.append(keys, [_turn("a", T0 + 10 * MINUTE), _turn("b", T0 + 11 * MINUTE)])
    assert await _runs(store, keys) == [(1, T0 + 10 * MINUTE)]
    await store.append(keys, [_turn("c", T0 + MINUTE)], call_id="x")
    await store.append(keys, [_turn("c", T0 + MINUTE)], call_id="x")
    assert await _runs(store, keys) == [(3, T0 + MINUTE), (1, T0 + 10 * MINUTE)]
    assert await _spans(store, keys, [(T0, T0 + 2 * MINUTE)]) == [DateSeqs(1, ((3, 4),))]


async def test_a_batched_write_indexes_every_batch(any_redis: aioredis.Redis, prefix: str) -> None:
    """A write larger than one script (begin_write.lua, then write_turns.lua batches of 3 turns)
    keeps the index as one script would; a request's turn stored between two such writes too."""
    store = MemoryStore(any_redis, ttl_s=3600, batch_turns=3)
    keys = _keys(prefix)
    await store.append(keys, [_turn(f"w{i}", T0 + (20 + i) * MINUTE) for i in range(7)])
    await store.append(keys, [_turn("now", T0 + 40 * MINUTE)])
    await store.append(keys, [_turn(f"old{i}", T0 + i * MINUTE) for i in range(5)], call_id="i")
    assert await _runs(store, keys) == [(9, T0), (1, T0 + 20 * MINUTE)]
    assert await _spans(store, keys, [(T0 + 3 * MINUTE, T0 + 22 * MINUTE)]) == [
        DateSeqs(4, ((1, 3), (12, 14)))
    ]


async def test_a_regenerated_reply_keeps_one_entry(any_redis: aioredis.Redis, prefix: str) -> None:
    """A regenerate replaces the stored reply (``replace``) in the script that stores the new
    one: the index stays one run."""
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
    assert await _runs(store, keys) == [(1, T0)]
    assert await any_redis.zcard(keys.turns) == 2


async def test_deletes_and_trims_take_turns_out_of_the_index(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """delete_turns and trim_oldest (the oldest by seq, in batches): a removed turn that started
    a run hands it to the turn after it; the index keeps the retention TTL."""
    store = MemoryStore(any_redis, ttl_s=3600, batch_turns=4)
    keys = _keys(prefix)
    # seqs 1-10 said at minutes 10..19, then seqs 11-20 imported at minutes 0..9
    await store.append(keys, [_turn(f"new{i}", T0 + (10 + i) * MINUTE) for i in range(10)])
    await store.append(keys, [_turn(f"old{i}", T0 + i * MINUTE) for i in range(10)])
    assert await _runs(store, keys) == [(11, T0), (1, T0 + 10 * MINUTE)]
    [fifth] = [t for t in await store.all_turns(keys) if t.seq == 5]
    assert await store.delete_turns(keys, [stored_terms(fifth)]) == 1
    assert await _runs(store, keys) == [(11, T0), (1, T0 + 10 * MINUTE)]
    [first] = [t for t in await store.all_turns(keys) if t.seq == 1]
    assert await store.delete_turns(keys, [stored_terms(first)]) == 1
    assert await _runs(store, keys) == [(11, T0), (2, T0 + 11 * MINUTE)]
    # 18 turns, bound 12 (trim step 1): the 6 oldest by seq go (2-4, 6-8)
    assert await trim_oldest(store, keys, 12) == 6
    assert await _runs(store, keys) == [(11, T0), (9, T0 + 18 * MINUTE)]
    assert 3000 < await any_redis.ttl(keys.times) <= 3600
    assert await _spans(store, keys, [(T0, T0 + 20 * MINUTE)]) == [DateSeqs(12, ((9, 21),))]
    assert await _spans(store, keys, [(T0 + 5 * MINUTE, T0 + 19 * MINUTE)]) == [
        DateSeqs(6, ((9, 10), (16, 21)))
    ]


async def test_every_turn_gone_leaves_no_index(any_redis: aioredis.Redis, prefix: str) -> None:
    """Deleting every turn leaves no ``times`` key (an empty sorted set is no key), and the
    next write starts a complete index again."""
    store = MemoryStore(any_redis, ttl_s=3600)
    keys = _keys(prefix)
    await store.append(keys, [_turn("a", T0), _turn("b", T0 + MINUTE)])
    await store.delete_turns(keys, [stored_terms(t) for t in await store.all_turns(keys)])
    assert not await any_redis.exists(keys.times)
    await store.append(keys, [_turn("c", T0 + 2 * MINUTE)])
    assert await _runs(store, keys) == [(3, T0 + 2 * MINUTE)]


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
    await any_redis.hdel(keys.meta, "truns")
    await store.append(keys, [_turn("later", T0 + 10 * MINUTE)])
    assert not await any_redis.exists(keys.times)
    assert await _spans(store, keys, [(T0 + MINUTE, T0 + 3 * MINUTE)]) == [DateSeqs(2, ((2, 4),))]
    await store.delete_turns(keys, [stored_terms(t) for t in await store.all_turns(keys)])
    await store.append(keys, [_turn("again", T0 + 20 * MINUTE)])
    assert await _runs(store, keys) == [(6, T0 + 20 * MINUTE)]


async def test_a_full_index_missing_turns_is_not_used(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """An index of the full form that does not hold every stored turn (an older proxy wrote
    turns during a rolling upgrade) is never read: the span script compares its size with the
    turns' and binary-searches the times instead; writes leave it as it is."""
    store = MemoryStore(any_redis, ttl_s=3600)
    keys = _keys(prefix)
    await store.append(keys, [_turn(f"w{i}", T0 + i * MINUTE) for i in range(4)])
    await _as_older_versions_left_it(any_redis, keys)
    await any_redis.zrem(keys.times, (3).to_bytes(4, "big"))
    await store.append(keys, [_turn("later", T0 + 10 * MINUTE)])
    assert [seq for seq, _ in await _index(any_redis, keys)] == [1, 2, 4]
    assert await _spans(store, keys, [(T0 + 2 * MINUTE, T0 + 11 * MINUTE)]) == [
        DateSeqs(3, ((3, 6),))
    ]
    assert not await any_redis.hexists(keys.meta, "truns")


async def test_a_full_index_an_older_version_made_is_kept_full(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """An index of the full form (an entry for every turn: an older version's, in users'
    Redis) gets an entry for every turn stored after, loses those of the turns removed, and
    finds dates as it did: through its entries once the times are out of order."""
    store = MemoryStore(any_redis, ttl_s=3600, batch_turns=3)
    keys = _keys(prefix)
    await store.append(keys, [_turn(f"new{i}", T0 + (10 + i) * MINUTE) for i in range(3)])
    await _as_older_versions_left_it(any_redis, keys)
    await store.append(keys, [_turn(f"old{i}", T0 + i * MINUTE) for i in range(5)])
    await store.append(keys, [_turn("now", T0 + 20 * MINUTE)])
    [second] = [t for t in await store.all_turns(keys) if t.seq == 2]
    assert await store.delete_turns(keys, [stored_terms(second)]) == 1
    assert await _index(any_redis, keys) == [
        *((4 + i, T0 + i * MINUTE) for i in range(5)),
        (1, T0 + 10 * MINUTE),
        (3, T0 + 12 * MINUTE),
        (9, T0 + 20 * MINUTE),
    ]
    assert not await any_redis.hexists(keys.meta, "truns")
    assert await _spans(store, keys, [(T0 + 3 * MINUTE, T0 + 11 * MINUTE)]) == [
        DateSeqs(3, ((1, 2), (7, 9)))
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
    assert await _runs(store, keys) == [(1, T0 - 5 * MINUTE)]


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
    assert await _runs(store, keys) == [(4, T0), (1, T0 + 10 * MINUTE)]
    assert await _spans(store, keys, [(T0 + MINUTE, T0 + 3 * MINUTE)]) == [DateSeqs(2, ((5, 7),))]


async def test_an_export_imported_again_rebuilds_the_index(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """restore_conversation (export, then import into an empty conversation) writes the turns
    at their seqs with their times: the same index, with the retention TTL."""
    store = MemoryStore(any_redis, ttl_s=3600)
    source, target = _keys(prefix, "from"), _keys(prefix, "to")
    await store.append(source, [_turn(f"new {i}", T0 + (10 + i) * MINUTE) for i in range(3)])
    await store.append(source, [_turn(f"old {i}", T0 + i * MINUTE) for i in range(2)])
    dump = await transfer.read_conversation(any_redis, source)
    assert await transfer.restore_conversation(store, target, dump, memory_scope="ns:demo") == 5
    assert await _runs(store, target) == await _runs(store, source)
    assert await _index(any_redis, target) == [(4, T0), (1, T0 + 10 * MINUTE)]
    assert 3000 < await any_redis.ttl(target.times) <= 3600


async def test_an_evicted_meta_hash_keeps_the_run_form(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A meta hash an evicting Redis dropped takes its ``truns`` mark back from the index's size
    (fewer entries than turns: the run form), so the imported lines are still found on their
    day; an export leaves the mark out (it is rebuilt)."""
    store = MemoryStore(any_redis, ttl_s=3600)
    keys = _keys(prefix)
    await store.append(keys, [_turn(f"chat {i}", T0 + (10 + i) * MINUTE) for i in range(3)])
    await store.append(keys, [_turn(f"old {i}", T0 + i * MINUTE) for i in range(4)])
    span = [(T0 + MINUTE, T0 + 3 * MINUTE)]
    assert await _spans(store, keys, span) == [DateSeqs(2, ((5, 7),))]
    assert "truns" not in (await transfer.read_conversation(any_redis, keys)).meta
    await any_redis.delete(keys.meta)
    await store.append(keys, [_turn("after", T0 + 20 * MINUTE)])
    assert await _runs(store, keys) == [(4, T0), (1, T0 + 10 * MINUTE)]
    assert await _spans(store, keys, span) == [DateSeqs(2, ((5, 7),))]


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


async def _random_history(
    client: aioredis.Redis, keys: ConversationKeys, steps: list[tuple[str, int, int]], cap: int
) -> MemoryStore:
    """Store and remove turns as ``steps`` say: ``("add", minute, n)`` appends n turns said from
    that minute on (several batches when n > 2), ``("del", k, _)`` deletes the k-th stored turn
    (modulo their number), ``("gap", minute, n)`` writes n turns at seqs a later write took
    (as a batched write's reserved seqs, or an import of an export, fill in behind newer
    turns)."""
    store = MemoryStore(client, ttl_s=600, postings_cap=cap, batch_turns=2)
    for number, (kind, a, b) in enumerate(steps):
        if kind == "add":
            turns = [_turn(f"t{number} {j}", T0 + (a + j) * MINUTE) for j in range(b)]
            await store.append(keys, turns, call_id=f"c{number}")
        elif kind == "del":
            stored = await store.all_turns(keys)
            if stored:
                await store.delete_turns(keys, [stored_terms(stored[a % len(stored)])])
        else:
            top = int(await client.hget(keys.meta, "seq") or 0)
            await client.hset(keys.meta, "seq", top + b + 1)
            await store.append(keys, [_turn(f"late {number}", T0 + (a + 1) * MINUTE)])
            await client.hset(keys.meta, "seq", top)
            turns = [_turn(f"g{number} {j}", T0 + (a + j) * MINUTE) for j in range(b)]
            await store.append(keys, turns)
            await client.hset(keys.meta, "seq", top + b + 2)
    return store


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("add"), st.integers(0, 40), st.integers(1, 4)),
            st.tuples(st.just("del"), st.integers(0, 50), st.just(0)),
            st.tuples(st.just("gap"), st.integers(0, 40), st.integers(1, 3)),
        ),
        min_size=1,
        max_size=14,
    ),
    st.lists(st.tuples(st.integers(-2, 45), st.integers(0, 20)), min_size=1, max_size=3),
    st.integers(1, 6),
)
def test_the_run_form_finds_what_the_full_form_finds(
    steps: list[tuple[str, int, int]], spans: list[tuple[int, int]], cap: int
) -> None:
    """Whatever turns come and go, in whatever time order and at whatever seqs: the index is
    the run form of the stored turns, and each span finds what the full form (every stored turn,
    as an older version kept it) finds: the count of its turns and the latest ``cap`` of them by
    time, then seq."""
    import asyncio

    import fakeredis

    async def run() -> None:
        client = fakeredis.FakeAsyncRedis(decode_responses=False)
        keys = _keys("p")
        store = await _random_history(client, keys, steps, cap)
        asked = [(T0 + a * MINUTE, T0 + (a + w) * MINUTE) for a, w in spans]
        if await store.count_turns(keys):
            await _runs(store, keys)
        await client.hset(keys.meta, "ts_unordered", 1)  # dates through the index
        found = await _spans(store, keys, asked)
        await _as_older_versions_left_it(client, keys)
        assert await _spans(store, keys, asked) == found
        await client.aclose()

    asyncio.run(run())


async def test_times_out_of_order_again_and_again_turn_the_index_full(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """Past 32 runs the run form would cost the reads more than it saves: the index turns to
    the full form, 400 stored turns a script (``truns`` = ``f<seq>`` meanwhile, every turn
    below the seq and every turn stored since with an entry), and dates are found the same
    all along."""
    store = MemoryStore(any_redis, ttl_s=3600, batch_turns=100)
    keys = _keys(prefix)
    said = [T0 + i * MINUTE for i in range(960)]
    said += [T0 + (2000 + i if i % 2 else i) * MINUTE for i in range(80)]  # 41 runs
    await store.append(keys, [_turn(f"w{i}", t) for i, t in enumerate(said)])
    spans = [(T0 + 3 * MINUTE, T0 + 30 * MINUTE), (T0 + 900 * MINUTE, T0 + 2100 * MINUTE)]
    found = await _spans(store, keys, spans)
    for (start, end), got in zip(spans, found, strict=True):
        inside = [seq for seq, t in enumerate(said, 1) if start <= t < end]
        assert got.df == len(inside) and recall.date_postings(got.runs).tolist() == inside
    assert await any_redis.hget(keys.meta, "truns") == b"f0"
    steps = []
    for i in range(3):
        await store.append(keys, [_turn(f"later {i}", T0 + (3000 + i) * MINUTE)])
        steps.append(await any_redis.hget(keys.meta, "truns"))
        assert await _spans(store, keys, spans) == found
    assert steps == [b"f401", b"f801", None]
    assert await any_redis.zcard(keys.times) == await any_redis.zcard(keys.turns) == 1043
    await _as_older_versions_left_it(any_redis, keys)
    assert await _spans(store, keys, spans) == found
