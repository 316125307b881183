#!/usr/bin/env bash
# Registry check throughput. Loads 1,000,000 entries reported by 1,000 members (every
# identifier reported by two members), then drives POST /api/v1/registry/check with wrk at a
# few connections against the release api, and prints checks/s and p99 latency.
# Targets: >= 5,000 checks/s and p99 <= 10 ms. Run through `scripts/bench registry`.
source "$(dirname "$0")/../lib.sh"

MEMBERS=${REGISTRY_BENCH_MEMBERS:-1000}
PER_MEMBER=${REGISTRY_BENCH_PER_MEMBER:-1000}
DURATION=${REGISTRY_BENCH_DURATION:-15s}
CONNECTIONS=${REGISTRY_BENCH_CONNECTIONS:-8}

command -v wrk >/dev/null || apt_install wrk
[ -n "${BIN:-}" ] || die "run this through scripts/bench"

work=$(mktemp -d)
api_pid=
cleanup() {
  if [ -n "$api_pid" ]; then
    kill "$api_pid" 2>/dev/null || true
    wait "$api_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
  # A million rows are not worth keeping between runs.
  psql "$PG_BASE_URL/postgres" -qc 'DROP DATABASE IF EXISTS "bench_registry" WITH (FORCE)' \
    >/dev/null 2>&1 || true
}
trap cleanup EXIT

db=$(bench_database registry)
registry_key=$(head -c 32 /dev/urandom | base64)
namespace="bench-registry-$$"

log "Creating $MEMBERS members"
psql "$db" -qAt -c "
  INSERT INTO accounts (id, name, registry_member, check_quota_daily, rate_per_minute)
  SELECT gen_random_uuid(), 'member ' || g, true, 2000000000, 1000000000
  FROM generate_series(1, $MEMBERS) g" >/dev/null
psql "$db" -qAt -c "SELECT id FROM accounts ORDER BY name" > "$work/members"

log "Loading $((MEMBERS * PER_MEMBER)) entries (HMAC computed here, rows sent with COPY)"
started=$(date +%s)
REGISTRY_KEY=$registry_key PER_MEMBER=$PER_MEMBER WORK=$work python3 - <<'PY' |
import base64, datetime, hashlib, hmac, os, sys, uuid
key = base64.b64decode(os.environ["REGISTRY_KEY"])
now = datetime.datetime.now(datetime.timezone.utc)
stamps = f"{now.isoformat()}\t{now.isoformat()}\t{now.isoformat()}\t{(now + datetime.timedelta(days=365)).isoformat()}"

per = int(os.environ["PER_MEMBER"])
members = open(os.environ["WORK"] + "/members").read().split()
universe = len(members) * per // 2  # every identifier is reported by two members
categories = ("payment_fraud", "prohibited_content", "ban_evasion")
keyed = {}
def identifier(n):
    value = keyed.get(n)
    if value is None:
        digest = hashlib.sha256(f"user{n}@example.com".encode()).digest()
        value = keyed[n] = hmac.new(key, digest, hashlib.sha256).hexdigest()
    return value
out = sys.stdout
for m, account in enumerate(members):
    rows = []
    for j in range(per):
        n = (m * per + j) % universe
        rows.append(f"{uuid.uuid4()}\t{account}\t\\\\x{identifier(n)}\t{categories[(m + j) % 3]}\tBENCH-{m}-{j}\t{stamps}\n")
    out.write("".join(rows))
PY
psql "$db" -q -v ON_ERROR_STOP=1 -c "\\copy registry_entries (id, account_id, identifier, category, member_case_ref, created_at, updated_at, reported_at, expires_at) FROM pstdin"
psql "$db" -qAt -c "SELECT count(*) FROM registry_entries" | {
  read -r loaded
  log "Loaded $loaded entries in $(( $(date +%s) - started )) s"
}
psql "$db" -q -c "VACUUM ANALYZE registry_entries" -c "VACUUM ANALYZE accounts"

