-- Delete an item; for an extracted memory, leave a tombstone so it is not extracted again.
-- KEYS[1] the hash (pinned or memories), KEYS[2] mstate hash, KEYS[3] tombs hash,
-- KEYS[4] the user's index set
-- ARGV[1] id, ARGV[2] tombstone field ("" = none), ARGV[3] now (epoch ms), ARGV[4] TTL seconds,
-- ARGV[5] the set's member in the user's index
-- Returns the new version, or -1 when the id is not there.
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return -1 end
redis.call('SADD', KEYS[4], ARGV[5])
if ARGV[2] ~= '' then redis.call('HSET', KEYS[3], ARGV[2], ARGV[3]) end
local v = redis.call('HINCRBY', KEYS[2], 'version', 1)
for k = 1, #KEYS do redis.call('EXPIRE', KEYS[k], ARGV[4]) end
return v
