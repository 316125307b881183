-- The failed-authentication lock of a source address, in one round trip. Its one key is the
-- address's alone, so on a cluster it needs no slot shared with an account's windows
-- (windows.lua).
--
-- KEYS[1] failures of the source address
-- ARGV[1] mode: 'check' (the lock only), 'fail' (the lock, then count a failure)
-- ARGV[2] failure limit, ARGV[3] failure window (ms)
--
-- Returns {1, ttl_ms} when the address is locked, else {0}.

local failures = tonumber(redis.call('GET', KEYS[1]) or '0')
if failures >= tonumber(ARGV[2]) then
  return {1, redis.call('PTTL', KEYS[1])}
end

if ARGV[1] == 'fail' then
  local n = redis.call('INCR', KEYS[1])
  if n == 1 then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
  end
end
return {0}
