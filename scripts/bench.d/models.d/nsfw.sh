#!/usr/bin/env bash
# The NSFW model (contract 10): images/s of the worker's own code (decode, preprocess, network)
# against onnxruntime in Python (Pillow decode and the same preprocessing) on the same images
# (tests/fixtures/nsfw) with the same number of threads, and their ratio (target >= 1.0).
# The worker's side runs THREADS threads on one loaded model; onnxruntime one session with
# THREADS intra-op threads. THREADS defaults to "1 2"; NSFW_SECONDS per measurement to 10.
source "$(dirname "$0")/../../lib.sh"
cd "$ROOT"
SECONDS_EACH=${NSFW_SECONDS:-10}
MODEL_DIR=${APP_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/moderation/models}
MODEL_TESTS_VENV=${MODEL_TESTS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/moderation/model-tests-venv}

scripts/models "$MODEL_DIR" || die "scripts/models failed"
ensure_pinned_venv "$MODEL_TESTS_VENV" scripts/requirements/model-tests.txt ||
  die "cannot install scripts/requirements/model-tests.txt into $MODEL_TESTS_VENV"
cargo build --release --quiet -p moderation-worker --example nsfw_bench
images=(tests/fixtures/nsfw/*.png tests/fixtures/nsfw/*.jpg)

for threads in ${THREADS:-1 2}; do
  ours=$("$ROOT/target/release/examples/nsfw_bench" "$MODEL_DIR" bench "$threads" \
    "$SECONDS_EACH" "${images[@]}")
  theirs=$("$MODEL_TESTS_VENV/bin/python" tests/tests/it/models/nsfw_reference.py bench \
    "$MODEL_DIR/nsfw/open-nsfw.onnx" "$threads" "$SECONDS_EACH" "${images[@]}")
  ratio=$(python3 -c "print(f'{$ours / $theirs:.2f}')")
  printf 'nsfw threads=%s  worker %s images/s  onnxruntime %s images/s  ratio %s\n' \
    "$threads" "$ours" "$theirs" "$ratio"
done
