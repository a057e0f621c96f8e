-- The newest user turn stored before a seq: the question an agent's tool steps work on, when it
-- is older than the tail a request reads. Read-only; pages of 16 members, newest first.
-- KEYS[1] turns zset (member '{"seq":<n>,"role":"<role>",...}', score = seq)
-- ARGV[1] only turns with a lower seq are looked at
-- ARGV[2] most turns looked at, ARGV[3] most bytes of turns looked at (an agent's tool turns
-- are tens of KB each: copying them is what the script's time grows with)
-- Returns the member, or false when none is found within ARGV[2] turns and ARGV[3] bytes.
-- Pages of 16 turns: a page read past the byte budget copies at most 16 more.
local top, left, bytes = '(' .. ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
while left > 0 and bytes > 0 do
  local page = redis.call('ZREVRANGEBYSCORE', KEYS[1], top, '-inf', 'LIMIT', 0, math.min(16, left))
  if #page == 0 then return false end
  for _, member in ipairs(page) do
    if string.find(member, '^{"seq":%d+,"role":"user"') then return member end
    bytes = bytes - #member
  end
  left = left - #page
  top = '(' .. string.match(page[#page], '^{"seq":(%d+)')
end
return false
