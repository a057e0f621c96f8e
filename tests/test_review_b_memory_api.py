"""Review findings (memory API): each test fails on the current code."""

from __future__ import annotations

import asyncio
from typing import Any

import redis.asyncio as aioredis

from litellm_memory_hook.memory_api import MemoryAPI, resolve_target
from litellm_memory_hook.settings import MemorySettings, parse_alias_config

ALIASES: dict[str, dict[str, Any]] = {"demo": {"memory": {"enabled": True}}}


def _lookup(name: str) -> Any:
    return parse_alias_config(ALIASES.get(name))


async def test_forget_after_a_pinned_edit_deletes_the_pinned_memory(
    real_redis: aioredis.Redis, prefix: str
) -> None:
    """Editing a pinned memory gives the memory set's keys the retention TTL again but not the
    user's index, which forget and export go through. Once the index has expired, forgetting the
    whole user leaves the pinned memory in Redis: the next chat still sees it. (Retention of 2 s
    stands in for 30 days; the same holds for delete_pinned / delete_memory and for an
    extraction commit, which refresh the set's TTL and not the index's.)"""
    settings = MemorySettings(key_prefix=prefix, retention_days=2 / 86400)
    api = MemoryAPI(real_redis, settings)
    target = resolve_target(settings, _lookup, tenant="master", user="alice", model="demo")
    item = await api.pin(target, "My daughter is Asha.")
    await asyncio.sleep(1.2)
    await api.edit(target, item.id, "My daughter is Asha, she is 7.")
    await asyncio.sleep(1.2)  # the index is gone (2 s after the pin); the set lives on
    await api.forget(target, whole_user=True)
    listing = await api.list(target)
    assert listing.pinned == [], [p.text for p in listing.pinned]
