"""One evicted key never reuses a seq or mixes two histories (issue 27 item 2, field case E16).

A Redis shared with a cache under an evicting ``maxmemory-policy`` drops single keys. When the
conversation's ``meta`` hash went (it holds the seq counter), the counter restarted at 1 and new
turns took seqs already in use. The append scripts now notice a ``meta`` without ``seq`` beside
stored turns and go on from the newest stored turn. A property test deletes any single key of a
conversation between appends, on the tests' real Redis.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litellm_memory_hook.core.indexing import indexed_chain
from litellm_memory_hook.core.models import Turn, stored_text
from litellm_memory_hook.core.stored_messages import message_to_turn
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.settings import MemorySettings
from litellm_memory_hook.store.client import redis_client
from litellm_memory_hook.store.keys import ConversationKeys
from litellm_memory_hook.store.redis_store import MemoryStore
from tests.support.hook_calls import Auth, chat_request, make_hook, model_response
from tests.support.redis_url import real_redis_url

#: the keys one eviction may take: the conversation's own, and its user's
KEY_NAMES = ("meta", "turns", "calls", "postings", "times", "forgets", "index")


def _key(keys: ConversationKeys, name: str) -> str:
    if name in ("forgets", "index"):
        return str(getattr(keys.user_keys, name))
    return str(getattr(keys, name))


def _pair(step: int) -> list[Turn]:
    turns = [
        message_to_turn({"role": "user", "content": f"question {step}"}, ts_ms=1000 + step),
        message_to_turn({"role": "assistant", "content": f"answer {step}"}, ts_ms=1001 + step),
    ]
    return [t for t in turns if t is not None]


async def _stored(client: aioredis.Redis, keys: ConversationKeys) -> list[tuple[int, int, str]]:
    """(score, the body's seq, text) of every stored turn, in score order."""
    raw = await client.zrange(keys.turns, 0, -1, withscores=True)
    out = []
    for member, score in raw:
        body = json.loads(member)
        out.append((int(score), int(body["seq"]), stored_text(body)))
    return out


async def _scenario(prefix: str, steps: int, evictions: dict[int, str]) -> None:
    client = redis_client(real_redis_url())
    store = MemoryStore.for_settings(client, MemorySettings(key_prefix=prefix))
    keys = ConversationKeys.for_ids(prefix, "master", "u-evict", "demo")
    given_seqs: list[int] = []
    restored = 0
    try:
        for step in range(steps):
            if step in evictions:
                await client.delete(_key(keys, evictions[step]))
            result = await store.append(keys, indexed_chain(_pair(step)), call_id=f"call-{step}")
            assert result.written and not result.forgotten
            restored += result.meta_restored
            given_seqs.extend(range(result.first_seq, result.last_seq + 1))
        # never a reused seq: every seq given out is new
        assert len(given_seqs) == len(set(given_seqs)), given_seqs
        stored = await _stored(client, keys)
        scores = [score for score, _, _ in stored]
        assert scores == sorted(set(scores))  # one turn per seq
        assert all(score == seq for score, seq, _ in stored)
        # never a mixed history: in seq order, the turns are the appended ones, in their order
        order = [f"{kind} {step}" for step in range(steps) for kind in ("question", "answer")]
        texts = [text for _, _, text in stored]
        positions = [order.index(text) for text in texts]
        assert positions == sorted(positions), texts
        # the meta hash was restored exactly when it was evicted beside stored turns
        assert restored == sum(1 for s, name in evictions.items() if name == "meta" and s > 0)
    finally:
        async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            await client.delete(key)
        await client.aclose()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=st.integers(min_value=2, max_value=6),
    evictions=st.dictionaries(
        st.integers(min_value=0, max_value=5), st.sampled_from(KEY_NAMES), max_size=3
    ),
)
def test_an_evicted_key_never_reuses_a_seq_or_mixes_histories(
    prefix: str, steps: int, evictions: dict[int, str]
) -> None:
    """E16, as a property: whichever single key of a conversation (or of its user) is deleted
    before an append, no seq is given twice, every stored turn sits at its own seq, and the
    stored history reads in the order it was appended."""
    asyncio.run(_scenario(prefix, steps, {k: v for k, v in evictions.items() if k < steps}))


async def _turn(hook: MemoryHook, text: str, call_id: str) -> dict[str, Any]:
    data = await hook.async_pre_call_hook(
        Auth(), None, chat_request(text, call_id=call_id), "acompletion"
    )
    assert data is not None
    await hook.async_post_call_success_hook(data, Auth(), model_response(f"re: {text}"))
    return data


