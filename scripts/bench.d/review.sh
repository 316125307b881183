#!/usr/bin/env bash
# Human review (contract 14), against a fresh release fleet:
#  1. Claims: with 100,000 pending review items, 8 reviewers (8 keys) each claim 250 items as
#     fast as they can through POST /api/v1/review/claim (each after 10 untimed claims that open
#     the api's connections); prints the claims' latency p50/p99 and checks that no item was
#     handed out twice. Target: p99 < 20 ms, no collision.
#  2. The cost of review on throughput: JOBS text jobs (default 6,000) submitted as fast as wrk
#     can (the api accepts faster than a worker completes, so the worker runs saturated), then
#     the worker's completion rate over the drain (completed jobs over the time from the first
#     completion to the last), for an account whose policy samples 10 % of its jobs for review
#     and for one that samples none, one after the other in the same run, each drained before
#     the next. Target: >= 90 % of the rate without.
# Run through scripts/bench (it builds and exports $BIN).
source "$(dirname "$0")/../lib.sh"
: "${BIN:?run me through scripts/bench}"
command -v wrk >/dev/null || apt_install wrk
ITEMS=${REVIEW_BENCH_ITEMS:-100000}
JOBS=${JOBS:-6000}

DB=$(bench_database review)
NS="bench-review-$$"
PORT=$(free_port)
export DATABASE_URL=$DB REDIS_URL=$REDIS_BASE_URL APP_REDIS_NAMESPACE=$NS PORT RUST_LOG=warn
export APP_AUTH_CONCURRENCY=1000 APP_WORKER_CONCURRENCY=text=32
WORK=$(mktemp -d)

