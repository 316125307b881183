#!/usr/bin/env bash
# Dashboard page times at scale: one account with 100,000 jobs (a mix of types and statuses
# over 100 days), a delivery for every completed job, a few keys, categories and registry
# entries. A signed-in session requests each page many times in a row (one keep-alive
# connection) against the release dashboard; prints p50/p99 of the server's own time
# (`server-timing`) and of the time to first byte seen by curl, per page. Target: every page
# <= 50 ms server time. Run through `scripts/bench dashboard`.
source "$(dirname "$0")/../lib.sh"

JOBS=${DASHBOARD_BENCH_JOBS:-100000}
REQUESTS=${DASHBOARD_BENCH_REQUESTS:-200}

[ -n "${BIN:-}" ] || die "run this through scripts/bench"

work=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

db=$(bench_database dashboard)
export DATABASE_URL=$db
export REDIS_URL=$REDIS_BASE_URL

org=$("$BIN/modctl" org create --name "dashboard bench" | json_field org_id)
psql "$db" -qc "UPDATE accounts SET registry_member = true WHERE id = '$org'"
email="bench-$$@example.com"
password="bench-password-$$"
echo "$password" | "$BIN/modctl" user create --org "$org" --email "$email" >/dev/null
for i in 1 2 3; do
  "$BIN/modctl" key create --org "$org" --name "bench key $i" --scopes job:read >/dev/null
done

log "Inserting $JOBS jobs and their deliveries"
bench_partitions "$db" "'2026-08-01 00:00:00+00'"
psql "$db" -q <<SQL
INSERT INTO jobs (id, account_id, type, status, stage, content, is_prohibited, reason,
                  categories, error_code, error_message, created_at, updated_at, completed_at)
SELECT uuid_v7(t.ts), '$org',
       (ARRAY['text', 'image', 'video', 'audio'])[1 + i % 4],
       s.status,
       CASE s.status WHEN 'completed' THEN 'done' WHEN 'failed' THEN 'failed' ELSE s.status END,
       'bench content ' || i,
       CASE WHEN s.status = 'completed' THEN i % 7 = 0 END,
       CASE WHEN s.status = 'completed' AND i % 7 = 0 THEN 'flagged by the blocklist' END,
       CASE WHEN i % 4 = 1 THEN jsonb_build_object('nsfw', false, 'underage', false,
                                                    'ai_adult_general', false) END,
       CASE WHEN s.status = 'failed' THEN 'MEDIA_UNREACHABLE' END,
       CASE WHEN s.status = 'failed' THEN 'the media could not be fetched' END,
       t.ts, t.ts, CASE WHEN s.status IN ('completed', 'failed') THEN t.ts + interval '2 s' END
FROM generate_series(1, $JOBS) AS i,
     LATERAL (SELECT timestamptz '2026-08-01 00:00:00+00'
                     + (i * interval '100 days') / $JOBS AS ts) AS t,
     LATERAL (SELECT CASE WHEN i % 50 = 0 THEN 'failed'
                          WHEN i % 97 = 0 THEN 'queued'
                          ELSE 'completed' END AS status) AS s;
INSERT INTO deliveries (id, job_id, account_id, target_url, body, state, attempts,
                        schedule_attempts, scheduled_at, next_attempt_at, created_at,
                        updated_at, finished_at, last_status_code)
SELECT uuid_v7(j.completed_at), j.id, j.account_id, 'https://hooks.example.com/moderation',
       '\x7b7d'::bytea, d.state, d.attempts, d.attempts, j.completed_at, NULL, j.completed_at,
       j.completed_at, j.completed_at + interval '1 s', d.code
FROM (SELECT *, row_number() OVER (ORDER BY created_at) AS n FROM jobs
      WHERE status = 'completed') AS j,
     LATERAL (SELECT CASE WHEN j.n % 40 = 0 THEN 'abandoned' ELSE 'delivered' END AS state,
                     CASE WHEN j.n % 40 = 0 THEN 12 ELSE 1 END AS attempts,
                     CASE WHEN j.n % 40 = 0 THEN 500 ELSE 200 END AS code) AS d;
INSERT INTO delivery_attempts (delivery_id, attempt, scheduled_at, started_at, duration_ms,
                               status_code)
SELECT id, 1, created_at, created_at, 42, last_status_code FROM deliveries;
INSERT INTO custom_categories (id, account_id, name, description, keywords)
SELECT gen_random_uuid(), '$org', 'category_' || g, 'Bench category ' || g, ARRAY['kw' || g]
FROM generate_series(1, 5) g;
INSERT INTO registry_entries (id, account_id, identifier, category, member_case_ref,
                              created_at, updated_at, reported_at, expires_at)
