-- The two rate windows of an account, in one round trip. Windows are fixed and anchored: a
-- window starts with the first request counted in it and lasts its length (the key's expiry),
-- so it never straddles a clock boundary a client cannot see. A refused request consumes
-- nothing. Both keys carry the account's hash tag, so on a cluster they share a slot.
--
-- KEYS[1] minute window; KEYS[2] burst window
-- ARGV[1] minute limit, ARGV[2] minute window (ms), ARGV[3] burst limit, ARGV[4] burst window (ms)
--
-- Returns {0 admitted | 2 refused, minute_used, minute_ttl_ms, burst_used, burst_ttl_ms}.

local function window(key, window_ms)
  local ttl = redis.call('PTTL', key)
  if ttl < 0 then
    -- Absent, or (never written by us) without an expiry: a fresh window.
    redis.call('DEL', key)
    return 0, tonumber(window_ms)
  end
  return tonumber(redis.call('GET', key) or '0'), ttl
end

local function count(key, window_ms)
  local n = redis.call('INCR', key)
  if n == 1 then
    redis.call('PEXPIRE', key, window_ms)
  end
  return n
end

local minute_used, minute_ttl = window(KEYS[1], ARGV[2])
local burst_used, burst_ttl = window(KEYS[2], ARGV[4])
if minute_used >= tonumber(ARGV[1]) or burst_used >= tonumber(ARGV[3]) then
  return {2, minute_used, minute_ttl, burst_used, burst_ttl}
end
count(KEYS[1], ARGV[2])
count(KEYS[2], ARGV[4])
return {0, minute_used + 1, minute_ttl, burst_used + 1, burst_ttl}
