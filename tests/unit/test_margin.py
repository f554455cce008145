"""The model's margin (top-1 minus top-2 class probability) as a label-free signal beside confidence.

- the scorer computes it from the probabilities ``probability`` reads (the probability output, else the softmax of
  the logits): 2p − 1 for a binary classifier, 0 at a two-class tie, NaN for regressors and invalid rows;
- windows keep it as the signal ``margin``; the reference keeps a ``margin_sample`` (old references load without);
- ``margin_cusum`` (a CUSUM on 1 − margin) is calibrated like ``confidence_cusum`` and is output-side evidence: on a
  multi-class model it catches a runner-up class gaining while max-probability stays put, which confidence cannot;
  on a binary model it repeats the confidence CUSUM.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from monitor import telemetry as tel
from monitor.config import DriftSettings, load_settings
from monitor.drift import Cusum, VerdictEngine
from monitor.drift.base import DriftState
from monitor.drift.slots import SlotState
from monitor.drift.verdict import Verdict, decide_verdict
from monitor.exporters.prometheus import MetricsState
from monitor.model.onnx import OnnxModel, OnnxRuntimeOptions
from monitor.model.standardize import Standardizer
from monitor.rolling.reference import Reference
from monitor.rolling.warmup import WarmupReferenceBuilder
from monitor.rolling.windows import SIGNALS, CountWindow, SignalBatch, TimeWindow
from monitor.runtime.watch import HARMFUL_ALERT, INPUT_ALERT, WatchConfig
from monitor.signals.scorer import RobustnessScorer, ScoringConfig
from tests.unit import onnx_graphs

from .test_watch import MODEL, Stream, fired, make_watch


def _softmax(z: NDArray[np.float64]) -> NDArray[np.float64]:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    out: NDArray[np.float64] = e / e.sum(axis=1, keepdims=True)
    return out


def _scorer(model: OnnxModel, **settings: object) -> RobustnessScorer:
    config = ScoringConfig(**{"radius": 0.1, "flicker_copies": 4, **settings})  # type: ignore[arg-type]
    return RobustnessScorer(model, Standardizer.identity(model.n_features), config)


# ------------------------------------------------------------------------------------------------ the scorer

#: one feature, three classes: logits (x, 0, −1) — at x = 0 classes 0 and 1 tie exactly
W3 = [[1.0, 0.0, 0.0]]
B3 = [0.0, 0.0, -1.0]
X3 = np.array([[0.0], [1.0], [-2.0], [3.0]])


def _three_class_expected() -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    p = _softmax(np.column_stack([X3[:, 0], np.zeros(4), np.full(4, -1.0)]))
    top = np.sort(p, axis=1)
    return top[:, -1], top[:, -1] - top[:, -2]


@pytest.mark.parametrize("rows_in_graph", [True, False])
@pytest.mark.parametrize(
    ("outputs", "output"),
    [
        (("logits", "probabilities", "label"), "proba"),
        (("logits", "probabilities", "label"), "logit"),
        (("logits",), "logit"),  # logits alone: the softmax of the logits, as ``probability``
    ],
)
def test_three_class_margin_is_top1_minus_top2_and_zero_at_a_tie(
    tmp_path: Path, rows_in_graph: bool, outputs: tuple[str, ...], output: str
) -> None:
    path = onnx_graphs.linear_classifier(tmp_path / "three.onnx", W3, B3, outputs=outputs)
    model = OnnxModel(path, OnnxRuntimeOptions(rows_in_graph=rows_in_graph), model_kind="classifier")
    result = _scorer(model, output=output).score(X3)
    conf, margin = _three_class_expected()
    np.testing.assert_allclose(result.probability, conf, rtol=1e-6)
    np.testing.assert_allclose(result.margin, margin, rtol=1e-6, atol=1e-7)
    assert result.margin[0] == pytest.approx(0.0, abs=1e-7)  # x = 0: classes 0 and 1 tie
    assert result.probability[0] == pytest.approx(np.e / (2 * np.e + 1), rel=1e-6)  # … at max-probability 0.42
    # x = −2: class 1 leads class 2 (p ∝ 1, e⁻¹) with class 0 far behind
    assert result.margin[2] == pytest.approx((1 - np.exp(-1)) / (1 + np.exp(-1) + np.exp(-2)), rel=1e-6)
    assert np.all((result.margin >= 0) & (result.margin <= result.probability))


def test_margin_separates_two_classes_tied_from_probability_spread_over_many(tmp_path: Path) -> None:
    # logits (0, 0, −3): two classes tied; (0.5, 0, 0): spread over three. Similar max-probability, margins apart.
    path = onnx_graphs.linear_classifier(tmp_path / "spread.onnx", [[0.5, 0.0, 3.0]], [0.0, 0.0, -3.0])
    result = _scorer(OnnxModel(path)).score(np.array([[0.0], [1.0]]))
    tied, spread = result.probability
    assert abs(tied - spread) < 0.06  # 0.488 vs 0.452 (logits at x = 1: 0.5, 0, 0)
    assert result.margin[0] == pytest.approx(0.0, abs=1e-7)
    assert result.margin[1] == pytest.approx(_softmax(np.array([[0.5, 0.0, 0.0]]))[0, 0] * (1 - np.exp(-0.5)))


@pytest.mark.parametrize("rows_in_graph", [True, False])
def test_binary_margin_is_two_p_minus_one(tmp_path: Path, rows_in_graph: bool) -> None:
    options = OnnxRuntimeOptions(rows_in_graph=rows_in_graph)
    x = np.random.default_rng(2).normal(size=(50, 2))
    table = OnnxModel(
        onnx_graphs.linear_classifier(tmp_path / "t.onnx", [[0.0, 1.0], [0.0, -1.0]], [0.0, 0.2]), options
    )
    positive = OnnxModel(onnx_graphs.sigmoid_classifier(tmp_path / "s.onnx", [1.0, -1.0], 0.2), options)
    for model in (table, positive):  # a [N, 2] table, and P(class 1) alone (the scorer's binary path)
        result = _scorer(model).score(x)
        assert np.all(result.probability >= 0.5) and result.probability.min() < 0.9  # informative
        np.testing.assert_allclose(result.margin, 2.0 * result.probability - 1.0, atol=1e-6)
        p1 = 1.0 / (1.0 + np.exp(-(x[:, 0] - x[:, 1] + 0.2)))
        np.testing.assert_allclose(result.margin, np.abs(2.0 * p1 - 1.0), atol=1e-6)


def test_regressor_and_invalid_rows_have_nan_margin_exactly_where_probability_is_nan(tmp_path: Path) -> None:
    reg = OnnxModel(onnx_graphs.polynomial_regressor(tmp_path / "r.onnx", 3, [onnx_graphs.squared_norm(3)]))
    result = _scorer(reg).score(np.random.default_rng(0).normal(size=(5, 3)))
    assert np.isnan(result.margin).all() and np.isnan(result.probability).all()
    clf = OnnxModel(onnx_graphs.linear_classifier(tmp_path / "c.onnx", W3, B3))
    rows = np.array([[0.5], [np.nan], [1.0], [np.inf]])
    result = _scorer(clf).score(rows)
    np.testing.assert_array_equal(np.isnan(result.margin), np.isnan(result.probability))
    np.testing.assert_array_equal(np.isnan(result.margin), [False, True, False, True])
    assert result.margin.shape == (4,) and result.margin.dtype == np.float64


# ------------------------------------------------------------------------------------------------ windows


def test_windows_keep_margin_as_a_signal() -> None:
    assert "margin" in SIGNALS
    margin = np.array([0.0, 0.5, np.nan, 1.0])
    batch = SignalBatch.of(features=np.zeros((4, 1)), timestamps_seconds=10.0, margin=margin)
    np.testing.assert_array_equal(batch.take(np.array([1, 3])).margin, [0.5, 1.0])
    assert np.isnan(SignalBatch.of(features=np.zeros((2, 1)), timestamps_seconds=0.0).margin).all()
    tw = TimeWindow(60.0, n_features=1, buckets=6).update(batch)
    s = tw.snapshot(now_seconds=20.0).signals["margin"]
    assert s.count == 3 and s.mean == pytest.approx(0.5)
    assert 0.45 <= s.quantiles[0.5] <= 0.55  # read from the unit histogram, accurate to one bin
    cw = CountWindow(10, n_features=1).update(batch)
    np.testing.assert_array_equal(cw.values("margin"), [0.0, 0.5, 1.0])
    assert cw.snapshot().signals["margin"].quantiles[0.5] == 0.5
    assert tw.snapshot(now_seconds=20.0).signals["confidence"].count == 0  # a separate signal


# ------------------------------------------------------------------------------------------------ the reference


def three_class(
    rng: np.random.Generator, n: int, *, runner_up: float = 0.0
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(confidence, margin) of a 3-class model: max-probability c uniform on [0.5, 1); the rest 1 − c split between
    the other two classes with share u ∈ [0.5, 0.6) to the runner-up. ``runner_up``: that share of events gives the
    runner-up everything left (u = 1, margin 2c − 1) — the same max-probability, a smaller margin."""
    c = 0.5 + 0.5 * rng.random(n)
    u = np.where(rng.random(n) < runner_up, 1.0, 0.5 + 0.1 * rng.random(n))
    return c, c - (1.0 - c) * u


