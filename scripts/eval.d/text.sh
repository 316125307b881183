#!/usr/bin/env bash
# The built-in text model on eval/text/ (harmful.tsv by category, ordinary.tsv,
# innocent.tsv), the corpus its constants were tuned on, then on eval/text/heldout/ (the same
# kinds of files, written apart by someone who never saw the tuned corpus or the prototypes):
# recall per category and false positives on ordinary and innocent-alarming messages at
# APP_TEXT_THRESHOLD (default: the worker's) and a sweep of thresholds, scored by the worker's
# own code (worker/examples/eval_text.rs). Targets: recall >= 90 %, false positives <= 3 % on
# ordinary and <= 10 % on innocent-alarming. Then eval/text/multilingual/ (14 languages, a
# language column first), per language too. Targets there: recall >= 85 % (>= 70 % in every
# language), false positives <= 5 % ordinary and <= 12 % innocent-alarming.
source "$(dirname "$0")/../lib.sh"
cd "$ROOT"
cargo build --release --quiet -p moderation-worker --example eval_text
for corpus in eval/text eval/text/heldout; do
  log "Corpus $corpus"
  args=("$APP_MODEL_DIR" "$corpus")
  [ -n "${APP_TEXT_THRESHOLD:-}" ] && args+=(--threshold "$APP_TEXT_THRESHOLD")
  "$ROOT/target/release/examples/eval_text" "${args[@]}"
done
log "Corpus eval/text/multilingual"
args=("$APP_MODEL_DIR" eval/text/multilingual --languages)
[ -n "${APP_TEXT_THRESHOLD:-}" ] && args+=(--threshold "$APP_TEXT_THRESHOLD")
"$ROOT/target/release/examples/eval_text" "${args[@]}"
