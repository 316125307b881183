#!/usr/bin/env bash
# Capacity (issue 40; docs/scaling.md, "Capacity"): what one completed job costs and what that
# predicts. The fleet (api, one text worker on lists only, the dispatcher) on this machine's
# Postgres and Redis; every prompt carries a webhook_url to a local HTTPS receiver (a client's,
# so its CPU is not the fleet's).
#  1. Saturation: wrk with 64 connections for DURATION s; completed jobs/s and cores busy.
#  2. At 25, 50 and 75 % of that rate (wrk paced over the same connections), DURATION s each,
#     read over the steady part of the run: per completed job, the CPU of Postgres, Redis, the
#     api, the worker and the dispatcher, the machine's CPU (everything: the load generator and
#     the receiver too), the WAL written and the Redis commands run.
#     STATEMENTS=1 (with pg_stat_statements loaded) also prints, per phase, the statements
#     that cost Postgres most: calls and Postgres milliseconds (planning and execution) per
#     hundred completed jobs, and rows per call (a batch statement's batch size).
#  3. Prediction: a line fitted through the cores busy at the three loads (a fixed part and a
#     part per job) reaches the machine's cores at the rate where the CPU runs out, whatever
#     the number of worker processes; checked against a saturation run with two worker
#     processes (the two-worker-host topology on this machine's cores). Target: within ±15 %.
source "$(dirname "$0")/../lib.sh"
command -v wrk >/dev/null || apt_install wrk
CONNECTIONS=${CONNECTIONS:-64}
DURATION=${DURATION:-20}
CORES=$(nproc)

DB=$(bench_database capacity)
[ -z "${STATEMENTS:-}" ] ||
  psql "$DB" -qc "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null ||
  die "STATEMENTS=1 needs pg_stat_statements in shared_preload_libraries"
NS="bench-capacity-$$"
PORT=$(free_port)
WORK=$(mktemp -d)
export DATABASE_URL=$DB REDIS_URL=$REDIS_BASE_URL APP_REDIS_NAMESPACE=$NS PORT RUST_LOG=warn
export APP_AUTH_CONCURRENCY=${APP_AUTH_CONCURRENCY:-1000}
export APP_WORKER_CONCURRENCY=${APP_WORKER_CONCURRENCY:-text=32}
export APP_ALLOW_PRIVATE_URLS=true APP_EXTRA_CA_FILE=$WORK/ca.pem
export APP_MODEL_DIR=$WORK/no-models
mkdir "$APP_MODEL_DIR"
org=$("$BIN/modctl" org create --name bench | json_field org_id)
"$BIN/modctl" org set "$org" --rate-per-minute 100000000 >/dev/null
KEY=$("$BIN/modctl" key create --org "$org" --scopes moderate:prompt | json_field key)

