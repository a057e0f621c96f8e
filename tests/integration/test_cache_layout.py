"""The cache layout (issue 25): a stable head, a window trimmed in steps, the changing parts last.

Pure parts (the stepped window, where the tail goes) and the hook on fake and real Redis: the
window's first message and the head stay the same from request to request until a step; new
memories wait for the next epoch; a pinned memory reaches the head at once; the seed layout is
the one system message it always was.
"""

from __future__ import annotations

import itertools
from typing import Any

import redis.asyncio as aioredis

from litellm_memory_hook.core.assemble import assemble
from litellm_memory_hook.core.cache_marks import add_marks, count_marks
from litellm_memory_hook.core.messages import message_chars
from litellm_memory_hook.core.window import fit_window
from litellm_memory_hook.memory_api import MemoryAPI, resolve_target
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.settings import AliasMemoryConfig, MemorySettings, parse_alias_config
from litellm_memory_hook.store.epochs import HEAD, HEAD_EPOCH, WINDOW_START
from litellm_memory_hook.store.memory_sets import new_item_id
from tests.support.hook_calls import Auth, chat_request, make_hook, model_response
from tests.support.prompt_view import is_tail, memory_text, without_tail


def _conversation(turns: int, chars: int = 100) -> tuple[list[dict[str, Any]], list[int]]:
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{i:04d} " + "x" * chars}
        for i in range(turns)
    ]
    return messages, list(range(1, turns + 1))


def test_window_first_message_moves_only_in_steps() -> None:
    """Growing a conversation by one exchange per request: the window's first message changes
    only when the window from it no longer fits, then the window starts again at about the
    low-water mark; every window fits the budget."""
    start, firsts, sizes = 0, [], []
    for turns in range(2, 400, 2):
        history, seqs = _conversation(turns)
        window = fit_window(
            history,
            [{"role": "user", "content": "next question"}],
            max_chars=8000,
            max_messages=40,
            positions=seqs,
            start=start,
            low_water=0.6,
        )
        assert len(window.messages) <= 40
        assert sum(message_chars(m) for m in window.messages) <= 8000
        start = window.start
        firsts.append(window.messages[0]["content"])
        sizes.append(len(window.messages))
    changes = sum(a != b for a, b in itertools.pairwise(firsts))
    assert changes <= len(firsts) // 7  # a step every 8 exchanges (16 of 40 messages)
    assert min(sizes[40:]) >= 24 - 1  # back to ~60% of 40 messages, never less
    # without steps, the first message moves with every request once the window is full
    sliding = [
        fit_window(
            *(lambda h: (h[0], [{"role": "user", "content": "q"}]))(_conversation(t)),
            max_chars=8000,
            max_messages=40,
        ).messages[0]["content"]
        for t in range(100, 140, 2)
    ]
    assert len(set(sliding)) == len(sliding)


def test_window_steps_on_characters_too() -> None:
    """Long messages: the character budget decides, and the step cuts back to ~60% of it."""
    start = 0
    starts = []
    for turns in range(2, 120, 2):
        history, seqs = _conversation(turns, chars=700)
        window = fit_window(
            history,
            [{"role": "user", "content": "q"}],
            max_chars=8000,
            max_messages=40,
            positions=seqs,
            start=start,
            low_water=0.6,
        )
        assert sum(message_chars(m) for m in window.messages) <= 8000
        start = window.start
        starts.append(start)
    assert len(set(starts)) < len(starts) // 2


def test_tail_goes_before_the_last_user_message() -> None:
    """As a system message of its own, or as a leading data part of the last user message
    (string and list content); after tool results, at the end of the head."""
    lead = [{"role": "system", "content": "Client prompt."}]
    window = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "and now?"},
    ]
    tail = "<memory_context>\nx\n</memory_context>\n\n<memory_reminder>\nr\n</memory_reminder>"
    out = assemble(lead, window, rules="Rules.", memory_block="HEAD", tail=tail)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "system", "user"]
    assert out[0]["content"] == "Rules.\n\nClient prompt.\n\nHEAD"
    assert out[3]["content"] == tail and out[4] == window[2]
    inside = assemble(lead, window, rules="", memory_block="HEAD", tail=tail, tail_in_user=True)
    assert [m["role"] for m in inside] == ["system", "user", "assistant", "user"]
    assert inside[3]["content"] == tail + "\n\nand now?"
    parts = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "u"}}]
    listed = assemble(
        lead,
        [{"role": "user", "content": parts}],
        rules="",
        memory_block="HEAD",
        tail=tail,
        tail_in_user=True,
    )
    assert listed[1]["content"] == [{"type": "text", "text": tail}, *parts]
    tools = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    after_tools = assemble(lead, tools, rules="", memory_block="HEAD", tail=tail)
    assert after_tools[1:] == tools and after_tools[0]["content"].endswith(tail)


