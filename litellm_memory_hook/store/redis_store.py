"""All Redis reads and writes of the package.

Key names come from :mod:`litellm_memory_hook.store.keys`. Per-conversation writes are Lua
scripts on the keys of one user (one Cluster slot); global keys (due set, counters) are written
by separate commands, never in the same script or transaction. A request's own write is one
atomic script; a larger write (a long history seeding a new conversation, an import) and a trim
run as batches of at most ``BATCH_TURNS`` turns and ``BATCH_TERMS`` index terms, a few ms each
(issue 9 item 7; :meth:`MemoryStore.append`). Every turn is held to the bounds of
:mod:`litellm_memory_hook.core.bounds` before it is stored.

The recall index is the ``postings`` hash of a conversation: field = term, value = packed
big-endian uint32s: the term's document frequency, then the seqs of the newest messages containing
it, ascending, at most ``postings_cap`` of them (docs/design.md#recall: reading only the newest
postings keeps the cost of a request flat as the conversation grows). ``meta.idx_n`` counts the
indexed messages (the N of the IDF formula).

The time index is the ``times`` sorted set of a conversation: score = a stored turn's ``ts`` (epoch
ms), member = its seq as 4 bytes, big-endian (as in postings: members of one ts sort by seq, and
each takes the smallest string allocation). The scripts that store and remove turns keep it in the
same script (same slot, same TTL), so a date the user names finds the turns said then whatever order
their times were stored in (an import of older lines after newer chat, a write an outage buffer held
back): :data:`SEQ_SPANS`, O(log n + postings_cap) per date. The same scripts compare each stored
turn's time with its neighbours' in seq order and mark the conversation ``meta.ts_unordered`` when
one is out of order; until then (the usual conversation) dates are found by the cheaper binary
search over the turns' own times, O(log n) per date, exact while they are in seq order. It costs ~96
bytes of Redis memory a turn (measured: 9.6 MB at 100,000 turns). A conversation stored before the
index existed has no ``times`` key; its writes add none (an index missing older turns would hide
them), and its dates are found as before, by a binary search over the turns' times, right while they
are in seq order. It gets an index once it holds no turn again (forgotten, imported ``--fresh``,
every turn deleted). The same fallback is taken whenever the index does not hold every stored turn
(its size is compared with the turns' on every read, and by every write, which then adds nothing to
it): turns an older version of the package writes during a rolling upgrade send the conversation
back to the binary search, except a reply such a version regenerates (it removes one turn the index
holds and adds one it lacks, so the sizes still match): that reply is then missing from the index,
and a date does not find it."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError, RedisError

from litellm_memory_hook.core.bounds import TurnLimits, bound_id, bound_meta_value, bound_turn
from litellm_memory_hook.core.indexing import stored_terms
from litellm_memory_hook.core.models import ConversationState, IndexedTurn, Turn
from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.slices import map_sliced
from litellm_memory_hook.store.forgets import FORGOTTEN_LUA, token_of
from litellm_memory_hook.store.keys import (
    CURSOR_COPY_FIELD,
    ConversationKeys,
    MemoryKeys,
    UserKeys,
    due_key,
)

if TYPE_CHECKING:
    from litellm_memory_hook.settings import MemorySettings

logger = logging.getLogger("litellm_memory_hook")

#: default number of newest postings kept per term (docs/design.md#recall: K=1024 gave the exact
#: top 4 on 90-99% of queries at 100,000 messages).
POSTINGS_CAP = 1024

#: the largest seq a conversation may hold: the recall index packs seqs as uint32.
MAX_SEQ = 2**32 - 1

#: most turns one script writes or deletes: a larger write (a client's long history seeding a new
#: conversation, an import) or trim runs as several scripts (issue 9 item 7: no script holds
#: Redis for more than a few ms).
BATCH_TURNS = 100
#: most distinct index terms one script updates (one read and one write of the term's postings
#: field each, ~5-10 us): ~300 keep a script at ~1-3 ms (LoCoMo text: ~20 turns per script;
#: a request's own turn pair, at most 64 terms a turn, stays one script).
BATCH_TERMS = 300

_POSTINGS_LUA = """
-- Shared by the scripts below: the packed postings value (big-endian uint32s: df, then seqs,
-- strictly ascending, at most cap of them: the newest).
local function enc(n)
  return string.char(math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256,
                     math.floor(n / 256) % 256, n % 256)
end
local function dec(s, i)
  local a, b, c, d = string.byte(s, i, i + 3)
  return ((a * 256 + b) * 256 + c) * 256 + d
