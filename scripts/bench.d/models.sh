#!/usr/bin/env bash
# The built-in models (contract 10), in one run, each beside its reference on the same inputs
# and threads (scripts/bench.d/models.d/):
#  - nsfw: images/s of the worker's NSFW model (its own runner on rten-gemm) versus onnxruntime
#    (target ratio >= 1.0);
#  - audio: real-time factor of the worker's Whisper (base by default, candle) versus
#    faster-whisper on the same model, CPU, int8 (target ratio >= 1.0);
#  - text: end-to-end text jobs/s with every text model on, English and other languages
#    (target >= 300/s);
#  - cores: text jobs/s of one worker on both cores versus pinned to one (target >= 1.8x);
#  and the worker's peak RSS with every model loaded (target <= 800 MB).
# MODELS_PARTS (e.g. "text rss") runs only those parts.
source "$(dirname "$0")/../lib.sh"
ensure_models
ensure_model_tests
export MODEL_TESTS_PYTHON=$MODEL_TESTS_VENV/bin/python
for name in ${MODELS_PARTS:-audio nsfw rss text cores}; do
  part="$(dirname "$0")/models.d/$name.sh"
  [ -f "$part" ] || die "no part $part"
  log "models: $name"
  bash "$part"
done
