-- The turns said within spans of time: for each span, how many there are and the seqs of the
-- latest (by time) ARGV[1] of them. Read-only.
-- KEYS[1] turns zset (member '{"seq":<n>,...,"ts":<epoch ms>,...}', score = seq)
-- KEYS[2] times zset, the time index (score = a turn's ts, member = its seq: 4 bytes,
-- big-endian, so that members of one ts sort by seq; store/lua/includes/time_index.lua),
-- KEYS[3] meta hash
-- ARGV[1] most seqs returned per span (the postings cap), then pairs: start ms, end ms (end
-- excluded)
-- While the turns' times are in seq order (no write marked meta 'ts_unordered', the usual case),
-- or in a conversation stored before the index existed (no index, or a full one missing turns),
-- the turns' times are binary-searched by rank, O(log n) per span: the span is the seqs from the
-- first turn at or after start to the first at or after end, the newest ARGV[1] of them. Once
-- times are out of order (an import of older lines after newer chat, a write buffered through an
-- outage), a span's turns are found whatever their order:
-- * with an index of the full form holding every stored turn (as many members as KEYS[1]):
--   ZCOUNT, and ZRANGE BYSCORE of at most ARGV[1] members, O(log n + ARGV[1]) per span (of turns
--   of one ts, the newest seqs);
-- * with one of the run form (meta 'truns'): in each run said before the span's end (its turns'
--   times go up with their seqs), a binary search by rank for the span's turns, O(r log n) per
--   span for r runs; their seqs are read from the turns, and when more than ARGV[1], the latest
--   ARGV[1] by time (then seq) of them.
-- Returns for each span: the number of its turns, the number r of runs, then r pairs first
-- seq, end seq (excluded): runs of consecutive seqs, ascending, holding the returned seqs.
local cap = tonumber(ARGV[1])
local n = redis.call('ZCARD', KEYS[1])
local out = {}
-- Append the span's count and the runs of consecutive seqs of seqs (ascending, distinct).
local function put_runs(count, seqs)
  out[#out + 1] = count
  local at = #out + 1
  out[at] = 0
  if #seqs == 0 then return end
  local first, last = seqs[1], seqs[1]
  for j = 2, #seqs + 1 do
    local seq = seqs[j]
    if seq ~= last + 1 then
      out[#out + 1] = first
      out[#out + 1] = last + 1
      out[at] = out[at] + 1
      first = seq
    end
    last = seq
  end
end
local function dec(s)
  local a, b, c, d = string.byte(s, 1, 4)
  return ((a * 256 + b) * 256 + c) * 256 + d
end
local unordered = redis.call('HEXISTS', KEYS[3], 'ts_unordered') == 1
local entries = unordered and redis.call('ZCARD', KEYS[2]) or 0
if entries > 0 and entries == n then
  for i = 2, #ARGV - 1, 2 do
    local count = redis.call('ZCOUNT', KEYS[2], ARGV[i], '(' .. ARGV[i + 1])
    if count == 0 then
      put_runs(0, {})
    else
      local found = redis.call('ZRANGE', KEYS[2], '(' .. ARGV[i + 1], ARGV[i], 'BYSCORE', 'REV',
                               'LIMIT', 0, cap)
      -- latest first: reversed, they are ascending when the span's times are in seq order
      -- (the usual case: no sort)
      local k, seqs, sorted = #found, {}, true
      for j = 1, k do
        local seq = dec(found[j])
        seqs[k - j + 1] = seq
        if j > 1 and seq >= seqs[k - j + 2] then sorted = false end
      end
      if not sorted then table.sort(seqs) end
      put_runs(count, seqs)
    end
  end
  return out
end
-- The ts and seq of the turn at a rank.
local function at(rank)
  local found = redis.call('ZRANGE', KEYS[1], rank, rank, 'WITHSCORES')
  -- '"ts":' cannot occur inside a JSON string (its quotes are escaped), so the first match
  -- is the turn's own field.
  return tonumber(string.match(found[1], '"ts":(%-?%d+)')) or 0, tonumber(found[2])
end
-- The first rank in [lo, hi) whose turn was said at or after t (hi when none), the times of
-- the turns of those ranks going up with their ranks.
local function first_rank(t, lo, hi)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if at(mid) < t then lo = mid + 1 else hi = mid end
  end
  return lo
end
if entries > 0 and redis.call('HEXISTS', KEYS[3], 'truns') == 1 then
  -- the runs, by seq: a run's first seq and a bound under its times (its first turn's ts);
  -- turns before the first entry (none, unless an older version wrote them) make a run too
  local found = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
  local runs = {{0, -math.huge}}
  for j = 1, #found, 2 do runs[#runs + 1] = {dec(found[j]), tonumber(found[j + 1])} end
  table.sort(runs, function(a, b) return a[1] < b[1] end)
  -- the first rank of run k (the number of stored turns before it), read once
  local function rank_of(k)
    local run = runs[k]
    if not run then return n end
    if not run[3] then run[3] = redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. run[1]) end
    return run[3]
  end
  -- the stored seqs of ranks [lo, hi), appended to seqs
  local function seqs_of(lo, hi, seqs)
    local _, low = at(lo)
    local _, high = at(hi - 1)
    if high - low + 1 == hi - lo then
      for seq = low, high do seqs[#seqs + 1] = seq end
    else
      local read = redis.call('ZRANGE', KEYS[1], lo, hi - 1, 'WITHSCORES')
      for j = 2, #read, 2 do seqs[#seqs + 1] = tonumber(read[j]) end
    end
  end
  for i = 2, #ARGV - 1, 2 do
    local start, stop = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
    local pieces, count = {}, 0
    for k, run in ipairs(runs) do
      if run[2] < stop then
        local lo, hi = rank_of(k), rank_of(k + 1)
        if hi > lo and at(hi - 1) >= start then
          local first = first_rank(start, lo, hi)
          local last = first_rank(stop, first, hi)
          if last > first then
            pieces[#pieces + 1] = {first, last}
            count = count + last - first
          end
        end
      end
    end
    local seqs = {}
    if count <= cap then
      for _, piece in ipairs(pieces) do seqs_of(piece[1], piece[2], seqs) end
    elseif #pieces == 1 then
      -- one run: its latest turns are its last ranks
      seqs_of(pieces[1][2] - cap, pieces[1][2], seqs)
    else
      -- the latest cap by time, then seq, merged from the pieces' ends (each in time order),
      -- read 64 turns at a time
      local heads = {}
      local function page(piece)
        local from = math.max(piece[1], piece[2] - 64)
        local read = redis.call('ZRANGE', KEYS[1], from, piece[2] - 1, 'WITHSCORES')
        piece.said = {}
        for j = 1, #read, 2 do
          piece.said[#piece.said + 1] = {tonumber(string.match(read[j], '"ts":(%-?%d+)')) or 0,
                                         tonumber(read[j + 1])}
        end
        piece[2] = from
      end
      for _, piece in ipairs(pieces) do page(piece); heads[#heads + 1] = piece end
      for _ = 1, cap do
        local best, bt, bs
        for _, piece in ipairs(heads) do
          local top = piece.said[#piece.said]
          if top and (not best or top[1] > bt or (top[1] == bt and top[2] > bs)) then
            best, bt, bs = piece, top[1], top[2]
          end
        end
        seqs[#seqs + 1] = bs
        best.said[#best.said] = nil
        if #best.said == 0 and best[2] > best[1] then page(best) end
      end
    end
    table.sort(seqs)
    put_runs(count, seqs)
  end
  return out
end
local last = 0
if n > 0 then local _, seq = at(n - 1); last = seq end
local function first_at(t)
  local lo = first_rank(t, 0, n)
  if lo >= n then return last + 1 end
  local _, seq = at(lo)
  return seq
end
for i = 2, #ARGV - 1, 2 do
  local first = first_at(tonumber(ARGV[i]))
  local stop = first_at(tonumber(ARGV[i + 1]))
  if stop > first then
    out[#out + 1] = stop - first
    out[#out + 1] = 1
    out[#out + 1] = math.max(first, stop - cap)
    out[#out + 1] = stop
  else
    out[#out + 1] = 0
    out[#out + 1] = 0
  end
end
return out
