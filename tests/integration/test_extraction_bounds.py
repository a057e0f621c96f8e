"""Bounded, linear handling of extraction replies (issue 27 item 4: a huge or endless reply is cut
at a bound; the in-proxy worker's parsing never holds the proxy's event loop).

Before: a 16 KB reply cut off by its token limit froze every user's chat for 14 s, a 48 KB one for
114 s (the repair's string pattern was tried again from every quote inside an unterminated
literal, and every ``{`` / ``[`` decoded to the end of the reply).
"""

from __future__ import annotations

import asyncio
import gc
import json
import time

import pytest
import redis.asyncio as aioredis

from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.errors import ExtractionError
from litellm_memory_hook.extraction.parse import parse_extraction
from litellm_memory_hook.extraction.reply_json import MAX_REPLY_CHARS, find_json
from litellm_memory_hook.extraction.worker import ExtractionWorker
from litellm_memory_hook.settings import AliasMemoryConfig, MemorySettings, parse_alias_config
from litellm_memory_hook.store.keys import ConversationKeys, due_key, user_scope
from litellm_memory_hook.store.workers import KIND_PROXY
from tests.integration.test_worker import ScriptedModel
from tests.support.hook_calls import ALIASES

BOUND_S = 1.0  # generous: each shape below takes ~5-90 ms of CPU (the quadratic parser: 3.9 s+)
# CPU time of this thread (time.thread_time), not wall time nor the process's CPU: in a full
# run on a loaded 2-core machine, a 68 ms parse measured 1.14 s of wall time, and 0.76 s of
# process CPU time (other threads of the test process count there)

VALID = {"memories": ["Has a cat called Miso", "Lives in Pune"], "summary": "Cats and cities."}
VALID_TEXT = json.dumps(VALID)


def _truncated(chars: int, *, quotes: bool = False) -> str:
    """A reply cut off by its token limit at ``chars`` characters, in the middle of a string.

    ``quotes``: cut inside a summary that quotes the user again and again (a model in a loop);
    each ``\\"`` of the unterminated summary is a quote that the old repair started a match at
    which ran to the end of the reply. Otherwise: cut inside the list of memories.
    """
    if quotes:
        head = '{"memories": ["User fact number 1 about the garden"], "summary": "'
        text = head + 'The user said \\"ok\\" and \\"fine\\". ' * (chars // 30)
    else:
        text = '{"memories": [' + ", ".join(
            f'"User fact number {i} about the garden"' for i in range(chars // 20)
        )
    assert len(text) > chars
    return text[:chars]


def _timed(text: str) -> tuple[float, object]:
    """``find_json(text)`` (or its error) and this thread's CPU seconds for it: the least of
    three tries, the garbage collector off. In the full suite the first try of the first shape
    once took 1.1 s of CPU for a 68 ms parse (a cost of the suite's state, not of the parser);
    a quadratic parser is slow on every try."""
    times: list[float] = []
    value: object = None
    for _ in range(3):
        gc.collect()
        gc.disable()
        try:
            start = time.thread_time()
            try:
                value = find_json(text)
            except ExtractionError as exc:
                value = exc
            times.append(time.thread_time() - start)
        finally:
            gc.enable()
    return min(times), value


def test_a_48kb_reply_cut_in_its_memories_is_given_up_quickly() -> None:
    """A 48 KB reply cut inside its list of memories has no complete JSON value: the error
    comes in well under BOUND_S."""
    elapsed, value = _timed(_truncated(48_000))
    assert elapsed < BOUND_S
    assert isinstance(value, ExtractionError)
    assert "no complete JSON value" in str(value)


def test_a_48kb_reply_cut_in_a_quoting_summary_is_given_up_quickly() -> None:
    """A 48 KB reply cut inside a summary full of escaped quotes (3.9 s before, 114 s measured
    through a loaded proxy): its only complete value is the memories list, found in well under
    BOUND_S, and the reply is rejected for its shape (the worker keeps what was stored)."""
    text = _truncated(48_000, quotes=True)
    elapsed, value = _timed(text)
    assert elapsed < BOUND_S
    assert value == ["User fact number 1 about the garden"]
    gc.collect()
    gc.disable()
    try:
        start = time.thread_time()
        with pytest.raises(ExtractionError, match="a list, not an object"):
            parse_extraction(text)
        assert time.thread_time() - start < BOUND_S
    finally:
        gc.enable()


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("endless open arrays", "[" * 60_000),
        ("open arrays with strings", '["x", [' * 9_000),
        ("unclosed strings", '{"a": "' * 9_000),
        ("many braces", "{" * 60_000),
        ("quotes and fences", '\\"```\\"\\"{' * 6_000),
        ("nested objects", '{"a": [' * 9_000),
    ],
)
def test_pathological_shapes_end_in_an_error_quickly(name: str, text: str) -> None:
    """Shapes that cost a quadratic search before: no JSON value, found out in < BOUND_S."""
    elapsed, value = _timed(text)
    assert elapsed < BOUND_S, name
    assert isinstance(value, ExtractionError), name


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("braces in prose before it", "{ " * 1500 + VALID_TEXT),
        ("a truncated value before it", _truncated(20_000) + "\n```json\n" + VALID_TEXT + "\n```"),
        ("open arrays after it", "Here: " + VALID_TEXT + " [" * 20_000),
        ("unclosed strings after it", VALID_TEXT + ' {"a": "' * 5_000),
        ("escaped quotes before it", '\\"{' * 1_500 + " " + VALID_TEXT),
    ],
)
def test_the_reply_is_found_among_junk_quickly(name: str, text: str) -> None:
    """The valid reply is found where junk surrounds it, in < BOUND_S."""
    elapsed, value = _timed(text)
    assert elapsed < BOUND_S, name
    assert value == VALID, name


