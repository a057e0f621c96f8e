-- Included by the scripts that store and remove turns (enc comes from postings).
-- @include postings

-- The time index, KEYS[6] (score = a turn's ts, member = its seq as enc gives it: 4 bytes,
-- big-endian, so members of one ts sort by seq, and each takes Redis's smallest string
-- allocation whatever the seq): kept only while it holds
-- every stored turn, i.e. has as many members as the turns zset KEYS[2] (both 0 in a new
-- conversation). A conversation stored before the index existed has none, and its writes add
-- none (seq_spans.lua then binary-searches the turns' own times, as before the index), until it is
-- empty again. Turns leave the index wherever they leave KEYS[2].
local function times_kept()
  return redis.call('ZCARD', KEYS[6]) == redis.call('ZCARD', KEYS[2])
end
-- The ts of a turn body, as written ('"ts":' cannot occur inside a JSON string: its quotes are
-- escaped, so the first match is the turn's own field); '0' when it has none.
local function body_ts(body)
  return string.match(body, '"ts":(%-?%d+)') or '0'
end
-- The ts of the stored turn next to seq in seq order (range '(seq', '+inf' or '(seq', '-inf'
-- with REV), or nil when there is none.
local function neighbour_ts(range_from, range_to, rev)
  local found
  if rev then
    found = redis.call('ZRANGE', KEYS[2], range_from, range_to, 'BYSCORE', 'REV', 'LIMIT', 0, 1)
  else
    found = redis.call('ZRANGE', KEYS[2], range_from, range_to, 'BYSCORE', 'LIMIT', 0, 1)
  end
  if found[1] then return tonumber(body_ts(found[1])) end
  return nil
end
-- Add a just stored turn (seq, body) to the time index; a turn whose ts is out of seq order
-- with its stored neighbours (said before the turn stored before it, or after the one stored
-- after it) marks the conversation's times as out of order: meta 'ts_unordered' = 1, which
-- seq_spans.lua reads (a conversation in order keeps the cheaper binary search over the turns).
-- The mark stays until the conversation is deleted (a removal never unsorts times).
local function add_time(seq, body)
  local ts = body_ts(body)
  redis.call('ZADD', KEYS[6], ts, enc(seq))
  if redis.call('HEXISTS', KEYS[1], 'ts_unordered') == 1 then return end
  local t = tonumber(ts)
  local before = neighbour_ts('(' .. seq, '-inf', true)
  local after = neighbour_ts('(' .. seq, '+inf', false)
  if (before and before > t) or (after and after < t) then
    redis.call('HSET', KEYS[1], 'ts_unordered', 1)
  end
end
