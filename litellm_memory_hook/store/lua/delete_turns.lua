-- Delete stored turns of a conversation by seq, with their recall-index and time-index entries.
-- KEYS[1] meta hash, KEYS[2] turns zset, KEYS[3] calls hash, KEYS[4] postings hash
-- KEYS[5] the user's forgets hash (store/forgets.py), KEYS[6] times zset (the time index)
-- ARGV[1] TTL in seconds, set on every key of the conversation that exists
-- ARGV[2] the conversation's forgets field, ARGV[3] the forget token the deleting request read
-- ('' = not checked: a delete asked for now)
-- then: the turns, as remove_turns reads them (each with the terms it was appended with)
-- A seq that is not stored (never, or already deleted) is skipped: its terms are not touched.
-- Returns the number of turns removed, or -1 when a forget came after the request's read
-- (seqs start again after a forget: those seqs may be newer turns).

-- @include postings
-- @include time_index
-- @include turn_index
-- @include forgotten

if forgotten(KEYS[5], ARGV[2], ARGV[3]) then return -1 end
local _, removed = remove_turns(4)
for _, k in ipairs({1, 2, 3, 4, 6}) do redis.call('EXPIRE', KEYS[k], ARGV[1]) end
return removed
