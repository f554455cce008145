"""γ's standard error per event and the control map (monitor.signals.control) on a per-event sampled hypercube: the
error is the sample's own, it covers the full ball's γ as stated, the control map shrinks it without moving the
target, both row-building paths agree, and bad input is refused in one line."""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier

import monitor
from monitor.config import ModelSettings
from monitor.errors import ConfigError
from monitor.model.onnx import OnnxModel, OnnxRuntimeOptions
from monitor.model.standardize import Standardizer
from monitor.runtime.models import ModelRuntime
from monitor.signals import control as control_module
from monitor.signals.control import ControlMap, control_for, fit_control_map, sampled_mean, second_differences
from monitor.signals.scorer import RobustnessScorer, ScoringConfig
from tests.unit import onnx_graphs

N = 300  # above the simplex limit: the hypercube is drawn per event
RADIUS = 0.5


def _model(tmp_path: Path, *, curved: bool = False) -> OnnxModel:
    """logits = tanh(x·W + b)·V + c: smooth, so every axis has its own second difference (a ReLU network's is 0
    on most axes); ``curved`` adds (x⊙x)·Q, a curvature of each class along each axis, as an image model's class and
    pixel shape its second differences (the input then feeds more than one affine layer: rows built in numpy)."""
    path = tmp_path / ("curved.onnx" if curved else "tanh.onnx")
    if not path.exists():
        rng = np.random.default_rng(3)
        weights = {
            "W": rng.normal(0, 2 / np.sqrt(N), (N, 16)),
            "b": rng.normal(0, 0.5, 16),
            "V": rng.normal(0, 1, (16, 3)),
            "c": np.zeros(3),
        }
        nodes = [
            helper.make_node("Gemm", ["x", "W", "b"], ["pre"]),
            helper.make_node("Tanh", ["pre"], ["act"]),
            helper.make_node("Gemm", ["act", "V", "c"], ["logits" if not curved else "smooth"]),
            helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
        ]
        if curved:
            weights["Q"] = rng.normal(0, 0.05, (N, 3))
            nodes[3:3] = [
                helper.make_node("Mul", ["x", "x"], ["sq"]),
                helper.make_node("MatMul", ["sq", "Q"], ["bowl"]),
                helper.make_node("Add", ["smooth", "bowl"], ["logits"]),
            ]
        inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()]
        graph = helper.make_graph(
            nodes,
            "tanh",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", N])],
            [
                helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 3]),
                helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 3]),
            ],
            inits,
        )
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return OnnxModel(path, model_kind="classifier")


@pytest.fixture(scope="module")
def setting(tmp_path_factory: pytest.TempPathFactory) -> tuple[OnnxModel, Standardizer, np.ndarray, np.ndarray]:
    model = _model(tmp_path_factory.mktemp("err"))
    rng = np.random.default_rng(0)
    reference = rng.normal(0.0, 1.0, size=(120, N))
    events = rng.normal(0.0, 1.0, size=(80, N)).astype(np.float32)
    return model, Standardizer.fit(reference), reference, events


def _cfg(ball: str = "hypercube:16", seed: int = 7) -> ScoringConfig:
    return ScoringConfig(ball=ball, radius=RADIUS, flicker_copies=0, seed=seed)


def test_the_standard_error_is_the_sampled_second_differences_own(setting: tuple) -> None:
    model, std, _, events = setting
    scorer = RobustnessScorer(model, std, _cfg())
    res = scorer.score(events[:6])
    axes = scorer.event_axes(events[:6])
    h, _ = second_differences(model, std, events[:6], RADIUS)
    hs = np.take_along_axis(h, axes, axis=1)
    expected = hs.std(axis=1, ddof=1) / np.sqrt(8) * np.sqrt(1 - 8 / N)
    assert res.gamma_logit_se is not None and res.gamma_se is not None
    np.testing.assert_allclose(res.gamma_logit_se, expected, rtol=2e-3)
    np.testing.assert_allclose(res.gamma_logit, np.abs(hs.mean(axis=1)), rtol=2e-3)
    assert (res.gamma_se > 0).all()


def test_the_error_covers_the_full_balls_gamma_as_stated(setting: tuple) -> None:
    model, std, _, events = setting
    full = RobustnessScorer(model, std, _cfg(f"hypercube:{2 * N}")).score(events)
    assert full.gamma_logit_se is not None and (full.gamma_logit_se == 0).all()  # a ball evaluated whole
    covered = []
    for seed in range(5):
        res = RobustnessScorer(model, std, _cfg(seed=seed)).score(events)
        assert res.gamma_logit_se is not None
        covered.append(np.abs(res.gamma_logit - full.gamma_logit) <= 1.96 * res.gamma_logit_se)
    assert 0.85 <= np.mean(covered) <= 1.0


