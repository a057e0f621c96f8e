-- Replace extracted memories, summary and cursor if nothing changed them since the job read.
-- KEYS[1] mstate hash, KEYS[2] conversation meta hash, KEYS[3] memories hash,
-- KEYS[4] pinned hash, KEYS[5] tombs hash (the last two only get the TTL again),
-- KEYS[6] the user's forgets hash (store/forgets.py; no TTL given), KEYS[7] the user's index
-- set (the memory set's member, ARGV[10], is added again and the set gets the TTL),
-- KEYS[8] the memory set's history list (store/memory_history.py), KEYS[9] the conversation's
-- calls hash (its field ARGV[12] keeps a copy of the cursor: an evicted meta hash gets it back)
-- ARGV[1] version read, ARGV[2] cursor read, ARGV[3] TTL seconds, ARGV[4] new cursor,
-- ARGV[5] now (epoch ms), ARGV[6] "1" to write the summary, ARGV[7] the summary,
-- ARGV[8] the conversation's forgets field, ARGV[9] the forget token the job read,
-- ARGV[10] the memory set's member in the user's index, ARGV[11] most history entries kept,
-- ARGV[12] the calls hash's field of the cursor's copy,
-- then the number of ids to delete and the ids, then the number of items to add and for each
-- its id and text, then the number of history entries and the entries (JSON, oldest first:
-- each is pushed at the head, so the newest ends first).
-- Returns 1 when written, 0 when the version or the cursor changed or a forget came after the
-- job's read (a first extraction reads version and cursor 0, as a forgotten conversation
-- has them): nothing written.

-- @include forgotten

if forgotten(KEYS[6], ARGV[8], ARGV[9]) then return 0 end
local version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
local cursor = tonumber(redis.call('HGET', KEYS[2], 'cursor') or '0')
if version ~= tonumber(ARGV[1]) or cursor ~= tonumber(ARGV[2]) then return 0 end
local i = 13
local n_delete = tonumber(ARGV[i]); i = i + 1
for _ = 1, n_delete do redis.call('HDEL', KEYS[3], ARGV[i]); i = i + 1 end
local n_add = tonumber(ARGV[i]); i = i + 1
for _ = 1, n_add do redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1]); i = i + 2 end
local n_history = tonumber(ARGV[i]); i = i + 1
for _ = 1, n_history do redis.call('LPUSH', KEYS[8], ARGV[i]); i = i + 1 end
if n_history > 0 then redis.call('LTRIM', KEYS[8], 0, tonumber(ARGV[11]) - 1) end
redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('HSET', KEYS[2], 'cursor', ARGV[4], 'extracted_ms', ARGV[5])
redis.call('HSET', KEYS[9], ARGV[12], ARGV[4])
if ARGV[6] == '1' then redis.call('HSET', KEYS[2], 'summary', ARGV[7]) end
redis.call('SADD', KEYS[7], ARGV[10])
for _, k in ipairs({1, 2, 3, 4, 5, 7, 8, 9}) do redis.call('EXPIRE', KEYS[k], ARGV[3]) end
return 1