def reference(seed: int, n: int = 5000, *, margin: bool = True) -> Reference:
    rng = np.random.default_rng(seed)
    conf, marg = three_class(rng, n)
    return Reference.from_arrays(
        gamma=rng.exponential(1e-3, n),
        flicker=np.where(rng.random(n) < 0.05, 0.25, 0.0),
        features=rng.normal(size=(n, 3)),
        confidence=conf,
        margin=marg if margin else None,
    )


def test_reference_keeps_a_thinned_margin_sample_that_round_trips() -> None:
    ref = Reference.from_arrays(
        gamma=np.zeros(20), flicker=np.zeros(20), features=np.zeros((20, 1)), margin=[0.3, np.nan, 0.1, 0.2] * 5
    )
    assert ref.margin_sample.tolist() == [0.1] * 5 + [0.2] * 5 + [0.3] * 5  # sorted, NaN left out
    assert ref.confidence_sample.size == 0
    again = Reference.from_dict(ref.to_dict())
    assert again.margin_sample.tolist() == ref.margin_sample.tolist()
    thinned = Reference.from_arrays(
        gamma=np.zeros(100),
        flicker=np.zeros(100),
        features=np.zeros((100, 1)),
        margin=np.linspace(0, 1, 100),
        max_sample=10,
    )
    assert thinned.margin_sample.size == 10 and np.all(np.diff(thinned.margin_sample) > 0)
    without = Reference.from_arrays(gamma=np.zeros(20), flicker=np.zeros(20), features=np.zeros((20, 1)))
    assert without.margin_sample.size == 0 and Reference.from_dict(without.to_dict()).margin_sample.size == 0
    with pytest.raises(Exception, match="margin has 3 values"):
        Reference.from_arrays(gamma=np.zeros(20), flicker=np.zeros(20), features=np.zeros((20, 1)), margin=[0.1] * 3)


