-- Turns in and out of both indexes (included by the scripts that store and remove turns): they
-- read their ARGV from a position, so each script places them where it needs them.
-- @include postings
-- @include time_index

-- Remove listed turns, reading ARGV from position i: the number of turns, then for each its
-- seq and 1 when it is indexed (has terms); then the number of terms, then for each the term,
-- a count k and k seqs of listed turns holding it. Only turns still stored are removed, and
-- only they leave the index (KEYS[1] meta, KEYS[2] turns, KEYS[4] postings, KEYS[6] times).
-- Returns the next position and the number of turns removed.
local function remove_turns(i)
  times_mode()
  local removed, gone = 0, {}
  local n = tonumber(ARGV[i]); i = i + 1
  for _ = 1, n do
    local seq = tonumber(ARGV[i])
    if redis.call('ZREMRANGEBYSCORE', KEYS[2], seq, seq) > 0 then
      drop_time(seq)
      removed = removed + 1
      gone[seq] = true
      if ARGV[i + 1] == '1' then redis.call('HINCRBY', KEYS[1], 'idx_n', -1) end
    end
    i = i + 2
  end
  local n_terms = tonumber(ARGV[i]); i = i + 1
  for _ = 1, n_terms do
    local term, k = ARGV[i], tonumber(ARGV[i + 1]); i = i + 2
    local seqs = {}
    for t = i, i + k - 1 do
      local seq = tonumber(ARGV[t])
      if gone[seq] then seqs[#seqs + 1] = seq end
    end
    if #seqs > 0 then remove_postings(KEYS[4], term, seqs) end
    i = i + k
  end
  return i, removed
end
-- Index new turns, reading ARGV from position i: the number of terms, then for each the term,
-- a count k and k positions (1-based, ascending) of turns in this script holding it; seqs[p]
-- is the seq the turn at position p was written with (nil: not written). Returns the next
-- position.
local function index_turns(i, seqs, cap)
  local n_terms = tonumber(ARGV[i]); i = i + 1
  for _ = 1, n_terms do
    local term, k = ARGV[i], tonumber(ARGV[i + 1]); i = i + 2
    local add = {}
    for t = i, i + k - 1 do
      local seq = seqs[tonumber(ARGV[t])]
      if seq then add[#add + 1] = seq end
    end
    if #add > 0 then add_postings(KEYS[4], term, add, cap) end
    i = i + k
  end
  return i
end
