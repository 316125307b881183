#!/usr/bin/env bash
# Worker memory per media job: JOBS (default 8) image jobs of 100 MiB each, submitted at once
# through the api to one image worker running them all concurrently, with the openai provider
# pointed at a local server (tests/examples/media_model_server.rs) that serves the images and
# answers every chat completion with a passing verdict. Each job downloads, hashes (SHA-256 and
# PDQ) and sends its image as a base64 data: URL. Prints the worker's peak RSS (VmHWM) against
# JOBS x 100 MiB of media. Target: the bytes held once, so the peak stays near JOBS x 100 MiB
# (not the ~4-5x of copies for hashing and a whole-body data: URL).
# WORKER_BIN=path measures another worker build (an older commit's, for a before/after).
source "$(dirname "$0")/../lib.sh"
JOBS=${JOBS:-8}
WORKER_BIN=${WORKER_BIN:-$BIN/worker}

DB=$(bench_database media_memory)
NS="bench-media-memory-$$"
PORT=$(free_port)
cargo build --release --quiet -p moderation-tests --example media_model_server
coproc SERVER { "$ROOT/target/release/examples/media_model_server"; }
read -r SERVER_URL <&"${SERVER[0]}"
export DATABASE_URL=$DB REDIS_URL=$REDIS_BASE_URL APP_REDIS_NAMESPACE=$NS PORT RUST_LOG=warn
export APP_ALLOW_PRIVATE_URLS=true APP_CLASSIFIER=openai APP_OPENAI_BASE_URL=$SERVER_URL \
  APP_VISION_MODEL=bench APP_OPENAI_TIMEOUT_MS=120000 APP_WORKER_CONCURRENCY="image=$JOBS"
org=$("$BIN/modctl" org create --name bench | json_field org_id)
"$BIN/modctl" org set "$org" --rate-per-minute 100000000 >/dev/null
KEY=$("$BIN/modctl" key create --org "$org" --scopes moderate:image | json_field key)

"$BIN/api" & API=$!
METRICS_PORT=$(free_port) "$WORKER_BIN" --modality image & WORKER=$!
cleanup() {
  kill "$API" "$WORKER" 2>/dev/null || true
  wait "$API" "$WORKER" 2>/dev/null || true
  exec {SERVER[1]}>&-
  redis-cli -p "$REDIS_PORT" --scan --pattern "$NS:*" | xargs -r redis-cli -p "$REDIS_PORT" del >/dev/null
}
trap cleanup EXIT
wait_http "http://127.0.0.1:$PORT/health"
sleep 1
idle_kb=$(peak_rss_kb "$WORKER")

submits=()
for i in $(seq 1 "$JOBS"); do
  curl -fs -o /dev/null -H "Authorization: Bearer $KEY" -F "image=$SERVER_URL/media/$i.png" \
    "http://127.0.0.1:$PORT/api/v1/moderate/image" & submits+=($!)
done
wait "${submits[@]}"
for _ in $(seq 1 3000); do
  [ "$(psql "$DB" -qAtc "SELECT count(*) FROM jobs WHERE status IN ('queued','processing')")" = 0 ] && break
  sleep 0.1
done
peak_kb=$(peak_rss_kb "$WORKER")
read -r done failed seconds < <(psql "$DB" -qAtF' ' -c "
  SELECT count(*) FILTER (WHERE status = 'completed'), count(*) FILTER (WHERE status = 'failed'),
         round(extract(epoch FROM max(completed_at) - min(created_at))::numeric, 1)
  FROM jobs")
[ "$failed" = 0 ] || psql "$DB" -qAtc "SELECT DISTINCT error_code FROM jobs WHERE status = 'failed'" >&2 || true
media_kb=$(( JOBS * 100 * 1024 ))
awk -v idle="$idle_kb" -v peak="$peak_kb" -v media="$media_kb" -v jobs="$JOBS" \
  -v done="$done" -v failed="$failed" -v secs="$seconds" 'BEGIN {
  printf "media_memory: worker peak RSS %.0f MiB (idle %.0f MiB) for %d concurrent 100 MiB image jobs: %.2fx the %.0f MiB of media (%.2fx above idle); %d completed, %d failed in %s s\n",
    peak / 1024, idle / 1024, jobs, peak / media, media / 1024, (peak - idle) / media, done, failed, secs
}'
