"""A regressor's error without labels: MAE and RMSE estimated on a window from a labelled reference.

Four methods, each with a 90 % interval (``methods`` of :func:`estimate_loss`; :data:`DEFAULT_METHOD` is the one
reported as ``mae``/``rmse``):

- ``gbdt`` (the default): DLE's recipe (NannyML's direct loss estimation: LightGBM with its defaults on the inputs
  and the prediction) plus one feature — two gradient-boosted models (scikit-learn's HistGradientBoostingRegressor
  with LightGBM's defaults: 100 steps of 0.1, 31 leaves, 20 rows a leaf; seeded, one thread) learn |y − ŷ| and
  (y − ŷ)² on the labelled reference's standardized inputs (not projected: the trees split on the inputs themselves;
  inputs wider than :data:`GBDT_MAX_INPUTS` use the projected design), its standardized prediction and each row's
  mean distance to its :data:`NEIGHBOURS` nearest reference rows (a reference row leaving itself out): the error
  grows where the reference is sparse, and the distance says so in every direction at once. The estimate is the
  window's mean predicted loss. The reference file keeps the rows (up to
  :data:`~monitor.accuracy.weighted.MAX_ROWS`), not the trees: the models are refitted the same way when a fit is
  loaded (under a second).
- ``iw``: the **importance-weighted reference error** — the weighted mean of the labelled reference's absolute
  (squared) errors, the weights the density ratios window/reference of the code base's one domain classifier
  (:func:`~monitor.accuracy.weighted.domain_weights`: cross-fitted logistic, clipped, its AUC and effective sample
  size reported). Under covariate shift (inputs move, the error given the inputs stays) this is the window's error;
  it cannot extrapolate past the reference's support (the clip bounds the weights there).
- ``dle``: a ridge model of the loss: two ridge regressions on the labelled reference learn |y − ŷ| and (y − ŷ)² from
  the model's standardized inputs (projected on their first :data:`~monitor.accuracy.weighted.MAX_INPUT_DIMS`
  principal components when wider), each one's distance from the mean, and the prediction (standardized, and its
  distance from the reference median); the estimate is the window's mean predicted loss (each floored at 0).
- ``dr``: ``dle`` plus the importance-weighted mean of its residuals on the reference (doubly robust).

RMSE is the square root of the estimated mean squared error. The domain classifier reads the same design as ``dle``.
The 90 % interval adds (1) the window's noise, the reference's variance of the loss over n rows, (2) the spread over
:data:`N_BOOT` bootstrap resamples of the reference rows (each carrying its weight; the term grows as the effective
sample size falls; ``dle``'s and ``gbdt``'s fitted models stay), and (3) a shift margin ``INFLATION × |estimate −
reference value| + (FLOOR + AUC_MARGIN × (2·AUC − 1)²) × reference value``; RMSE's by the delta method. A window of
fewer than :data:`~monitor.accuracy.weighted.MIN_WINDOW_ROWS` rows is refused (no estimate rather than noise).

Measured (``bench/loss_estimate.py``, 226 shifted sets of diabetes and ``make_friedman1``, GBDT and MLP;
docs/BENCHMARKS.md): MAE off by 22.1 % of the reference value for ``gbdt`` against 24.8 % for ``iw``, 26.4 % for "no
change" (the reference's error) and 21.5 % for NannyML's DLE; RMSE 22.1 % against DLE's 22.5 %; on the tuning split
(899 other sets) 13.7 % and 13.7 % against DLE's 14.2 % and 14.8 %. "No change" is closer where the error moved < 10
% (4.1 % against 8.4 %), ``iw`` where it moved 10–25 % (14.6 % against 16.4 %); coverage ≥ 93 % in every bucket.
About 45 ms a 1,000-row window once the models are fitted (the distances: about 10). Like every label-free estimate
it cannot see a change of the target given the inputs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.accuracy.segments import read_segments
from monitor.accuracy.weighted import MAX_INPUT_DIMS, MAX_ROWS, MIN_WINDOW_ROWS, domain_weights
from monitor.config import ScoringSettings, setting_default
from monitor.errors import DataError

#: the bootstrap's seed unless told: the ``scoring.seed`` setting's default
_SEED: int = setting_default(ScoringSettings, "seed")
FORMAT = "harmonic-monitor/loss-estimator"
VERSION = 1
MIN_ROWS = 30
N_DRAWS = 50
RIDGE = 1.0
INFLATION = 0.5
FLOOR = 0.05
#: the interval's widening as the window leaves the reference: AUC_MARGIN × (2·AUC − 1)² × the reference value
AUC_MARGIN = 1.0
Z = 1.6448536269514722
N_BOOT = 30
#: ``gbdt``'s boosted models (scikit-learn's HistGradientBoostingRegressor): LightGBM's defaults as NannyML's DLE
#: fits them (100 steps of 0.1, 31 leaves, 20 rows a leaf), seeded
GBDT_PARAMS: dict[str, float | int] = {
    "max_iter": 100,
    "learning_rate": 0.1,
    "min_samples_leaf": 20,
    "random_state": 0,
}
#: ``gbdt``'s extra feature: a row's mean distance to its this many nearest reference rows (standardized inputs)
NEIGHBOURS = 20
#: rows of a window measured against the reference at a time (bounds the distance matrix's memory)
_DISTANCE_BLOCK = 256
#: inputs up to this wide are kept as they are for ``gbdt`` (wider: the projected design ``rows``)
GBDT_MAX_INPUTS = 64
METHODS = ("iw", "dle", "dr", "gbdt")
DEFAULT_METHOD = "gbdt"


def _ridge(x: NDArray[np.float64], y: NDArray[np.float64]) -> NDArray[np.float64]:
    """[intercept, *coef] of a ridge regression (penalty :data:`RIDGE` on the coefficients)."""
    design = np.column_stack([np.ones(x.shape[0]), x])
    pen = np.full(design.shape[1], RIDGE)
    pen[0] = 0.0
    beta: NDArray[np.float64] = np.linalg.solve(design.T @ design + np.diag(pen), design.T @ y)
    return beta


@dataclass(frozen=True, slots=True)
class LossFit:
    """What the estimate needs of the labelled reference; JSON-able by :meth:`to_dict`."""

    n: int
    mae: float
    rmse: float
    center: NDArray[np.float64]
    scale: NDArray[np.float64]
    basis: NDArray[np.float64] | None
    pred_center: float
    pred_scale: float
    abs_beta: NDArray[np.float64]
    sq_beta: NDArray[np.float64]
    abs_resid_var: float
    sq_resid_var: float
    abs_draws: NDArray[np.float64]
    sq_draws: NDArray[np.float64]
    #: up to MAX_ROWS reference rows' design (the domain classifier's side) and absolute errors
    rows: NDArray[np.float64]
    rows_abs_err: NDArray[np.float64]
    #: per segment the labelled reference carries: ``{"mae", "rmse", "n"}`` (:mod:`monitor.accuracy.segments`)
    segments: dict[str, dict[str, float]] = field(default_factory=dict)
    #: ``gbdt``'s rows: the same reference rows' standardized inputs (not projected: trees split on the inputs
    #: themselves) and standardized prediction; None for inputs wider than GBDT_MAX_INPUTS (then ``rows``)
    gbdt_rows: NDArray[np.float64] | None = None
    #: ``gbdt``'s two boosted models, fitted on first use (not stored: refitted the same way, seeded)
    cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def gbdt_design(self, inputs: NDArray[np.float64], prediction: NDArray[np.float64]) -> NDArray[np.float64]:
        """What ``gbdt``'s models read of a window's rows (as :attr:`gbdt_rows` holds the reference's)."""
        if self.gbdt_rows is None:
            return self.design(inputs, prediction)
        std = np.nan_to_num((inputs - self.center) / self.scale)
        return np.column_stack([std, (prediction - self.pred_center) / self.pred_scale])

    def reference_of(self, segment: str | None) -> tuple[float, float, int, bool]:
        """(MAE, RMSE, rows, own) the estimate of ``segment``'s window compares with: the segment's own reference
        error where the labelled reference carries the segment (``own``), else the model-wide one."""
        seg = self.segments.get(segment) if segment is not None else None
        if seg is None:
            return self.mae, self.rmse, self.n, False
        return float(seg["mae"]), float(seg["rmse"]), int(seg["n"]), True

    def design(self, inputs: NDArray[np.float64], prediction: NDArray[np.float64]) -> NDArray[np.float64]:
        std = np.nan_to_num((inputs - self.center) / self.scale)
        z = std if self.basis is None else std @ self.basis
        p = (prediction - self.pred_center) / self.pred_scale
        return np.column_stack([z, np.abs(z), p, np.abs(p)])

    def to_dict(self) -> dict[str, Any]:
        arrays = {
            k: getattr(self, k).tolist()
            for k in ("center", "scale", "abs_beta", "sq_beta", "abs_draws", "sq_draws", "rows", "rows_abs_err")
        }
        return {
            "format": FORMAT,
            "version": VERSION,
            "n": self.n,
            "mae": self.mae,
            "rmse": self.rmse,
            "basis": None if self.basis is None else self.basis.tolist(),
            "pred_center": self.pred_center,
            "pred_scale": self.pred_scale,
            "abs_resid_var": self.abs_resid_var,
            "sq_resid_var": self.sq_resid_var,
            **arrays,
            **({"segments": self.segments} if self.segments else {}),
            **({} if self.gbdt_rows is None else {"gbdt_rows": self.gbdt_rows.tolist()}),
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> LossFit:
        if doc.get("format") != FORMAT or doc.get("version") != VERSION:
            raise DataError(f"not a loss-estimator fit of format {FORMAT!r} version {VERSION}; rebuild it with labels")
        try:
            f = np.asarray
            return cls(
                int(doc["n"]),
                float(doc["mae"]),
                float(doc["rmse"]),
                f(doc["center"], dtype=np.float64),
                f(doc["scale"], dtype=np.float64),
                None if doc.get("basis") is None else f(doc["basis"], dtype=np.float64),
                float(doc["pred_center"]),
                float(doc["pred_scale"]),
                f(doc["abs_beta"], dtype=np.float64),
                f(doc["sq_beta"], dtype=np.float64),
                float(doc["abs_resid_var"]),
                float(doc["sq_resid_var"]),
                f(doc["abs_draws"], dtype=np.float64),
                f(doc["sq_draws"], dtype=np.float64),
                f(doc["rows"], dtype=np.float64),
                f(doc["rows_abs_err"], dtype=np.float64),
                read_segments(doc.get("segments")),
                None if doc.get("gbdt_rows") is None else f(doc["gbdt_rows"], dtype=np.float64),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"the loss-estimator fit is damaged ({exc}); rebuild it with labels") from exc


def _prediction(prediction: ArrayLike, n: int, what: str) -> NDArray[np.float64]:
    p = np.asarray(prediction, dtype=np.float64)
    if p.ndim == 2 and p.shape[1] == 1:
        p = p[:, 0]
    if p.ndim != 1:
        raise DataError(
            f"{what}: the regressor gives {p.shape[1] if p.ndim == 2 else p.shape} outputs per row; the loss estimate "
            "is for one output (estimate each output with its own fit)"
        )
    if p.shape[0] != n:
        raise DataError(f"{what}: {p.shape[0]} predictions for {n} input rows")
    return p


def fit_loss(inputs: ArrayLike, prediction: ArrayLike, target: ArrayLike, *, seed: int = _SEED) -> LossFit:
    """Fit the loss models on a labelled reference (``target``: the true values; NaN: a row without one, left out).

    Raises
    ------
    DataError
        Fewer than :data:`MIN_ROWS` labelled rows, several outputs per row, or arrays of different lengths.
    """
    x = np.asarray(inputs, dtype=np.float64)
    x = x.reshape(x.shape[0], -1)
    p = _prediction(prediction, x.shape[0], "the reference")
    y = np.asarray(target, dtype=np.float64).reshape(-1)
    if y.shape[0] != x.shape[0]:
        raise DataError(f"{y.shape[0]} labels for {x.shape[0]} reference rows; give one target value per row")
    ok = np.isfinite(y) & np.isfinite(p)
    n = int(np.count_nonzero(ok))
    if n < MIN_ROWS:
        raise DataError(
            f"the labelled reference has {n} rows with a finite target and prediction; the loss estimate needs at "
            f"least {MIN_ROWS} (a few hundred for intervals worth reading)"
        )
    x, p, y = x[ok], p[ok], y[ok]
    with np.errstate(invalid="ignore"):
        center = np.nan_to_num(np.nanmean(x, axis=0))
        scale = np.nan_to_num(np.nanstd(x, axis=0))
    scale = np.where(scale > 1e-12, scale, 1.0)
    std = np.nan_to_num((x - center) / scale)
    basis = None
    if std.shape[1] > MAX_INPUT_DIMS:
        basis = np.linalg.svd(std - std.mean(axis=0), full_matrices=False)[2][:MAX_INPUT_DIMS].T
    pred_center = float(np.median(p))
    pred_scale = float(np.std(p)) or 1.0
    err = y - p
    base = LossFit(
        n, float(np.mean(np.abs(err))), float(np.sqrt(np.mean(err**2))), center, scale, basis, pred_center,
        pred_scale, np.zeros(1), np.zeros(1), 0.0, 0.0, np.zeros((0, 1)), np.zeros((0, 1)), np.zeros((0, 1)),
        np.zeros(0),
    )  # fmt: skip
    d = base.design(x, p)
    abs_beta, sq_beta = _ridge(d, np.abs(err)), _ridge(d, err**2)
    design = np.column_stack([np.ones(n), d])
    rng = np.random.default_rng([seed, 0xD1E])
    keep = np.sort(rng.choice(n, size=MAX_ROWS, replace=False)) if n > MAX_ROWS else np.arange(n)
    draws_abs, draws_sq = [], []
    for _ in range(N_DRAWS):
        pick = rng.integers(0, n, size=n)
        draws_abs.append(_ridge(d[pick], np.abs(err[pick])))
        draws_sq.append(_ridge(d[pick], err[pick] ** 2))
    return LossFit(
        n, base.mae, base.rmse, center, scale, basis, pred_center, pred_scale, abs_beta, sq_beta,
        float(np.var(np.abs(err) - design @ abs_beta)), float(np.var(err**2 - design @ sq_beta)),
        np.asarray(draws_abs), np.asarray(draws_sq), d[keep], np.abs(err)[keep], {},
        np.column_stack([std, (p - pred_center) / pred_scale])[keep] if x.shape[1] <= GBDT_MAX_INPUTS else None,
    )  # fmt: skip


def _wmean(v: NDArray[np.float64], w: NDArray[np.float64]) -> float:
    return float(np.sum(w * v) / np.sum(w))


def _methods(fit: LossFit, design: NDArray[np.float64], weights: NDArray[np.float64]) -> dict[str, tuple[float, float]]:
    """Per method, the (mean absolute error, mean squared error) point estimates on the window."""
    ref = np.column_stack([np.ones(fit.rows.shape[0]), fit.rows])
    ae, se = fit.rows_abs_err, fit.rows_abs_err**2

    def mean_loss(beta: NDArray[np.float64]) -> float:
        return float(np.mean(np.maximum(design @ beta, 0.0)))

    out = {"dle": (mean_loss(fit.abs_beta), mean_loss(fit.sq_beta)), "iw": (_wmean(ae, weights), _wmean(se, weights))}
    out["dr"] = (
        max(0.0, out["dle"][0] + _wmean(ae - np.maximum(ref @ fit.abs_beta, 0.0), weights)),
        max(0.0, out["dle"][1] + _wmean(se - np.maximum(ref @ fit.sq_beta, 0.0), weights)),
    )
    return out


def _one_thread() -> Any:
    """The boosted models and the distances on one thread (OpenMP and BLAS): small work, and a pool of threads that
    spin on a busy machine cost seconds where one thread takes milliseconds."""
    from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

    return threadpool_limits(limits=1)


def neighbour_distance(
    reference: NDArray[np.float64], rows: NDArray[np.float64] | None = None, k: int = NEIGHBOURS
) -> NDArray[np.float64]:
    """Each row's mean Euclidean distance to its ``k`` nearest reference rows; ``rows`` None: the reference's own
    rows, each leaving itself out (so that a reference row reads as a window's row would)."""
    own = rows is None
    target = reference if rows is None else rows
    k = max(1, min(k, reference.shape[0] - (1 if own else 0)))
    ref_sq = np.einsum("ij,ij->i", reference, reference)
    out = np.empty(target.shape[0])
    with _one_thread(), np.errstate(over="ignore", invalid="ignore"):  # a huge input: an infinite or NaN distance
        for start in range(0, target.shape[0], _DISTANCE_BLOCK):
            block = target[start : start + _DISTANCE_BLOCK]
            sq = block @ reference.T
            sq *= -2.0
            sq += ref_sq
            sq += np.einsum("ij,ij->i", block, block)[:, None]
            if own:
                sq[np.arange(block.shape[0]), np.arange(start, start + block.shape[0])] = np.inf
            near = np.partition(sq, k - 1, axis=1)[:, :k]
            out[start : start + block.shape[0]] = np.sqrt(np.maximum(near, 0.0)).mean(axis=1)
    return out


def _space(fit: LossFit, rows: NDArray[np.float64]) -> NDArray[np.float64]:
    """The columns of ``gbdt``'s rows the distances are measured in: the standardized inputs (``gbdt_rows``: all
    but the prediction) or the projected ones (``rows``: ``z`` of ``[z, |z|, p, |p|]``)."""
    return rows[:, :-1] if fit.gbdt_rows is not None else rows[:, : (rows.shape[1] - 2) // 2]


def boosted(fit: LossFit) -> tuple[Any, Any]:
    """``gbdt``'s models of |error| and error² on the reference rows (fitted once per fit, seeded; ``run`` fits them
    when it loads the fit, so that the first window's estimate does not wait for them). They read ``gbdt``'s rows
    and each row's distance from the reference (:func:`neighbour_distance`): the error grows where the reference
    is sparse, and the distance says so in every direction at once."""
    if "gbdt" not in fit.cache:
        from sklearn.ensemble import HistGradientBoostingRegressor

        models = []
        rows = fit.rows if fit.gbdt_rows is None else fit.gbdt_rows
        features = np.column_stack([rows, neighbour_distance(_space(fit, rows))])
        with _one_thread():
            for target in (fit.rows_abs_err, fit.rows_abs_err**2):
                model = HistGradientBoostingRegressor(**GBDT_PARAMS)
                models.append(model.fit(features, target))
        fit.cache["gbdt"] = tuple(models)
    boosted: tuple[Any, Any] = fit.cache["gbdt"]
    return boosted


def _gbdt_estimate(fit: LossFit, inputs: NDArray[np.float64], prediction: NDArray[np.float64]) -> tuple[float, float]:
    """``gbdt``'s (mean absolute error, mean squared error) on a window: its models' mean prediction, each row's
    floored at 0."""
    abs_model, sq_model = boosted(fit)
    rows_of = fit.gbdt_design(inputs, prediction)
    reference = fit.rows if fit.gbdt_rows is None else fit.gbdt_rows
    features = np.column_stack([rows_of, neighbour_distance(_space(fit, reference), _space(fit, rows_of))])
    with _one_thread():
        return (
            float(np.mean(np.maximum(abs_model.predict(features), 0.0))),
            float(np.mean(np.maximum(sq_model.predict(features), 0.0))),
        )


def estimate_loss(fit: LossFit, inputs: ArrayLike, prediction: ArrayLike, *, method: str = "") -> dict[str, Any]:
    """``{"n", "level", "method", "reference": {"mae", "rmse"}, "mae": {"estimate", "lower", "upper", "sd"},
    "rmse": {...}, "methods": {name: {"mae": ..., "rmse": ...}}, "domain": {...}, "warnings": [...]}`` over the
    window's rows with a finite prediction within float32's range (what an ONNX model outputs; a larger one, from the
    Python API, is left out like a NaN: its square would overflow the estimate's variance)."""
    method = method or DEFAULT_METHOD
    if method not in METHODS:
        raise DataError(f"unknown loss-estimate method {method!r}; expected one of {', '.join(METHODS)}")
    x = np.asarray(inputs, dtype=np.float64)
    x = x.reshape(x.shape[0], -1)
    p = _prediction(prediction, x.shape[0], "the window")
    if x.shape[1] != fit.center.shape[0]:
        raise DataError(f"the window has {x.shape[1]} input columns; the reference had {fit.center.shape[0]}")
    ok = np.isfinite(p) & (np.abs(p) <= np.finfo(np.float32).max)
    n = int(np.count_nonzero(ok))
    if n < MIN_WINDOW_ROWS:
        raise DataError(
            f"the window has {n} rows with a finite prediction; the loss estimate needs at least {MIN_WINDOW_ROWS}"
        )
    design = np.column_stack([np.ones(n), fit.design(x[ok], p[ok])])
    dom = domain_weights(fit.rows, design[:, 1:], np.random.default_rng(0xD1E))
    far = AUC_MARGIN * max(0.0, 2.0 * dom.auc - 1.0) ** 2
    points = _methods(fit, design, dom.weights)
    ae = fit.rows_abs_err
    rng = np.random.default_rng(0xB007)
    boot = []
    for _ in range(N_BOOT):
        pick = rng.integers(0, ae.shape[0], size=ae.shape[0])
        sub = replace(fit, rows=fit.rows[pick], rows_abs_err=ae[pick])
        boot.append(_methods(sub, design, dom.weights[pick]))
    gbdt = _gbdt_estimate(fit, x[ok], p[ok])
    points["gbdt"] = gbdt
    for b in boot:
        b["gbdt"] = gbdt  # the boosted models stay (as dle's coefficients): the noise and the margin make its band
    var_ae = float(np.var(ae))
    var_se = float(np.var(ae**2))
    methods: dict[str, dict[str, dict[str, float]]] = {}
    for name, (mae, mse) in points.items():
        b_mae = float(np.var([b[name][0] for b in boot]))
        b_mse = float(np.var([b[name][1] for b in boot]))
        sd_mae = math.sqrt(var_ae / n + b_mae + (INFLATION * abs(mae - fit.mae) + (FLOOR + far) * fit.mae) ** 2)
        rmse = math.sqrt(mse)
        sd_mse = math.sqrt(var_se / n + b_mse)
        sd_rmse = math.sqrt(
            (sd_mse / (2.0 * max(rmse, 1e-12))) ** 2
            + (INFLATION * abs(rmse - fit.rmse) + (FLOOR + far) * fit.rmse) ** 2
        )
        methods[name] = {"mae": _band(mae, sd_mae), "rmse": _band(rmse, sd_rmse)}
    return {
        "n": n,
        "level": 0.90,
        "method": method,
        "reference": {"mae": fit.mae, "rmse": fit.rmse, "n": fit.n},
        "mae": methods[method]["mae"],
        "rmse": methods[method]["rmse"],
        "methods": methods,
        "domain": dom.summary(),
        "caveats": [
            "an estimate from the model's inputs and outputs cannot see a change of the target given the inputs "
            "(concept shift): only labels can"
        ],
        "warnings": [],
    }


def _band(e: float, sd: float) -> dict[str, float]:
    return {"estimate": e, "lower": max(0.0, e - Z * sd), "upper": e + Z * sd, "sd": sd}
