#!/usr/bin/env bash
# One text worker on the cores it is given (contract 16): the text part run twice in a row,
# the worker pinned to one core (taskset -c 0), then on both; it sizes its runtime, inference
# pool and batches to the cores it may use. Prints each rate and their ratio. Target: both
# cores complete >= 1.8x what one does.
source "$(dirname "$0")/../../lib.sh"
rate_of() {
  sed -n 's/^models-text: \([0-9]*\) completed text jobs\/s.*/\1/p' "$1"
}
out=$(mktemp -d)
log "cores: the text worker pinned to core 0"
WORKER_CPUS=0 bash "$(dirname "$0")/text.sh" | tee "$out/one"
log "cores: the text worker on both cores"
WORKER_CPUS=0,1 bash "$(dirname "$0")/text.sh" | tee "$out/two"
one=$(rate_of "$out/one")
two=$(rate_of "$out/two")
rm -rf "$out"
[ -n "$one" ] && [ -n "$two" ] && [ "$one" -gt 0 ] || die "no rate (one core: '$one', two: '$two')"
awk -v one="$one" -v two="$two" 'BEGIN {
  printf "models-cores: %d text jobs/s on one core, %d on two: %.2fx (target >= 1.8x): %s\n",
    one, two, two / one, (two / one >= 1.8) ? "met" : "NOT MET" }'
