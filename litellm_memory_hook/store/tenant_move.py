"""Move every key of one tenant to another tenant id (a one-off, for a change of tenant rule).

A tenant's keys all start with ``<prefix>:{<tenant>:`` (the hash tag ``{tenant:user}``,
:mod:`litellm_memory_hook.store.keys`), so a move is: SCAN them (never ``KEYS``), copy each to
the same name under the new tenant (``DUMP`` / ``RESTORE`` with its time to live, so a key of
any type moves whole and a Cluster may put it in another slot), delete the old one; then the
raw ``tenant`` field of each conversation's meta hash and the tenant's entries of the due set
(``t:u:c`` refs, :func:`litellm_memory_hook.store.keys.due_key`) are renamed.

A key whose new name is already taken is left where it is and counted as a conflict (nothing is
overwritten), so the move can be run again after the proxy wrote a straggler to the old tenant.
The move is not atomic across keys: run it when the tenant's clients are idle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError, ResponseError

from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.store.keys import due_key, key_id

#: keys asked for per SCAN step.
SCAN_COUNT = 500
_GLOB_SPECIAL = str.maketrans({c: "\\" + c for c in "*?[]\\"})


@dataclass
class TenantMove:
    """What a move did.

    Attributes:
        moved: keys renamed to the new tenant (a count).
        conflicts: old key names left in place because the new name was taken.
        due: due-set entries renamed (a count).
    """

    moved: int = 0
    conflicts: list[str] = field(default_factory=list)
    due: int = 0


def _text(value: Any) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


async def move_tenant(redis: Redis, prefix: str, old: str, new: str) -> TenantMove:
    """Move every key of tenant ``old`` (raw id, e.g. ``key-3f2a...``) to tenant ``new``.

    Raises:
        StoreError: Redis failed (what moved before stays moved; run it again).
        ValueError: ``old`` and ``new`` name the same tenant key.
    """
    old_key, new_key = key_id(old), key_id(new)
    if old_key == new_key:
        raise ValueError(f"{old!r} and {new!r} are the same tenant")
    head_old = f"{prefix}:{{{old_key}:"
    head_new = f"{prefix}:{{{new_key}:"
    match = head_old.translate(_GLOB_SPECIAL) + "*"
    report = TenantMove()
    try:
        names = sorted({_text(k) async for k in redis.scan_iter(match=match, count=SCAN_COUNT)})
        for name in names:
            if not name.startswith(head_old):
                continue
            target = head_new + name[len(head_old) :]
            dump = await redis.dump(name)
            if dump is None:  # expired or deleted since the scan
                continue
            ttl = await redis.pttl(name)
            try:
                await redis.restore(target, max(0, int(ttl)), dump)
            except ResponseError as exc:
                if "BUSYKEY" not in str(exc):
                    raise
                report.conflicts.append(name)
                continue
            if (
                target.endswith(":meta")
                and await redis.type(target) in (b"hash", "hash")
                and await redis.hexists(target, "tenant")
            ):
                await redis.hset(target, "tenant", new)
            await redis.delete(name)
            report.moved += 1
        report.due = await _move_due(redis, prefix, old_key, new_key)
    except RedisError as exc:
        raise StoreError(f"move tenant {old!r} to {new!r}: {exc}") from exc
    return report


async def _move_due(redis: Redis, prefix: str, old_key: str, new_key: str) -> int:
    """Rename the tenant's conversation refs (``t:u:c``) in the due set, keeping their times."""
    due = due_key(prefix)
    moved = 0
    async for member, score in redis.zscan_iter(
        due, match=old_key.translate(_GLOB_SPECIAL) + ":*", count=SCAN_COUNT
    ):
        ref = _text(member)
        if not ref.startswith(f"{old_key}:"):
            continue
        await redis.zadd(due, {f"{new_key}:{ref[len(old_key) + 1 :]}": score}, nx=True)
        await redis.zrem(due, member)
        moved += 1
    return moved
