-- Replace the text of an existing item.
-- KEYS[1] the hash (pinned), KEYS[2] mstate hash, KEYS[3] the user's index set
-- ARGV[1] id, ARGV[2] text, ARGV[3] TTL seconds, ARGV[4] the set's member in the user's index
-- Returns the new version, or -1 when the id is not there.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SADD', KEYS[3], ARGV[4])
local v = redis.call('HINCRBY', KEYS[2], 'version', 1)
for k = 1, #KEYS do redis.call('EXPIRE', KEYS[k], ARGV[3]) end
return v
