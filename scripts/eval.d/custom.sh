#!/usr/bin/env bash
# Custom categories judged by meaning (contract 10) on eval/custom/ (12 categories as accounts
# write them, 15 on-topic and 15 near-topic texts each, written apart from the model's code):
# recall, false positives and cross-category hits at the worker's threshold and a sweep, by the
# worker's own code (worker/examples/eval_custom.rs).
source "$(dirname "$0")/../lib.sh"
cd "$ROOT"
cargo build --release --quiet -p moderation-worker --example eval_custom
"$ROOT/target/release/examples/eval_custom" "$APP_MODEL_DIR" eval/custom
