"""Label-free accuracy estimators fitted on a labelled reference: AC, ATC, DoC and ``harmonic``.

Every estimator reads per-event scores of :class:`~monitor.signals.scorer.RobustnessScorer` — the confidence of
the predicted class (``ScoreResult.probability``), γ, flicker and P_adj — and estimates the accuracy the model
realizes on the target rows, with a 90 % interval:

``ac`` (Average Confidence)
    the mean calibrated confidence (:mod:`monitor.accuracy.calibration`).
``atc`` (Average Thresholded Confidence, Garg et al., ICLR 2022)
    a threshold t on the confidence such that the share of reference rows above t equals the reference accuracy
    (ties at t share out fractionally, so the reference matches exactly); the estimate is the share of target rows
    above t. The score is the raw confidence: any monotone calibration leaves the share unchanged.
``doc`` (Difference of Confidences, Guillory et al., ICCV 2021)
    reference accuracy + (mean target confidence − mean reference confidence), raw confidences.
``harmonic`` (ours)
    a logistic model of P(correct | logit confidence, log γ, flicker, logit P_adj) fitted on the reference with
    K-fold cross-fitting: every reference row's out-of-fold prediction judges the fit (log-loss beside the
    confidence-only model's), and the extra features are kept only when they lower that out-of-fold log-loss; the
    estimate is the mean predicted P(correct) over the target rows.

The interval (90 %, normal: estimate ± 1.645·sd, clipped to [0, 1]) adds three variances:

1. **realized noise**, Poisson-binomial: the window's realized accuracy is a sum of independent Bernoulli(p_i)
   over its rows, variance Σp_i(1 − p_i)/n² with p_i the calibrated confidence (``harmonic``: its own P(correct)),
   read with the normal approximation — fine from a few dozen rows. Below :data:`SMALL_N` rows the worst case
   1/(4n) replaces it, so the interval of a tiny window is wide (and the result says so);
2. **fit noise**: the spread of the estimate over :data:`N_DRAWS` bootstrap resamples of the reference, each
   refitting the calibration, the ATC threshold, the DoC offset or the logistic model (the draws are part of the
   fit, so an estimate costs no refit);
3. **shift**: none of these estimators is unbiased under shift, and their error grows with how far the window has
   moved, and the interval must account for it. The margin is ``shift_inflation`` × |AC estimate −
   reference accuracy| (how far the calibrated confidence moved, the same for every method) plus a floor
   ``shift_floor``, both chosen on ``bench/accuracy_estimate.py`` (docs/BENCHMARKS.md, *Accuracy estimate vs peers*).

Sampling weights (the class-stratified sampler): ``estimate(..., weights=1/p(sampled))`` weights every
mean, share and variance.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.accuracy.calibration import (
    CALIBRATION_KINDS,
    Calibration,
    CalibrationKind,
    logit,
    sigmoid,
    temperature_params,
)
from monitor.accuracy.confidence_errors import ConfidenceErrors
from monitor.accuracy.harmonic import (
    HarmonicModel,
    as_float,
    feature_matrix,
    fit_harmonic,
    harmonic_draw,
)
from monitor.accuracy.segments import read_segments
from monitor.accuracy.weighted import NO_SHIFT_AUC, WeightingReference, shift_margin, weighted_estimates
from monitor.config import AccuracySettings, ScoringSettings, setting_default
from monitor.errors import DataError

METHODS: tuple[str, ...] = ("harmonic", "ac", "atc", "doc", "iw", "iw_atc")
#: the primary method by a stated rule: ``iw`` where the window's rows are at hand and the fit kept the reference's
#: (``estimate``, the API), ``atc`` where only scores are (``run``): each the best measured in its case
#: (docs/BENCHMARKS.md, *Accuracy estimate vs peers*)
AUTO = "auto"
#: what ``accuracy.method`` and ``--method`` take
PRIMARY_CHOICES: tuple[str, ...] = (AUTO, *METHODS)
#: the methods that need the reference rows a fit keeps for the domain classifier (fits of version 1 lack them)
WEIGHTED_METHODS: tuple[str, ...] = ("iw", "iw_atc")
#: the primary method when none is named (the best on the benchmark, docs/BENCHMARKS.md, *Accuracy estimate vs
#: peers*): AC, ATC and harmonic tie on MAE over all sets, and ATC is by far the best where accuracy moved 10 points
#: or more, which is what an alert is for; declared as the setting accuracy.method
DEFAULT_METHOD: str = setting_default(AccuracySettings, "method")
#: the seed of a fit's folds and bootstrap unless told: the ``scoring.seed`` setting's default (the commands that fit
#: pass the setting)
_SEED: int = setting_default(ScoringSettings, "seed")
FIT_FORMAT = "harmonic-monitor/accuracy-estimator"
FIT_VERSION = 2
#: versions :meth:`EstimatorFit.from_dict` reads: 1 (no rows for the weighted methods) and the current one
READABLE_FIT_VERSIONS = (1, FIT_VERSION)
LEVEL = 0.90
Z = 1.6448536269514722  # the standard normal's 95th percentile: a two-sided 90 % interval
#: below this many rows the interval uses the worst-case Bernoulli variance and the result carries a warning
SMALL_N = 30
#: fewest valid reference rows a fit accepts
MIN_REFERENCE_ROWS = 20
N_DRAWS = 100
FOLDS = 5
#: the shift margin: SHIFT_INFLATION × |AC − reference accuracy| + SHIFT_FLOOR (see the module docstring)
SHIFT_INFLATION = 0.75
SHIFT_FLOOR = 0.01
#: said on every estimate (docs/OPERATIONS.md, *Accuracy without labels*)
CONCEPT_CAVEAT = (
    "an estimate from the model's confidence and inputs cannot see a change of the label given the inputs "
    "(concept shift): only labels can"
)


def valid_confidence(confidence: ArrayLike) -> NDArray[np.bool_]:
    """Rows whose confidence is a probability (a scored classifier row): finite and in (0, 1]."""
    conf = as_float(confidence)
    with np.errstate(invalid="ignore"):
        ok: NDArray[np.bool_] = np.isfinite(conf) & (conf > 0.0) & (conf <= 1.0)
    return ok


def _not_classifier(what: str) -> DataError:
    return DataError(
        f"{what} holds no class probability on any row: accuracy estimation is for classifiers (a regressor's "
        "scores have no confidence, and 'accuracy' has no meaning for it)"
    )


@dataclass(frozen=True, slots=True)
class EstimatorFit:
    """Everything the estimators need from the labelled reference; JSON-able by :meth:`to_dict`.

    ``draws``: per method, :data:`N_DRAWS` refits on bootstrap resamples of the reference — ``ac``: [a, b] of the
    temperature calibration (empty for isotonic), ``atc``: [threshold, tie fraction], ``doc``: the offset
    (accuracy − mean confidence), ``harmonic``: [intercept, *coef].
    """

    n: int
    accuracy: float
    calibration: Calibration
    atc_threshold: float
    atc_tie_fraction: float
    mean_confidence: float
    harmonic: HarmonicModel
    draws: dict[str, list[list[float]]]
    diagnostics: dict[str, Any] = field(default_factory=dict)
    shift_inflation: float = SHIFT_INFLATION
    shift_floor: float = SHIFT_FLOOR
    weighting: WeightingReference | None = None
    #: per segment the labelled reference carries: ``{"accuracy", "n"}`` (:mod:`monitor.accuracy.segments`)
    segments: dict[str, dict[str, float]] = field(default_factory=dict)
    #: how often the least confident reference rows were wrong: whether a fall in confidence is harm evidence
    #: (:mod:`monitor.accuracy.confidence_errors`); None in a fit written before it was kept
    confidence_errors: ConfidenceErrors | None = None

    def reference_of(self, segment: str | None) -> tuple[float, int, bool]:
        """(accuracy, rows, own) the estimate of ``segment``'s window compares with: the segment's own reference
        accuracy where the labelled reference carries the segment (``own``), else the model-wide one."""
        seg = self.segments.get(segment) if segment is not None else None
        if seg is None:
            return self.accuracy, self.n, False
        return float(seg["accuracy"]), int(seg["n"]), True

    def to_dict(self) -> dict[str, Any]:
        """The JSON document a reference file stores under ``accuracy_estimator``."""
        return {
            "format": FIT_FORMAT,
            "version": FIT_VERSION,
            "n": self.n,
            "accuracy": self.accuracy,
            "calibration": self.calibration.to_dict(),
            "atc": {"threshold": self.atc_threshold, "tie_fraction": self.atc_tie_fraction},
            "doc": {"mean_confidence": self.mean_confidence},
            "harmonic": self.harmonic.to_dict(),
            "interval": {"level": LEVEL, "shift_inflation": self.shift_inflation, "shift_floor": self.shift_floor},
            "draws": {k: [list(map(float, d)) for d in v] for k, v in self.draws.items()},
            "diagnostics": self.diagnostics,
            **({} if self.weighting is None else {"weighting": self.weighting.to_dict()}),
            **({"segments": self.segments} if self.segments else {}),
            **({} if self.confidence_errors is None else {"confidence_errors": self.confidence_errors.to_dict()}),
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> EstimatorFit:
        """Read :meth:`to_dict`'s document back.

        Raises
        ------
        DataError
            Not such a document, another version, or a damaged one.
        """
        if (
            not isinstance(doc, Mapping)
            or doc.get("format") != FIT_FORMAT
            or doc.get("version") not in READABLE_FIT_VERSIONS
        ):
            got = (doc.get("format"), doc.get("version")) if isinstance(doc, Mapping) else type(doc).__name__
            raise DataError(
                f"not an accuracy-estimator fit of format {FIT_FORMAT!r} version {FIT_VERSION} (got {got}); rebuild "
                "it from a labelled reference"
            )
        try:
            draws = {str(k): [[float(x) for x in d] for d in v] for k, v in doc["draws"].items()}
            interval = doc.get("interval", {})
            fit = cls(
                n=int(doc["n"]),
                accuracy=float(doc["accuracy"]),
                calibration=Calibration.from_dict(doc["calibration"]),
                atc_threshold=float(doc["atc"]["threshold"]),
                atc_tie_fraction=float(doc["atc"]["tie_fraction"]),
                mean_confidence=float(doc["doc"]["mean_confidence"]),
                harmonic=HarmonicModel.from_dict(doc["harmonic"]),
                draws=draws,
                diagnostics=dict(doc.get("diagnostics", {})),
                shift_inflation=float(interval.get("shift_inflation", SHIFT_INFLATION)),
                shift_floor=float(interval.get("shift_floor", SHIFT_FLOOR)),
                weighting=None if doc.get("weighting") is None else WeightingReference.from_dict(doc["weighting"]),
                segments=read_segments(doc.get("segments")),
                confidence_errors=ConfidenceErrors.from_dict(doc.get("confidence_errors")),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DataError(
                f"the accuracy-estimator fit is damaged ({type(exc).__name__}: {exc}); rebuild it from a labelled "
                "reference"
            ) from exc
        if not 0.0 <= fit.accuracy <= 1.0 or fit.n < 1:
            raise DataError(f"the accuracy-estimator fit is damaged (accuracy {fit.accuracy}, n {fit.n})")
        return fit


# -- fitting ------------------------------------------------------------------------------------------------------


def atc_threshold(confidence: NDArray[np.float64], accuracy: float) -> tuple[float, float]:
    """(t, tie fraction f): the share of ``confidence`` above t, plus f × the share equal to t, is ``accuracy``."""
    n = confidence.shape[0]
    k = accuracy * n
    if k <= 0:
        return math.inf, 0.0
    s = np.sort(confidence)[::-1]
    t = float(s[min(n, math.ceil(k - 1e-9)) - 1])
    above = int(np.count_nonzero(confidence > t))
    equal = int(np.count_nonzero(confidence == t))
    frac = min(1.0, max(0.0, (k - above) / equal)) if equal else 0.0
    return t, frac


def _atc_share(confidence: NDArray[np.float64], t: float, frac: float, w: NDArray[np.float64] | None = None) -> float:
    hit = (confidence > t) + frac * (confidence == t)
    return float(np.mean(hit) if w is None else np.sum(w * hit) / np.sum(w))


def fit_estimators(
    confidence: ArrayLike,
    gamma: ArrayLike,
    flicker: ArrayLike,
    p_adj: ArrayLike,
    correct: ArrayLike,
    *,
    seed: int = _SEED,
    calibration: CalibrationKind = "temperature",
    draws: int = N_DRAWS,
    folds: int = FOLDS,
    inputs: ArrayLike | None = None,
) -> EstimatorFit:
    """Fit every estimator on a labelled reference (a validation set the model did not train on).

    Parameters
    ----------
    confidence, gamma, flicker, p_adj : per reference row, as ``ScoreResult.probability``, ``.gamma``, ``.flicker``,
        ``.p_adj``. Rows whose confidence is not a probability (invalid rows, rows without a class) are left out.
    correct : per row, whether the predicted class equals the label.
    seed : seeds the folds and the bootstrap (``reference --labels`` passes ``scoring.seed``, the default's setting).
    calibration : ``temperature`` (default) or ``isotonic`` (:mod:`monitor.accuracy.calibration`).
    inputs : per row, the model's numeric inputs (n, d), kept (a sample of :data:`~monitor.accuracy.weighted.MAX_ROWS`
        rows) for the domain classifier of the weighted methods; without them it reads the model's outputs alone.

    Raises
    ------
    DataError
        No row has a confidence (a regressor), fewer than :data:`MIN_REFERENCE_ROWS` valid rows, or arrays of
        different lengths.
    """
    if calibration not in CALIBRATION_KINDS:
        raise ValueError(f"calibration must be one of {CALIBRATION_KINDS}; got {calibration!r}")
    conf_all = as_float(confidence)
    ok_all = np.asarray(correct).reshape(-1).astype(np.bool_)
    x_all = feature_matrix(conf_all, gamma, flicker, p_adj)
    valid = _valid_reference(conf_all, ok_all, x_all)
    n = int(np.count_nonzero(valid))
    conf, ok, x = conf_all[valid], ok_all[valid], x_all[valid]
    accuracy = float(np.mean(ok))
    rng = np.random.default_rng([seed, 0xACC])
    rows = _inputs(inputs, conf_all.shape[0])
    weighting = WeightingReference.build(
        None if rows is None else rows[valid], x, conf, ok, np.random.default_rng([seed, 0x1A7])
    )

    cal = Calibration.fit(conf, ok, calibration)
    t, frac = atc_threshold(conf, accuracy)
    mean_conf = float(np.mean(conf))

    harmonic, chosen = fit_harmonic(x, ok, folds, rng)
    boot = _bootstrap(conf, ok, x, harmonic, calibration, draws, rng)
    diagnostics = {"calibration": calibration, **chosen, "rows_left_out": int(conf_all.shape[0] - n)}
    return EstimatorFit(
        n=n,
        accuracy=accuracy,
        calibration=cal,
        atc_threshold=t,
        atc_tie_fraction=frac,
        mean_confidence=mean_conf,
        harmonic=harmonic,
        draws=boot,
        diagnostics=diagnostics,
        weighting=weighting,
        confidence_errors=ConfidenceErrors.measure(conf, ok),
    )


def _valid_reference(
    conf_all: NDArray[np.float64], ok_all: NDArray[np.bool_], x_all: NDArray[np.float64]
) -> NDArray[np.bool_]:
    """The reference rows a fit reads (a confidence that is a probability), once their count and lengths are checked."""
    if not conf_all.shape[0] == ok_all.shape[0] == x_all.shape[0]:
        raise DataError(
            f"reference scores and correctness differ in length ({conf_all.shape[0]} vs {ok_all.shape[0]}; "
            f"features {x_all.shape[0]})"
        )
    valid = valid_confidence(conf_all)
    if conf_all.shape[0] and not valid.any():
        raise _not_classifier("the reference")
    n = int(np.count_nonzero(valid))
    if n < MIN_REFERENCE_ROWS:
        raise DataError(
            f"the labelled reference has {n} valid rows; fitting accuracy estimators needs at least "
            f"{MIN_REFERENCE_ROWS} (a few hundred for intervals worth reading)"
        )
    return valid


def _bootstrap(
    conf: NDArray[np.float64],
    ok: NDArray[np.bool_],
    x: NDArray[np.float64],
    harmonic: HarmonicModel,
    calibration: str,
    draws: int,
    rng: np.random.Generator,
) -> dict[str, list[list[float]]]:
    """Per method, ``draws`` refits on bootstrap resamples of the reference (see :class:`EstimatorFit`)."""
    n = conf.shape[0]
    boot: dict[str, list[list[float]]] = {"ac": [], "atc": [], "doc": [], "harmonic": []}
    for _ in range(draws):
        pick = rng.integers(0, n, size=n)
        c_b, ok_b = conf[pick], ok[pick]
        acc_b = float(np.mean(ok_b))
        if calibration == "temperature":
            boot["ac"].append(list(temperature_params(c_b, ok_b)))
        boot["atc"].append(list(atc_threshold(c_b, acc_b)))
        boot["doc"].append([acc_b - float(np.mean(c_b))])
        boot["harmonic"].append(harmonic_draw(x[pick], ok_b, harmonic))
    return boot


def _inputs(inputs: ArrayLike | None, n: int) -> NDArray[np.float64] | None:
    """The inputs as an (n, d) float array (one row per scored row), or None."""
    if inputs is None:
        return None
    x = np.asarray(inputs, dtype=np.float64)
    x = x.reshape(x.shape[0], -1) if x.ndim != 2 else x
    if x.shape[0] != n:
        raise DataError(f"{x.shape[0]} input rows for {n} scored rows; give the inputs the scores were made on")
    return x


# -- estimating ---------------------------------------------------------------------------------------------------


def _wmean(v: NDArray[np.float64], w: NDArray[np.float64] | None) -> float:
    return float(np.mean(v) if w is None else np.sum(w * v) / np.sum(w))


def _poisson_binomial_var(p: NDArray[np.float64], w: NDArray[np.float64] | None, small: bool) -> float:
    """Variance of the (weighted) realized accuracy of independent Bernoulli(p_i) rows; worst case when small."""
    q = np.full_like(p, 0.25) if small else p * (1.0 - p)
    if w is None:
        return float(np.sum(q)) / float(p.shape[0]) ** 2
    return float(np.sum(w * w * q) / np.sum(w) ** 2)


def estimate(
    fit: EstimatorFit,
    confidence: ArrayLike,
    gamma: ArrayLike,
    flicker: ArrayLike,
    p_adj: ArrayLike,
    *,
    method: str | None = None,
    seed: int = 0,  # not a setting: unused; run estimates without one, the offline commands pass scoring.seed
    weights: ArrayLike | None = None,
    inputs: ArrayLike | None = None,
) -> dict[str, Any]:
    """Estimate the accuracy the model realizes on the target rows, by every method, with 90 % intervals.

    Parameters
    ----------
    fit : :func:`fit_estimators` (or :meth:`EstimatorFit.from_dict` of a stored one).
    confidence, gamma, flicker, p_adj : per target row (``ScoreResult`` fields); rows whose confidence is not a
        probability are left out (``n_invalid``); a missing γ, flicker or P_adj is imputed by the reference median.
    method : the primary method (``accuracy``): one of :data:`PRIMARY_CHOICES`; default :data:`DEFAULT_METHOD`
        (``auto``: see :data:`AUTO`).
    seed : seeds the weighted methods' domain-classifier folds and bootstrap.
    weights : per row, a sampling weight (1/p(sampled)); default equal.
    inputs : per row, the model's numeric inputs (n, d), for the weighted methods' domain classifier (when the fit
        kept reference inputs); without them it reads the model's outputs alone.

    Returns
    -------
    ``{"n", "n_invalid", "level", "reference_accuracy", "reference_n", "accuracy": {"estimate", "lower", "upper",
    "method", "sd"}, "methods": {name: {"estimate", "lower", "upper", "sd", "sd_noise", "sd_fit",
    "shift_margin"}}, "domain": {"auc", "ess", "clipped_share", ...} (fits with reference rows), "caveats": [...],
    "warnings": [...]}``, every number a finite float. ``iw`` and ``iw_atc`` are left out for a fit without
    reference rows (version 1); named as the primary method there, ``atc`` stands in with a warning.

    Raises
    ------
    DataError
        An unknown method, no valid row at all, or no confidence on any row (a regressor).
    """
    primary = DEFAULT_METHOD if method is None else method
    if primary not in PRIMARY_CHOICES:
        raise DataError(f"unknown accuracy-estimation method {primary!r}; choose one of {', '.join(PRIMARY_CHOICES)}")
    conf_all = as_float(confidence)
    x_all = feature_matrix(conf_all, gamma, flicker, p_adj)
    if x_all.shape[0] != conf_all.shape[0]:
        raise DataError("confidence, gamma, flicker and p_adj differ in length")
    rows = _inputs(inputs, conf_all.shape[0])
    if primary == AUTO:
        kept = fit.weighting is not None and fit.weighting.inputs.shape[1] > 0
        primary = "iw" if kept and rows is not None else "atc"
    valid, w = _valid_window(conf_all, weights)
    n = int(np.count_nonzero(valid))
    conf, x = conf_all[valid], x_all[valid]
    small = n < SMALL_N
    warnings: list[str] = []
    if small:
        warnings.append(
            f"only {n} rows (< {SMALL_N}): the realized-accuracy noise uses the worst case 1/(4n), so the interval "
            "is wide; read the estimate as a rough guide"
        )
    parts = _unweighted(fit, conf, x, w, small)
    domain: dict[str, Any] | None = None
    if fit.weighting is not None:
        domain = _weighted(fit, conf, x, None if rows is None else rows[valid], w, small, seed, parts, warnings)
    elif primary in WEIGHTED_METHODS:
        warnings.append(
            f"method {primary} needs reference rows this fit does not keep (a fit of version 1): atc stands in; "
            "rebuild the reference with labels for it"
        )
        primary = "atc"
    methods = _bands(*parts)
    top = methods[primary]
    return {
        "n": n,
        "n_invalid": int(conf_all.shape[0] - n),
        "level": LEVEL,
        "reference_accuracy": fit.accuracy,
        "reference_n": fit.n,
        "accuracy": {
            "estimate": top["estimate"],
            "lower": top["lower"],
            "upper": top["upper"],
            "method": primary,
            "sd": top["sd"],
        },
        "methods": methods,
        **({} if domain is None else {"domain": domain}),
        "caveats": caveats(domain, fit.confidence_errors),
        "warnings": warnings,
    }


def _valid_window(
    conf_all: NDArray[np.float64], weights: ArrayLike | None
) -> tuple[NDArray[np.bool_], NDArray[np.float64] | None]:
    """The window's rows an estimate reads (a confidence that is a probability, a positive finite weight) and their
    weights (None: equal)."""
    valid = valid_confidence(conf_all)
    w: NDArray[np.float64] | None = None
    if weights is not None:
        w_all = as_float(weights)
        if w_all.shape[0] != conf_all.shape[0]:
            raise DataError(f"{w_all.shape[0]} weights for {conf_all.shape[0]} rows")
        valid &= np.isfinite(w_all) & (w_all > 0)
        w = w_all[valid]
    if not valid.any():
        if conf_all.shape[0] and not np.isfinite(conf_all).any():
            raise _not_classifier("the data")
        raise DataError(f"no valid rows to estimate accuracy on ({conf_all.shape[0]} rows, none scored)")
    return valid, w


#: per method: the point estimate, the bootstrap sd, the noise variance and the shift margin
_Parts = tuple[dict[str, float], dict[str, float], dict[str, float], dict[str, float]]


def _weighted(
    fit: EstimatorFit,
    conf: NDArray[np.float64],
    x: NDArray[np.float64],
    rows: NDArray[np.float64] | None,
    w: NDArray[np.float64] | None,
    small: bool,
    seed: int,
    parts: _Parts,
    warnings: list[str],
) -> dict[str, Any]:
    """``iw`` and ``iw_atc`` added to ``parts`` (their warnings to ``warnings``); the domain classifier's summary."""
    assert fit.weighting is not None
    points, fit_sd, noise, margins = parts
    iw = weighted_estimates(fit.weighting, conf, x, rows, w, seed=seed)
    noise_iw = _poisson_binomial_var(iw["p"], w, small)
    for name in WEIGHTED_METHODS:
        points[name], fit_sd[name], noise[name] = iw[name]["point"], iw[name]["sd_fit"], noise_iw
        margins[name] = shift_margin(points[name], fit.accuracy, float(iw["domain"]["auc"]))
    warnings.extend(iw["warnings"])
    domain: dict[str, Any] = iw["domain"]
    return domain


