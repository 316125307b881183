#!/usr/bin/env bash
# The worker's built-in Whisper (APP_SPEECH_MODEL: base, the default, or tiny.en) through the
# worker's own code:
#  1. the word error rate on the Librivox clips of Debian's pocketsphinx-testdata (16 kHz
#     English WAVs with their transcriptions; worker/examples/transcribe.rs). Words are
#     compared lower-cased, without punctuation.
#  2. per language, eval/audio/sentences.tsv spoken by espeak-ng: how often the language was
#     detected, the word error rate against the spoken text, threats rejected and harmless
#     sentences passed by the text model (worker/examples/eval_speech.rs).
#
#   scripts/eval.d/audio.sh [MODEL_DIR]     (default: $APP_MODEL_DIR, else the default directory)
source "$(dirname "$0")/../lib.sh"
cd "$ROOT"
DIR=${1:-${APP_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/moderation/models}}
CLIPS=/usr/share/pocketsphinx/test/data/librivox
[ -f "$CLIPS/transcription" ] || apt_install pocketsphinx-testdata
command -v espeak-ng >/dev/null || apt_install espeak-ng
"$ROOT/scripts/models" "$DIR"
cargo build --release --quiet -p moderation-worker --example transcribe --example eval_speech
MODEL=${APP_SPEECH_MODEL:-base}

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
    path, seconds, took, _language, text = line.rstrip("\n").split("\t", 4)
    ref = refs[path.rsplit("/", 1)[-1].removesuffix(".wav")]
    errors += distance(ref, words(text))
    total += len(ref)
    audio += float(seconds)
    taken += float(took)
print(f"audio: Whisper {sys.argv[2]} WER {100 * errors / total:.1f} % ({errors} errors in {total} words, "
      f"{audio:.0f} s of Librivox speech, {audio / taken:.1f}x real time)")
' "$CLIPS/transcription" "$MODEL"

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
n=0
grep -v '^#' eval/audio/sentences.tsv | while IFS=$'\t' read -r language voice kind text; do
  n=$((n + 1))
  espeak-ng -v "$voice" -w "$WORK/$n.wav" "$text"
  printf '%s\t%s\t%s\t%s\n' "$language" "$kind" "$WORK/$n.wav" "$text"
done > "$WORK/manifest.tsv"
"$ROOT/target/release/examples/eval_speech" "$DIR" "$WORK/manifest.tsv"
