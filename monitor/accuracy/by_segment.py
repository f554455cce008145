"""The estimate per segment, each beside its own segment's reference performance (``estimate`` on rows that carry
their segment: an event log's ``segment``, a ``segment_column``).

Each segment with enough scored rows gets the primary method's estimate and 90 % interval, the reference value it
compares with (:meth:`~monitor.accuracy.estimators.EstimatorFit.reference_of`: the segment's own where the labelled
reference carries it, ``own_reference``; else the model-wide one), whether the interval lies wholly below it
(accuracy) or above it (a regressor's MAE), and the realized value where labels are given. A segment with too few
rows gets a note instead of a number.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.accuracy.estimators import SMALL_N, EstimatorFit, estimate, valid_confidence
from monitor.accuracy.regression import LossFit, estimate_loss
from monitor.accuracy.weighted import MIN_WINDOW_ROWS


def accuracy_by_segment(
    fit: EstimatorFit,
    scores: tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]],
    segments: NDArray[np.str_],
    *,
    inputs: NDArray[np.float64] | None,
    correct: NDArray[np.float64] | None,
    method: str | None,
    seed: int,
) -> dict[str, dict[str, Any]]:
    """``{segment: row}`` over (confidence, γ, flicker, P_adj) ``scores`` (``correct``: 1/0 per row, NaN: none)."""
    conf = scores[0]
    valid = valid_confidence(conf)
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(set(segments.tolist())):
        idx = np.flatnonzero(segments == name)
        ref, ref_n, own = fit.reference_of(name)
        row: dict[str, Any] = {"n": int(np.count_nonzero(valid[idx])), "reference_accuracy": ref}
        row.update(reference_n=ref_n, own_reference=own, **_realized(None if correct is None else correct[idx]))
        if row["n"] < SMALL_N:
            out[name] = {**row, "note": f"{row['n']} scored rows (< {SMALL_N}): too few to estimate; no estimate"}
            continue
        x = None if inputs is None else inputs[idx]
        doc = estimate(fit, *(s[idx] for s in scores), inputs=x, method=method, seed=seed)
        acc = doc["accuracy"]
        row.update({k: acc[k] for k in ("estimate", "lower", "upper", "method")})
        out[name] = {**row, "below_reference": bool(acc["upper"] < ref)}
    return out


def loss_by_segment(
    fit: LossFit,
    inputs: NDArray[np.float64],
    value: NDArray[np.float64],
    segments: NDArray[np.str_],
    *,
    target: NDArray[np.float64] | None,
    method: str,
) -> dict[str, dict[str, Any]]:
    """A regressor's ``{segment: row}``: the MAE estimate against the segment's reference MAE (``target``: the
    true values, NaN: none)."""
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(set(segments.tolist())):
        idx = np.flatnonzero(segments == name)
        mae, rmse, ref_n, own = fit.reference_of(name)
        row: dict[str, Any] = {"n": int(np.count_nonzero(np.isfinite(value[idx]))), "reference_mae": mae}
        row.update(reference_rmse=rmse, reference_n=ref_n, own_reference=own)
        if target is not None:
            err = (target[idx] - value[idx])[np.isfinite(target[idx]) & np.isfinite(value[idx])]
            row.update(_realized(np.abs(err)))
        if row["n"] < MIN_WINDOW_ROWS:
            out[name] = {**row, "note": f"{row['n']} scored rows (< {MIN_WINDOW_ROWS}): too few to estimate"}
            continue
        doc = estimate_loss(fit, inputs[idx], value[idx], method=method)
        band = doc["mae"]
        row.update({k: band[k] for k in ("estimate", "lower", "upper")}, method=doc["method"])
        out[name] = {**row, "above_reference": bool(band["lower"] > mae)}
    return out


def _realized(values: NDArray[np.float64] | None) -> dict[str, Any]:
    """The mean of the finite ``values`` (the realized accuracy, a regressor's MAE) and their count."""
    if values is None:
        return {}
    v = values[np.isfinite(values)]
    return {"realized": float(np.mean(v)) if v.size else None, "n_labelled": int(v.size)}