def _bands(
    points: dict[str, float], fit_sd: dict[str, float], noise: dict[str, float], margins: dict[str, float]
) -> dict[str, dict[str, float]]:
    """Every method's estimate (clipped to [0, 1]) and 90 % interval from its three variances."""
    methods: dict[str, dict[str, float]] = {}
    for name in (m for m in METHODS if m in points):
        e = min(1.0, max(0.0, points[name]))
        sd = math.sqrt(noise[name] + fit_sd[name] ** 2 + margins[name] ** 2)
        methods[name] = {
            "estimate": e,
            "lower": max(0.0, e - Z * sd),
            "upper": min(1.0, e + Z * sd),
            "sd": sd,
            "sd_noise": math.sqrt(noise[name]),
            "sd_fit": fit_sd[name],
            "shift_margin": margins[name],
        }
    return methods


def _unweighted(
    fit: EstimatorFit, conf: NDArray[np.float64], x: NDArray[np.float64], w: NDArray[np.float64] | None, small: bool
) -> _Parts:
    """ac, atc, doc and harmonic on the window's valid rows: (points, bootstrap sd, noise variance, shift margin)."""
    p_cal = fit.calibration.apply(conf)
    ac = _wmean(p_cal, w)
    margin = fit.shift_inflation * abs(ac - fit.accuracy) + fit.shift_floor
    noise_cal = _poisson_binomial_var(p_cal, w, small)

    points: dict[str, float] = {}
    fit_sd: dict[str, float] = {}
    noise: dict[str, float] = {}

    points["ac"] = ac
    ac_draws = [_wmean(sigmoid(a * logit(conf) + b), w) for a, b in fit.draws.get("ac", [])]
    fit_sd["ac"] = float(np.std(ac_draws)) if ac_draws else 0.0
    noise["ac"] = noise_cal

    points["atc"] = _atc_share(conf, fit.atc_threshold, fit.atc_tie_fraction, w)
    atc_draws = [_atc_share(conf, t, f, w) for t, f in fit.draws.get("atc", [])]
    fit_sd["atc"] = float(np.std(atc_draws)) if atc_draws else 0.0
    noise["atc"] = noise_cal

    mean_conf = _wmean(conf, w)
    points["doc"] = fit.accuracy + mean_conf - fit.mean_confidence
    doc_draws = [d[0] + mean_conf for d in fit.draws.get("doc", [])]
    fit_sd["doc"] = float(np.std(doc_draws)) if doc_draws else 0.0
    noise["doc"] = noise_cal

    design = fit.harmonic.design(x)
    p_h = sigmoid(design @ fit.harmonic.coef + fit.harmonic.intercept)
    points["harmonic"] = _wmean(p_h, w)
    h_draws = [_wmean(sigmoid(design @ np.asarray(d[1:]) + d[0]), w) for d in fit.draws.get("harmonic", [])]
    fit_sd["harmonic"] = float(np.std(h_draws)) if h_draws else 0.0
    noise["harmonic"] = _poisson_binomial_var(p_h, w, small)
    return points, fit_sd, noise, dict.fromkeys(points, margin)


def caveats(domain: Mapping[str, Any] | None, errors: ConfidenceErrors | None = None) -> list[str]:
    """What an estimate cannot claim, in words: always the blindness to a change of P(y|x); when the domain
    classifier found no input shift, that labels which disagree are right; when the labelled reference's least
    confident answers were about as often right as the rest (``errors``, at the default tolerance), that a fall in
    confidence, and so an estimate built on it, says little of this model's accuracy."""
    out = [CONCEPT_CAVEAT]
    unsure = None if errors is None else errors.estimate_caveat(setting_default(AccuracySettings, "tolerance"))
    if unsure is not None:
        out.append(unsure)
    if domain is not None and float(domain.get("features", 0)) > 0 and float(domain["auc"]) < NO_SHIFT_AUC:
        out.append(
            f"the domain classifier finds no input shift (AUC {float(domain['auc']):.2f}): if delayed labels "
            "disagree with this estimate, the labels are right: the label given the inputs has changed"
        )
    return out
