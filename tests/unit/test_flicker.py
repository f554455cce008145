"""Stability flicker (SPEC §3) against its closed form on linear ONNX models.

For a linear classifier with score s(x) = w·x + b, a copy x + σ·S·ε (S = diag of the standardizer's scale,
ε ~ N(0, I)) has score s(x) + σ·(w⊙S)·ε ~ N(s(x), σ²‖w⊙S‖²), so it lands on the other side of the boundary
with probability Φ(−|s(x)| / (σ‖w⊙S‖)) — with the identity standardizer, Φ(−dist/σ) for the geometric distance
dist = |s|/‖w‖. The scorer's estimate over K copies is a binomial proportion: it must match within 4 standard
errors (plus a 1/K floor for probabilities near 0).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy.stats import norm

from monitor.metrics.scorer import RobustnessScorer, ScoringConfig
from monitor.model.onnx import OnnxModel
from monitor.model.standardize import Standardizer
from tests.unit import onnx_graphs

COPIES = 4000
SIGMA = 0.1
#: the fixture's classifier: logit1 − logit0 = x1 − x2 + 0.2
W = np.array([1.0, -1.0])
B = 0.2
#: signed scores s(x) of the test events (class 1 when s > 0)
SCORES = np.array([0.02, -0.05, 0.1, -0.2, 0.35, -0.6])


def _events_at_scores(scores: NDArray[np.float64]) -> NDArray[np.float64]:
    """Points whose score is exactly ``scores``: a point on the boundary moved along w."""
    on_boundary = np.array([0.4, 0.6])  # 0.4 − 0.6 + 0.2 = 0
    return on_boundary + np.outer(scores / (W @ W), W)


def _binomial_tolerance(p: NDArray[np.float64], copies: int) -> NDArray[np.float64]:
    return 4.0 * np.sqrt(p * (1.0 - p) / copies) + 1.0 / copies


def test_flicker_matches_the_gaussian_crossing_probability(linear_classifier_model: OnnxModel) -> None:
    x = _events_at_scores(SCORES)
    scorer = RobustnessScorer(
        linear_classifier_model, Standardizer.identity(2), ScoringConfig(flicker_copies=COPIES, sigma=SIGMA, seed=7)
    )
    flicker = scorer.score(x).flicker
    expected = norm.cdf(-np.abs(SCORES) / (SIGMA * np.linalg.norm(W)))
    np.testing.assert_array_less(np.abs(flicker - expected), _binomial_tolerance(expected, COPIES))


def test_flicker_noise_is_scaled_by_the_standardizer(linear_classifier_model: OnnxModel) -> None:
    x = _events_at_scores(SCORES)
    std = Standardizer(mean=np.array([5.0, -3.0]), scale=np.array([2.0, 0.5]))
    scorer = RobustnessScorer(linear_classifier_model, std, ScoringConfig(flicker_copies=COPIES, sigma=SIGMA, seed=8))
    flicker = scorer.score(x).flicker
    expected = norm.cdf(-np.abs(SCORES) / (SIGMA * np.linalg.norm(W * std.scale)))
    np.testing.assert_array_less(np.abs(flicker - expected), _binomial_tolerance(expected, COPIES))


def test_flicker_is_zero_far_from_the_boundary(linear_classifier_model: OnnxModel) -> None:
    x = _events_at_scores(np.array([3.0, -4.0]))  # > 20 σ‖w‖ away
    scorer = RobustnessScorer(linear_classifier_model, Standardizer.identity(2), ScoringConfig(flicker_copies=256))
    np.testing.assert_array_equal(scorer.score(x).flicker, 0.0)


def test_flicker_is_nan_without_copies(linear_classifier_model: OnnxModel) -> None:
    scorer = RobustnessScorer(linear_classifier_model, Standardizer.identity(2), ScoringConfig(flicker_copies=0))
    assert np.isnan(scorer.score(_events_at_scores(SCORES)).flicker).all()


def test_flicker_is_reproducible_for_a_seed(linear_classifier_model: OnnxModel) -> None:
    x = _events_at_scores(SCORES)
    config = ScoringConfig(flicker_copies=64, sigma=SIGMA, seed=3)
    first = RobustnessScorer(linear_classifier_model, Standardizer.identity(2), config).score(x).flicker
    second = RobustnessScorer(linear_classifier_model, Standardizer.identity(2), config).score(x).flicker
    np.testing.assert_array_equal(first, second)


def test_flicker_differs_across_seeds(linear_classifier_model: OnnxModel) -> None:
    x = _events_at_scores(SCORES)
    a = RobustnessScorer(linear_classifier_model, Standardizer.identity(2), ScoringConfig(flicker_copies=64, seed=1))
    b = RobustnessScorer(linear_classifier_model, Standardizer.identity(2), ScoringConfig(flicker_copies=64, seed=2))
    assert not np.array_equal(a.score(x).flicker, b.score(x).flicker)


@pytest.mark.parametrize("tolerance", [0.05, 0.15, 0.3])
def test_regressor_flicker_matches_the_gaussian_tail_beyond_the_tolerance(tmp_path: Path, tolerance: float) -> None:
    # y = w·x: Δy = σ·w·ε ~ N(0, σ²‖w‖²), so P(|Δy| > tol) = 2·Φ(−tol / (σ‖w‖)) at every point
    w = np.array([0.5, -1.0, 2.0])
    model = OnnxModel(onnx_graphs.linear_regressor(tmp_path / "lin.onnx", w, 1.0))
    x = np.random.default_rng(0).uniform(-1.0, 1.0, (4, 3))
    config = ScoringConfig(flicker_copies=COPIES, sigma=SIGMA, seed=5, regression_tolerance=tolerance)
    flicker = RobustnessScorer(model, Standardizer.identity(3), config).score(x).flicker
    expected = np.full(4, 2.0 * norm.cdf(-tolerance / (SIGMA * np.linalg.norm(w))))
    np.testing.assert_array_less(np.abs(flicker - expected), _binomial_tolerance(expected, COPIES))
