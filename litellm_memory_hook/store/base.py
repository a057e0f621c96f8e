"""What every part of the conversation store shares: the client and the bounds of its writes.

:class:`~litellm_memory_hook.store.redis_store.MemoryStore` is one object made of the parts
(:mod:`~litellm_memory_hook.store.reads`, :mod:`~litellm_memory_hook.store.writes`,
:mod:`~litellm_memory_hook.store.chats`), each a subclass of :class:`StoreBase`.
"""

from __future__ import annotations

import redis.asyncio as aioredis

from litellm_memory_hook.core.bounds import TurnLimits

#: default number of newest postings kept per term (docs/design.md#recall: K=1024 gave the exact
#: top 4 on 90-99% of queries at 100,000 messages).
POSTINGS_CAP = 1024

#: most turns one script writes or deletes: a larger write (a client's long history seeding a new
#: conversation, an import) or trim runs as several scripts (issue 9 item 7: no script holds
#: Redis for more than a few ms).
BATCH_TURNS = 100
#: most distinct index terms one script updates (one read and one write of the term's postings
#: field each, ~5-10 us): ~300 keep a script at ~1-3 ms (LoCoMo text: ~20 turns per script;
#: a request's own turn pair, at most 64 terms a turn, stays one script).
BATCH_TERMS = 300


class StoreBase:
    """The client and settings of the conversation store.

    Args:
        redis: an asyncio client created with ``decode_responses=False`` (postings are binary);
            a Redis Cluster client works too (:mod:`litellm_memory_hook.store.client`).
        ttl_s: retention TTL in seconds, refreshed on every write.
        postings_cap: newest postings kept per term.
        limits: the bounds every appended turn is held to
            (:func:`litellm_memory_hook.core.bounds.bound_turn`).
        batch_turns / batch_terms: most turns / index terms one script writes or deletes.

    Each part names the scripts it runs as class attributes
    (:class:`~litellm_memory_hook.store.scripts.Registered`), registered with ``redis`` when
    first used.
    """

    def __init__(
        self,
        redis: aioredis.Redis,
        *,
        ttl_s: int,
        postings_cap: int = POSTINGS_CAP,
        limits: TurnLimits | None = None,
        batch_turns: int = BATCH_TURNS,
        batch_terms: int = BATCH_TERMS,
    ):
        self.redis = redis
        self.ttl_s = ttl_s
        self.postings_cap = postings_cap
        self.limits = limits or TurnLimits()
        self.batch_turns = max(1, batch_turns)
        self.batch_terms = max(1, batch_terms)
