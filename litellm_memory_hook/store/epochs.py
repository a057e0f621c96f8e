"""The cache layout's epoch, kept in a conversation's meta hash.

A provider bills the prefix a prompt shares with a recent one at a fraction, so the cache layout
keeps the start of its prompt the same from request to request (:mod:`litellm_memory_hook.core.
bands`): the window's first message moves only in steps, and the head's snapshot of memories and
summary is taken again only when it moves or pinned memories change (an *epoch*). Three fields
of ``mem:{c}:meta`` hold it::

    win_start   the seq the window starts at since its last step ("0": not known)
    head_epoch  the epoch the snapshot belongs to: "<win_start>:<pinned fingerprint>"
    head        the snapshot, JSON {"memories": [text, ...], "summary": text}

They are a hint: a request that finds them missing or stale takes a new snapshot and writes it;
a write that fails costs the next request a fresh snapshot, nothing more. The write never makes
a meta hash that is not there (a conversation's first request, or one whose meta was evicted):
the append script owns its creation.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import redis.asyncio as aioredis

from litellm_memory_hook.store import scripts
from litellm_memory_hook.store.keys import ConversationKeys

__all__ = [
    "WINDOW_START",
    "HeadSnapshot",
    "epoch_of",
    "read_snapshot",
    "window_start",
    "write_epoch",
]

WINDOW_START: Final = "win_start"
HEAD_EPOCH: Final = "head_epoch"
HEAD: Final = "head"


@dataclass(frozen=True)
class HeadSnapshot:
    """The memories and summary the head shows during one epoch."""

    memories: tuple[str, ...]
    summary: str


def epoch_of(window_start: int, pinned: Sequence[str]) -> str:
    """The epoch of a window start and a set of pinned memories (in their order)."""
    digest = hashlib.sha256("\x1f".join(pinned).encode("utf-8", "surrogatepass")).hexdigest()
    return f"{window_start}:{digest[:16]}"


def window_start(meta: Mapping[str, str]) -> int:
    """The recorded window start (0 when none, or not a number)."""
    try:
        return max(0, int(meta.get(WINDOW_START, "0") or 0))
    except ValueError:
        return 0


def read_snapshot(meta: Mapping[str, str], epoch: str) -> HeadSnapshot | None:
    """The snapshot stored for ``epoch``; ``None`` when the stored one is of another epoch,
    missing or unreadable."""
    if meta.get(HEAD_EPOCH) != epoch:
        return None
    try:
        raw: Any = json.loads(meta.get(HEAD, ""))
        memories = raw["memories"]
        summary = raw["summary"]
    except (ValueError, TypeError, KeyError):
        return None
    if not (isinstance(memories, list) and isinstance(summary, str)):
        return None
    if not all(isinstance(m, str) for m in memories):
        return None
    return HeadSnapshot(tuple(memories), summary)


async def write_epoch(
    redis: aioredis.Redis,
    keys: ConversationKeys,
    start: int,
    epoch: str,
    snapshot: HeadSnapshot,
) -> bool:
    """Record the window start and the epoch's snapshot in the conversation's meta hash, if it
    exists. Returns whether it was written.

    Raises:
        redis.RedisError: Redis failed (the caller logs it; the next request takes a new
            snapshot).
    """
    payload = json.dumps(
        {"memories": list(snapshot.memories), "summary": snapshot.summary}, ensure_ascii=False
    )
    # by EVAL, as it always was (``set_if_present.lua``: only while the meta hash exists)
    written = await redis.eval(
        scripts.source("set_if_present"),
        1,
        keys.meta,
        WINDOW_START,
        str(start),
        HEAD_EPOCH,
        epoch,
        HEAD,
        payload,
    )
    return bool(written)
