"""Extraction failures by kind (issue 27 item 4, field case E10): a context error splits the batch
or skips what cannot fit; 401/403/404 back off longer; any failure is tried a bounded number of
times with exponential backoff, then given up until the next message; new messages meanwhile
run no model call."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import redis.asyncio as aioredis

from litellm_memory_hook.extraction.client import ExtractionCallError, ModelReply, failure_kind
from litellm_memory_hook.extraction.failures import Failures, after_failure
from litellm_memory_hook.extraction.worker import ExtractionWorker
from litellm_memory_hook.settings import MemorySettings
from litellm_memory_hook.store.keys import ConversationKeys, due_key, stats_key
from tests.integration.test_extraction_bounds import lookup, seed_conversation

CONTEXT_MESSAGE = (
    "This model's maximum context length is 8192 tokens. However, your messages resulted in "
    "9100 tokens. Please reduce the length of the messages."
)


def test_failure_kinds() -> None:
    """The kind of a failed call, from its status and message."""
    assert failure_kind(400, CONTEXT_MESSAGE) == "context"
    assert failure_kind(None, "litellm.ContextWindowExceededError: too long") == "context"
    assert failure_kind(413, "prompt is too long: 210000 tokens > 200000 maximum") == "context"
    assert failure_kind(401, "Incorrect API key provided") == "auth"
    assert failure_kind(403, "forbidden") == "auth"
    assert failure_kind(404, "The model `gpt-9` does not exist") == "not_found"
    assert failure_kind(400, "scripted error") == "other"
    assert failure_kind(None, "Connection refused") == "other"
    assert ExtractionCallError("x: " + CONTEXT_MESSAGE, 400).kind == "context"


def test_backoff_doubles_then_gives_up() -> None:
    """Waits of 30, 60, 120 s after tries 1-3; the 4th failed try gives up at the last seq; a
    401 waits 600 s; the wait is capped by extraction_backoff_max_s."""
    settings = MemorySettings()
    state, waits = Failures(), []
    for _ in range(3):
        state = after_failure(state, "other", now_ms=1000, last_seq=9, settings=settings)
        waits.append(state.next_ms - 1000)
        assert not state.given_up
    assert waits == [30_000, 60_000, 120_000]
    state = after_failure(state, "other", now_ms=1000, last_seq=9, settings=settings)
    assert state.given_up and state.seq == 9 and state.attempts == 4
    assert state.waiting_for_message(9) and not state.waiting_for_message(10)
    assert state.new_round() == Failures()
    auth = after_failure(Failures(), "auth", now_ms=0, last_seq=1, settings=settings)
    assert auth.next_ms == 600_000
    capped = MemorySettings(extraction_backoff_s=1000, extraction_backoff_max_s=1500)
    state = Failures(attempts=2)
    assert after_failure(state, "other", now_ms=0, last_seq=1, settings=capped).next_ms == 1_500_000


class FailingModel:
    """A model that raises ExtractionCallError(message, status), recording each prompt; with
    ``fits``, a prompt whose user message is at most that long is answered with ``reply``."""

    def __init__(self, status: int | None, message: str, *, fits: int = 0, reply: str = "") -> None:
        self.status = status
        self.message = message
        self.fits = fits
        self.reply = reply
        self.calls: list[list[dict[str, str]]] = []

    async def complete(
        self, model: str, messages: list[dict[str, str]], *, json_mode: bool, timeout_s: float
    ) -> ModelReply:
        self.calls.append(messages)
        if self.fits and len(messages[-1]["content"]) <= self.fits:
            return ModelReply(self.reply)
        raise ExtractionCallError(f"model {model!r} failed: {self.message}", self.status)

    def lines_sent(self, call: int) -> int:
        """How many conversation lines the prompt of call ``call`` held."""
        return self.calls[call][-1]["content"].count(" about my garden")


def _worker(client: aioredis.Redis, prefix: str, model: Any, **settings: Any) -> ExtractionWorker:
    return ExtractionWorker(
        client, MemorySettings(key_prefix=prefix, **settings), model, alias_lookup=lookup
    )


async def _stats(client: aioredis.Redis, prefix: str) -> dict[str, int]:
    raw = await client.hgetall(stats_key(prefix))
    return {k.decode(): int(v) for k, v in raw.items()}


async def _due_now(client: aioredis.Redis, keys: ConversationKeys) -> None:
    """What a new message does to the due set (the hook makes a lagging conversation due)."""
    await client.zadd(due_key(keys.prefix), {keys.ref: 0})


async def test_e10_a_failing_call_is_tried_four_times_then_given_up(
    real_redis: aioredis.Redis, prefix: str
) -> None:
    """E10: a model answering 400 is called once per try: the next try waits the backoff even
    when messages make the conversation due meanwhile; the 4th failure gives up (counted, the
    conversation leaves the due set), a trigger without a new message calls nothing, and a new
    message starts a new round."""
    keys = await seed_conversation(real_redis, prefix, 14)
    model = FailingModel(400, "scripted error")
    worker = _worker(real_redis, prefix, model)
    for attempt in range(1, 5):
        before = int(time.time() * 1000)
        [outcome] = await worker.run_due()
        assert outcome.status == "failed" and len(model.calls) == attempt
        await _due_now(real_redis, keys)  # a message meanwhile: due, but waits the backoff
        if attempt < 4:
            assert outcome.again_ms is not None
            assert outcome.again_ms >= before + 30_000 * 2 ** (attempt - 1)
            [waiting] = await worker.run_due()
            assert waiting.status == "backoff" and len(model.calls) == attempt
            await real_redis.hset(keys.extraction_failures, "next_ms", 0)  # the wait is over
            await _due_now(real_redis, keys)
    assert outcome.given_up
    stats = await _stats(real_redis, prefix)
    assert stats["jobs_given_up"] == 1 and stats["failures_other"] == 4
    [waiting] = await worker.run_due()  # due again, but no message since it gave up
    assert waiting.status == "waiting" and len(model.calls) == 4
    assert await real_redis.zscore(due_key(prefix), keys.ref) is None
    await real_redis.hset(keys.meta, "seq", 15)  # a new message: a new trigger
    await _due_now(real_redis, keys)
    [outcome] = await worker.run_due()
    assert outcome.status == "failed" and not outcome.given_up and len(model.calls) == 5
    assert int(await real_redis.hget(keys.extraction_failures, "attempts")) == 1


@pytest.mark.parametrize("status", [401, 403, 404])
async def test_auth_and_not_found_back_off_longer(
    real_redis: aioredis.Redis, prefix: str, status: int
) -> None:
    """401, 403 and 404 wait extraction_auth_backoff_s (600 s) before the next try."""
    await seed_conversation(real_redis, prefix, 4)
    before = int(time.time() * 1000)
    [outcome] = await _worker(real_redis, prefix, FailingModel(status, "no")).run_due()
    assert outcome.status == "failed" and outcome.again_ms is not None
    assert before + 600_000 <= outcome.again_ms <= before + 605_000


async def test_e10_a_context_error_splits_the_batch(
    real_redis: aioredis.Redis, prefix: str
) -> None:
    """E10: 20 lines that do not fit are sent again as 10, then 5 (which fit): the job commits
    through the 5th line, the rest runs next from the budget that fitted, and the cursor
    reaches the end with one model call per further job."""
    keys = await seed_conversation(real_redis, prefix, 20)
    reply = json.dumps({"memories": ["Has a garden"], "summary": "Gardens."})
    model = FailingModel(400, CONTEXT_MESSAGE, fits=900, reply=reply)
    worker = _worker(real_redis, prefix, model)
    [outcome] = await worker.run_due()
    assert outcome.status == "committed" and outcome.more
    assert [model.lines_sent(i) for i in range(len(model.calls))] == [20, 10, 5]
    assert int(await real_redis.hget(keys.meta, "cursor")) == 5
    while await worker.run_due():
        pass
    assert int(await real_redis.hget(keys.meta, "cursor")) == 20
    later = [model.lines_sent(i) for i in range(3, len(model.calls))]
    assert sum(later) == 15 and max(later) <= 5  # no call refused again
    assert (await _stats(real_redis, prefix))["jobs_split"] == 2


async def test_e10_a_line_that_never_fits_is_skipped(
    real_redis: aioredis.Redis, prefix: str
) -> None:
    """E10: a model that refuses every prompt as too long: lines are halved down to one, which
    is skipped (the cursor moves past it, counted); the conversation ends with its cursor at
    the last message and no job left, after a bounded number of calls."""
    keys = await seed_conversation(real_redis, prefix, 8)
    model = FailingModel(400, CONTEXT_MESSAGE)
    worker = _worker(real_redis, prefix, model)
    for _ in range(20):
        if not await worker.run_due():
            break
    assert int(await real_redis.hget(keys.meta, "cursor")) == 8
    assert await real_redis.zscore(due_key(prefix), keys.ref) is None
    stats = await _stats(real_redis, prefix)
    assert stats["lines_skipped"] == 8
    assert len(model.calls) == 4 + 7  # 8, 4, 2, 1 lines; then one call per remaining line