end
-- Binary search of a seq in a packed list: its byte offset, or nil and the offset where it
-- would be inserted.
local function find(list, seq)
  local lo, hi = 0, math.floor(#list / 4) - 1
  while lo <= hi do
    local mid = math.floor((lo + hi) / 2)
    local v = dec(list, mid * 4 + 1)
    if v == seq then return mid * 4 + 1 end
    if v < seq then lo = mid + 1 else hi = mid - 1 end
  end
  return nil, lo * 4 + 1
end
-- Messages (seqs, ascending) join a term: one read and one write of its field whatever their
-- number. df grows by the seqs not listed yet; they are appended (the usual case) or inserted
-- in order (a batched write landing after a newer writer's); the list keeps the newest cap.
local function add_postings(postings, term, seqs, cap)
  local v = redis.call('HGET', postings, term)
  -- The usual case, every seq newer than the newest listed (a request's own turns): the value
  -- is rebuilt with one copy of the part kept (each copy of a full list is 4 KB, and a turn
  -- pair updates ~60 terms).
  local newest = (v and #v >= 8) and dec(v, #v - 3) or -1
  local appending = true
  for _, seq in ipairs(seqs) do
    if seq <= newest then appending = false; break end
    newest = seq
  end
  if appending then
    local tail = {}
    for j, seq in ipairs(seqs) do tail[j] = enc(seq) end
    -- the oldest `drop` of listed + new seqs go: first listed ones, then (more new seqs than
    -- cap) new ones
    local listed = v and (#v - 4) / 4 or 0
    local drop = math.max(listed + #seqs - cap, 0)
    local kept = drop < listed and string.sub(v, 5 + drop * 4) or ''
    local df = (v and dec(v, 1) or 0) + #seqs
    local from = math.max(drop - listed, 0) + 1
    redis.call('HSET', postings, term, enc(df) .. kept .. table.concat(tail, '', from))
    return
  end
  local df, list = 0, ''
  if v then df = dec(v, 1); list = string.sub(v, 5) end
  local tail = {}
  for _, seq in ipairs(seqs) do
    local n = #list
    if #tail == 0 and n > 0 and dec(list, n - 3) >= seq then
      local at, ins = find(list, seq)
      if not at then
        list = string.sub(list, 1, ins - 1) .. enc(seq) .. string.sub(list, ins)
        df = df + 1
      end
    else
      tail[#tail + 1] = enc(seq)
      df = df + 1
    end
  end
  if #tail > 0 then list = list .. table.concat(tail) end
  if #list > cap * 4 then list = string.sub(list, #list - cap * 4 + 1) end
  redis.call('HSET', postings, term, enc(df) .. list)
end
-- Messages (seqs) leave a term: df drops by their number, their seqs leave the list where
-- listed, the field goes when df reaches 0.
local function remove_postings(postings, term, seqs)
  local v = redis.call('HGET', postings, term)
  if not v then return end
  local df = dec(v, 1) - #seqs
  local list = string.sub(v, 5)
  for _, seq in ipairs(seqs) do
    local at = find(list, seq)
    if at then list = string.sub(list, 1, at - 1) .. string.sub(list, at + 4) end
  end
  if df <= 0 then redis.call('HDEL', postings, term)
  else redis.call('HSET', postings, term, enc(df) .. list) end
end
-- The time index, KEYS[6] (score = a turn's ts, member = its seq as enc gives it: 4 bytes,
-- big-endian, so members of one ts sort by seq, and each takes Redis's smallest string
-- allocation whatever the seq): kept only while it holds
-- every stored turn, i.e. has as many members as the turns zset KEYS[2] (both 0 in a new
-- conversation). A conversation stored before the index existed has none, and its writes add
-- none (SEQ_SPANS then binary-searches the turns' own times, as before the index), until it is
-- empty again. Turns leave the index wherever they leave KEYS[2].
local function times_kept()
  return redis.call('ZCARD', KEYS[6]) == redis.call('ZCARD', KEYS[2])
end
-- The ts of a turn body, as written ('"ts":' cannot occur inside a JSON string: its quotes are
-- escaped, so the first match is the turn's own field); '0' when it has none.
local function body_ts(body)
  return string.match(body, '"ts":(%-?%d+)') or '0'
end
-- The ts of the stored turn next to seq in seq order (range '(seq', '+inf' or '(seq', '-inf'
-- with REV), or nil when there is none.
local function neighbour_ts(range_from, range_to, rev)
  local found
  if rev then
    found = redis.call('ZRANGE', KEYS[2], range_from, range_to, 'BYSCORE', 'REV', 'LIMIT', 0, 1)
  else
    found = redis.call('ZRANGE', KEYS[2], range_from, range_to, 'BYSCORE', 'LIMIT', 0, 1)
  end
  if found[1] then return tonumber(body_ts(found[1])) end
  return nil
end
-- Add a just stored turn (seq, body) to the time index; a turn whose ts is out of seq order
-- with its stored neighbours (said before the turn stored before it, or after the one stored
-- after it) marks the conversation's times as out of order: meta 'ts_unordered' = 1, which
-- SEQ_SPANS reads (a conversation in order keeps the cheaper binary search over the turns).
-- The mark stays until the conversation is deleted (a removal never unsorts times).
local function add_time(seq, body)
  local ts = body_ts(body)
  redis.call('ZADD', KEYS[6], ts, enc(seq))
  if redis.call('HEXISTS', KEYS[1], 'ts_unordered') == 1 then return end
  local t = tonumber(ts)
  local before = neighbour_ts('(' .. seq, '-inf', true)
  local after = neighbour_ts('(' .. seq, '+inf', false)
  if (before and before > t) or (after and after < t) then
    redis.call('HSET', KEYS[1], 'ts_unordered', 1)
  end
end
-- Remove listed turns, reading ARGV from position i: the number of turns, then for each its
-- seq and 1 when it is indexed (has terms); then the number of terms, then for each the term,
-- a count k and k seqs of listed turns holding it. Only turns still stored are removed, and
-- only they leave the index (KEYS[1] meta, KEYS[2] turns, KEYS[4] postings, KEYS[6] times).
-- Returns the next position and the number of turns removed.
local function remove_turns(i)
  local removed, gone = 0, {}
  local n = tonumber(ARGV[i]); i = i + 1
  for _ = 1, n do
    local seq = tonumber(ARGV[i])
    if redis.call('ZREMRANGEBYSCORE', KEYS[2], seq, seq) > 0 then
      redis.call('ZREM', KEYS[6], enc(seq))
      removed = removed + 1
      gone[seq] = true
      if ARGV[i + 1] == '1' then redis.call('HINCRBY', KEYS[1], 'idx_n', -1) end
    end
    i = i + 2
  end
  local n_terms = tonumber(ARGV[i]); i = i + 1
  for _ = 1, n_terms do
    local term, k = ARGV[i], tonumber(ARGV[i + 1]); i = i + 2
    local seqs = {}
    for t = i, i + k - 1 do
      local seq = tonumber(ARGV[t])
      if gone[seq] then seqs[#seqs + 1] = seq end
    end
    if #seqs > 0 then remove_postings(KEYS[4], term, seqs) end
    i = i + k
  end
  return i, removed
end
-- Index new turns, reading ARGV from position i: the number of terms, then for each the term,
-- a count k and k positions (1-based, ascending) of turns in this script holding it; seqs[p]
-- is the seq the turn at position p was written with (nil: not written). Returns the next
-- position.
local function index_turns(i, seqs, cap)
  local n_terms = tonumber(ARGV[i]); i = i + 1
  for _ = 1, n_terms do
    local term, k = ARGV[i], tonumber(ARGV[i + 1]); i = i + 2
    local add = {}
    for t = i, i + k - 1 do
      local seq = seqs[tonumber(ARGV[t])]
      if seq then add[#add + 1] = seq end
    end
    if #add > 0 then add_postings(KEYS[4], term, add, cap) end
    i = i + k
  end
  return i
end
"""

_RESTORE_META_LUA = (
    """
-- Shared by the scripts that give seqs (KEYS[1] meta hash, KEYS[2] turns zset, KEYS[3] calls
-- hash). A meta hash without 'seq' beside stored turns was evicted (a maxmemory-policy other
-- than noeviction drops single keys): the counter goes on from the newest stored turn, so no
-- seq is given twice and no two histories interleave. idx_n becomes the number of stored turns
-- (the N of the IDF: most turns are indexed), and the times are marked out of order
-- ('ts_unordered': the mark that the cheaper date search relies on went with the hash). The
-- extraction cursor comes back from its copy in the calls hash (written with it by every
-- extraction commit, and as 0 when the conversation begins), at most the newest stored seq;
-- with no copy (the calls hash went too, or the conversation predates the copy) it is the
-- newest stored seq: the job goes on with the turns that come next and never extracts the
-- whole history again. Returns 1 when it restored (2: the cursor had no copy), else 0.
local CURSOR_COPY = '"""
    + CURSOR_COPY_FIELD
    + """'
local function restore_meta()
  if redis.call('HEXISTS', KEYS[1], 'seq') == 1 then return 0 end
  local top = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
  if not top[2] then
    -- a new conversation (or one forgotten): its cursor's copy starts with it
    redis.call('HSET', KEYS[3], CURSOR_COPY, redis.call('HGET', KEYS[1], 'cursor') or '0')
    return 0
  end
  local newest = tonumber(top[2])
  local copy = tonumber(redis.call('HGET', KEYS[3], CURSOR_COPY) or '')
  local cursor, restored = newest, 2
  if copy then cursor, restored = math.min(copy, newest), 1 end
  redis.call('HSET', KEYS[1], 'seq', top[2], 'idx_n', redis.call('ZCARD', KEYS[2]),
             'ts_unordered', 1, 'cursor', cursor)
  return restored
end
"""
)

APPEND_TURNS = (
    """
-- Append turns to a conversation, idempotently on call_id, updating the recall index and the
-- time index.
-- KEYS[1] meta hash, KEYS[2] turns zset, KEYS[3] calls hash, KEYS[4] postings hash
-- KEYS[5] the user's forgets hash (store/forgets.py), KEYS[6] times zset (the time index)
-- KEYS[7..] (optional) the user's index set, then the keys of the conversation's memory set
-- ARGV[1] call_id ("" = no idempotency check)
-- ARGV[2] TTL in seconds, set on every key (KEYS) that exists
-- ARGV[3] now, epoch ms (meta.updated_ms)
-- ARGV[4] postings cap per term
-- ARGV[5] the conversation's forgets field, ARGV[6] the forget token its request read,
-- ARGV[7] a fresh random token (the conversation's first write creates its tokens with it)
-- ARGV[8] number of meta fields written only if absent; then that many field, value pairs
-- then: turns to remove first (a regenerate replaces its old reply), as remove_turns reads
--   them; exactly these seqs go, and only if still stored
-- then: number of seed turns: the first new turns, written only while the conversation is empty
--   (a client's own history seeding a new conversation: concurrent first requests seed it once)
-- then: number of new turns; for each: body (turn JSON without "{"), 1 when indexed
-- then: their terms, as index_turns reads them (positions in the new turns)
-- then (with KEYS[7]): number of members, then the members added to the user's index set
-- Returns {1, first_seq, last_seq, cursor, restored} when written, {0, seq, seq, cursor} when
-- call_id was already stored, {-1, 0, 0, 0} when a forget came after the request's read (nothing
-- written); cursor is meta.cursor, the seq extraction has reached (the post-call hook decides
-- whether extraction is due without another round trip); restored is 1 (2: its cursor had no
-- copy) when the meta hash had
-- been evicted beside stored turns (restore_meta).
"""
    + _POSTINGS_LUA
    + FORGOTTEN_LUA
    + _RESTORE_META_LUA
    + """
if forgotten(KEYS[5], ARGV[5], ARGV[6]) then return {-1, 0, 0, 0} end
local call_id = ARGV[1]
local function cursor() return tonumber(redis.call('HGET', KEYS[1], 'cursor') or '0') end
if call_id ~= '' then
  local seen = redis.call('HGET', KEYS[3], call_id)
  if seen then return {0, tonumber(seen), tonumber(seen), cursor()} end
end
own_tokens(KEYS[5], ARGV[5], ARGV[7])
local restored = restore_meta()
local i = 9
for _ = 1, tonumber(ARGV[8]) do
  redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1])
  i = i + 2
end
i = remove_turns(i)
local timed = times_kept()
local n_seed = tonumber(ARGV[i]); i = i + 1
local n_new = tonumber(ARGV[i]); i = i + 1
local skip_seed = n_seed > 0 and tonumber(redis.call('HGET', KEYS[1], 'seq') or '0') > 0
local first, last, seqs = 0, 0, {}
for j = 1, n_new do
  if not (skip_seed and j <= n_seed) then
    last = redis.call('HINCRBY', KEYS[1], 'seq', 1)
    if first == 0 then first = last end
    seqs[j] = last
    redis.call('ZADD', KEYS[2], last, '{"seq":' .. last .. ',' .. ARGV[i])
    if timed then add_time(last, ARGV[i]) end
    if ARGV[i + 1] == '1' then redis.call('HINCRBY', KEYS[1], 'idx_n', 1) end
  end
  i = i + 2
end
i = index_turns(i, seqs, tonumber(ARGV[4]))
if call_id ~= '' and last > 0 then redis.call('HSET', KEYS[3], call_id, last) end
redis.call('HSET', KEYS[1], 'updated_ms', ARGV[3])
if #KEYS >= 7 then
  local n_members = tonumber(ARGV[i])
  if n_members > 0 then redis.call('SADD', KEYS[7], unpack(ARGV, i + 1, i + n_members)) end
end
for k = 1, #KEYS do redis.call('EXPIRE', KEYS[k], ARGV[2]) end
return {1, first, last, cursor(), restored}
"""
)

DELETE_TURNS = (
    """
-- Delete stored turns of a conversation by seq, with their recall-index and time-index entries.
-- KEYS[1] meta hash, KEYS[2] turns zset, KEYS[3] calls hash, KEYS[4] postings hash
-- KEYS[5] the user's forgets hash (store/forgets.py), KEYS[6] times zset (the time index)
-- ARGV[1] TTL in seconds, set on every key of the conversation that exists
-- ARGV[2] the conversation's forgets field, ARGV[3] the forget token the deleting request read
-- ('' = not checked: a delete asked for now)
-- then: the turns, as remove_turns reads them (each with the terms it was appended with)
-- A seq that is not stored (never, or already deleted) is skipped: its terms are not touched.
-- Returns the number of turns removed, or -1 when a forget came after the request's read
-- (seqs start again after a forget: those seqs may be newer turns).
"""
    + _POSTINGS_LUA
    + FORGOTTEN_LUA
    + """
if forgotten(KEYS[5], ARGV[2], ARGV[3]) then return -1 end
local _, removed = remove_turns(4)
for _, k in ipairs({1, 2, 3, 4, 6}) do redis.call('EXPIRE', KEYS[k], ARGV[1]) end
return removed
"""
)

BEGIN_WRITE = (
    """
-- Start a write too large for one script (issue 9 item 7): decide, reserve and mark; the turns
-- follow in bounded batches (WRITE_TURNS), so no script holds Redis for long.
-- KEYS[1] meta hash, KEYS[2] turns zset, KEYS[3] calls hash, KEYS[4] postings hash
-- KEYS[5] the user's forgets hash (store/forgets.py), KEYS[6] times zset (the time index)
-- KEYS[7] the user's index set: the conversation joins it here, so a forget of the whole user
-- finds it between batches
-- ARGV[1] call_id ("" = no idempotency check)
-- ARGV[2] progress field of meta ("writing:<call id or token>")
-- ARGV[3] TTL in seconds, ARGV[4] now, epoch ms
-- ARGV[5] the conversation's forgets field, ARGV[6] the forget token its request read,
-- ARGV[7] a fresh random token (the conversation's first write creates its tokens with it)
-- ARGV[8] number of meta fields written only if absent; then that many field, value pairs
-- then: turns to remove first, as remove_turns reads them
-- then: number of seed turns, number of turns in all (seed turns first)
-- The seed is skipped unless the conversation is empty now (seq 0). The seqs of every turn
-- to write are reserved here (seq += count), so concurrent first requests seed once, and turns
-- that other requests store meanwhile come after the reserved ones.
-- The progress field holds "<first seq> <seed skipped 0|1> <next turn to write> <epoch ms of the
-- last batch>" (the worker tells an abandoned write by that time; older values lack it).
-- Returns {status, first_seq, last_seq, seed_skipped, next}: status 1 = reserved, write turns
-- from next (0); 2 = this call id's write was begun and not finished: write from next; 0 = this
-- call id is stored already (nothing to do); -1 = a forget came after the request's read.
-- The batches that follow need the progress field, which a forget deletes. A sixth element is 1
-- when the meta hash had been evicted beside stored turns (restore_meta).
"""
    + _POSTINGS_LUA
    + FORGOTTEN_LUA
    + _RESTORE_META_LUA
    + """
if forgotten(KEYS[5], ARGV[5], ARGV[6]) then return {-1, 0, 0, 0, 0} end
local call_id = ARGV[1]
if call_id ~= '' then
  local seen = redis.call('HGET', KEYS[3], call_id)
  if seen then
    local progress = redis.call('HGET', KEYS[1], ARGV[2])
    if progress then
      local first, skipped, nxt = string.match(progress, '^(%d+) (%d) (%d+)')
      return {2, tonumber(first), tonumber(seen), tonumber(skipped), tonumber(nxt)}
    end
    return {0, tonumber(seen), tonumber(seen), 0, 0}
  end
end
own_tokens(KEYS[5], ARGV[5], ARGV[7])
redis.call('SADD', KEYS[7], ARGV[5])
local restored = restore_meta()
local i = 9
for _ = 1, tonumber(ARGV[8]) do
  redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1])
  i = i + 2
end
i = remove_turns(i)
local n_seed = tonumber(ARGV[i])
local n_all = tonumber(ARGV[i + 1])
local skipped = 0
if n_seed > 0 and tonumber(redis.call('HGET', KEYS[1], 'seq') or '0') > 0 then skipped = 1 end
local count = n_all - skipped * n_seed
redis.call('HSET', KEYS[1], 'updated_ms', ARGV[4])
if count <= 0 then
  for k = 1, #KEYS do redis.call('EXPIRE', KEYS[k], ARGV[3]) end
  return {1, 0, 0, skipped, 0, restored}
end
local last = redis.call('HINCRBY', KEYS[1], 'seq', count)
local first = last - count + 1
if call_id ~= '' then redis.call('HSET', KEYS[3], call_id, last) end
redis.call('HSET', KEYS[1], ARGV[2], first .. ' ' .. skipped .. ' 0 ' .. ARGV[4])
for k = 1, #KEYS do redis.call('EXPIRE', KEYS[k], ARGV[3]) end
return {1, first, last, skipped, 0, restored}
"""
)

WRITE_TURNS = (
    """
-- One batch of a write begun by BEGIN_WRITE: turns with their reserved seqs, and their index.
-- KEYS[1] meta hash, KEYS[2] turns zset, KEYS[3] calls hash, KEYS[4] postings hash
-- KEYS[6] times zset (the time index)
-- ARGV[1] progress field, ARGV[2] TTL in seconds, ARGV[3] now, epoch ms, ARGV[4] postings cap
-- ARGV[5] index of the first turn of this batch, ARGV[6] index after its last turn
-- ARGV[7] 1 when this batch ends the write (the progress field is deleted)
-- ARGV[8] the conversation's forgets field, ARGV[9] the forget token the request read
-- (KEYS[5] the user's forgets hash)
-- ARGV[10] number of turns; for each: seq, body (turn JSON without "{"), 1 when indexed
-- then: their terms, as index_turns reads them (positions in this batch)
-- Runs only when the progress field says the write continues at ARGV[5], so a batch repeated
-- (a retry) or a write whose conversation was deleted meanwhile writes nothing.
-- Returns 1 when written, 0 when skipped, -1 when a forget came after the request's read (a
-- forget of the whole user finds no index entry for a conversation still being seeded).
"""
    + _POSTINGS_LUA
    + FORGOTTEN_LUA
    + """
if forgotten(KEYS[5], ARGV[8], ARGV[9]) then return -1 end
local progress = redis.call('HGET', KEYS[1], ARGV[1])
if not progress then return 0 end
local first, skipped, nxt = string.match(progress, '^(%d+) (%d) (%d+)')
if tonumber(nxt) ~= tonumber(ARGV[5]) then return 0 end
local i, seqs = 11, {}
local timed = times_kept()
for j = 1, tonumber(ARGV[10]) do
  local seq = tonumber(ARGV[i])
  seqs[j] = seq
  redis.call('ZADD', KEYS[2], seq, '{"seq":' .. seq .. ',' .. ARGV[i + 1])
  if timed then add_time(seq, ARGV[i + 1]) end
  if ARGV[i + 2] == '1' then redis.call('HINCRBY', KEYS[1], 'idx_n', 1) end
  i = i + 3
end
index_turns(i, seqs, tonumber(ARGV[4]))
if ARGV[7] == '1' then redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], first .. ' ' .. skipped .. ' ' .. ARGV[6] .. ' ' .. ARGV[3])
end
redis.call('HSET', KEYS[1], 'updated_ms', ARGV[3])
for k = 1, #KEYS do redis.call('EXPIRE', KEYS[k], ARGV[2]) end
return 1
"""
)


#: most ARGV one ``unpack`` hands to a command inside :data:`LOAD_STATE` (Lua 5.1's C stack
#: holds 8,000): a longer query reads its postings in slices of this many terms.
LOAD_TERMS_PER_CALL = 1000

LOAD_STATE = f"""
-- Everything a request reads, in one call: every key is in the user's slot (hash tag
-- {{tenant:user}}), so this runs on a Redis Cluster too. Read-only.
-- KEYS[1] the user's forgets hash, KEYS[2] meta hash, KEYS[3] turns zset, KEYS[4] pinned
--   hash, KEYS[5] memories hash (of the conversation's memory set), KEYS[6] postings hash,
--   KEYS[7] the user's index set
-- ARGV[1] how many of the newest turns to read, ARGV[2] '1' to read the user's index,
-- ARGV[3], ARGV[4] the forgets fields (the user's, the conversation's), ARGV[5..] the query's
--   terms, whose postings are read
-- Returns {{forgets values, meta (field, value, ...), the newest turns oldest first, pinned
-- (field, value, ...), memories (field, value, ...), the terms' postings (false when none),
-- the index's members (empty unless asked)}}
local postings = {{}}
for first = 5, #ARGV, {LOAD_TERMS_PER_CALL} do
  local last = math.min(first + {LOAD_TERMS_PER_CALL - 1}, #ARGV)
  local values = redis.call('HMGET', KEYS[6], unpack(ARGV, first, last))
  for i = 1, #values do postings[#postings + 1] = values[i] end
end
local chats = {{}}
if ARGV[2] == '1' then chats = redis.call('SMEMBERS', KEYS[7]) end
return {{
  redis.call('HMGET', KEYS[1], ARGV[3], ARGV[4]),
  redis.call('HGETALL', KEYS[2]),
  redis.call('ZRANGE', KEYS[3], -tonumber(ARGV[1]), -1),
  redis.call('HGETALL', KEYS[4]),
  redis.call('HGETALL', KEYS[5]),
  postings,
  chats,
}}
"""

SEQ_SPANS = """
-- The turns said within spans of time: for each span, how many there are and the seqs of the
-- latest (by time) ARGV[1] of them. Read-only.
-- KEYS[1] turns zset (member '{"seq":<n>,...,"ts":<epoch ms>,...}', score = seq)
-- KEYS[2] times zset, the time index (score = a turn's ts, member = its seq: 4 bytes,
-- big-endian, so that members of one ts sort by seq), KEYS[3] meta hash
-- ARGV[1] most seqs returned per span (the postings cap), then pairs: start ms, end ms (end
-- excluded)
-- While the turns' times are in seq order (no write marked meta 'ts_unordered', the usual case),
-- or in a conversation stored before the index existed (no complete index), the turns' times
-- are binary-searched by rank, O(log n) per span: the span is the seqs from the first turn at
-- or after start to the first at or after end, the newest ARGV[1] of them. Once times are out
-- of order (an import of older lines after newer chat, a write buffered through an outage) and
-- the time index holds every stored turn (as many members as KEYS[1]), a span's turns are
-- found with it whatever their order: ZCOUNT, and ZRANGE BYSCORE of at most ARGV[1] members,
-- O(log n + ARGV[1]) per span (of turns of one ts, the newest seqs).
-- Returns for each span: the number of its turns, the number r of runs, then r pairs first
-- seq, end seq (excluded): runs of consecutive seqs, ascending, holding the returned seqs.
local cap = tonumber(ARGV[1])
local n = redis.call('ZCARD', KEYS[1])
local out = {}
if redis.call('HEXISTS', KEYS[3], 'ts_unordered') == 1 and redis.call('ZCARD', KEYS[2]) == n then
  for i = 2, #ARGV - 1, 2 do
    local count = redis.call('ZCOUNT', KEYS[2], ARGV[i], '(' .. ARGV[i + 1])
    out[#out + 1] = count
    if count == 0 then
      out[#out + 1] = 0
    else
      local found = redis.call('ZRANGE', KEYS[2], '(' .. ARGV[i + 1], ARGV[i], 'BYSCORE', 'REV',
                               'LIMIT', 0, cap)
      -- latest first: reversed, they are ascending when the span's times are in seq order
      -- (the usual case: no sort)
      local k, seqs, sorted = #found, {}, true
      for j = 1, k do
        local a, b, c, d = string.byte(found[j], 1, 4)
        local seq = ((a * 256 + b) * 256 + c) * 256 + d
        seqs[k - j + 1] = seq
        if j > 1 and seq >= seqs[k - j + 2] then sorted = false end
      end
      if not sorted then table.sort(seqs) end
      local at = #out + 1
      out[at] = 0
      local first, last = seqs[1], seqs[1]
      for j = 2, #seqs + 1 do
        local seq = seqs[j]
        if seq ~= last + 1 then
          out[#out + 1] = first
          out[#out + 1] = last + 1
          out[at] = out[at] + 1
          first = seq
        end
        last = seq
      end
    end
  end
  return out
end
local function at(rank)
  local found = redis.call('ZRANGE', KEYS[1], rank, rank, 'WITHSCORES')
  -- '"ts":' cannot occur inside a JSON string (its quotes are escaped), so the first match
  -- is the turn's own field.
  return tonumber(string.match(found[1], '"ts":(%-?%d+)')) or 0, tonumber(found[2])
end
local last = 0
if n > 0 then local _, seq = at(n - 1); last = seq end
local function first_at(t)
  local lo, hi = 0, n
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local ts = at(mid)
    if ts < t then lo = mid + 1 else hi = mid end
  end
  if lo >= n then return last + 1 end
  local _, seq = at(lo)
  return seq
end
for i = 2, #ARGV - 1, 2 do
  local first = first_at(tonumber(ARGV[i]))
  local stop = first_at(tonumber(ARGV[i + 1]))
  if stop > first then
    out[#out + 1] = stop - first
    out[#out + 1] = 1
    out[#out + 1] = math.max(first, stop - cap)
    out[#out + 1] = stop
  else
    out[#out + 1] = 0
    out[#out + 1] = 0
  end
end
return out
"""

#: meta field prefix of a batched write under way (:data:`BEGIN_WRITE`): ``writing:<call id>``.
PROGRESS_PREFIX = "writing:"


def write_progress_ms(meta: Mapping[str, str]) -> list[int]:
    """When each batched write under way in a conversation last made progress (epoch ms), from
    its meta: the time its ``writing:`` field holds (:data:`BEGIN_WRITE`), else (a value written
    before the time was kept) the conversation's ``updated_ms``. Empty when none is under way."""
    out = []
    for name, value in meta.items():
        if name.startswith(PROGRESS_PREFIX):
            parts = value.split()
            at = parts[3] if len(parts) >= 4 else meta.get("updated_ms", "0")
            out.append(int(at) if at.isdigit() else 0)
    return out


#: meta fields read of each of the user's other conversations (``recall_scope: user``).
CHAT_META_FIELDS = ("updated_ms", "namespace", "conversation", "idx_n")

PRUNE_CHATS = """
-- Take conversations that no longer exist (their keys expired, or were deleted) out of the
-- user's index, so that what recall_scope: user reads does not grow with every conversation the
-- user ever had.
-- KEYS[1] the user's index set; KEYS[2..] every key each member names (the conversation's keys
-- and its conversation-scoped memory set), member after member
-- ARGV pairs: a member (c:<c>), the number of its keys in KEYS
-- A member goes only if none of its keys exists (a write creates them with the member, in one
-- script; pinned memories of a conversation-scoped set keep it). Returns how many went.
local gone, k = 0, 2
for i = 1, #ARGV, 2 do
  local n = tonumber(ARGV[i + 1])
  if redis.call('EXISTS', unpack(KEYS, k, k + n - 1)) == 0 then
    gone = gone + redis.call('SREM', KEYS[1], ARGV[i])
  end
  k = k + n
end
return gone
"""

#: most conversations one :data:`PRUNE_CHATS` call looks at (a short script).
PRUNE_BATCH = 200


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

#: most stored turns :data:`LAST_QUESTION` looks at, newest first: an agent's task ~170 tool
#: steps (call, result, reply) back is still found. Measured on this project's machine with
#: 200-character turns: 0.48 ms of Redis time for a scan of 500 that finds nothing, 1.4 ms at
#: 1,000 (``SLOWLOG``); it runs only for a tool step whose stored tail holds no user message.
QUESTION_SCAN_TURNS = 500
#: most bytes of turns :data:`LAST_QUESTION` looks at: an agent's tool turns are up to ~64 KB
#: each as stored, and the script's time grows with the bytes it copies (about 2-3 ms a MB
#: here): the question of a task whose steps are that large is found ~15 large steps back.
QUESTION_SCAN_BYTES = 1_000_000

LAST_QUESTION = """
-- The newest user turn stored before a seq: the question an agent's tool steps work on, when it
-- is older than the tail a request reads. Read-only; pages of 16 members, newest first.
-- KEYS[1] turns zset (member '{"seq":<n>,"role":"<role>",...}', score = seq)
-- ARGV[1] only turns with a lower seq are looked at
-- ARGV[2] most turns looked at, ARGV[3] most bytes of turns looked at (an agent's tool turns
-- are tens of KB each: copying them is what the script's time grows with)
-- Returns the member, or false when none is found within ARGV[2] turns and ARGV[3] bytes.
-- Pages of 16 turns: a page read past the byte budget copies at most 16 more.
local top, left, bytes = '(' .. ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
while left > 0 and bytes > 0 do
  local page = redis.call('ZREVRANGEBYSCORE', KEYS[1], top, '-inf', 'LIMIT', 0, math.min(16, left))
  if #page == 0 then return false end
  for _, member in ipairs(page) do
    if string.find(member, '^{"seq":%d+,"role":"user"') then return member end
    bytes = bytes - #member
  end
  left = left - #page
  top = '(' .. string.match(page[#page], '^{"seq":(%d+)')
end
return false
"""


@dataclass(frozen=True)
class AppendResult:
    """What an append did: ``written`` False means the call id was already stored, or (with
    ``forgotten``) a forget came in between.

    ``cursor`` is the conversation's extraction cursor (meta ``cursor``) as the append found it
    when one script did the write; ``None`` after a batched write (read it with
    :meth:`MemoryStore.cursor` if needed).
    """

    written: bool
    first_seq: int
    last_seq: int
    cursor: int | None = None
    #: nothing was written because a forget of the user or conversation came after the
    #: request's read (:mod:`litellm_memory_hook.store.forgets`)
    forgotten: bool = False
    #: the conversation's meta hash was gone beside stored turns (evicted): the seqs went on
    #: from the newest stored turn (:data:`_RESTORE_META_LUA`); the extraction cursor came
    #: back from its copy in the calls hash
    meta_restored: bool = False
    #: with ``meta_restored``: the cursor had no copy (the calls hash went too) and was set to
    #: the newest stored seq, so no job extracts the whole history again
    cursor_guessed: bool = False


@dataclass(frozen=True)
class DateSeqs:
    """The stored turns said within one date span (:data:`SEQ_SPANS`).

    Attributes:
        df: how many turns the span holds (the date term's document frequency).
        runs: ``(first seq, end seq)`` pairs, end excluded, ascending and disjoint: the seqs of
            the span's latest (by time) ``postings_cap`` turns, as runs of consecutive seqs.
            While the turns' times are in seq order (no ``meta.ts_unordered``), or in a
            conversation without a complete time index, one run from the first turn said at or
            after the span's start to the first said at or after its end (the newest
            ``postings_cap`` seqs of it), found by a binary search over the turns' times.
    """

    df: int = 0
    runs: tuple[tuple[int, int], ...] = ()


@dataclass
class Postings:
    """The index entries read for one query: term -> (df, newest seqs) and N.

    Attributes:
        spans: for each date span asked, the turns said in it.
        chats: the user's index members (``c:<conversation>``, ``ns:<namespace>``), when asked
            (``recall_scope: user``).
    """

    n_docs: int = 0
    df: dict[str, int] = field(default_factory=dict)
    seqs: dict[str, npt.NDArray[np.uint32]] = field(default_factory=dict)
    spans: list[DateSeqs] = field(default_factory=list)
    chats: list[str] = field(default_factory=list)


@dataclass
class ChatPostings:
    """The index entries of one of the user's other conversations, read for a query.

    Attributes:
        keys: the conversation.
        meta: its ``CHAT_META_FIELDS`` (``conversation`` is the raw id, for the chat's label).
        postings: its postings of the query's terms, N and date spans.
    """

    keys: ConversationKeys
    meta: dict[str, str]
    postings: Postings


def unpack_postings(value: bytes) -> tuple[int, npt.NDArray[np.uint32]]:
    """Decode a postings value: (document frequency, seqs ascending as a uint32 array)."""
    count = len(value) // 4
    if count == 0:
        return 0, np.zeros(0, dtype=np.uint32)
    numbers = np.frombuffer(value, dtype=">u4", count=count)
    return int(numbers[0]), numbers[1:]


def _flat(spans: Sequence[tuple[int, int]]) -> list[int]:
    return [int(x) for span in spans for x in span]


def _date_seqs(reply: Sequence[Any]) -> list[DateSeqs]:
    """Decode a :data:`SEQ_SPANS` reply: per span, the count, the number of runs, the runs."""
    numbers = [int(x) for x in reply]
    out: list[DateSeqs] = []
    i = 0
    while i < len(numbers):
        df, n_runs = numbers[i], numbers[i + 1]
        flat = numbers[i + 2 : i + 2 + 2 * n_runs]
        out.append(DateSeqs(df, tuple(zip(flat[::2], flat[1::2], strict=True))))
        i += 2 + 2 * n_runs
    return out


def _int(value: str | None) -> int:
    try:
        return int(value or 0)
    except ValueError:
        return 0


def _meta_of(reply: Sequence[Any]) -> dict[str, str]:
    return {name: _text(v) for name, v in zip(CHAT_META_FIELDS, reply, strict=True) if v}


def _add_postings(postings: Postings, terms: Sequence[str], values: Sequence[Any]) -> None:
    for term, value in zip(terms, values, strict=True):
        if value:
            df, seqs = unpack_postings(value)
            postings.df[term] = df
            postings.seqs[term] = seqs


def _pairs(flat: Sequence[bytes]) -> dict[bytes, bytes]:
    """A hash as Lua's ``HGETALL`` returns it (field, value, field, value, ...) as a dict."""
    return dict(zip(flat[::2], flat[1::2], strict=True))


def _nothing(pipe: Any) -> None:
    """No plain commands (a :meth:`MemoryStore._pipeline` of script calls only)."""


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _in_field_order(items: dict[bytes, bytes]) -> list[str]:
    """Hash values ordered by field name: writers name fields so that this order is creation
    order (zero-padded epoch ms or ULIDs); Redis itself returns a large hash in no order."""
    return [_text(items[name]) for name in sorted(items)]


def _term_args(items: Sequence[IndexedTurn]) -> list[Any]:
    """The index section of a write: the number of distinct terms, then for each the term, a
    count and the 1-based positions of the turns holding it (one field update per term)."""
    groups: dict[str, list[int]] = {}
    for position, item in enumerate(items, 1):
        for term in dict.fromkeys(item.terms):
            groups.setdefault(term, []).append(position)
    args: list[Any] = [len(groups)]
    for term, positions in groups.items():
        args.extend((term, len(positions), *positions))
    return args


def _removal_args(turns: Sequence[IndexedTurn]) -> list[Any]:
    """Turns to remove as the scripts' ``remove_turns`` reads them: each seq with 1 when indexed,
    then each distinct term with the seqs holding it."""
    args: list[Any] = [len(turns)]
    groups: dict[str, list[int]] = {}
    for item in turns:
        args.extend((item.turn.seq, 1 if item.terms else 0))
        for term in dict.fromkeys(item.terms):
            groups.setdefault(term, []).append(item.turn.seq)
    args.append(len(groups))
    for term, seqs in groups.items():
        args.extend((term, len(seqs), *seqs))
    return args


def now_ms() -> int:
    """Wall-clock time in epoch milliseconds."""
    return int(time.time() * 1000)


class MemoryStore:
    """Reads and writes conversations in Redis.

    Args:
        redis: an asyncio client created with ``decode_responses=False`` (postings are binary);
            a Redis Cluster client works too (:mod:`litellm_memory_hook.store.client`).
        ttl_s: retention TTL in seconds, refreshed on every write.
        postings_cap: newest postings kept per term.
        limits: the bounds every appended turn is held to
            (:func:`litellm_memory_hook.core.bounds.bound_turn`).
        batch_turns / batch_terms: most turns / index terms one script writes or deletes.

    Every method raises :class:`StoreError` (wrapping the Redis error) on failure.
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
        self._append = redis.register_script(APPEND_TURNS)
        self._fetch = redis.register_script(FETCH_TURNS)
        self._last_question = redis.register_script(LAST_QUESTION)
        self._spans = redis.register_script(SEQ_SPANS)
        self._load_state = redis.register_script(LOAD_STATE)
        self._delete = redis.register_script(DELETE_TURNS)
        self._begin = redis.register_script(BEGIN_WRITE)
        self._write_batch = redis.register_script(WRITE_TURNS)
        self._prune_chats = redis.register_script(PRUNE_CHATS)

    @classmethod
    def for_settings(cls, redis: aioredis.Redis, settings: MemorySettings) -> MemoryStore:
        """The store of the settings: retention TTL, ``stored_text_chars`` as the text bound."""
        return cls(
            redis,
            ttl_s=settings.retention_s,
            limits=TurnLimits(text_chars=settings.stored_text_chars),
        )

    def _span_calls(
        self, chats: Sequence[ConversationKeys], date_spans: Sequence[tuple[int, int]]
    ) -> list[tuple[Any, Sequence[str], list[int]]]:
        """One :data:`SEQ_SPANS` call per conversation for :meth:`_pipeline` (its turns, time
        index and meta; ARGV: the postings cap, then each span's start and end, ms); none when
        no date is asked."""
        if not date_spans:
            return []
        args = [self.postings_cap, *_flat(date_spans)]
        return [(self._spans, (chat.turns, chat.times, chat.meta), args) for chat in chats]

    async def load(
        self,
        keys: ConversationKeys,
        memory: MemoryKeys,
        *,
        tail: int,
        query_terms: Sequence[str] = (),
        date_spans: Sequence[tuple[int, int]] = (),
        list_chats: bool = False,
    ) -> tuple[ConversationState, Postings]:
        """Read what a request needs in one round trip (every key is in the user's slot).

        Args:
            keys: the conversation.
            memory: the memory set the conversation uses (its pinned and extracted memories).
            tail: how many of the newest turns to read.
            query_terms: recall terms of the new message; their postings are read too.
            date_spans: ``(start ms, end ms)`` of dates the message names; the seqs of the
                turns said in each are found (:data:`SEQ_SPANS`: by a binary search over the
                turns' times, O(log n) per span, while they are in seq order or the
                conversation has no complete time index; else by the time index, O(log n +
                postings_cap), whatever order the times are stored in).
            list_chats: also read the user's index (their other conversations).

        Returns:
            The state (meta, newest turns oldest first, pinned, memories, the forget token)
            and the postings.
        """

        # one script reads it all (a pipeline of six commands cost redis-py twice the CPU);
        # the forget tokens are read first: a forget after them is seen by the write
        names = [
            keys.user_keys.forgets,
            keys.meta,
            keys.turns,
            memory.pinned,
            memory.memories,
            keys.postings,
            keys.user_keys.index,
        ]
        args: list[Any] = [tail, 1 if list_chats else 0, *keys.forget_fields, *query_terms]
        spans: list[Any] = []
        try:
            if date_spans:
                calls = [(self._load_state, names, args), *self._span_calls([keys], date_spans)]
                _, (reply, *spans) = await self._pipeline(_nothing, calls)
            else:
                reply = await self._load_state(keys=names, args=args)
        except RedisError as exc:
            raise StoreError(f"load {keys.ref}: {exc}") from exc
        forgets, meta_items, members, pinned, memories, values, chats = reply
        meta = {_text(k): _text(v) for k, v in _pairs(meta_items).items()}
        turns: list[Turn] = []
        for member in members:
            try:
                turns.append(Turn.from_member(member))
            except ValueError:
                continue
        state = ConversationState(
            meta=meta,
            tail=turns,
            pinned=_in_field_order(_pairs(pinned)),
            memories=_in_field_order(_pairs(memories)),
            forget_token=token_of(forgets),
        )
        postings = Postings(n_docs=int(meta.get("idx_n", "0") or 0))
        if query_terms:
            _add_postings(postings, query_terms, values)
        if list_chats:
            postings.chats = sorted(_text(m) for m in chats)
        if date_spans:
            postings.spans = _date_seqs(spans[0])
        return state, postings

    async def _pipeline(
        self,
        build: Callable[[Any], None],
        calls: Sequence[tuple[Any, Sequence[str], list[int]]] = (),
    ) -> tuple[list[Any], list[Any]]:
        """A non-transactional pipeline of plain commands, plus calls of registered read
        scripts (``(script, keys, args)``, the keys in one slot) in the same round trip.

        The scripts go into the pipeline by EVALSHA (redis-py's script objects would check that
        their scripts exist before every pipeline, one more round trip); a script the server
        does not know (a restarted or new server) fails alone with NOSCRIPT: the scripts are
        loaded and the pipeline runs again. A Redis Cluster client refuses scripts in
        pipelines: there they run after it, each by its own call (routed by its keys).

        Returns:
            The replies of the plain commands, then those of the calls.

        Raises:
            RedisError: any reply error, or a failure of the connection.
        """
        cluster = isinstance(self.redis, RedisCluster)
        for attempt in range(2):
            async with self.redis.pipeline(transaction=False) as pipe:
                build(pipe)
                if not cluster:
                    for script, names, args in calls:
                        pipe.evalsha(script.sha, len(names), *names, *args)
                replies: list[Any] = await pipe.execute(raise_on_error=False)
            errors = [r for r in replies if isinstance(r, Exception)]
            if errors and attempt == 0 and all(isinstance(e, NoScriptError) for e in errors):
                for script in {id(c[0]): c[0] for c in calls}.values():
                    await self.redis.script_load(script.script)
                continue
            if errors:
                raise errors[0]
            if cluster:
                return replies, [await s(keys=list(names), args=args) for s, names, args in calls]
            cut = len(replies) - len(calls)
            return replies[:cut], replies[cut:]
        raise AssertionError("unreachable")  # pragma: no cover

    async def load_chats(
        self,
        user: UserKeys,
        members: Sequence[str],
        *,
        query_terms: Sequence[str],
        date_spans: Sequence[tuple[int, int]] = (),
        max_chats: int,
        accept: Callable[[dict[str, str]], bool] | None = None,
    ) -> list[ChatPostings]:
        """The postings of a query's terms in the user's other conversations (``recall_scope:
        user``): only those terms' postings are read, so the cost does not grow with the
        conversations' length; at most ``max_chats`` conversations, the most recently updated.

        One round trip when the user has at most ``max_chats`` other conversations, else two
        (their ``updated_ms`` first). Every key is in the user's slot.

        Args:
            user: the user's keys.
            members: index members of the other conversations (``c:<conversation>``).
            query_terms: the query's terms.
            date_spans: dates the query names (see :meth:`load`).
            max_chats: most conversations read.
            accept: which conversations may be recalled, given their meta (the same alias
                namespace); ``None`` takes all.

        Returns:
            The conversations read and accepted, most recently updated first.

        Raises:
            StoreError: Redis failed.
        """
        chats = [user.conversation(m.removeprefix("c:")) for m in members if m.startswith("c:")]
        if not chats or max_chats <= 0 or not query_terms:
            return []
        dead: list[ConversationKeys] = []
        try:
            if len(chats) > max_chats:
                async with self.redis.pipeline(transaction=False) as pipe:
                    for chat in chats:
                        pipe.hmget(chat.meta, list(CHAT_META_FIELDS))
                    metas = [_meta_of(r) for r in await pipe.execute()]
                dead = [chat for chat, meta in zip(chats, metas, strict=True) if not meta]
                ranked = sorted(
                    (
                        m
                        for m in zip(chats, metas, strict=True)
                        if m[1] and (accept is None or accept(m[1]))
                    ),
                    key=lambda m: _int(m[1].get("updated_ms")),
                    reverse=True,
                )
                chats = [chat for chat, _ in ranked[:max_chats]]

            def build(pipe: Any) -> None:
                for chat in chats:
                    pipe.hmget(chat.meta, list(CHAT_META_FIELDS))
                    pipe.hmget(chat.postings, list(query_terms))

            calls = self._span_calls(chats, date_spans)
            replies, spans = await self._pipeline(build, calls)
        except RedisError as exc:
            raise StoreError(f"load chats of {user.hash_tag}: {exc}") from exc
        out: list[ChatPostings] = []
        for number, chat in enumerate(chats):
            meta = _meta_of(replies[number * 2])
            if not meta:
                dead.append(chat)
            if not meta.get("idx_n") or (accept is not None and not accept(meta)):
                continue
            postings = Postings(n_docs=_int(meta.get("idx_n")))
            _add_postings(postings, query_terms, replies[number * 2 + 1])
            if date_spans:
                postings.spans = _date_seqs(spans[number])
            out.append(ChatPostings(chat, meta, postings))
        out.sort(key=lambda c: _int(c.meta.get("updated_ms")), reverse=True)
        if dead:
            await self.prune_chats(user, dead)
        return out

    async def prune_chats(self, user: UserKeys, chats: Sequence[ConversationKeys]) -> int:
        """Take these conversations out of the user's index where they no longer exist (none of
        their keys, their conversation-scoped memory set's included, is left: :data:`PRUNE_CHATS`
        checks in Redis), in scripts of at most :data:`PRUNE_BATCH`. Best effort: a Redis
        error is logged and ignored (the next read tries again).

        Returns:
            How many members went.
        """
        gone = 0
        for start in range(0, len(chats), PRUNE_BATCH):
            batch = chats[start : start + PRUNE_BATCH]
            names = [user.index]
            args: list[Any] = []
            for chat in batch:
                own = user.keys_of(chat.index_member)
                names.extend(own)
                args.extend((chat.index_member, len(own)))
            try:
                gone += int(await self._prune_chats(keys=names, args=args))
            except RedisError as exc:
                logger.warning("prune the index of %s: %s", user.hash_tag, exc)
                break
        return gone

    async def fetch_many(
        self, groups: Sequence[tuple[ConversationKeys, Sequence[int]]]
    ) -> list[list[Turn]]:
        """The turns with these seqs in several conversations of one user, in one round trip.

        Returns:
            For each group, its turns in seq order (missing ones skipped).

        Raises:
            StoreError: Redis failed.
        """
        wanted = [(keys, sorted(set(seqs))) for keys, seqs in groups]
        if not any(seqs for _, seqs in wanted):
            return [[] for _ in wanted]

        def build(pipe: Any) -> None:
            for keys, seqs in wanted:
                for seq in seqs:
                    pipe.zrange(keys.turns, seq, seq, byscore=True)

        try:
            replies, _ = await self._pipeline(build)
        except RedisError as exc:
            raise StoreError(f"fetch turns: {exc}") from exc
        found = iter(replies)
        return [[Turn.from_member(m) for _ in seqs for m in next(found)[:1]] for _, seqs in wanted]

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

    async def last_question(self, keys: ConversationKeys, before_seq: int) -> Turn | None:
        """The newest stored user turn with a seq below ``before_seq`` (``LAST_QUESTION``,
        at most ``QUESTION_SCAN_TURNS`` turns and ``QUESTION_SCAN_BYTES`` looked at); ``None``
        when there is none within them.

        Raises:
            StoreError: Redis failed.
        """
        try:
            member = await self._last_question(
                keys=[keys.turns], args=[before_seq, QUESTION_SCAN_TURNS, QUESTION_SCAN_BYTES]
            )
        except RedisError as exc:
            raise StoreError(f"read the last question of {keys.ref}: {exc}") from exc
        if not member:
            return None
        try:
            return Turn.from_member(member)
        except ValueError:
            return None

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
        memory: MemoryKeys | None = None,
        forget_token: str = "",
    ) -> AppendResult:
        """Append turns, idempotent on ``call_id``: one Lua script, or bounded batches.

        Every turn is first held to :attr:`limits` (:func:`~litellm_memory_hook.core.bounds.
        bound_turn`; a turn that changes is re-indexed from what is stored); meta values are cut
        to :data:`~litellm_memory_hook.core.bounds.META_VALUE_CHARS`, a long ``call_id`` is
        hashed to 128 characters.

        A write of at most ``batch_turns`` turns and ``batch_terms`` distinct index terms
        (``replace`` included) is one atomic script: every request's own turn pair. A larger one
        (a long history seeding a new conversation, an import) deletes ``replace`` first (in
        batches), then runs a begin script that decides whether the seed is still wanted (the
        conversation is empty),
        reserves the seqs of every turn it writes and records its progress in the meta field
        ``writing:<call id>``, then batches of at most ``batch_turns`` turns, each a script that
        only runs where the previous one stopped. So the seed is written once under concurrent
        first requests (the reservation makes the conversation non-empty at once), turns other
        requests store meanwhile come after the reserved ones, and a retry with the same
        ``call_id`` after a failure part-way resumes where the write stopped. Until the last
        batch, readers may see the reserved seqs partly written.

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
            memory: the conversation's memory set: when given, a write also does what
                :meth:`touch_user_index` does (the conversation and the set join the user's
                index; the index and the set get the TTL again), in the same script for a
                one-script write (one round trip for a request's turn pair), after the last
                batch otherwise. Nothing is touched when ``call_id`` was already stored.
            forget_token: the forget token the request's read found
                (:attr:`ConversationState.forget_token`): when a forget of the user or the
                conversation came since, nothing is written (``forgotten``); ``""`` checks
                nothing (a request that ran while Redis could not be read).

        Raises:
            StoreError: Redis failed (a batched write may be part-way: append again with the
                same ``call_id`` to finish it).
        """
        # a long history is bounded in slices: other requests run between them
        items = await map_sliced(self._bounded, turns)
        call_id = bound_id(call_id, self.limits.id_chars)
        at = at_ms if at_ms is not None else now_ms()
        meta_items = [(k, bound_meta_value(v)) for k, v in (meta_if_new or {}).items()]
        head: list[Any] = [len(meta_items)]
        for name, value in meta_items:
            head.extend((name, value))
        if not self._fits_one_script((*items, *replace)):
            # deleted first, in batches (deleting again on a retry changes nothing)
            if replace and await self.delete_turns(keys, replace, forget_token=forget_token) < 0:
                return AppendResult(False, 0, 0, forgotten=True)
            result = await self._append_batched(
                keys, items, call_id, [*head, *_removal_args(())], at, seeded, forget_token
            )
            if result.written and memory is not None:
                await self.touch_user_index(keys, memory)
            return result
        head.extend(_removal_args(replace))
        args: list[Any] = [
            call_id,
            self.ttl_s,
            at,
            self.postings_cap,
            keys.index_member,
            forget_token,
            secrets.token_hex(8),
            *head,
            seeded,
            len(items),
        ]
        for item in items:
            args.extend((item.turn.body_json(), 1 if item.terms else 0))
        args.extend(_term_args(items))
        names = self._script_keys(keys)
        if memory is not None:
            names.extend((keys.user_keys.index, *memory.all()))
            args.extend((2, keys.index_member, memory.scope))
        try:
            reply = await self._append(keys=names, args=args)
        except Exception as exc:  # any failure of the client, not only a Redis reply
            raise StoreError(f"append {keys.ref}: {exc}") from exc
        written, first, last, cursor = (int(x) for x in reply[:4])
        if written < 0:
            return AppendResult(False, 0, 0, forgotten=True)
        restored = int(reply[4]) if len(reply) > 4 else 0
        return AppendResult(
            bool(written),
            first,
            last,
            cursor,
            meta_restored=restored >= 1,
            cursor_guessed=restored == 2,
        )

    def _bounded(self, item: IndexedTurn) -> IndexedTurn:
        """The turn within :attr:`limits`; re-indexed when bounding changed it (its name is
        indexed: the terms must be those :func:`stored_terms` gives for what is stored)."""
        turn = bound_turn(item.turn, self.limits)
        if turn is item.turn:
            return item
        return stored_terms(turn) if item.terms else IndexedTurn(turn)

    @staticmethod
    def _script_keys(keys: ConversationKeys) -> list[str]:
        """KEYS[1..6] of every write script: the conversation's meta, turns, calls and postings,
        the user's forgets hash (:mod:`litellm_memory_hook.store.forgets`), the conversation's
        time index."""
        return [
            keys.meta,
            keys.turns,
            keys.calls,
            keys.postings,
            keys.user_keys.forgets,
            keys.times,
        ]

    def _fits_one_script(self, items: Sequence[IndexedTurn]) -> bool:
        if len(items) > self.batch_turns:
            return False
        if sum(len(item.terms) for item in items) <= self.batch_terms:
            return True
        return len({t for item in items for t in item.terms}) <= self.batch_terms

    def _batches(self, items: Sequence[IndexedTurn], start: int) -> Iterator[tuple[int, int]]:
        """``(start, end)`` index ranges of at most ``batch_turns`` turns and ``batch_terms``
        distinct terms each (one index field read and written per distinct term; a turn with
        more terms than that goes alone)."""
        while start < len(items):
            end, terms = start, set[str]()
            while end < len(items) and end - start < self.batch_turns:
                grown = terms.union(items[end].terms)
                if len(grown) > self.batch_terms and end > start:
                    break
                terms = grown
                end += 1
            yield start, end
            start = end

    async def _append_batched(
        self,
        keys: ConversationKeys,
        items: Sequence[IndexedTurn],
        call_id: str,
        head: Sequence[Any],
        at: int,
        seeded: int,
        forget_token: str,
    ) -> AppendResult:
        progress = PROGRESS_PREFIX + (call_id or "t-" + secrets.token_hex(8))
        names = self._script_keys(keys)
        token = [keys.index_member, forget_token, secrets.token_hex(8)]
        try:
            begun = [
                int(x)
                for x in await self._begin(
                    keys=[*names, keys.user_keys.index],
                    args=[call_id, progress, self.ttl_s, at, *token, *head, seeded, len(items)],
                )
            ]
            status, first, last, skipped, start = begun[:5]
            restored = begun[5] if len(begun) > 5 else 0
            if status < 0:
                return AppendResult(False, 0, 0, forgotten=True)
            if status == 0:
                return AppendResult(False, first, last)
            todo = items[seeded:] if skipped else items
            if last == 0:
                return AppendResult(
                    True, 0, 0, meta_restored=restored >= 1, cursor_guessed=restored == 2
                )
            for begin, end in self._batches(todo, start):
                args: list[Any] = [
                    progress,
                    self.ttl_s,
                    at,
                    self.postings_cap,
                    begin,
                    end,
                    1 if end == len(todo) else 0,
                ]
                args.extend((keys.index_member, forget_token, end - begin))
                for offset in range(begin, end):
                    item = todo[offset]
                    args.extend((first + offset, item.turn.body_json(), 1 if item.terms else 0))
                args.extend(_term_args(todo[begin:end]))
                done = int(await self._write_batch(keys=names, args=args))
                if done < 0:
                    return AppendResult(False, 0, 0, forgotten=True)
                if not done:
                    # Another run of this call id went on (or the conversation was deleted).
                    return AppendResult(False, first, last)
        except Exception as exc:  # any failure of the client, not only a Redis reply
            raise StoreError(f"append {keys.ref}: {exc}") from exc
        return AppendResult(
            True, first, last, meta_restored=restored >= 1, cursor_guessed=restored == 2
        )

    async def delete_turns(
        self, keys: ConversationKeys, turns: Sequence[IndexedTurn], *, forget_token: str = ""
    ) -> int:
        """Delete stored turns by seq and their recall-index entries, in scripts of at most
        ``batch_turns`` turns and ``batch_terms`` terms (each batch atomic).

        Each turn leaves the ``turns`` sorted set; each of its terms gets ``df - 1`` (the field is
        deleted when that reaches 0) and loses the turn's seq from its postings list when the seq
        is there; ``meta.idx_n`` drops by one for each indexed turn (one with terms). Seqs that are
        not stored (0, never written, already deleted) are skipped, so a repeated call changes
        nothing. The ``calls`` hash is left alone. Every key of the conversation gets the
        retention TTL again, in the same script, so they still expire together.

        Guarantee (``turns`` must carry the terms they were appended with, which
        :func:`litellm_memory_hook.core.indexing.stored_terms` gives for any stored turn): the
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
            forget_token: the forget token of the read that chose these turns (``""``: a delete
                asked for now, not checked).

        Returns:
            How many turns were removed (stored turns among ``turns``); -1 when a forget came
            after that read (nothing removed: seqs start again after a forget).

        Raises:
            StoreError: Redis failed (batches before the failing one stay done; calling again
                finishes the job, as deleting is idempotent).
        """
        seen: set[int] = set()
        unique: list[IndexedTurn] = []
        for item in turns:
            seq = item.turn.seq
            if seq <= 0 or seq in seen:
                continue
            seen.add(seq)
            unique.append(item)
        removed = 0
        names = self._script_keys(keys)
        for start, end in self._batches(unique, 0):
            args: list[Any] = [
                self.ttl_s,
                keys.index_member,
                forget_token,
                *_removal_args(unique[start:end]),
            ]
            try:
                done = int(await self._delete(keys=names, args=args))
            except RedisError as exc:
                raise StoreError(f"delete turns {keys.ref}: {exc}") from exc
            if done < 0:
                return -1
            removed += done
        return removed

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

    async def cursor(self, keys: ConversationKeys) -> int:
        """The seq the conversation's extraction has reached (0 when none yet)."""
        try:
            return int(await self.redis.hget(keys.meta, "cursor") or 0)
        except RedisError as exc:
            raise StoreError(f"cursor {keys.ref}: {exc}") from exc

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