SELECT gen_random_uuid(), '$org', sha256(('bench' || g)::bytea), 'payment_fraud',
       'case ' || g, now(), now(), now(), now() + interval '365 days'
FROM generate_series(1, 50) g;
ANALYZE;
SQL

# A cursor of the dashboard (and the api): base64url of "<unix nanos>:<uuid>".
cursor_at() {
  local row nanos id
  row=$(psql "$db" -qAt -F ' ' -c "
    SELECT (extract(epoch FROM created_at) * 1000000)::bigint, id FROM jobs
    WHERE account_id = '$org' ORDER BY created_at DESC, id DESC OFFSET $1 LIMIT 1")
  read -r micros id <<<"$row"
  nanos="${micros}000"
  printf '%s:%s' "$nanos" "$id" | base64 -w0 | tr '+/' '-_' | tr -d '='
}
job=$(psql "$db" -qAt -c "SELECT job_id FROM deliveries WHERE account_id = '$org' LIMIT 1")
deep=$(cursor_at $((JOBS * 9 / 10)))
since=$(psql "$db" -qAt -c "SELECT to_char(min(created_at) + interval '50 days', 'YYYY-MM-DD\"T\"HH24:MI') FROM deliveries")

port=$(free_port)
DASHBOARD_PORT=$port APP_HOST=127.0.0.1 APP_DASHBOARD_INSECURE_COOKIES=true \
  APP_REDIS_NAMESPACE="bench-dashboard-$$" RUST_LOG=warn \
  "$BIN/dashboard" >"$work/dashboard.log" 2>&1 &
pid=$!
wait_http "http://127.0.0.1:$port/login"
base="http://127.0.0.1:$port"

log "Signing in"
jar="$work/cookies"
csrf=$(curl -fsS -c "$jar" "$base/login" | grep -o 'name="csrf" value="[^"]*"' | head -1 | cut -d'"' -f4)
status=$(curl -sS -b "$jar" -c "$jar" -o /dev/null -w '%{http_code}' \
  --data-urlencode "csrf=$csrf" --data-urlencode "email=$email" \
  --data-urlencode "password=$password" "$base/login")
[ "$status" = 303 ] || die "sign-in answered $status"

pages=(
  "overview|/"
  "overview month|/?period=month"
  "keys|/keys"
  "jobs first page|/jobs"
  "jobs status=failed|/jobs?status=failed"
  "jobs status=queued|/jobs?status=queued"
  "jobs type=audio|/jobs?type=audio"
  "jobs dates|/jobs?from=2026-09-01&until=2026-09-10"
  "jobs all filters|/jobs?status=completed&type=image&from=2026-09-01&until=2026-10-01"
  "jobs deep cursor|/jobs?after=$deep"
  "job detail|/jobs/$job"
  "webhooks|/webhooks"
  "delivery log|/deliveries"
  "deliveries abandoned|/deliveries?status=abandoned"
  "deliveries since|/deliveries?since=$since"
  "deliveries job|/deliveries?job_id=$job"
  "policy|/policy"
  "registry|/registry"
  "submit|/submit"
)

# p50 and p99 of the numbers on standard input.
percentiles() {
  sort -n | awk '{ v[NR] = $1 } END {
    if (NR == 0) { print "-", "-"; exit }
    p50 = v[int((NR - 1) * 0.50) + 1]; p99 = v[int((NR - 1) * 0.99) + 1]
    printf "%.1f %.1f", p50, p99 }'
}

log "Timing $REQUESTS requests per page (one session, one connection)"
printf '%-24s %10s %10s %10s %10s\n' page "server p50" "server p99" "ttfb p50" "ttfb p99"
worst=0
for entry in "${pages[@]}"; do
  name=${entry%%|*}
  path=${entry#*|}
  args=()
  for _ in $(seq 1 "$REQUESTS"); do args+=(-o /dev/null "$base$path"); done
  curl -sS -b "$jar" \
    -w '%{http_code} %{time_starttransfer} %header{server-timing}\n' "${args[@]}" \
    >"$work/times"
  bad=$(awk '$1 != 200' "$work/times" | head -1)
  [ -z "$bad" ] || die "$name ($path) answered: $bad"
  read -r s50 s99 <<<"$(sed -E 's/.*app;dur=([0-9.]+).*/\1/' "$work/times" | percentiles)"
  read -r t50 t99 <<<"$(awk '{ print $2 * 1000 }' "$work/times" | percentiles)"
  printf '%-24s %8s ms %8s ms %8s ms %8s ms\n' "$name" "$s50" "$s99" "$t50" "$t99"
  worst=$(awk -v a="$worst" -v b="$s99" 'BEGIN { print (b > a) ? b : a }')
done
log "Slowest page p99 (server time): $worst ms (target <= 50 ms)"
