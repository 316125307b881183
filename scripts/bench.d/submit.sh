#!/usr/bin/env bash
# Submission throughput: POST /api/v1/moderate/prompt with 64 connections for 20 s (wrk),
# alternating with 20 s of the same carrying a distinct Idempotency-Key on every request
# (SLICES slices of each, 4 by default), then pgbench inserting the
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
# Both kinds of run build each request in Lua (the keyed one must, for its keys), so the ratio
# keyed/plain compares the api's work, not the load generator's. They alternate in SLICES
# slices each, so a load elsewhere on the machine weighs on both alike.
cat > "$WORK/submit.lua" <<LUA
wrk.method = "POST"
wrk.headers["Authorization"] = "Bearer $KEY"
wrk.headers["Content-Type"] = "multipart/form-data; boundary=$BOUNDARY"
wrk.body = "--$BOUNDARY\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\nIs this a friendly message about the weather today?\r\n--$BOUNDARY--\r\n"
local keyed = os.getenv("KEYED") == "1"
local slice = os.getenv("SLICE")
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("thread_id", threads)
end
local sent = 0
function request()
  sent = sent + 1
  if keyed then
    wrk.headers["Idempotency-Key"] = "bench-" .. slice .. "-" .. thread_id .. "-" .. sent
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
# Milliseconds with one decimal from microseconds.
ms() { echo "$(($1 / 1000)).$(( ($1 % 1000) / 100 ))"; }
max() { echo $(( $1 > $2 ? $1 : $2 )); }

# Runs wrk for one slice of KIND (plain or keyed: a distinct Idempotency-Key per request) and
# adds its duration and errors to the kind's totals; the kind's p50 and p99 are the worst of
# its slices.
declare -A total_us=([plain]=0 [keyed]=0) non2xx=([plain]=0 [keyed]=0) sockerr=([plain]=0 [keyed]=0)
declare -A worst_p50=([plain]=0 [keyed]=0) worst_p99=([plain]=0 [keyed]=0)
run_slice() {
  local kind=$1 n=$2 line
  KEYED=$([ "$kind" = keyed ] && echo 1 || echo 0) SLICE=$n \
    wrk -t2 -c"$CONNECTIONS" -d"${SLICE_SECONDS}s" --timeout 5s -s "$WORK/submit.lua" \
    "http://127.0.0.1:$PORT/api/v1/moderate/prompt" > "$WORK/wrk.out"
  line=$(grep '^WRK' "$WORK/wrk.out")
  eval "$(echo "$line" | sed 's/^WRK //')"
  total_us[$kind]=$(( total_us[$kind] + duration_us ))
  non2xx[$kind]=$(( non2xx[$kind] + errors_status ))
  sockerr[$kind]=$(( sockerr[$kind] + errors_other ))
  worst_p50[$kind]=$(max "${worst_p50[$kind]}" "$p50_us")
  worst_p99[$kind]=$(max "${worst_p99[$kind]}" "$p99_us")
}

SLICES=${SLICES:-4}
SLICE_SECONDS=$(( DURATION / SLICES > 0 ? DURATION / SLICES : 1 ))
log "wrk: $CONNECTIONS connections, ${DURATION}s plain and ${DURATION}s with a distinct Idempotency-Key per request, alternating in ${SLICE_SECONDS}s slices"
for n in $(seq 1 "$SLICES"); do
  run_slice plain "$n"
  run_slice keyed "$n"
done
keyed_accepted=$(psql "$DB" -qAtc "SELECT count(*) FROM idempotency_keys")
accepted=$(( $(psql "$DB" -qAtc "SELECT count(*) FROM jobs") - keyed_accepted ))
submit_rps=$(python3 -c "print(round($accepted / (${total_us[plain]} / 1e6), 1))")
keyed_rps=$(python3 -c "print(round($keyed_accepted / (${total_us[keyed]} / 1e6), 1))")
keyed_ratio=$(python3 -c "print(round($keyed_rps / $submit_rps, 2))")
api_rss_mb=$(( $(peak_rss_kb "$API") / 1024 ))

# The same row shape, inserted directly at the same concurrency.
read -r ACCOUNT KEY_ID < <(psql "$DB" -qAtF' ' -c "SELECT account_id, id FROM api_keys LIMIT 1")
cat > "$WORK/insert.sql" <<SQL
INSERT INTO jobs (id, account_id, api_key_id, type, content)
VALUES (uuid_v7(), '$ACCOUNT', '$KEY_ID', 'text', 'Is this a friendly message about the weather today?');
SQL
log "pgbench: $CONNECTIONS clients, ${DURATION}s"
pgbench -n -c "$CONNECTIONS" -j 2 -T "$DURATION" -f "$WORK/insert.sql" "$DB" > "$WORK/pgbench.out" 2>&1
pg_tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$WORK/pgbench.out" | head -1)
ratio=$(python3 -c "print(round($submit_rps / $pg_tps, 2))")

cat <<OUT
submit: accepted ${submit_rps}/s (${accepted} jobs, non-2xx ${non2xx[plain]}, socket errors ${sockerr[plain]})
submit: latency p50 $(ms "${worst_p50[plain]}") ms, p99 $(ms "${worst_p99[plain]}") ms (worst slice)
submit keyed: accepted ${keyed_rps}/s (${keyed_accepted} jobs, non-2xx ${non2xx[keyed]}, socket errors ${sockerr[keyed]})
submit keyed: latency p50 $(ms "${worst_p50[keyed]}") ms, p99 $(ms "${worst_p99[keyed]}") ms (worst slice)
ratio keyed/plain: ${keyed_ratio}   (target >= 0.90)
pgbench: ${pg_tps} tps
ratio submit/pgbench: ${ratio}   (target >= 0.6)
api peak RSS: ${api_rss_mb} MB   (target <= 100)
OUT
rm -rf "$WORK"
