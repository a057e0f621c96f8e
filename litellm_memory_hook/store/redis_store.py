"""The conversation store: :class:`MemoryStore`, the one object the rest of the package reads
and writes conversations with, made of its parts:

- :mod:`~litellm_memory_hook.store.reads`: what a request reads, turns by seq, counts;
- :mod:`~litellm_memory_hook.store.writes`: append (one script, or bounded batches), delete;
- :mod:`~litellm_memory_hook.store.chats`: the user's other conversations, their index, forget;
- :mod:`~litellm_memory_hook.store.codec`: the packed postings, the scripts' replies and ARGV;
- :mod:`~litellm_memory_hook.store.scripts`: the Lua scripts (``store/lua/*.lua``).

Key names come from :mod:`litellm_memory_hook.store.keys`. Per-conversation writes are Lua
scripts on the keys of one user (one Cluster slot); global keys (due set, counters) are written
by separate commands, never in the same script or transaction. The names other modules import
from here are those of the parts, re-exported.

The recall index is the ``postings`` hash of a conversation: field = term, value = packed
big-endian uint32s: the term's document frequency, then the seqs of the newest messages containing
it, ascending, at most ``postings_cap`` of them (docs/design.md#recall: reading only the newest
postings keeps the cost of a request flat as the conversation grows). ``meta.idx_n`` counts the
indexed messages (the N of the IDF formula).

The time index is the ``times`` sorted set of a conversation: score = a stored turn's ``ts`` (epoch
ms), member = its seq as 4 bytes, big-endian (as in postings: members of one ts sort by seq, and
each takes the smallest string allocation), for each stored turn that starts a run: the first one,
and each one said before the stored turn just before it (meta ``truns``, the run form). Between two
entries the turns' times rise with their seqs. The scripts that store and remove turns keep it in
the same script (same slot, same TTL), so a date the user names finds the turns said then whatever
order their times were stored in (an import of older lines after newer chat, a write an outage
buffer held back): ``store/lua/seq_spans.lua`` binary-searches each run said before the date's end,
O(r log n) per date for r runs. A conversation said in order has one entry; an import after newer
chat adds two: a few hundred bytes a conversation, where an entry for every turn cost ~96 bytes a
turn. Past 32 runs (times out of order again and again) the index turns, 400 turns a write, into
the full form: an entry for every turn, O(log n + postings_cap) per date (``ZCOUNT``, ``ZRANGE
BYSCORE``), as every index was before the run form; an index of that form in a user's Redis (an
older version made it) is kept and read so. The same scripts mark the conversation
``meta.ts_unordered`` when a stored turn is out of order with its neighbours; until then (the usual
conversation) dates are found by the cheaper binary search over the turns' own times, O(log n) per
date, exact while they are in seq order. A conversation stored before the index existed has no
``times`` key; its writes add none, and its dates are found as before, by a binary search over the
turns' times, right while they are in seq order. It gets an index once it holds no turn again
(forgotten, imported ``--fresh``, every turn deleted). The same fallback is taken for an index of
the full form that does not hold every stored turn (its size is compared with the turns' on every
read, and by every write, which then adds nothing to it). During a rolling upgrade an older version
reads a run-form index as the full form when its size happens to match the turns' (its dates then
miss the turns between entries), and its writes add no entry: a turn it stores out of order is not
found on its date."""

from __future__ import annotations

from typing import TYPE_CHECKING

import redis.asyncio as aioredis

from litellm_memory_hook.core.bounds import TurnLimits
from litellm_memory_hook.store.base import BATCH_TERMS, BATCH_TURNS, POSTINGS_CAP
from litellm_memory_hook.store.chats import (
    CHAT_META_FIELDS,
    PRUNE_BATCH,
    ChatPostings,
    UserChats,
)
from litellm_memory_hook.store.codec import MAX_SEQ, DateSeqs, Postings, unpack_postings
from litellm_memory_hook.store.reads import (
    LOAD_TERMS_PER_CALL,
    QUESTION_SCAN_BYTES,
    QUESTION_SCAN_TURNS,
)
from litellm_memory_hook.store.writes import (
    PROGRESS_PREFIX,
    AppendResult,
    ConversationWrites,
    now_ms,
    write_progress_ms,
)

if TYPE_CHECKING:
    from litellm_memory_hook.settings import MemorySettings

__all__ = [
    "BATCH_TERMS",
    "BATCH_TURNS",
    "CHAT_META_FIELDS",
    "LOAD_TERMS_PER_CALL",
    "MAX_SEQ",
    "POSTINGS_CAP",
    "PROGRESS_PREFIX",
    "PRUNE_BATCH",
    "QUESTION_SCAN_BYTES",
    "QUESTION_SCAN_TURNS",
    "AppendResult",
    "ChatPostings",
    "DateSeqs",
    "MemoryStore",
    "Postings",
    "now_ms",
    "unpack_postings",
    "write_progress_ms",
]


class MemoryStore(ConversationWrites, UserChats):
    """Reads and writes conversations in Redis: the reads of
    :class:`~litellm_memory_hook.store.reads.ConversationReads`, the writes of
    :class:`~litellm_memory_hook.store.writes.ConversationWrites` and the user-wide reads and
    deletes of :class:`~litellm_memory_hook.store.chats.UserChats`, on one client.

    Constructed as :class:`~litellm_memory_hook.store.base.StoreBase` says (the client, the
    retention TTL, the postings cap, the bounds of turns and of a script's batch).

    Every method raises :class:`StoreError` (wrapping the Redis error) on failure.
    """

    @classmethod
    def for_settings(cls, redis: aioredis.Redis, settings: MemorySettings) -> MemoryStore:
        """The store of the settings: retention TTL, ``storage.max_message_chars`` as the text
        bound."""
        return cls(
            redis,
            ttl_s=settings.storage.retention_s,
            limits=TurnLimits(text_chars=settings.storage.max_message_chars),
        )
