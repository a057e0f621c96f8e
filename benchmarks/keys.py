"""The keys of one benchmark run: a prefix of its own, every key under it deleted after.

Benchmarks run against a real Redis that may also hold real memory (the default URL is the
local server), so each run writes under ``<stem>-<8 hex>:`` and removes every key it made,
the global ones too (``<prefix>:due``, ``<prefix>:stats``, ``<prefix>:sweep``).
"""

from __future__ import annotations

import secrets

import redis

from litellm_memory_hook.tools.stack import delete_keys


def run_prefix(stem: str) -> str:
    """A fresh key prefix ``<stem>-<8 hex>`` for one run."""
    return f"{stem}-{secrets.token_hex(4)}"


def delete_prefix(url: str, prefix: str) -> int:
    """Delete every key under ``<prefix>:`` of the Redis at ``url``
    (:func:`litellm_memory_hook.tools.stack.delete_keys`).

    Returns:
        The number of keys deleted.

    Raises:
        redis.RedisError: Redis failed.
    """
    client = redis.Redis.from_url(url)
    try:
        return delete_keys(client, prefix)
    finally:
        client.close()