def test_warmup_builder_keeps_margin() -> None:
    b = WarmupReferenceBuilder(events=10).update(
        gamma=np.zeros(12), flicker=np.zeros(12), features=np.zeros((12, 1)), margin=np.linspace(0.0, 1.1, 12)
    )
    np.testing.assert_allclose(b.build().margin_sample, np.linspace(0.0, 1.1, 12)[:10])
    plain = WarmupReferenceBuilder(events=10).update(
        gamma=np.zeros(10), flicker=np.zeros(10), features=np.zeros((10, 1))
    )
    assert plain.build().margin_sample.size == 0


def test_old_reference_without_margin_loads_with_confidence_detector_and_no_margin_detector() -> None:
    old = reference(0).to_dict()
    del old["margin_sample"]  # a reference written before margin was kept
    ref = Reference.from_dict(old)
    assert ref.margin_sample.size == 0 and ref.confidence_sample.size == 5000
    eng = VerdictEngine(ref)
    assert eng.detector("confidence_cusum") is not None and eng.detector("margin_cusum") is None
    assert "margin_cusum" not in eng.thresholds
    eng.update(gamma=np.ones(10), flicker=np.zeros(10), confidence=np.full(10, 0.9), margin=np.full(10, 0.1))
    assert not any(s.name == "margin_cusum" for s in eng.states)


# ------------------------------------------------------------------------------------------------ the detector


