"""Stage 4: a control variate for the sampled hypercube's γ on the logit scale, and γ's standard error per event.

The full hypercube's γ at x is |mean_a h_a| over all n axes, h_a = f(x) − (f(x + r·s_a·e_a) + f(x − r·s_a·e_a)) / 2:
the second difference along axis a (the ± pair cancels every odd term). A sample of k axes estimates the mean by
mean_S h_a, with standard error sd(h_S)/√k·√(1 − k/n). At high dimension that error is as large as the spread of γ
between events (a CNN on 400 pixels: Spearman 0.40 with the full ball at k = 8), because h_a varies much more from
axis to axis than the ball mean does from event to event.

Most of that axis-to-axis variation is shared by the events of one predicted class: it depends on which class the
model reads and on the pixel's own value. :class:`ControlMap` models it from the reference, per predicted class c and
axis a, as a line in the event's standardized value u_a: ĥ_a(x) = α[c, a] + β[c, a]·u_a (fitted by least squares on
the full hypercubes of reference events). Every event then has ĥ on *all* n axes for free, no model rows, and the
difference estimator

    γ̂ = | mean_all ĥ_a(x) + mean_S (h_a − ĥ_a(x)) |

is unbiased for the full ball's mean whatever the map's quality; its error is that of the residuals,
sd_S(h − ĥ)/√k·√(1 − k/n). On the CNN of ``bench/gamma_fidelity.py`` the residuals keep 8 % of the variance of h.

A map earns its use where it leaves little of that variance: it is measured on reference events held out of the fit
(``variance_ratio``), and the scorer uses the map only when the ratio is at most :data:`MAX_VARIANCE_RATIO`. On a
model exposing probabilities alone (log-probabilities saturate, so h_a scales with each event's own 1 − P) the
additive map does not fit and the plain sample is kept; it already ranks such events (see docs/HIGH-DIMENSION.md).

The map lives on the logit scale (the predicted class's logit, else its log-probability): the Gamma Map's axis and
P_adj's γ. γ on the probability is left to the plain sample: it spans orders of magnitude between events and the
sample already ranks it (see docs/HIGH-DIMENSION.md).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.errors import ConfigError
from monitor.model.base import Predictor
from monitor.model.standardize import Standardizer

log = logging.getLogger(__name__)

#: a class with fewer reference events than this takes the pooled map (all classes together)
MIN_CLASS_EVENTS = 8
#: model rows the fit may evaluate: reference events × (2n + 1)
FIT_ROW_BUDGET = 2**19
#: values (rows × features) one model call of the fit evaluates at most: 16 MB of float32
BLOCK_VALUES = 2**22
#: fewest reference events a map is fitted on (below, :func:`fit_control_map` refuses)
MIN_FIT_EVENTS = 16
#: a map is used only when it leaves at most this share of the second differences' variance on held-out reference
#: events (every fourth row is held out of the fit to measure it); otherwise the plain sample is the better estimate
MAX_VARIANCE_RATIO = 0.8
#: log-probability floor (the scorer's LOG_FLOOR)
_LOG_FLOOR = 1e-7


@dataclass(frozen=True, slots=True)
class ControlMap:
    """ĥ_a(x) = alpha[c, a] + beta[c, a]·u_a for predicted class c (row ``classes`` of each array is the pooled map
    that classes with too few reference events take), u the event's standardized values."""

    alpha: NDArray[np.float64]
    beta: NDArray[np.float64]
    events: int
    radius: float
    #: mean over held-out reference events of var_a(h − ĥ) / var_a(h): the share of the sampling variance the map
    #: leaves (NaN when not measured)
    variance_ratio: float = math.nan

    @property
    def useful(self) -> bool:
        """Whether the map shrinks the sampling variance enough to use (:data:`MAX_VARIANCE_RATIO`)."""
        return self.variance_ratio <= MAX_VARIANCE_RATIO

    @property
    def n_features(self) -> int:
        return int(self.alpha.shape[1])

    @property
    def classes(self) -> int:
        return int(self.alpha.shape[0]) - 1

    def predict(self, klass: NDArray[np.int64], u: NDArray[np.floating]) -> NDArray[np.float64]:
        """(B, n) ĥ on every axis of each event; a class outside the map (or −1) takes the pooled row."""
        row = np.where((klass >= 0) & (klass < self.classes), klass, self.classes)
        out: NDArray[np.float64] = self.alpha[row] + self.beta[row] * u
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "alpha": np.round(self.alpha, 9).tolist(),
            "beta": np.round(self.beta, 9).tolist(),
            "events": self.events,
            "radius": self.radius,
            "variance_ratio": None if math.isnan(self.variance_ratio) else round(self.variance_ratio, 6),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ControlMap:
        alpha, beta = np.asarray(d["alpha"], dtype=np.float64), np.asarray(d["beta"], dtype=np.float64)
        if alpha.ndim != 2 or alpha.shape != beta.shape:
            raise ConfigError(
                f"control map: alpha and beta must be (classes + 1, n) arrays; got {alpha.shape}, {beta.shape}"
            )
        ratio = d.get("variance_ratio")
        return cls(alpha, beta, int(d["events"]), float(d["radius"]), math.nan if ratio is None else float(ratio))


