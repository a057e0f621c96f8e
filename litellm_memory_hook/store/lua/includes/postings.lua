-- The recall index (included by the scripts that store and remove turns): KEYS[4], the
-- conversation's postings hash, field = term, value = packed big-endian uint32s: df, then seqs,
-- strictly ascending, at most cap of them: the newest.
local function enc(n)
  return string.char(math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256,
                     math.floor(n / 256) % 256, n % 256)
end
local function dec(s, i)
  local a, b, c, d = string.byte(s, i, i + 3)
  return ((a * 256 + b) * 256 + c) * 256 + d
end
-- Binary search of a seq in a packed list: its byte offset, or nil and the offset where it
-- would be inserted.
local function find(list, seq)
  local lo, hi = 0, math.floor(#list / 4) - 1
  while lo <= hi do
    local mid = math.floor((lo + hi) / 2)
    local v = dec(list, mid * 4 + 1)
    if v == seq then return mid * 4 + 1 end
    if v < seq then lo = mid + 1 else hi = mid - 1 end
  end
  return nil, lo * 4 + 1
end
-- Messages (seqs, ascending) join a term: one read and one write of its field whatever their
-- number. df grows by the seqs not listed yet; they are appended (the usual case) or inserted
-- in order (a batched write landing after a newer writer's); the list keeps the newest cap.
local function add_postings(postings, term, seqs, cap)
  local v = redis.call('HGET', postings, term)
  -- The usual case, every seq newer than the newest listed (a request's own turns): the value
  -- is rebuilt with one copy of the part kept (each copy of a full list is 4 KB, and a turn
  -- pair updates ~60 terms).
  local newest = (v and #v >= 8) and dec(v, #v - 3) or -1
  local appending = true
  for _, seq in ipairs(seqs) do
    if seq <= newest then appending = false; break end
    newest = seq
  end
  if appending then
    local tail = {}
    for j, seq in ipairs(seqs) do tail[j] = enc(seq) end
    -- the oldest `drop` of listed + new seqs go: first listed ones, then (more new seqs than
    -- cap) new ones
    local listed = v and (#v - 4) / 4 or 0
    local drop = math.max(listed + #seqs - cap, 0)
    local kept = drop < listed and string.sub(v, 5 + drop * 4) or ''
    local df = (v and dec(v, 1) or 0) + #seqs
    local from = math.max(drop - listed, 0) + 1
    redis.call('HSET', postings, term, enc(df) .. kept .. table.concat(tail, '', from))
    return
  end
  local df, list = 0, ''
  if v then df = dec(v, 1); list = string.sub(v, 5) end
  local tail = {}
  for _, seq in ipairs(seqs) do
    local n = #list
    if #tail == 0 and n > 0 and dec(list, n - 3) >= seq then
      local at, ins = find(list, seq)
      if not at then
        list = string.sub(list, 1, ins - 1) .. enc(seq) .. string.sub(list, ins)
        df = df + 1
      end
    else
      tail[#tail + 1] = enc(seq)
      df = df + 1
    end
  end
  if #tail > 0 then list = list .. table.concat(tail) end
  if #list > cap * 4 then list = string.sub(list, #list - cap * 4 + 1) end
  redis.call('HSET', postings, term, enc(df) .. list)
end
-- Messages (seqs) leave a term: df drops by their number, their seqs leave the list where
-- listed, the field goes when df reaches 0.
local function remove_postings(postings, term, seqs)
  local v = redis.call('HGET', postings, term)
  if not v then return end
  local df = dec(v, 1) - #seqs
  local list = string.sub(v, 5)
  for _, seq in ipairs(seqs) do
    local at = find(list, seq)
    if at then list = string.sub(list, 1, at - 1) .. string.sub(list, at + 4) end
  end
  if df <= 0 then redis.call('HDEL', postings, term)
  else redis.call('HSET', postings, term, enc(df) .. list) end
end
