"""What every part of the memory API shares: the client, the settings and the stores over them."""

from __future__ import annotations

import time
from collections.abc import Callable

import redis.asyncio as aioredis

from litellm_memory_hook.settings import MemorySettings
from litellm_memory_hook.store import transfer
from litellm_memory_hook.store.memory_history import MemoryHistory
from litellm_memory_hook.store.memory_sets import MemorySetStore
from litellm_memory_hook.store.queue import ExtractionQueue

#: ``progress(done, total)``: how far a long call (an export, an import) is.
Progress = Callable[[int, int], None]


def now_ms() -> int:
    """The time now, epoch milliseconds."""
    return int(time.time() * 1000)


class APIBase:
    """The memory API's state.

    Args:
        redis: an asyncio client (``decode_responses=False``).
        settings: the global settings (limits: ``memories.max_pinned_items``,
            ``memories.max_pinned_item_chars``; TTL).
    """

    def __init__(self, redis: aioredis.Redis, settings: MemorySettings) -> None:
        self.redis = redis
        self.settings = settings
        self.memsets = MemorySetStore(redis, ttl_s=settings.storage.retention_s)
        self.queue = ExtractionQueue(redis, settings.storage.key_prefix)
        self.removed = MemoryHistory(redis, ttl_s=settings.storage.retention_s)

    async def _has(self, *names: str) -> bool:
        """Whether any of the keys ``names`` holds data."""
        return await transfer.has_data(self.redis, names)


__all__ = ["APIBase", "Progress", "now_ms"]
