-- Every item, tombstone and the version of a memory set, read at one point in time. A script
-- that calls no write command runs while Redis refuses writes (maxmemory reached under
-- noeviction), where every command queued in a MULTI is refused with OOM.
-- KEYS[1] pinned, KEYS[2] memories, KEYS[3] tombstones, KEYS[4] state (hashes of one slot)
-- Returns {pinned fields and values, memories ..., tombstones ..., version or nil}.
return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2]),
        redis.call('HGETALL', KEYS[3]), redis.call('HGET', KEYS[4], 'version')}
