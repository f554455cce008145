"""A regressor's error without labels in ``run``: a reference built with true values stores the loss estimator,
``run`` loads it, and :class:`~monitor.runtime.watch.ModelWatch` publishes ``harmonic_estimated_error`` per window,
method and loss and fires ``HarmonicErrorRise``. A scikit-learn linear regression (converted to ONNX) whose error
grows with |x2|: moving x2 moves the error while the target given the inputs stays. Seeded, no sleeps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

import monitor
from monitor import telemetry as tel
from monitor.accuracy.regression import LossFit
from monitor.config import ModelSettings, load_settings
from monitor.events import InferenceEvent
from monitor.exporters.prometheus import MetricsState
from monitor.model.onnx import OnnxModel
from monitor.model.standardize import Standardizer
from monitor.runtime.alert_conditions import ERROR_ALERT
from monitor.runtime.models import load_model_runtime
from monitor.runtime.watch import ModelWatch, WatchConfig
from monitor.signals.scorer import RobustnessScorer, ScoringConfig
from tests.unit.fanned_watch import fanned_watch

MODEL = "reg"
T0 = 1_795_000_000.0
COUNT = 400


def rows(seed: int, n: int, shift: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    x[:, 2] += shift
    return x, x[:, 0] + 0.5 * x[:, 1] + rng.normal(size=n) * (0.2 + np.abs(x[:, 2]))


@pytest.fixture(scope="module")
def labelled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The regressor and its reference JSON built with true values."""
    from sklearn.linear_model import LinearRegression

    from monitor.model.convert import convert_estimator

    folder = tmp_path_factory.mktemp("error_runtime")
    x, y = rows(0, 800, 0.0)
    path = convert_estimator(LinearRegression().fit(x, y), 3, folder / "reg.onnx")
    xr, yr = rows(1, 1000, 0.0)
    monitor.reference(path, xr, labels=yr, flicker_copies=4, out=folder / "ref.json")
    return path, folder / "ref.json"


def watch_of(labelled: tuple[Path, Path], **config: Any) -> tuple[ModelWatch, MetricsState, RobustnessScorer]:
    path, ref = labelled
    rt = load_model_runtime(ModelSettings(name=MODEL, path=path, reference=ref))
    assert isinstance(rt.accuracy_fit, LossFit)
    state = MetricsState()
    defaults: dict[str, Any] = {"count_window_events": COUNT, "for_seconds": 0.0, "accuracy_interval_seconds": 0.0}
    watch = fanned_watch(MODEL, WatchConfig(**{**defaults, **config}), state)
    watch.set_accuracy_fit(rt.accuracy_fit)
    scorer = RobustnessScorer(OnnxModel(path), Standardizer.fit(rows(1, 1000, 0.0)[0]), ScoringConfig(flicker_copies=4))
    return watch, state, scorer


def feed(watch: ModelWatch, scorer: RobustnessScorer, x: NDArray[np.float64], start: int) -> int:
    for lo in range(0, x.shape[0], 100):
        part = x[lo : lo + 100]
        events = [
            InferenceEvent(f"e{start + lo + i}", MODEL, "1", part[i], T0 + (start + lo + i) * 0.01)
            for i in range(part.shape[0])
        ]
        watch.update(events, part, scorer.score(part), np.full(part.shape[0], np.nan))
        watch.evaluate()
    return start + x.shape[0]


def test_the_error_is_exported_per_window_and_a_shift_it_cannot_vouch_for_fires_nothing(
    labelled: tuple[Path, Path],
) -> None:
    watch, state, scorer = watch_of(labelled)
    count = (MODEL, "other", f"last_{COUNT}")
    n = feed(watch, scorer, rows(2, 30, 0.0)[0], 0)
    assert state.gauge(tel.ESTIMATED_ERROR.name, (*count, "iw", "mae")) is None  # < 50 rows: nothing, not noise
    n = feed(watch, scorer, rows(3, 400, 0.0)[0], n)
    ref_mae = state.gauge(tel.REFERENCE_ERROR.name, (MODEL, "mae"))
    assert ref_mae is not None and state.gauge(tel.REFERENCE_ERROR.name, (MODEL, "rmse")) is not None
    for method in ("iw", "dle", "dr", "gbdt"):
        for loss in ("mae", "rmse"):
            est = state.gauge(tel.ESTIMATED_ERROR.name, (*count, method, loss))
            lo = state.gauge(tel.ESTIMATED_ERROR_LOWER.name, (*count, method, loss))
            hi = state.gauge(tel.ESTIMATED_ERROR_UPPER.name, (*count, method, loss))
            assert lo is not None and est is not None and hi is not None and lo <= est <= hi
    assert not [ev for ev in watch.fired if ev.alert.rule.name == ERROR_ALERT]
    # x2 moved by 2: the error roughly doubles, the estimate rises, but the interval's shift margin (the domain
    # classifier's AUC near 1: a window the reference barely covers) keeps its lower end near the reference
    n = feed(watch, scorer, rows(4, 400, 2.0)[0], n)
    est = state.gauge(tel.ESTIMATED_ERROR.name, (*count, "iw", "mae"))
    lower = state.gauge(tel.ESTIMATED_ERROR_LOWER.name, (*count, "iw", "mae"))
    assert est is not None and lower is not None and est > 1.3 * ref_mae and lower < 1.1 * ref_mae
    assert not [ev for ev in watch.fired if ev.alert.rule.name == ERROR_ALERT]
    assert state.gauge(tel.ALERTS_FIRING.name, (MODEL, "other", ERROR_ALERT)) == 0.0


def test_the_alert_condition_reads_the_count_windows_lower_bound(labelled: tuple[Path, Path]) -> None:
    """HarmonicErrorRise holds when the MAE's lower end exceeds the reference MAE × (1 + tolerance), on enough
    events: here against a reference of half the error (the same rows, half the residuals)."""
    from dataclasses import replace

    from monitor.accuracy.regression import estimate_loss
    from monitor.runtime.accuracy_watch import error_condition

    watch, _, _ = watch_of(labelled)
    fit = watch.accuracy.loss_fit
    assert fit is not None
    x, _ = rows(7, 400, 0.0)
    pred = x[:, 0] + 0.5 * x[:, 1]
    result = estimate_loss(fit, x, pred)
    holds, value, detail = error_condition(fit, result, 0.1, 100)
    assert not holds and value == result["mae"]["estimate"]
    halved = replace(fit, mae=fit.mae / 2.5, rows_abs_err=fit.rows_abs_err)
    holds, _, detail = error_condition(halved, result, 0.1, 100)
    assert holds and "lower bound above the model's reference MAE" in detail
    assert not error_condition(halved, result, 0.1, 401)[0]  # too few events in the count window


def test_a_tolerance_wider_than_the_rise_keeps_the_alert_quiet(labelled: tuple[Path, Path]) -> None:
    s = load_settings(None, {"models": [{"name": MODEL, "path": "m.onnx"}], "accuracy": {"error_tolerance": 5.0}})
    assert WatchConfig.from_settings(s).error_tolerance == 5.0
    watch, _, scorer = watch_of(labelled, error_tolerance=5.0)
    feed(watch, scorer, rows(6, 400, 2.0)[0], 0)
    assert not [ev for ev in watch.fired if ev.alert.rule.name == ERROR_ALERT]
