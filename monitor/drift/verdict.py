"""Stage 5b: the per-window verdict — stable, input shift or harmful shift — and the engine behind it.

A label-free verdict claims only what the evidence shows:

- ``harmful-shift``: output-side evidence says the model is affected — a γ detector, a flicker detector, the
  confidence detector (a fall in max-probability) or the margin detector (a fall in top-1 minus top-2 class
  probability) fired, or the label-free accuracy estimate is below its tolerance (``HarmonicAccuracyDrop``'s
  condition, passed in by the caller);
- ``input-shift``: only the per-feature input drift fired. The inputs moved; the monitor cannot tell from the
  outputs whether accuracy suffered — check the accuracy estimate or delayed labels. It is *not* a claim that the
  shift is harmless;
- ``stable``: no evidence of change in inputs or outputs — never a claim that accuracy is fine (a change of
  concept alone, P(y|x) moving while inputs and outputs do not, is invisible without labels).

Delayed labels, when they arrive, override all of these.

:func:`decide_verdict` is the pure rule on detector states. :class:`VerdictEngine` owns the default
detector set built from a reference (γ: CUSUM + KS; flicker: CUSUM + rate test; confidence: CUSUM on
1 − max-probability, and margin: CUSUM on 1 − margin, classifiers only; features: per-feature KS), feeds them per
batch and reads the verdict;
:class:`monitor.config.DriftSettings` (the ``drift`` section of the settings) holds their settings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Self

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.config import DriftSettings
from monitor.drift.base import DriftState, ReferenceLike, WindowPlan
from monitor.drift.calibrate import MIN_REFERENCE
from monitor.drift.categories import CategoryDrift
from monitor.drift.cusum import Cusum
from monitor.drift.features import FeatureDrift, FeatureShift
from monitor.drift.ks import KsDrift
from monitor.drift.multivariate import MAX_INPUTS, ReconstructionDrift
from monitor.drift.quality import RangeDrift
from monitor.drift.rate import RateTest


class Verdict(StrEnum):
    """The verdict of one window."""

    STABLE = "stable"
    INPUT_SHIFT = "input-shift"
    HARMFUL_SHIFT = "harmful-shift"


@dataclass(frozen=True, slots=True)
class VerdictReport:
    """A verdict with its reasons.

    Attributes
    ----------
    verdict : the verdict.
    fired : names of the detectors signalling drift now.
    top_features : (name, KS distance) of the features that moved most, largest first.
    held_since : set on a harmful-shift held by hysteresis after its output-side evidence went off (when it was last
        on); None otherwise.
    """

    verdict: Verdict
    fired: tuple[str, ...] = ()
    top_features: tuple[tuple[str, float], ...] = ()
    #: a harmful-shift held by the verdict's hysteresis: the clock reading when its output-side evidence was last on
    #: (``fired`` names the detectors it was on then); None for a verdict of the detectors now
    held_since: float | None = None
    #: (name, share outside the reference range) of the inputs the data-quality range test flagged
    out_of_range: tuple[tuple[str, float], ...] = ()
    #: (name, total variation distance) of the held inputs whose category frequencies moved
    categories: tuple[tuple[str, float], ...] = ()

    @property
    def message(self) -> str:
        """One line for an alert or a log.

        >>> VerdictReport(Verdict.HARMFUL_SHIFT, ("gamma_cusum",), (("income", 0.31),)).message
        'harmful-shift: gamma_cusum fired; inputs moved: income (D=0.31)'
        """
        text = self.verdict.value
        if self.fired:
            text += ": " + ", ".join(self.fired) + " fired"
        if self.held_since is not None:
            text += " (held: output-side evidence off since then, until alerts.resolve_after_seconds pass)"
        if self.top_features:
            text += "; inputs moved: " + ", ".join(f"{n} (D={d:.2f})" for n, d in self.top_features)
        if self.categories:
            text += "; held inputs moved: " + ", ".join(f"{n} (TV={d:.2f})" for n, d in self.categories)
        if self.out_of_range:
            text += "; outside the reference range: " + ", ".join(f"{n} ({v:.1%})" for n, v in self.out_of_range)
        return text


def decide_verdict(
    *,
    gamma: Iterable[DriftState],
    flicker: Iterable[DriftState],
    features: DriftState | None = None,
    moved: Sequence[FeatureShift] = (),
    top: int = 3,
    confidence: Iterable[DriftState] = (),
    accuracy_drop: bool = False,
    margin: Iterable[DriftState] = (),
    input_range: DriftState | None = None,
    out_of_range: Sequence[FeatureShift] = (),
    categories: DriftState | None = None,
    categories_moved: Sequence[FeatureShift] = (),
    multivariate: DriftState | None = None,
) -> VerdictReport:
    """The verdict rule: harmful on output-side evidence, input-shift if only input drift fired, else stable.

    Output-side evidence is any γ, flicker, confidence or margin detector signalling drift, or ``accuracy_drop`` (the
    label-free accuracy estimate's upper bound below the reference accuracy minus its tolerance; reported as
    ``accuracy_estimate``). Input drift alone says nothing about accuracy, so it is ``input-shift``, never benign.

    Parameters
    ----------
    gamma, flicker : states of the γ and flicker detectors (upward detectors only).
    features : state of the per-feature input drift detector, or None.
    moved : the features that moved, ranked (``FeatureDrift.moved``), to name in the report.
    top : how many moved features to name.
    confidence : states of the confidence detectors (a *fall* in max-probability; none for regressors).
    accuracy_drop : the accuracy estimate's alert condition holds (HarmonicAccuracyDrop).
    margin : states of the margin detectors (a *fall* in top-1 minus top-2 class probability; none for regressors).
    input_range : state of the data-quality range test (inputs outside the reference range), or None; input evidence.
    out_of_range : the inputs it flagged, ranked, to name in the report.
    categories : state of the held inputs' category test, or None; input evidence.
    categories_moved : the held inputs it flagged, ranked, to name in the report.
    multivariate : state of the multivariate input test (PCA reconstruction error), or None; input evidence.

    Examples
    --------
    >>> quiet = DriftState("gamma_cusum", False, 0.0, 12.0, float("nan"), 100)
    >>> inputs = DriftState("features_ks", True, 0.4, 0.1, 1e-9, 100)
    >>> decide_verdict(gamma=[quiet], flicker=[], features=inputs).verdict
    <Verdict.INPUT_SHIFT: 'input-shift'>
    >>> low = DriftState("confidence_cusum", True, 14.0, 12.0, float("nan"), 100)
    >>> decide_verdict(gamma=[quiet], flicker=[], confidence=[low], features=inputs).message
    'harmful-shift: confidence_cusum, features_ks fired'
    >>> decide_verdict(gamma=[quiet], flicker=[], accuracy_drop=True).message
    'harmful-shift: accuracy_estimate fired'
    """
    fired = tuple(s.name for s in (*gamma, *flicker, *confidence, *margin) if s.drift_detected)
    if accuracy_drop:
        fired += ("accuracy_estimate",)
    inputs = features is not None and features.drift_detected
    ranged = input_range is not None and input_range.drift_detected
    named = tuple((m.name, m.statistic) for m in moved[:top]) if inputs else ()
    outside = tuple((m.name, m.statistic) for m in out_of_range[:top]) if ranged else ()
    held = categories is not None and categories.drift_detected
    cats = tuple((m.name, m.statistic) for m in categories_moved[:top]) if held else ()
    input_fired = tuple(
        s.name for s in (features, input_range, categories, multivariate) if s is not None and s.drift_detected
    )
    if fired:
        return VerdictReport(Verdict.HARMFUL_SHIFT, fired + input_fired, named, out_of_range=outside, categories=cats)
    if input_fired:
        return VerdictReport(Verdict.INPUT_SHIFT, input_fired, named, out_of_range=outside, categories=cats)
    return VerdictReport(Verdict.STABLE)


def _binary(reference: ReferenceLike) -> bool:
    """True when the reference's margins are 2·max-probability − 1 throughout (a binary classifier)."""
    conf = np.asarray(getattr(reference, "confidence_sample", ()), dtype=np.float64)
    margin = np.asarray(getattr(reference, "margin_sample", ()), dtype=np.float64)
    if conf.shape != margin.shape or conf.size == 0:
        return False
    return bool(np.allclose(margin, 2.0 * conf - 1.0, rtol=0.0, atol=1e-6, equal_nan=True))


