"""Accuracy without labels in the product: ``reference --labels`` stores the fitted estimators, ``run``
loads them, and :class:`~monitor.runtime.watch.ModelWatch` publishes ``harmonic_estimated_accuracy`` per window and
method and fires ``HarmonicAccuracyDrop``.

Real models: a scikit-learn logistic regression on two overlapping Gaussian blobs (accuracy ~0.93), converted with
skl2onnx; every window scored by the real :class:`~monitor.signals.scorer.RobustnessScorer`. Seeded, no sleeps.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from monitor import telemetry as tel
from monitor.accuracy import DEFAULT_METHOD, METHODS, PRIMARY_CHOICES, SMALL_N, EstimatorFit, fit_from_scores
from monitor.config import AccuracySettings, ModelSettings, load_settings
from monitor.events import InferenceEvent
from monitor.exporters.prometheus import MetricsState
from monitor.model.onnx import OnnxModel
from monitor.model.standardize import Standardizer
from monitor.rolling.reference_file import ACCURACY_KEY, read_accuracy_estimator, read_reference
from monitor.rolling.scores import ScoreSamples
from monitor.runtime.models import load_model_runtime
from monitor.runtime.watch import ACCURACY_ALERT, HARMFUL_ALERT, INPUT_ALERT, ModelWatch, WatchConfig
from monitor.signals.scorer import RobustnessScorer, ScoreResult, ScoringConfig
from tests.unit.fanned_watch import fanned_watch
from tests.unit.onnx_graphs import sklearn_to_onnx
from tests.unit.reference_cli import build_reference

MODEL = "blobs"
T0 = 1_795_000_000.0
SPACING = 0.01  # seconds of event time per event
COUNT = 500


def blobs(seed: int, n: int) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Two overlapping Gaussian blobs in 2-D (centres ±1 on both axes, unit noise): a classifier gets ~0.92 right."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, size=n)
    x = rng.normal(size=(n, 2)) + np.where(y[:, None] == 1, 1.0, -1.0)
    return x, y


def train(path: Path, classes: tuple[int, int] = (0, 1)) -> tuple[Path, Any]:
    from sklearn.linear_model import LogisticRegression

    x, y = blobs(0, 400)
    estimator = LogisticRegression().fit(x, np.asarray(classes)[y])
    return sklearn_to_onnx(path, estimator, 2, zipmap=False), estimator


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    return train(tmp_path_factory.mktemp("accuracy_runtime") / "clf.onnx")


@pytest.fixture(scope="module")
def validation() -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    return blobs(1, 400)


def build_labelled(tmp_path: Path, model: Path, x: NDArray[np.float64], y: NDArray[np.int64], *extra: str) -> int:
    """``reference --labels``: ``x`` saved as x.npy, ``y`` as y.npy, the reference written to ref.json, all under
    ``tmp_path``; returns the exit code."""
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    return build_reference(
        model, tmp_path / "x.npy", tmp_path / "ref.json", "--labels", str(tmp_path / "y.npy"), *extra
    )


# -- reference --labels -------------------------------------------------------------------------------------------


def test_reference_labels_stores_a_fit_that_round_trips(
    tmp_path: Path, model: tuple[Path, Any], validation: tuple[NDArray[np.float64], NDArray[np.int64]]
) -> None:
    x, y = validation
    np.save(tmp_path / "x.npy", x)
    np.savetxt(tmp_path / "y.csv", y, fmt="%d")
    assert (
        build_reference(model[0], tmp_path / "x.npy", tmp_path / "ref.json", "--labels", str(tmp_path / "y.csv")) == 0
    )
    doc = read_accuracy_estimator(tmp_path / "ref.json")
    assert doc is not None
    fit = EstimatorFit.from_dict(doc)
    assert fit.n == 400
    assert fit.accuracy == pytest.approx(float(np.mean(model[1].predict(x) == y)), abs=1.5 / 400)
    assert 0.85 < fit.accuracy < 0.97
    assert fit.diagnostics["folds"] >= 2  # cross-fitted
    assert EstimatorFit.from_dict(fit.to_dict()).to_dict() == fit.to_dict()
    # the drift part of the file is what a reference without labels holds
    standardizer, reference = read_reference(tmp_path / "ref.json", 2)
    assert reference.n_events == 400 and standardizer.n_features == 2


def test_reference_labels_may_be_the_models_class_values(
    tmp_path: Path, validation: tuple[NDArray[np.float64], NDArray[np.int64]]
) -> None:
    """Labels as the model's label output gives them (3 and 7 here), as the label join of `run` compares them."""
    path, estimator = train(tmp_path / "clf37.onnx", classes=(3, 7))
    x, y = validation
    assert build_labelled(tmp_path, path, x, np.asarray([3, 7])[y]) == 0
    doc = read_accuracy_estimator(tmp_path / "ref.json")
    assert doc is not None
    expected = float(np.mean(estimator.predict(x) == np.asarray([3, 7])[y]))
    assert EstimatorFit.from_dict(doc).accuracy == pytest.approx(expected, abs=1.5 / 400)