async def test_an_evicted_meta_key_leaves_one_history_in_order(
    real_redis: aioredis.Redis, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """E16 through the hook: three turns, DEL the conversation's meta key, two more turns, a
    question: the model receives one conversation, user and assistant alternating in the
    order said; the eviction is counted and said."""
    hook = make_hook(real_redis, prefix)
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    for i in range(3):
        await _turn(hook, f"first {i}", f"a{i}")
    await real_redis.delete(keys.meta)
    for i in range(2):
        await _turn(hook, f"second {i}", f"b{i}")
    data = await _turn(hook, "what did I say?", "q")
    window = [
        (m["role"], m["content"]) for m in data["messages"] if m["role"] in ("user", "assistant")
    ]
    said = [f"first {i}" for i in range(3)] + [f"second {i}" for i in range(2)]
    expected = [
        (role, text) for s in said for role, text in (("user", s), ("assistant", f"re: {s}"))
    ]
    assert window == [*expected, ("user", "what did I say?")]
    await hook.drain()
    stored = await _stored(real_redis, keys)
    assert [seq for seq, _, _ in stored] == list(range(1, 13))
    assert hook.counters["meta_evicted"] == 1
    assert any("was gone beside its stored turns" in r.getMessage() for r in caplog.records)


async def _extraction_lines(
    client: aioredis.Redis, prefix: str, keys: ConversationKeys
) -> list[str]:
    """Run the conversation's extraction job now; the lines its prompt showed the model."""
    from tests.integration.test_worker import ScriptedModel, _reply, _worker

    model = ScriptedModel([_reply(["Has a garden."])])
    outcome = await _worker(client, prefix, model).run_job(keys.ref)
    assert outcome.status == "committed", outcome
    [(_, user)] = [m for m in model.calls]
    return [line for line in user["content"].splitlines() if "message number" in line]


async def _cursor(client: aioredis.Redis, keys: ConversationKeys) -> int:
    return int(await client.hget(keys.meta, "cursor") or 0)


async def test_an_evicted_meta_key_keeps_the_extraction_cursor(
    real_redis: aioredis.Redis, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """After a job extracted 14 messages, the meta hash (which holds the cursor) is evicted:
    the next append restores the cursor from its copy in the calls hash, so the next job shows
    the model only the new messages (before: the cursor restarted at 0 and the job extracted
    the whole history again)."""
    from tests.integration.test_worker import _talk

    hook = make_hook(real_redis, prefix)
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    await _talk(hook, 7)
    await hook.drain()
    first = await _extraction_lines(real_redis, prefix, keys)
    assert len(first) == 7 and "message number 0 " in first[0]
    assert await _cursor(real_redis, keys) == 14
    await real_redis.delete(keys.meta)
    await _talk(hook, 1, start=7)
    await hook.drain()
    assert hook.counters["meta_evicted"] == 1 and hook.counters["meta_cursor_guessed"] == 0
    assert await _cursor(real_redis, keys) == 14  # from its copy
    assert int(await real_redis.hget(keys.meta, "seq")) == 16
    again = await _extraction_lines(real_redis, prefix, keys)
    assert len(again) == 1 and "message number 7 " in again[0], again
    assert await _cursor(real_redis, keys) == 16
    said = [r.getMessage() for r in caplog.records if "was gone beside" in r.getMessage()]
    assert said and "extraction cursor from its copy" in said[0]


async def test_an_evicted_meta_and_calls_never_extract_the_whole_history_again(
    real_redis: aioredis.Redis, prefix: str
) -> None:
    """Meta and calls (the cursor's copy) both evicted: the cursor becomes the newest stored
    seq (at most the messages since the last job go unextracted; counted and said), never 0."""
    from tests.integration.test_worker import _talk

    hook = make_hook(real_redis, prefix)
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    await _talk(hook, 7)
    await hook.drain()
    await _extraction_lines(real_redis, prefix, keys)
    await _talk(hook, 1, start=7)  # two messages not extracted yet
    await hook.drain()
    await real_redis.delete(keys.meta, keys.calls)
    await _talk(hook, 1, start=8)
    await hook.drain()
    assert hook.counters["meta_cursor_guessed"] == 1
    assert await _cursor(real_redis, keys) == 16  # the newest stored seq before the append
    again = await _extraction_lines(real_redis, prefix, keys)
    assert len(again) == 1 and "message number 8 " in again[0], again


async def test_an_evicted_meta_of_a_conversation_never_extracted_extracts_it_once(
    real_redis: aioredis.Redis, prefix: str
) -> None:
    """No job ran yet (the cursor is 0, and so is its copy, written when the conversation
    began): after the eviction the cursor stays 0 and the first job sees every message."""
    from tests.integration.test_worker import _talk

    hook = make_hook(real_redis, prefix)
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "demo")
    await _talk(hook, 3)
    await hook.drain()
    await real_redis.delete(keys.meta)
    await _talk(hook, 1, start=3)
    await hook.drain()
    assert hook.counters["meta_evicted"] == 1 and hook.counters["meta_cursor_guessed"] == 0
    assert await _cursor(real_redis, keys) == 0
    lines = await _extraction_lines(real_redis, prefix, keys)
    assert len(lines) == 4 and "message number 0 " in lines[0], lines
