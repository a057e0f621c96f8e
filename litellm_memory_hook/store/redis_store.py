"""All Redis reads and writes of the package.

Key names come from :mod:`litellm_memory_hook.store.keys`. Per-conversation writes are one Lua
script each (atomic, one Cluster slot); global keys (due set, user index) are written by separate
commands, never in the same script or transaction.

The recall index is the ``postings`` hash of a conversation: field = term, value = packed
big-endian uint32s: the term's document frequency, then the seqs of the newest messages containing
it, ascending, at most ``postings_cap`` of them (DESIGN.md section 6: reading only the newest
postings keeps the cost of a request flat as the conversation grows). ``meta.idx_n`` counts the
indexed messages (the N of the IDF formula).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from litellm_memory_hook.core.models import ConversationState, IndexedTurn, Turn
from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.store.keys import ConversationKeys, MemoryKeys, UserKeys, due_key

#: default number of newest postings kept per term (DESIGN.md section 6: K=1024 gave the exact
#: top 4 on 90-99% of queries at 100,000 messages).
POSTINGS_CAP = 1024

_POSTINGS_LUA = """
-- Shared by the scripts below: the packed postings value (big-endian uint32s: df, then seqs).
local function enc(n)
  return string.char(math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256,
                     math.floor(n / 256) % 256, n % 256)
end
local function dec(s, i)
  local a, b, c, d = string.byte(s, i, i + 3)
  return ((a * 256 + b) * 256 + c) * 256 + d
end
-- One message (packed seq) leaves a term: df - 1, its seq dropped from the list when there,
-- the field deleted when df reaches 0.
local function unindex(postings, term, packed)
  local v = redis.call('HGET', postings, term)
  if not v then return end
  local df = dec(v, 1) - 1
  local list = string.sub(v, 5)
  for p = 1, #list - 3, 4 do
    if string.sub(list, p, p + 3) == packed then
      list = string.sub(list, 1, p - 1) .. string.sub(list, p + 4)
      break
    end
  end
  if df <= 0 then redis.call('HDEL', postings, term)
  else redis.call('HSET', postings, term, enc(df) .. list) end
end
-- Remove listed turns, reading ARGV from position i: the count, then for each turn its seq,
-- its number of terms and the terms. Only turns still stored are removed, and only they leave
-- the index (KEYS[1] meta, KEYS[2] turns, KEYS[4] postings). Returns the next position and the
-- number of turns removed.
local function remove_turns(i)
  local removed = 0
  local n = tonumber(ARGV[i]); i = i + 1
  for _ = 1, n do
    local seq = tonumber(ARGV[i])
    local n_terms = tonumber(ARGV[i + 1]); i = i + 2
    if redis.call('ZREMRANGEBYSCORE', KEYS[2], seq, seq) > 0 then
      removed = removed + 1
      local packed = enc(seq)
      for t = i, i + n_terms - 1 do unindex(KEYS[4], ARGV[t], packed) end
      if n_terms > 0 then redis.call('HINCRBY', KEYS[1], 'idx_n', -1) end
    end
    i = i + n_terms
  end
  return i, removed
end
"""

APPEND_TURNS = (
    """
-- Append turns to a conversation, idempotently on call_id, updating the recall index.
-- KEYS[1] meta hash, KEYS[2] turns zset, KEYS[3] calls hash, KEYS[4] postings hash
-- ARGV[1] call_id ("" = no idempotency check)
-- ARGV[2] TTL in seconds, set on every key of the conversation that exists
-- ARGV[3] now, epoch ms (meta.updated_ms)
-- ARGV[4] postings cap per term
-- ARGV[5] number of meta fields written only if absent; then that many field, value pairs
-- then: number of turns to remove first (a regenerate replaces its old reply); for each: seq,
--   number of terms, the terms; exactly these seqs go, and only if still stored
-- then: number of seed turns: the first new turns, written only while the conversation is empty
--   (a client's own history seeding a new conversation: concurrent first requests seed it once)
-- then: number of new turns; for each: body (turn JSON without "{"), number of terms, the terms
-- Returns {1, first_seq, last_seq} when written, {0, seq, seq} when call_id was already stored.
"""
    + _POSTINGS_LUA
    + """
local call_id = ARGV[1]
if call_id ~= '' then
  local seen = redis.call('HGET', KEYS[3], call_id)
  if seen then return {0, tonumber(seen), tonumber(seen)} end
end
local cap = tonumber(ARGV[4])
local i = 6
for _ = 1, tonumber(ARGV[5]) do
  redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1])
  i = i + 2
