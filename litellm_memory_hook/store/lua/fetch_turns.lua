-- The stored turns with the given seqs, in the order asked (missing seqs give nothing).
-- KEYS[1] turns zset
-- ARGV the seqs
-- Returns the JSON members found.
local out = {}
for i = 1, #ARGV do
  local found = redis.call('ZRANGE', KEYS[1], ARGV[i], ARGV[i], 'BYSCORE')
  if found[1] then out[#out + 1] = found[1] end
end
return out
