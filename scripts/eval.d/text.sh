#!/usr/bin/env bash
# The built-in text model on eval/text/ (harmful.tsv by category, ordinary.tsv,
# innocent.tsv): recall per category and false positives on ordinary and innocent-alarming
# messages at APP_TEXT_THRESHOLD (default: the worker's) and a sweep of thresholds, scored by
# the worker's own code (worker/examples/eval_text.rs). Targets: recall >= 90 %, false
# positives <= 3 % on ordinary and <= 10 % on innocent-alarming.
source "$(dirname "$0")/../lib.sh"
cd "$ROOT"
args=("$APP_MODEL_DIR" eval/text)
[ -n "${APP_TEXT_THRESHOLD:-}" ] && args+=(--threshold "$APP_TEXT_THRESHOLD")
cargo run --quiet -p moderation-worker --example eval_text -- "${args[@]}"
