-- Included by the scripts that give seqs (KEYS[1] meta hash, KEYS[2] turns zset, KEYS[3] calls
-- hash, KEYS[6] times zset). A meta hash without 'seq' beside stored turns was evicted (a
-- maxmemory-policy other than noeviction drops single keys): the counter goes on from the
-- newest stored turn, so no seq is given twice and no two histories interleave. idx_n becomes
-- the number of stored turns (the N of the IDF: most turns are indexed), and the times are
-- marked out of order
-- ('ts_unordered': the mark that the cheaper date search relies on went with the hash). The
-- extraction cursor comes back from its copy in the calls hash (written with it by every
-- extraction commit, and as 0 when the conversation begins), at most the newest stored seq;
-- with no copy (the calls hash went too, or the conversation predates the copy) it is the
-- newest stored seq: the job goes on with the turns that come next and never extracts the
-- whole history again. The time index's form comes back from its size (see below). Returns 1
-- when it restored (2: the cursor had no copy), else 0.
-- CURSOR_COPY is store/keys.py's CURSOR_COPY_FIELD.
local CURSOR_COPY = ':cursor'
local function restore_meta()
  if redis.call('HEXISTS', KEYS[1], 'seq') == 1 then return 0 end
  local top = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
  if not top[2] then
    -- a new conversation (or one forgotten): its cursor's copy starts with it
    redis.call('HSET', KEYS[3], CURSOR_COPY, redis.call('HGET', KEYS[1], 'cursor') or '0')
    return 0
  end
  local newest = tonumber(top[2])
  local copy = tonumber(redis.call('HGET', KEYS[3], CURSOR_COPY) or '')
  local cursor, restored = newest, 2
  if copy then cursor, restored = math.min(copy, newest), 1 end
  redis.call('HSET', KEYS[1], 'seq', top[2], 'idx_n', redis.call('ZCARD', KEYS[2]),
             'ts_unordered', 1, 'cursor', cursor)
  -- a time index (KEYS[6]) with fewer entries than turns is of the run form ('truns', RUNS in
  -- time_index.lua; or an older version's full index missing turns, read as runs too); one as
  -- large as the turns is exact read as the full form
  local entries = redis.call('ZCARD', KEYS[6])
  if entries > 0 and entries < redis.call('ZCARD', KEYS[2]) then
    redis.call('HSET', KEYS[1], 'truns', 1)
  end
  return restored
end
