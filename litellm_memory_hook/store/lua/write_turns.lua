-- One batch of a write begun by begin_write.lua: turns with their reserved seqs, and their
-- index.
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

-- @include postings
-- @include time_index
-- @include turn_index
-- @include forgotten

if forgotten(KEYS[5], ARGV[8], ARGV[9]) then return -1 end
local progress = redis.call('HGET', KEYS[1], ARGV[1])
if not progress then return 0 end
local first, skipped, nxt = string.match(progress, '^(%d+) (%d) (%d+)')
if tonumber(nxt) ~= tonumber(ARGV[5]) then return 0 end
local i, seqs = 11, {}
times_mode()
for j = 1, tonumber(ARGV[10]) do
  local seq = tonumber(ARGV[i])
  seqs[j] = seq
  redis.call('ZADD', KEYS[2], seq, '{"seq":' .. seq .. ',' .. ARGV[i + 1])
  add_time(seq, ARGV[i + 1])
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
