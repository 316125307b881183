#!/usr/bin/env bash
# Export throughput and memory: GET /api/v1/jobs/export over 100,000 and 1,000,000 job rows
# of one account, each against a fresh release api. Prints rows/s, bytes and the api's peak
# RSS, which must not grow with the row count (the export streams). Targets: >= 200,000
# rows/s and <= 64 MB peak RSS. Run through scripts/bench (it builds and exports $BIN).
source "$(dirname "$0")/../lib.sh"
: "${BIN:?run me through scripts/bench}"

DB=$(bench_database export)
export DATABASE_URL=$DB
export REDIS_URL=$REDIS_BASE_URL

# Inserts $2 completed jobs for account $1 with key $3, created 10 s apart from 2026-01-01.
insert_jobs() {
  bench_partitions "$DB" "'2026-01-01 00:00:00+00'"
  psql "$DB" -qc "
    INSERT INTO jobs (id, account_id, api_key_id, type, status, stage, content, is_prohibited,
                      reason, categories, nsfw_checked, created_at, updated_at, completed_at)
    SELECT uuid_v7(ts), '$1', '$3',
           CASE WHEN i % 3 = 0 THEN 'image' ELSE 'text' END,
           'completed', 'done',
           CASE WHEN i % 3 = 0 THEN 'https://example.com/media/' || i || '.png'
                ELSE 'prompt number ' || i || ', with a comma and \"quotes\"' END,
           i % 7 = 0,
           CASE WHEN i % 7 = 0 THEN 'flagged by the blocklist' END,
           CASE WHEN i % 3 = 0 THEN jsonb_build_object('nsfw', i % 2 = 0, 'underage', false,
                                                       'ai_adult_general', false) END,
           CASE WHEN i % 3 = 0 THEN true END,
           ts, ts, ts + interval '1 second'
    FROM generate_series(1, $2) AS i,
         LATERAL (SELECT timestamptz '2026-01-01 00:00:00+00' + i * interval '10 seconds') AS t(ts)"
  psql "$DB" -qc "ANALYZE jobs"
}

# Prints "rows seconds bytes rows_per_second peak_rss_kb" for an export of account key $1.
run_export() {
  local rows=$1 key=$2 port pid out
  port=$(free_port)
  PORT=$port APP_HOST=127.0.0.1 APP_REDIS_NAMESPACE="bench-export-$$" RUST_LOG=warn \
    "$BIN/api" >/tmp/bench-export-api.log 2>&1 &
  pid=$!
  wait_http "http://127.0.0.1:$port/health"
  out=$(curl -sS -o /dev/null -w '%{http_code} %{time_total} %{size_download}' \
    -H "Authorization: Bearer $key" \
    "http://127.0.0.1:$port/api/v1/jobs/export?from=2025-12-01T00:00:00Z&to=2026-12-01T00:00:00Z")
  local rss
  rss=$(peak_rss_kb "$pid")
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  set -- $out
  [ "$1" = 200 ] || die "export answered $1"
  awk -v rows="$rows" -v t="$2" -v bytes="$3" -v rss="$rss" 'BEGIN {
    printf "%9d rows  %6.2f s  %10d bytes  %9.0f rows/s  peak RSS %6.1f MB\n",
      rows, t, bytes, rows / t, rss / 1024 }'
}

for rows in 100000 1000000; do
  org=$("$BIN/modctl" org create --name "bench $rows" | json_field org_id)
  "$BIN/modctl" org set "$org" --rate-per-minute 1000000 >/dev/null
  created=$("$BIN/modctl" key create --org "$org" --name bench --scopes job:read)
  key=$(echo "$created" | json_field key)
  key_id=$(echo "$created" | json_field key_id)
  log "Inserting $rows jobs"
  insert_jobs "$org" "$rows" "$key_id"
  log "Exporting $rows jobs"
  run_export "$rows" "$key"
done
