"""Benchmark: the Redis memory a conversation takes, per stored message and by key kind.

For each size N, a conversation of N messages is built as ``bench latency`` builds it (LoCoMo
text cycled, each line stored as the proxy stores a chat message, indexed through the product's
own store; ``--chat``: also one made by chat requests through the hook, a turn pair a request
with a UUID call id), and each of its keys is measured with ``MEMORY USAGE ... SAMPLES 0`` (every
element counted, the key's name and Redis's allocations included). A figure per key kind
(``turns``, ``postings``, ``times``, ``meta``, ``calls``; ``user``: the user's index and forgets
keys), per message, and the whole against the bytes of the messages' text (UTF-8): the ``x text``
of issue 30.

Data: LoCoMo (Maharana et al., ACL 2024; snap-research/locomo, CC BY-NC 4.0).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from benchmarks.keys import delete_prefix, run_prefix
from litellm_memory_hook.core.indexing import indexed_chain
from litellm_memory_hook.core.messages import message_to_turn
from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.settings import (
    ExtractionSettings,
    MemorySettings,
    RedisSettings,
    StorageSettings,
)
from litellm_memory_hook.store.keys import ConversationKeys
from litellm_memory_hook.store.redis_store import MemoryStore
from litellm_memory_hook.tools.histories import History
from litellm_memory_hook.tools.importer import line_to_turn

PREFIX_STEM = "membench"
"""Keys of a run go under ``membench-<8 hex>:``; every one is deleted after the run."""

#: the key kinds measured, in the order the table shows them
KINDS = ("turns", "postings", "times", "meta", "calls", "user")


def conversation_key_kinds(keys: ConversationKeys) -> dict[str, tuple[str, ...]]:
    """Each key kind of a conversation and the keys it holds (the user's index and forgets
    keys are the ``user`` kind; lease and extraction failures are counted with ``meta``)."""
    user = keys.user_keys
    return {
        "turns": (keys.turns,),
        "postings": (keys.postings,),
        "times": (keys.times,),
        "meta": (keys.meta, keys.lease, keys.extraction_failures),
        "calls": (keys.calls,),
        "user": (user.index, user.forgets),
    }


def cycled_turns(history: History, size: int) -> list[Turn]:
    """``size`` turns cycling the history's lines, one minute apart, each stored as the proxy
    stores a chat message (:func:`message_to_turn`: the message kept in ``msg``, a call id)."""
    base = [t for t in (line_to_turn(line) for line in history.lines) if t is not None]
    turns: list[Turn] = []
    step_ms = 60_000
    start = base[0].ts_ms
    for i in range(size):
        source = base[i % len(base)]
        message: dict[str, Any] = {"role": source.role, "content": source.text}
        if source.name:
            message["name"] = source.name
        turn = message_to_turn(message, ts_ms=start + i * step_ms, call_id=f"bench-{i // 2}")
        if turn is not None:
            turns.append(turn)
    return turns


async def fill(store: MemoryStore, keys: ConversationKeys, turns: Sequence[Turn]) -> None:
    """Store the turns through the product's store (with their recall terms), 500 a call."""
    batch = 500
    for start in range(0, len(turns), batch):
        previous = turns[start - 1].text if start else ""
        await store.append(keys, indexed_chain(turns[start : start + batch], previous))


async def memory_by_kind(redis: aioredis.Redis, keys: ConversationKeys) -> dict[str, int]:
    """Bytes of Redis memory of each key kind of the conversation (``MEMORY USAGE``, every
    element counted; 0 for a key that does not exist)."""
    out: dict[str, int] = {}
    for kind, names in conversation_key_kinds(keys).items():
        total = 0
        for name in names:
            total += int(await redis.memory_usage(name, samples=0) or 0)
        out[kind] = total
    return out


@dataclass(frozen=True)
class FootprintRow:
    """The Redis memory of a conversation of ``messages`` stored messages."""

    messages: int
    text_bytes: int
    memory_bytes: int
    #: bytes of each key kind (:data:`KINDS`)
    bytes_by_kind: dict[str, int] = field(default_factory=dict)
    #: how the conversation was made: ``store`` (appended through the store, as an import) or
    #: ``chat`` (chat requests through the hook)
    built: str = "store"

    @property
    def per_message(self) -> dict[str, float]:
        """Bytes per stored message of each kind, and of the text and the whole."""
        n = max(self.messages, 1)
        out = {kind: round(used / n, 1) for kind, used in self.bytes_by_kind.items()}
        out["total"] = round(self.memory_bytes / n, 1)
        out["text"] = round(self.text_bytes / n, 1)
        return out

    @property
    def x_text(self) -> float:
        """The whole against the messages' text."""
        return round(self.memory_bytes / max(self.text_bytes, 1), 2)


