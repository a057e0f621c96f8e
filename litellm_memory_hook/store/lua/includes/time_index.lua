-- Included by the scripts that store and remove turns (enc comes from postings).
-- @include postings

-- The time index, KEYS[6]: score = a stored turn's ts, member = its seq as enc gives it (4 bytes,
-- big-endian, so members of one ts sort by seq, and each takes Redis's smallest string
-- allocation whatever the seq). It is kept in one of two forms:
-- * runs (meta 'truns', every conversation begun since): an entry for each turn that starts a
--   run, i.e. the first stored turn and each stored turn said before the stored turn just before
--   it (in seq order). Between two entries the stored turns' times go up with their seqs, so a
--   date is found by a binary search in each run (seq_spans.lua). A conversation said in order
--   has one entry; an import of older lines after newer chat adds two. Past RUNS_MAX entries
--   (times out of order again and again) the index turns to the full form, DENSIFY_TURNS
--   stored turns a script: meanwhile 'truns' is 'f<seq>', every stored turn below <seq> and
--   every turn stored since has an entry, and the index is still read as runs.
-- * full: an entry for every stored turn, kept so while it holds every stored turn (as many
--   members as the turns zset KEYS[2]); an older version made every index so.
-- A conversation stored before the index existed has none, and its writes add none (seq_spans.lua
-- then binary-searches the turns' own times, as before the index), until it is empty again;
-- so does an index of the full form that misses turns (an older version wrote them).
-- RUNS is the meta field of the run form.
local RUNS = 'truns'
local RUNS_MAX = 32
local DENSIFY_TURNS = 400
local DENSIFY_BYTES = 1000000
local times_form
-- Give the stored turns from seq on an entry each, at most DENSIFY_TURNS of them and about
-- DENSIFY_BYTES of turns read (pages of 50); the form is full once none is left.
local function densify(from)
  local turns, bytes = 0, 0
  while turns < DENSIFY_TURNS and bytes < DENSIFY_BYTES do
    local page = redis.call('ZRANGE', KEYS[2], from, '+inf', 'BYSCORE', 'LIMIT', 0, 50,
                            'WITHSCORES')
    local args = {}
    for j = 1, #page, 2 do
      args[#args + 1] = string.match(page[j], '"ts":(%-?%d+)') or '0'
      args[#args + 1] = enc(tonumber(page[j + 1]))
      bytes = bytes + #page[j]
    end
    if #args > 0 then redis.call('ZADD', KEYS[6], unpack(args)) end
    turns = turns + #page / 2
    if #page < 100 then
      redis.call('HDEL', KEYS[1], RUNS)
      return 'full'
    end
    from = tonumber(page[#page]) + 1
  end
  redis.call('HSET', KEYS[1], RUNS, 'f' .. from)
  return 'dense'
end
-- The form this script keeps the index in, decided before its first change of the turns:
-- 'runs', 'dense' (turning to full: a step is taken here), 'full' or 'none' (see above), or
-- 'new' for a conversation without turns, whose first stored turn starts the run form
-- (add_time).
local function times_mode()
  if times_form then return times_form end
  local n = redis.call('ZCARD', KEYS[2])
  local runs = redis.call('HGET', KEYS[1], RUNS)
  if n == 0 then
    times_form = 'new'
  elseif runs then
    times_form = 'runs'
    if string.sub(runs, 1, 1) == 'f' then times_form = densify(tonumber(string.sub(runs, 2))) end
  elseif redis.call('ZCARD', KEYS[6]) == n then
    times_form = 'full'
  else
    times_form = 'none'
  end
  return times_form
end
-- The ts of a turn body, as written ('"ts":' cannot occur inside a JSON string: its quotes are
-- escaped, so the first match is the turn's own field); '0' when it has none.
local function body_ts(body)
  return string.match(body, '"ts":(%-?%d+)') or '0'
end
-- The stored turn next to seq in seq order (range '(seq', '+inf' or '(seq', '-inf' with REV):
-- its ts and seq, or nil when there is none.
local function neighbour(range_from, range_to, rev)
  local found
  if rev then
    found = redis.call('ZRANGE', KEYS[2], range_from, range_to, 'BYSCORE', 'REV', 'LIMIT', 0, 1,
                       'WITHSCORES')
  else
    found = redis.call('ZRANGE', KEYS[2], range_from, range_to, 'BYSCORE', 'LIMIT', 0, 1,
                       'WITHSCORES')
  end
  if found[1] then return tonumber(body_ts(found[1])), tonumber(found[2]) end
  return nil
end
-- Run form: the stored turn seq (said at ts), whose stored turn before it was said at before_ts
-- (nil: none), gets an entry when it starts a run; one that does not loses its entry, unless
-- the index is turning to full ('dense').
local function settle(seq, ts, before_ts)
  if before_ts == nil or before_ts > ts then
    redis.call('ZADD', KEYS[6], ts, enc(seq))
  elseif times_form == 'runs' then
    redis.call('ZREM', KEYS[6], enc(seq))
  end
end
-- Add a just stored turn (seq, body) to the time index; a turn whose ts is out of seq order
-- with its stored neighbours (said before the turn stored before it, or after the one stored
-- after it) marks the conversation's times as out of order: meta 'ts_unordered' = 1, which
-- seq_spans.lua reads (a conversation in order keeps the cheaper binary search over the turns).
-- The mark stays until the conversation is deleted (a removal never unsorts times).
local function add_time(seq, body)
  local mode = times_mode()
  if mode == 'none' then return end
  if mode == 'new' then
    -- an index left without turns (its turns evicted) goes
    redis.call('DEL', KEYS[6])
    redis.call('HSET', KEYS[1], RUNS, 1)
    times_form, mode = 'runs', 'runs'
  end
  local ts = body_ts(body)
  local t = tonumber(ts)
  if mode ~= 'runs' then
    redis.call('ZADD', KEYS[6], ts, enc(seq))
    if mode == 'full' and redis.call('HEXISTS', KEYS[1], 'ts_unordered') == 1 then return end
  end
  local before = neighbour('(' .. seq, '-inf', true)
  local after, after_seq = neighbour('(' .. seq, '+inf', false)
  if mode ~= 'full' then
    if mode == 'runs' then settle(seq, t, before) end
    if after then settle(after_seq, after, t) end
    if mode == 'runs' and redis.call('ZCARD', KEYS[6]) > RUNS_MAX then
      -- times out of order again and again: the index turns to the full form, from the start
      redis.call('HSET', KEYS[1], RUNS, 'f0')
      times_form = 'dense'
    end
  end
  if (before and before > t) or (after and after < t) then
    redis.call('HSET', KEYS[1], 'ts_unordered', 1)
  end
end
-- Take a turn that just left KEYS[2] out of the time index (run form: the stored turn after it
-- may now start a run, or join the one before).
local function drop_time(seq)
  redis.call('ZREM', KEYS[6], enc(seq))
  local mode = times_mode()
  if mode ~= 'runs' and mode ~= 'dense' then return end
  local after, after_seq = neighbour('(' .. seq, '+inf', false)
  if after then settle(after_seq, after, (neighbour('(' .. seq, '-inf', true))) end
end
