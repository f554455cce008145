"""Stage 5b: the per-window verdict — stable, input shift or harmful shift — and the engine behind it.

A label-free verdict claims only what the evidence shows:

- ``harmful-shift``: evidence of a loss — the confidence detector (a fall in max-probability) or the margin
  detector (a fall in top-1 minus top-2 class probability) fired, or the label-free accuracy estimate is below its
  tolerance (``HarmonicAccuracyDrop``'s condition, its upper bound below; or, where inputs moved, the estimate
  itself below; passed in by the caller, with the estimate);
- ``input-shift``: input-side detectors fired, or the γ/flicker detectors did (**fragility**: the predictions near
  the inputs grew fragile, named in ``fragility``), with no evidence of a loss. The inputs moved; the monitor
  cannot tell from the outputs whether accuracy suffered — check the accuracy estimate or delayed labels. It is
  *not* a claim that the shift is harmless;
- ``stable``: no evidence of change in inputs or outputs — never a claim that accuracy is fine (a change of
  concept alone, P(y|x) moving while inputs and outputs do not, is invisible without labels).

Delayed labels, when they arrive, override all of these.

:func:`decide_verdict` is the pure rule on the detector slots' states. :class:`VerdictEngine` builds a slot
(:mod:`monitor.drift.slots`) for each registered detector (:data:`monitor.drift.registry.DETECTORS`: γ: CUSUM + KS;
flicker: CUSUM + rate test; confidence: CUSUM on 1 − max-probability, and margin: CUSUM on 1 − margin, classifiers
only; inputs: per-input KS, the range test, held inputs' categories, PCA reconstruction error) that has something
to watch in the reference, feeds them per batch and reads the verdict;
:class:`monitor.config.DriftSettings` (the ``drift`` section of the settings) holds their settings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Self

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.config import DriftSettings
from monitor.drift.base import DriftState, ReferenceLike, WindowPlan
from monitor.drift.registry import DETECTORS
from monitor.drift.slots import (
    DetectorSlot,
    DetectorSpec,
    ReportField,
    Role,
    SlotContext,
    SlotDetector,
    SlotState,
    batch_length,
)


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
    #: the fragility detectors that fired (γ, flicker; confidence and margin where a fall is no harm evidence, named
    #: in ``unsure`` too): the predictions near the inputs grew fragile or less sure; alone, not harm
    fragility: tuple[str, ...] = ()
    #: of them, the confidence and margin detectors of a model whose fall in confidence is no harm evidence
    #: (``drift.confidence_harm``; :mod:`monitor.accuracy.confidence_errors`)
    unsure: tuple[str, ...] = ()
    #: the label-free accuracy estimate of the count window where the caller has one (with a verdict that is not
    #: stable), else None: how much accuracy the estimate sees, harm evidence or not
    accuracy_estimate: float | None = None

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
        if self.accuracy_estimate is not None:
            text += f"; estimated accuracy {self.accuracy_estimate:.3f}"
        return "; ".join((text, *self.not_harm))

    @property
    def not_harm(self) -> tuple[str, ...]:
        """Why detectors that fired did not make the verdict harmful: a fall in confidence of a model whose fall is no
        harm evidence, fragility (γ, flicker) alone; empty for a harmful-shift.

        >>> VerdictReport(Verdict.INPUT_SHIFT, ("gamma_cusum",), fragility=("gamma_cusum",)).not_harm
        ('fragility rose, no evidence of a loss',)
        """
        if self.verdict == Verdict.HARMFUL_SHIFT:
            return ()
        out: tuple[str, ...] = ()
        if self.unsure:
            out += ("confidence fell, no harm evidence for this model (drift.confidence_harm)",)
        if len(self.fragility) > len(self.unsure):
            out += ("fragility rose, no evidence of a loss",)
        return out


def decide_verdict(
    slots: Iterable[SlotState],
    *,
    accuracy_drop: bool = False,
    accuracy_estimate: float | None = None,
    estimate_fell: bool = False,
    top: int = 3,
) -> VerdictReport:
    """The verdict rule: harmful on evidence of a loss, input-shift on moved inputs or fragility, else stable.

    Evidence of a loss is any slot of role ``output`` signalling drift (confidence, margin), or ``accuracy_drop``
    (the label-free accuracy estimate's upper bound below the reference accuracy minus its tolerance; reported as
    ``accuracy_estimate``, with the estimate when given). Slots of role ``fragility`` (γ, flicker) and ``input`` say
    the inputs moved or the predictions near them grew fragile, not that accuracy fell: ``input-shift``, never
    benign.

    Parameters
    ----------
    slots : the detector slots' states (:meth:`~monitor.drift.slots.DetectorSlot.reading`), in registration order:
        the report names the fired harm detectors, then the fragility ones, then the input ones. A fired input slot
        with ``names_in`` names its first ``top`` moved inputs in that field of the report.
    accuracy_drop : the accuracy estimate's alert condition holds (HarmonicAccuracyDrop).
    accuracy_estimate : the label-free estimate (NaN or None: none), shown in the message of a verdict that is not
        stable, whether or not it is evidence (a confidence-based estimate cannot see every loss).
    estimate_fell : the estimate itself (not its upper bound) is below the reference accuracy minus its tolerance:
        evidence of a loss where inputs moved or fragility rose (the inputs moved and the estimate fell), nothing
        on its own.
    top : how many moved inputs to name per slot.

    Examples
    --------
    >>> quiet = SlotState(DriftState("confidence_cusum", False, 0.0, 12.0, float("nan"), 100), "output")
    >>> inputs = SlotState(DriftState("features_ks", True, 0.4, 0.1, 1e-9, 100), "input")
    >>> decide_verdict([quiet, inputs]).verdict
    <Verdict.INPUT_SHIFT: 'input-shift'>
    >>> low = SlotState(DriftState("confidence_cusum", True, 14.0, 12.0, float("nan"), 100), "output")
    >>> decide_verdict([low, inputs]).message
    'harmful-shift: confidence_cusum, features_ks fired'
    >>> gamma = SlotState(DriftState("gamma_cusum", True, 16.0, 12.0, float("nan"), 100), "fragility")
    >>> decide_verdict([quiet, gamma]).message
    'input-shift: gamma_cusum fired; fragility rose, no evidence of a loss'
    >>> unsure = SlotState(DriftState("confidence_cusum", True, 14.0, 12.0, float("nan"), 100), "fragility",
    ...                    signal="confidence")  # a model whose fall in confidence is no harm evidence
    >>> decide_verdict([unsure, gamma]).message
    'input-shift: confidence_cusum, gamma_cusum fired; confidence fell, no harm evidence for this model (drift.confidence_harm); fragility rose, no evidence of a loss'
    >>> decide_verdict([quiet, gamma], accuracy_drop=True, accuracy_estimate=0.59).message
    'harmful-shift: accuracy_estimate, gamma_cusum fired; estimated accuracy 0.590'
    >>> decide_verdict([inputs], estimate_fell=True, accuracy_estimate=0.81).message
    'harmful-shift: accuracy_estimate, features_ks fired; estimated accuracy 0.810'
    >>> decide_verdict([quiet], estimate_fell=True, accuracy_estimate=0.81).verdict
    <Verdict.STABLE: 'stable'>
    >>> decide_verdict([inputs], accuracy_estimate=0.99).message
    'input-shift: features_ks fired; estimated accuracy 0.990'
    """
    fired = [s for s in slots if s.state.drift_detected]
    harm = tuple(s.state.name for s in fired if s.role == "output")
    fragile = tuple(s.state.name for s in fired if s.role == "fragility")
    unsure = tuple(s.state.name for s in fired if s.role == "fragility" and s.signal in ("confidence", "margin"))
    input_fired = tuple(s.state.name for s in fired if s.role == "input")
    if _lost({s.role for s in fired}, accuracy_drop, estimate_fell):
        harm += ("accuracy_estimate",)
    named: dict[ReportField, tuple[tuple[str, float], ...]] = {}
    for s in fired:
        if s.role == "input" and s.names_in is not None:
            named[s.names_in] = named.get(s.names_in, ()) + tuple((m.name, m.statistic) for m in s.moved[:top])
    if not harm and not fragile and not input_fired:
        return VerdictReport(Verdict.STABLE)
    return VerdictReport(
        Verdict.HARMFUL_SHIFT if harm else Verdict.INPUT_SHIFT,
        harm + fragile + input_fired,
        named.get("top_features", ()),
        out_of_range=named.get("out_of_range", ()),
        categories=named.get("categories", ()),
        fragility=fragile,
        unsure=unsure,
        accuracy_estimate=accuracy_estimate
        if accuracy_estimate is not None and np.isfinite(accuracy_estimate)
        else None,
    )


def _lost(fired: set[Role], accuracy_drop: bool, estimate_fell: bool) -> bool:
    """The accuracy estimate is evidence of a loss (:func:`decide_verdict`), the detectors of roles ``fired``
    signalling."""
    return accuracy_drop or (estimate_fell and bool(fired & {"fragility", "input"}))


def verdict_of(fired: set[Role], accuracy_drop: bool = False, estimate_fell: bool = False) -> Verdict:
    """The verdict :func:`decide_verdict` gives when detectors of the roles ``fired`` signal drift, without the
    report.

    >>> verdict_of({"fragility"}), verdict_of({"fragility"}, estimate_fell=True), verdict_of(set())
    (<Verdict.INPUT_SHIFT: 'input-shift'>, <Verdict.HARMFUL_SHIFT: 'harmful-shift'>, <Verdict.STABLE: 'stable'>)
    """
    if "output" in fired or _lost(fired, accuracy_drop, estimate_fell):
        return Verdict.HARMFUL_SHIFT
    return Verdict.INPUT_SHIFT if fired else Verdict.STABLE


@dataclass(frozen=True, slots=True)
class HarmEvidence:
    """The accuracy estimate's harm evidence as a verdict reads it (:func:`decide_verdict`'s ``accuracy_drop`` and
    ``estimate_fell``)."""

    accuracy_drop: bool = False
    estimate_fell: bool = False


class VerdictEngine:
    """The registered detectors of one (model, segment) key, fed per batch, read as a verdict.

    Parameters
    ----------
    reference : the reference (``monitor.rolling.reference.Reference`` or anything shaped like it).
    settings : detector settings, the ``drift`` section (defaults: :class:`monitor.config.DriftSettings`'s).
    detectors : the detector specs to build a slot from, where the reference gives them something to watch
        (default: the registered ones, :data:`monitor.drift.registry.DETECTORS`).
    confidence_harm : whether the confidence and margin detectors (role ``output``) are harm evidence; False: they
        read as fragility (a model whose least confident answers are about as often right as the rest,
        :mod:`monitor.accuracy.confidence_errors`).

    False alarms are stated, not tuned: ``false_alarms_per_million_events`` is the rate of the verdict's detectors
    together — each of the k slots built (CUSUMs on γ and flicker; confidence and margin for a classifier, margin
    only with three classes or more: a binary classifier's 1 − margin is 2·(1 − max-probability), the same
    exceedances; the window tests) gets rate/k. A CUSUM's threshold is calibrated on the reference to its share
    (unless ``cusum_threshold`` pins it); a window test run every ``every`` events uses the level
    min(its setting, rate/k·every/10⁶) (``ks_alpha``, ``rate_alpha``, ``feature_alpha``: the false discovery rate
    across inputs, Benjamini–Hochberg), and every window test's null is what a *new* draw from the baseline gives
    (two-sample tests, the range test's beta-binomial), so the share holds at any baseline size. Each slot's
    ``stated_rate`` says its own. Measured rates: docs/BENCHMARKS.md, *Calibrated false alarms*.

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
    >>> print(*eng.detector_names)  # doctest: +NORMALIZE_WHITESPACE
    gamma_cusum gamma_ks flicker_cusum flicker_rate confidence_cusum confidence_tail_cusum confidence_jump_cusum
    features_ks inputs_pca
    >>> eng.update(gamma=rng.exponential(size=3000), flicker=np.zeros(3000),
    ...            features=rng.normal(size=(3000, 2))).verdict
    <Verdict.STABLE: 'stable'>
    >>> eng.update(gamma=rng.exponential(size=1000), flicker=np.zeros(1000),
    ...            features=rng.normal(size=(1000, 2)) + [0.0, 1.0]).report.message
    'input-shift: features_ks fired; inputs moved: b (D=0.40)'
    """

    def __init__(
        self,
        reference: ReferenceLike,
        settings: DriftSettings | None = None,
        detectors: Sequence[DetectorSpec[Any, Any]] = DETECTORS,
        *,
        confidence_harm: bool = True,
    ) -> None:
        s = settings or DriftSettings()
        self.settings = s
        if not confidence_harm:
            detectors = [dataclasses.replace(d, role="fragility") if d.role == "output" else d for d in detectors]
        self.confidence_harm = confidence_harm
        watched = [(spec, spec.watches(reference, s)) for spec in detectors]
        watched = [(spec, w) for spec, w in watched if w is not None]
        #: every detector takes an even share of the stated false-alarm rate: the verdict, their union, alarms at
        #: most at that rate (the CUSUMs calibrated to their share, the window tests' levels capped by theirs)
        self.cusums_sharing = sum(spec.shares_rate for spec, _ in watched)
        self.sharing = len(watched)
        #: each detector's share of the stated rate (per 10⁶ events)
        self.rate_share = s.false_alarms_per_million_events / max(self.sharing, 1)
        rate = self.rate_share
        # shared by every window test: each test's level holds at any window size (its p-value is the window's own),
        # so a segment is tested from its first ``first_test_events`` events, not only once the window is full
        plan = WindowPlan(window=s.window, every=s.every, min_events=min(s.first_test_events, s.window))
        #: one slot per detector with something to watch, in the order of ``detectors``
        self.slots: tuple[DetectorSlot[Any, Any], ...] = tuple(
            spec.slot(w, SlotContext(spec.name, reference, s, plan, rate)) for spec, w in watched
        )
        #: per slot, the positions of the last batch fed at which its alarm changed (ascending)
        self.changes: tuple[tuple[int, ...], ...] = tuple(() for _ in self.slots)
        #: events in the last batch fed
        self.batch_size = 0

    def detector(self, name: str) -> SlotDetector | None:
        """The detector of the slot ``name``, or None when this engine has no such slot (nothing to watch)."""
        return next((slot.detector for slot in self.slots if slot.name == name), None)

    @property
    def thresholds(self) -> dict[str, float]:
        """The sequential detectors' thresholds (calibrated on the reference unless pinned), by detector name."""
        return {slot.name: slot.detector.state.threshold for slot in self.slots if slot.spec.shares_rate}

    def reset(self) -> None:
        """Reset every detector (e.g. after the reference was rebuilt)."""
        for slot in self.slots:
            slot.detector.reset()

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
        values ``{element: (b,) strings}``; any may be None (not scored). NaN values (a regressor's confidence or
        margin, a row without a class) and rows with NaN are skipped."""
        signals = {
            "gamma": gamma,
            "flicker": flicker,
            "features": features,
            "confidence": confidence,
            "margin": margin,
            "held": held,
        }
        size = _batch_size(signals)
        self.changes = tuple(slot.feed(signals, size) for slot in self.slots)
        self.batch_size = size
        return self

    def settled_at(
        self, verdict: Verdict, now: HarmEvidence = HarmEvidence(), before: HarmEvidence = HarmEvidence()
    ) -> int | None:
        """The position in the last batch fed from which the detectors' alarms give ``verdict`` through the batch's
        end, where the batch changed it: the event the verdict turned at, as an evaluation after every event would
        have seen it. The accuracy estimate's harm evidence is read at evaluations (a batch's end): ``before``
        holds at every event of the batch but the last, ``now`` at the last. None where the alarms gave ``verdict``
        before the batch already, or do not give it at its end (a verdict the hysteresis holds).

        >>> from types import SimpleNamespace
        >>> rng = np.random.default_rng(0)
        >>> ref = SimpleNamespace(gamma_sample=rng.exponential(size=5000), flicker_sample=np.zeros(5000),
        ...                       flicker_mean=0.0, flicker_var=0.0, flicker_count=5000,
        ...                       feature_sample=rng.normal(size=(2000, 2)), feature_names=("a", "b"),
        ...                       confidence_sample=rng.uniform(0.6, 1.0, 5000))
        >>> eng = VerdictEngine(ref).update(confidence=rng.uniform(0.6, 1.0, 1000))
        >>> eng.verdict, eng.settled_at(Verdict.STABLE)
        (<Verdict.STABLE: 'stable'>, None)
        >>> eng = eng.update(confidence=np.full(200, 0.5))
        >>> eng.verdict, eng.settled_at(Verdict.HARMFUL_SHIFT)
        (<Verdict.HARMFUL_SHIFT: 'harmful-shift'>, 9)
        """
        last = self.batch_size - 1
        if last < 0:
            return None
        slots = [(s.role, s.detector.drift_detected, ch) for s, ch in zip(self.slots, self.changes, strict=True)]

        def at(q: int) -> Verdict:
            # a change at position p holds from p on: the alarm at q is the final one unless it changed after q
            fired = {role for role, on, changes in slots if on != (sum(c > q for c in changes) % 2 == 1)}
            harm = now if q >= last else before
            return verdict_of(fired, harm.accuracy_drop, harm.estimate_fell)

        if at(last) != verdict:
            return None
        cuts: set[int] = {c for _, _, changes in slots for c in changes if c < last}
        for p in sorted(cuts | {last}, reverse=True):
            if at(p - 1) != verdict:
                return p
        return None

    @property
    def alarms_on(self) -> tuple[bool, ...]:
        """Whether each detector signals drift now, in :attr:`states` order (cheap: no snapshots). A caller that
        evaluates the verdict on a cadence re-evaluates early when this changes, so a CUSUM crossing its threshold
        is reported at the batch that crossed it, not at the next cadence."""
        return tuple(slot.detector.drift_detected for slot in self.slots)

    @property
    def detector_names(self) -> tuple[str, ...]:
        """The detectors' names, in :attr:`alarms_on` order."""
        return tuple(slot.name for slot in self.slots)

    @property
    def states(self) -> tuple[DriftState, ...]:
        """States of every detector, in slot order."""
        return tuple(slot.detector.state for slot in self.slots)

    @property
    def report(self) -> VerdictReport:
        """The verdict now, with the detectors that fired and the top moved features."""
        return self.assess()

    def assess(
        self, *, accuracy_drop: bool = False, accuracy_estimate: float | None = None, estimate_fell: bool = False
    ) -> VerdictReport:
        """The verdict now, with ``accuracy_drop`` (the accuracy estimate's alert condition; ``accuracy_estimate``,
        its estimate) and ``estimate_fell`` (the estimate below tolerance: with moved inputs) as harm evidence too."""
        return decide_verdict(
            (slot.reading() for slot in self.slots),
            accuracy_drop=accuracy_drop,
            accuracy_estimate=accuracy_estimate,
            estimate_fell=estimate_fell,
        )

    @property
    def verdict(self) -> Verdict:
        """The verdict now."""
        return self.report.verdict


def _batch_size(signals: Mapping[str, Any]) -> int:
    """Events in one batch of :meth:`VerdictEngine.update`'s signals (:func:`~monitor.drift.slots.batch_length` of
    the first given)."""
    return next((batch_length(name, v) for name, v in signals.items() if v is not None), 0)
