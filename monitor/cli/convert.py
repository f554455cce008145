"""``harmonic-monitor convert``: a scikit-learn model saved with joblib → ONNX (probabilities as a tensor)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from monitor.errors import ModelError
from monitor.model.convert import (
    ColumnTypes,
    column_types_from_estimator,
    column_types_from_sample,
    convert_estimator,
)
from monitor.model.sniff import not_joblib, sniff


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
    p.add_argument(
        "--sample",
        help="a pipeline fitted on a DataFrame (a ColumnTransformer with string columns): a CSV or parquet file with a "
        "header naming the training columns and some training rows; each column's values decide its input's type "
        "(default: the estimator's feature_names_in_ and its encoders' categories)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    src = Path(args.sklearn)
    if not src.is_file():
        raise ModelError(f"scikit-learn model file '{src}' does not exist (expected a joblib file)")
    refusal = not_joblib(src, sniff(src))
    if refusal is not None:
        raise ModelError(refusal)
    print(
        f"warning: loading '{src}' with joblib runs code from the file; only convert files you trust", file=sys.stderr
    )
    import joblib

    try:
        estimator = joblib.load(src)
    except Exception as exc:  # noqa: BLE001 - unpickling can raise anything
        raise ModelError(
            f"cannot load '{src}' with joblib: {type(exc).__name__}: {exc}; expected a scikit-learn model saved with "
            "joblib.dump(model, path), with the same scikit-learn installed as when it was saved"
        ) from exc
    if not hasattr(estimator, "predict"):
        raise ModelError(
            f"'{src}' holds a {type(estimator).__name__}, not a scikit-learn estimator (no predict method); "
            "save the fitted model itself with joblib.dump(model, path)"
        )
    columns = _columns(estimator, args.sample)
    if columns:
        out = convert_estimator(estimator, len(columns), Path(args.out), args.opset, columns=columns)
        shown = ", ".join(f"{n} ({k})" for n, k in columns)
        print(f"wrote {out} ({type(estimator).__name__}, one input per column: {shown})", file=sys.stderr)
        return 0
    n = args.n_features or getattr(estimator, "n_features_in_", None)
    if not n:
        raise ModelError(f"cannot tell the input width of {type(estimator).__name__}; pass --n-features")
    out = convert_estimator(estimator, int(n), Path(args.out), args.opset)
    print(f"wrote {out} ({type(estimator).__name__}, {n} features)", file=sys.stderr)
    return 0


def _columns(estimator: object, sample: str | None) -> ColumnTypes | None:
    """Per-column inputs for a DataFrame-fitted ColumnTransformer pipeline (None: one float input)."""
    if sample is None:
        return column_types_from_estimator(estimator)
    from monitor.offline.frames import pandas_module

    pd = pandas_module()
    path = Path(sample)
    try:
        frame = pd.read_parquet(path) if path.suffix.lower() == ".parquet" else pd.read_csv(path)
    except (OSError, ValueError, ImportError) as exc:
        raise ModelError(f"--sample '{path}' cannot be read as a CSV or parquet file with a header: {exc}") from None
    names = getattr(estimator, "feature_names_in_", None)
    return column_types_from_sample(frame, None if names is None else [str(n) for n in names])
