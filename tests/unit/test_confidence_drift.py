"""Confidence as a first-class signal and the honest verdict vocabulary.

- the confidence detector (a CUSUM on 1 − max-probability) is calibrated from the reference like the γ CUSUM
  (monitor/drift/calibrate.py): its false-alarm rate on stationary streams meets the setting, and it catches a fall;
- the verdict needs output-side evidence for ``harmful-shift``; inputs moving alone are ``input-shift`` (never
  "benign"); a stationary stream stays ``stable``;
- regressors (no confidence) and references written before confidence was kept get no confidence detector.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from monitor import telemetry as tel
from monitor.config import DriftSettings
from monitor.drift import Cusum, VerdictEngine
from monitor.drift.base import DriftState
from monitor.drift.slots import SlotState
from monitor.drift.verdict import Verdict, decide_verdict
from monitor.exporters.prometheus import MetricsState
from monitor.rolling.reference import Reference
from monitor.rolling.warmup import WarmupReferenceBuilder
from monitor.runtime.watch import HARMFUL_ALERT, INPUT_ALERT

from .test_watch import MODEL, Stream, fired, make_watch

RATE = 1000.0  # false alarms per 10⁶ events (a run length of 1,000: measurable on a few 10⁵ events)
EVENTS = 250_000


def confidence_like(rng: np.random.Generator, n: int, *, fall: float = 0.0) -> np.ndarray:
    """A binary GBDT's max-probability: 50 % exactly 1.0, the rest Beta-shaped in [0.5, 1); ``fall`` moves that
    share of events down near the boundary (confidence 0.5–0.65)."""
    c = np.where(rng.random(n) < 0.5, 1.0, 0.5 + 0.5 * rng.beta(5.0, 1.0, n))
    low = rng.random(n) < fall
    c[low] = 0.5 + 0.15 * rng.random(int(low.sum()))
    return c


def reference(seed: int, n: int = 5000, *, confidence: bool = True) -> Reference:
    rng = np.random.default_rng(seed)
    g = rng.exponential(1e-3, n)
    return Reference.from_arrays(
        gamma=g,
        flicker=np.where(rng.random(n) < 0.05, 0.25, 0.0),
        features=rng.normal(size=(n, 3)),
        confidence=confidence_like(rng, n) if confidence else None,
    )


# ------------------------------------------------------------------------------------------------ calibration


@pytest.mark.parametrize("name", ["confidence_cusum", "confidence_tail_cusum", "confidence_jump_cusum"])
def test_confidence_cusum_false_alarm_rate_is_within_a_factor_of_two_of_its_share_of_the_setting(name: str) -> None:
    """At most 2× its share, and not far under it (designed at the baseline share's upper confidence bound, the
    average baseline alarms below its share)."""
    alarms = 0
    for seed in range(4):
        eng = VerdictEngine(reference(100 + seed), DriftSettings(false_alarms_per_million_events=RATE))
        assert eng.detector(name) is not None
        assert eng.cusums_sharing == 5  # γ, flicker, three on confidence (no margin sample in this reference)
        rng = np.random.default_rng(200 + seed)  # fresh events from the population, not the reference sample
        for _ in range(EVENTS // 50_000):
            eng.update(confidence=confidence_like(rng, 50_000))
        alarms += eng.detector(name).state.alarms
    measured = alarms / (4 * EVENTS) * 1e6
    share = RATE / eng.sharing  # every detector's even share of the stated rate
    assert share / 4 <= measured <= share * 2, measured


def test_confidence_threshold_is_the_calibrated_cusum_on_one_minus_confidence_and_is_shared() -> None:
    ref = reference(0)
    a, b = VerdictEngine(ref), VerdictEngine(ref)
    assert a.detector("confidence_cusum") is not None and b.detector("confidence_cusum") is not None
    cal = a.detector("confidence_cusum").calibration
    assert cal is not None and cal.method != "fallback"
    assert (
        a.detector("confidence_cusum").calibration is b.detector("confidence_cusum").calibration
    )  # segments share one calibration
    # the stated rate is every detector's together: each CUSUM is calibrated for its even share of it
    same = Cusum(1.0 - ref.confidence_sample, false_alarms_per_million=1.0 / a.sharing, name="confidence_cusum")
    assert a.thresholds["confidence_cusum"] == pytest.approx(same.threshold)
    assert a.thresholds["confidence_cusum"] > Cusum(1.0 - ref.confidence_sample, name="c").threshold
    assert set(a.thresholds) == {
        "gamma_cusum",
        "flicker_cusum",
        "confidence_cusum",
        "confidence_tail_cusum",
        "confidence_jump_cusum",
    }
    assert 8.0 < a.thresholds["confidence_cusum"] < 15.0
    pinned = VerdictEngine(ref, DriftSettings(cusum_threshold=14.0))
    assert pinned.thresholds["confidence_cusum"] == 14.0
    loose = VerdictEngine(ref, DriftSettings(false_alarms_per_million_events=100.0))
    assert loose.thresholds["confidence_cusum"] < a.thresholds["confidence_cusum"]


def test_confidence_cusum_catches_a_fall_and_ignores_a_rise() -> None:
    rng = np.random.default_rng(3)
    eng = VerdictEngine(reference(1))
    assert eng.detector("confidence_cusum") is not None
    eng.update(confidence=confidence_like(rng, 20_000))
    assert eng.detector("confidence_cusum").state.alarms == 0
    rise = np.ones(20_000)  # more confident than the reference: not harm
    assert not eng.update(confidence=rise).detector("confidence_cusum").drift_detected  # type: ignore[union-attr]
    fall = confidence_like(rng, 2000, fall=0.3)
    first = next(i for i in range(0, 2000, 10) if eng.update(confidence=fall[i : i + 10]).verdict is not Verdict.STABLE)
    assert first < 300
    # a sudden fall of a third: the jump CUSUM is the first to cross
    assert eng.report.verdict is Verdict.HARMFUL_SHIFT and eng.report.fired == ("confidence_jump_cusum",)


def test_the_tail_cusum_catches_a_slide_of_the_bulk_that_the_others_do_not_see() -> None:
    """A share of events sliding from certain (max-probability 1) to a little less sure, below the reference's 75th
    percentile of 1 − max-probability (a gradual slide, nothing reaching the 90th): only the tail CUSUM, which counts
    the events above the reference's median, sees them."""
    ref = reference(1)
    q75 = np.quantile(1.0 - ref.confidence_sample, 0.75)
    for seed in range(3):
        rng = np.random.default_rng(seed)
        eng = VerdictEngine(ref)
        c = confidence_like(rng, 3000)
        slide = rng.random(c.size) < 0.3
        c[slide] = 1.0 - q75 * rng.uniform(0.2, 0.8, int(slide.sum()))
        eng.update(confidence=c)
        assert eng.report.verdict is Verdict.HARMFUL_SHIFT
        assert eng.report.fired == ("confidence_tail_cusum",)