def test_margin_threshold_is_calibrated_like_confidence_and_can_be_switched_off() -> None:
    ref = reference(1)
    eng = VerdictEngine(ref)
    assert eng.detector("margin_cusum") is not None
    cal = eng.detector("margin_cusum").calibration
    assert cal is not None and cal.method != "fallback"
    assert eng.cusums_sharing == 6  # six CUSUMs (three on confidence) among the detectors sharing the rate evenly
    share = Cusum(1.0 - ref.margin_sample, false_alarms_per_million=1.0 / eng.sharing, name="m")
    assert eng.thresholds["margin_cusum"] == pytest.approx(share.threshold)
    assert set(eng.thresholds) == {
        "gamma_cusum",
        "flicker_cusum",
        "confidence_cusum",
        "confidence_tail_cusum",
        "confidence_jump_cusum",
        "margin_cusum",
    }
    assert 8.0 < eng.thresholds["margin_cusum"] < 15.0
    assert VerdictEngine(ref, DriftSettings(cusum_threshold=14.0)).thresholds["margin_cusum"] == 14.0
    off = VerdictEngine(ref, DriftSettings(margin_detector=False))
    assert off.detector("margin_cusum") is None and off.detector("confidence_cusum") is not None
    nan_margin = Reference.from_arrays(
        gamma=np.ones(500), flicker=np.zeros(500), features=np.zeros((500, 1)), margin=np.full(500, np.nan)
    )
    assert VerdictEngine(nan_margin).detector("margin_cusum") is None  # a regressor: no margin


def test_margin_cusum_catches_a_runner_up_gaining_which_confidence_cannot_see() -> None:
    rng = np.random.default_rng(5)
    eng = VerdictEngine(reference(2))
    assert eng.detector("margin_cusum") is not None and eng.detector("confidence_cusum") is not None
    conf, marg = three_class(rng, 20_000)
    eng.update(confidence=conf, margin=marg)
    assert eng.detector("margin_cusum").state.alarms == 0 and eng.verdict is Verdict.STABLE
    assert not eng.update(margin=np.ones(5000)).detector("margin_cusum").drift_detected  # type: ignore[union-attr]  # a rise
    conf, marg = three_class(rng, 3000, runner_up=0.5)
    first = next(
        i
        for i in range(0, 3000, 10)
        if eng.update(confidence=conf[i : i + 10], margin=marg[i : i + 10]).verdict is not Verdict.STABLE
    )
    assert first < 600
    assert eng.report.verdict is Verdict.HARMFUL_SHIFT and eng.report.fired == ("margin_cusum",)
    assert eng.detector("confidence_cusum").state.alarms == 0  # max-probability did not move


def test_binary_margin_repeats_confidence_so_a_binary_model_has_no_margin_cusum() -> None:
    rng = np.random.default_rng(7)
    c = 0.5 + 0.5 * rng.beta(5.0, 1.0, 5000)

    def ref(margin: np.ndarray) -> Reference:
        return Reference.from_arrays(
            gamma=np.ones(5000), flicker=np.zeros(5000), features=np.zeros((5000, 1)), confidence=c, margin=margin
        )

    # the same CUSUM on 1 − margin = 2·(1 − max-probability) moves in step with the confidence one ...
    forced = Cusum(1.0 - (2 * c - 1), name="m"), Cusum(1.0 - c, name="c")
    stream = np.concatenate([0.5 + 0.5 * rng.beta(5.0, 1.0, 2000), 0.5 + 0.2 * rng.random(500)])
    for i in range(0, stream.size, 50):
        forced[0].update(1.0 - (2 * stream[i : i + 50] - 1))
        forced[1].update(1.0 - stream[i : i + 50])
        assert forced[0].statistic == pytest.approx(forced[1].statistic)
    # ... so the engine leaves it out and its share of the false-alarm rate goes to the others
    binary = VerdictEngine(ref(2 * c - 1))
    assert (
        binary.detector("margin_cusum") is None
        and binary.detector("confidence_cusum") is not None
        and binary.cusums_sharing == 5
    )
    three = VerdictEngine(ref(np.clip(2 * c - 1 - 0.1 * rng.random(5000), 0.0, 1.0)))  # a runner-up below 1 − p
    assert three.detector("margin_cusum") is not None and three.cusums_sharing == 6


def _state(name: str, on: bool) -> DriftState:
    return DriftState(name, on, 1.0, 1.0, float("nan"), 100)


