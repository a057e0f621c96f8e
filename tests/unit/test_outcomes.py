"""N01 in-process: the outcome each pre-call path leaves for the ``x-memory-outcome`` header
(the reasons a shared proxy cannot stage cheaply: Redis down, no tenant, a bad alias config, a
failure of ours, an extraction call); the e2e test in test_e2e_round3.py covers the rest through
a real proxy."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio as aioredis

from litellm_memory_hook.extraction.prompt import build_extraction_messages, is_extraction_call
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.proxy.outcomes import OUTCOME_HEADER, OUTCOMES, read_outcome, set_outcome
from litellm_memory_hook.settings import MemorySettings
from tests.support.hook_calls import ALIASES, Auth, chat_request, make_hook


async def _outcome(hook: MemoryHook, data: dict[str, Any], auth: Any = None) -> str | None:
    out = await hook.async_pre_call_hook(auth or Auth(), None, data, "acompletion")
    assert out is data
    headers = await hook.async_post_call_response_headers_hook(data, auth or Auth(), None, {})
    value = (headers or {}).get(OUTCOME_HEADER)
    assert value == read_outcome(data)
    return value


async def test_each_path_says_its_outcome(fake_redis: aioredis.Redis, prefix: str) -> None:
    hook = make_hook(fake_redis, prefix)
    assert await _outcome(hook, chat_request()) == "used"
    assert await _outcome(hook, chat_request(model="plain")) is None  # no memory: no header
    assert await _outcome(hook, chat_request(user="")) == "no_user"
    no_ids = Auth(token="", user_id=None)
    assert await _outcome(hook, chat_request(), no_ids) == "no_tenant"
    extraction = chat_request()
    extraction["messages"] = build_extraction_messages(memories=[], pinned=[], summary="", lines=[])
    assert is_extraction_call(extraction["messages"])
    assert await _outcome(hook, extraction) == "extraction"
    assert hook.counters["outcome_used"] == 1 and hook.counters["outcome_no_user"] == 1


async def test_redis_down_config_error_and_our_failure(prefix: str) -> None:
    down = MemoryHook(
        settings=MemorySettings(
            key_prefix=prefix,
            redis_url="redis://127.0.0.1:1/0",  # nothing listens: refused at once
            worker_in_proxy=False,
            redis_timeout_s=0.5,
        ),
        alias_lookup=lambda model: ALIASES.get(model),
    )
    assert await _outcome(down, chat_request()) == "redis_down"
    assert await _outcome(down, chat_request(call_id="c2")) == "redis_down"  # the breaker
    await down.store.redis.aclose()

    bad = MemoryHook(
        settings=MemorySettings(key_prefix=prefix, worker_in_proxy=False),
        alias_lookup=lambda model: {"memory": {"enabled": True, "window": {"max_chars": "lots"}}},
    )
    assert await _outcome(bad, chat_request()) == "config_error"


async def test_a_failure_of_ours_says_error(
    fake_redis: aioredis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    hook = make_hook(fake_redis, prefix)

    async def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(hook, "_rebuild", broken)
    assert await _outcome(hook, chat_request()) == "error"


def test_a_client_value_is_dropped_and_unknown_values_refused() -> None:
    with pytest.raises(ValueError, match="unknown memory outcome"):
        set_outcome({}, "maybe")
    assert read_outcome({"metadata": {"litellm_memory_outcome": "nonsense"}}) is None
    assert {"used", "no_user", "redis_down", "invalid_request"} <= OUTCOMES