def test_reference_labels_follow_the_sampled_rows(
    tmp_path: Path, model: tuple[Path, Any], validation: tuple[NDArray[np.float64], NDArray[np.int64]]
) -> None:
    x, y = validation
    assert build_labelled(tmp_path, model[0], x, y, "--sample-rows", "150") == 0
    doc = read_accuracy_estimator(tmp_path / "ref.json")
    assert doc is not None and doc["n"] == 150
    assert 0.8 < doc["accuracy"] < 1.0  # rows and labels stayed paired (a shuffled pairing gives ~0.5)


def test_reference_labels_of_another_length_are_refused(
    tmp_path: Path, model: tuple[Path, Any], validation: tuple[NDArray[np.float64], NDArray[np.int64]], capsys: Any
) -> None:
    x, y = validation
    assert build_labelled(tmp_path, model[0], x, y[:-1]) != 0
    assert "one class per data row" in capsys.readouterr().err
    assert not (tmp_path / "ref.json").exists()


def test_a_reference_without_labels_still_loads_and_holds_no_fit(
    tmp_path: Path, model: tuple[Path, Any], validation: tuple[NDArray[np.float64], NDArray[np.int64]]
) -> None:
    x, _ = validation
    np.save(tmp_path / "x.npy", x)
    assert build_reference(model[0], tmp_path / "x.npy", tmp_path / "ref.json") == 0
    assert ACCURACY_KEY not in json.loads((tmp_path / "ref.json").read_text())
    assert read_accuracy_estimator(tmp_path / "ref.json") is None
    rt = load_model_runtime(ModelSettings(name=MODEL, path=model[0], reference=tmp_path / "ref.json"))
    assert rt.standardizer is not None and rt.accuracy_fit is None


def test_run_loads_the_fit_of_a_labelled_reference(
    tmp_path: Path, model: tuple[Path, Any], validation: tuple[NDArray[np.float64], NDArray[np.int64]]
) -> None:
    x, y = validation
    assert build_labelled(tmp_path, model[0], x, y) == 0
    rt = load_model_runtime(ModelSettings(name=MODEL, path=model[0], reference=tmp_path / "ref.json"))
    assert rt.accuracy_fit is not None and 0.85 < rt.accuracy_fit.accuracy < 0.97


def test_accuracy_settings_name_the_librarys_methods() -> None:
    field = AccuracySettings.model_fields["method"]
    assert field.default == DEFAULT_METHOD
    assert set(field.annotation.__args__) == set(PRIMARY_CHOICES)  # type: ignore[union-attr]
    s = load_settings(
        None, {"models": [{"name": MODEL, "path": "m.onnx"}], "accuracy": {"method": "harmonic", "tolerance": 0.1}}
    )
    assert WatchConfig.from_settings(s).accuracy_method == "harmonic"
    assert WatchConfig.from_settings(s).accuracy_tolerance == 0.1


# -- the watch: gauges and the alert ------------------------------------------------------------------------------


class Scored:
    """Rows scored by the real scorer, turned into timed events of one segment."""

    def __init__(self, model_path: Path, reference_rows: NDArray[np.float64]) -> None:
        self.scorer = RobustnessScorer(
            OnnxModel(model_path), Standardizer.fit(reference_rows), ScoringConfig(flicker_copies=16)
        )
        self.index = 0

    def score(self, x: NDArray[np.float64]) -> ScoreResult:
        return self.scorer.score(x)

    def batch(
        self, x: NDArray[np.float64], segment: str = "other"
    ) -> tuple[list[InferenceEvent], NDArray[np.float64], ScoreResult]:
        events = [
            InferenceEvent(f"e{self.index + i}", MODEL, "1", x[i], T0 + (self.index + i) * SPACING, segment)
            for i in range(x.shape[0])
        ]
        self.index += x.shape[0]
        return events, x, self.score(x)


@pytest.fixture(scope="module")
def scored(model: tuple[Path, Any], validation: tuple[NDArray[np.float64], NDArray[np.int64]]) -> Scored:
    return Scored(model[0], validation[0])


