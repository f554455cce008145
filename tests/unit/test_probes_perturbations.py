"""Perturbation types τ, the registry, probe targets, the row counter and the probe session."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from monitor.errors import ConfigError, ProbeError
from monitor.model.standardize import Standardizer
from monitor.probes.perturbations import (
    PERTURBATION_NAMES,
    PERTURBATIONS,
    BudgetExhaustedError,
    CountingPredictor,
    FeatureDropout,
    FeatureShift,
    GammaAscent,
    GaussianNoise,
    PerturbationContext,
    ProbeSession,
    Quantize,
    RawScale,
    make_perturbation,
    probe_targets,
)
from monitor.signals.balls import ball_directions
from tests.unit.test_probes_models import binary_linear


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_registry_holds_every_spec_type_in_order() -> None:
    assert tuple(PERTURBATIONS) == PERTURBATION_NAMES
    assert PERTURBATION_NAMES == ("noise", "shift", "dropout", "scale", "quantize", "gamma_ascent")


def test_make_perturbation_rejects_an_unknown_name() -> None:
    context = PerturbationContext(Standardizer.identity(2))
    with pytest.raises(ConfigError, match="perturbation 'blur' is not one of noise, shift"):
        make_perturbation("blur", context)


def test_gamma_ascent_needs_the_model() -> None:
    with pytest.raises(ConfigError, match="'gamma_ascent' needs the model"):
        make_perturbation("gamma_ascent", PerturbationContext(Standardizer.identity(2)))


def test_negative_intensity_is_rejected() -> None:
    with pytest.raises(ProbeError, match="finite number >= 0; got -0.1"):
        GaussianNoise().apply(np.zeros((1, 2)), -0.1, _rng())


def test_noise_has_standard_deviation_eps() -> None:
    moved = GaussianNoise().apply(np.zeros((20000, 3)), 0.3, _rng())
    assert abs(moved.std() - 0.3) < 0.01 and abs(moved.mean()) < 0.01


def test_noise_draws_are_coupled_across_intensities() -> None:
    x = np.ones((5, 3))
    small = GaussianNoise().apply(x, 0.1, _rng(7)) - x
    large = GaussianNoise().apply(x, 0.4, _rng(7)) - x
    np.testing.assert_allclose(large, 4.0 * small)


@pytest.mark.parametrize("sign", [1, -1])
def test_shift_moves_exactly_one_feature_by_eps(sign: int) -> None:
    x = _rng().normal(size=(4, 3))
    out = FeatureShift(feature=2, sign=sign).apply(x, 0.25, _rng())
    np.testing.assert_allclose(out[:, :2], x[:, :2])
    np.testing.assert_allclose(out[:, 2], x[:, 2] + sign * 0.25)


def test_random_shift_moves_one_feature_per_point() -> None:
    x = np.zeros((50, 4))
    moved = FeatureShift().apply(x, 0.5, _rng())
    assert np.all(np.count_nonzero(moved, axis=1) == 1)
    assert set(np.abs(moved).sum(axis=1).round(12).tolist()) == {0.5}


def test_shift_rejects_a_feature_out_of_range() -> None:
    with pytest.raises(ProbeError, match="index 5 is out of range for points with 3 features"):
        FeatureShift(feature=5).apply(np.zeros((1, 3)), 0.1, _rng())


def test_dropout_drops_a_fraction_eps_with_nested_masks() -> None:
    x = np.ones((400, 10))
    drop = FeatureDropout(fill=np.zeros(10))
    low = drop.apply(x, 0.3, _rng(3)) == 0
    high = drop.apply(x, 0.6, _rng(3)) == 0
    assert abs(low.mean() - 0.3) < 0.03 and abs(high.mean() - 0.6) < 0.03
    assert np.all(high[low])  # every feature dropped at 0.3 is dropped at 0.6
    assert np.all(drop.apply(x, 5.0, _rng()) == 0)  # ε is clipped to 1


def test_dropout_writes_the_reference_mean() -> None:
    standardizer = Standardizer(mean=np.array([10.0, -4.0]), scale=np.array([2.0, 0.5]))
    default = PerturbationContext(standardizer)
    out = make_perturbation("dropout", default).apply(np.ones((1, 2)), 1.0, _rng())
    np.testing.assert_allclose(standardizer.to_raw(out), [[10.0, -4.0]])  # mean = 0 standardized
    given = PerturbationContext(Standardizer.identity(2), fill=np.array([3.0, 4.0]))
    out = make_perturbation("dropout", given).apply(np.zeros((1, 2)), 1.0, _rng())
    np.testing.assert_allclose(out, [[3.0, 4.0]])


def test_scale_multiplies_raw_values_by_one_plus_or_minus_eps() -> None:
    standardizer = Standardizer(mean=np.array([100.0, 5.0]), scale=np.array([10.0, 2.0]))
    raw = np.array([[120.0, 4.0], [90.0, 8.0]])
    out = RawScale(standardizer=standardizer).apply(standardizer.to_standardized(raw), 0.2, _rng())
    ratio = standardizer.to_raw(out) / raw
    assert np.all(np.isclose(ratio, 1.2) | np.isclose(ratio, 0.8))


def test_quantize_rounds_to_the_grid_and_is_the_identity_at_zero() -> None:
    x = np.array([[0.26, -0.74, 1.01]])
    np.testing.assert_allclose(Quantize().apply(x, 0.5, _rng()), [[0.5, -0.5, 1.0]])
    np.testing.assert_allclose(Quantize().apply(x, 0.0, _rng()), x)


def test_probe_targets_expand_shift_into_one_target_per_feature_with_both_signs() -> None:
    targets = probe_targets(["noise", "shift", "quantize"], PerturbationContext(Standardizer.identity(3)))
    assert [t.key for t in targets] == ["noise", "shift[0]", "shift[1]", "shift[2]", "quantize"]
    assert [m.key for m in targets[2].members] == ["shift[1]+", "shift[1]-"]


def test_gamma_ascent_moves_eps_along_a_ball_direction_and_caches_it(tmp_path: Path) -> None:
    model = CountingPredictor(binary_linear(tmp_path / "m.onnx", [2.0, -1.0, 0.5]))
    standardizer = Standardizer.identity(3)
    tau = GammaAscent(model, standardizer, radius=0.1, ball="simplex+anti")
    x = _rng().normal(size=(5, 3))
    out = tau.apply(x, 0.3, _rng())
    m = ball_directions("simplex+anti", 3).shape[0]
    assert model.rows == tau.direction_rows(5) == 5 * m * (1 + m)
    np.testing.assert_allclose(np.linalg.norm(out - x, axis=1), 0.3)
    units = (out - x) / 0.3
    assert all(np.any(np.all(np.isclose(u, tau.directions), axis=1)) for u in units)
    tau.apply(x, 0.7, _rng())
    assert model.rows == tau.direction_rows(5)  # cached: the direction does not depend on ε


def test_counting_predictor_refuses_rows_beyond_the_budget(tmp_path: Path) -> None:
    model = CountingPredictor(binary_linear(tmp_path / "m.onnx", [1.0, 1.0]), budget_rows=10)
    model.evaluate(np.zeros((8, 2), dtype=np.float32))
    with pytest.raises(BudgetExhaustedError, match="budget of 10 model rows exhausted: 8 used, the next evaluation"):
        model.evaluate(np.zeros((3, 2), dtype=np.float32))
    assert (model.rows, model.calls) == (8, 1)


def test_session_counts_rows_and_caches_perturbed_outputs(tmp_path: Path) -> None:
    model = binary_linear(tmp_path / "m.onnx", [1.0, -1.0])
    session = ProbeSession(model, Standardizer.identity(2), _rng().normal(size=(6, 2)))
    assert session.evaluations == 6  # the clean points
    noise = GaussianNoise()
    first = session.outputs(noise, 0.2)
    assert session.evaluations == 12
    assert session.outputs(noise, 0.2) is first and session.evaluations == 12
    session.outputs(noise, 0.2, draw=1)
    assert session.evaluations == 18
    assert session.outputs(noise, 0.0) is session.clean


def test_session_rejects_points_of_the_wrong_width(tmp_path: Path) -> None:
    model = binary_linear(tmp_path / "m.onnx", [1.0, -1.0])
    with pytest.raises(ProbeError, match=r"non-empty \(B, 2\) array for this model; got shape \(3, 3\)"):
        ProbeSession(model, Standardizer.identity(2), np.zeros((3, 3)))


def test_session_rejects_non_finite_points(tmp_path: Path) -> None:
    model = binary_linear(tmp_path / "m.onnx", [1.0, -1.0])
    with pytest.raises(ProbeError, match="1 of 2 probe points contain NaN"):
        ProbeSession(model, Standardizer.identity(2), np.array([[0.0, 1.0], [np.nan, 0.0]]))
