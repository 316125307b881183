#!/usr/bin/env bash
# A real model server (llama-cpp-python serving SmolLM2-135M-Instruct on CPU) behind the
# openai provider: completed text jobs/s and p50/p99 of submit-to-completed with worker
# concurrency 1, 2 and 4, so operators see how worker concurrency maps to a model server's
# throughput. JOBS prompts are submitted at once per level (default 24).
source "$(dirname "$0")/../lib.sh"
JOBS=${JOBS:-24}
ensure_model_server || die "the model server could not be installed into $MODEL_VENV"

DB=$(bench_database model)
NS="bench-model-$$"
PORT=$(free_port)
MODEL_PORT=$(free_port)
export DATABASE_URL=$DB REDIS_URL=$REDIS_BASE_URL APP_REDIS_NAMESPACE=$NS PORT RUST_LOG=warn
export APP_CLASSIFIER=openai APP_OPENAI_BASE_URL="http://127.0.0.1:$MODEL_PORT" \
  APP_TEXT_MODEL=smollm2 APP_OPENAI_MAX_TOKENS=120 APP_OPENAI_TIMEOUT_MS=120000
org=$("$BIN/modctl" org create --name bench | json_field org_id)
"$BIN/modctl" org set "$org" --rate-per-minute 100000000 >/dev/null
KEY=$("$BIN/modctl" key create --org "$org" --scopes moderate:prompt | json_field key)

# The server reads settings such as PORT from the environment too: keep the api's out of it.
env -u PORT "$MODEL_VENV/bin/python" -m llama_cpp.server --model "$(model_file)" --host 127.0.0.1 \
  --port "$MODEL_PORT" --n_ctx 2048 >/dev/null 2>&1 & MODEL=$!
"$BIN/api" & API=$!
WORKER=
cleanup() {
  kill "$API" "$MODEL" $WORKER 2>/dev/null || true
  wait "$API" "$MODEL" $WORKER 2>/dev/null || true
  redis-cli -p "$REDIS_PORT" --scan --pattern "$NS:*" | xargs -r redis-cli -p "$REDIS_PORT" del >/dev/null
}
trap cleanup EXIT
wait_http "http://127.0.0.1:$PORT/health"
for _ in $(seq 1 1200); do
  curl -fs -o /dev/null "http://127.0.0.1:$MODEL_PORT/v1/models" && break
  sleep 0.1
done

for concurrency in 1 2 4; do
  psql "$DB" -qc "TRUNCATE jobs CASCADE"
  APP_WORKER_CONCURRENCY="text=$concurrency" METRICS_PORT=$(free_port) "$BIN/worker" --modality text & WORKER=$!
  submits=()
  for i in $(seq 1 "$JOBS"); do
    curl -fs -o /dev/null -H "Authorization: Bearer $KEY" \
      -F "text=Please check message number $i: would you like to meet for coffee next week?" \
      "http://127.0.0.1:$PORT/api/v1/moderate/prompt" & submits+=($!)
  done
  wait "${submits[@]}"
  for _ in $(seq 1 6000); do
    [ "$(psql "$DB" -qAtc "SELECT count(*) FROM jobs WHERE status IN ('queued','processing')")" = 0 ] && break
    sleep 0.1
  done
  read -r done failed rate p50 p99 < <(psql "$DB" -qAtF' ' -c "
    SELECT count(*) FILTER (WHERE status = 'completed'), count(*) FILTER (WHERE status = 'failed'),
           round((count(*) / extract(epoch FROM max(completed_at) - min(created_at)))::numeric, 2),
           round(extract(epoch FROM percentile_disc(0.5) WITHIN GROUP (ORDER BY completed_at - created_at))::numeric, 2),
           round(extract(epoch FROM percentile_disc(0.99) WITHIN GROUP (ORDER BY completed_at - created_at))::numeric, 2)
    FROM jobs")
  echo "model: concurrency $concurrency: ${rate} jobs/s, submit-to-completed p50 ${p50} s, p99 ${p99} s (${done} completed, ${failed} failed of $JOBS)"
  kill "$WORKER"; wait "$WORKER" 2>/dev/null || true; WORKER=
done