@pytest.fixture(scope="module")
def fit(scored: Scored, validation: tuple[NDArray[np.float64], NDArray[np.int64]]) -> EstimatorFit:
    x, y = validation
    return fit_from_scores(scored.score(x), y, seed=0)


def watch_with(fit: EstimatorFit | None, **config: Any) -> tuple[ModelWatch, MetricsState]:
    state = MetricsState()
    defaults: dict[str, Any] = {
        "count_window_events": COUNT,
        "for_seconds": 0.0,
        "resolve_after_seconds": 5.0,
        "accuracy_interval_seconds": 0.0,
    }
    watch = fanned_watch(MODEL, WatchConfig(**{**defaults, **config}), state)
    watch.set_accuracy_fit(fit)
    return watch, state


def feed(watch: ModelWatch, scored: Scored, x: NDArray[np.float64], batch: int = 100, segment: str = "other") -> None:
    for start in range(0, x.shape[0], batch):
        events, rows, result = scored.batch(x[start : start + batch], segment)
        watch.update(events, rows, result, np.full(rows.shape[0], np.nan))


def near_boundary(seed: int, n: int) -> NDArray[np.float64]:
    """Rows around the decision boundary x0 + x1 = 0: the model is right on about half of them."""
    rng = np.random.default_rng(seed)
    t = rng.normal(0.0, 0.25, n)
    u = rng.normal(0.0, 2.0, n)
    return np.column_stack([t + u, t - u]) / np.sqrt(2.0)


def test_a_window_of_too_few_events_exports_no_estimate(scored: Scored, fit: EstimatorFit) -> None:
    watch, state = watch_with(fit)
    feed(watch, scored, blobs(8, SMALL_N - 1)[0])
    watch.evaluate()
    assert state.gauge(tel.ESTIMATED_ACCURACY.name, (MODEL, "other", f"last_{COUNT}", "atc")) is None
    feed(watch, scored, blobs(9, 2)[0])
    watch.evaluate()
    assert state.gauge(tel.ESTIMATED_ACCURACY.name, (MODEL, "other", f"last_{COUNT}", "atc")) is not None


def test_every_window_and_method_gets_an_estimate_with_its_interval(scored: Scored, fit: EstimatorFit) -> None:
    watch, state = watch_with(fit)
    feed(watch, scored, blobs(5, 1000)[0])
    assert state.gauge(tel.REFERENCE_ACCURACY.name, (MODEL,)) == pytest.approx(fit.accuracy)
    for window in ("60s", "300s", "3600s", f"last_{COUNT}"):
        for method in METHODS:
            labels = (MODEL, "other", window, method)
            est = state.gauge(tel.ESTIMATED_ACCURACY.name, labels)
            lo = state.gauge(tel.ESTIMATED_ACCURACY_LOWER.name, labels)
            hi = state.gauge(tel.ESTIMATED_ACCURACY_UPPER.name, labels)
            assert est is not None and lo is not None and hi is not None, labels
            assert 0.0 <= lo <= est <= hi <= 1.0 and math.isfinite(est), (labels, lo, est, hi)
            # stationary traffic: every interval covers the reference accuracy; the count window's estimate (all
            # 500 events, verbatim) is close to it (the time windows' samples are smaller at first)
            assert lo <= fit.accuracy <= hi, (labels, lo, est, hi, fit.accuracy)
            if window == f"last_{COUNT}":
                assert abs(est - fit.accuracy) < 0.05, (labels, est, fit.accuracy)
    assert watch.alerts.get(ACCURACY_ALERT, model=MODEL, segment="other") is None
    assert state.gauge(tel.ALERTS_FIRING.name, (MODEL, "other", ACCURACY_ALERT)) == 0.0


def test_accuracy_drop_fires_when_the_upper_bound_falls_below_the_tolerance(scored: Scored, fit: EstimatorFit) -> None:
    # the alert reads the primary method: by default (auto) atc in `run`, which keeps scores, not rows
    watch, state = watch_with(fit)
    feed(watch, scored, blobs(6, 600)[0])
    assert not [ev for ev in watch.fired if ev.alert.rule.name == ACCURACY_ALERT]
    feed(watch, scored, near_boundary(7, 600))
    upper = state.gauge(tel.ESTIMATED_ACCURACY_UPPER.name, (MODEL, "other", f"last_{COUNT}", "atc"))
    assert upper is not None and upper < fit.accuracy - 0.05
    fired = [ev for ev in watch.fired if ev.alert.rule.name == ACCURACY_ALERT and ev.alert.state.value == "firing"]
    assert len(fired) == 1
    alert = fired[0].alert
    assert alert.labels["verdict"] == "harmful-shift" and alert.labels["signal"] == "accuracy"
    assert alert.reference == pytest.approx(fit.accuracy)
    assert "upper bound below the model's reference accuracy" in alert.annotations["description"]
    assert state.gauge(tel.ALERTS_FIRING.name, (MODEL, "other", ACCURACY_ALERT)) == 1.0
    # back to stationary traffic: the count window refills, the condition clears, the alert resolves
    feed(watch, scored, blobs(8, 1200)[0])
    assert state.gauge(tel.ALERTS_FIRING.name, (MODEL, "other", ACCURACY_ALERT)) == 0.0


