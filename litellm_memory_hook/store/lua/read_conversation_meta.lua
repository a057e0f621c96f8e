-- A conversation's meta and calls hashes, read at one point in time (no write: it runs while
-- Redis refuses writes, where every command queued in a MULTI is refused).
-- KEYS[1] meta, KEYS[2] calls (hashes of one slot)
-- Returns {meta fields and values, calls fields and values}.
return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2])}
