-- The turns said within spans of time: for each span, how many there are and the seqs of the
-- latest (by time) ARGV[1] of them. Read-only.
-- KEYS[1] turns zset (member '{"seq":<n>,...,"ts":<epoch ms>,...}', score = seq)
-- KEYS[2] times zset, the time index (score = a turn's ts, member = its seq: 4 bytes,
-- big-endian, so that members of one ts sort by seq), KEYS[3] meta hash
-- ARGV[1] most seqs returned per span (the postings cap), then pairs: start ms, end ms (end
-- excluded)
-- While the turns' times are in seq order (no write marked meta 'ts_unordered', the usual case),
-- or in a conversation stored before the index existed (no complete index), the turns' times
-- are binary-searched by rank, O(log n) per span: the span is the seqs from the first turn at
-- or after start to the first at or after end, the newest ARGV[1] of them. Once times are out
-- of order (an import of older lines after newer chat, a write buffered through an outage) and
-- the time index holds every stored turn (as many members as KEYS[1]), a span's turns are
-- found with it whatever their order: ZCOUNT, and ZRANGE BYSCORE of at most ARGV[1] members,
-- O(log n + ARGV[1]) per span (of turns of one ts, the newest seqs).
-- Returns for each span: the number of its turns, the number r of runs, then r pairs first
-- seq, end seq (excluded): runs of consecutive seqs, ascending, holding the returned seqs.
local cap = tonumber(ARGV[1])
local n = redis.call('ZCARD', KEYS[1])
local out = {}
if redis.call('HEXISTS', KEYS[3], 'ts_unordered') == 1 and redis.call('ZCARD', KEYS[2]) == n then
  for i = 2, #ARGV - 1, 2 do
    local count = redis.call('ZCOUNT', KEYS[2], ARGV[i], '(' .. ARGV[i + 1])
    out[#out + 1] = count
    if count == 0 then
      out[#out + 1] = 0
    else
      local found = redis.call('ZRANGE', KEYS[2], '(' .. ARGV[i + 1], ARGV[i], 'BYSCORE', 'REV',
                               'LIMIT', 0, cap)
      -- latest first: reversed, they are ascending when the span's times are in seq order
      -- (the usual case: no sort)
      local k, seqs, sorted = #found, {}, true
      for j = 1, k do
        local a, b, c, d = string.byte(found[j], 1, 4)
        local seq = ((a * 256 + b) * 256 + c) * 256 + d
        seqs[k - j + 1] = seq
        if j > 1 and seq >= seqs[k - j + 2] then sorted = false end
      end
      if not sorted then table.sort(seqs) end
      local at = #out + 1
      out[at] = 0
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
  end
  return out
end
local function at(rank)
  local found = redis.call('ZRANGE', KEYS[1], rank, rank, 'WITHSCORES')
  -- '"ts":' cannot occur inside a JSON string (its quotes are escaped), so the first match
  -- is the turn's own field.
  return tonumber(string.match(found[1], '"ts":(%-?%d+)')) or 0, tonumber(found[2])
end
local last = 0
if n > 0 then local _, seq = at(n - 1); last = seq end
local function first_at(t)
  local lo, hi = 0, n
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local ts = at(mid)
    if ts < t then lo = mid + 1 else hi = mid end
  end
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