def test_the_control_map_shrinks_the_error_and_keeps_the_target(setting: tuple, tmp_path: Path) -> None:
    _, std, reference, events = setting
    model = _model(tmp_path, curved=True)
    control = fit_control_map(model, std, reference, radius=RADIUS)
    full = RobustnessScorer(model, std, _cfg(f"hypercube:{2 * N}")).score(events).gamma_logit
    plain = RobustnessScorer(model, std, _cfg()).score(events)
    fitted = RobustnessScorer(model, std, _cfg(), control=control).score(events)
    assert plain.gamma_logit_se is not None and fitted.gamma_logit_se is not None
    assert control.useful and control.variance_ratio < 0.5
    assert np.median(fitted.gamma_logit_se) < 0.8 * np.median(plain.gamma_logit_se)
    assert np.mean(np.abs(fitted.gamma_logit - full)) < np.mean(np.abs(plain.gamma_logit - full))
    np.testing.assert_array_equal(fitted.gamma, plain.gamma)  # γ on the probability keeps the plain sample


def test_the_control_estimate_is_the_difference_estimator_by_hand(setting: tuple) -> None:
    model, std, reference, events = setting
    control = replace(fit_control_map(model, std, reference, radius=RADIUS), variance_ratio=0.0)  # used
    scorer = RobustnessScorer(model, std, _cfg(), control=control)
    x = events[:5]
    res = scorer.score(x)
    h, klass = second_differences(model, std, x, RADIUS)
    fitted = control.predict(klass, std.to_standardized(x))
    axes = scorer.event_axes(x)
    mean, se = sampled_mean(
        np.take_along_axis(h, axes, axis=1), N, fitted.mean(axis=1), np.take_along_axis(fitted, axes, axis=1)
    )
    np.testing.assert_allclose(res.gamma_logit, np.abs(mean), rtol=2e-3, atol=1e-6)
    np.testing.assert_allclose(res.gamma_logit_se, se, rtol=2e-3)


