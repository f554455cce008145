"""The label-free accuracy estimate of each compared model: one method for every model, resolved as ``estimate``
resolves its default (``accuracy.method: auto``: ``iw`` where each model's fit keeps the labelled reference's inputs,
else ``atc``), and each row's share of it, so that the table's figure and the pair line's are the same number.

The per-row values are the method's own: ``iw`` the row's calibrated probability of being right (temperature
scaling refitted on the reference rows weighted towards these rows; their mean is the ``iw`` estimate), ``atc``
whether the row's confidence passes the reference's threshold (their mean is the ``atc`` estimate)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from monitor.accuracy.estimators import EstimatorFit
    from monitor.comparison.run import Scored
    from monitor.signals.scorer import ScoreResult


def shared_method(fits: Sequence[EstimatorFit]) -> str:
    """The one method every model is estimated by: ``estimate``'s default, ``auto`` resolved once for all."""
    from monitor.accuracy.estimators import AUTO, DEFAULT_METHOD

    if DEFAULT_METHOD != AUTO:
        return DEFAULT_METHOD if DEFAULT_METHOD in ("iw", "atc", "ac") else "atc"
    kept = all(f.weighting is not None and f.weighting.inputs.shape[1] > 0 for f in fits)
    return "iw" if kept else "atc"


def per_row(
    fit: EstimatorFit, res: ScoreResult, inputs: NDArray[np.float64], method: str, seed: int
) -> NDArray[np.float64]:
    """Each row's share of the ``method`` estimate (NaN where the row has no confidence): their mean is it."""
    from monitor.accuracy.estimators import valid_confidence
    from monitor.accuracy.harmonic import feature_matrix
    from monitor.accuracy.weighted import weighted_estimates

    conf = np.where(res.valid, res.probability, np.nan)
    valid = valid_confidence(conf)
    out = np.full(conf.shape[0], np.nan)
    c = conf[valid]
    if method == "iw" and fit.weighting is not None:
        outputs = feature_matrix(conf, res.gamma, res.flicker, res.p_adj)[valid]
        x = np.asarray(inputs, dtype=np.float64).reshape(conf.shape[0], -1)[valid]
        out[valid] = weighted_estimates(fit.weighting, c, outputs, x, None, seed=seed, draws=0)["p"]
    elif method == "ac":
        out[valid] = fit.calibration.apply(c)
    else:
        t = fit.atc_threshold
        out[valid] = (c > t) + fit.atc_tie_fraction * (c == t)
    return out


def with_estimates(scored: list[Scored], fits: Sequence[EstimatorFit | None], seed: int) -> list[Scored]:
    """``scored`` with each fitted model's estimate (:func:`shared_method`) and its per-row values as the
    ``estimated_accuracy`` axis."""
    from monitor.accuracy import estimate_from_scores

    given = [f for f in fits if f is not None]
    if not given:
        return scored
    method = shared_method(given)
    out = []
    for s, fit in zip(scored, fits, strict=True):
        if fit is None:
            out.append(s)
            continue
        x = s.rows.x
        est: dict[str, Any] = estimate_from_scores(fit, s.result, method=method, seed=seed, inputs=x)
        axes = {**s.axes, "estimated_accuracy": per_row(fit, s.result, x, method, seed)}
        out.append(dataclasses.replace(s, estimate=est, axes=axes))
    return out