"$BIN/api" & API=$!
cleanup() {
  kill "$API" ${WORKER:-} 2>/dev/null || true
  wait "$API" ${WORKER:-} 2>/dev/null || true
  redis-cli -p "$REDIS_PORT" --scan --pattern "$NS:*" | xargs -r redis-cli -p "$REDIS_PORT" del >/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
wait_http "http://127.0.0.1:$PORT/health"
BASE=http://127.0.0.1:$PORT/api/v1

org=$("$BIN/modctl" org create --name "bench review" | json_field org_id)
"$BIN/modctl" org set "$org" --rate-per-minute 100000000 >/dev/null
log "Inserting $ITEMS completed jobs, each with a pending review item"
bench_partitions "$DB" "now() - interval '3 days'"
psql "$DB" -qc "
  WITH made AS (
    SELECT (lpad(to_hex((extract(epoch FROM t) * 1000)::bigint), 12, '0') || '7'
            || lpad(to_hex((random() * 4095)::int), 3, '0') || '8'
            || lpad(to_hex((random() * 4095)::int), 3, '0')
            || lpad(to_hex((random() * 281474976710655)::bigint), 12, '0'))::uuid AS id, t
    FROM generate_series(1, $ITEMS) AS i,
         LATERAL (SELECT now() - interval '2 days' + i * interval '1 millisecond') AS s(t)),
  jobs AS (
    INSERT INTO jobs (id, account_id, type, status, stage, content, is_prohibited, created_at,
                      updated_at, completed_at, review_state, review_reasons)
    SELECT id, '$org', 'text', 'completed', 'done', 'a sampled message', false, t, t, t,
           'pending', ARRAY['sample']
    FROM made RETURNING id, created_at)
  INSERT INTO review_items (id, job_id, account_id, job_type, reasons, created_at)
  SELECT id, id, '$org', 'text', ARRAY['sample'], created_at FROM jobs"
psql "$DB" -qc "VACUUM ANALYZE review_items" -c "VACUUM ANALYZE jobs"
keys=()
for n in 1 2 3 4 5 6 7 8; do
  keys+=("$("$BIN/modctl" key create --org "$org" --name "reviewer $n" --scopes review:decide | json_field key)")
done

log "8 reviewers claim 250 items each (after 10 each to open the api's connections)"
# Each reviewer is a process of its own (threads of one Python process would queue on its lock
# and add that wait to the latencies). The first 10 claims of each warm the api's pool (a new
# Postgres connection loads the catalog of every partition its first claim plans over); they
# are checked for collisions but not timed.
python3 - "$BASE" "${keys[@]}" <<'PY'
import http.client, json, multiprocessing, sys, time, urllib.parse
base, keys = sys.argv[1], sys.argv[2:]
url = urllib.parse.urlparse(base)
WARM, TIMED = 10, 250
def reviewer(key):
    conn = http.client.HTTPConnection(url.hostname, url.port)
    latencies, items = [], []
    for n in range(WARM + TIMED):
        started = time.perf_counter()
        conn.request("POST", url.path + "/review/claim", headers={"Authorization": f"Bearer {key}", "Content-Length": "0"})
        response = conn.getresponse()
        body = response.read()
        took = time.perf_counter() - started
        assert response.status == 200, (response.status, body[:200])
        items.append(json.loads(body)["item_id"])
        if n >= WARM:
            latencies.append(took)
    return latencies, items
with multiprocessing.Pool(len(keys)) as pool:
    results = pool.map(reviewer, keys)
latencies = sorted(l for r in results for l in r[0])
items = [i for r in results for i in r[1]]
p = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000
twice = len(items) - len(set(items))
print(f"review claims: {len(latencies)} timed ({len(items)} in all) by 8 reviewers among 100000 "
      f"pending, p50 {p(0.5):.1f} ms, p99 {p(0.99):.1f} ms (target < 20), {twice} handed out "
      f"twice (target 0): {'met' if p(0.99) < 20 and twice == 0 else 'NOT MET'}")
PY

# Throughput with and without review: a text worker, wrk at saturation, one account each.
METRICS_PORT=$(free_port) "$BIN/worker" --modality text & WORKER=$!
BOUNDARY=benchboundary7d1f
saturate() {
  local key=$1 account=$2
  cat > "$WORK/submit.lua" <<LUA
wrk.method = "POST"
wrk.headers["Authorization"] = "Bearer $key"
wrk.headers["Content-Type"] = "multipart/form-data; boundary=$BOUNDARY"
wrk.body = "--$BOUNDARY\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\nIs this a friendly message about the weather today? I hope the picnic goes well.\r\n--$BOUNDARY--\r\n"
-- Each of the two threads stops after its half of JOBS answers.
local answered = 0
response = function(status, headers, body)
  answered = answered + 1
  if answered >= $((JOBS / 2)) then wrk.thread:stop() end
end
LUA
  wrk -t2 -c64 -d120s --timeout 5s -s "$WORK/submit.lua" "$BASE/moderate/prompt" >/dev/null
  local i
  for i in $(seq 1 6000); do
    [ "$(psql "$DB" -qAtc "SELECT count(*) FROM jobs WHERE account_id = '$account' AND status IN ('queued','processing')")" = 0 ] && break
    sleep 0.1
  done
  psql "$DB" -qAt -c "
    SELECT round(count(*) FILTER (WHERE status = 'completed')
                 / greatest(extract(epoch FROM max(completed_at) - min(completed_at)), 0.001))::int
           || ' ' || count(*) FILTER (WHERE review_state = 'pending')
           || ' ' || count(*) FILTER (WHERE status = 'completed')
    FROM jobs WHERE account_id = '$account'"
}
bench_account() {
  local org key
  org=$("$BIN/modctl" org create --name "bench $1" | json_field org_id)
  "$BIN/modctl" org set "$org" --rate-per-minute 100000000 >/dev/null
  key=$("$BIN/modctl" key create --org "$org" --scopes moderate:prompt,settings:manage | json_field key)
  if [ "$1" != none ]; then
    curl -sf -H "Authorization: Bearer $key" -H 'content-type: application/json' \
      -d "{\"review\": {\"sample_rate\": $1}}" "$BASE/policy/versions" >/dev/null
    curl -sf -X POST -H "Authorization: Bearer $key" "$BASE/policy/versions/2/activate" >/dev/null
  fi
  echo "$org $key"
}
read -r plain_org plain_key <<<"$(bench_account none)"
read -r sampled_org sampled_key <<<"$(bench_account 0.1)"
log "$JOBS jobs without review"
read -r plain_rate _ plain_jobs <<<"$(saturate "$plain_key" "$plain_org")"
log "$JOBS jobs with a 10 % review sample"
read -r sampled_rate sampled_items sampled_jobs <<<"$(saturate "$sampled_key" "$sampled_org")"
awk -v a="$plain_rate" -v b="$sampled_rate" -v items="$sampled_items" -v jobs="$sampled_jobs" 'BEGIN {
  r = (a > 0) ? b / a : 0
  printf "review throughput: %d jobs/s without review, %d with a 10%% sample (%d of %d completed jobs sent to review): %.2f (target >= 0.90): %s\n",
    a, b, items, jobs, r, (r >= 0.9) ? "met" : "NOT MET" }'
