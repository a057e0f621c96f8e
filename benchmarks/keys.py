"""The keys of one benchmark run: a prefix of its own, every key under it deleted after.

Benchmarks run against a real Redis that may also hold real memory (the default URL is the
local server), so each run writes under ``<stem>-<8 hex>:`` and removes every key it made,
the global ones too (``<prefix>:due``, ``<prefix>:stats``, ``<prefix>:sweep``).
"""

from __future__ import annotations

import secrets
from typing import Any, cast

import redis


def run_prefix(stem: str) -> str:
    """A fresh key prefix ``<stem>-<8 hex>`` for one run."""
    return f"{stem}-{secrets.token_hex(4)}"


def delete_prefix(url: str, prefix: str) -> int:
    """Delete every key under ``<prefix>:`` (SCAN, then DEL in batches of 500).

    Returns:
        The number of keys deleted.

    Raises:
        redis.RedisError: Redis failed.
    """
    client = redis.Redis.from_url(url)
    deleted = 0
    try:
        batch: list[Any] = []
        for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            batch.append(key)
            if len(batch) >= 500:
                deleted += int(cast(Any, client.delete(*batch)))
                batch = []
        if batch:
            deleted += int(cast(Any, client.delete(*batch)))
    finally:
        client.close()
    return deleted
