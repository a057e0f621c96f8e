-- A forget's new token (store/forgets.py), set before the forgotten keys are deleted.
-- KEYS[1] the user's forgets hash
-- ARGV[1] field: 'u' (the whole user) or 'c:<c>' (one conversation), ARGV[2] the token
-- (f:<epoch ms>-<random>), ARGV[3] TTL seconds
-- A forget of the whole user replaces the hash (the conversations' tokens go with it) and the
-- key lives ARGV[3] s; a forget of one conversation sets its field and never shortens the TTL
-- (the user's other conversations live on). Returns 1.
if ARGV[1] == 'u' then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'u', ARGV[2], 'n', '1')
  redis.call('EXPIRE', KEYS[1], ARGV[3])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  redis.call('HSETNX', KEYS[1], 'n', '1')
  if redis.call('TTL', KEYS[1]) < tonumber(ARGV[3]) then
    redis.call('EXPIRE', KEYS[1], ARGV[3])
  end
end
return 1
