#!/usr/bin/env bash
# Webhook delivery through one dispatcher to a local HTTPS receiver, in four phases:
#  1. capacity: 10,000 deliveries all due at once; attempts/s.
#  2. schedule: 10,000 deliveries falling due at 1,000/s; lateness against the schedule.
#  3. recover: 100,000 abandoned deliveries recovered while another account's fall due.
#  4. the delivery log's plans at 1,000,000 deliveries.
#  5. health: 1,000 accounts, 100 of them with failing or disabled URLs (contract 17);
#     lateness of first attempts to the healthy ones.
# Targets: >= 1,000 attempts/s, p99 lateness <= 1 s (also during a recover and beside failing
# and disabled URLs), a recover answered within 1 s, no sequential scan.
source "$(dirname "$0")/../lib.sh"
COUNT=${COUNT:-10000}
RATE=${RATE:-1000}

DB=$(bench_database dispatch)
WORK=$(mktemp -d)
cargo build --release --quiet -p moderation-tests --example webhook_receiver
coproc RECEIVER { "$ROOT/target/release/examples/webhook_receiver" "$WORK/ca.pem"; }
read -r RECEIVER_URL <&"${RECEIVER[0]}"
org=$(DATABASE_URL=$DB "$BIN/modctl" org create --name bench | json_field org_id)
DATABASE_URL=$DB REDIS_URL=$REDIS_BASE_URL APP_REDIS_NAMESPACE=bench-dispatch-$$ \
  APP_ALLOW_PRIVATE_URLS=true APP_EXTRA_CA_FILE=$WORK/ca.pem METRICS_PORT=0 RUST_LOG=warn \
  "$BIN/dispatcher" & DISPATCHER=$!
trap 'kill $DISPATCHER 2>/dev/null || true; exec {RECEIVER[1]}>&-; rm -rf "$WORK"' EXIT

# Inserts COUNT deliveries due from DELAY seconds from now, SPACING seconds apart.
insert_deliveries() {
  psql "$DB" -q <<SQL
TRUNCATE delivery_attempts, deliveries;
DELETE FROM jobs;
INSERT INTO jobs (id, account_id, type, status, stage, content, is_prohibited, completed_at)
SELECT uuid_v7(), '$org', 'text', 'completed', 'done', 'bench', false, now()
FROM generate_series(1, $COUNT);
INSERT INTO deliveries (id, job_id, account_id, target_url, body, scheduled_at, next_attempt_at)
SELECT uuid_v7(), id, account_id, '$RECEIVER_URL/hook',
       convert_to('{"job_id":"' || id || '","status":"completed","is_prohibited":false}', 'UTF8'),
       due, due
FROM (SELECT id, account_id,
             clock_timestamp() + make_interval(secs => $1 + (row_number() OVER ()) * $2) AS due
      FROM jobs) j;
SQL
}

wait_done() {
  local left
  for _ in $(seq 1 900); do
    left=$(psql "$DB" -qAtc "SELECT count(*) FROM deliveries WHERE state = 'pending'")
    [ "$left" = 0 ] && return 0
    sleep 0.2
  done
  die "$left deliveries still pending"
}

log "Capacity: $COUNT deliveries due at once"
insert_deliveries 0 0
wait_done
psql "$DB" -qAt <<'SQL'
SELECT format('dispatch capacity: %s attempts in %s s = %s attempts/s   (target >= 1000)',
              count(*), round(extract(epoch FROM max(started_at) - min(started_at))::numeric, 2),
              round(count(*) / greatest(extract(epoch FROM max(started_at) - min(started_at)), 0.001)))
FROM delivery_attempts;
SELECT format('dispatch capacity: outcomes %s', string_agg(state || '=' || n, ', '))
FROM (SELECT state, count(*) n FROM deliveries GROUP BY state) t;
SQL

log "Schedule: $COUNT deliveries falling due at $RATE/s"
insert_deliveries 2 "$(python3 -c "print(1 / $RATE)")"
wait_done
psql "$DB" -qAt <<'SQL'
SELECT format('dispatch schedule: lateness p50 %s ms, p99 %s ms, max %s ms   (target p99 <= 1000)',
              round(percentile_cont(0.5) WITHIN GROUP (ORDER BY l)::numeric, 1),
              round(percentile_cont(0.99) WITHIN GROUP (ORDER BY l)::numeric, 1),
              round(max(l)::numeric, 1))
FROM (SELECT extract(epoch FROM started_at - scheduled_at) * 1000 AS l FROM delivery_attempts) t;
SELECT format('dispatch schedule: outcomes %s', string_agg(state || '=' || n, ', '))
FROM (SELECT state, count(*) n FROM deliveries GROUP BY state) t;
SQL

