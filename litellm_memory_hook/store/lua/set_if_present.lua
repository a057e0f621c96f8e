-- Set fields of a hash only while it exists (store/epochs.py: a conversation's window start and
-- head snapshot; a write must not create a meta hash without the rest of the conversation).
-- KEYS[1] the meta hash
-- ARGV field, value, ...
-- Returns 1 when written, 0 when the hash is absent (nothing is made).
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
