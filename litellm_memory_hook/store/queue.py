"""The extraction schedule: the due set, per-conversation leases and the job counters.

``mem:due`` (global sorted set) holds conversation refs (``t:u:c``) scored by the time they are
due (epoch ms); adding a ref that is there already only moves its time, so enqueueing twice gives
one job. A worker claims a due conversation with a lease (``SET NX PX`` on the conversation's
``lease`` key, in the user's slot) and moves its due time to the lease's end, so a worker killed
mid-job leaves a ref that is due again once its lease expired. When the job is done the ref leaves
the set, unless a writer re-scheduled it meanwhile (compare-and-delete on the score).
"""

from __future__ import annotations

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.store import scripts
from litellm_memory_hook.store.keys import ConversationKeys, due_key, stats_key


class ExtractionQueue:
    """The due set, leases and counters of one key prefix.

    Args:
        redis: an asyncio client.
        prefix: the key prefix (``mem``).

    Every method raises :class:`StoreError` on a Redis failure.
    """

    def __init__(self, redis: aioredis.Redis, prefix: str):
        self.redis = redis
        self.prefix = prefix
        self.due = due_key(prefix)
        self._remove_if_score = scripts.register(redis, "remove_if_score")
        self._release = scripts.register(redis, "release_lease")

    async def schedule(
        self, keys: ConversationKeys, due_ms: int, *, earlier_only: bool = False
    ) -> None:
        """Make the conversation due at ``due_ms`` (epoch ms). ``earlier_only``: never move an
        existing due time later (a flush must not be postponed by a later message)."""
        try:
            if earlier_only:
                await self.redis.zadd(self.due, {keys.ref: due_ms}, lt=True)
            else:
                await self.redis.zadd(self.due, {keys.ref: due_ms})
        except RedisError as exc:
            raise StoreError(f"schedule {keys.ref}: {exc}") from exc

    async def due_refs(self, now_ms: int, limit: int = 20) -> list[str]:
        """Refs due at ``now_ms``, most overdue first."""
        try:
            refs = await self.redis.zrangebyscore(self.due, "-inf", now_ms, start=0, num=limit)
        except RedisError as exc:
            raise StoreError(f"read {self.due}: {exc}") from exc
        return [r.decode() if isinstance(r, bytes) else str(r) for r in refs]

    async def due_time(self, keys: ConversationKeys) -> int | None:
        """When the conversation is due (epoch ms), or ``None`` when it is not in the set."""
        try:
            score = await self.redis.zscore(self.due, keys.ref)
        except RedisError as exc:
            raise StoreError(f"read {self.due}: {exc}") from exc
        return None if score is None else int(score)

    async def claim(
        self, keys: ConversationKeys, worker: str, *, now_ms: int, lease_ms: int
    ) -> int | None:
        """Take the conversation's lease; returns the due score set for the lease's end (pass it
        to :meth:`finish`), or ``None`` when another worker holds the lease."""
        try:
            taken = await self.redis.set(keys.lease, worker, nx=True, px=lease_ms)
            if not taken:
                return None
            until = now_ms + lease_ms
            await self.redis.zadd(self.due, {keys.ref: until}, xx=True)
        except RedisError as exc:
            raise StoreError(f"claim {keys.ref}: {exc}") from exc
        return until

    async def finish(
        self, keys: ConversationKeys, worker: str, claim_score: int, *, again_ms: int | None
    ) -> None:
        """End a job: schedule it again at ``again_ms`` (epoch ms; more backlog), or remove the
        ref unless a writer re-scheduled it meanwhile; then release the lease."""
        try:
            if again_ms is not None:
                await self.redis.zadd(self.due, {keys.ref: again_ms})
            else:
                await self._remove_if_score(keys=[self.due], args=[keys.ref, claim_score])
            await self._release(keys=[keys.lease], args=[worker])
        except RedisError as exc:
            raise StoreError(f"finish {keys.ref}: {exc}") from exc

    async def drop(self, ref: str) -> None:
        """Remove a ref from the due set (its conversation expired or cannot be used)."""
        try:
            await self.redis.zrem(self.due, ref)
        except RedisError as exc:
            raise StoreError(f"drop {ref}: {exc}") from exc

    async def count(self, **counts: int) -> None:
        """Add to the job counters in ``mem:stats`` (``HGETALL mem:stats`` shows them)."""
        items = {k: v for k, v in counts.items() if v}
        if not items:
            return
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                for name, value in items.items():
                    pipe.hincrby(stats_key(self.prefix), name, value)
                await pipe.execute()
        except RedisError as exc:
            raise StoreError(f"count: {exc}") from exc

    async def stats(self) -> dict[str, int]:
        """The job counters and the due set's length."""
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.hgetall(stats_key(self.prefix))
                pipe.zcard(self.due)
                raw, due = await pipe.execute()
        except RedisError as exc:
            raise StoreError(f"stats: {exc}") from exc
        out = {(k.decode() if isinstance(k, bytes) else str(k)): int(v) for k, v in raw.items()}
        out["due"] = int(due)
        return out
