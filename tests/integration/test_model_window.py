"""E06: what the hook adds is sized to the model's declared window (core/model_window.py and
the hook's sizing), in-process; tests/e2e/test_e2e_round3.py holds the case through a real proxy."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio as aioredis
from hypothesis import given
from hypothesis import strategies as st

from litellm_memory_hook.core.model_window import (
    SHRINK_ORDER,
    ModelLimit,
    estimate_tokens,
    model_limit,
    shrink,
)
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.proxy.outcomes import read_outcome
from litellm_memory_hook.settings import MemorySettings
from tests.support.hook_calls import ALIASES, Auth, chat_request, model_response


def test_the_limit_takes_the_requests_reply_length_else_a_share() -> None:
    info = {"max_input_tokens": 2048, "max_output_tokens": 4096}
    assert model_limit(info, {"max_tokens": 256}) == ModelLimit(2048, 256)
    assert model_limit(info, {"max_completion_tokens": 300, "max_tokens": 9}) == ModelLimit(
        2048, 300
    )
    assert model_limit(info, {}) == ModelLimit(2048, 512)  # a quarter of the window at most
    assert model_limit({"max_tokens": 1000}, {}) == ModelLimit(1000, 250)
    assert model_limit({"max_input_tokens": 100}, {"max_tokens": 10_000}).prompt_tokens == 0  # type: ignore[union-attr]
    assert model_limit(None, {"max_tokens": 5}) is None
    assert model_limit({"max_input_tokens": "big", "max_tokens": True}, {}) is None


def test_the_estimate_counts_bytes_so_scripts_of_wider_letters_count_more() -> None:
    english = [{"role": "user", "content": "a" * 300}]
    hindi = [{"role": "user", "content": "क" * 300}]  # 3 bytes a letter
    assert estimate_tokens(english) == 100 + 8
    assert estimate_tokens(hindi) == 300 + 8
    call = {"id": "c", "type": "function", "function": {"name": "run", "arguments": "x" * 30}}
    assert estimate_tokens([{"role": "assistant", "content": None, "tool_calls": [call]}]) == 19
    assert estimate_tokens(["junk", None]) == 0


@given(
    st.dictionaries(st.sampled_from(SHRINK_ORDER), st.integers(0, 50_000), min_size=1),
    st.integers(-100, 200_000),
)
def test_shrink_cuts_in_order_to_the_room(costs: dict[str, int], room: int) -> None:
    cut = shrink(costs, room)
    assert sum(cut.values()) <= max(room, 0) or sum(cut.values()) == 0
    assert all(0 <= cut[k] <= costs[k] for k in costs)
    if sum(costs.values()) <= room:
        assert cut == costs
    names = [n for n in SHRINK_ORDER if n in costs]
    for j, later in enumerate(names):
        if cut[later] < costs[later]:  # a later layer shrinks only once the earlier are gone
            assert all(cut[first] == 0 for first in names[:j])


SMALL = {"memory": {"enabled": True}, "max_input_tokens": 2048, "max_output_tokens": 4096}


def _hook(client: aioredis.Redis, prefix: str) -> MemoryHook:
    aliases: dict[str, Any] = {**ALIASES, "small": SMALL}
    return MemoryHook(
        settings=MemorySettings(key_prefix=prefix, worker_in_proxy=False),
        redis=client,
        alias_lookup=lambda model: aliases.get(model),
    )


async def test_e06_a_small_window_gets_a_prompt_that_fits(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """E06: 24 new-message turns of ~330 characters to a 2,048-token alias, then a question
    with max_tokens 256: the prompt and the reply fit the window (before: 40 messages, 8,788
    characters, ~2,500 tokens plus 256); the question is last, as sent."""
    hook = _hook(any_redis, prefix)
    for i in range(24):
        text = f"Turn {i}: " + "I walked along the river and counted the boats again. " * 6
        data = chat_request(text, model="small", call_id=f"t{i}")
        out = await hook.async_pre_call_hook(Auth(), None, data, "acompletion")
        assert out is not None
        await hook.async_post_call_success_hook(out, Auth(), model_response("Nice. " * 40))
    ask = chat_request("How many boats were there?", model="small", call_id="q", max_tokens=256)
    out = await hook.async_pre_call_hook(Auth(), None, ask, "acompletion")
    assert out is not None and read_outcome(out) == "used"
    assert estimate_tokens(out["messages"]) + 256 <= 2048
    assert out["messages"][-1] == {"role": "user", "content": "How many boats were there?"}
    assert len(out["messages"]) > 4  # memory still added: a window of recent turns


@pytest.mark.parametrize("text", ["x " * 4000, "क" * 2000], ids=["english", "devanagari"])
async def test_e06_a_request_that_fills_the_window_passes_through(
    any_redis: aioredis.Redis, prefix: str, text: str
) -> None:
    """The client's own message and the reply fill the window: nothing is added, nothing is
    stored, and the outcome says ``too_large``."""
    hook = _hook(any_redis, prefix)
    data = chat_request(text, model="small", call_id="big", max_tokens=256)
    sent = [dict(m) for m in data["messages"]]
    out = await hook.async_pre_call_hook(Auth(), None, data, "acompletion")
    assert out is not None and read_outcome(out) == "too_large"
    assert out["messages"] == sent
    assert hook.counters["rebuilt"] == 0
