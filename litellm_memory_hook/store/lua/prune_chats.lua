-- Take conversations that no longer exist (their keys expired, or were deleted) out of the
-- user's index, so that what recall_scope: user reads does not grow with every conversation the
-- user ever had.
-- KEYS[1] the user's index set; KEYS[2..] every key each member names (the conversation's keys
-- and its conversation-scoped memory set), member after member
-- ARGV pairs: a member (c:<c>), the number of its keys in KEYS
-- A member goes only if none of its keys exists (a write creates them with the member, in one
-- script; pinned memories of a conversation-scoped set keep it). Returns how many went.
local gone, k = 0, 2
for i = 1, #ARGV, 2 do
  local n = tonumber(ARGV[i + 1])
  if redis.call('EXISTS', unpack(KEYS, k, k + n - 1)) == 0 then
    gone = gone + redis.call('SREM', KEYS[1], ARGV[i])
  end
  k = k + n
end
return gone
