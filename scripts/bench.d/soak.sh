#!/usr/bin/env bash
# A soak: the whole fleet (api, text worker, dispatcher) under submissions with webhooks to a
# local HTTPS receiver at half the saturated rate for SOAK_MINUTES (default 10). The resident
# set of every process is sampled every 15 s; after a warm-up (the first fifth of the run) it
# must stay flat, and the logs must hold no error.
#  1. Saturation: wrk with 64 connections for 5 s, then the backlog drained; the fleet's rate
#     is the lower of the submissions/s the api accepted and the jobs/s completed.
#  2. Soak: 8 paced connections at half that rate.
# Targets: RSS growth after warm-up <= 10 % per process; 0 ERROR lines; every job completed
# and every delivery delivered.
source "$(dirname "$0")/../lib.sh"
command -v wrk >/dev/null || apt_install wrk
MINUTES=${SOAK_MINUTES:-10}
SAMPLE=15

DB=$(bench_database soak)
NS="bench-soak-$$"
PORT=$(free_port)
WORK=$(mktemp -d)
cargo build --release --quiet -p moderation-tests --example webhook_receiver
coproc RECEIVER { "$ROOT/target/release/examples/webhook_receiver" "$WORK/ca.pem" --count-only 2>"$WORK/receiver.out"; }
read -r RECEIVER_URL <&"${RECEIVER[0]}"
export DATABASE_URL=$DB REDIS_URL=$REDIS_BASE_URL APP_REDIS_NAMESPACE=$NS PORT RUST_LOG=warn
export APP_AUTH_CONCURRENCY=1000 APP_WORKER_CONCURRENCY=text=32
export APP_ALLOW_PRIVATE_URLS=true APP_EXTRA_CA_FILE=$WORK/ca.pem
org=$("$BIN/modctl" org create --name soak | json_field org_id)
"$BIN/modctl" org set "$org" --rate-per-minute 100000000 >/dev/null
KEY=$("$BIN/modctl" key create --org "$org" --scopes moderate:prompt | json_field key)

"$BIN/api" > "$WORK/api.log" 2>&1 & API=$!
METRICS_PORT=$(free_port) "$BIN/worker" --modality text > "$WORK/worker.log" 2>&1 & WORKER=$!
METRICS_PORT=$(free_port) "$BIN/dispatcher" > "$WORK/dispatcher.log" 2>&1 & DISPATCHER=$!
cleanup() {
  kill "$API" "$WORKER" "$DISPATCHER" 2>/dev/null || true
  wait "$API" "$WORKER" "$DISPATCHER" 2>/dev/null || true
  [ -n "${RECEIVER[1]:-}" ] && exec {RECEIVER[1]}>&- 2>/dev/null
  redis-cli -p "$REDIS_PORT" --scan --pattern "$NS:*" | xargs -r redis-cli -p "$REDIS_PORT" del >/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
wait_http "http://127.0.0.1:$PORT/health"

# $1: milliseconds each connection waits between requests (0: as fast as it can).
write_script() { prompt_script "$WORK/submit.lua" "$KEY" "$1" "$RECEIVER_URL/hook"; }

# Waits until every job is finished and every delivery has ended (at most 600 s).
drain() {
  local i
  for i in $(seq 1 6000); do
    [ "$(psql "$DB" -qAtc "SELECT (SELECT count(*) FROM jobs WHERE status IN ('queued','processing')) + (SELECT count(*) FROM deliveries WHERE state = 'pending')")" = 0 ] && return 0
    sleep 0.1
  done
  die "jobs or deliveries did not drain"
}

log "saturation: wrk 64 connections, 5 s, then the backlog drained"
write_script 0
wrk -t2 -c64 -d5s --timeout 5s -s "$WORK/submit.lua" "http://127.0.0.1:$PORT/api/v1/moderate/prompt" > "$WORK/sat.out"
accepted=$(awk '/^Requests\/sec/ {printf "%d", $2}' "$WORK/sat.out")
drain
# The fleet's saturated rate is what it completes, not what the api accepts: with the text
# models on, the worker finishes far fewer jobs a second than the api takes in.
finished=$(psql "$DB" -qAtc "SELECT round(count(*) / extract(epoch FROM max(completed_at) - min(created_at)))::int FROM jobs")
sat_rate=$(( accepted < finished ? accepted : finished ))
log "saturation: api accepted ${accepted}/s, the fleet completed ${finished}/s"
psql "$DB" -qc "TRUNCATE jobs CASCADE"

delay_ms=$(( 16000 / (sat_rate > 0 ? sat_rate : 1) ))
log "soak: ${MINUTES} min at half of ${sat_rate}/s (8 connections, ${delay_ms} ms apart)"
write_script "$delay_ms"
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
: > "$WORK/rss"
wrk -t2 -c8 -d"$((MINUTES * 60))s" --timeout 5s -s "$WORK/submit.lua" \
  "http://127.0.0.1:$PORT/api/v1/moderate/prompt" > "$WORK/soak.out" & WRK=$!
elapsed=0
while kill -0 "$WRK" 2>/dev/null; do
  echo "$elapsed $(rss_kb "$API") $(rss_kb "$WORKER") $(rss_kb "$DISPATCHER")" >> "$WORK/rss"
  sleep "$SAMPLE"
  elapsed=$((elapsed + SAMPLE))
done
wait "$WRK"
drain

warm=$((MINUTES * 60 / 5))
read -r jobs completed < <(psql "$DB" -qAtF' ' -c "SELECT count(*), count(*) FILTER (WHERE status = 'completed') FROM jobs")
read -r deliveries delivered < <(psql "$DB" -qAtF' ' -c "SELECT count(*), count(*) FILTER (WHERE state = 'delivered') FROM deliveries")
errors=$(cat "$WORK/api.log" "$WORK/worker.log" "$WORK/dispatcher.log" | grep -c ' ERROR ' || true)
offered=$(awk '/^Requests\/sec/ {printf "%d", $2}' "$WORK/soak.out")
echo "soak: ${MINUTES} min at ${offered} submissions/s (saturated ${sat_rate}/s): ${completed}/${jobs} jobs completed, ${delivered}/${deliveries} webhooks delivered, ${errors} ERROR lines   (target 0)"
for column in 2 3 4; do
  name=$(echo "api worker dispatcher" | cut -d' ' -f$((column - 1)))
  awk -v c="$column" -v w="$warm" -v n="$name" '
    $1 <= w { base = $c }
    $1 > w { if ($c > peak) peak = $c; last = $c }
    END {
      if (base == 0) { print "soak: " n " RSS: no sample after warm-up"; exit }
      printf "soak: %s RSS %d MB after warm-up, peak %d MB later, end %d MB: growth %.1f %%   (target <= 10 %%)\n",
        n, base / 1024, peak / 1024, last / 1024, 100 * (peak - base) / base
    }' "$WORK/rss"
done
receiver_pid=$RECEIVER_PID
# Every 15 s sample is kept for a closer look (the scenario's directory is removed on exit).
cp "$WORK/rss" "$ROOT/target/soak-rss.txt"
echo "soak: RSS (MB) every minute (every 15 s in target/soak-rss.txt, kB): seconds api worker dispatcher"
awk '$1 % 60 == 0 { printf "soak:   %4d %6.1f %6.1f %6.1f\n", $1, $2 / 1024, $3 / 1024, $4 / 1024 }' "$WORK/rss"
exec {RECEIVER[1]}>&-
wait "$receiver_pid" 2>/dev/null || true
cat "$WORK/receiver.out"
