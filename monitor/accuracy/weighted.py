"""The importance-weighted accuracy estimate (``iw``, after PAPE: Białek et al. 2024) and the code base's one domain
classifier.

Under covariate shift the window's inputs come from a density q(x) other than the reference's p(x), while P(correct
| x) stays. Then any statistic of the reference rows weighted by the density ratio w(x) = q(x)/p(x) is the
window's. The ratio comes from a **domain classifier** (:func:`domain_weights`) telling reference rows from window
rows: with s(x) its log-odds that a row is the window's, w(x) ∝ exp(s(x)) (Bayes' rule; the class prior cancels when
the weights are normalized to mean 1 over the reference).

- the classifier is an L2-penalized logistic regression (:func:`~monitor.accuracy.calibration.fit_logistic`, numpy
  Newton steps) on the reference's standardized inputs — projected on their first :data:`MAX_INPUT_DIMS` principal
  components when wider — beside the model's outputs (logit confidence, log γ, flicker, logit P_adj): small and
  fast (a few ms a 1,000-event window), and smooth, so the ratios it gives are not the near-0/near-∞ of a flexible
  classifier that separates the two samples perfectly. Without inputs (``run`` keeps scores, not rows) it reads
  the outputs alone;
- **cross-fitted**: every row's log-odds come from a classifier trained on the other :data:`DOMAIN_FOLDS` − 1
  folds, so a reference row is never weighted by a model that saw it (which would pull every weight towards the
  reference side);
- the ratios are normalized to mean 1 over the reference and **clipped** at :data:`CLIP` (then normalized again),
  trading a bias where the window lies outside the reference for a bounded variance; the share of weight clipped,
  the classifier's out-of-fold **AUC** (0.5: no input shift it can see) and the weights' **effective sample size**
  ESS = (Σw)²/Σw² are reported.

Given the weights, the **calibration** (temperature scaling, :mod:`monitor.accuracy.calibration`) is refitted on the
reference by weighted maximum likelihood, and the estimate is the window's mean calibrated confidence — CBPE with a
calibration fitted for the window's input distribution, i.e. PAPE on the one confidence the monitor keeps per event.
ATC's threshold is refitted with the same weights (``iw_atc``: the weighted share of reference rows above it equals
the weighted reference accuracy), and the plain weighted reference accuracy is reported as a diagnostic.

The 90 % interval adds (1) the window's Poisson-binomial noise under the weighted calibration, (2) the spread over
:data:`N_DRAWS` bootstrap resamples of the reference rows, each carrying its weight and refitting the weighted
calibration and threshold — the term that grows as the ESS falls — and (3) a shift margin ``INFLATION × |estimate −
reference accuracy| + FLOOR`` for what the weights cannot fix (a window outside the reference's support, a domain
classifier too simple for the shift) plus ``AUC_MARGIN × (2·AUC − 1)²``: the estimate's error grows sharply as the
domain classifier's AUC nears 1 (a window that barely overlaps the reference), whether or not the estimate itself
moved. The constants are chosen on ``bench/accuracy_estimate.py`` (docs/BENCHMARKS.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.accuracy.calibration import fit_logistic, logit, sigmoid, temperature_params

#: reference rows a fit keeps for the domain classifier (a seeded sample when there are more)
MAX_ROWS = 1000
#: inputs wider than this are projected on the reference's first principal components
MAX_INPUT_DIMS = 8
DOMAIN_FOLDS = 2
#: L2 inverse strength of the domain classifier on standardized features
DOMAIN_C = 0.02
#: density ratios are clipped at this multiple of their mean over the reference
CLIP = 20.0
#: fewest window rows the domain classifier is fitted on; below, the weights are 1 (the estimate is AC's)
MIN_WINDOW_ROWS = 50
N_DRAWS = 40
#: the shift margin of the interval: INFLATION × |estimate − reference accuracy| + FLOOR + AUC_MARGIN × (2·AUC − 1)²
INFLATION = 0.5
FLOOR = 0.01
AUC_MARGIN = 0.15
#: a domain classifier AUC below this counts as "no input shift found" (the caveat on labels that disagree)
NO_SHIFT_AUC = 0.55
DECIMALS = 5


@dataclass(frozen=True, slots=True)
class WeightingReference:
    """What the domain classifier and the weighted refits need of the labelled reference: up to :data:`MAX_ROWS`
    rows' projected standardized inputs (``inputs``: (n, k), k = 0 without inputs), their output features (the
    harmonic model's :func:`~monitor.accuracy.estimators.feature_matrix`, (n, 4), NaN where missing), confidence
    and correctness; the inputs' ``center``, ``scale`` and projection ``basis`` ((d, k), None: no projection)."""

    center: NDArray[np.float64]
    scale: NDArray[np.float64]
    basis: NDArray[np.float64] | None
    inputs: NDArray[np.float64]
    outputs: NDArray[np.float64]
    confidence: NDArray[np.float64]
    correct: NDArray[np.bool_]

    @property
    def n(self) -> int:
        return int(self.confidence.shape[0])

    @classmethod
    def build(
        cls,
        inputs: NDArray[np.float64] | None,
        outputs: NDArray[np.float64],
        confidence: NDArray[np.float64],
        correct: NDArray[np.bool_],
        rng: np.random.Generator,
    ) -> WeightingReference:
        """From the valid reference rows (``inputs`` (n, d) raw, or None)."""
        n = confidence.shape[0]
        keep = np.sort(rng.choice(n, size=MAX_ROWS, replace=False)) if n > MAX_ROWS else np.arange(n)
        if inputs is None or inputs.ndim != 2 or inputs.shape[1] == 0:
            center, scale, basis, z = np.zeros(0), np.ones(0), None, np.zeros((keep.shape[0], 0))
        else:
            x = np.asarray(inputs, dtype=np.float64)
            with np.errstate(invalid="ignore"):
                center = np.nan_to_num(np.nanmean(x, axis=0))
                scale = np.nan_to_num(np.nanstd(x, axis=0))
            scale = np.where(scale > 1e-12, scale, 1.0)
            std = np.nan_to_num((x - center) / scale)
            basis = None
            if std.shape[1] > MAX_INPUT_DIMS:
                _, _, vt = np.linalg.svd(std - std.mean(axis=0), full_matrices=False)
                basis = vt[:MAX_INPUT_DIMS].T
            z = std[keep] if basis is None else std[keep] @ basis

        # rounded as stored, so that a fit read back from JSON estimates exactly as the fit in memory
        def r(a: NDArray[np.float64]) -> NDArray[np.float64]:
            return np.round(a, DECIMALS)

        return cls(
            r(center),
            r(scale),
            None if basis is None else r(basis),
            r(z),
            r(outputs[keep]),
            r(confidence[keep]),
            correct[keep],
        )

    def project(self, inputs: NDArray[np.float64]) -> NDArray[np.float64]:
        """Window inputs (m, d) raw into the stored space (m, k)."""
        std = np.nan_to_num((np.asarray(inputs, dtype=np.float64) - self.center) / self.scale)
        return std if self.basis is None else std @ self.basis

    def to_dict(self) -> dict[str, Any]:
        def r(a: NDArray[np.float64]) -> Any:
            return np.round(a, DECIMALS).tolist()

        return {
            "center": r(self.center),
            "scale": r(self.scale),
            "basis": None if self.basis is None else r(self.basis),
            "inputs": r(self.inputs),
            "outputs": [[None if not math.isfinite(v) else round(v, DECIMALS) for v in row] for row in self.outputs],
            "confidence": r(self.confidence),
            "correct": self.correct.astype(int).tolist(),
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> WeightingReference:
        conf = np.asarray(doc["confidence"], dtype=np.float64).reshape(-1)
        n = conf.shape[0]
        center = np.asarray(doc["center"], dtype=np.float64).reshape(-1)
        scale = np.asarray(doc["scale"], dtype=np.float64).reshape(-1)
        basis = None if doc.get("basis") is None else np.asarray(doc["basis"], dtype=np.float64)
        k = center.shape[0] if basis is None else basis.shape[1]
        inputs = np.asarray(doc["inputs"], dtype=np.float64).reshape(n, k)
        outputs = np.asarray(
            [[np.nan if v is None else v for v in row] for row in doc["outputs"]], dtype=np.float64
        ).reshape(n, -1)
        correct = np.asarray(doc["correct"]).reshape(-1).astype(np.bool_)
        if (
            correct.shape[0] != n
            or scale.shape != center.shape
            or (basis is not None and basis.shape[0] != len(center))
        ):
            raise ValueError("weighting rows, inputs and correctness differ in shape")
        return cls(center, scale, basis, inputs, outputs, conf, correct)


@dataclass(frozen=True, slots=True)
class DomainWeights:
    """Density ratios of the reference rows (mean 1) and what they rest on."""

    weights: NDArray[np.float64]
    auc: float
    ess: float
    clipped: float
    features: int

    def summary(self) -> dict[str, float]:
        return {"auc": self.auc, "ess": self.ess, "clipped_share": self.clipped, "features": float(self.features)}


def _standardize(a: NDArray[np.float64], b: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Both blocks standardized by ``a``'s (reference) column median and spread; NaN → 0; constant columns dropped."""
    seen = np.isfinite(a).any(axis=0) if a.shape[0] else np.zeros(a.shape[1], dtype=np.bool_)
    a, b = a[:, seen], b[:, seen]
    with np.errstate(invalid="ignore"):
        center = np.nanmedian(a, axis=0) if a.shape[0] else np.zeros(a.shape[1])
        scale = np.nanstd(a, axis=0) if a.shape[0] else np.ones(a.shape[1])
    center, scale = np.nan_to_num(center), np.nan_to_num(scale)
    keep = scale > 1e-9
    za = np.nan_to_num((a[:, keep] - center[keep]) / scale[keep])
    zb = np.nan_to_num((b[:, keep] - center[keep]) / scale[keep])
    return np.clip(za, -8, 8), np.clip(zb, -8, 8)


def _auc(neg: NDArray[np.float64], pos: NDArray[np.float64], w_pos: NDArray[np.float64]) -> float:
    """P(score of a positive > score of a negative) (ties ½), positives weighted."""
    order = np.sort(neg)
    below = np.searchsorted(order, pos, side="left")
    equal = np.searchsorted(order, pos, side="right") - below
    per = (below + 0.5 * equal) / max(1, neg.shape[0])
    return float(np.sum(w_pos * per) / np.sum(w_pos))


def domain_weights(
    reference: NDArray[np.float64],
    window: NDArray[np.float64],
    rng: np.random.Generator,
    *,
    window_weights: NDArray[np.float64] | None = None,
    folds: int = DOMAIN_FOLDS,
    clip: float | None = None,
) -> DomainWeights:
    """Cross-fitted density ratios q/p of the ``reference`` rows (n, f) against the ``window`` rows (m, f) (see
    the module docstring); ``window_weights``: per window row, a sampling weight (1/p(sampled))."""
    clip = CLIP if clip is None else clip
    a, b = _standardize(reference, window)
    n, m = a.shape[0], b.shape[0]
    wb = np.ones(m) if window_weights is None else np.asarray(window_weights, dtype=np.float64)
    wb = wb * (m / float(np.sum(wb)))
    fa = rng.permutation(n) % folds
    fb = rng.permutation(m) % folds
    s_a, s_b = np.zeros(n), np.zeros(m)
    x = np.vstack([a, b])
    y = np.concatenate([np.zeros(n, dtype=np.bool_), np.ones(m, dtype=np.bool_)])
    fold = np.concatenate([fa, fb])
    w = np.concatenate([np.ones(n), wb])
    for f in range(folds):
        train = fold != f
        # balance the two samples in the fit, so the log-odds are the log density ratio up to a constant
        wt = w[train].copy()
        yt = y[train]
        wt[yt] *= float(np.sum(~yt)) / max(1e-12, float(np.sum(wt[yt])))
        coef, intercept = fit_logistic(x[train], yt, c=DOMAIN_C, weights=wt)
        s_a[fa == f] = a[fa == f] @ coef + intercept
        s_b[fb == f] = b[fb == f] @ coef + intercept
    auc = _auc(s_a, s_b, wb) if a.shape[1] else 0.5
    ratio = np.exp(np.clip(s_a - np.max(s_a), -50.0, 0.0))
    ratio /= float(np.mean(ratio))
    clipped = float(np.sum(np.maximum(ratio - clip, 0.0)) / n)
    ratio = np.minimum(ratio, clip)
    ratio /= float(np.mean(ratio))
    ess = float(np.sum(ratio) ** 2 / np.sum(ratio * ratio))
    return DomainWeights(ratio, auc, ess, clipped, int(a.shape[1]))


def shift_margin(point: float, reference_accuracy: float, auc: float) -> float:
    """The interval's shift term of a weighted estimate (see the module docstring)."""
    return INFLATION * abs(point - reference_accuracy) + FLOOR + AUC_MARGIN * max(0.0, 2.0 * auc - 1.0) ** 2


def weighted_atc_threshold(
    confidence: NDArray[np.float64],
    weights: NDArray[np.float64],
    accuracy: float,
    order: NDArray[np.int64] | None = None,
) -> tuple[float, float]:
    """(t, tie fraction f): the weighted share of ``confidence`` above t, plus f × the weighted share equal to t,
    is ``accuracy``; ``order``: the rows by confidence, highest first (computed when not given)."""
    total = float(np.sum(weights))
    k = accuracy * total
    if k <= 0:
        return math.inf, 0.0
    if order is None:
        order = np.argsort(-confidence, kind="stable")
    cum = np.cumsum(weights[order])
    i = min(int(np.searchsorted(cum, k - 1e-12 * total, side="left")), order.shape[0] - 1)
    t = float(confidence[order[i]])
    above = float(np.sum(weights[confidence > t]))
    equal = float(np.sum(weights[confidence == t]))
    frac = min(1.0, max(0.0, (k - above) / equal)) if equal > 0 else 0.0
    return t, frac


def _share(conf: NDArray[np.float64], t: float, frac: float, w: NDArray[np.float64] | None) -> float:
    hit = (conf > t) + frac * (conf == t)
    return float(np.mean(hit) if w is None else np.sum(w * hit) / np.sum(w))


def _mean(v: NDArray[np.float64], w: NDArray[np.float64] | None) -> float:
    return float(np.mean(v) if w is None else np.sum(w * v) / np.sum(w))


def weighted_estimates(
    ref: WeightingReference,
    confidence: NDArray[np.float64],
    outputs: NDArray[np.float64],
    inputs: NDArray[np.float64] | None,
    window_weights: NDArray[np.float64] | None,
    *,
    seed: int = 0,  # not a setting: estimate's, passed through (run estimates without one)
    draws: int = N_DRAWS,
) -> dict[str, Any]:
    """The weighted estimates of a window (valid rows only): ``{"iw": {...}, "iw_atc": {...}, "domain": {...},
    "p": calibrated P(correct) per window row, "warnings": [...]}``, each method's entry ``{"point", "sd_fit"}``
    (the noise and the shift margin are :func:`~monitor.accuracy.estimators.estimate`'s to add)."""
    rng = np.random.default_rng([seed, 0x1A7])
    warnings: list[str] = []
    use_inputs = inputs is not None and ref.inputs.shape[1] > 0 and inputs.shape[1] == ref.center.shape[0]
    if inputs is not None and ref.inputs.shape[1] > 0 and not use_inputs:
        warnings.append(
            f"the window has {inputs.shape[1]} input columns, the reference {ref.center.shape[0]}: the domain "
            "classifier reads the model's outputs only"
        )
    m = confidence.shape[0]
    if m < MIN_WINDOW_ROWS:
        warnings.append(
            f"only {m} rows (< {MIN_WINDOW_ROWS}): too few for the domain classifier, so iw weighs every "
            "reference row alike (it equals ac)"
        )
        dom = DomainWeights(np.ones(ref.n), 0.5, float(ref.n), 0.0, 0)
    else:
        left = [ref.outputs]
        right = [outputs]
        if use_inputs:
            assert inputs is not None
            left.insert(0, ref.inputs)
            right.insert(0, ref.project(inputs))
        dom = domain_weights(np.hstack(left), np.hstack(right), rng, window_weights=window_weights)
    w = dom.weights
    conf_r, ok_r = ref.confidence, ref.correct
    acc_w = _mean(ok_r.astype(np.float64), w)
    lc = logit(confidence)
    a, b = temperature_params(conf_r, ok_r, w)
    p = sigmoid(a * lc + b)
    t, frac = weighted_atc_threshold(conf_r, w, acc_w)
    iw_draws, atc_draws = [], []
    order = np.argsort(-conf_r, kind="stable")
    for _ in range(draws):
        # a bootstrap resample as counts per row: the same fits on the same rows, warm-started, no re-sorting
        wd = w * rng.multinomial(ref.n, np.full(ref.n, 1.0 / ref.n))
        ad, bd = temperature_params(conf_r, ok_r, wd, start=(a, b))
        iw_draws.append(_mean(sigmoid(ad * lc + bd), window_weights))
        td, fd = weighted_atc_threshold(conf_r, wd, _mean(ok_r.astype(np.float64), wd), order)
        atc_draws.append(_share(confidence, td, fd, window_weights))
    if dom.ess < 0.1 * ref.n:
        warnings.append(
            f"the window is far from the labelled reference (domain AUC {dom.auc:.2f}, effective sample size "
            f"{dom.ess:.0f} of {ref.n}): the weighted estimates rest on few reference rows"
        )
    return {
        "iw": {"point": _mean(p, window_weights), "sd_fit": float(np.std(iw_draws)) if iw_draws else 0.0},
        "iw_atc": {
            "point": _share(confidence, t, frac, window_weights),
            "sd_fit": float(np.std(atc_draws)) if atc_draws else 0.0,
        },
        "domain": {**dom.summary(), "weighted_reference_accuracy": acc_w, "inputs": bool(use_inputs)},
        "p": p,
        "warnings": warnings,
    }
