#!/usr/bin/env bash
# End to end with the built-in text model (local provider, APP_LOCAL_MODELS=required): varied
# prompts submitted through the api by wrk (64 connections, DURATION s, default 5: the api takes
# in far more than the worker finishes, so a longer run only lengthens the backlog), classified
# by one text worker (two of the ten prompts in Spanish and Japanese, judged by the multilingual
# encoder); completed jobs/s over the run (first submission to last completion, once
# every job has finished: at most 600 s), the share rejected, and the worker's peak RSS with
# the text models loaded (idle after loading, and after the run). Target: >= 300 completed
# text jobs/s on 2 cores.
# The models come from scripts/models (APP_MODEL_DIR, else the default directory).
# WORKER_CPUS (a taskset list such as 0) pins the worker to those cores; WORKER_QUOTA (a whole
# number of cores) runs it in a cgroup of its own whose CPU quota is that many cores, on any
# core. The worker sizes its runtime, inference pool and text concurrency to the cores either
# allows (APP_WORKER_CONCURRENCY overrides the concurrency).
# WORKER_BIN (a worker binary) runs that worker instead of the one just built: to compare two
# builds side by side in one session.
# BACKLOG=1 submits every job before the worker starts: the rate is then the worker's drain of
# that backlog (its completions from one second after its first until its last), with neither
# the api nor wrk running beside it; the RSS lines are left out (the worker is never idle).
source "$(dirname "$0")/../../lib.sh"
command -v wrk >/dev/null || apt_install wrk
CONNECTIONS=${CONNECTIONS:-64}
DURATION=${DURATION:-5}
MODELS=${APP_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/moderation/models}
"$ROOT/scripts/models" "$MODELS"

DB=$(bench_database models_text)
NS="bench-models-text-$$"
PORT=$(free_port)
WORKER_METRICS=$(free_port)
export DATABASE_URL=$DB REDIS_URL=$REDIS_BASE_URL APP_REDIS_NAMESPACE=$NS PORT RUST_LOG=warn
export APP_AUTH_CONCURRENCY=${APP_AUTH_CONCURRENCY:-1000}
org=$("$BIN/modctl" org create --name bench | json_field org_id)
"$BIN/modctl" org set "$org" --rate-per-minute 100000000 >/dev/null
KEY=$("$BIN/modctl" key create --org "$org" --scopes moderate:prompt | json_field key)

"$BIN/api" & API=$!
pin=()
[ -z "${WORKER_CPUS:-}" ] || pin=(taskset -c "$WORKER_CPUS")
GROUP=
if [ -n "${WORKER_QUOTA:-}" ]; then
  GROUP=$(quota_cgroup "models-text-$$" "$WORKER_QUOTA")
  pin+=(sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$GROUP")
fi
WORKER=
cleanup() {
  kill "$API" $WORKER 2>/dev/null || true
  wait "$API" $WORKER 2>/dev/null || true
  [ -z "$GROUP" ] || rmdir "$GROUP" 2>/dev/null || true
  redis-cli -p "$REDIS_PORT" --scan --pattern "$NS:*" | xargs -r redis-cli -p "$REDIS_PORT" del >/dev/null
}
trap cleanup EXIT
# Starts the worker and waits until it has loaded the text models (it serves /metrics then).
start_worker() {
  APP_MODEL_DIR=$MODELS APP_LOCAL_MODELS=required METRICS_PORT=$WORKER_METRICS \
    "${pin[@]}" "${WORKER_BIN:-$BIN/worker}" --modality text & WORKER=$!
  wait_http "http://127.0.0.1:$WORKER_METRICS/metrics"
  curl -fs "http://127.0.0.1:$WORKER_METRICS/metrics" | grep -q 'classifier_model_loaded{model="text_embedding"} 1' ||
    die "the worker did not load the text models from $MODELS"
}
wait_http "http://127.0.0.1:$PORT/health"
if [ -z "${BACKLOG:-}" ]; then
  start_worker
  idle_kb=$(peak_rss_kb "$WORKER")
fi

WORK=$(mktemp -d)
BOUNDARY=benchboundary7d1f
cat > "$WORK/submit.lua" <<LUA
local texts = {
  "Is this a friendly message about the weather today? I hope the picnic goes well.",
  "Can you send me the slides from this morning's meeting before five?",
  "I could murder a pizza after that hike, who's in?",
  "My flight got delayed again, so I'll be late for dinner. Save me some dessert!",
  "Stop replying to my posts, you absolute clown, nobody cares what you think.",
  "We're organising a charity run for mental health awareness next month, join us.",
  "The new release fixes the crash when exporting reports to PDF.",
  "I know where you live and you'd better watch your back tonight.",
  "¿Quedamos el sábado para ver el partido en casa de Marta?",
  "明日の会議の資料、今日中に送ってもらえますか？",
}
local bodies = {}
for i, t in ipairs(texts) do
  bodies[i] = "--$BOUNDARY\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\n" .. t .. "\r\n--$BOUNDARY--\r\n"
end
local n = 0
request = function()
  n = n + 1
  return wrk.format("POST", nil, {
    ["Authorization"] = "Bearer $KEY",
    ["Content-Type"] = "multipart/form-data; boundary=$BOUNDARY",
  }, bodies[(n % #bodies) + 1])
end
LUA

log "models-text saturation: wrk $CONNECTIONS connections, ${DURATION}s"
wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --timeout 5s -s "$WORK/submit.lua" \
  "http://127.0.0.1:$PORT/api/v1/moderate/prompt" > "$WORK/sat.out"
[ -z "${BACKLOG:-}" ] || start_worker
# Polled twice a second (each poll is a psql process on the worker's cores); the rate comes
# from the jobs' own times, not from the poll.
for i in $(seq 1 1200); do
  [ "$(psql "$DB" -qAtc "SELECT count(*) FROM jobs WHERE status IN ('queued','processing')")" = 0 ] && break
  sleep 0.5
done
if [ -z "${BACKLOG:-}" ]; then
  over="min(created_at)" what="with the text models"
else
  over="min(completed_at) + interval '1 second'" what="with the text models, a backlog drained by the worker alone"
fi
read -r jobs rate failed rejected < <(psql "$DB" -qAtF' ' -c "
  WITH span AS (SELECT $over AS since, max(completed_at) AS until FROM jobs)
  SELECT count(*),
         round(count(*) FILTER (WHERE completed_at > since)
               / extract(epoch FROM max(until) - max(since)))::int,
         count(*) FILTER (WHERE status <> 'completed'),
         count(*) FILTER (WHERE is_prohibited)
  FROM jobs, span")

echo "models-text: ${rate} completed text jobs/s $what (${jobs} jobs, ${failed} not completed, ${rejected} rejected)   (target >= 300)"
[ -n "${BACKLOG:-}" ] ||
  echo "models-text: worker peak RSS $(( idle_kb / 1024 )) MB with the models loaded (idle), $(( $(peak_rss_kb "$WORKER") / 1024 )) MB after the run"
rm -rf "$WORK"
