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

-- @include postings
-- @include time_index
-- @include turn_index
-- @include forgotten
-- @include restore_meta

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
    add_time(last, ARGV[i])
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
