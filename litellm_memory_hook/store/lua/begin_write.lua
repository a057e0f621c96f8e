-- Start a write too large for one script (issue 9 item 7): decide, reserve and mark; the turns
-- follow in bounded batches (write_turns.lua), so no script holds Redis for long.
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

-- @include postings
-- @include time_index
-- @include turn_index
-- @include forgotten
-- @include restore_meta

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
