#!/usr/bin/env bash
# End to end with the local provider: prompts submitted through the api, classified by a text
# worker, completed in Postgres (no webhook target, so the dispatcher has nothing to do). The
# worker gets an empty model directory: lists and keywords only, the path every job takes
# (`scripts/bench models` measures the built-in models).
#  1. Saturation: wrk with 64 connections for 20 s; completed jobs/s over the run, from the
#     first submission to the last completion, once every job has finished; and the CPU
#     time per job of the api, the worker and Postgres over the run.
#  2. Below saturation: wrk paced (each of 8 connections waits between requests) at roughly
#     half the saturated rate; p50/p99 of submit-to-completed (created_at to completed_at).
#  3. Over both: the updates of `jobs` rows, and the share of them that were HOT (no index
#     entry written; V021), from Postgres's statistics once every backend has flushed them.
#  4. Unless PGBENCH=0: pgbench's TPC-B (scale 16, 16 clients, DURATION) on its own database of
#     the same server, and the saturated rate over its transactions/s (issue 40, item 5).
# Targets: >= 2,000 completed text jobs/s; p50 <= 50 ms below saturation.
source "$(dirname "$0")/../lib.sh"
command -v wrk >/dev/null || apt_install wrk
CONNECTIONS=${CONNECTIONS:-64}
DURATION=${DURATION:-20}

DB=$(bench_database e2e)
NS="bench-e2e-$$"
PORT=$(free_port)
export DATABASE_URL=$DB REDIS_URL=$REDIS_BASE_URL APP_REDIS_NAMESPACE=$NS PORT RUST_LOG=warn
export APP_AUTH_CONCURRENCY=${APP_AUTH_CONCURRENCY:-1000}
export APP_WORKER_CONCURRENCY=${APP_WORKER_CONCURRENCY:-text=32}
NO_MODELS=$(mktemp -d)
export APP_MODEL_DIR=$NO_MODELS
org=$("$BIN/modctl" org create --name bench | json_field org_id)
"$BIN/modctl" org set "$org" --rate-per-minute 100000000 >/dev/null
KEY=$("$BIN/modctl" key create --org "$org" --scopes moderate:prompt | json_field key)

"$BIN/api" & API=$!
METRICS_PORT=$(free_port) "$BIN/worker" --modality text & WORKER=$!
cleanup() {
  kill "$API" "$WORKER" 2>/dev/null || true
  wait "$API" "$WORKER" 2>/dev/null || true
  redis-cli -p "$REDIS_PORT" --scan --pattern "$NS:*" | xargs -r redis-cli -p "$REDIS_PORT" del >/dev/null
  rmdir "$NO_MODELS"
}
trap cleanup EXIT
wait_http "http://127.0.0.1:$PORT/health"

WORK=$(mktemp -d)
# $1: milliseconds each connection waits between requests (0: as fast as it can).
write_script() { prompt_script "$WORK/submit.lua" "$KEY" "$1"; }

# Waits until no job is queued or processing (at most 120 s), twice a second: each look counts
# `open_jobs` (a look at `jobs` read the whole table, 40 ms of Postgres CPU at 100,000 jobs). The
# rates come from the jobs' own timestamps.
drain() {
  local i
  for i in $(seq 1 240); do
    [ "$(psql "$DB" -qAtc "SELECT count(*) FROM open_jobs")" = 0 ] && return 0
    sleep 0.5
  done
  die "jobs did not drain"
}

log "saturation: wrk $CONNECTIONS connections, ${DURATION}s"
write_script 0
cpu_api=$(cpu_ms "$API") cpu_worker=$(cpu_ms "$WORKER") cpu_pg=$(postgres_cpu_ms "$DB")
wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --timeout 5s -s "$WORK/submit.lua" \
  "http://127.0.0.1:$PORT/api/v1/moderate/prompt" > "$WORK/sat.out"