end
i = remove_turns(i)
local n_seed = tonumber(ARGV[i]); i = i + 1
local n_new = tonumber(ARGV[i]); i = i + 1
local skip_seed = n_seed > 0 and tonumber(redis.call('HGET', KEYS[1], 'seq') or '0') > 0
local first, last = 0, 0
for j = 1, n_new do
 if skip_seed and j <= n_seed then
  i = i + 2 + tonumber(ARGV[i + 1])
 else
  last = redis.call('HINCRBY', KEYS[1], 'seq', 1)
  if first == 0 then first = last end
  redis.call('ZADD', KEYS[2], last, '{"seq":' .. last .. ',' .. ARGV[i])
  local n_terms = tonumber(ARGV[i + 1]); i = i + 2
  local packed = enc(last)
  for t = i, i + n_terms - 1 do
    local v = redis.call('HGET', KEYS[4], ARGV[t])
    local df, list = 0, ''
    if v then df = dec(v, 1); list = string.sub(v, 5) end
    list = list .. packed
    if #list > cap * 4 then list = string.sub(list, #list - cap * 4 + 1) end
    redis.call('HSET', KEYS[4], ARGV[t], enc(df + 1) .. list)
  end
  if n_terms > 0 then redis.call('HINCRBY', KEYS[1], 'idx_n', 1) end
  i = i + n_terms
 end
end
if call_id ~= '' and last > 0 then redis.call('HSET', KEYS[3], call_id, last) end
redis.call('HSET', KEYS[1], 'updated_ms', ARGV[3])
for k = 1, #KEYS do redis.call('EXPIRE', KEYS[k], ARGV[2]) end
return {1, first, last}
"""
)

DELETE_TURNS = (
    """
-- Delete stored turns of a conversation by seq, with their recall-index entries.
-- KEYS[1] meta hash, KEYS[2] turns zset, KEYS[3] calls hash, KEYS[4] postings hash
-- ARGV[1] TTL in seconds, set on every key of the conversation that exists
-- ARGV[2] number of turns; for each: seq, number of terms, the terms it was appended with
-- A seq that is not stored (never, or already deleted) is skipped: its terms are not touched.
-- Returns the number of turns removed.
"""
    + _POSTINGS_LUA
    + """