@pytest.mark.parametrize(
    ("margin", "inputs", "want"),
    [
        (False, False, Verdict.STABLE),
        (False, True, Verdict.INPUT_SHIFT),
        (True, False, Verdict.HARMFUL_SHIFT),
        (True, True, Verdict.HARMFUL_SHIFT),
    ],
)
def test_margin_is_output_side_evidence(margin: bool, inputs: bool, want: Verdict) -> None:
    report = decide_verdict(
        [
            SlotState(_state("gamma_cusum", False), "output"),
            SlotState(_state("flicker_cusum", False), "output"),
            SlotState(_state("confidence_cusum", False), "output"),
            SlotState(_state("margin_cusum", margin), "output"),
            SlotState(_state("features_ks", inputs), "input"),
        ]
    )
    assert report.verdict is want
    assert ("margin_cusum" in report.fired) == margin


# ------------------------------------------------------------------------------------------------ the watch


def _with(batch: tuple, confidence: np.ndarray, margin: np.ndarray) -> tuple:  # type: ignore[type-arg]
    events, x, result, shadow = batch
    return events, x, dataclasses.replace(result, probability=confidence, margin=margin), shadow


def _hist_count(state: MetricsState, name: str) -> float:
    return sum(
        s.value for fam in state.families() if fam.name == name for s in fam.samples if s.name == f"{name}_count"
    )


def test_watch_keeps_margin_windows_and_a_fall_in_margin_is_a_harmful_shift() -> None:
    watch, state = make_watch(with_reference=False, for_seconds=5.0)
    stream = Stream(seed=31)
    rng = np.random.default_rng(31)
    for _ in range(5):  # warm-up reference (500 events), with the margin sample
        watch.update(*_with(stream.batch(), *three_class(rng, 100)))
    assert watch.reference is not None and watch.reference.margin_sample.size == 500
    for _ in range(20):
        watch.update(*_with(stream.batch(), *three_class(rng, 100)))
    assert watch.verdict("other") is Verdict.STABLE
    assert watch.verdicts.engines["other"].detector("margin_cusum") is not None
    mean = state.gauge(tel.WINDOW_MARGIN_MEAN.name, (MODEL, "other", "60s"))
    assert mean is not None and 0.59 < mean < 0.64  # E[c − (1 − c)·u] = 0.75 − 0.25·0.55 ≈ 0.61
    assert _hist_count(state, tel.MARGIN.name) == 2500
    for _ in range(30):  # the runner-up class gains; max-probability, γ, flicker and inputs as before
        watch.update(*_with(stream.batch(), *three_class(rng, 100, runner_up=0.6)))
    report = watch.last_reports["other"]
    assert report.verdict is Verdict.HARMFUL_SHIFT and "margin_cusum" in report.fired
    assert "confidence_cusum" not in report.fired
    assert fired(watch, HARMFUL_ALERT) and not fired(watch, INPUT_ALERT)
    assert state.gauge(tel.DRIFT_STATISTIC.name, (MODEL, "other", "margin_cusum")) is not None


def test_watch_regressor_has_no_margin_series() -> None:
    watch, state = make_watch(with_reference=False, for_seconds=5.0)
    stream = Stream(seed=32)
    nan = np.full(100, np.nan)
    for _ in range(10):
        watch.update(*_with(stream.batch(), nan, nan))
    assert watch.reference is not None and watch.reference.margin_sample.size == 0
    assert watch.verdicts.engines["other"].detector("margin_cusum") is None
    assert state.gauge(tel.WINDOW_MARGIN_MEAN.name, (MODEL, "other", "60s")) is None
    assert state.gauge(tel.DRIFT_STATISTIC.name, (MODEL, "other", "margin_cusum")) is None
    assert _hist_count(state, tel.MARGIN.name) == 0


def test_the_margin_detector_setting_reaches_the_watch() -> None:
    models = {"models": [{"name": MODEL, "path": "m.onnx"}]}
    assert WatchConfig.from_settings(load_settings(None, models)).detectors.margin_detector is True
    off = load_settings(None, {**models, "drift": {"margin_detector": False}})
    assert WatchConfig.from_settings(off).detectors.margin_detector is False
    assert WatchConfig.from_settings(off).detectors.confidence_detector is True
