#!/usr/bin/env bash
# One text worker on the cores it is given (contract 16): the text part run with the worker
# pinned to one core (taskset -c 0), in a cgroup with a CPU quota of one core (on either core),
# and on both; it sizes its runtime, inference pool, batches and text concurrency to the cores
# it may use. Each way twice: end to end (wrk submitting through the api while the worker
# runs, so on both cores the api and wrk take the worker's cores for the first seconds, while
# pinned they run on the other core), and draining a backlog submitted before the worker
# started (the worker alone, with Postgres and Redis, on the cores it is given). Prints each
# rate and the ratios of both cores to each way of giving one. Target: both cores complete
# >= 1.8x what one pinned core does.
source "$(dirname "$0")/../../lib.sh"
rate_of() {
  sed -n 's/^models-text: \([0-9]*\) completed text jobs\/s.*/\1/p' "$1"
}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for mode in e2e backlog; do
  backlog=
  [ "$mode" = e2e ] || backlog=1
  log "cores ($mode): the text worker pinned to core 0"
  BACKLOG=$backlog WORKER_CPUS=0 bash "$(dirname "$0")/text.sh" | tee "$out/one-$mode"
  log "cores ($mode): the text worker with a CPU quota of one core"
  BACKLOG=$backlog WORKER_QUOTA=1 bash "$(dirname "$0")/text.sh" | tee "$out/quota-$mode"
  log "cores ($mode): the text worker on both cores"
  BACKLOG=$backlog WORKER_CPUS=0,1 bash "$(dirname "$0")/text.sh" | tee "$out/two-$mode"
done
for mode in e2e backlog; do
  one=$(rate_of "$out/one-$mode")
  two=$(rate_of "$out/two-$mode")
  quota=$(rate_of "$out/quota-$mode")
  [ -n "$one" ] && [ -n "$two" ] && [ -n "$quota" ] && [ "$one" -gt 0 ] && [ "$quota" -gt 0 ] ||
    die "no $mode rate (one core: '$one', quota of one core: '$quota', two: '$two')"
  awk -v mode="$mode" -v one="$one" -v quota="$quota" -v two="$two" 'BEGIN {
    what = (mode == "e2e") ? "end to end" : "draining a backlog"
    printf "models-cores (%s): %d text jobs/s on one core, %d on two: %.2fx (target >= 1.8x): %s\n",
      what, one, two, two / one, (two / one >= 1.8) ? "met" : "NOT MET"
    printf "models-cores (%s): %d text jobs/s with a CPU quota of one core: two cores %.2fx that\n",
      what, quota, two / quota }'
done
