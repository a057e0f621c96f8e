-- Put a removed memory back, exactly as it was, and take its entry out of the history.
-- KEYS[1] history list, KEYS[2] memories hash, KEYS[3] mstate hash, KEYS[4] tombs hash,
-- KEYS[5] pinned hash (TTL only), KEYS[6] the user's index set
-- ARGV[1] the entry as stored, ARGV[2] the memory's id, ARGV[3] its text, ARGV[4] its fact
-- hash (a tombstone of it is removed), ARGV[5] most memories, ARGV[6] TTL seconds,
-- ARGV[7] the set's member in the user's index
-- Returns the new version; -1 when the entry is gone, -2 when the id is stored, -3 when the
-- set holds the most memories already. Nothing is written unless it returns a version.
if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 1 then return -2 end
if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[5]) then return -3 end
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 0 then return -1 end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('HDEL', KEYS[4], ARGV[4])
redis.call('SADD', KEYS[6], ARGV[7])
local v = redis.call('HINCRBY', KEYS[3], 'version', 1)
for k = 1, #KEYS do redis.call('EXPIRE', KEYS[k], ARGV[6]) end
return v