def logit_scale(out_logits: NDArray[np.float32] | None, out_proba: NDArray[np.float32] | None) -> NDArray[np.float64]:
    """(rows, C) the class scores γ_logit reads: the logits, else the floored log-probabilities."""
    if out_logits is not None:
        return out_logits.astype(np.float64)
    if out_proba is None:
        raise ConfigError("a control map needs a classifier with logits or probabilities; this one has labels only")
    return np.log(np.maximum(out_proba.astype(np.float64), _LOG_FLOOR))


def second_differences(
    model: Predictor, standardizer: Standardizer, rows: NDArray[np.floating], radius: float
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """(B, n) h_a on every axis of each row on the logit scale, and (B,) the predicted classes; B·(2n + 1) model rows,
    evaluated :data:`BLOCK_VALUES` values at a time at most (an image's 2n + 1 rows are split)."""
    x = np.asarray(rows, dtype=np.float32)
    b, n = x.shape
    step = (radius * standardizer.scale).astype(np.float32)
    chunk = max(1, BLOCK_VALUES // n)
    h = np.empty((b, n))
    klass = np.empty(b, dtype=np.int64)
    for i in range(b):
        z = np.concatenate(
            [_scores(model, x[i], step, start, min(start + chunk, 2 * n + 1)) for start in range(0, 2 * n + 1, chunk)]
        )
        c = int(np.argmax(z[0]))
        klass[i] = c
        h[i] = z[0, c] - (z[1 : 1 + n, c] + z[1 + n :, c]) / 2
    return h, klass


def _scores(
    model: Predictor, centre: NDArray[np.float32], step: NDArray[np.float32], start: int, stop: int
) -> NDArray[np.float64]:
    """Logit-scale class scores of rows [start, stop) of one event's full hypercube: row 0 the centre, rows 1..n the
    + points, rows n + 1..2n the − points."""
    n = centre.shape[0]
    block = np.repeat(centre[None, :], stop - start, axis=0)
    j = np.arange(start, stop)
    plus, minus = (j >= 1) & (j <= n), j > n
    block[np.flatnonzero(plus), j[plus] - 1] += step[j[plus] - 1]
    block[np.flatnonzero(minus), j[minus] - 1 - n] -= step[j[minus] - 1 - n]
    out = model.evaluate(block)
    return logit_scale(out.logits, out.proba if out.proba is not None else _table(out.positive))


def _table(positive: NDArray[np.float32] | None) -> NDArray[np.float32] | None:
    if positive is None:
        return None
    p = positive.reshape(-1, 1)
    return np.hstack([1 - p, p])


def fit_control_map(
    model: Predictor,
    standardizer: Standardizer,
    rows: NDArray[np.floating],
    *,
    radius: float,
    classes: int | None = None,
    row_budget: int = FIT_ROW_BUDGET,
) -> ControlMap:
    """Fit :class:`ControlMap` on reference ``rows`` (raw units): their full hypercubes at ``radius`` (standardized
    units), as many rows as ``row_budget`` model rows allow (the first ones). ``variance_ratio`` is measured on every
    fourth row, held out of a first fit; the map returned is fitted on all of them.

    Raises
    ------
    ConfigError
        Fewer than :data:`MIN_FIT_EVENTS` rows fit in the budget, or the model is a regressor.
    """
    if model.kind != "classifier":
        raise ConfigError("a control map needs a classifier (γ on the logit scale); this model is a regressor")
    x = np.asarray(rows, dtype=np.float64)
    n = x.shape[1]
    take = min(len(x), row_budget // (2 * n + 1))
    if take < MIN_FIT_EVENTS:
        raise ConfigError(
            f"a control map needs at least {MIN_FIT_EVENTS} reference rows within {row_budget:,} model rows "
            f"({2 * n + 1} per row at {n} features); got {take} of {len(x)}: give more reference rows or a larger budget"
        )
    x = x[:take]
    h, klass = second_differences(model, standardizer, x, radius)
    u = standardizer.to_standardized(x)
    k = int(classes if classes is not None else klass.max() + 1)
    held = np.arange(take) % 4 == 3
    check = _fit(u[~held], h[~held], klass[~held], k)
    resid = h[held] - check.predict(klass[held], u[held])
    spread = h[held].var(axis=1)
    ok = spread > 0
    ratio = float(np.mean(resid[ok].var(axis=1) / spread[ok])) if ok.any() else 0.0
    fitted = _fit(u, h, klass, k)
    return ControlMap(fitted.alpha, fitted.beta, take, radius, ratio)


def _fit(u: NDArray[np.float64], h: NDArray[np.float64], klass: NDArray[np.int64], k: int) -> ControlMap:
    """The per-class lines (the pooled one in the last row) on standardized values ``u`` and second differences
    ``h`` of events of predicted classes ``klass``."""
    n = u.shape[1]
    alpha = np.empty((k + 1, n))
    beta = np.empty((k + 1, n))
    alpha[k], beta[k] = _line(u, h)
    for c in range(k):
        sel = klass == c
        if sel.sum() < MIN_CLASS_EVENTS:
            alpha[c], beta[c] = alpha[k], beta[k]
        else:
            alpha[c], beta[c] = _line(u[sel], h[sel])
    return ControlMap(alpha, beta, len(u), 0.0)


def _line(u: NDArray[np.float64], h: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per column, the least-squares line h ≈ α + β·u (β = 0 where u does not vary)."""
    mu, mh = u.mean(axis=0), h.mean(axis=0)
    du = u - mu
    var = (du * du).sum(axis=0)
    beta = np.where(var > 1e-12, (du * (h - mh)).sum(axis=0) / np.where(var > 1e-12, var, 1.0), 0.0)
    return mh - beta * mu, beta


def sampled_mean(
    h: NDArray[np.float64],
    n_features: int,
    control_all: NDArray[np.float64] | None = None,
    control_sample: NDArray[np.float64] | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The estimate of the full ball's mean second difference and its standard error, per event.

    ``h`` (B, k): the sampled axes' second differences; with a control map, ``control_all`` (B,) its mean over all
    n axes and ``control_sample`` (B, k) its values at the sampled axes. The standard error carries the
    finite-population correction √(1 − k/n) (the axes are drawn without replacement); it is 0 when every axis is in
    the sample, and NaN with one axis.
    """
    k = h.shape[1]
    resid = h if control_sample is None else h - control_sample
    mean = resid.mean(axis=1)
    if control_all is not None:
        mean = mean + control_all
    fpc = math.sqrt(max(0.0, 1.0 - k / n_features))
    if k < 2:
        return mean, np.full(h.shape[0], np.nan)
    se: NDArray[np.float64] = resid.std(axis=1, ddof=1) / math.sqrt(k) * fpc
    return mean, se


def control_for(
    model: Predictor,
    standardizer: Standardizer,
    radius: float,
    ball: str,
    reference_rows: NDArray[np.floating] | None,
) -> ControlMap | None:
    """The control map a scorer of ``model`` at ``radius`` with ``ball`` should take, fitted on ``reference_rows``
    (raw units; e.g. a reference's ``feature_sample``), or None: a regressor, a ball evaluated whole, no rows, too
    few rows within the fit's budget, or a map that does not shrink the variance (logged, one line each)."""
    from monitor.signals.balls import parse_ball  # balls imports the settings; keep this module's imports light

    n = model.n_features
    if reference_rows is None or model.kind != "classifier" or not parse_ball(ball).resolve(n).per_event(n):
        return None
    rows = np.asarray(reference_rows, dtype=np.float64)
    rows = rows[np.all(np.isfinite(rows), axis=1)]
    try:
        control = fit_control_map(model, standardizer, rows, radius=radius)
    except ConfigError as exc:
        log.info("γ_logit keeps the plain sample: %s", exc)
        return None
    if not control.useful:
        log.info(
            "γ_logit keeps the plain sample: the control map leaves %.3g of the sampling variance on held-out reference "
            "rows (used at <= %g; a model exposing probabilities alone saturates its log-probabilities)",
            control.variance_ratio,
            MAX_VARIANCE_RATIO,
        )
        return None
    log.info("γ_logit control map fitted", extra={"events": control.events, "variance_ratio": control.variance_ratio})
    return control
