-- Delete a lease only if this worker holds it.
-- KEYS[1] the lease key
-- ARGV[1] the worker id
-- Returns 1 when released, else 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
