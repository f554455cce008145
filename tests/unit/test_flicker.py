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

from monitor.metrics.scorer import (
    BANK_REFRESH_BLOCK,
    BANK_REFRESH_DIVISOR,
    RobustnessScorer,
    ScoringConfig,
    noise_bank_rows,
)
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


# -- the noise bank the copies are drawn from ---------------------------------------------------------------------
def test_noise_bank_size_is_clamped_and_never_below_four_times_the_copies() -> None:
    assert noise_bank_rows(20, 32) == 65536  # 2**22 // 20 = 209,715, capped at 65,536
    assert noise_bank_rows(1000, 32) == 2**22 // 1000
    assert noise_bank_rows(2, COPIES) == 65536 >= 4 * COPIES
    assert noise_bank_rows(1000, COPIES) == 4 * COPIES  # the lower bound wins over 2**22 // n
    assert noise_bank_rows(20, 20000) == 80000  # ... and over the 65,536 cap


def test_flicker_copies_of_one_event_are_distinct_consecutive_bank_rows(linear_classifier_model: OnnxModel) -> None:
    k, b = 64, 5
    scorer = RobustnessScorer(linear_classifier_model, Standardizer.identity(2), ScoringConfig(flicker_copies=k))
    bank = scorer._bank.copy()
    rows = scorer.build_rows(np.zeros((b, 2), dtype=np.float32))  # zero centres: the copies are bank rows exactly
    copies = rows[b * (1 + scorer.ball_size) :].reshape(b, k, 2)
    for event in copies:
        assert np.unique(event, axis=0).shape[0] == k
        (start,) = np.flatnonzero(np.all(bank == event[0], axis=1))
        np.testing.assert_array_equal(bank[start : start + k], event)


def test_noise_bank_is_pre_scaled_by_sigma_and_the_standardizer(linear_classifier_model: OnnxModel) -> None:
    std = Standardizer(mean=np.zeros(2), scale=np.array([2.0, 0.5]))
    scorer = RobustnessScorer(linear_classifier_model, std, ScoringConfig(flicker_copies=32, sigma=SIGMA))
    assert scorer._bank.dtype == np.float32
    np.testing.assert_allclose(scorer._bank.std(axis=0), SIGMA * std.scale, rtol=0.02)
    np.testing.assert_allclose(scorer._bank.mean(axis=0), 0.0, atol=0.02 * SIGMA * std.scale.max())


def test_noise_bank_is_renewed_by_a_64th_of_the_copies_in_blocks(linear_classifier_model: OnnxModel) -> None:
    k, b = 64, 100  # 6,400 copies per call: 100 bank rows owed per call, redrawn once 1,024 are owed
    scorer = RobustnessScorer(linear_classifier_model, Standardizer.identity(2), ScoringConfig(flicker_copies=k))
    x = np.random.default_rng(0).normal(size=(b, 2))
    initial = scorer._bank.copy()
    before = initial
    owed = 0
    for _ in range(scorer._bank.shape[0] // (b * k // BANK_REFRESH_DIVISOR) + 11):
        scorer.score(x)
        owed += b * k // BANK_REFRESH_DIVISOR
        changed = int(np.any(scorer._bank != before, axis=1).sum())
        if owed >= BANK_REFRESH_BLOCK:
            assert changed == owed  # the whole debt at once, contiguous rows round-robin
            owed = 0
        else:
            assert changed == 0
        before = scorer._bank.copy()
    assert np.all(np.any(scorer._bank != initial, axis=1))  # after a bank's worth of owed rows every row was redrawn


def test_one_batch_takes_disjoint_consecutive_bank_rows(linear_classifier_model: OnnxModel) -> None:
    k, b = 16, 40
    scorer = RobustnessScorer(linear_classifier_model, Standardizer.identity(2), ScoringConfig(flicker_copies=k))
    bank = scorer._bank.copy()
    rows = scorer.build_rows(np.zeros((b, 2), dtype=np.float32))
    copies = rows[b * (1 + scorer.ball_size) :]
    (start,) = np.flatnonzero(np.all(bank == copies[0], axis=1))
    np.testing.assert_array_equal(bank[start : start + b * k], copies)  # one block: no row used twice in a batch


def test_a_batch_larger_than_the_bank_gathers_k_rows_per_event(linear_classifier_model: OnnxModel) -> None:
    k = 64
    scorer = RobustnessScorer(linear_classifier_model, Standardizer.identity(2), ScoringConfig(flicker_copies=k))
    b = scorer._bank.shape[0] // k + 1  # B·K > bank rows: each event its own random block of K rows
    bank = scorer._bank.copy()
    copies = scorer.build_rows(np.zeros((b, 2), dtype=np.float32))[b * (1 + scorer.ball_size) :].reshape(b, k, 2)
    for event in copies[:: max(1, b // 50)]:
        (start,) = np.flatnonzero(np.all(bank == event[0], axis=1))
        np.testing.assert_array_equal(bank[start : start + k], event)


def test_scorers_with_the_same_seed_agree_over_a_sequence_of_calls(linear_classifier_model: OnnxModel) -> None:
    config = ScoringConfig(flicker_copies=48, sigma=0.5, seed=11)
    first = RobustnessScorer(linear_classifier_model, Standardizer.identity(2), config)
    second = RobustnessScorer(linear_classifier_model, Standardizer.identity(2), config)
    rng = np.random.default_rng(4)
    for size in (7, 1, 300, 64, 7):
        x = rng.normal(scale=0.3, size=(size, 2))
        a, b = first.score(x), second.score(x)
        for name in ("gamma", "flicker", "p_adj", "gamma_logit", "predicted_class", "probability", "valid"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        assert 0.0 < a.flicker.mean() < 1.0  # the copies really cross the boundary, so flicker is informative
    np.testing.assert_array_equal(first._bank, second._bank)


def test_repeated_calls_draw_new_copies(linear_classifier_model: OnnxModel) -> None:
    scorer = RobustnessScorer(linear_classifier_model, Standardizer.identity(2), ScoringConfig(flicker_copies=32))
    x = np.zeros((4, 2), dtype=np.float32)
    first = scorer.build_rows(x).copy()
    assert not np.array_equal(scorer.build_rows(x), first)