def test_an_endless_reply_is_cut_at_the_bound() -> None:
    """A reply that runs on past MAX_REPLY_CHARS (64,000) is read up to there: the JSON in its
    start is found; JSON only past the bound is not looked at."""
    assert MAX_REPLY_CHARS == 64_000
    endless = VALID_TEXT + " and more" * 100_000
    elapsed, value = _timed(endless)
    assert elapsed < BOUND_S
    assert value == VALID
    late = "x" * MAX_REPLY_CHARS + VALID_TEXT
    with pytest.raises(ExtractionError, match="longer than 64000 characters and was cut"):
        find_json(late)


def test_parse_extraction_of_a_long_valid_reply_is_bounded() -> None:
    """A 60 KB valid reply (200 memories, a long summary) parses and cleans in < BOUND_S."""
    memories = [f"User fact number {i} about the garden and the cat Miso" for i in range(200)]
    text = json.dumps({"memories": memories, "summary": "They talked. " * 3500})
    assert 50_000 < len(text) < MAX_REPLY_CHARS
    gc.collect()
    gc.disable()
    try:
        start = time.thread_time()
        result = parse_extraction(text, max_items=300)
        assert time.thread_time() - start < BOUND_S
    finally:
        gc.enable()
    assert result.memories == tuple(memories)
    assert result.summary is not None and len(result.summary) == 2000


def test_cost_grows_linearly() -> None:
    """Four times the reply costs at most ~4 times the time (8 allowed for noise; the old
    parser took ~9-16 times as long for each doubling of a quoted truncated reply)."""

    def cost(chars: int) -> float:
        text = _truncated(chars, quotes=True)
        return min(_timed(text)[0] for _ in range(3))

    small, large = cost(12_000), cost(48_000)
    assert large < max(8 * small, 0.02)


async def seed_conversation(
    client: aioredis.Redis, prefix: str, messages: int, *, user: str = "u-A", cursor: int = 0
) -> ConversationKeys:
    """A conversation of the ``demo`` alias stored as the hook stores it (meta, turns), due
    now: ``messages`` turns, user and assistant in turn, "message <seq> about my garden"."""
    keys = ConversationKeys.for_ids(prefix, "master", user, "demo")
    now = int(time.time() * 1000) - 60_000
    members: dict[str, int] = {}
    for seq in range(1, messages + 1):
        role = "user" if seq % 2 else "assistant"
        turn = Turn(role=role, text=f"message {seq} about my garden", ts_ms=now + seq)
        members[f'{{"seq":{seq},' + turn.body_json()] = seq
    await client.zadd(keys.turns, members)
    meta = {"user": user, "mscope": user_scope("demo"), "alias": "demo"}
    await client.hset(keys.meta, mapping={**meta, "seq": messages, "cursor": cursor})
    await client.zadd(due_key(prefix), {keys.ref: now})
    return keys


def lookup(name: str) -> AliasMemoryConfig | None:
    """The test aliases' memory configs."""
    return parse_alias_config(ALIASES.get(name))


async def test_the_in_proxy_worker_does_not_hold_the_event_loop(
    real_redis: aioredis.Redis, prefix: str
) -> None:
    """While the in-proxy worker handles a 48 KB truncated reply (twice: the reply and the
    retry's reply), a concurrent small coroutine that sleeps 1 ms at a time is never delayed
    by more than 0.1 s (the old parser held the loop 114 s)."""
    model = ScriptedModel([_truncated(48_000, quotes=True), _truncated(48_000, quotes=True)])
    await seed_conversation(real_redis, prefix, 14)
    worker = ExtractionWorker(
        real_redis,
        MemorySettings(key_prefix=prefix),
        model,
        alias_lookup=lookup,
        kind=KIND_PROXY,
    )
    worst = 0.0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal worst
        while not stop.is_set():
            before = time.perf_counter()  # wall time: how long the loop kept it waiting
            await asyncio.sleep(0.001)
            worst = max(worst, time.perf_counter() - before)

    tick = asyncio.create_task(ticker())
    worker.start()
    try:
        async with asyncio.timeout(20):
            while len(model.calls) < 2 or worker.jobs_failed < 1:
                await asyncio.sleep(0.01)
    finally:
        stop.set()
        await tick
        await worker.stop()
    assert len(model.calls) == 2  # the reply, then one retry asking for valid JSON
    assert worker.jobs_failed == 1
    assert worst < 0.1
