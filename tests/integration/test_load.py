"""No Redis call is long (issue 9 item 7): seeding and trimming run as bounded batches of short
scripts, and the seed-once guarantee holds under concurrent first requests.

Script times are read from SLOWLOG of a private ``redis-server`` (``slowlog-log-slower-than 0``):
the server's own execution time of every EVALSHA, without network or client time.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from litellm_memory_hook.core.indexing import indexed_chain, stored_terms
from litellm_memory_hook.core.models import IndexedTurn, Turn
from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.store.client import redis_client
from litellm_memory_hook.store.keys import ConversationKeys
from litellm_memory_hook.store.redis_store import (
    BATCH_TURNS,
    POSTINGS_CAP,
    MemoryStore,
    unpack_postings,
)
from litellm_memory_hook.store.retention import trim_oldest
from tests.support.hook_calls import Auth, make_hook, model_response
from tests.support.paths import LOCOMO
from tests.support.redis_servers import RedisServer, free_ports, redis_binaries

logger = logging.getLogger(__name__)

#: the longest script allowed (ms of server time). Batches are sized for ~1-3 ms; the margin is
#: for a busy CI machine (two CPUs shared with the proxy tests).
MAX_SCRIPT_MS = 15.0
#: SLOWLOG measures wall time: on a machine with more runnable processes than CPUs a script can
#: be descheduled mid-run. Up to this share of the scripts (and at least OUTLIER_MIN) may exceed
#: MAX_SCRIPT_MS, and never OUTLIER_MS (one unbatched seed of these sizes takes 150-250 ms on a
#: quiet machine, a whole unbatched trim about as long). CI runs saw one of a trim's ~66 scripts
#: at 16.9 ms (median 7.3 ms), and later two at 15.8 and 17.1 ms; on a quiet machine all of them
#: take 1.5-3 ms.
OUTLIER_SHARE = 0.05
OUTLIER_MIN = 3
OUTLIER_MS = 100.0

pytestmark = pytest.mark.skipif(redis_binaries() is None, reason="redis-server not installed")


def _lines(count: int) -> list[str]:
    """``count`` real chat lines (LoCoMo, cycled), or made-up ones when the data is absent."""
    texts: list[str] = []
    if LOCOMO.exists():
        for sample in json.loads(LOCOMO.read_text()):
            conversation = sample["conversation"]
            for name in sorted(conversation):
                if name.startswith("session_") and isinstance(conversation[name], list):
                    texts += [t["text"] for t in conversation[name]]
    if not texts:
        texts = [
            f"line {i} about gardens, trains and the weather in town {i % 97}" for i in range(500)
        ]
    return [texts[i % len(texts)] + f" #{i}" for i in range(count)]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A private Redis that logs every command's time in SLOWLOG."""
    found = RedisServer(
        tmp_path_factory.mktemp("slowlog"),
        free_ports(1)[0],
        ("--slowlog-log-slower-than", "0", "--slowlog-max-len", "1000000", "--appendonly", "no"),
    ).start()
    yield found
    found.stop()


@pytest.fixture
async def client(server: RedisServer) -> AsyncIterator[aioredis.Redis]:
    found = redis_client(server.url, timeout_s=60)
    await found.flushall()
    yield found
    await found.aclose()


async def _script_ms(client: aioredis.Redis) -> list[float]:
    """Server time (ms) of every script run since the last reset, then reset."""
    entries = await client.slowlog_get(1_000_000)
    await client.slowlog_reset()
    return sorted(
        e["duration"] / 1000 for e in entries if e["command"].upper().startswith(b"EVALSHA")
    )


async def _check_index(store: MemoryStore, keys: ConversationKeys) -> None:
    """The postings hash is exactly the index of the stored turns: df per term, the newest
    ``POSTINGS_CAP`` seqs ascending, ``idx_n`` the number of indexed turns."""
    turns = await store.all_turns(keys)
    expected: dict[str, list[int]] = {}
    indexed = 0
    for turn in turns:
        terms = stored_terms(turn).terms
        indexed += bool(terms)
        for term in terms:
            expected.setdefault(term, []).append(turn.seq)
    raw = await store.redis.hgetall(keys.postings)
    got = {k.decode(): unpack_postings(v) for k, v in raw.items()}
    assert set(got) == set(expected)
    for term, seqs in expected.items():
        df, listed = got[term]
        assert df == len(seqs), term
        assert listed.tolist() == seqs[-POSTINGS_CAP:], term
    assert int(await store.redis.hget(keys.meta, "idx_n") or 0) == indexed


