#!/usr/bin/env bash
# Today's tree beside an earlier one, in one run: BASELINE (a commit) is checked out in a
# worktree under $BASELINE_DIR, built in release there, and each of BASELINE_SCENARIOS (default
# "e2e submit") runs with the earlier tree's binaries and scenario script, then with today's,
# BASELINE_RUNS times in turn (default 2: earlier, today, earlier, today), so a drift of the
# machine hits both. Prints
# each scenario's figures under a heading per tree and run. Without BASELINE it says so and
# does nothing (it is not part of a plain `scripts/bench`).
# Example: BASELINE=c8490dc scripts/bench baseline (the tree before the partitioning of V017).
source "$(dirname "$0")/../lib.sh"
: "${BIN:?run me through scripts/bench}"
if [ -z "${BASELINE:-}" ]; then
  echo "baseline: skipped (set BASELINE to a commit to compare with)"
  exit 0
fi
rev=$(git -C "$ROOT" rev-parse --short "$BASELINE^{commit}") || die "BASELINE $BASELINE is not a commit"
dir=${BASELINE_DIR:-/var/tmp/moderation-baseline}/$rev
if [ ! -d "$dir" ]; then
  log "baseline: checking out $rev in $dir"
  git -C "$ROOT" worktree add --detach "$dir" "$rev" >/dev/null
fi
# Its own target directory, seeded with today's release dependencies (those whose versions and
# features did not change are reused as built).
if [ ! -d "$dir/target/release" ] && [ -d "$ROOT/target/release" ]; then
  mkdir -p "$dir/target"
  cp -r --reflink=auto "$ROOT/target/release" "$dir/target/release"
fi
log "baseline: building $rev in release"
(cd "$dir" && cargo build --workspace --bins --release --quiet)

# Workers of both trees without models (an earlier e2e.sh does not say so itself).
NO_MODELS=$(mktemp -d)
export APP_MODEL_DIR=$NO_MODELS
trap 'rmdir "$NO_MODELS"' EXIT
for scenario in ${BASELINE_SCENARIOS:-e2e submit}; do
  [ -f "$dir/scripts/bench.d/$scenario.sh" ] || die "$rev has no scenario $scenario"
  for run in $(seq 1 "${BASELINE_RUNS:-2}"); do
    echo "== $scenario, run $run: $rev (baseline)"
    BIN=$dir/target/release bash "$dir/scripts/bench.d/$scenario.sh"
    echo "== $scenario, run $run: $(git -C "$ROOT" rev-parse --short HEAD) (today)"
    bash "$ROOT/scripts/bench.d/$scenario.sh"
  done
done