cargo build --release --quiet -p moderation-tests --example webhook_receiver
coproc RECEIVER { "$ROOT/target/release/examples/webhook_receiver" "$WORK/ca.pem" --count-only; }
read -r RECEIVER_URL <&"${RECEIVER[0]}"
"$BIN/api" & API=$!
METRICS_PORT=0 "$BIN/dispatcher" & DISPATCHER=$!
METRICS_PORT=0 "$BIN/worker" --modality text & WORKER=$!
WORKERS=("$WORKER")
cleanup() {
  kill "$API" "$DISPATCHER" "${WORKERS[@]}" 2>/dev/null || true
  wait "$API" "$DISPATCHER" "${WORKERS[@]}" 2>/dev/null || true
  exec {RECEIVER[1]}>&-
  redis-cli -p "$REDIS_PORT" --scan --pattern "$NS:*" | xargs -r redis-cli -p "$REDIS_PORT" del >/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
wait_http "http://127.0.0.1:$PORT/health"

# $1: milliseconds each connection waits between requests (0: as fast as it can).
write_script() { prompt_script "$WORK/submit.lua" "$KEY" "$1" "$RECEIVER_URL/hook"; }

# Waits until every job is done and every delivery delivered (at most 120 s).
drain() {
  local i
  for i in $(seq 1 240); do
    [ "$(psql "$DB" -qAtc "
      SELECT (SELECT count(*) FROM jobs WHERE status IN ('queued','processing'))
           + (SELECT count(*) FROM deliveries WHERE state = 'pending')")" = 0 ] && return 0
    sleep 0.5
  done
  die "jobs or deliveries did not drain"
}

REDIS_PID=$(redis-cli -p "$REDIS_PORT" info server | awk -F: '/^process_id/ {print $2+0}')
# The machine's busy CPU time (ms, every core) so far, from /proc/stat.
machine_ms() {
  awk '/^cpu / {print int(($2 + $3 + $4 + $7 + $8) * 1000 / '"$(getconf CLK_TCK)"')}' /proc/stat
}
redis_commands() {
  redis-cli -p "$REDIS_PORT" info stats | awk -F: '/^total_commands_processed/ {print $2+0}'
}
# One line of counters: machine, postgres, redis, api, workers, dispatcher (CPU ms), WAL
# position (bytes), Redis commands.
counters() {
  echo "$(machine_ms) $(postgres_cpu_ms "$DB") $(cpu_ms "$REDIS_PID") $(cpu_ms "$API") \
$(cpu_ms "${WORKERS[@]}") $(cpu_ms "$DISPATCHER") \
$(psql "$DB" -qAtc "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint") \
$(redis_commands)"
}

# Runs wrk with $1 connections, $2 ms between each one's requests, for DURATION s, and reads
# the counters over its steady part (from 2 s in to 1 s before its end); then drains. Prints
# the jobs completed in that window, their rate (jobs/s), the cores busy, and the counters'
# growth per completed job: machine, postgres, redis, api, worker, dispatcher (us), WAL bytes,
# Redis commands.
phase() {
  psql "$DB" -qc "TRUNCATE jobs CASCADE" >/dev/null
  write_script "$2"
  wrk -t2 -c"$1" -d"${DURATION}s" --timeout 5s -s "$WORK/submit.lua" \
    "http://127.0.0.1:$PORT/api/v1/moderate/prompt" >/dev/null &
  local load=$! before after from to jobs window
  sleep 2 # the load's schedule: its first seconds are a ramp
  from=$(psql "$DB" -qAtc "SELECT now()")
  before=$(counters)
  [ -z "${STATEMENTS:-}" ] || psql "$DB" -qAtc "SELECT pg_stat_statements_reset()" >/dev/null
  sleep $((DURATION - 3))
  to=$(psql "$DB" -qAtc "SELECT now()")
  after=$(counters)
  [ -z "${STATEMENTS:-}" ] || psql "$DB" -qAtF$'\t' -c "
    SELECT calls, rows, round((total_plan_time + total_exec_time)::numeric, 1),
           round(total_plan_time::numeric, 1), left(regexp_replace(query, '\s+', ' ', 'g'), 70)
    FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
    ORDER BY total_plan_time + total_exec_time DESC LIMIT 14" >"$WORK/statements"
  wait "$load"
  drain
  read -r jobs window submitted < <(psql "$DB" -qAtF' ' -c "
    SELECT count(*) FILTER (WHERE completed_at BETWEEN '$from' AND '$to'),
           round(1000 * extract(epoch FROM '$to'::timestamptz - '$from'::timestamptz)),
           count(*) FILTER (WHERE created_at BETWEEN '$from' AND '$to')
    FROM jobs")
  log "window: $jobs jobs completed, $submitted submitted"
  paste -d' ' <(tr ' ' '\n' <<<"$before") <(tr ' ' '\n' <<<"$after") |
    awk -v n="$jobs" -v ms="$window" '
      { d[NR] = $2 - $1 }
      END {
        n = n > 0 ? n : 1
        printf "%d %d %.2f", n, n * 1000 / ms, d[1] / ms
        for (i = 1; i <= 8; i++) printf " %d", (i <= 6 ? d[i] * 1000 : d[i]) / n
        print ""
      }'
  [ -z "${STATEMENTS:-}" ] || awk -F'\t' -v n="$jobs" '
    BEGIN { n = n > 0 ? n : 1 }
    { printf "capacity statements: %7.1f calls %8.1f ms (plan %7.1f) per 100 jobs, %6.1f rows/call  %s\n",
        $1 * 100 / n, $3 * 100 / n, $4 * 100 / n, ($1 > 0 ? $2 / $1 : 0), $5 }' "$WORK/statements" >&2
}

# One row of the table: its load, then what `phase` printed but the job count.
row() {
  local load=$1 rate cores machine pg redis api worker dispatcher wal commands
  read -r _ rate cores machine pg redis api worker dispatcher wal commands <<<"$2"
  printf 'capacity per completed job: %-9s %6s  %5s  %10s %11s %8s %6s %9s %13s %9s %14s\n' \
    "$load" "$rate" "$cores" "$machine" "$pg" "$redis" "$api" "$worker" "$dispatcher" "$wal" "$commands"
}
echo "capacity per completed job: load      jobs/s  cores  machine_us postgres_us redis_us api_us worker_us dispatcher_us wal_bytes redis_commands"
log "saturation, one worker: wrk $CONNECTIONS connections, ${DURATION}s"
saturated=$(phase "$CONNECTIONS" 0)
row "saturated" "$saturated"
read -r _ sat_rate _ <<<"$saturated"
fit=""
for pct in 25 50 75; do
  # CONNECTIONS connections at pct % of the saturated rate: each waits CONNECTIONS / rate s
  # between its requests (many connections, so a request's own latency barely slows the pace).
  delay=$(( CONNECTIONS * 100000 / (sat_rate * pct > 0 ? sat_rate * pct : 1) ))
  log "${pct} % of saturation: wrk $CONNECTIONS connections, ${delay} ms between requests, ${DURATION}s"
  paced=$(phase "$CONNECTIONS" "$delay")
  row "$pct %" "$paced"
  read -r _ rate cores _ <<<"$paced"
  fit="$fit $rate $cores"
done

# The cores busy grow in a line with the rate (a fixed part: polling, timers; and a part per
# job): fitted through the three loads, it reaches the machine's cores at the predicted rate.
read -r fixed per_job predicted < <(awk -v cores="$CORES" -v pts="$fit" 'BEGIN {
  n = split(pts, p, " ") / 2
  for (i = 1; i <= n; i++) { x = p[2*i-1]; y = p[2*i]; sx += x; sy += y; sxy += x*y; sxx += x*x }
  b = (n*sxy - sx*sy) / (n*sxx - sx*sx); a = (sy - b*sx) / n
  printf "%.2f %d %d\n", a, b * 1e6, (cores - a) / b }')
echo "capacity prediction: cores busy = ${fixed} + ${per_job} us x jobs/s (fitted at 25/50/75 %), so ${CORES} cores run out at ${predicted} jobs/s"

log "saturation, two workers: wrk $CONNECTIONS connections, ${DURATION}s"
METRICS_PORT=0 "$BIN/worker" --modality text & WORKERS+=("$!")
two=$(phase "$CONNECTIONS" 0)
row "2 workers" "$two"
read -r _ two_rate _ <<<"$two"
echo "capacity two workers at saturation: ${two_rate} completed jobs/s; measured / predicted $(awk -v m="$two_rate" -v p="$predicted" 'BEGIN { printf "%.2f", m / p }')   (target 0.85 to 1.15)"