def test_the_estimate_falling_below_its_tolerance_is_read_as_fell(scored: Scored, fit: EstimatorFit) -> None:
    """What the verdict reads as evidence of a loss where inputs moved: the point estimate below tolerance."""
    watch, _ = watch_with(fit)
    feed(watch, scored, blobs(14, 600)[0])
    assert not watch.accuracy.fell("other")
    feed(watch, scored, near_boundary(15, 600))
    assert watch.accuracy.fell("other")
    assert not watch_with(fit, accuracy_min_events=10_000)[0].accuracy.fell("other")  # nothing estimated yet


def test_a_tolerance_wider_than_the_drop_keeps_the_alert_quiet(scored: Scored, fit: EstimatorFit) -> None:
    watch, _ = watch_with(fit, accuracy_tolerance=0.95)
    feed(watch, scored, near_boundary(9, 600))
    assert not [ev for ev in watch.fired if ev.alert.rule.name == ACCURACY_ALERT]


def test_min_events_holds_the_alert_on_a_small_window(scored: Scored, fit: EstimatorFit) -> None:
    watch, _ = watch_with(fit, accuracy_min_events=10_000)
    feed(watch, scored, near_boundary(10, 600))
    assert not [ev for ev in watch.fired if ev.alert.rule.name == ACCURACY_ALERT]


def test_without_a_fit_nothing_is_estimated(scored: Scored) -> None:
    watch, state = watch_with(None)
    feed(watch, scored, blobs(11, 300)[0])
    assert state.gauge(tel.ESTIMATED_ACCURACY.name, (MODEL, "other", f"last_{COUNT}", "atc")) is None
    assert state.gauge(tel.REFERENCE_ACCURACY.name, (MODEL,)) is None


def test_each_segment_compares_with_its_own_reference_where_the_reference_carries_it(
    scored: Scored, fit: EstimatorFit
) -> None:
    """The same stationary traffic in two segments: "easy" carries a reference accuracy of 0.999 (its labelled rows
    were all but perfect), so the estimate over its window falls below it and its alert fires; "plain" has no
    reference value of its own and compares with the model-wide accuracy: quiet."""
    own = dataclasses.replace(fit, segments={"easy": {"accuracy": 0.999, "n": 400.0}})
    watch, state = watch_with(own, accuracy_tolerance=0.01)
    for seed, segment in ((16, "easy"), (17, "plain")):
        feed(watch, scored, blobs(seed, 600)[0], segment=segment)
    assert watch.last_estimates["easy"][f"last_{COUNT}"]["segment_reference"] == {
        "accuracy": 0.999,
        "n": 400,
        "own": True,
    }
    assert watch.last_estimates["plain"][f"last_{COUNT}"]["segment_reference"]["own"] is False
    assert state.gauge(tel.SEGMENT_REFERENCE_ACCURACY.name, (MODEL, "easy")) == pytest.approx(0.999)
    assert state.gauge(tel.SEGMENT_REFERENCE_ACCURACY.name, (MODEL, "plain")) is None
    firing = {ev.alert.labels["segment"]: ev.alert for ev in watch.fired if ev.alert.rule.name == ACCURACY_ALERT}
    assert set(firing) == {"easy"}, firing
    assert firing["easy"].reference == pytest.approx(0.999)
    assert "below segment easy's reference accuracy 0.999" in firing["easy"].annotations["description"]
    assert watch.accuracy.fell("easy") and not watch.accuracy.fell("plain")


def test_estimates_are_recomputed_at_most_every_interval(scored: Scored, fit: EstimatorFit) -> None:
    watch, _ = watch_with(fit, accuracy_interval_seconds=1000.0)
    feed(watch, scored, blobs(12, 300)[0])
    first = watch.last_estimates["other"][f"last_{COUNT}"]
    feed(watch, scored, near_boundary(13, 300))  # 3 s of event time later: not yet
    assert watch.last_estimates["other"][f"last_{COUNT}"] is first


