"""Accuracy without labels: estimators fitted on a labelled reference, applied to unlabelled windows.

The API, for ``reference --labels``, ``run`` and the ``estimate`` command::

    fit = fit_from_scores(reference_scores, labels, seed=0)       # or fit_estimators(conf, γ, flicker, P_adj, correct)
    doc = fit.to_dict()                                            # JSON: the reference file's "accuracy_estimator"
    fit = EstimatorFit.from_dict(doc)
    out = estimate_from_scores(fit, window_scores, method=None)    # or estimate(fit, conf, γ, flicker, P_adj)
    out["accuracy"]["estimate"], out["accuracy"]["lower"], out["accuracy"]["upper"]

What an estimate can claim: it is a prediction from the model's own outputs, right under covariate
shift to the extent the benchmark shows (docs/BENCHMARKS.md, *Accuracy estimate vs peers*), blind to a change of concept (P(y|x) moving while
inputs and outputs do not); delayed labels, when they arrive, override it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.accuracy.calibration import CALIBRATION_KINDS, Calibration, CalibrationKind
from monitor.accuracy.estimators import (
    DEFAULT_METHOD,
    LEVEL,
    METHODS,
    PRIMARY_CHOICES,
    SMALL_N,
    WEIGHTED_METHODS,
    EstimatorFit,
    caveats,
    estimate,
    fit_estimators,
)
from monitor.accuracy.harmonic import HarmonicModel
from monitor.accuracy.weighted import NO_SHIFT_AUC
from monitor.config import ScoringSettings, setting_default
from monitor.errors import DataError
from monitor.signals.scorer import ScoreResult

__all__ = [
    "CALIBRATION_KINDS",
    "DEFAULT_METHOD",
    "LEVEL",
    "METHODS",
    "PRIMARY_CHOICES",
    "WEIGHTED_METHODS",
    "SMALL_N",
    "Calibration",
    "CalibrationKind",
    "EstimatorFit",
    "HarmonicModel",
    "correct_from_scores",
    "estimate",
    "estimate_from_scores",
    "fit_estimators",
    "fit_from_scores",
    "labels_disagree",
]


def correct_from_scores(scores: ScoreResult, labels: ArrayLike) -> NDArray[np.bool_]:
    """Per row, whether the predicted class index equals the label (class indices 0..C−1, as the label join
    compares them); False at invalid rows, which the fit leaves out anyway."""
    y = np.asarray(labels).reshape(-1)
    if y.shape[0] != len(scores):
        raise DataError(f"{y.shape[0]} labels for {len(scores)} scored rows; expected one class index per row")
    correct: NDArray[np.bool_] = scores.valid & (scores.predicted_class >= 0) & (scores.predicted_class == y)
    return correct


def fit_from_scores(
    scores: ScoreResult,
    labels: ArrayLike,
    *,
    seed: int = setting_default(ScoringSettings, "seed"),
    calibration: CalibrationKind = "temperature",
    inputs: ArrayLike | None = None,
) -> EstimatorFit:
    """:func:`fit_estimators` on a labelled reference scored by ``RobustnessScorer.score`` (``inputs``: the rows
    it scored, for the weighted methods' domain classifier)."""
    return fit_estimators(
        np.where(scores.valid, scores.probability, np.nan),
        scores.gamma,
        scores.flicker,
        scores.p_adj,
        correct_from_scores(scores, labels),
        seed=seed,
        calibration=calibration,
        inputs=inputs,
    )


def estimate_from_scores(
    fit: EstimatorFit,
    scores: ScoreResult,
    *,
    method: str | None = None,
    seed: int = 0,  # not a setting: seeds the weighted methods' folds and bootstrap
    weights: ArrayLike | None = None,
    inputs: ArrayLike | None = None,
) -> dict[str, Any]:
    """:func:`estimate` on a window scored by ``RobustnessScorer.score`` (``inputs``: the rows it scored)."""
    return estimate(
        fit,
        np.where(scores.valid, scores.probability, np.nan),
        scores.gamma,
        scores.flicker,
        scores.p_adj,
        method=method,
        seed=seed,
        weights=weights,
        inputs=inputs,
    )


def labels_disagree(doc: dict[str, Any], realized: float | None) -> list[str]:
    """:func:`estimate`'s caveats, and where labels gave the ``realized`` accuracy outside the primary interval,
    which of the two to believe: the labels, always; and when the domain classifier found no input shift, what the
    disagreement means (the label given the inputs changed)."""
    out = list(doc.get("caveats", caveats(doc.get("domain"))))
    acc = doc["accuracy"]
    if realized is None or acc["lower"] <= realized <= acc["upper"]:
        return out
    domain = doc.get("domain") or {}
    auc = float(domain.get("auc", 0.5))
    if float(domain.get("features", 0)) > 0 and auc < NO_SHIFT_AUC:
        why = f"the inputs did not move (domain classifier AUC {auc:.2f}), so the label given the inputs changed"
    else:
        why = "the estimate missed what the labels measured"
    out.append(
        f"the labels' accuracy {realized:.3f} lies outside the estimate's interval [{acc['lower']:.3f}, "
        f"{acc['upper']:.3f}]: the labels are right; {why}"
    )
    return out
