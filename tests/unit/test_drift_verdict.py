"""Verdict rule and engine: harmful if γ/flicker rose, input-shift if only inputs moved, stable otherwise."""

from __future__ import annotations

import json

import numpy as np
import pytest

from monitor.drift import DriftSettings, DriftState, FeatureShift, Verdict, VerdictEngine, decide_verdict
from monitor.drift.slots import SlotState
from monitor.errors import ConfigError
from monitor.rolling.reference import Reference


def state(name: str, on: bool) -> DriftState:
    return DriftState(name, on, 1.0 if on else 0.0, 0.5, float("nan"), 100)


@pytest.mark.parametrize(
    ("gamma", "flicker", "features", "want"),
    [
        (False, False, False, Verdict.STABLE),
        (False, False, True, Verdict.INPUT_SHIFT),
        (True, False, False, Verdict.HARMFUL_SHIFT),
        (False, True, False, Verdict.HARMFUL_SHIFT),
        (True, True, True, Verdict.HARMFUL_SHIFT),
    ],
)
def test_decide_verdict_rule(gamma: bool, flicker: bool, features: bool, want: Verdict) -> None:
    report = decide_verdict(
        [
            SlotState(state("gamma_cusum", gamma), "output"),
            SlotState(state("flicker_rate", flicker), "output"),
            SlotState(state("features_ks", features), "input"),
        ]
    )
    assert report.verdict is want


def test_decide_verdict_names_detectors_and_top_features() -> None:
    moved = [FeatureShift(2, "income", 0.4, 1e-9), FeatureShift(0, "age", 0.2, 1e-5), FeatureShift(1, "x", 0.15, 1e-4)]
    report = decide_verdict(
        [
            SlotState(state("gamma_cusum", True), "output"),
            SlotState(state("gamma_ks", False), "output"),
            SlotState(state("features_ks", True), "input", moved, "top_features"),
        ],
        top=2,
    )
    assert report.fired == ("gamma_cusum", "features_ks")
    assert report.top_features == (("income", 0.4), ("age", 0.2))
    assert (
        report.message == "harmful-shift: gamma_cusum, features_ks fired; inputs moved: income (D=0.40), age (D=0.20)"
    )


def test_verdict_is_a_string_for_metrics_and_json() -> None:
    assert json.dumps(Verdict.INPUT_SHIFT) == '"input-shift"'


def make_reference(rng: np.random.Generator) -> Reference:
    n = 5000
    gamma = np.where(rng.random(n) < 0.3, 0.0, rng.lognormal(np.log(1e-3), 1.0, n))
    flicker = np.where(rng.random(n) < 0.05, rng.integers(1, 17, n) / 32, 0.0)
    return Reference.from_arrays(
        gamma=gamma, flicker=flicker, features=rng.normal(size=(n, 3)), feature_names=["a", "b", "c"]
    )


def test_engine_moves_from_stable_to_input_shift_and_calls_gamma_alone_fragility() -> None:
    rng = np.random.default_rng(0)
    eng = VerdictEngine(make_reference(rng))
    ref = eng.detector("gamma_cusum").cutoff
    n = 3000
    eng.update(
        gamma=np.where(rng.random(n) < 0.3, 0.0, rng.lognormal(np.log(1e-3), 1.0, n)),
        flicker=np.where(rng.random(n) < 0.05, 0.25, 0.0),
        features=rng.normal(size=(n, 3)),
    )
    assert eng.report.verdict is Verdict.STABLE
    eng.update(
        gamma=np.where(rng.random(n) < 0.3, 0.0, rng.lognormal(np.log(1e-3), 1.0, n)),
        flicker=np.where(rng.random(n) < 0.05, 0.25, 0.0),
        features=rng.normal(size=(n, 3)) + [0.0, 0.0, 1.0],
    )
    report = eng.report
    assert report.verdict is Verdict.INPUT_SHIFT and report.top_features[0][0] == "c"
    eng.update(gamma=np.full(500, 10 * ref), flicker=None, features=None)
    fragile = eng.report  # γ rising is fragility, not evidence of a loss
    assert fragile.verdict is Verdict.INPUT_SHIFT and "gamma_cusum" in fragile.fragility
    assert "fragility rose, no evidence of a loss" in fragile.message
    eng.reset()
    assert eng.report.verdict is Verdict.STABLE and all(s.events == 0 for s in eng.states)


def test_engine_passes_bad_settings_on_as_config_errors() -> None:
    with pytest.raises(ConfigError, match="threshold must be > 0"):
        VerdictEngine(make_reference(np.random.default_rng(1)), DriftSettings.model_construct(cusum_threshold=0.0))
