-- One round trip per request: the failed-authentication lock of a source address, and the
-- two rate windows of an account. Windows are fixed and anchored: a window starts with the
-- first request counted in it and lasts its length (the key's expiry), so it never straddles
-- a clock boundary a client cannot see. A refused request consumes nothing.
--
-- KEYS[1] failures of the source address; KEYS[2] minute window; KEYS[3] burst window
-- ARGV[1] mode: 'check' (lock only), 'fail' (lock, then count a failure), 'admit' (lock, then
--         both windows)
-- ARGV[2] failure limit, ARGV[3] failure window (ms)
-- ARGV[4] minute limit, ARGV[5] minute window (ms), ARGV[6] burst limit, ARGV[7] burst window (ms)
--
-- Returns {1, ttl_ms} when the address is locked; {0} for 'check' and 'fail';
-- {0 admitted | 2 refused, minute_used, minute_ttl_ms, burst_used, burst_ttl_ms} for 'admit'.

local failures = tonumber(redis.call('GET', KEYS[1]) or '0')
if failures >= tonumber(ARGV[2]) then
  return {1, redis.call('PTTL', KEYS[1])}
end

local mode = ARGV[1]
if mode == 'check' then
  return {0}
end

local function count(key, window_ms)
  local n = redis.call('INCR', key)
  if n == 1 then
    redis.call('PEXPIRE', key, window_ms)
  end
  return n
end

if mode == 'fail' then
  count(KEYS[1], ARGV[3])
  return {0}
end

local function window(key, window_ms)
  local ttl = redis.call('PTTL', key)
  if ttl < 0 then
    -- Absent, or (never written by us) without an expiry: a fresh window.
    redis.call('DEL', key)
    return 0, tonumber(window_ms)
  end
  return tonumber(redis.call('GET', key) or '0'), ttl
end

local minute_used, minute_ttl = window(KEYS[2], ARGV[5])
local burst_used, burst_ttl = window(KEYS[3], ARGV[7])
if minute_used >= tonumber(ARGV[4]) or burst_used >= tonumber(ARGV[6]) then
  return {2, minute_used, minute_ttl, burst_used, burst_ttl}
end
count(KEYS[2], ARGV[5])
count(KEYS[3], ARGV[7])
return {0, minute_used + 1, minute_ttl, burst_used + 1, burst_ttl}