def test_rows_built_in_numpy_give_the_same_errors(tmp_path: Path, setting: tuple) -> None:
    model, std, reference, events = setting
    numpy_rows = OnnxModel(model.path, OnnxRuntimeOptions(rows_in_graph=False), model_kind="classifier")
    control = replace(fit_control_map(model, std, reference, radius=RADIUS), variance_ratio=0.0)  # used
    a = RobustnessScorer(model, std, _cfg(), control=control)
    b = RobustnessScorer(numpy_rows, std, _cfg(), control=control)
    assert a.rows_built_in_graph and not b.rows_built_in_graph
    ra, rb = a.score(events[:20]), b.score(events[:20])
    np.testing.assert_allclose(ra.gamma_logit, rb.gamma_logit, rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(ra.gamma_logit_se, rb.gamma_logit_se, rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(ra.gamma_se, rb.gamma_se, rtol=1e-3, atol=1e-9)


def test_a_map_that_leaves_most_of_the_variance_is_not_used(setting: tuple) -> None:
    model, std, reference, events = setting  # tanh features: h_a depends on x through every hidden unit
    control = fit_control_map(model, std, reference, radius=RADIUS)
    assert not control.useful and control.variance_ratio > 0.8
    plain = RobustnessScorer(model, std, _cfg()).score(events)
    scorer = RobustnessScorer(model, std, _cfg(), control=control)
    assert scorer.control is None
    np.testing.assert_array_equal(scorer.score(events).gamma_logit, plain.gamma_logit)


def test_the_control_map_round_trips_through_json(setting: tuple) -> None:
    model, std, reference, _ = setting
    control = fit_control_map(model, std, reference[:40], radius=RADIUS)
    again = ControlMap.from_json(control.to_json())
    assert again.events == 40 and again.classes == control.classes
    assert again.variance_ratio == pytest.approx(control.variance_ratio, abs=1e-6)
    np.testing.assert_allclose(again.alpha, control.alpha, atol=1e-8)


def test_a_model_with_gamma_zero_everywhere_has_error_zero(tmp_path: Path) -> None:
    path = onnx_graphs.linear_classifier(tmp_path / "flat.onnx", np.zeros((N, 3)), [0.0, 1.0, 0.0])
    model = OnnxModel(path, model_kind="classifier")
    std = Standardizer.identity(N)
    x = np.random.default_rng(1).normal(size=(10, N)).astype(np.float32)
    res = RobustnessScorer(model, std, _cfg()).score(x)
    assert (res.gamma == 0).all() and (res.gamma_logit == 0).all()
    assert (res.gamma_se == 0).all() and (res.gamma_logit_se == 0).all()
    control = fit_control_map(model, std, np.zeros((20, N)), radius=RADIUS)
    fitted = RobustnessScorer(model, std, _cfg(), control=control).score(x)
    assert (fitted.gamma_logit == 0).all() and (fitted.gamma_logit_se == 0).all()


def test_bad_control_maps_are_refused_in_one_line(setting: tuple, tmp_path: Path) -> None:
    model, std, reference, _ = setting
    control = fit_control_map(model, std, reference[:20], radius=RADIUS)
    with pytest.raises(ConfigError, match="evaluates whole: drop the control map"):
        RobustnessScorer(model, std, _cfg(f"hypercube:{2 * N}"), control=control)
    with pytest.raises(ConfigError, match="radius 0.5; this scorer has 300 features and radius 1"):
        RobustnessScorer(model, std, ScoringConfig(ball="hypercube:16", radius=1.0, flicker_copies=0), control=control)
    with pytest.raises(ConfigError, match="at least 16 reference rows .* got 3 of 3"):
        fit_control_map(model, std, reference[:3], radius=RADIUS)
    regressor = OnnxModel(onnx_graphs.linear_regressor(tmp_path / "reg.onnx", np.ones(N)), model_kind="regressor")
    with pytest.raises(ConfigError, match="this model is a regressor"):
        fit_control_map(regressor, std, reference, radius=RADIUS)


def test_control_for_fits_only_where_a_per_event_ball_scores_a_classifier(setting: tuple, tmp_path: Path) -> None:
    _, std, reference, _ = setting
    curved = _model(tmp_path, curved=True)
    assert control_for(curved, std, RADIUS, "auto", reference) is not None  # 300 features: sampled per event
    assert control_for(curved, std, RADIUS, "auto", None) is None  # no reference rows (a warm-up)
    assert control_for(curved, std, RADIUS, "simplex+anti", reference) is None  # a ball evaluated whole
    assert control_for(curved, std, RADIUS, "auto", reference[:5]) is None  # too few rows: the plain sample
    regressor = OnnxModel(onnx_graphs.linear_regressor(tmp_path / "reg.onnx", np.ones(N)), model_kind="regressor")
    assert control_for(regressor, std, RADIUS, "auto", reference) is None


def test_score_with_a_reference_json_uses_the_control_map(setting: tuple, tmp_path: Path) -> None:
    """A reference JSON keeps a sample of its rows: ``score`` fits the map on them, so P_adj (on γ_logit) moves while
    γ on the probability does not; the same rows given as an array (no JSON) score with the plain sample."""
    _, _, reference, events = setting
    path = _model(tmp_path, curved=True).path
    saved = monitor.reference(path, reference, radius=RADIUS, flicker_copies=4, out=tmp_path / "ref.json")
    assert saved.path is not None and saved.reference.feature_sample.shape == (120, N)
    with_map = monitor.score(path, events, saved.path, radius=RADIUS, flicker_copies=4, as_frame=False)
    plain = monitor.score(path, events, reference, radius=RADIUS, flicker_copies=4, as_frame=False)
    np.testing.assert_allclose(with_map.columns["gamma"], plain.columns["gamma"], rtol=1e-6)
    assert not np.allclose(with_map.columns["p_adj"], plain.columns["p_adj"], rtol=1e-6, atol=0)


def test_the_runtime_fits_the_map_on_the_reference_sample_at_activation(setting: tuple, tmp_path: Path) -> None:
    _, std, reference, _ = setting
    model = _model(tmp_path, curved=True)
    settings = ModelSettings.model_validate(
        {"name": "m", "path": str(model.path), "model_kind": "classifier", "scoring": {"radius": RADIUS}}
    )
    rt = ModelRuntime(settings=settings, model=model, control_rows=reference)
    rt.activate(std)
    assert rt.scorer is not None and rt.scorer.control is not None
    rt.control_rows = None  # a warm-up reference keeps no rows: the plain sample
    rt.activate(std)
    assert rt.scorer is not None and rt.scorer.control is None


def test_the_fit_evaluates_an_events_hypercube_in_bounded_blocks(
    setting: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, std, _, events = setting
    model = _model(tmp_path, curved=True)
    whole, klass = second_differences(model, std, events[:3], RADIUS)
    monkeypatch.setattr(control_module, "BLOCK_VALUES", 7 * N)  # 7 rows a call: 2n + 1 = 601 rows in 86 calls
    blocks, klass_blocks = second_differences(model, std, events[:3], RADIUS)
    np.testing.assert_array_equal(blocks, whole)
    np.testing.assert_array_equal(klass_blocks, klass)


def test_a_model_without_logits_keeps_the_plain_sample(tmp_path: Path) -> None:
    """An MLP exposing probabilities alone (skl2onnx): γ_logit is on the log-probability, which saturates, so h_a
    scales with each event's own 1 − P and the class-and-pixel map does not fit; its held-out check refuses it."""
    x, y = make_classification(400, N, n_informative=20, n_classes=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp = MLPClassifier((16,), max_iter=50, random_state=0).fit(x, y)
    model = OnnxModel(onnx_graphs.sklearn_to_onnx(tmp_path / "mlp.onnx", mlp, N, zipmap=False), model_kind="classifier")
    assert not model.has_logits and model.has_proba
    std = Standardizer.fit(x)
    control = fit_control_map(model, std, x[:120], radius=RADIUS)
    assert not control.useful
    assert control_for(model, std, RADIUS, "auto", x[:120]) is None
    plain = RobustnessScorer(model, std, _cfg()).score(x[200:240])
    assert plain.gamma_logit_se is not None and np.isfinite(plain.gamma_logit_se).all()