def test_no_confidence_detector_for_regressors_old_references_or_when_switched_off() -> None:
    nan_conf = Reference.from_arrays(
        gamma=np.ones(500), flicker=np.zeros(500), features=np.zeros((500, 1)), confidence=np.full(500, np.nan)
    )
    old = reference(0).to_dict()
    del old["confidence_sample"]  # a reference written before confidence was kept
    for ref in (nan_conf, Reference.from_dict(old), reference(0, confidence=False)):
        eng = VerdictEngine(ref)
        assert eng.detector("confidence_cusum") is None and "confidence_cusum" not in eng.thresholds
        eng.update(gamma=np.ones(10), flicker=np.zeros(10), confidence=np.full(10, np.nan))  # skipped cleanly
        assert [s.name for s in eng.states if s.name.startswith("confidence")] == []
    assert VerdictEngine(reference(0), DriftSettings(confidence_detector=False)).detector("confidence_cusum") is None


def test_reference_keeps_a_thinned_confidence_sample_that_round_trips() -> None:
    ref = Reference.from_arrays(
        gamma=np.zeros(20), flicker=np.zeros(20), features=np.zeros((20, 1)), confidence=[0.9, np.nan] * 10
    )
    assert ref.confidence_sample.tolist() == [0.9] * 10
    assert Reference.from_dict(ref.to_dict()).confidence_sample.tolist() == [0.9] * 10
    b = WarmupReferenceBuilder(events=10).update(
        gamma=np.zeros(10), flicker=np.zeros(10), features=np.zeros((10, 1)), confidence=np.linspace(0.5, 1.0, 10)
    )
    assert b.build().confidence_sample.size == 10
    assert (
        WarmupReferenceBuilder(events=10)
        .update(gamma=np.zeros(10), flicker=np.zeros(10), features=np.zeros((10, 1)))
        .build()
        .confidence_sample.size
        == 0
    )


