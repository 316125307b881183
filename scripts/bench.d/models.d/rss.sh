#!/usr/bin/env bash
# The worker's peak RSS with every built-in model loaded (target <= 800 MB): one worker for all
# modalities with APP_LOCAL_MODELS=required judges a prompt, an image, a 10 s video and a spoken
# clip (made here with ffmpeg and espeak-ng, served over loopback), each JOBS times at once
# (default 4); prints its resident set when idle with the models loaded and at its peak.
source "$(dirname "$0")/../../lib.sh"
JOBS=${JOBS:-4}

DB=$(bench_database models_rss)
NS="bench-models-rss-$$"
PORT=$(free_port)
MEDIA_PORT=$(free_port)
METRICS=$(free_port)
WORK=$(mktemp -d)
ffmpeg -loglevel error -f lavfi -i testsrc=size=640x480 -frames:v 1 "$WORK/image.png"
ffmpeg -loglevel error -f lavfi -i testsrc=size=320x240:rate=10 -t 10 -pix_fmt yuv420p "$WORK/video.mp4"
espeak-ng -w "$WORK/speech.wav" "Good morning everyone, the weekly meeting moves to Thursday at ten."
python3 -m http.server "$MEDIA_PORT" --bind 127.0.0.1 --directory "$WORK" >/dev/null 2>&1 & MEDIA=$!
export DATABASE_URL=$DB REDIS_URL=$REDIS_BASE_URL APP_REDIS_NAMESPACE=$NS PORT RUST_LOG=warn
export APP_ALLOW_PRIVATE_URLS=true APP_LOCAL_MODELS=required APP_WORKER_CONCURRENCY=$JOBS
org=$("$BIN/modctl" org create --name bench | json_field org_id)
"$BIN/modctl" org set "$org" --rate-per-minute 100000000 >/dev/null
KEY=$("$BIN/modctl" key create --org "$org" \
  --scopes moderate:prompt,moderate:image,moderate:video,moderate:audio | json_field key)

"$BIN/api" & API=$!
METRICS_PORT=$METRICS "$BIN/worker" --modality text,image,video,audio & WORKER=$!
cleanup() {
  kill "$API" "$WORKER" "$MEDIA" 2>/dev/null || true
  wait "$API" "$WORKER" "$MEDIA" 2>/dev/null || true
  redis-cli -p "$REDIS_PORT" --scan --pattern "$NS:*" | xargs -r redis-cli -p "$REDIS_PORT" del >/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
wait_http "http://127.0.0.1:$PORT/health"
wait_http "http://127.0.0.1:$METRICS/metrics"
loaded=$(curl -fs "http://127.0.0.1:$METRICS/metrics" | awk '/^classifier_model_loaded/ && $2 == 1 {n++} END {print n+0}')
idle_kb=$(peak_rss_kb "$WORKER")

media="http://127.0.0.1:$MEDIA_PORT"
submits=()
for _ in $(seq 1 "$JOBS"); do
  for request in "prompt text=I will find where you live and hurt you" \
    "prompt text=Te voy a encontrar y te vas a arrepentir" "image image=$media/image.png" \
    "video video=$media/video.mp4" "audio audio=$media/speech.wav"; do
    curl -fs -o /dev/null -H "Authorization: Bearer $KEY" -F "${request#* }" \
      "http://127.0.0.1:$PORT/api/v1/moderate/${request%% *}" & submits+=($!)
  done
done
wait "${submits[@]}"
for _ in $(seq 1 6000); do
  [ "$(psql "$DB" -qAtc "SELECT count(*) FROM jobs WHERE status IN ('queued','processing')")" = 0 ] && break
  sleep 0.1
done
peak_kb=$(peak_rss_kb "$WORKER")
read -r done failed < <(psql "$DB" -qAtF' ' -c "
  SELECT count(*) FILTER (WHERE status = 'completed'), count(*) FILTER (WHERE status = 'failed') FROM jobs")
[ "$failed" = 0 ] || psql "$DB" -qAtc "SELECT DISTINCT error_code, error_message FROM jobs WHERE status = 'failed'" >&2 || true
awk -v idle="$idle_kb" -v peak="$peak_kb" -v loaded="$loaded" -v done="$done" -v failed="$failed" 'BEGIN {
  printf "models_rss: worker with %d models loaded: idle %.0f MB, peak %.0f MB over %d jobs (%d failed) (target <= 800 MB)\n",
    loaded, idle * 1024 / 1e6, peak * 1024 / 1e6, done, failed
}'
