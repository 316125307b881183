#!/usr/bin/env bash
# Inside a fresh root (scripts/fresh scripts/fresh.d/dev-check.sh): runs scripts/dev as a new
# user would, takes the demo key and the first submitting `curl` it prints, checks that the
# job completes with the text model's scores, then presses Ctrl-C (SIGINT to its process
# group) and checks that no process of the fleet is left. A minimal root has no ps: processes
# are read from /proc.
set -euo pipefail
cd "$(dirname "$0")/../.."
log=$(mktemp)
set -m # scripts/dev in its own process group, with SIGINT as a terminal delivers it
scripts/dev >"$log" 2>&1 &
dev=$!
fail() { echo "dev-check: $*" >&2; tail -30 "$log" >&2; kill -INT -- "-$dev" 2>/dev/null || true; exit 1; }
for _ in $(seq 1 3600); do grep -q 'Demo key' "$log" && break; kill -0 "$dev" 2>/dev/null || fail "scripts/dev exited"; sleep 0.5; done
grep -q 'Demo key' "$log" || fail "no demo key within 30 minutes (a cold build of every binary takes about 15 on 2 cores)"
echo "dev-check: $(grep 'Demo key' "$log" | sed 's/^ *//')"
submit=$(grep -m1 'moderate/prompt' "$log" | sed 's/^ *//')
[ -n "$submit" ] || fail "scripts/dev printed no submitting curl"
health=$(grep -m1 '/health' "$log" | sed 's/^ *//')
for _ in $(seq 1 300); do eval "$health" >/dev/null 2>&1 && break; sleep 0.2; done
answer=$(eval "$submit")
echo "dev-check: $submit -> $answer"
job=$(echo "$answer" | sed -n 's/.*"job_id":"\([^"]*\)".*/\1/p')
[ -n "$job" ] || fail "the submission was not accepted"
key=$(grep 'Demo key' "$log" | awk '{print $3}')
port=$(echo "$submit" | sed -n 's/.*127.0.0.1:\([0-9]*\).*/\1/p')
for _ in $(seq 1 150); do
  state=$(curl -s -H "Authorization: Bearer $key" "127.0.0.1:$port/api/v1/job/$job")
  echo "$state" | grep -q '"status":"completed"' && break
  sleep 0.2
done
echo "$state" | grep -q '"status":"completed"' || fail "the job did not complete: $state"
echo "dev-check: job completed: $state"
# The first job is judged by the built-in models, not by the lists alone: the text model's
# five scores are in the job (contract 10: `scores` is absent when no model ran).
for category in harassment hate violence self_harm sexual; do
  echo "$state" | grep -q "\"scores\":{[^}]*\"$category\":" ||
    fail "the job carries no model score for $category: $state"
done
echo "dev-check: the text model scored the first job"
kill -INT -- "-$dev"
wait "$dev" || true
fleet() {
  local p cmd
  for p in /proc/[0-9]*; do
    { cmd=$(tr '\0' ' ' <"$p/cmdline"); } 2>/dev/null || continue
    case "$cmd" in
      api | api\ * | worker\ * | dispatcher* | dashboard* | */debug/api* | */debug/worker* | \
        */debug/dispatcher* | */debug/dashboard*) echo "${p#/proc/} $cmd" ;;
    esac
  done
}
for _ in $(seq 1 100); do [ -z "$(fleet)" ] && break; sleep 0.2; done
left=$(fleet)
[ -z "$left" ] || fail "processes left after Ctrl-C: $left"
grep -E 'Stopping|Stopped' "$log" | sed 's/^/dev-check: /'
echo "dev-check: no fleet process left after Ctrl-C"
