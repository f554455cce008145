"""Each segment's own reference performance: what a segment's estimate and its alerts compare with.

A labelled reference whose rows carry their segment (``reference --labels --segment-column``, a DataFrame's segment
column) records, per segment with at least :data:`MIN_SEGMENT_LABELS` labelled rows, the accuracy (a regressor's MAE
and RMSE) on that segment's rows. An estimate of a segment's window then reads against its own segment's value
(:meth:`~monitor.accuracy.estimators.EstimatorFit.reference_of`,
:meth:`~monitor.accuracy.regression.LossFit.reference_of`); a segment the reference does not carry, or carries with
fewer labelled rows, reads against the model-wide value (and says so: ``"own": False``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.errors import DataError

#: fewest labelled rows a segment needs for a reference value of its own (fewer: the model-wide one)
MIN_SEGMENT_LABELS = 50


def _names(segments: ArrayLike, n: int) -> NDArray[np.str_]:
    s = np.asarray(segments).astype(str).reshape(-1)
    if s.shape[0] != n:
        raise DataError(f"{s.shape[0]} segment names for {n} labelled rows; give one per row")
    return s


def segment_accuracy(correct: ArrayLike, valid: ArrayLike, segments: ArrayLike) -> dict[str, dict[str, float]]:
    """``{segment: {"accuracy", "n"}}`` over each segment's ``valid`` rows (``correct``: per row, the prediction
    equals the label), for the segments with at least :data:`MIN_SEGMENT_LABELS` of them."""
    ok = np.asarray(correct, dtype=np.bool_).reshape(-1)
    v = np.asarray(valid, dtype=np.bool_).reshape(-1)
    names = _names(segments, ok.shape[0])
    out: dict[str, dict[str, float]] = {}
    for name in np.unique(names[v]).tolist():
        rows = v & (names == name)
        n = int(np.count_nonzero(rows))
        if n >= MIN_SEGMENT_LABELS:
            out[str(name)] = {"accuracy": float(np.mean(ok[rows])), "n": float(n)}
    return out


def segment_error(error: ArrayLike, segments: ArrayLike) -> dict[str, dict[str, float]]:
    """``{segment: {"mae", "rmse", "n"}}`` over each segment's rows with a finite ``error`` (true − predicted), for
    the segments with at least :data:`MIN_SEGMENT_LABELS` of them."""
    e = np.asarray(error, dtype=np.float64).reshape(-1)
    names = _names(segments, e.shape[0])
    finite = np.isfinite(e)
    out: dict[str, dict[str, float]] = {}
    for name in np.unique(names[finite]).tolist():
        rows = finite & (names == name)
        n = int(np.count_nonzero(rows))
        if n >= MIN_SEGMENT_LABELS:
            out[str(name)] = {
                "mae": float(np.mean(np.abs(e[rows]))),
                "rmse": float(np.sqrt(np.mean(e[rows] ** 2))),
                "n": float(n),
            }
    return out


def read_segments(doc: Any) -> dict[str, dict[str, float]]:
    """A fit document's ``segments`` block (absent: none)."""
    if doc is None:
        return {}
    return {str(k): {str(kk): float(vv) for kk, vv in v.items()} for k, v in dict(doc).items()}