local _, removed = remove_turns(2)
for k = 1, #KEYS do redis.call('EXPIRE', KEYS[k], ARGV[1]) end
return removed
"""
)


FETCH_TURNS = """
-- The stored turns with the given seqs, in the order asked (missing seqs give nothing).
-- KEYS[1] turns zset
-- ARGV the seqs
-- Returns the JSON members found.
local out = {}
for i = 1, #ARGV do
  local found = redis.call('ZRANGE', KEYS[1], ARGV[i], ARGV[i], 'BYSCORE')
  if found[1] then out[#out + 1] = found[1] end
end
return out
"""


@dataclass(frozen=True)
class AppendResult:
    """What an append did: ``written`` False means the call id was already stored."""

    written: bool
    first_seq: int
    last_seq: int


@dataclass
class Postings:
    """The index entries read for one query: term -> (df, newest seqs) and N."""

    n_docs: int = 0
    df: dict[str, int] = field(default_factory=dict)
    seqs: dict[str, npt.NDArray[np.uint32]] = field(default_factory=dict)


def unpack_postings(value: bytes) -> tuple[int, npt.NDArray[np.uint32]]:
    """Decode a postings value: (document frequency, seqs ascending as a uint32 array)."""
    count = len(value) // 4
    if count == 0:
        return 0, np.zeros(0, dtype=np.uint32)
    numbers = np.frombuffer(value, dtype=">u4", count=count)
    return int(numbers[0]), numbers[1:]


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _in_field_order(items: dict[bytes, bytes]) -> list[str]:
    """Hash values ordered by field name: writers name fields so that this order is creation
    order (zero-padded epoch ms or ULIDs); Redis itself returns a large hash in no order."""
    return [_text(items[name]) for name in sorted(items)]


def now_ms() -> int:
    """Wall-clock time in epoch milliseconds."""
    return int(time.time() * 1000)


class MemoryStore:
    """Reads and writes conversations in Redis.

    Args:
        redis: an asyncio client created with ``decode_responses=False`` (postings are binary).
        ttl_s: retention TTL in seconds, refreshed on every write.
        postings_cap: newest postings kept per term.

    Every method raises :class:`StoreError` (wrapping the Redis error) on failure.
    """

    def __init__(self, redis: aioredis.Redis, *, ttl_s: int, postings_cap: int = POSTINGS_CAP):
        self.redis = redis
        self.ttl_s = ttl_s
        self.postings_cap = postings_cap
        self._append = redis.register_script(APPEND_TURNS)
        self._fetch = redis.register_script(FETCH_TURNS)
        self._delete = redis.register_script(DELETE_TURNS)

    async def load(
        self,
        keys: ConversationKeys,
        memory: MemoryKeys,
        *,
        tail: int,
        query_terms: Sequence[str] = (),
    ) -> tuple[ConversationState, Postings]:
        """Read what a request needs in one round trip (every key is in the user's slot).

        Args:
            keys: the conversation.
            memory: the memory set the conversation uses (its pinned and extracted memories).
            tail: how many of the newest turns to read.
            query_terms: recall terms of the new message; their postings are read too.

        Returns:
            The state (meta, newest turns oldest first, pinned, memories) and the postings.
        """
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.hgetall(keys.meta)
                pipe.zrange(keys.turns, -tail, -1)
                pipe.hgetall(memory.pinned)
                pipe.hgetall(memory.memories)
                if query_terms:
                    pipe.hmget(keys.postings, list(query_terms))
                replies = await pipe.execute()
        except RedisError as exc:
            raise StoreError(f"load {keys.ref}: {exc}") from exc
        meta = {_text(k): _text(v) for k, v in replies[0].items()}
        turns: list[Turn] = []
        for member in replies[1]:
            try:
                turns.append(Turn.from_member(member))
            except ValueError:
                continue
        state = ConversationState(
            meta=meta,
            tail=turns,
            pinned=_in_field_order(replies[2]),
            memories=_in_field_order(replies[3]),
        )
        postings = Postings(n_docs=int(meta.get("idx_n", "0") or 0))
        if query_terms:
            for term, value in zip(query_terms, replies[4], strict=True):
                if value:
                    df, seqs = unpack_postings(value)
                    postings.df[term] = df
                    postings.seqs[term] = seqs
        return state, postings

    async def fetch_turns(self, keys: ConversationKeys, seqs: Iterable[int]) -> list[Turn]:
        """The turns with these seqs, in seq order (missing ones skipped)."""
        wanted = sorted(set(seqs))
        if not wanted:
            return []
        try:
            members = await self._fetch(keys=[keys.turns], args=wanted)
        except RedisError as exc:
            raise StoreError(f"fetch turns {keys.ref}: {exc}") from exc
        return [Turn.from_member(m) for m in members]

    async def append(
        self,
        keys: ConversationKeys,
        turns: Sequence[IndexedTurn],
        *,
        call_id: str = "",
        meta_if_new: dict[str, str] | None = None,
        replace: Sequence[IndexedTurn] = (),
        at_ms: int | None = None,
        seeded: int = 0,
    ) -> AppendResult:
        """Append turns atomically (one Lua script), idempotent on ``call_id``.

        Args:
            keys: the conversation.
            turns: new turns, oldest first, with their index terms.
            call_id: ``litellm_call_id``; a second append with the same id writes nothing.
            meta_if_new: meta fields set only when absent (raw ids, namespace, created time).
            replace: stored turns to remove first (a regenerate's old reply): exactly these
                seqs, each only if still stored, leave the sorted set and the index; turns that
                other requests stored meanwhile are never touched.
            at_ms: ``updated_ms`` to record (default now).
            seeded: the first this-many ``turns`` are the client's own history seeding a new
                conversation; they are skipped when the conversation is no longer empty.

        Raises:
            StoreError: Redis failed.
        """
        args: list[Any] = [
            call_id,
            self.ttl_s,
            at_ms if at_ms is not None else now_ms(),
            self.postings_cap,
        ]
        meta_items = list((meta_if_new or {}).items())
        args.append(len(meta_items))
        for name, value in meta_items:
            args.extend((name, value))
        args.append(len(replace))
        for item in replace:
            args.extend((item.turn.seq, len(item.terms), *item.terms))
        args.extend((seeded, len(turns)))
        for item in turns:
            args.extend((item.turn.body_json(), len(item.terms), *item.terms))
        try:
            written, first, last = await self._append(
                keys=[keys.meta, keys.turns, keys.calls, keys.postings], args=args
            )
        except RedisError as exc:
            raise StoreError(f"append {keys.ref}: {exc}") from exc
        return AppendResult(bool(written), int(first), int(last))

    async def delete_turns(self, keys: ConversationKeys, turns: Sequence[IndexedTurn]) -> int:
        """Delete stored turns by seq and their recall-index entries, atomically (one Lua script).

        Each turn leaves the ``turns`` sorted set; each of its terms gets ``df - 1`` (the field is
        deleted when that reaches 0) and loses the turn's seq from its postings list when the seq
        is there; ``meta.idx_n`` drops by one for each indexed turn (one with terms). Seqs that are
        not stored (0, never written, already deleted) are skipped, so a repeated call changes
        nothing. The ``calls`` hash is left alone. Every key of the conversation gets the
        retention TTL again, in the same script, so they still expire together.

        Guarantee (``turns`` must carry the terms they were appended with, which
        :func:`litellm_memory_hook.proxy.context.stored_terms` gives for any stored turn): the
        document frequencies and ``idx_n`` are exactly those of an index built from the turns
        that remain. A term's postings list holds the newest ``m`` remaining turns that contain
        it, ascending, with no gap and no deleted seq, for some ``m <= min(postings_cap, df)``;
        ``m = min(postings_cap, df)`` (the list a fresh index of the remaining turns would hold)
        whenever the cap never dropped a posting of the term. Otherwise the list can be shorter:
        seqs the cap dropped earlier are not brought back (they are no longer stored), so after
        adding all turns and deleting some, the list is the newest ``postings_cap`` postings
        before the deletion minus the deleted seqs. Recall then misses only old matches of a
        term that is common enough to have been capped.

        Args:
            keys: the conversation.
            turns: stored turns (``turn.seq`` > 0) with their index terms; repeats of a seq count
                once.

        Returns:
            How many turns were removed (stored turns among ``turns``).

        Raises:
            StoreError: Redis failed (nothing was changed: the script is atomic).
        """
        seen: set[int] = set()
        args: list[Any] = [self.ttl_s, 0]
        for item in turns:
            seq = item.turn.seq
            if seq <= 0 or seq in seen:
                continue
            seen.add(seq)
            args.extend((seq, len(item.terms), *item.terms))
        if not seen:
            return 0
        args[1] = len(seen)
        try:
            removed = await self._delete(
                keys=[keys.meta, keys.turns, keys.calls, keys.postings], args=args
            )
        except RedisError as exc:
            raise StoreError(f"delete turns {keys.ref}: {exc}") from exc
        return int(removed)

    async def touch_user_index(self, keys: ConversationKeys, memory: MemoryKeys) -> None:
        """Add the conversation and its memory set to the user's index, and give the index and
        the memory set's keys the retention TTL again (one round trip, the user's slot).

        A user who keeps talking keeps their memories: every stored turn refreshes them.
        """
        user = keys.user_keys
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.sadd(user.index, keys.index_member, memory.scope)
                for key in (user.index, *memory.all()):
                    pipe.expire(key, self.ttl_s)
                await pipe.execute()
        except RedisError as exc:
            raise StoreError(f"user index {user.index}: {exc}") from exc

    async def schedule_extraction(self, keys: ConversationKeys, due_ms: int) -> None:
        """Mark the conversation due for extraction at ``due_ms`` (epoch ms) in the due set."""
        try:
            await self.redis.zadd(due_key(keys.prefix), {keys.ref: due_ms})
        except RedisError as exc:
            raise StoreError(f"schedule {keys.ref}: {exc}") from exc

    async def count_turns(self, keys: ConversationKeys) -> int:
        """Number of stored turns."""
        try:
            return int(await self.redis.zcard(keys.turns))
        except RedisError as exc:
            raise StoreError(f"count {keys.ref}: {exc}") from exc

    async def all_turns(self, keys: ConversationKeys) -> list[Turn]:
        """Every stored turn, oldest first (for the CLI and tests; not on the request path)."""
        try:
            members = await self.redis.zrange(keys.turns, 0, -1)
        except RedisError as exc:
            raise StoreError(f"read {keys.ref}: {exc}") from exc
        return [Turn.from_member(m) for m in members if isinstance(m, bytes | str)]

    async def forget_user(self, user: UserKeys) -> int:
        """Delete every key of a user (conversations, memory sets, the index) through the user's
        index, never KEYS, and remove the user's conversations from the due set.

        Returns:
            How many keys were deleted.

        Raises:
            StoreError: Redis failed (run it again: it only deletes).
        """
        try:
            members = [_text(m) for m in await self.redis.smembers(user.index)]
            names = [name for member in members for name in user.keys_of(member)]
            refs = [
                f"{user.tenant}:{user.user}:{m.removeprefix('c:')}"
                for m in members
                if m.startswith("c:")
            ]
            deleted = 0
            for start in range(0, len(names), 500):
                deleted += int(await self.redis.delete(*names[start : start + 500]))
            deleted += int(await self.redis.delete(user.index))
            if refs:
                await self.redis.zrem(due_key(user.prefix), *refs)
        except RedisError as exc:
            raise StoreError(f"forget {user.hash_tag}: {exc}") from exc
        return deleted
