-- Everything a request reads, in one call: every key is in the user's slot (hash tag
-- {tenant:user}), so this runs on a Redis Cluster too. Read-only.
-- KEYS[1] the user's forgets hash, KEYS[2] meta hash, KEYS[3] turns zset, KEYS[4] pinned
--   hash, KEYS[5] memories hash (of the conversation's memory set), KEYS[6] postings hash,
--   KEYS[7] the user's index set
-- ARGV[1] how many of the newest turns to read, ARGV[2] '1' to read the user's index,
-- ARGV[3], ARGV[4] the forgets fields (the user's, the conversation's), ARGV[5..] the query's
--   terms, whose postings are read
-- Returns {forgets values, meta (field, value, ...), the newest turns oldest first, pinned
-- (field, value, ...), memories (field, value, ...), the terms' postings (false when none),
-- the index's members (empty unless asked)}
-- The terms are read 1000 at a time (LOAD_TERMS_PER_CALL in store/reads.py): unpack hands
-- them to HMGET on Lua's C stack, which holds 8,000.
local postings = {}
for first = 5, #ARGV, 1000 do
  local last = math.min(first + 999, #ARGV)
  local values = redis.call('HMGET', KEYS[6], unpack(ARGV, first, last))
  for i = 1, #values do postings[#postings + 1] = values[i] end
end
local chats = {}
if ARGV[2] == '1' then chats = redis.call('SMEMBERS', KEYS[7]) end
return {
  redis.call('HMGET', KEYS[1], ARGV[3], ARGV[4]),
  redis.call('HGETALL', KEYS[2]),
  redis.call('ZRANGE', KEYS[3], -tonumber(ARGV[1]), -1),
  redis.call('HGETALL', KEYS[4]),
  redis.call('HGETALL', KEYS[5]),
  postings,
  chats,
}
