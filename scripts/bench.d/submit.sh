#!/usr/bin/env bash
# Submission throughput: POST /api/v1/moderate/prompt with 64 connections for 20 s (wrk),
# then the same with a distinct Idempotency-Key on every request, then pgbench inserting the
# same row shape into the same Postgres at the same concurrency. Prints accepted submissions/s
# and p50/p99 latency of both runs, their ratio keyed/plain, pgbench tps, the ratio
# plain/pgbench and the api's peak RSS. Targets: submit/pgbench >= 0.6, keyed/plain >= 0.90,
# p99 <= 25 ms, RSS <= 100 MB.
source "$(dirname "$0")/../lib.sh"
command -v wrk >/dev/null || apt_install wrk
CONNECTIONS=${CONNECTIONS:-64}
DURATION=${DURATION:-20}

DB=$(bench_database submit)
NS="bench-submit-$$"
PORT=$(free_port)
export DATABASE_URL=$DB REDIS_URL=$REDIS_BASE_URL APP_REDIS_NAMESPACE=$NS PORT RUST_LOG=warn
# One load generator on one address: lift the per-address cap of 50 authenticating requests
# in flight (a rule for abusive clients), so the figures measure the submission path.
export APP_AUTH_CONCURRENCY=${APP_AUTH_CONCURRENCY:-1000}
org=$("$BIN/modctl" org create --name bench | json_field org_id)
"$BIN/modctl" org set "$org" --rate-per-minute 100000000 >/dev/null
KEY=$("$BIN/modctl" key create --org "$org" --scopes moderate:prompt | json_field key)

"$BIN/api" & API=$!
cleanup() {
  kill "$API" 2>/dev/null || true
  wait "$API" 2>/dev/null || true
  redis-cli -p "$REDIS_PORT" --scan --pattern "$NS:*" | xargs -r redis-cli -p "$REDIS_PORT" del >/dev/null
}
trap cleanup EXIT
wait_http "http://127.0.0.1:$PORT/health"

WORK=$(mktemp -d)
BOUNDARY=benchboundary7d1f
# Both runs build each request in Lua (the keyed one must, for its keys), so the ratio
# keyed/plain compares the api's work, not the load generator's.
cat > "$WORK/submit.lua" <<LUA
wrk.method = "POST"
wrk.headers["Authorization"] = "Bearer $KEY"
wrk.headers["Content-Type"] = "multipart/form-data; boundary=$BOUNDARY"
wrk.body = "--$BOUNDARY\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\nIs this a friendly message about the weather today?\r\n--$BOUNDARY--\r\n"
local keyed = os.getenv("KEYED") == "1"
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("thread_id", threads)
end
local sent = 0
function request()
  sent = sent + 1
  if keyed then
    wrk.headers["Idempotency-Key"] = "bench-" .. thread_id .. "-" .. sent
  end
  return wrk.format()
end
response = function(status, headers, body) end
done = function(summary, latency, requests)
  io.write(string.format("WRK requests=%d duration_us=%d errors_status=%d errors_other=%d p50_us=%d p99_us=%d\n",
    summary.requests, summary.duration, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50), latency:percentile(99)))
end
LUA
# Runs wrk (KEYED=1: a distinct Idempotency-Key per request) and sets requests, duration_us,
# errors_status, errors_other, p50_us and p99_us from its summary.
run_wrk() {
  KEYED=$1 wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --timeout 5s -s "$WORK/submit.lua" \
    "http://127.0.0.1:$PORT/api/v1/moderate/prompt" > "$WORK/wrk.out"
  local line
  line=$(grep '^WRK' "$WORK/wrk.out")
  eval "$(echo "$line" | sed 's/^WRK //')"
}
# Milliseconds with one decimal from microseconds.
ms() { echo "$(($1 / 1000)).$(( ($1 % 1000) / 100 ))"; }

log "wrk: $CONNECTIONS connections, ${DURATION}s"
run_wrk 0
accepted=$(psql "$DB" -qAtc "SELECT count(*) FROM jobs")
submit_rps=$(python3 -c "print(round($accepted / ($duration_us / 1e6), 1))")
plain_latency="p50 $(ms "$p50_us") ms, p99 $(ms "$p99_us") ms"
plain_errors="non-2xx ${errors_status}, socket errors ${errors_other}"

log "wrk with a distinct Idempotency-Key per request: $CONNECTIONS connections, ${DURATION}s"
run_wrk 1
keyed_accepted=$(psql "$DB" -qAtc "SELECT count(*) FROM jobs WHERE idempotency_key IS NOT NULL")
keyed_rps=$(python3 -c "print(round($keyed_accepted / ($duration_us / 1e6), 1))")
keyed_latency="p50 $(ms "$p50_us") ms, p99 $(ms "$p99_us") ms"
keyed_errors="non-2xx ${errors_status}, socket errors ${errors_other}"
keyed_ratio=$(python3 -c "print(round($keyed_rps / $submit_rps, 2))")
api_rss_mb=$(( $(peak_rss_kb "$API") / 1024 ))

# The same row shape, inserted directly at the same concurrency.
read -r ACCOUNT KEY_ID < <(psql "$DB" -qAtF' ' -c "SELECT account_id, id FROM api_keys LIMIT 1")
cat > "$WORK/insert.sql" <<SQL
INSERT INTO jobs (id, account_id, api_key_id, type, content, enqueued_at)
VALUES (gen_random_uuid(), '$ACCOUNT', '$KEY_ID', 'text', 'Is this a friendly message about the weather today?', now());
SQL
log "pgbench: $CONNECTIONS clients, ${DURATION}s"
pgbench -n -c "$CONNECTIONS" -j 2 -T "$DURATION" -f "$WORK/insert.sql" "$DB" > "$WORK/pgbench.out" 2>&1
pg_tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$WORK/pgbench.out" | head -1)
ratio=$(python3 -c "print(round($submit_rps / $pg_tps, 2))")

cat <<OUT
submit: accepted ${submit_rps}/s (${accepted} jobs, ${plain_errors})
submit: latency ${plain_latency}
submit keyed: accepted ${keyed_rps}/s (${keyed_accepted} jobs, ${keyed_errors})
submit keyed: latency ${keyed_latency}
ratio keyed/plain: ${keyed_ratio}   (target >= 0.90)
pgbench: ${pg_tps} tps
ratio submit/pgbench: ${ratio}   (target >= 0.6)
api peak RSS: ${api_rss_mb} MB   (target <= 100)
OUT
rm -rf "$WORK"