# ------------------------------------------------------------------------------------------------ vocabulary


def test_the_vocabulary_is_stable_input_shift_harmful_shift() -> None:
    assert [v.value for v in Verdict] == ["stable", "input-shift", "harmful-shift"]
    assert not any("benign" in v.value for v in Verdict)


def _state(name: str, on: bool) -> DriftState:
    return DriftState(name, on, 1.0, 1.0, float("nan"), 100)


@pytest.mark.parametrize(
    ("gamma", "flicker", "confidence", "accuracy", "inputs", "want"),
    [
        (False, False, False, False, False, Verdict.STABLE),
        (False, False, False, False, True, Verdict.INPUT_SHIFT),
        (True, False, False, False, True, Verdict.HARMFUL_SHIFT),
        (False, True, False, False, False, Verdict.HARMFUL_SHIFT),
        (False, False, True, False, False, Verdict.HARMFUL_SHIFT),
        (False, False, True, False, True, Verdict.HARMFUL_SHIFT),
        (False, False, False, True, False, Verdict.HARMFUL_SHIFT),
        (False, False, False, True, True, Verdict.HARMFUL_SHIFT),
    ],
)
def test_harmful_needs_output_side_evidence(
    gamma: bool, flicker: bool, confidence: bool, accuracy: bool, inputs: bool, want: Verdict
) -> None:
    report = decide_verdict(
        [
            SlotState(_state("gamma_cusum", gamma), "output"),
            SlotState(_state("flicker_cusum", flicker), "output"),
            SlotState(_state("confidence_cusum", confidence), "output"),
            SlotState(_state("features_ks", inputs), "input"),
        ],
        accuracy_drop=accuracy,
    )
    assert report.verdict is want
    assert ("accuracy_estimate" in report.fired) == accuracy
    assert ("confidence_cusum" in report.fired) == confidence


def test_engine_input_only_shift_is_input_shift_and_confidence_fall_is_harmful_and_stationary_is_stable() -> None:
    rng = np.random.default_rng(11)
    ref = reference(2)

    def batch(n: int, *, moved: bool = False, fall: float = 0.0) -> dict[str, np.ndarray]:
        x = rng.normal(size=(n, 3))
        if moved:
            x[:, 2] += 1.0
        g = rng.exponential(1e-3, n)
        f = np.where(rng.random(n) < 0.05, 0.25, 0.0)
        return {"gamma": g, "flicker": f, "features": x, "confidence": confidence_like(rng, n, fall=fall)}

    stationary = VerdictEngine(ref)
    verdicts = {stationary.update(**batch(100)).verdict for _ in range(100)}  # 10,000 events
    assert verdicts == {Verdict.STABLE}

    inputs = VerdictEngine(ref)
    for _ in range(20):
        inputs.update(**batch(100))
    for _ in range(30):
        inputs.update(**batch(100, moved=True))
    assert inputs.report.verdict is Verdict.INPUT_SHIFT and inputs.report.fired == ("features_ks",)
    assert inputs.report.message.startswith("input-shift: features_ks fired; inputs moved: f2")

    falls = VerdictEngine(ref)
    for _ in range(20):
        falls.update(**batch(100))
    for _ in range(10):
        falls.update(**batch(100, fall=0.3))
    assert falls.report.verdict is Verdict.HARMFUL_SHIFT and "confidence_cusum" in falls.report.fired


# ------------------------------------------------------------------------------------------------ the watch


