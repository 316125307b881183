#!/usr/bin/env bash
# Webhook delivery through one dispatcher to a local HTTPS receiver, in two phases:
#  1. capacity: 10,000 deliveries all due at once; attempts/s.
#  2. schedule: 10,000 deliveries falling due at 1,000/s; lateness against the schedule.
# Targets: >= 1,000 attempts/s, p99 lateness <= 1 s.
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
SELECT gen_random_uuid(), '$org', 'text', 'completed', 'done', 'bench', false, now()
FROM generate_series(1, $COUNT);
INSERT INTO deliveries (id, job_id, account_id, target_url, body, scheduled_at, next_attempt_at)
SELECT gen_random_uuid(), id, account_id, '$RECEIVER_URL/hook',
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
