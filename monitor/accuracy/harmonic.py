"""The ``harmonic`` accuracy estimator's model: P(correct | logit confidence, log γ, flicker, logit P_adj), a logistic
regression fitted on the labelled reference, the extra features kept only when they lower the cross-fitted
out-of-fold log-loss against confidence alone (:mod:`monitor.accuracy.estimators` describes every method)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.accuracy.calibration import fit_logistic, logit, sigmoid

#: the harmonic model's features, in order (all of them when they vary on the reference)
FEATURES: tuple[str, ...] = ("logit_confidence", "log_gamma", "flicker", "logit_p_adj")
GAMMA_FLOOR = 1e-6
#: L2 inverse strength of the harmonic model on standardized features
HARMONIC_C = 1.0


def as_float(a: ArrayLike) -> NDArray[np.float64]:
    return np.asarray(a, dtype=np.float64).reshape(-1)


def feature_matrix(
    confidence: ArrayLike, gamma: ArrayLike, flicker: ArrayLike, p_adj: ArrayLike
) -> NDArray[np.float64]:
    """(n, 4) the harmonic model's raw features (:data:`FEATURES`); NaN where a score is missing."""
    conf = as_float(confidence)
    with np.errstate(invalid="ignore", divide="ignore"):
        cols = [
            logit(conf),
            np.log(np.maximum(as_float(gamma), 0.0) + GAMMA_FLOOR),
            as_float(flicker),
            logit(as_float(p_adj)),
        ]
    x = np.column_stack(cols)
    x[~np.isfinite(x)] = np.nan
    x[~np.isfinite(conf), 0] = np.nan
    return x


@dataclass(frozen=True, slots=True)
class HarmonicModel:
    """The logistic model of P(correct | features): features standardized by (center, scale), NaN imputed by the
    reference median (``impute``, raw feature units), then ``σ(x·coef + intercept)``."""

    features: tuple[str, ...]
    center: NDArray[np.float64]
    scale: NDArray[np.float64]
    impute: NDArray[np.float64]
    coef: NDArray[np.float64]
    intercept: float

    def design(self, x_all: NDArray[np.float64]) -> NDArray[np.float64]:
        """Standardized design matrix of the kept features from the (n, 4) :func:`feature_matrix`."""
        idx = [FEATURES.index(f) for f in self.features]
        x = x_all[:, idx].copy()
        miss = np.isnan(x)
        if miss.any():
            x[miss] = np.broadcast_to(self.impute, x.shape)[miss]
        out: NDArray[np.float64] = (x - self.center) / self.scale
        return out

    def predict(self, x_all: NDArray[np.float64]) -> NDArray[np.float64]:
        return sigmoid(self.design(x_all) @ self.coef + self.intercept)

    def to_dict(self) -> dict[str, Any]:
        return {
            "features": list(self.features),
            "center": self.center.tolist(),
            "scale": self.scale.tolist(),
            "impute": self.impute.tolist(),
            "coef": self.coef.tolist(),
            "intercept": self.intercept,
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> HarmonicModel:
        features = tuple(str(f) for f in doc["features"])
        unknown = [f for f in features if f not in FEATURES]
        if unknown:
            raise ValueError(f"unknown harmonic features {unknown}; known: {list(FEATURES)}")
        arrays = [np.asarray(doc[k], dtype=np.float64).reshape(-1) for k in ("center", "scale", "impute", "coef")]
        if any(a.shape[0] != len(features) for a in arrays):
            raise ValueError("harmonic 'center', 'scale', 'impute' and 'coef' need one value per feature")
        center, scale, impute, coef = arrays
        return cls(features, center, scale, impute, coef, float(doc["intercept"]))


def harmonic_fit(x_all: NDArray[np.float64], correct: NDArray[np.bool_], features: tuple[str, ...]) -> HarmonicModel:
    idx = [FEATURES.index(f) for f in features]
    raw = x_all[:, idx]
    impute = np.nanmedian(raw, axis=0) if raw.shape[0] else np.zeros(len(idx))
    impute = np.where(np.isfinite(impute), impute, 0.0)
    filled = np.where(np.isnan(raw), impute, raw)
    center = filled.mean(axis=0)
    scale = filled.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    coef, intercept = fit_logistic((filled - center) / scale, correct, c=HARMONIC_C)
    return HarmonicModel(features, center, scale, impute, coef, intercept)


def _varying(x_all: NDArray[np.float64]) -> tuple[str, ...]:
    """The features with at least two distinct finite values on the reference (γ is 0 everywhere on a model flat
    at every point, flicker NaN without flicker copies: such a column says nothing)."""
    kept = []
    for j, name in enumerate(FEATURES):
        col = x_all[:, j]
        col = col[np.isfinite(col)]
        if col.shape[0] >= 2 and float(col.max() - col.min()) > 0:
            kept.append(name)
    return tuple(kept)


def _log_loss(p: NDArray[np.float64], y: NDArray[np.bool_]) -> float:
    q = np.clip(p, 1e-9, 1 - 1e-9)
    return float(-np.mean(np.where(y, np.log(q), np.log1p(-q))))


def _folds(correct: NDArray[np.bool_], k: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """A fold number per row, stratified on correctness."""
    fold = np.empty(correct.shape[0], dtype=np.int64)
    for value in (False, True):
        rows = np.flatnonzero(correct == value)
        rng.shuffle(rows)
        fold[rows] = np.arange(rows.shape[0]) % k
    return fold


def fit_harmonic(
    x: NDArray[np.float64], ok: NDArray[np.bool_], folds: int, rng: np.random.Generator
) -> tuple[HarmonicModel, dict[str, Any]]:
    """The harmonic model on the reference's (n, 4) :func:`feature_matrix` ``x`` and correctness ``ok``: the full
    feature set against confidence alone, judged by K-fold cross-fitted out-of-fold log-loss; the better one refitted
    on every row, and the diagnostics (``folds``, ``oof_log_loss``, ``oof_mean_prediction``, ``harmonic_model``)."""
    n = x.shape[0]
    full = _varying(x)
    candidates = {"confidence_only": tuple(f for f in full if f == "logit_confidence"), "harmonic": full}
    k = max(2, min(folds, int(min(np.count_nonzero(ok), np.count_nonzero(~ok)))))
    fold = _folds(ok, k, rng)
    oof_loss: dict[str, float] = {}
    oof_mean: dict[str, float] = {}
    for name, feats in candidates.items():
        oof = np.empty(n)
        for f in range(k):
            train, test = fold != f, fold == f
            oof[test] = harmonic_fit(x[train], ok[train], feats).predict(x[test])
        oof_loss[name] = _log_loss(oof, ok)
        oof_mean[name] = float(np.mean(oof))
    chosen = "harmonic" if oof_loss["harmonic"] < oof_loss["confidence_only"] else "confidence_only"
    diagnostics = {"folds": k, "oof_log_loss": oof_loss, "oof_mean_prediction": oof_mean, "harmonic_model": chosen}
    return harmonic_fit(x, ok, candidates[chosen]), diagnostics


def harmonic_draw(x: NDArray[np.float64], ok: NDArray[np.bool_], full: HarmonicModel) -> list[float]:
    """[intercept, *coef] of the harmonic model refitted on a bootstrap draw, on ``full``'s standardization (so that
    one design matrix serves every draw)."""
    h = harmonic_fit(x, ok, full.features)
    coef = h.coef * full.scale / h.scale
    intercept = h.intercept + float(np.sum(h.coef * (full.center - h.center) / h.scale))
    return [intercept, *coef.tolist()]
