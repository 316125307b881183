-- The two rate windows of an account. Windows are fixed and anchored: a window starts with the
-- first request counted in it and lasts its length (the key's expiry), so it never straddles a
-- clock boundary a client cannot see. A refused request consumes nothing. Both keys carry the
-- account's hash tag, so on a cluster they share a slot.
--
-- windows(minute_key, minute_limit, minute_ms, burst_key, burst_limit, burst_ms)
--
-- Returns {0 admitted | 2 refused, minute_used, minute_ttl_ms, burst_used, burst_ttl_ms}.
local function windows(minute_key, minute_limit, minute_ms, burst_key, burst_limit, burst_ms)
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

  local minute_used, minute_ttl = window(minute_key, minute_ms)
  local burst_used, burst_ttl = window(burst_key, burst_ms)
  if minute_used >= tonumber(minute_limit) or burst_used >= tonumber(burst_limit) then
    return {2, minute_used, minute_ttl, burst_used, burst_ttl}
  end
  count(minute_key, minute_ms)
  count(burst_key, burst_ms)
  return {0, minute_used + 1, minute_ttl, burst_used + 1, burst_ttl}
end
