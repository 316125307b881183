#!/usr/bin/env bash
# Word error rate of the worker's built-in Whisper (tiny.en) on the Librivox clips of Debian's
# pocketsphinx-testdata (16 kHz WAVs with their transcriptions), through the worker's own code
# (worker/examples/transcribe.rs). Words are compared lower-cased, without punctuation.
#
#   scripts/eval.d/audio.sh [MODEL_DIR]     (default: $APP_MODEL_DIR, else the default directory)
source "$(dirname "$0")/../lib.sh"
cd "$ROOT"
DIR=${1:-${APP_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/moderation/models}}
CLIPS=/usr/share/pocketsphinx/test/data/librivox
[ -f "$CLIPS/transcription" ] || apt_install pocketsphinx-testdata
"$ROOT/scripts/models" "$DIR"
cargo build --release --quiet -p moderation-worker --example transcribe

mapfile -t files < <(sed "s|.*|$CLIPS/&.wav|" "$CLIPS/fileids")
"$ROOT/target/release/examples/transcribe" "$DIR" "${files[@]}" 2>/dev/null |
  python3 -c '
import re, sys

def words(text):
    return re.sub(r"[^a-z0-9\x27 ]+", " ", text.lower()).split()

def distance(ref, hyp):
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1]

refs = {}
for line in open(sys.argv[1]):
    m = re.match(r"<s>(.*)</s> \((.*)\)", line.strip())
    refs[m.group(2)] = words(m.group(1))
errors = total = 0
audio = taken = 0.0
for line in sys.stdin:
    path, seconds, took, text = line.rstrip("\n").split("\t", 3)
    ref = refs[path.rsplit("/", 1)[-1].removesuffix(".wav")]
    errors += distance(ref, words(text))
    total += len(ref)
    audio += float(seconds)
    taken += float(took)
print(f"audio: Whisper tiny.en WER {100 * errors / total:.1f} % ({errors} errors in {total} words, "
      f"{audio:.0f} s of Librivox speech, {audio / taken:.1f}x real time)")
' "$CLIPS/transcription"