async def _send(hook: MemoryHook, text: str, call_id: str, **extra: Any) -> list[dict[str, Any]]:
    data = await hook.async_pre_call_hook(
        Auth(), None, chat_request(text, call_id=call_id, **extra), "acompletion"
    )
    assert data is not None
    sent = [dict(m) for m in data["messages"]]
    await hook.async_post_call_success_hook(data, Auth(), model_response(f"Reply to {text}"))
    await hook.drain()
    return sent


ALIASES: dict[str, dict[str, Any]] = {
    "demo": {
        "memory": {
            "enabled": True,
            "system_prompt": "You are Mira.",
            "window": {"max_messages": 10},
        }
    },
    "seed": {"memory": {"enabled": True, "system_prompt": "You are Mira.", "layout": "seed"}},
    "anthropic-like": {
        "memory": {
            "enabled": True,
            "system_prompt": "You are Mira.",
            "window": {"max_messages": 10},
            "tail_placement": "user",
        }
    },
}


def _alias_config(name: str) -> AliasMemoryConfig | None:
    return parse_alias_config(ALIASES.get(name))


def _tiny_cache_hook(client: aioredis.Redis, prefix: str) -> MemoryHook:
    return MemoryHook(
        settings=MemorySettings(key_prefix=prefix, worker_in_proxy=False),
        redis=client,
        alias_lookup=lambda model: ALIASES.get(model),
    )