def footprint_rows_json(rows: Sequence[FootprintRow]) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts, with bytes per message by kind and ``x_text``."""
    return [{**asdict(r), "bytes_per_message": r.per_message, "x_text": r.x_text} for r in rows]


class _Auth:
    token = "litellm_proxy_master_key"
    team_id = None
    user_id = "default_user_id"


async def chat(hook: Any, keys: ConversationKeys, history: History, size: int) -> int:
    """Store ``size`` messages (rounded up to pairs) as chat requests do: each pair a request
    through the hook's pre-call and post-call success hooks (the history's lines as question
    and reply, a UUID call id as LiteLLM gives one). Returns the bytes of their text."""
    import uuid

    from litellm.types.utils import ModelResponse

    lines = [line.text for line in history.lines]
    text = 0
    for i in range((size + 1) // 2):
        question, reply = lines[(2 * i) % len(lines)], lines[(2 * i + 1) % len(lines)]
        data: dict[str, Any] = {
            "model": "bench",
            "user": keys.user,
            "metadata": {"conversation_id": keys.conversation},
            "messages": [{"role": "user", "content": question}],
            "litellm_call_id": str(uuid.uuid4()),
        }
        message = {"role": "assistant", "content": reply}
        response = ModelResponse(
            id=f"r{i}", choices=[{"index": 0, "message": message, "finish_reason": "stop"}]
        )
        await hook.async_pre_call_hook(_Auth(), None, data, "acompletion")
        await hook.async_post_call_success_hook(data, _Auth(), response)
        await hook.drain()
        text += len(question.encode()) + len(reply.encode())
    if hook.counters.get("precall_errors") or hook.counters.get("postcall_errors"):
        raise RuntimeError(f"the hook failed during the benchmark: {dict(hook.counters)}")
    return text


async def run_footprint(
    redis_url: str, history: History, sizes: Sequence[int], *, chat_sizes: Sequence[int] = ()
) -> list[FootprintRow]:
    """Build a conversation of each size and measure its keys (see the module docstring); with
    ``chat_sizes``, also one of each of those sizes made by chat requests (:func:`chat`). The
    run's keys (under ``membench-<8 hex>:``) are deleted after."""
    from litellm_memory_hook.proxy.hook import MemoryHook

    prefix = run_prefix(PREFIX_STEM)
    settings = MemorySettings(
        redis=RedisSettings(url=redis_url),
        storage=StorageSettings(key_prefix=prefix),
        extraction=ExtractionSettings(worker_in_proxy=False),
    )
    hook = MemoryHook(settings=settings, alias_lookup=lambda model: {"memory": {"enabled": True}})
    store = hook.store
    rows: list[FootprintRow] = []
    try:
        for built, size in [*(("store", s) for s in sizes), *(("chat", s) for s in chat_sizes)]:
            keys = ConversationKeys.for_ids(prefix, "master", f"{built}{size}", "bench")
            if built == "chat":
                text = await chat(hook, keys, history, size)
            else:
                turns = cycled_turns(history, size)
                await fill(store, keys, turns)
                text = sum(len(t.text.encode()) for t in turns)
            used = await memory_by_kind(store.redis, keys)
            rows.append(
                FootprintRow(
                    messages=int(await store.redis.zcard(keys.turns)),
                    text_bytes=text,
                    memory_bytes=sum(used.values()),
                    bytes_by_kind=used,
                    built=built,
                )
            )
            await store.redis.delete(
                *(k for ks in conversation_key_kinds(keys).values() for k in ks)
            )
    finally:
        await store.redis.aclose()
        with contextlib.suppress(RedisError):
            delete_prefix(redis_url, prefix)
    return rows


def run_footprint_sync(*args: Any, **kwargs: Any) -> list[FootprintRow]:
    """:func:`run_footprint` on a fresh event loop."""
    return asyncio.run(run_footprint(*args, **kwargs))