drain
cpu_api=$(( $(cpu_ms "$API") - cpu_api )) cpu_worker=$(( $(cpu_ms "$WORKER") - cpu_worker ))
cpu_pg=$(( $(postgres_cpu_ms "$DB") - cpu_pg ))
read -r sat_jobs sat_rate sat_failed < <(psql "$DB" -qAtF' ' -c "
  SELECT count(*),
         round(count(*) / extract(epoch FROM max(completed_at) - min(created_at)))::int,
         count(*) FILTER (WHERE status <> 'completed')
  FROM jobs")
# CPU per job in microseconds.
per_job() { echo $(( $1 * 1000 / (sat_jobs > 0 ? sat_jobs : 1) )); }
psql "$DB" -qc "TRUNCATE jobs CASCADE"

# Half the saturated rate over 8 connections: each waits 8 / (rate / 2) s between requests.
PACED_DELAY_MS=${PACED_DELAY_MS:-$(( 16000 / (sat_rate > 0 ? sat_rate : 1) ))}
log "below saturation: wrk 8 connections, ${PACED_DELAY_MS} ms between requests, ${DURATION}s"
write_script "$PACED_DELAY_MS"
wrk -t2 -c8 -d"${DURATION}s" --timeout 5s --latency -s "$WORK/submit.lua" \
  "http://127.0.0.1:$PORT/api/v1/moderate/prompt" > "$WORK/paced.out"
http_p50=$(awk '$1 == "50%" {print $2}' "$WORK/paced.out")
http_p99=$(awk '$1 == "99%" {print $2}' "$WORK/paced.out")
drain
read -r paced_jobs paced_rate p50 p99 < <(psql "$DB" -qAtF' ' -c "
  SELECT count(*),
         round(count(*) / extract(epoch FROM max(created_at) - min(created_at)))::int,
         round((1000 * extract(epoch FROM percentile_disc(0.5) WITHIN GROUP (ORDER BY completed_at - created_at)))::numeric, 1),
         round((1000 * extract(epoch FROM percentile_disc(0.99) WITHIN GROUP (ORDER BY completed_at - created_at)))::numeric, 1)
  FROM jobs")

# Idle backends flush their statistics within 10 s (PGSTAT_IDLE_INTERVAL).
sleep 11
read -r updates hot < <(psql "$DB" -qAtF' ' -c "
  SELECT coalesce(sum(n_tup_upd), 0), coalesce(sum(n_tup_hot_upd), 0) FROM pg_stat_user_tables
  WHERE relid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'jobs'::regclass)")

cat <<OUT
e2e saturation: ${sat_rate} completed text jobs/s (${sat_jobs} jobs, ${sat_failed} not completed)   (target >= 2000)
e2e saturation, CPU per job from submission to completion: api $(per_job "$cpu_api") us, worker $(per_job "$cpu_worker") us, postgres $(per_job "$cpu_pg") us
e2e below saturation: ${paced_rate} jobs/s offered, submit-to-completed p50 ${p50} ms, p99 ${p99} ms   (target p50 <= 50)
e2e below saturation: the submission's HTTP round trip p50 ${http_p50}, p99 ${http_p99}
e2e updates of jobs rows: ${updates}, HOT: ${hot} ($(( hot * 100 / (updates > 0 ? updates : 1) )) %)
api peak RSS: $(( $(peak_rss_kb "$API") / 1024 )) MB, worker peak RSS: $(( $(peak_rss_kb "$WORKER") / 1024 )) MB
OUT
if [ "${PGBENCH:-1}" != 0 ]; then
  kill "$API" "$WORKER" 2>/dev/null || true
  wait "$API" "$WORKER" 2>/dev/null || true
  log "pgbench TPC-B: scale 16, 16 clients, ${DURATION}s"
  PGB_DB=$PG_BASE_URL/bench_pgbench
  psql "$PG_BASE_URL/postgres" -qc "DROP DATABASE IF EXISTS bench_pgbench WITH (FORCE)" >/dev/null
  psql "$PG_BASE_URL/postgres" -qc "CREATE DATABASE bench_pgbench" >/dev/null
  pgbench -i -q -s 16 "$PGB_DB" >/dev/null 2>&1
  tps=$(pgbench -n -c 16 -j 2 -T "$DURATION" "$PGB_DB" 2>&1 | sed -n 's/^tps = \([0-9.]*\).*/\1/p' | head -1)
  psql "$PG_BASE_URL/postgres" -qc "DROP DATABASE bench_pgbench WITH (FORCE)" >/dev/null
  echo "pgbench TPC-B (16 clients): ${tps} tps; e2e saturated / pgbench: $(python3 -c "print(round($sat_rate / $tps, 2))")"
fi
rm -rf "$WORK"