def _with_confidence(batch: tuple, confidence: np.ndarray) -> tuple:  # type: ignore[type-arg]
    events, x, result, shadow = batch
    # a binary model's margin is 2·max-probability − 1
    return events, x, dataclasses.replace(result, probability=confidence, margin=2.0 * confidence - 1.0), shadow


def _hist_count(state: MetricsState, name: str) -> float:
    total = 0.0
    for fam in state.families():
        if fam.name == name:
            total += sum(s.value for s in fam.samples if s.name == f"{name}_count")
    return total


def test_watch_keeps_confidence_windows_and_a_fall_in_confidence_is_a_harmful_shift() -> None:
    watch, state = make_watch(with_reference=False, for_seconds=5.0)
    stream = Stream(seed=21)
    rng = np.random.default_rng(21)
    for _ in range(5):  # warm-up reference (500 events), with the confidence sample
        watch.update(*_with_confidence(stream.batch(), confidence_like(rng, 100)))
    assert watch.reference is not None and watch.reference.confidence_sample.size == 500
    for _ in range(20):
        watch.update(*_with_confidence(stream.batch(), confidence_like(rng, 100)))
    assert watch.verdict("other") is Verdict.STABLE
    mean = state.gauge(tel.WINDOW_CONFIDENCE_MEAN.name, (MODEL, "other", "60s"))
    assert mean is not None and 0.93 < mean < 0.98  # 0.5·1 + 0.5·(0.5 + 0.5·5/6)
    assert _hist_count(state, tel.CONFIDENCE.name) == 2500
    for _ in range(30):  # γ, flicker and inputs as before; the model is less sure
        watch.update(*_with_confidence(stream.batch(), confidence_like(rng, 100, fall=0.3)))
    assert watch.verdict("other") is Verdict.HARMFUL_SHIFT
    assert "confidence_cusum" in watch.last_reports["other"].fired
    assert fired(watch, HARMFUL_ALERT) and not fired(watch, INPUT_ALERT)
    assert state.gauge(tel.DRIFT_STATISTIC.name, (MODEL, "other", "confidence_cusum")) is not None


def test_watch_regressor_has_no_confidence_series_and_still_judges_input_shift() -> None:
    watch, state = make_watch(with_reference=False, for_seconds=5.0)
    stream = Stream(seed=22)
    for _ in range(25):
        watch.update(*_with_confidence(stream.batch(), np.full(100, np.nan)))
    assert watch.reference is not None and watch.reference.confidence_sample.size == 0
    assert watch.verdicts.engines["other"].detector("confidence_cusum") is None
    for _ in range(40):
        watch.update(*_with_confidence(stream.batch(moved=True), np.full(100, np.nan)))
    assert watch.verdict("other") is Verdict.INPUT_SHIFT
    assert state.gauge(tel.DRIFT_STATISTIC.name, (MODEL, "other", "confidence_cusum")) is None
    assert state.gauge(tel.WINDOW_CONFIDENCE_MEAN.name, (MODEL, "other", "60s")) is None
    assert _hist_count(state, tel.CONFIDENCE.name) == 0


@pytest.mark.parametrize("low", [False, True])
def test_watch_counts_the_accuracy_estimates_condition_as_output_side_evidence(
    low: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    watch, _ = make_watch(for_seconds=5.0)
    # only the condition and what it compares with are read
    watch.accuracy.fit = SimpleNamespace(  # type: ignore[assignment]
        accuracy=0.9, reference_of=lambda segment: (0.9, 1000, False)
    )
    monkeypatch.setattr(watch.accuracy, "condition", lambda segment: (low, 0.7, "estimate 0.700"))
    stream = Stream(seed=23)
    for _ in range(30):  # stationary γ, flicker, inputs and confidence
        watch.update(*stream.batch())
    report = watch.last_reports["other"]
    if low:
        assert report.verdict is Verdict.HARMFUL_SHIFT and report.fired == ("accuracy_estimate",)
        assert fired(watch, HARMFUL_ALERT)
    else:
        assert report.verdict is Verdict.STABLE and not watch.fired
