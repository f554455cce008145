"""γ-ascent adversarial search (seed 001 Algorithm 2) on real tiny ONNX classifiers.

The 1-D walk-through: class 1 iff x > 0.28, r = 0.1, output "label", ball simplex+anti = {+1, −1, −1, +1}.
From x = 0.12 the candidates are 0.22 (its ball {0.32, 0.12} straddles the boundary: γ = 0.5) and 0.02 (γ = 0),
so the search moves to 0.22; then to 0.32 (γ = 0.5, class 1) rather than 0.12 (γ = 0): the class flips at step 2.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from monitor.errors import ConfigError
from monitor.model.onnx import OnnxModel
from monitor.model.standardize import Standardizer
from monitor.signals.adversarial import gamma_ascent_search
from monitor.signals.balls import ball_directions
from monitor.signals.scorer import RobustnessScorer, ScoringConfig
from tests.unit import onnx_graphs

LABEL_CONFIG = ScoringConfig(radius=0.1, ball="simplex+anti", output="label")


@pytest.fixture
def step_classifier(tmp_path: Path) -> OnnxModel:
    """1-D: logit1 − logit0 = x − 0.28."""
    return OnnxModel(onnx_graphs.linear_classifier(tmp_path / "step.onnx", [[0.0, 1.0]], [0.0, -0.28]))


def test_gamma_ascent_search_walks_to_the_boundary_and_flips(step_classifier: OnnxModel) -> None:
    result = gamma_ascent_search(
        step_classifier, Standardizer.identity(1), np.array([[0.12]]), steps=2, config=LABEL_CONFIG
    )
    assert (result.flip_step.tolist(), result.start_class.tolist(), result.end_class.tolist()) == ([2], [0], [1])
    np.testing.assert_allclose(result.final_points, [[0.32]], atol=1e-12)
    np.testing.assert_allclose(result.gamma_path, [[0.5, 0.5]])


def test_gamma_ascent_search_keeps_the_first_flip_step_after_flipping_back(step_classifier: OnnxModel) -> None:
    # from 0.32 the largest γ is back at 0.22 (class 0): the reported step is still the first change
    result = gamma_ascent_search(
        step_classifier, Standardizer.identity(1), np.array([[0.12]]), steps=3, config=LABEL_CONFIG
    )
    assert (result.flip_step.tolist(), result.end_class.tolist()) == ([2], [0])
    assert not result.stable[0]


def test_gamma_ascent_search_reports_stable_far_from_the_boundary(step_classifier: OnnxModel) -> None:
    x = np.array([[-2.0], [3.0]])
    result = gamma_ascent_search(step_classifier, Standardizer.identity(1), x, steps=4, config=LABEL_CONFIG)
    assert result.flip_step.tolist() == [-1, -1] and result.stable.all()
    np.testing.assert_array_equal(result.end_class, result.start_class)
    np.testing.assert_array_equal(result.gamma_path, 0.0)


def test_gamma_ascent_search_one_step_moves_to_the_ball_point_of_largest_gamma(
    curved_classifier_model: OnnxModel,
) -> None:
    x = np.random.default_rng(0).uniform(-2.0, 2.0, (5, 2))
    config = ScoringConfig(radius=0.3, ball="simplex+anti")
    result = gamma_ascent_search(curved_classifier_model, Standardizer.identity(2), x, steps=1, config=config)
    candidates = x[:, None, :] + (0.3 * ball_directions("simplex+anti", 2)).astype(np.float32)[None, :, :]
    scorer = RobustnessScorer(
        curved_classifier_model, Standardizer.identity(2), ScoringConfig(radius=0.3, flicker_copies=0)
    )
    gamma = scorer.score(candidates.reshape(-1, 2)).gamma.reshape(5, -1)
    np.testing.assert_allclose(result.final_points, candidates[np.arange(5), gamma.argmax(axis=1)], atol=1e-12)
    np.testing.assert_allclose(result.gamma_path[:, 0], gamma.max(axis=1), rtol=1e-6)


def test_gamma_ascent_search_steps_are_radius_times_scale(curved_classifier_model: OnnxModel) -> None:
    # every step moves by r·s⊙v in raw units, so N steps stay within N·r standardized units of the start
    std = Standardizer(mean=np.array([0.5, -0.5]), scale=np.array([2.0, 0.25]))
    x = np.random.default_rng(1).uniform(-1.0, 1.0, (6, 2))
    result = gamma_ascent_search(curved_classifier_model, std, x, steps=5, config=ScoringConfig(radius=0.2))
    travelled = np.linalg.norm((result.final_points - x) / std.scale, axis=1)
    assert np.all(travelled <= 5 * 0.2 + 1e-6)


def test_gamma_ascent_search_counts_model_rows(step_classifier: OnnxModel) -> None:
    # start: B·(1 + m) rows; each step: B·m candidates, each with its own ball
    result = gamma_ascent_search(
        step_classifier, Standardizer.identity(1), np.zeros((3, 1)), steps=4, config=LABEL_CONFIG
    )
    m = 4
    assert result.evaluations == 3 * (1 + m) + 4 * 3 * m * (1 + m)


def test_gamma_ascent_search_ignores_flicker_settings(step_classifier: OnnxModel) -> None:
    config = ScoringConfig(radius=0.1, ball="simplex+anti", output="label", flicker_copies=50)
    result = gamma_ascent_search(step_classifier, Standardizer.identity(1), np.array([[0.12]]), steps=2, config=config)
    assert result.evaluations == (1 + 4) + 2 * 4 * (1 + 4)


def test_gamma_ascent_search_never_flips_a_regressor(tmp_path: Path) -> None:
    model = OnnxModel(onnx_graphs.polynomial_regressor(tmp_path / "cubic.onnx", 2, [onnx_graphs.CUBIC_HARMONIC]))
    result = gamma_ascent_search(model, Standardizer.identity(2), np.ones((2, 2)), steps=3)
    assert result.stable.all() and result.start_class.tolist() == [-1, -1]


def test_gamma_ascent_search_rejects_zero_steps(step_classifier: OnnxModel) -> None:
    with pytest.raises(ConfigError, match="steps must be >= 1; got 0"):
        gamma_ascent_search(step_classifier, Standardizer.identity(1), np.zeros((1, 1)), steps=0)


def test_gamma_ascent_search_rejects_non_finite_points(step_classifier: OnnxModel) -> None:
    with pytest.raises(ConfigError, match=r"points must be a finite \(B, n\) array; got shape \(2, 1\)"):
        gamma_ascent_search(step_classifier, Standardizer.identity(1), np.array([[0.0], [np.nan]]), steps=1)


# -- at high dimension: the per-point sampled hypercube at a raw-unit radius ---------------------------------------
def test_search_on_images_moves_one_pixel_per_step_by_the_raw_radius(tmp_path: Path) -> None:
    n = 400  # a 20×20 "image", raw 0–255 units: above the simplex limit, so each point samples its own hypercube
    model = OnnxModel(
        onnx_graphs.logits_network(tmp_path / "img.onnx", n, 4, hidden=8, seed=3), model_kind="classifier"
    )
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 255, size=(6, n))
    config = ScoringConfig(radius=100.0, ball="hypercube:16", output="logit", seed=5)
    std = Standardizer.identity(n)
    result = gamma_ascent_search(model, std, images, steps=5, config=config)
    moved = result.final_points - images
    changed = np.count_nonzero(moved, axis=1)
    assert np.all(changed <= 5) and np.all(changed >= 1)
    steps_taken = np.abs(moved[moved != 0]) / 100.0
    assert np.allclose(steps_taken, np.round(steps_taken)) and steps_taken.min() > 0.5  # whole ±100 pixel moves
    assert result.gamma_path.shape == (6, 5) and np.all(np.isfinite(result.gamma_path))
    # each step's candidates are the current point's own sample: 16 candidates with 17 rows each, per image
    assert result.evaluations == 6 * 17 + 5 * 6 * 16 * 17
    again = gamma_ascent_search(model, std, images, steps=5, config=config)
    assert np.array_equal(again.final_points, result.final_points)
    assert np.array_equal(again.flip_step, result.flip_step)
    assert set(np.unique(result.flip_step).tolist()) <= {-1, 1, 2, 3, 4, 5}
    stable = result.flip_step < 0
    assert np.array_equal(result.end_class[stable], result.start_class[stable])
