"""Every stored string is bounded (issue 9 item 5): core.bounds and the store's append."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis.asyncio as aioredis
from hypothesis import given
from hypothesis import strategies as st

from litellm_memory_hook.core.bounds import (
    META_VALUE_CHARS,
    TurnLimits,
    bound_id,
    bound_tool_calls,
    bound_turn,
    cut_head,
    cut_tail,
)
from litellm_memory_hook.core.indexing import indexed_chain, stored_terms
from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.store.keys import CURSOR_COPY_FIELD, ConversationKeys
from litellm_memory_hook.store.redis_store import MemoryStore
from tests.support.hook_calls import Auth, chat_request, model_response

LIMITS = TurnLimits()


def _call(ident: str, name: str = "f", arguments: str = "{}", **extra: Any) -> dict[str, Any]:
    return {
        "id": ident,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
        **extra,
    }


def _stored_chars(turn: Turn) -> int:
    return len("{" + turn.body_json())


def test_a_turn_within_every_limit_is_returned_as_is() -> None:
    """Nothing over a limit: the very same object (the store's fast path)."""
    turn = Turn(
        role="assistant",
        text="Let me check.",
        ts_ms=1,
        name="Scout",
        tool_calls=(_call("call_1", "get_weather", '{"city": "Paris"}'),),
        msg={"role": "assistant", "content": "Let me check.", "reasoning_content": "r"},
    )
    assert bound_turn(turn) is turn


def test_a_100k_name_is_not_stored_whole() -> None:
    """Issue 9 item 5: a 100,000-character name is cut to 128 characters."""
    turn = bound_turn(Turn(role="user", text="hi", ts_ms=1, name="N" * 100_000))
    assert turn.name == "N" * 128
    assert _stored_chars(turn) < 1000


def test_long_ids_stay_distinct_and_pair_up() -> None:
    """Tool call ids are never cut (issue 28, E01: a provider checks them; this test held the
    old rule, a 128-character start plus a hash, which broke a result sent alone): two long ids
    stay whole and distinct, and a call and its result still match. LiteLLM's own call id
    (``call_id``) is still bounded."""
    a, b = "call_" + "x" * 300 + "A", "call_" + "x" * 300 + "B"
    call = bound_turn(Turn(role="assistant", text="", ts_ms=1, tool_calls=(_call(a), _call(b))))
    result = bound_turn(Turn(role="tool", text="18 C", ts_ms=2, tool_call_id=a))
    ids = [c["id"] for c in call.tool_calls]
    assert ids == [a, b]
    assert result.tool_call_id == a
    long_call = bound_turn(Turn(role="user", text="x", ts_ms=1, call_id="c" * 5000))
    assert long_call.call_id == bound_id("c" * 5000) and len(long_call.call_id) == 128


def test_long_arguments_become_valid_json_within_the_budget() -> None:
    """Over-long tool arguments are replaced by valid JSON (providers parse them on replay),
    the calls of a turn sharing one budget."""
    args = json.dumps({"code": "print('x')\n" * 20_000})
    turn = bound_turn(
        Turn(role="assistant", text="", ts_ms=1, tool_calls=(_call("a", arguments=args),) * 3)
    )
    for call in turn.tool_calls:
        parsed = json.loads(call["function"]["arguments"])
        assert parsed["original_chars"] == len(args)
        assert len(call["function"]["arguments"]) <= LIMITS.arguments_chars // 3
    assert sum(len(c["function"]["arguments"]) for c in turn.tool_calls) <= LIMITS.arguments_chars


def test_bound_tool_calls_for_a_messages_own_copy() -> None:
    """bound_tool_calls (for the stored message's own ``tool_calls``) gives what bound_turn
    gives the turn's: the same ids, valid JSON arguments."""
    calls = (_call("x" * 500, arguments="{" + "a" * 50_000),)
    turn = bound_turn(Turn(role="assistant", text="", ts_ms=1, tool_calls=calls))
    assert bound_tool_calls(list(calls)) == turn.tool_calls
    json.loads(turn.tool_calls[0]["function"]["arguments"])


def test_tool_call_extras_are_kept_whole_or_dropped() -> None:
    """Other keys of a tool call (provider data such as signatures) are never cut: kept when
    they fit, dropped when not; a signature (a provider-checked value) is kept whole up to
    ``checked_chars`` (issue 28, E01: this test held a 50,000-character signature dropped at
    8,000), dropped whole past it; tool calls beyond 128 are dropped; names are cut."""
    small = _call("a", provider_specific_fields={"thought_signature": "s" * 100})
    big = _call("b", provider_specific_fields={"thought_signature": "s" * 50_000})
    huge = _call("d", provider_specific_fields={"thought_signature": "s" * 300_000})
    calls = (small, big, _call("c", "n" * 999), huge)
    turn = bound_turn(Turn(role="assistant", text="", ts_ms=1, tool_calls=calls))
    assert turn.tool_calls[0] == small
    assert turn.tool_calls[1] == big
    assert "provider_specific_fields" not in turn.tool_calls[3]
    assert turn.tool_calls[2]["function"]["name"] == "n" * 128
    many = bound_turn(
        Turn(
            role="assistant", text="", ts_ms=1, tool_calls=tuple(_call(f"c{i}") for i in range(300))
        )
    )
    assert len(many.tool_calls) == 128


def test_the_stored_message_and_the_text_are_bounded() -> None:
    """``msg`` (the message as sent) is kept whole when its JSON fits 64,000 characters, else
    left out (the turn replays from its text); the text keeps its end, as the window does."""
    fits = {"role": "user", "content": "x" * 1000, "reasoning_content": "r" * 1000}
    huge = {"role": "user", "content": "x", "weird": "w" * 100_000}
    assert bound_turn(Turn(role="user", text="x", ts_ms=1, msg=fits)).msg == fits
    assert not bound_turn(Turn(role="user", text="x", ts_ms=1, msg=huge)).msg
    text = bound_turn(Turn(role="user", text="a" * 50_000 + "END", ts_ms=1)).text
    assert len(text) == LIMITS.text_chars and text.endswith("END") and text.startswith("…")


def test_cuts_never_split_a_grapheme() -> None:
    """An emoji ZWJ sequence or a Devanagari conjunct is never split by a cut."""
    family = "👨‍👩‍👧‍👦"
    assert cut_head("ab" + family, 4) == "ab"
    assert cut_tail(family + "xy", 4) == "…xy"
    assert cut_head("क्षत्रिय", 2) in ("क्", "")


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=50),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@given(
    st.text(max_size=300),
    st.text(max_size=300),
    st.lists(
        st.fixed_dictionaries(
            {
                "id": st.text(max_size=300),
                "function": st.fixed_dictionaries(
                    {"name": st.text(max_size=300), "arguments": st.text(max_size=2000)}
                ),
            },
            optional={"index": st.integers(), "extra": _json},
        ),
        max_size=5,
    ),
    st.one_of(st.none(), st.dictionaries(st.text(max_size=10), _json, max_size=4)),
)
def test_bounding_is_idempotent_and_within_limits(
    name: str, ident: str, calls: list[dict[str, Any]], msg: dict[str, Any] | None
) -> None:
    """Property: bound_turn lands within every limit, and a second pass changes nothing."""
    small = TurnLimits(
        text_chars=100,
        name_chars=20,
        id_chars=40,
        tool_name_chars=20,
        arguments_chars=600,
        tool_calls=3,
        call_extra_chars=50,
        extra_chars=200,
        checked_chars=1000,
    )
    turn = Turn(
        role="assistant",
        text=name * 3,
        ts_ms=1,
        name=name,
        call_id=ident,
        tool_calls=tuple(calls),
        tool_call_id=ident,
        msg=msg,
    )
    once = bound_turn(turn, small)
    assert bound_turn(once, small) == once and bound_turn(once, small).msg == once.msg
    assert len(once.text) <= 100 and len(once.name) <= 20
    assert len(once.call_id) <= 40 and once.tool_call_id == ident  # a checked id: never cut
    assert len(once.tool_calls) <= 3
    assert sum(len(c["id"]) for c in once.tool_calls) <= 1000
    originals = {c["id"] for c in calls}
    for call in once.tool_calls:
        assert call["id"] in originals and len(call["function"]["name"]) <= 20
    arguments = [len(c["function"]["arguments"]) for c in once.tool_calls]
    assert sum(arguments) <= 600 or max(arguments) <= 256


