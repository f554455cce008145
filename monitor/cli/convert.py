"""``harmonic-monitor convert``: a scikit-learn model saved with joblib → ONNX (probabilities as a tensor)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from monitor.errors import ModelError
from monitor.model.convert import convert_estimator


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "convert",
        help="convert a joblib-saved scikit-learn model to ONNX (needs the 'convert' extra: skl2onnx)",
        description=(
            "Load a scikit-learn estimator saved with joblib and write an ONNX copy with skl2onnx, probabilities "
            "as a plain tensor (no ZipMap). WARNING: loading a pickle/joblib file runs code from it; convert only "
            "files you trust."
        ),
    )
    p.add_argument("--sklearn", required=True, help="the joblib file")
    p.add_argument("--out", required=True, help="the .onnx file to write")
    p.add_argument("--n-features", type=int, help="input width (default: the estimator's n_features_in_)")
    p.add_argument("--opset", type=int, default=None, help="target ONNX opset (default: skl2onnx's)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    src = Path(args.sklearn)
    if not src.is_file():
        raise ModelError(f"scikit-learn model file '{src}' does not exist (expected a joblib file)")
    print(
        f"warning: loading '{src}' with joblib runs code from the file; only convert files you trust", file=sys.stderr
    )
    import joblib

    try:
        estimator = joblib.load(src)
    except Exception as exc:  # noqa: BLE001 - unpickling can raise anything
        raise ModelError(f"cannot load '{src}' with joblib: {exc}") from exc
    if not hasattr(estimator, "predict"):
        raise ModelError(
            f"'{src}' holds a {type(estimator).__name__}, not a scikit-learn estimator (no predict method); "
            "save the fitted model itself with joblib.dump(model, path)"
        )
    n = args.n_features or getattr(estimator, "n_features_in_", None)
    if not n:
        raise ModelError(f"cannot tell the input width of {type(estimator).__name__}; pass --n-features")
    out = convert_estimator(estimator, int(n), Path(args.out), args.opset)
    print(f"wrote {out} ({type(estimator).__name__}, {n} features)", file=sys.stderr)
    return 0