def _check_times(times: list[float]) -> None:
    """Every script short: at most OUTLIER_SHARE (at least OUTLIER_MIN) above MAX_SCRIPT_MS
    (scheduling noise), none above OUTLIER_MS, the median under two thirds of MAX_SCRIPT_MS."""
    slow = [t for t in times if t > MAX_SCRIPT_MS]
    allowed = max(OUTLIER_MIN, int(OUTLIER_SHARE * len(times)))
    assert len(slow) <= allowed, f"{len(slow)} scripts over {MAX_SCRIPT_MS} ms"
    assert times[-1] <= OUTLIER_MS, f"longest script {times[-1]:.1f} ms"
    # a median of 1-3 ms on a quiet machine; 8 ms was seen when the shared CI machine ran ~3x
    # slower than usual: the median bound keeps a margin for that
    assert times[len(times) // 2] <= MAX_SCRIPT_MS * 2 / 3


async def _no_progress_left(client: aioredis.Redis, keys: ConversationKeys) -> None:
    fields = [f.decode() for f in await client.hkeys(keys.meta)]
    assert not [f for f in fields if f.startswith("writing:")]


async def test_a_10000_message_first_request_never_holds_redis_for_long(
    client: aioredis.Redis,
) -> None:
    """Issue 9 item 7: a whole-history first request of 10,000 messages through the hook is
    stored in order, once, with an exact index, by scripts of a few ms each (SLOWLOG), where
    one script held Redis for ~150-250 ms before."""
    prefix = "load"
    hook = make_hook(client, prefix)
    texts = _lines(10_001)  # ends with a user message
    messages: list[dict[str, Any]] = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": text}
        for i, text in enumerate(texts)
    ]
    data = {"model": "demo", "user": "u-big", "messages": messages, "litellm_call_id": "big-1"}
    await client.slowlog_reset()
    out = await hook.async_pre_call_hook(Auth(), None, data, "acompletion")
    assert out is not None
    await hook.async_post_call_success_hook(out, Auth(), model_response("reply"))
    times = await _script_ms(client)
    keys = ConversationKeys.for_ids(prefix, "master", "u-big", "demo")
    store = hook.store
    turns = await store.all_turns(keys)
    assert [t.text for t in turns] == [*texts, "reply"]
    assert [t.seq for t in turns] == list(range(1, 10_003))
    await _no_progress_left(client, keys)
    await _check_index(store, keys)
    logger.info(
        "seed of 10,001 messages: %d scripts, p50 %.2f ms, max %.2f ms, total %.0f ms",
        len(times),
        times[len(times) // 2],
        times[-1],
        sum(times),
    )
    assert len(times) > 10_000 // BATCH_TURNS
    _check_times(times)


async def test_one_script_would_be_long(client: aioredis.Redis) -> None:
    """The baseline the batches avoid: 5,000 turns as one script (batching off) hold Redis many
    times longer than any batch."""
    chain = indexed_chain([Turn(role="user", text=t, ts_ms=1) for t in _lines(5_000)])
    keys = ConversationKeys.for_ids("one", "master", "u", "c")
    await client.slowlog_reset()
    whole = MemoryStore(client, ttl_s=3600, batch_turns=10**9, batch_terms=10**9)
    await whole.append(keys, chain, call_id="w", seeded=len(chain) - 1)
    single = await _script_ms(client)
    batched_keys = ConversationKeys.for_ids("one", "master", "u", "d")
    await MemoryStore(client, ttl_s=3600).append(
        batched_keys, chain, call_id="b", seeded=len(chain) - 1
    )
    batches = await _script_ms(client)
    logger.info(
        "5,000 turns: one script %.1f ms; batched: %d scripts, max %.2f ms",
        single[-1],
        len(batches),
        batches[-1],
    )
    assert single[-1] > 5 * batches[len(batches) // 2], (single[-1], batches)


def _history(tag: str, count: int) -> list[IndexedTurn]:
    return indexed_chain(
        [
            Turn(role="user" if i % 2 == 0 else "assistant", text=f"{tag} {t}", ts_ms=i)
            for i, t in enumerate(_lines(count))
        ]
    )


async def test_concurrent_first_requests_seed_once(client: aioredis.Redis) -> None:
    """Two first requests carrying different long histories race (each a batched write), while a
    third request stores a small turn pair: exactly one history is stored as the seed, seqs 1..n
    in the client's order; the other's history is skipped; every request's own new turn is
    stored, after the seed; the index is exact; no progress marker is left."""
    keys = ConversationKeys.for_ids("race", "master", "u", "c")
    store = MemoryStore(client, ttl_s=3600)
    seed_a, seed_b = _history("alpha", 1500), _history("beta", 1500)
    new_a = indexed_chain([Turn(role="user", text="new from a", ts_ms=10**6)])
    new_b = indexed_chain([Turn(role="user", text="new from b", ts_ms=10**6)])

    async def small() -> None:
        # lands while the seeds are being written (a batched write builds its first batch in
        # slices, giving the loop turns, before its first script runs)
        deadline = asyncio.get_running_loop().time() + 30
        while not await store.count_turns(keys):
            assert asyncio.get_running_loop().time() < deadline, "no seed was written"
            await asyncio.sleep(0.001)
        pair = [
            Turn(role="user", text="small q", ts_ms=1),
            Turn(role="assistant", text="a", ts_ms=2),
        ]
        await store.append(keys, indexed_chain(pair), call_id="small")

    a, b, _ = await asyncio.gather(
        store.append(keys, [*seed_a, *new_a], call_id="A", seeded=len(seed_a)),
        store.append(keys, [*seed_b, *new_b], call_id="B", seeded=len(seed_b)),
        small(),
    )
    turns = await store.all_turns(keys)
    texts = [t.text for t in turns]
    winner = seed_a if a.first_seq == 1 else seed_b
    assert texts[:1500] == [item.turn.text for item in winner]
    assert [t.seq for t in turns] == list(range(1, len(turns) + 1))
    assert len(turns) == 1500 + 1 + 1 + 2
    assert {"new from a", "new from b", "small q"} <= set(texts[1500:])
    assert not ({"alpha", "beta"} <= {text.split()[0] for text in texts})
    assert (a.last_seq - a.first_seq) + (b.last_seq - b.first_seq) == 1500
    await _no_progress_left(client, keys)
    await _check_index(store, keys)


class _FailingStore(MemoryStore):
    """A store whose batch script fails (a timeout, say) after ``ok`` batches."""

    def __init__(self, redis: aioredis.Redis, ok: int) -> None:
        super().__init__(redis, ttl_s=3600)
        self.ok = ok
        real = self._write_batch

        async def flaky(*args: Any, **kwargs: Any) -> Any:
            if self.ok <= 0:
                from redis.exceptions import TimeoutError as RedisTimeout

                raise RedisTimeout("simulated timeout")
            self.ok -= 1
            return await real(*args, **kwargs)

        self._write_batch = flaky  # type: ignore[assignment]


async def test_a_batched_write_cut_short_resumes_on_retry(client: aioredis.Redis) -> None:
    """A write that fails after 3 batches raises StoreError; the retry with the same call id
    (as the hook's background retry does) finishes it where it stopped: every turn once, in
    order, the index exact; a third attempt writes nothing."""
    keys = ConversationKeys.for_ids("resume", "master", "u", "c")
    chain = _history("gamma", 600)
    with pytest.raises(StoreError):
        await _FailingStore(client, ok=3).append(keys, chain, call_id="R", seeded=599)
    partial = await client.zcard(keys.turns)
    assert 0 < partial < 600
    store = MemoryStore(client, ttl_s=3600)
    done = await store.append(keys, chain, call_id="R", seeded=599)
    again = await store.append(keys, chain, call_id="R", seeded=599)
    assert done.written and (done.first_seq, done.last_seq) == (1, 600)
    assert not again.written
    turns = await store.all_turns(keys)
    assert [t.text for t in turns] == [item.turn.text for item in chain]
    await _no_progress_left(client, keys)
    await _check_index(store, keys)


async def test_trimming_runs_in_short_scripts(client: aioredis.Redis) -> None:
    """Trimming 1,000 of 3,000 turns (``max_stored_messages`` 2,000) deletes the oldest in
    batches of short scripts, keeps the newest 2,000 and leaves an exact index."""
    keys = ConversationKeys.for_ids("trim", "master", "u", "c")
    store = MemoryStore(client, ttl_s=3600)
    chain = _history("delta", 3000)
    for start in range(0, 3000, 500):
        await store.append(keys, chain[start : start + 500], call_id=f"t{start}")
    await client.slowlog_reset()
    deleted = await trim_oldest(store, keys, 2000)
    times = await _script_ms(client)
    assert deleted == 1000
    turns = await store.all_turns(keys)
    assert [t.seq for t in turns] == list(range(1001, 3001))
    await _check_index(store, keys)
    logger.info(
        "trim of 1,000 turns: %d scripts, p50 %.2f ms, max %.2f ms",
        len(times),
        times[len(times) // 2],
        times[-1],
    )
    assert len(times) >= 1000 // BATCH_TURNS
    _check_times(times)


async def test_looking_for_an_agents_question_never_holds_redis_for_long(
    client: aioredis.Redis,
) -> None:
    """last_question.lua runs on the request path (a tool step whose stored tail holds no user
    message) and reads up to QUESTION_SCAN_TURNS (500) whole members into Lua. Its cost was
    measured with 200-character turns (0.5 ms); an agent's turns are tool calls and results of
    tens of thousands of characters each, within the stored bounds (text 32,000, tool arguments
    32,000, a message 64,000 as JSON): 500 such members are ~25 MB copied by one script, tens of
    ms during which Redis serves nobody."""
    keys = ConversationKeys.for_ids("agent", "master", "u", "c")
    store = MemoryStore(client, ttl_s=3600)
    await store.append(keys, indexed_chain([Turn(role="user", text="Fix the build.", ts_ms=1)]))
    for step in range(260):
        call = {
            "id": f"call_{step}",
            "type": "function",
            "function": {"name": "write_file", "arguments": json.dumps({"text": "y" * 30_000})},
        }
        said = Turn(role="assistant", text="w" * 20_000, ts_ms=2 + step, tool_calls=(call,))
        result = Turn(role="tool", text="z" * 30_000, ts_ms=2 + step, tool_call_id=f"call_{step}")
        await store.append(keys, [IndexedTurn(said), IndexedTurn(result)])
    await client.slowlog_reset()
    assert await store.last_question(keys, 10**6) is None  # the task is 520 turns back
    times = await _script_ms(client)
    assert times[-1] <= MAX_SCRIPT_MS, f"last_question.lua held Redis {times[-1]:.1f} ms"
