-- Forget tokens, included by the write scripts (store/forgets.py).
-- forgotten(key, field, token): key: the user's forgets hash; field: the conversation's field
-- (c:<c>); token: what the write's read found, '<user token>/<conversation
-- token>', or '@<epoch ms>' when its request could not read Redis and started then ('' = not
-- checked).
-- True when a forget came after the read: a token changed (set anew, or deleted by a forget
-- on a full Redis), unless none was read and another write created it (w:...); for '@<ms>', a
-- forget token set at or after that time (f:<ms>-<random>).
local function forgotten(key, field, token)
  if token == '' then return false end
  local now = redis.call('HMGET', key, 'u', field)
  if string.sub(token, 1, 1) == '@' then
    local since = tonumber(string.sub(token, 2)) or 0
    for i = 1, 2 do
      local at = tonumber(string.match(now[i] or '', '^f:(%d+)-'))
      if at and at >= since then return true end
    end
    return false
  end
  local slash = string.find(token, '/', 1, true)
  if not slash then return false end
  local read = {string.sub(token, 1, slash - 1), string.sub(token, slash + 1)}
  -- A hash that is gone, where only forget tokens (f:) were read, expired: the hash a forget
  -- leaves lives longer than any write may wait, and a clearing keeps its field n. (A hash
  -- written before n existed, cleared on a full Redis, is gone too: what read w: is refused.)
  if not now[1] and not now[2] and redis.call('EXISTS', key) == 0 then
    local only_forgets = read[1] ~= '' or read[2] ~= ''
    for i = 1, 2 do
      if read[i] ~= '' and string.sub(read[i], 1, 2) ~= 'f:' then only_forgets = false end
    end
    if only_forgets then return false end
  end
  for i = 1, 2 do
    local is = now[i] or ''
    if is ~= read[i] and not (read[i] == '' and string.sub(is, 1, 2) == 'w:') then
      return true
    end
  end
  return false
end
-- A conversation's first write creates its user's and its own token (w:<fresh>) where absent,
-- and the field n, which no forget deletes.
local function own_tokens(key, field, fresh)
  redis.call('HSETNX', key, 'u', 'w:' .. fresh)
  redis.call('HSETNX', key, field, 'w:' .. fresh)
  redis.call('HSETNX', key, 'n', '1')
end