# -- the bounded score samples ------------------------------------------------------------------------------------


def test_time_samples_stand_for_every_event_of_their_window_within_their_capacity() -> None:
    samples = ScoreSamples(window_seconds=(60.0, 10.0), count_size=50, capacity=120, buckets=12)
    rng = np.random.default_rng(0)
    ts = T0 + np.arange(3000) * 0.01  # 30 s at 100 events/s
    values = rng.random((3000, 4))
    for start in range(0, 3000, 250):
        samples.update("eu", ts[start : start + 250], values[start : start + 250])
    rows = samples.rows("eu", float(ts[-1]))
    assert set(rows) == {"10s", "60s", "last_50"}
    assert rows["60s"].n == 120 and rows["60s"].events == 3000
    assert rows["10s"].n == 120 and abs(rows["10s"].events - 1000) <= 100  # whole buckets of 10/12 s
    assert rows["last_50"].n == 50 and np.array_equal(rows["last_50"].values, values[-50:])
    # a weighted mean of the sample estimates the window's mean
    w = rows["60s"].weights
    assert abs(float(np.sum(w * rows["60s"].column("confidence")) / w.sum()) - values[:, 0].mean()) < 0.06
    # the 60 s window empties after a minute of event time
    assert samples.rows("eu", float(ts[-1]) + 120.0)["60s"].n == 0
    assert samples.rows("us", float(ts[-1])) == {}


def test_a_harmful_shift_the_estimate_made_quotes_the_estimate(scored: Scored, fit: EstimatorFit) -> None:
    """The estimate as harm evidence is in HarmonicHarmfulShift's evidence, in its own numbers: the estimate against
    the reference accuracy minus the tolerance, with its interval."""
    watch, _ = watch_with(fit, warmup_events=500)  # a baseline from the first 500 events: a verdict
    feed(watch, scored, blobs(16, 600)[0])
    feed(watch, scored, near_boundary(17, 600))
    assert "accuracy_estimate" in watch.last_reports["other"].fired
    alert = watch.alerts.get(HARMFUL_ALERT, model=MODEL, segment="other")
    assert alert is not None
    quoted = [e for e in alert.evidence if e.detector == "accuracy_estimate"]
    assert len(quoted) == 1 and quoted[0].reference == pytest.approx(fit.accuracy)
    assert quoted[0].statistic < quoted[0].threshold == pytest.approx(fit.accuracy - 0.05)
    assert "accuracy_estimate estimate 0." in alert.description and "90 % interval" in alert.description
    # the summary leads with it, in plain words: the loss in the model's own terms
    est = quoted[0].statistic
    assert alert.evidence[0] is quoted[0] and alert.value == pytest.approx(est)
    assert alert.summary.startswith(
        f"{HARMFUL_ALERT} {MODEL}/other: estimated accuracy {est:.2f}, reference {fit.accuracy:.2f}"
    ), alert.summary
    # the input alert beneath it (inhibited in Alertmanager, still firing) quotes it as how much
    inputs = watch.alerts.get(INPUT_ALERT, model=MODEL, segment="other")
    assert inputs is not None and inputs.evidence[-1] == quoted[0], inputs.evidence


def test_an_input_shift_quotes_the_estimate_as_how_much_with_what_it_cannot_see(
    scored: Scored, fit: EstimatorFit
) -> None:
    """Inputs moved along the decision boundary (the model as sure as before): HarmonicInputDrift ends its evidence
    with the estimate, which did not fall, and its detail says what a label-free estimate cannot see."""
    watch, _ = watch_with(fit, warmup_events=500)
    feed(watch, scored, blobs(16, 600)[0])
    feed(watch, scored, blobs(17, 1200)[0] + np.array([2.0, -2.0]))  # along x0 + x1 = 0: confidence unchanged
    assert watch.verdict("other").value == "input-shift"
    alert = watch.alerts.get(INPUT_ALERT, model=MODEL, segment="other")
    assert alert is not None and alert.evidence[-1].detector == "accuracy_estimate"
    est = alert.evidence[-1].statistic
    assert est >= fit.accuracy - 0.05  # not harm evidence: the estimate quoted as context
    assert f"estimated accuracy {est:.2f}, reference {fit.accuracy:.2f}" in alert.summary, alert.summary
    assert "concept shift, label noise" in alert.description
    assert watch.alerts.get(HARMFUL_ALERT, model=MODEL, segment="other") is None