def confidence_fall_reference(confidence: ArrayLike) -> NDArray[np.float64] | None:
    """The reference sample the confidence detector watches, 1 − max-probability (finite values), or None when
    there are too few for a calibration (a regressor: its max-probability is NaN). The margin detector watches
    1 − margin the same way (this function on the margin sample).

    >>> confidence_fall_reference([1.0, 0.9, float("nan")] * 100)[:2].tolist()
    [0.0, 0.09999999999999998]
    >>> confidence_fall_reference([float("nan")] * 500) is None
    True
    """
    c = np.asarray(confidence, dtype=np.float64).reshape(-1)
    c = c[np.isfinite(c)]
    return None if c.size < MIN_REFERENCE else 1.0 - c


class VerdictEngine:
    """The default detectors of one (model, segment) key, fed per batch, read as a verdict.

    Parameters
    ----------
    reference : the reference (``monitor.rolling.reference.Reference`` or anything shaped like it).
    settings : detector settings, the ``drift`` section (defaults: :class:`monitor.config.DriftSettings`'s).

    False alarms are stated, not tuned: ``false_alarms_per_million_events`` is the rate of the verdict's CUSUMs
    together — the k CUSUMs in the set (γ and flicker; confidence and margin for a classifier, margin only with
    three classes or more: a binary classifier's 1 − margin is 2·(1 − max-probability), the same exceedances) each
    get rate/k, their thresholds calibrated on the reference (unless ``cusum_threshold`` pins them). The window
    tests (γ KS, flicker rate) false-alarm with probability at most ``ks_alpha`` / ``rate_alpha`` per window test
    (less with their effect-size floors), adding at most 10⁶·(ks_alpha + rate_alpha)/every per 10⁶ events; the
    per-feature tests hold the false discovery rate across features at ``feature_alpha`` (Benjamini–Hochberg).
    Measured rates: docs/BENCHMARKS.md, *Calibrated false alarms*.

    Raises
    ------
    ConfigError, DataError
        From the detectors, on bad settings or an unusable reference.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> rng = np.random.default_rng(0)
    >>> ref = SimpleNamespace(gamma_sample=rng.exponential(size=5000), flicker_sample=np.zeros(5000),
    ...                       flicker_mean=0.0, flicker_var=0.0, flicker_count=5000,
    ...                       feature_sample=rng.normal(size=(2000, 2)), feature_names=("a", "b"),
    ...                       confidence_sample=np.linspace(0.6, 1.0, 5000))
    >>> eng = VerdictEngine(ref)
    >>> eng.update(gamma=rng.exponential(size=3000), flicker=np.zeros(3000),
    ...            features=rng.normal(size=(3000, 2))).verdict
    <Verdict.STABLE: 'stable'>
    >>> eng.update(gamma=rng.exponential(size=1000), flicker=np.zeros(1000),
    ...            features=rng.normal(size=(1000, 2)) + [0.0, 1.0]).report.message
    'input-shift: features_ks fired; inputs moved: b (D=0.40)'
    """

    def __init__(self, reference: ReferenceLike, settings: DriftSettings | None = None) -> None:
        s = settings or DriftSettings()
        self.settings = s

        # a fall in confidence = a rise of 1 − max-probability above the reference's upper quantile; none for a
        # regressor or a reference without a confidence sample (one written before confidence was kept)
        fall = confidence_fall_reference(getattr(reference, "confidence_sample", ())) if s.confidence_detector else None
        # a fall in margin (top-1 minus top-2 class probability) the same way, on 1 − margin: none for a regressor, a
        # reference written before margin was kept, or a binary classifier (its 1 − margin is 2·(1 − max-probability):
        # the same exceedances as the confidence CUSUM, which would spend a share of the false-alarm budget twice)
        narrow = confidence_fall_reference(getattr(reference, "margin_sample", ())) if s.margin_detector else None
        if narrow is not None and fall is not None and _binary(reference):
            narrow = None
        #: the CUSUMs share the stated false-alarm rate evenly: the verdict, their union, alarms at about that rate
        self.cusums_sharing = 2 + (fall is not None) + (narrow is not None)
        rate = s.false_alarms_per_million_events / self.cusums_sharing
        plan = WindowPlan(window=s.window, every=s.every)  # shared by every window test

        def cusum(sample: ArrayLike, name: str) -> Cusum:
            return Cusum(
                sample,
                quantile=s.cusum_quantile,
                rate_ratio=s.cusum_rate_ratio,
                threshold=s.cusum_threshold,
                false_alarms_per_million=rate,
                name=name,
            )

        self.gamma_cusum = cusum(reference.gamma_sample, "gamma_cusum")
        self.gamma_ks = KsDrift(
            reference.gamma_sample,
            plan=plan,
            alpha=s.ks_alpha,
            min_distance=s.ks_min_distance,
            name="gamma_ks",
        )
        self.flicker_cusum = cusum(reference.flicker_sample, "flicker_cusum")
        self.confidence_cusum = cusum(fall, "confidence_cusum") if fall is not None else None
        self.margin_cusum = cusum(narrow, "margin_cusum") if narrow is not None else None
        self.flicker_rate = RateTest(
            reference.flicker_mean,
            reference.flicker_var,
            reference.flicker_count,
            plan=plan,
            alpha=s.rate_alpha,
            min_increase=s.rate_min_increase,
            name="flicker_rate",
        )
        sample = np.asarray(reference.feature_sample, dtype=np.float64)
        self.feature_drift = (
            FeatureDrift(
                sample,
                feature_names=reference.feature_names,
                plan=plan,
                alpha=s.feature_alpha,
                min_distance=s.feature_min_distance,
            )
            if sample.ndim == 2 and sample.shape[1] > 0
            else None
        )
        low = np.asarray(getattr(reference, "feature_low", ()), dtype=np.float64)
        high = np.asarray(getattr(reference, "feature_high", ()), dtype=np.float64)
        outside = np.asarray(getattr(reference, "feature_outside", ()), dtype=np.float64)
        n = sample.shape[1] if sample.ndim == 2 else 0
        # inputs outside the reference's 0.1–99.9 percentiles (data quality; none for a reference without ranges)
        self.input_range = (
            RangeDrift(
                low,
                high,
                outside,
                feature_names=self.feature_drift.feature_names,
                plan=plan,
                alpha=s.feature_alpha,
                min_share=s.range_min_share,
            )
            if self.feature_drift is not None and n > 0 and low.size == high.size == outside.size == n
            else None
        )
        # how inputs go together (PCA reconstruction error): blind spots of the per-input tests, e.g. a correlation flip
        self.input_pca = (
            ReconstructionDrift(sample, plan=plan, alpha=s.ks_alpha, min_distance=s.ks_min_distance)
            if s.multivariate_detector and sample.ndim == 2 and sample.shape[0] >= 10 and 2 <= n <= MAX_INPUTS
            else None
        )
        tables = getattr(reference, "held_tables", None) or {}
        # category frequencies of held inputs (string, int, bool; fixed_features): none when the model holds nothing
        self.held_drift = (
            CategoryDrift(
                tables,
                plan=plan,
                alpha=s.ks_alpha,  # a window test every `every` events, like γ's KS
                min_distance=s.feature_min_distance,
            )
            if tables
            else None
        )

    @property
    def thresholds(self) -> dict[str, float]:
        """The sequential detectors' thresholds (calibrated on the reference unless pinned), by detector name."""
        cusums = (self.gamma_cusum, self.flicker_cusum, self.confidence_cusum, self.margin_cusum)
        return {c.name: c.threshold for c in cusums if c}

    def reset(self) -> None:
        """Reset every detector (e.g. after the reference was rebuilt)."""
        for d in self._detectors():
            d.reset()

    def update(
        self,
        *,
        gamma: ArrayLike | None = None,
        flicker: ArrayLike | None = None,
        features: ArrayLike | None = None,
        confidence: ArrayLike | None = None,
        margin: ArrayLike | None = None,
        held: Mapping[str, NDArray[np.str_]] | None = None,
    ) -> Self:
        """Feed one batch: γ (b,), flicker (b,), feature rows (b, n), max-probability (b,), margin (b,), held input
        values ``{element: (b,) strings}``; any may be None (not scored). NaN confidence or margin (a regressor, a row
        without a class) is skipped."""
        if gamma is not None:
            self.gamma_cusum.update(gamma)
            self.gamma_ks.update(gamma)
        if flicker is not None:
            self.flicker_cusum.update(flicker)
            self.flicker_rate.update(flicker)
        if confidence is not None and self.confidence_cusum is not None:
            self.confidence_cusum.update(1.0 - np.asarray(confidence, dtype=np.float64))
        if margin is not None and self.margin_cusum is not None:
            self.margin_cusum.update(1.0 - np.asarray(margin, dtype=np.float64))
        if features is not None and self.feature_drift is not None:
            self.feature_drift.update(features)
        if features is not None and self.input_range is not None:
            self.input_range.update(features)
        if features is not None and self.input_pca is not None:
            self.input_pca.update(features)
        if held is not None and self.held_drift is not None:
            self.held_drift.update(held)
        return self

    @property
    def alarms_on(self) -> tuple[bool, ...]:
        """Whether each detector signals drift now, in :attr:`states` order (cheap: no snapshots). A caller that
        evaluates the verdict on a cadence re-evaluates early when this changes, so a CUSUM crossing its threshold
        is reported at the batch that crossed it, not at the next cadence."""
        return tuple(d.drift_detected for d in self._detectors())

    @property
    def detector_names(self) -> tuple[str, ...]:
        """The detectors' names, in :attr:`alarms_on` order."""
        return tuple(d.name for d in self._detectors())

    def _detectors(
        self,
    ) -> tuple[Cusum | KsDrift | RateTest | FeatureDrift | RangeDrift | CategoryDrift | ReconstructionDrift, ...]:
        found = (
            self.gamma_cusum,
            self.gamma_ks,
            self.flicker_cusum,
            self.flicker_rate,
            self.confidence_cusum,
            self.margin_cusum,
            self.feature_drift,
            self.input_range,
            self.held_drift,
            self.input_pca,
        )
        return tuple(d for d in found if d is not None)

    @property
    def states(self) -> tuple[DriftState, ...]:
        """States of every detector (γ CUSUM, γ KS, flicker CUSUM, flicker rate[, confidence CUSUM][, margin
        CUSUM][, features][, inputs range][, held inputs][, inputs PCA])."""
        return tuple(d.state for d in self._detectors())

    @property
    def report(self) -> VerdictReport:
        """The verdict now, with the detectors that fired and the top moved features."""
        return self.assess()

    def assess(self, *, accuracy_drop: bool = False) -> VerdictReport:
        """The verdict now, with ``accuracy_drop`` (the accuracy estimate's alert condition) as output-side
        evidence too."""
        fd = self.feature_drift
        return decide_verdict(
            gamma=(self.gamma_cusum.state, self.gamma_ks.state),
            flicker=(self.flicker_cusum.state, self.flicker_rate.state),
            confidence=() if self.confidence_cusum is None else (self.confidence_cusum.state,),
            margin=() if self.margin_cusum is None else (self.margin_cusum.state,),
            features=None if fd is None else fd.state,
            moved=() if fd is None else fd.moved,
            accuracy_drop=accuracy_drop,
            input_range=None if self.input_range is None else self.input_range.state,
            out_of_range=() if self.input_range is None else self.input_range.moved,
            categories=None if self.held_drift is None else self.held_drift.state,
            categories_moved=() if self.held_drift is None else self.held_drift.moved,
            multivariate=None if self.input_pca is None else self.input_pca.state,
        )

    @property
    def verdict(self) -> Verdict:
        """The verdict now."""
        return self.report.verdict