async def test_head_and_window_start_stay_until_a_step(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A new-message client, 14 requests in a 10-message window: the head (the first system
    message) is the same text every time; the window's first message changes only at steps
    (2 of 13 transitions here), and each request's tail sits just before its question."""
    hook = _tiny_cache_hook(any_redis, prefix)
    heads, firsts = [], []
    for i in range(14):
        sent = await _send(hook, f"Message number {i} about gardening", f"c{i}")
        heads.append(sent[0]["content"])
        firsts.append(without_tail(sent)[1]["content"])
        assert is_tail(sent[-2]) and sent[-1] == {
            "role": "user",
            "content": f"Message number {i} about gardening",
        }
        assert "<memory_reminder>" in sent[-2]["content"] and "<now>" in sent[-2]["content"]
        assert "<memory_reminder>" not in sent[0]["content"]
    assert len(set(heads)) == 1
    changes = [i for i in range(1, 14) if firsts[i] != firsts[i - 1]]
    assert 1 <= len(changes) <= 3, firsts


async def test_new_memories_wait_for_the_next_epoch_pinned_ones_do_not(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """Memories a job stores reach the head when the window next steps, not before; a pinned
    memory the user writes reaches it on the next request."""
    hook = _tiny_cache_hook(any_redis, prefix)
    await _send(hook, "I have a cat", "a0")
    await _send(hook, "She is grey", "a1")
    api = MemoryAPI(any_redis, hook.settings)
    target = resolve_target(hook.settings, _alias_config, tenant="master", user="u-A", model="demo")
    # what an extraction job's commit writes into the set's memories hash
    await any_redis.hset(
        target.memory.memories, new_item_id(1_000), "The user's cat is called Miso."
    )
    sent = await _send(hook, "Tell me something", "a2")
    assert "Miso" not in memory_text(sent)  # same epoch: the snapshot stands
    await api.pin(target, "My name is Ana.")
    sent = await _send(hook, "Anything else?", "a3")
    assert "My name is Ana." in sent[0]["content"]  # pinned: at once, with a new snapshot
    assert "Miso" in sent[0]["content"]  # the new epoch's snapshot takes the job's memory


async def test_epoch_is_recorded_in_meta(real_redis: aioredis.Redis, prefix: str) -> None:
    """The window start, the epoch and the snapshot are fields of the conversation's meta
    hash, readable with redis-cli."""
    hook = _tiny_cache_hook(real_redis, prefix)
    for i in range(3):
        await _send(hook, f"Hello {i}", f"m{i}")
    keys = [k async for k in real_redis.scan_iter(match=f"{prefix}:*:meta")]
    assert len(keys) == 1
    meta = await real_redis.hgetall(keys[0])
    assert int(meta[WINDOW_START.encode()]) >= 1
    assert meta[HEAD_EPOCH.encode()].startswith(meta[WINDOW_START.encode()] + b":")
    assert b'"memories"' in meta[HEAD.encode()]


async def test_seed_layout_is_one_system_message(any_redis: aioredis.Redis, prefix: str) -> None:
    """``layout: seed``: the reminder ends the one system message; nothing before the question."""
    hook = _tiny_cache_hook(any_redis, prefix)
    await _send(hook, "My cat is called Miso.", "s0", model="seed")
    sent = await _send(hook, "What is my cat called?", "s1", model="seed")
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[0]["content"].startswith("You are Mira.")
    assert sent[0]["content"].rstrip().endswith("</memory_reminder>")
    assert "<now>" not in sent[0]["content"]


async def test_tail_in_the_user_message(any_redis: aioredis.Redis, prefix: str) -> None:
    """``tail_placement: user``: no system message after the first; the last user message
    starts with the tail, then the user's words."""
    hook = _tiny_cache_hook(any_redis, prefix)
    await _send(hook, "My cat is called Miso.", "u0", model="anthropic-like")
    sent = await _send(hook, "What is my cat called?", "u1", model="anthropic-like")
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[-1]["content"].startswith("<memory_context>")
    assert sent[-1]["content"].endswith("</memory_reminder>\n\nWhat is my cat called?")
    assert without_tail(sent)[-1]["content"] == "What is my cat called?"


async def test_read_only_requests_record_no_epoch(real_redis: aioredis.Redis, prefix: str) -> None:
    """A read-only request reads memory and writes nothing, the epoch included."""
    hook = make_hook(real_redis, prefix)
    await _send(hook, "Hello", "r0")
    keys = [k async for k in real_redis.scan_iter(match=f"{prefix}:*:meta")]
    before = await real_redis.hgetall(keys[0])
    await _send(hook, "Hi again", "r1", metadata={"memory_mode": "read_only"})
    assert await real_redis.hgetall(keys[0]) == before


def test_cache_marks_end_the_stable_parts_within_the_limit() -> None:
    """A mark on the head's last text part and on the window's last message; the client's own
    marks count first, and never more than four in all."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "HEAD"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "system", "content": "TAIL"},
        {"role": "user", "content": "now?"},
    ]
    marked = add_marks(messages, [0, 2])
    assert marked[0]["content"] == [
        {"type": "text", "text": "HEAD", "cache_control": {"type": "ephemeral"}}
    ]
    assert marked[2]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert marked[3:] == messages[3:] and count_marks(marked) == 2
    client_marked = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": f"part {i}", "cache_control": {"type": "ephemeral"}}
                for i in range(3)
            ],
        }
    ]
    crowded = add_marks([messages[0], *client_marked, *messages[2:]], [0, 2])
    assert count_marks(crowded) == 4 and "cache_control" in crowded[0]["content"][0]
    assert crowded[2] == messages[2]  # no room left for the window's mark
    full = [{**client_marked[0], "content": client_marked[0]["content"] * 2}]
    assert add_marks([messages[0], *full], [0]) == [messages[0], *full]


async def test_anthropic_like_alias_gets_marks_and_the_tail_in_the_message(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """An alias whose provider caches only where marked: the head and the reply before the
    question carry cache_control, the question starts with the tail."""
    aliases = {
        "claude-like": {
            "memory": {
                "enabled": True,
                "system_prompt": "You are Mira.",
                "tail_placement": "user",
                "cache_marks": "on",
            }
        }
    }
    hook = MemoryHook(
        settings=MemorySettings(key_prefix=prefix, worker_in_proxy=False),
        redis=any_redis,
        alias_lookup=lambda model: aliases.get(model),
    )
    await _send(hook, "My cat is called Miso.", "k0", model="claude-like")
    sent = await _send(hook, "What is my cat called?", "k1", model="claude-like")
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[0]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert sent[2]["content"][-1] == {
        "type": "text",
        "text": "Reply to My cat is called Miso.",
        "cache_control": {"type": "ephemeral"},
    }
    assert sent[3]["content"].startswith("<memory_context>") and count_marks(sent) == 2
