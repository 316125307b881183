#!/usr/bin/env bash
# The impact preview of a policy version (contract 13): GET /api/v1/policy/versions/{v}/impact
# over 1,000,000 completed jobs of one account in a 31-day window, among 1,000,000 of 100
# other accounts in the same days, against a fresh release api. Prints the plan of the read
# (EXPLAIN ANALYZE: one range scan of the account's rows) and the answer's time, best of 3.
# Target: within 2 s. Run through scripts/bench (it builds and exports $BIN).
source "$(dirname "$0")/../lib.sh"
: "${BIN:?run me through scripts/bench}"

DB=$(bench_database policy)
export DATABASE_URL=$DB
export REDIS_URL=$REDIS_BASE_URL
JOBS=${POLICY_BENCH_JOBS:-1000000}

org=$("$BIN/modctl" org create --name "bench policy" | json_field org_id)
"$BIN/modctl" org set "$org" --rate-per-minute 1000000 >/dev/null
key=$("$BIN/modctl" key create --org "$org" --name bench --scopes settings:manage | json_field key)

# Rows of job_scores as workers write them: ids are UUIDv7 spread over the last 31 days, scores
# mostly low (a skewed random), the decision the service defaults (0.5) gave. The laterals name
# `i` so that Postgres draws their random values again for every row.
insert_scores() {
  local account_sql=$1 count=$2
  psql "$DB" -qc "
    INSERT INTO job_scores (job_id, account_id, prohibited, listed, policy_version,
                            harassment, hate, violence, self_harm, sexual)
    SELECT id, account, greatest(h, ha, v, sh, sx) >= 500, i % 200 = 0, 1, h, ha, v, sh, sx
    FROM generate_series(1, $count) AS i,
         LATERAL (SELECT now() - (random() * interval '31 days') AS at WHERE i IS NOT NULL) AS t,
         LATERAL (SELECT ($account_sql)::uuid AS account,
                         (lpad(to_hex((extract(epoch FROM t.at) * 1000)::bigint), 12, '0')
                          || '7' || lpad(to_hex((random() * 4095)::int), 3, '0') || '8'
                          || lpad(to_hex((random() * 4095)::int), 3, '0')
                          || lpad(to_hex((random() * 281474976710655)::bigint), 12, '0'))::uuid AS id,
                         (random() ^ 6 * 1000)::smallint AS h, (random() ^ 6 * 1000)::smallint AS ha,
                         (random() ^ 6 * 1000)::smallint AS v, (random() ^ 8 * 1000)::smallint AS sh,
                         (random() ^ 6 * 1000)::smallint AS sx WHERE i IS NOT NULL) AS r"
}

log "Inserting $JOBS scored jobs of the account and $JOBS of 100 others"
bench_partitions "$DB" "now() - interval '32 days'"
others=$(psql "$DB" -qAtc "SELECT string_agg(quote_literal(gen_random_uuid()::text), ',') FROM generate_series(1, 100)")
insert_scores "'$org'" "$JOBS"
insert_scores "(ARRAY[$others])[1 + (i % 100)]" "$JOBS"
psql "$DB" -qc "VACUUM ANALYZE job_scores"

port=$(free_port)
PORT=$port APP_HOST=127.0.0.1 APP_REDIS_NAMESPACE="bench-policy-$$" RUST_LOG=warn \
  "$BIN/api" >/tmp/bench-policy-api.log 2>&1 &
api=$!
trap 'kill $api 2>/dev/null || true' EXIT
wait_http "http://127.0.0.1:$port/health"
base=http://127.0.0.1:$port/api/v1
created=$(curl -sS -H "Authorization: Bearer $key" -H 'content-type: application/json' \
  -d '{"categories": {"violence": {"mode": "enforce", "block_at": 0.3, "review_at": 0.2},
                      "hate": {"mode": "enforce", "block_at": 0.8},
                      "sexual": {"mode": "observe", "block_at": 0.5}},
       "review": {"sample_rate": 0.01}, "note": "bench"}' "$base/policy/versions")
version=$(echo "$created" | sed -n 's/.*"version":\([0-9]*\).*/\1/p')
[ -n "$version" ] || die "no version: $created"

# The least UUIDv7 of an instant, in SQL (the id bound of a time bound).
floor_sql() {
  echo "(lpad(to_hex((extract(epoch FROM timestamptz '$1') * 1000)::bigint), 12, '0') || repeat('0', 20))::uuid"
}

to=$(date -u +%Y-%m-%dT%H:%M:%SZ)
from=$(date -u -d '31 days ago' +%Y-%m-%dT%H:%M:%SZ)
log "The read's plan"
psql "$DB" -c "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF)
  SELECT job_id, prohibited, listed, policy_version, harassment, hate, violence, self_harm,
         sexual, nsfw, custom
  FROM job_scores WHERE account_id = '$org'
    AND job_id >= $(floor_sql "$from") AND job_id < $(floor_sql "$to")" |
  grep -E 'Scan|Index|Rows|Execution|Buffers' | sed 's/^/  /'

log "Impact of version $version over $JOBS jobs (31 days), three times"
best=
for run in 1 2 3; do
  out=$(curl -sS -o /tmp/bench-policy-impact.json -w '%{http_code} %{time_total}' \
    -H "Authorization: Bearer $key" "$base/policy/versions/$version/impact?from=$from&to=$to")
  set -- $out
  [ "$1" = 200 ] || die "impact answered $1: $(cat /tmp/bench-policy-impact.json)"
  echo "  run $run: $2 s"
  best=$(awk -v a="${best:-999}" -v b="$2" 'BEGIN { print (b < a) ? b : a }')
done
echo "  answer: $(head -c 300 /tmp/bench-policy-impact.json)"
awk -v best="$best" -v jobs="$JOBS" 'BEGIN {
  printf "policy impact: %d jobs in %.2f s (best of 3; target <= 2 s): %s\n",
    jobs, best, (best <= 2) ? "met" : "NOT MET" }'