async def test_store_append_bounds_what_any_caller_sends(store: MemoryStore, prefix: str) -> None:
    """The store holds every turn to its limits whoever calls it: a 100,000-character name is
    stored cut (and indexed under what is stored, so deleting it leaves no index entry), meta
    values are cut, a long call id still makes the write idempotent."""
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "c1")
    turn = Turn(role="user", text="hello garden", ts_ms=1, name="Gardener" * 12_500)
    chain = indexed_chain([turn])
    long_call = "call-" + "z" * 1000
    first = await store.append(keys, chain, call_id=long_call, meta_if_new={"user": "u" * 100_000})
    again = await store.append(keys, chain, call_id=long_call)
    assert first.written and not again.written
    stored = await store.all_turns(keys)
    assert len(stored) == 1 and stored[0].name == ("Gardener" * 16)[:128]
    calls = [f for f in await store.redis.hkeys(keys.calls) if f != CURSOR_COPY_FIELD.encode()]
    assert [len(f) for f in calls] == [128]  # beside the extraction cursor's copy
    meta = await store.redis.hgetall(keys.meta)
    assert len(meta[b"user"]) == META_VALUE_CHARS
    await store.delete_turns(keys, [stored_terms(stored[0])])
    assert await store.redis.hlen(keys.postings) == 0
    assert int((await store.redis.hget(keys.meta, "idx_n")) or 0) == 0


@pytest.mark.parametrize("field", ["name", "tool_call"])
async def test_through_the_hook_nothing_long_is_replayed(
    hook: MemoryHook, any_redis: aioredis.Redis, prefix: str, field: str
) -> None:
    """Through the hook: a 100,000-character name (or tool-call id and arguments) sent once is
    not replayed whole with the next request, and no stored member is longer than the limits
    allow."""
    if field == "name":
        first = chat_request("hello", user="u-B", call_id="k1")
        first["messages"][0]["name"] = "N" * 100_000
    else:
        first = chat_request("hello", user="u-B", call_id="k1")
        first["messages"] = [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [_call("i" * 100_000, "get_weather", "{" + "a" * 100_000)],
            },
            {"role": "tool", "tool_call_id": "i" * 100_000, "content": "sunny"},
        ]
    out = await hook.async_pre_call_hook(Auth(), None, first, "acompletion")
    assert out is not None
    await hook.async_post_call_success_hook(out, Auth(), model_response("ok"))
    second = await hook.async_pre_call_hook(
        Auth(), None, chat_request("and now?", user="u-B", call_id="k2"), "acompletion"
    )
    assert second is not None
    assert len(json.dumps(second["messages"])) < 100_000
    keys = ConversationKeys.for_ids(prefix, "master", "u-B", "demo")
    members = await any_redis.zrange(keys.turns, 0, -1)
    # tool call ids are kept whole (issue 28, E01: a provider checks them; this test held
    # them cut), within checked_chars per turn; everything else stays bounded
    assert members and max(len(str(m).replace("i" * 100_000, "")) for m in members) < 90_000
