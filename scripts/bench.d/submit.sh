#!/usr/bin/env bash
# Submission throughput: POST /api/v1/moderate/prompt with 64 connections for 20 s (wrk),
# then pgbench inserting the same row shape into the same Postgres at the same concurrency.
# Prints accepted submissions/s, p50/p99 latency, pgbench tps, their ratio and the api's
# peak RSS. Targets: ratio >= 0.6, p99 <= 25 ms, RSS <= 100 MB.
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
cat > "$WORK/submit.lua" <<LUA
wrk.method = "POST"
wrk.headers["Authorization"] = "Bearer $KEY"
wrk.headers["Content-Type"] = "multipart/form-data; boundary=$BOUNDARY"
wrk.body = "--$BOUNDARY\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\nIs this a friendly message about the weather today?\r\n--$BOUNDARY--\r\n"
local accepted = 0
response = function(status, headers, body) end
done = function(summary, latency, requests)
  io.write(string.format("WRK requests=%d duration_us=%d errors_status=%d errors_other=%d p50_us=%d p99_us=%d\n",
    summary.requests, summary.duration, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50), latency:percentile(99)))
end
LUA
log "wrk: $CONNECTIONS connections, ${DURATION}s"
wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --timeout 5s -s "$WORK/submit.lua" \
  "http://127.0.0.1:$PORT/api/v1/moderate/prompt" > "$WORK/wrk.out"
line=$(grep '^WRK' "$WORK/wrk.out")
eval "$(echo "$line" | sed 's/^WRK //')"
accepted=$(psql "$DB" -qAtc "SELECT count(*) FROM jobs")
api_rss_mb=$(( $(peak_rss_kb "$API") / 1024 ))
submit_rps=$(python3 -c "print(round($accepted / ($duration_us / 1e6), 1))")

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
submit: accepted ${submit_rps}/s (${accepted} jobs, non-2xx ${errors_status}, socket errors ${errors_other})
submit: latency p50 $((p50_us / 1000)).$(( (p50_us % 1000) / 100 )) ms, p99 $((p99_us / 1000)).$(( (p99_us % 1000) / 100 )) ms
pgbench: ${pg_tps} tps
ratio submit/pgbench: ${ratio}   (target >= 0.6)
api peak RSS: ${api_rss_mb} MB   (target <= 100)
OUT
rm -rf "$WORK"
