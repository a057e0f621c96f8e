-- Add a pinned memory unless the set holds the maximum already.
-- KEYS[1] pinned hash, KEYS[2] mstate hash, KEYS[3] memories hash, KEYS[4] tombs hash,
-- KEYS[5] the user's index set
-- ARGV[1] id, ARGV[2] text, ARGV[3] most pinned memories, ARGV[4] TTL seconds,
-- ARGV[5] the set's member in the user's index (its scope)
-- Returns the new version, or -1 when the set is full.
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SADD', KEYS[5], ARGV[5])
local v = redis.call('HINCRBY', KEYS[2], 'version', 1)
for k = 1, #KEYS do redis.call('EXPIRE', KEYS[k], ARGV[4]) end
return v
