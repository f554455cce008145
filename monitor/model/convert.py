"""Stage 3 (model): a fitted scikit-learn estimator → an ONNX file with skl2onnx, probabilities as a plain tensor.

Used by ``harmonic-monitor convert`` and by the demo; needs the ``convert`` extra (skl2onnx).
"""

from __future__ import annotations

from pathlib import Path

from monitor.errors import ModelError


def convert_estimator(estimator: object, n_features: int, out: Path, opset: int | None = None) -> Path:
    """Convert a fitted estimator with skl2onnx, probabilities as a tensor. Returns ``out``."""
    try:
        from skl2onnx import to_onnx
        from skl2onnx.common.data_types import FloatTensorType
    except ImportError as exc:
        raise ModelError(
            "skl2onnx is not installed; install the extra: pip install 'harmonic-monitor[convert]'"
        ) from exc
    options = {id(estimator): {"zipmap": False}} if hasattr(estimator, "predict_proba") else None
    try:
        onx = to_onnx(
            estimator,
            initial_types=[("input", FloatTensorType([None, n_features]))],
            options=options,
            target_opset=opset,
        )
    except Exception as exc:  # noqa: BLE001 - skl2onnx raises many types
        raise ModelError(f"skl2onnx cannot convert {type(estimator).__name__}: {exc}") from exc
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(onx.SerializeToString())
    return out