# Check bodies: 1 or 2 identifiers each, about two in three of them reported.
REGISTRY_KEY=$registry_key python3 - "$((MEMBERS * PER_MEMBER * 3 / 4))" > "$work/check.lua" <<'PY'
import hashlib, random, sys
random.seed(7)
top = int(sys.argv[1])
def h(n): return hashlib.sha256(f"user{n}@example.com".encode()).hexdigest()
bodies = []
for i in range(2000):
    ids = [h(random.randrange(top)) for _ in range(1 + i % 2)]
    items = ",".join('{"type":"email","sha256":"%s"}' % x for x in ids)
    bodies.append('{"identifiers":[%s],"context":"signup"}' % items)
print("local bodies = {")
for b in bodies: print("  '%s'," % b)
print("}")
print("""
local i = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  i = i + 1
  return wrk.format(nil, nil, nil, bodies[(i % #bodies) + 1])
end
done = function(summary, latency, requests)
  local seconds = summary.duration / 1e6
  io.write(string.format("checks/s: %.0f\\n", summary.requests / seconds))
  io.write(string.format("p50 ms: %.2f\\n", latency:percentile(50) / 1000))
  io.write(string.format("p99 ms: %.2f\\n", latency:percentile(99) / 1000))
  io.write(string.format("errors: %d non-2xx, %d socket\\n", summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
""")
PY

log "The check query's plan (it must use registry_entries_identifier_idx)"
sample=$(REGISTRY_KEY=$registry_key python3 -c '
import base64, hashlib, hmac, os
key = base64.b64decode(os.environ["REGISTRY_KEY"])
print(",".join("decode(%r, %r)" % (hmac.new(key, hashlib.sha256(f"user{n}@example.com".encode()).digest(), hashlib.sha256).hexdigest(), "hex") for n in (1, 2)))')
caller=$(head -1 "$work/members")
plan=$(psql "$db" -qAt -c "EXPLAIN (ANALYZE, BUFFERS)
  SELECT e.account_id, e.category, e.status, e.created_at, e.reported_at
  FROM registry_entries e
  WHERE e.identifier IN ($sample) AND e.account_id <> '$caller'
    AND e.status IN ('active', 'disputed') AND e.expires_at > now()
    AND (SELECT a.status FROM accounts a WHERE a.id = e.account_id) = 'active'")
echo "$plan"
grep -q "registry_entries_identifier_idx" <<<"$plan" || die "the check query does not use the identifier index"

checker=$(DATABASE_URL=$db "$BIN/modctl" key create --org "$caller" --scopes registry:check | json_field key)
port=$(free_port)
log "Starting the release api on port $port"
DATABASE_URL=$db REDIS_URL=$REDIS_BASE_URL APP_REDIS_NAMESPACE=$namespace \
  APP_REGISTRY_KEY=$registry_key PORT=$port APP_HOST=127.0.0.1 RUST_LOG=warn \
  "$BIN/api" > "$work/api.log" 2>&1 &
api_pid=$!
wait_http "http://127.0.0.1:$port/health"

sample_hash=$(python3 -c 'import hashlib; print(hashlib.sha256(b"user1@example.com").hexdigest())')
log "A sample check"
curl -fsS -H "Authorization: Bearer $checker" -H 'content-type: application/json' \
  -d "{\"identifiers\":[{\"type\":\"email\",\"sha256\":\"$sample_hash\"}],\"context\":\"signup\"}" \
  "http://127.0.0.1:$port/api/v1/registry/check"
echo
log "Warming up"
wrk -t1 -c2 -d3s -s "$work/check.lua" -H "Authorization: Bearer $checker" \
  "http://127.0.0.1:$port/api/v1/registry/check" >/dev/null
log "Driving checks: $CONNECTIONS connections for $DURATION"
wrk -t2 -c"$CONNECTIONS" -d"$DURATION" -s "$work/check.lua" -H "Authorization: Bearer $checker" \
  "http://127.0.0.1:$port/api/v1/registry/check" | tee "$work/wrk.out"
rss=$(peak_rss_kb "$api_pid")
echo "api peak RSS: ${rss} kB"
echo "targets: >= 5000 checks/s, p99 <= 10 ms"
redis-cli -p "${REDIS_PORT:-6379}" --scan --pattern "$namespace:*" | xargs -r redis-cli -p "${REDIS_PORT:-6379}" del >/dev/null