# 3. recover: one account's 100,000 abandoned deliveries recovered through the api while
#    another account's deliveries fall due at 500/s; the recover's answer time, the drain
#    rate, and the other account's lateness during the drain.
RECOVERED=${RECOVERED:-100000}
log "Recover: $RECOVERED abandoned deliveries of one account, another's due at 500/s"
PORT=$(free_port)
DATABASE_URL=$DB REDIS_URL=$REDIS_BASE_URL APP_REDIS_NAMESPACE=bench-dispatch-$$ PORT=$PORT \
  METRICS_PORT=0 RUST_LOG=warn "$BIN/api" & API=$!
trap 'kill $DISPATCHER $API 2>/dev/null || true; exec {RECEIVER[1]}>&-; rm -rf "$WORK"' EXIT
wait_http "http://127.0.0.1:$PORT/health"
victim=$(DATABASE_URL=$DB "$BIN/modctl" org create --name recovering | json_field org_id)
key=$(DATABASE_URL=$DB "$BIN/modctl" key create --org "$victim" --scopes webhook:manage | json_field key)
psql "$DB" -q <<SQL
TRUNCATE delivery_attempts, deliveries;
DELETE FROM jobs;
INSERT INTO jobs (id, account_id, type, status, stage, content, is_prohibited, completed_at)
SELECT uuid_v7(), '$victim', 'text', 'completed', 'done', 'bench', false, now()
FROM generate_series(1, $RECOVERED);
INSERT INTO deliveries (id, job_id, account_id, target_url, body, state, attempts,
                        schedule_attempts, scheduled_at, created_at, finished_at)
SELECT uuid_v7(), id, account_id, '$RECEIVER_URL/hook',
       convert_to('{"job_id":"' || id || '","status":"completed","is_prohibited":false}', 'UTF8'),
       'abandoned', 12, 12, now(), now() - interval '10 minutes', now() - interval '1 minute'
FROM jobs;
-- The other account's deliveries, due from 1 s from now at 500/s.
INSERT INTO jobs (id, account_id, type, status, stage, content, is_prohibited, completed_at)
SELECT uuid_v7(), '$org', 'text', 'completed', 'done', 'bench', false, now()
FROM generate_series(1, 5000);
ANALYZE jobs;
ANALYZE deliveries;
SQL
since=$(date -u -d '-1 hour' +%Y-%m-%dT%H:%M:%SZ)
psql "$DB" -q <<SQL
INSERT INTO deliveries (id, job_id, account_id, target_url, body, scheduled_at, next_attempt_at)
SELECT uuid_v7(), id, account_id, '$RECEIVER_URL/hook', convert_to('{}', 'UTF8'), due, due
FROM (SELECT id, account_id,
             clock_timestamp() + make_interval(secs => 1 + (row_number() OVER ()) * 0.002) AS due
      FROM jobs WHERE account_id = '$org') j;
SQL
answer=$(curl -s -o "$WORK/recover.json" -w '%{http_code} %{time_total}' \
  -H "Authorization: Bearer $key" -H 'content-type: application/json' \
  -d "{\"since\": \"$since\"}" "http://127.0.0.1:$PORT/api/v1/deliveries/recover")
echo "dispatch recover: answer ${answer% *} $(cat "$WORK/recover.json") in ${answer#* } s   (target <= 1 s)"
wait_done
psql "$DB" -qAt <<SQL
SELECT format('dispatch recover: %s recovered attempts in %s s = %s attempts/s',
              count(*), round(extract(epoch FROM max(started_at) - min(started_at))::numeric, 2),
              round(count(*) / greatest(extract(epoch FROM max(started_at) - min(started_at)), 0.001)))
FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id WHERE d.account_id = '$victim';
SELECT format('dispatch recover: other account lateness p50 %s ms, p99 %s ms, max %s ms   (target p99 <= 1000)',
              round(percentile_cont(0.5) WITHIN GROUP (ORDER BY l)::numeric, 1),
              round(percentile_cont(0.99) WITHIN GROUP (ORDER BY l)::numeric, 1),
              round(max(l)::numeric, 1))
FROM (SELECT extract(epoch FROM a.started_at - a.scheduled_at) * 1000 AS l
      FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id
      WHERE d.account_id = '$org') t;
SELECT format('dispatch recover: outcomes %s', string_agg(state || '=' || n, ', '))
FROM (SELECT state, count(*) n FROM deliveries GROUP BY state) t;
SQL

# 4. The delivery log's plans with 1,000,000 deliveries (the recovered account's 100,000
#    among them): every page from an index.
log "Delivery log plans at 1,000,000 deliveries"
bench_partitions "$DB" "now() - interval '31 days'"
psql "$DB" -q <<SQL
INSERT INTO jobs (id, account_id, type, status, stage, content, is_prohibited, completed_at)
SELECT uuid_v7(), '$org', 'text', 'completed', 'done', 'bench', false, now()
FROM generate_series(1, 1000000 - (SELECT count(*) FROM deliveries));
INSERT INTO deliveries (id, job_id, account_id, target_url, body, state, attempts,
                        schedule_attempts, created_at, finished_at)
SELECT uuid_v7(t.at), j.id, j.account_id, 'https://example.com/', '\x00', 'delivered', 1, 1,
       t.at, now()
