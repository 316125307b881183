-- The failed-authentication lock of a source address. Its one key is the address's alone, so
-- on a cluster it needs no slot shared with an account's windows (windows.lua).
--
-- lock(key, mode, limit, window_ms)
--   key        failures of the source address
--   mode       'check' (the lock only), 'fail' (the lock, then count a failure)
--   limit      failures that lock the address; window_ms: how long failures count
--
-- Returns {1, ttl_ms} when the address is locked, else {0}.
local function lock(key, mode, limit, window_ms)
  local failures = tonumber(redis.call('GET', key) or '0')
  if failures >= tonumber(limit) then
    return {1, redis.call('PTTL', key)}
  end
  if mode == 'fail' then
    local n = redis.call('INCR', key)
    if n == 1 then
      redis.call('PEXPIRE', key, window_ms)
    end
  end
  return {0}
end
