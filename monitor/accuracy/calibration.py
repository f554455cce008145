"""A confidence calibration fitted on a labelled reference: P(correct | confidence of the predicted class).

Two kinds, both monotone (a higher confidence never gets a lower calibrated value):

- ``temperature`` (the default): temperature scaling with a bias on the confidence's log-odds,
  ``p = σ(a·logit(conf) + b)`` with ``a = 1/T ≥ 0`` — Platt scaling of the one number the monitor keeps per event
  (the probability of the predicted class; the other classes' probabilities are not kept, so the multi-class
  softmax temperature of Guo et al. 2017 cannot be fitted). Chosen as the default because it works on
  log-probabilities and keeps the ranking of events (ATC's threshold is unchanged by it), two parameters are well
  fitted by a few hundred reference rows, and it extrapolates smoothly to confidences lower than any seen on the
  reference, which is exactly where a shifted window goes;
- ``isotonic``: scikit-learn's isotonic regression of correctness on confidence, kept as its breakpoints and read
  back by linear interpolation (as ``IsotonicRegression.predict`` does). It is free of the sigmoid's shape but
  needs more data (it is a step function of up to n steps), is flat outside the reference's range of confidences,
  and ties many events at the same value. ``bench/accuracy_estimate.py`` measures both (``ac`` and ``ac_isotonic``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

CalibrationKind = Literal["temperature", "isotonic"]
CALIBRATION_KINDS: tuple[CalibrationKind, ...] = ("temperature", "isotonic")
#: confidences are clipped to [EPS, 1 − EPS] before their log-odds are taken (float32 saturates at exactly 1.0)
EPS = 1e-6


def logit(p: NDArray[np.float64]) -> NDArray[np.float64]:
    """log(p / (1 − p)) of p clipped to [EPS, 1 − EPS]."""
    q = np.clip(p, EPS, 1.0 - EPS)
    out: NDArray[np.float64] = np.log(q) - np.log1p(-q)
    return out


def sigmoid(z: NDArray[np.float64]) -> NDArray[np.float64]:
    out: NDArray[np.float64] = 0.5 * (1.0 + np.tanh(0.5 * z))  # overflow-free
    return out


def fit_logistic(
    x: NDArray[np.float64],
    y: NDArray[np.bool_],
    *,
    c: float = 1e4,
    weights: NDArray[np.float64] | None = None,
    start: NDArray[np.float64] | None = None,
) -> tuple[NDArray[np.float64], float]:
    """(coefficients, intercept) of a logistic regression of ``y`` on the columns of ``x``, L2 penalty ‖w‖²/(2c) on
    the coefficients (not the intercept), as scikit-learn's ``LogisticRegression(C=c)`` — by Newton's method with
    step halving, in numpy: the models here have at most five parameters, and a hundred bootstrap refits must take
    milliseconds, not L-BFGS's seconds.

    ``weights``: a non-negative weight per row (sample weights, as scikit-learn's ``sample_weight``: a row of weight
    2 counts as two); default 1 each. ``start``: [intercept, *coefficients] to start Newton's method from (a
    nearby fit's: a bootstrap refit then takes two or three steps); default the intercept of the share.

    One class only (every reference row correct, or none): zero coefficients and the intercept of the smoothed
    share (k + ½)/(n + 1), so the fit predicts that share everywhere instead of failing.
    """
    n, d = x.shape
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    total = float(np.sum(w))
    k_w = float(np.sum(w[y]))
    if k_w <= 0.0 or k_w >= total or d == 0:
        share = (k_w + 0.5) / (total + 1.0)
        return np.zeros(d), math.log(share / (1.0 - share))
    design = np.column_stack([np.ones(n), x])
    target = y.astype(np.float64)
    ridge = np.full(d + 1, 1.0 / c)
    ridge[0] = 0.0
    beta = np.zeros(d + 1)
    beta[0] = math.log(k_w / (total - k_w))
    if start is not None:
        beta = np.asarray(start, dtype=np.float64).copy()

    def loss(b: NDArray[np.float64]) -> float:
        z = design @ b
        return float(np.sum(w * (np.logaddexp(0.0, z) - target * z)) + 0.5 * np.sum(ridge * b * b))

    current = loss(beta)
    for _ in range(100):
        p = sigmoid(design @ beta)
        grad = design.T @ (w * (p - target)) + ridge * beta
        hess = (design * (w * p * (1.0 - p))[:, None]).T @ design + np.diag(ridge) + 1e-9 * np.eye(d + 1)
        step = np.linalg.solve(hess, grad)
        t = 1.0
        while t > 1e-6:
            trial = beta - t * step
            value = loss(trial)
            if value <= current:
                break
            t *= 0.5
        else:
            break
        beta, previous, current = trial, current, value
        if previous - current < 1e-10 * max(1.0, abs(current)):
            break
    return beta[1:].copy(), float(beta[0])


@dataclass(frozen=True, slots=True)
class Calibration:
    """A fitted calibration (see the module docstring). ``params``: ``{"a", "b"}`` for temperature,
    ``{"x": [...], "y": [...]}`` (the isotonic breakpoints) for isotonic."""

    kind: CalibrationKind
    params: dict[str, Any]

    @classmethod
    def fit(
        cls, confidence: NDArray[np.float64], correct: NDArray[np.bool_], kind: CalibrationKind = "temperature"
    ) -> Calibration:
        conf = np.asarray(confidence, dtype=np.float64)
        ok = np.asarray(correct, dtype=np.bool_)
        if kind == "temperature":
            a, b = temperature_params(conf, ok)
            return cls("temperature", {"a": a, "b": b})
        if kind == "isotonic":
            from sklearn.isotonic import IsotonicRegression

            iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip", increasing=True)
            iso.fit(conf, ok.astype(np.float64))
            xs = np.asarray(iso.X_thresholds_, dtype=np.float64)
            ys = np.asarray(iso.y_thresholds_, dtype=np.float64)
            return cls("isotonic", {"x": xs.tolist(), "y": ys.tolist()})
        raise ValueError(f"calibration must be one of {CALIBRATION_KINDS}; got {kind!r}")

    def apply(self, confidence: NDArray[np.float64]) -> NDArray[np.float64]:
        """Calibrated P(correct) of each confidence."""
        conf = np.asarray(confidence, dtype=np.float64)
        if self.kind == "temperature":
            return sigmoid(float(self.params["a"]) * logit(conf) + float(self.params["b"]))
        xs = np.asarray(self.params["x"], dtype=np.float64)
        ys = np.asarray(self.params["y"], dtype=np.float64)
        out: NDArray[np.float64] = np.interp(conf, xs, ys)  # flat beyond the ends, as out_of_bounds="clip"
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.params}

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> Calibration:
        kind = doc["kind"]
        if kind == "temperature":
            return cls("temperature", {"a": float(doc["a"]), "b": float(doc["b"])})
        if kind == "isotonic":
            xs = [float(v) for v in doc["x"]]
            ys = [float(v) for v in doc["y"]]
            if len(xs) != len(ys) or not xs:
                raise ValueError("isotonic calibration needs equally long, non-empty 'x' and 'y'")
            return cls("isotonic", {"x": xs, "y": ys})
        raise ValueError(f"calibration kind must be one of {CALIBRATION_KINDS}; got {kind!r}")


def temperature_params(
    confidence: NDArray[np.float64],
    correct: NDArray[np.bool_],
    weights: NDArray[np.float64] | None = None,
    start: tuple[float, float] | None = None,
) -> tuple[float, float]:
    """(a, b) of ``σ(a·logit(conf) + b)`` by (``weights``-weighted) maximum likelihood (``start``: an (a, b) to
    start from); a < 0 (confidence ranks
    correctness backwards, which a monotone calibration cannot express) falls back to a = 0, the reference accuracy
    everywhere."""
    begin = None if start is None else np.array([start[1], start[0]])
    coef, intercept = fit_logistic(logit(confidence)[:, None], correct, weights=weights, start=begin)
    a = float(coef[0]) if coef.shape[0] else 0.0
    if a < 0:
        w = np.ones(correct.shape[0]) if weights is None else weights
        n, k = float(np.sum(w)), float(np.sum(w[correct]))
        share = (k + 0.5) / (n + 1.0)
        return 0.0, math.log(share / (1.0 - share))
    return a, intercept