FROM jobs j LEFT JOIN deliveries d ON d.job_id = j.id,
     LATERAL (SELECT now() - random() * interval '30 days' AS at WHERE j.id IS NOT NULL) AS t
WHERE d.id IS NULL;
ANALYZE deliveries;
ANALYZE delivery_attempts;
SQL
cargo build --release --quiet -p moderation-tests --example delivery_plans
"$ROOT/target/release/examples/delivery_plans" "$DB" "$victim" | tee "$WORK/plans.txt" | tail -1
grep -q '^delivery log plans: 0 ' "$WORK/plans.txt" || cat "$WORK/plans.txt"

# 5. health: 1,000 accounts with a URL each: 900 healthy (the receiver), 50 failing (a closed
#    port: every attempt is refused at once and retried on the schedule) and 50 disabled (their
#    deliveries are held). 10 deliveries per account fall due over 10 s; the healthy URLs'
#    first attempts must keep p99 lateness <= 1 s.
ACCOUNTS=${ACCOUNTS:-1000}
log "Health: $ACCOUNTS accounts, 10% failing or disabled, 10 deliveries each over 10 s"
psql "$DB" -q <<SQL
TRUNCATE delivery_attempts, deliveries;
DELETE FROM jobs;
DELETE FROM webhook_endpoints;
CREATE TEMP TABLE bench_accounts AS
SELECT gen_random_uuid() AS id, n,
       CASE WHEN n <= $ACCOUNTS / 20 THEN 'failing'
            WHEN n <= $ACCOUNTS / 10 THEN 'disabled' ELSE 'active' END AS state
FROM generate_series(1, $ACCOUNTS) n;
INSERT INTO accounts (id, name) SELECT id, 'health-' || n FROM bench_accounts;
INSERT INTO webhook_endpoints (account_id, url, state, disabled_reason, failing_since,
                               failures_since)
SELECT id, CASE WHEN state = 'failing' THEN 'https://127.0.0.1:1/hook'
                ELSE '$RECEIVER_URL/hook' END,
       state, CASE WHEN state = 'disabled' THEN 'auto' END,
       CASE WHEN state <> 'active' THEN now() - interval '1 hour' END,
       CASE WHEN state <> 'active' THEN 20 ELSE 0 END
FROM bench_accounts;
INSERT INTO jobs (id, account_id, type, status, stage, content, is_prohibited, completed_at)
SELECT uuid_v7(), a.id, 'text', 'completed', 'done', 'bench', false, now()
FROM bench_accounts a, generate_series(1, 10);
ANALYZE jobs;
INSERT INTO deliveries (id, job_id, account_id, target_url, body, to_account_url, state, held_at,
                        scheduled_at, next_attempt_at)
SELECT uuid_v7(), j.id, j.account_id, e.url, convert_to('{}', 'UTF8'), true,
       CASE WHEN e.state = 'disabled' THEN 'held' ELSE 'pending' END,
       CASE WHEN e.state = 'disabled' THEN now() END, due,
       CASE WHEN e.state = 'disabled' THEN NULL ELSE due END
FROM (SELECT id, account_id,
             clock_timestamp() + make_interval(secs => 1 + (row_number() OVER (ORDER BY random()))
                                                          * 10.0 / ($ACCOUNTS * 10)) AS due
      FROM jobs) j JOIN webhook_endpoints e ON e.account_id = j.account_id;
ANALYZE deliveries;
SQL
# Until every healthy delivery is done (the failing ones retry for hours).
for _ in $(seq 1 600); do
  left=$(psql "$DB" -qAtc "SELECT count(*) FROM deliveries d JOIN webhook_endpoints e \
                           ON e.account_id = d.account_id WHERE d.state = 'pending' AND e.state = 'active'")
  [ "$left" = 0 ] && break
  sleep 0.2
done
psql "$DB" -qAt <<'SQL'
SELECT format('dispatch health: healthy first attempts %s, lateness p50 %s ms, p99 %s ms, max %s ms   (target p99 <= 1000)',
              count(*), round(percentile_cont(0.5) WITHIN GROUP (ORDER BY l)::numeric, 1),
              round(percentile_cont(0.99) WITHIN GROUP (ORDER BY l)::numeric, 1),
              round(max(l)::numeric, 1))
FROM (SELECT extract(epoch FROM a.started_at - a.scheduled_at) * 1000 AS l
      FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id
      JOIN webhook_endpoints e ON e.account_id = d.account_id
      WHERE a.attempt = 1 AND e.url NOT LIKE 'https://127.0.0.1:1/%' AND e.state = 'active') t;
SELECT format('dispatch health: deliveries %s; URLs %s', 
              (SELECT string_agg(state || '=' || n, ', ') FROM
                 (SELECT state, count(*) n FROM deliveries GROUP BY state ORDER BY state) t),
              (SELECT string_agg(state || '=' || n, ', ') FROM
                 (SELECT state, count(*) n FROM webhook_endpoints GROUP BY state ORDER BY state) u));
SQL
true
