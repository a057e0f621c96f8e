"""The sweep: schedules conversations whose extraction cursor lags behind their last message
(a schedule lost in an outage), by SCAN, one worker at a time."""

from __future__ import annotations

import time
from collections.abc import Callable

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.settings import MemorySettings
from litellm_memory_hook.store.keys import ConversationKeys, sweep_key
from litellm_memory_hook.store.queue import ExtractionQueue


def _now_ms() -> int:
    return int(time.time() * 1000)


async def sweep(
    redis: aioredis.Redis,
    settings: MemorySettings,
    queue: ExtractionQueue,
    worker_id: str,
    extracts: Callable[[bytes | str | None], bool],
    *,
    batch: int = 500,
) -> int:
    """Schedule conversations whose cursor lags behind their last message and that are not
    due; one worker at a time (a lease on ``mem:sweep``). Returns how many were scheduled.
    Conversations of an alias without extraction (unknown, or ``extraction: false``) are
    left alone, and nothing is scheduled while ``extraction.enabled`` is false.

    Uses SCAN over ``<prefix>:{*}:c:*:meta`` (every node of a Cluster), never KEYS.
    """
    prefix = settings.storage.key_prefix
    if not settings.extraction.enabled:
        return 0
    lease_s = max(1, int(settings.extraction.sweep_s or 60))
    try:
        if not await redis.set(sweep_key(prefix), worker_id, nx=True, ex=lease_s):
            return 0
        scheduled = 0
        quiet_ms = int(settings.extraction.quiet_s * 1000)
        async for key in redis.scan_iter(match=f"{prefix}:{{*}}:c:*:meta", count=batch):
            name = key.decode() if isinstance(key, bytes) else str(key)
            keys = _keys_from_meta_key(prefix, name)
            if keys is None:
                continue
            seq, cursor, alias = await redis.hmget(name, ["seq", "cursor", "alias"])
            if not extracts(alias):
                continue  # its job would be discarded, at every sweep
            if int(seq or 0) > int(cursor or 0) and await queue.due_time(keys) is None:
                await redis.zadd(queue.due, {keys.ref: _now_ms() + quiet_ms}, nx=True)
                scheduled += 1
    except RedisError as exc:
        raise StoreError(f"sweep: {exc}") from exc
    await queue.count(swept=scheduled)
    return scheduled


def _keys_from_meta_key(prefix: str, name: str) -> ConversationKeys | None:
    """The conversation of a ``<prefix>:{t:u}:c:<c>:meta`` key name, or ``None``."""
    head = f"{prefix}:{{"
    if not name.startswith(head) or not name.endswith(":meta"):
        return None
    tag, _, rest = name[len(head) :].partition("}:c:")
    conversation = rest[: -len(":meta")]
    tenant, _, user = tag.partition(":")
    if not (tenant and user and conversation) or ":" in user or ":" in conversation:
        return None
    return ConversationKeys(prefix, tenant, user, conversation)
