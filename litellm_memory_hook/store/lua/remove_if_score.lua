-- Remove a member of a sorted set only if its score is still the one given.
-- KEYS[1] the due set
-- ARGV[1] member, ARGV[2] expected score
-- Returns 1 when removed, else 0.
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) == tonumber(ARGV[2]) then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
