#!/usr/bin/env bash
# The data lifecycle at scale: 13 months of synthetic history (JOBS_PER_MONTH jobs a month,
# default 800,000: at least 10 million jobs, each with its delivered webhook) in the partitioned
# tables, then the oldest month dropped by `modctl lifecycle run` while wrk submits prompts
# (CONNECTIONS connections, default 4). Prints the load time; the tables' and indexes' sizes
# before and after; how long the run took; the longest wait for a lock any session had during
# it (pg_locks sampled every 20 ms); and the submissions' p50/p99/max latency while the drop
# ran against a window just before it. Targets: lock waits under 1 s, p99 submit under 50 ms
# during the drop. The database is dropped at the end (it takes about 10 GB).
source "$(dirname "$0")/../lib.sh"
command -v wrk >/dev/null || apt_install wrk
JOBS_PER_MONTH=${JOBS_PER_MONTH:-800000}
CONNECTIONS=${CONNECTIONS:-4}

DB=$(bench_database lifecycle)
NS="bench-lifecycle-$$"
PORT=$(free_port)
export DATABASE_URL=$DB REDIS_URL=$REDIS_BASE_URL APP_REDIS_NAMESPACE=$NS PORT RUST_LOG=warn
org=$("$BIN/modctl" org create --name "bench lifecycle" | json_field org_id)
"$BIN/modctl" org set "$org" --rate-per-minute 100000000 >/dev/null
KEY=$("$BIN/modctl" key create --org "$org" --scopes moderate:prompt | json_field key)
WORK=$(mktemp -d)
API=
cleanup() {
  [ -z "$API" ] || kill "$API" 2>/dev/null || true
  [ -z "$API" ] || wait "$API" 2>/dev/null || true
  redis-cli -p "$REDIS_PORT" --scan --pattern "$NS:*" | xargs -r redis-cli -p "$REDIS_PORT" del >/dev/null
  psql "$PG_BASE_URL/postgres" -qc "DROP DATABASE IF EXISTS bench_lifecycle WITH (FORCE)" >/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

# One month of history: a table of its own, filled, then attached as the month's partition (its
# indexes built once, after the rows: far faster than a row at a time). $1: months ago.
load_month() {
  psql "$DB" -q -v ON_ERROR_STOP=1 <<SQL
\set first 'date_trunc(''month'', now(), ''UTC'') - interval ''$1 months'''
CREATE TEMP TABLE bounds AS
SELECT :first AS first, least(:first + interval '1 month', now() - interval '1 minute') AS last;
CREATE TABLE bench_jobs (LIKE jobs INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
INSERT INTO bench_jobs (id, account_id, type, status, stage, content, is_prohibited, reason,
                        created_at, updated_at, completed_at)
SELECT uuid_v7(t), CASE WHEN i % 10 = 0 THEN '$org'::uuid
                        ELSE ('00000000-0000-7000-8000-' || lpad(to_hex(i % 500), 12, '0'))::uuid END,
       'text', 'completed', 'done', 'bench history prompt number ' || i, i % 9 = 0,
       CASE WHEN i % 9 = 0 THEN 'flagged by the blocklist' END, t, t, t + interval '1 second'
FROM bounds, generate_series(1, $JOBS_PER_MONTH) AS i,
     LATERAL (SELECT first + (last - first) * (i::float8 / ($JOBS_PER_MONTH + 1)) AS t) AS a;
CREATE TABLE bench_deliveries (LIKE deliveries INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
INSERT INTO bench_deliveries (id, job_id, account_id, target_url, body, state, attempts,
                              schedule_attempts, created_at, updated_at, finished_at,
                              last_status_code)
SELECT uuid_v7(created_at), id, account_id, 'https://hooks.example.com/moderation',
       convert_to('{"job_id":"' || id || '"}', 'UTF8'), 'delivered', 1, 1, created_at,
       created_at, created_at, 200
FROM bench_jobs;
SELECT CASE WHEN to_regclass('jobs_y' || to_char(first AT TIME ZONE 'UTC', 'YYYY"m"MM')) IS NULL
            THEN 'attach' ELSE 'insert' END AS how,
       'y' || to_char(first AT TIME ZONE 'UTC', 'YYYY"m"MM') AS month,
       uuid_floor(first) AS lo, uuid_floor(first + interval '1 month') AS hi
FROM bounds \gset
SELECT :'how' = 'attach' AS attach \gset
\if :attach
ALTER TABLE bench_jobs RENAME TO jobs_:month;
ALTER TABLE jobs ATTACH PARTITION jobs_:month FOR VALUES FROM (:'lo') TO (:'hi');
ALTER TABLE bench_deliveries RENAME TO deliveries_:month;
ALTER TABLE deliveries ATTACH PARTITION deliveries_:month FOR VALUES FROM (:'lo') TO (:'hi');
\else
INSERT INTO jobs SELECT * FROM bench_jobs;
INSERT INTO deliveries SELECT * FROM bench_deliveries;
DROP TABLE bench_jobs;
DROP TABLE bench_deliveries;
\endif
SQL
}

sizes() {
  psql "$DB" -qAtF' ' -c "
    SELECT c.relname, count(*), sum(greatest(p.reltuples, 0))::int8,
           replace(pg_size_pretty(sum(pg_table_size(p.oid))), ' ', ''),
           replace(pg_size_pretty(sum(pg_indexes_size(p.oid))), ' ', '')
    FROM pg_class c JOIN pg_inherits i ON i.inhparent = c.oid JOIN pg_class p ON p.oid = i.inhrelid
    WHERE c.relname IN ('jobs', 'deliveries', 'delivery_attempts')
    GROUP BY c.relname ORDER BY c.relname" |
    while read -r table partitions rows data indexes; do
      printf '  %-18s %2s partitions  %11s rows  table %8s  indexes %8s\n' \
        "$table" "$partitions" "$rows" "$data" "$indexes"
    done
}

log "Loading 13 months of history: $JOBS_PER_MONTH jobs a month, each with its delivery"
started=$SECONDS
for months_ago in $(seq 12 -1 0); do
  load_month "$months_ago"
done
psql "$DB" -qc "ANALYZE jobs; ANALYZE deliveries; ANALYZE delivery_attempts"
loaded_at=$(psql "$DB" -qAtc "SELECT now()")
load_s=$((SECONDS - started))
total=$(psql "$DB" -qAtc "SELECT count(*) FROM jobs")
log "Loaded $total jobs in ${load_s}s"
echo "before the drop:"
sizes

"$BIN/api" & API=$!
wait_http "http://127.0.0.1:$PORT/health"
BOUNDARY=benchboundary7d1f
cat > "$WORK/submit.lua" <<LUA
wrk.method = "POST"
wrk.headers["Authorization"] = "Bearer $KEY"
wrk.headers["Content-Type"] = "multipart/form-data; boundary=$BOUNDARY"
wrk.body = "--$BOUNDARY\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\nIs this a friendly message about the weather today?\r\n--$BOUNDARY--\r\n"
done = function(summary, latency, requests)
  io.write(string.format("WRK requests=%d non2xx=%d p50_us=%d p99_us=%d max_us=%d\n",
    summary.requests, summary.errors.status, latency:percentile(50), latency:percentile(99),
    latency.max))
end
LUA
submit_load() {
  wrk -t1 -c"$CONNECTIONS" -d"$1s" --timeout 5s -s "$WORK/submit.lua" \
    "http://127.0.0.1:$PORT/api/v1/moderate/prompt" | grep '^WRK' | sed 's/^WRK //'
}
ms() { python3 -c "print(round($1 / 1000, 1))"; }

log "Submissions for 15 s before the drop"
eval "$(submit_load 15 | sed 's/\([a-z0-9_]*\)=/before_\1=/g')"

# Keeps exactly the oldest month past retention: the days since the second-oldest month began.
days=$(psql "$DB" -qAtc "SELECT floor(extract(epoch FROM now() - (date_trunc('month', now(), 'UTC')
                                        - interval '11 months')) / 86400)::int")
log "Dropping the oldest month (APP_RETENTION_DAYS=$days) while submissions go on"
submit_load 30 > "$WORK/during" &
LOAD=$!
# The longest wait for any lock, sampled every 20 ms for 30 s.
psql "$DB" -qAtc "
  SELECT coalesce(round(extract(epoch FROM max(w.wait)) * 1000), 0)
  FROM generate_series(1, 1500) AS g,
       LATERAL (SELECT pg_sleep(0.02) WHERE g > 0) AS s,
       LATERAL (SELECT max(clock_timestamp() - l.waitstart) AS wait FROM pg_locks l
                WHERE NOT l.granted AND l.waitstart IS NOT NULL AND g > 0) AS w" > "$WORK/waits" &
SAMPLER=$!
sleep 3
run_started=$(date +%s.%N)
APP_RETENTION_DAYS=$days APP_CONTENT_RETENTION_DAYS=$days "$BIN/modctl" lifecycle run > "$WORK/run.json"
run_s=$(python3 -c "import time; print(round(time.time() - $run_started, 2))")
wait "$LOAD"
eval "$(sed 's/\([a-z0-9_]*\)=/during_\1=/g' "$WORK/during")"
wait "$SAMPLER"
max_wait_ms=$(cat "$WORK/waits")
dropped=$(python3 -c "import json,sys; print(' '.join(json.load(open('$WORK/run.json'))['partitions_dropped']))")
psql "$DB" -qc "ANALYZE jobs; ANALYZE deliveries"
left=$(psql "$DB" -qAtc "SELECT count(*) FROM jobs WHERE id < uuid_floor('$loaded_at')")

echo "after the drop:"
sizes
cat <<OUT
history: $total jobs and as many deliveries over 13 months, loaded in ${load_s}s
run: ${run_s}s, dropped: $dropped
history left: $left jobs (of $total; the submissions during the bench not counted)
longest lock wait of any session during the run: ${max_wait_ms} ms   (target < 1000)
submit before: $before_requests requests, non-2xx $before_non2xx, p50 $(ms "$before_p50_us") ms, p99 $(ms "$before_p99_us") ms, max $(ms "$before_max_us") ms
submit during the drop: $during_requests requests, non-2xx $during_non2xx, p50 $(ms "$during_p50_us") ms, p99 $(ms "$during_p99_us") ms, max $(ms "$during_max_us") ms   (target p99 < 50)
OUT
