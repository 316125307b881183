#!/usr/bin/env bash
# One text worker on the cores it is given (contract 16): the text part run three times in a
# row, the worker pinned to one core (taskset -c 0), then in a cgroup with a CPU quota of one
# core (on either core), then on both; it sizes its runtime, inference pool, batches and text
# concurrency to the cores it may use. Prints each rate and the ratios of both cores to each
# way of giving one. Target: both cores complete >= 1.8x what one pinned core does.
source "$(dirname "$0")/../../lib.sh"
rate_of() {
  sed -n 's/^models-text: \([0-9]*\) completed text jobs\/s.*/\1/p' "$1"
}
out=$(mktemp -d)
log "cores: the text worker pinned to core 0"
WORKER_CPUS=0 bash "$(dirname "$0")/text.sh" | tee "$out/one"
log "cores: the text worker with a CPU quota of one core"
WORKER_QUOTA=1 bash "$(dirname "$0")/text.sh" | tee "$out/quota"
log "cores: the text worker on both cores"
WORKER_CPUS=0,1 bash "$(dirname "$0")/text.sh" | tee "$out/two"
one=$(rate_of "$out/one")
two=$(rate_of "$out/two")
quota=$(rate_of "$out/quota")
rm -rf "$out"
[ -n "$one" ] && [ -n "$two" ] && [ -n "$quota" ] && [ "$one" -gt 0 ] && [ "$quota" -gt 0 ] ||
  die "no rate (one core: '$one', quota of one core: '$quota', two: '$two')"
awk -v one="$one" -v quota="$quota" -v two="$two" 'BEGIN {
  printf "models-cores: %d text jobs/s on one core, %d on two: %.2fx (target >= 1.8x): %s\n",
    one, two, two / one, (two / one >= 1.8) ? "met" : "NOT MET"
  printf "models-cores: %d text jobs/s with a CPU quota of one core: two cores %.2fx that\n",
    quota, two / quota }'
