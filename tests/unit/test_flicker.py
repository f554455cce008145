"""Stability flicker against its closed form on linear ONNX models.

For a linear classifier with score s(x) = w·x + b, a copy x + σ·S·ε (S = diag of the standardizer's scale,
ε ~ N(0, I)) has score s(x) + σ·(w⊙S)·ε ~ N(s(x), σ²‖w⊙S‖²), so it lands on the other side of the boundary
with probability Φ(−|s(x)| / (σ‖w⊙S‖)) — with the identity standardizer, Φ(−dist/σ) for the geometric distance
dist = |s|/‖w‖. The scorer's estimate over K copies is a binomial proportion: it must match within 4 standard
errors (plus a 1/K floor for probabilities near 0). A regressor's copy flips when its output moves by more than
``regression_tolerance`` times the output's reference IQR.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy.stats import norm

from monitor.model.onnx import OnnxModel
from monitor.model.standardize import Standardizer
from monitor.signals.scorer import (
    BANK_REFRESH_BLOCK,
    BANK_REFRESH_DIVISOR,
    RobustnessScorer,
    ScoringConfig,
    noise_bank_rows,
    output_scale,
)
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
    # y = w·x: Δy = σ·w·ε ~ N(0, σ²‖w‖²), so P(|Δy| > τ·IQR) = 2·Φ(−τ·IQR / (σ‖w‖)) at every point
    w = np.array([0.5, -1.0, 2.0])
    model = OnnxModel(onnx_graphs.linear_regressor(tmp_path / "lin.onnx", w, 1.0))
    x = np.random.default_rng(0).uniform(-1.0, 1.0, (4, 3))
    config = ScoringConfig(flicker_copies=COPIES, sigma=SIGMA, seed=5, regression_tolerance=tolerance)
    scorer = RobustnessScorer(model, Standardizer.identity(3), config)
    assert scorer.output_scale is not None
    flicker = scorer.score(x).flicker
    expected = np.full(4, 2.0 * norm.cdf(-tolerance * scorer.output_scale[0] / (SIGMA * np.linalg.norm(w))))
    np.testing.assert_array_less(np.abs(flicker - expected), _binomial_tolerance(expected, COPIES))


# -- regressors: a tolerance relative to the output's reference IQR -----------------------------------------------
#: 2Φ(−1.349·τ/σ): the flicker of any exactly linear regressor at tolerance τ and noise σ (module docstring of
#: monitor.signals.scorer.output_scale); 1.349 = the IQR of N(0, 1)
IQR_OF_A_STANDARD_NORMAL = 2.0 * norm.ppf(0.75)


def _sklearn_linear_regression(tmp_path: Path) -> tuple[OnnxModel, NDArray[np.float64]]:
    """scikit-learn's LinearRegression on 3 features of very different scales, y exactly linear; and its rows."""
    from sklearn.linear_model import LinearRegression

    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, 3)) * np.array([1.0, 10.0, 100.0]) + np.array([0.0, 50.0, -300.0])
    y = x @ np.array([3.0, -0.5, 0.02]) + 4.0
    estimator = LinearRegression().fit(x, y)
    return OnnxModel(onnx_graphs.sklearn_to_onnx(tmp_path / "linreg.onnx", estimator, 3)), x


def test_flicker_of_an_exactly_linear_regressor_is_near_zero_with_the_defaults(tmp_path: Path) -> None:
    # with an absolute tolerance of 0.1 in the output's units, mean flicker was 0.60-0.74
    model, x = _sklearn_linear_regression(tmp_path)
    flicker = RobustnessScorer(model, Standardizer.fit(x), ScoringConfig()).score(x).flicker
    expected = 2.0 * norm.cdf(-IQR_OF_A_STANDARD_NORMAL * 0.1 / 0.05)  # 0.0070
    assert flicker.mean() < 0.02, f"mean flicker {flicker.mean():.3f}; expected about {expected:.4f}"


def test_flicker_of_a_linear_regressor_does_not_depend_on_its_weights(tmp_path: Path) -> None:
    # Δy / IQR = σ·(w⊙s)·ε / (1.349‖w⊙s‖): the same distribution for every w, so the same closed form
    x = np.random.default_rng(1).normal(size=(300, 4))
    std = Standardizer(mean=np.array([1.0, -2.0, 0.0, 5.0]), scale=np.array([0.5, 3.0, 1.0, 20.0]))
    config = ScoringConfig(flicker_copies=256, sigma=0.05, regression_tolerance=0.05, seed=2)
    expected = 2.0 * norm.cdf(-IQR_OF_A_STANDARD_NORMAL * 0.05 / 0.05)  # 0.177
    for i, w in enumerate(([1.0, 0.0, 0.0, 0.0], [0.1, -4.0, 2.0, 0.01], [300.0, 300.0, -300.0, 1.0])):
        model = OnnxModel(onnx_graphs.linear_regressor(tmp_path / f"lin{i}.onnx", w, 7.0))
        flicker = RobustnessScorer(model, std, config).score(std.to_raw(x)).flicker.mean()
        # 76,800 copies; the IQR is measured on 2,048 rows (±3 %), which moves the tail by up to ±0.015
        assert abs(flicker - expected) < 0.025, (w, flicker, expected)


def test_flicker_of_a_regressor_does_not_depend_on_its_output_units(tmp_path: Path) -> None:
    x = np.random.default_rng(2).uniform(-1.0, 1.0, (50, 3))
    config = ScoringConfig(flicker_copies=64, sigma=0.3, seed=4)
    flickers = []
    for units in (1.0, 1000.0):
        poly = tuple((units * c, powers) for c, powers in onnx_graphs.squared_norm(3))
        model = OnnxModel(onnx_graphs.polynomial_regressor(tmp_path / f"norm{units}.onnx", 3, [poly]))
        flickers.append(RobustnessScorer(model, Standardizer.identity(3), config).score(x).flicker)
    assert 0.05 < flickers[0].mean() < 0.95  # informative: the copies of a curved model do move it
    np.testing.assert_allclose(flickers[1], flickers[0], atol=1.0 / 64 + 1e-12)  # a float32 tie at most


def test_flicker_of_a_multi_output_regressor_judges_each_output_on_its_own_scale(tmp_path: Path) -> None:
    # the outputs (y, 1000·y) move by the same fraction of their own IQR: the RMS of the two is that fraction, so
    # the pair flickers exactly as y alone
    x = np.random.default_rng(3).normal(size=(40, 2))
    w = np.array([[1.0, 1000.0], [-2.0, -2000.0]])
    config = ScoringConfig(flicker_copies=128, sigma=0.05, regression_tolerance=0.05, seed=6)
    pair = OnnxModel(onnx_graphs.linear_regressor(tmp_path / "pair.onnx", w))
    single = OnnxModel(onnx_graphs.linear_regressor(tmp_path / "single.onnx", w[:, 0]))
    both = RobustnessScorer(pair, Standardizer.identity(2), config)
    alone = RobustnessScorer(single, Standardizer.identity(2), config)
    assert both.output_scale is not None and alone.output_scale is not None
    np.testing.assert_allclose(both.output_scale, alone.output_scale[0] * np.array([1.0, 1000.0]), rtol=1e-5)
    np.testing.assert_allclose(both.score(x).flicker, alone.score(x).flicker, atol=1.0 / 128 + 1e-12)


def test_output_scale_is_the_output_iqr_over_the_standardizers_reference(tmp_path: Path) -> None:
    w = np.array([2.0, -0.5, 0.0])
    std = Standardizer(mean=np.array([10.0, 0.0, 3.0]), scale=np.array([0.5, 4.0, 100.0]))
    model = OnnxModel(onnx_graphs.linear_regressor(tmp_path / "lin.onnx", w, 3.0))
    scale = output_scale(model, std, seed=0)
    np.testing.assert_allclose(scale, IQR_OF_A_STANDARD_NORMAL * np.linalg.norm(w * std.scale), rtol=0.06)
    np.testing.assert_array_equal(output_scale(model, std, seed=0), scale)  # seeded


def test_output_scale_of_a_constant_output_falls_back_to_one(tmp_path: Path) -> None:
    model = OnnxModel(onnx_graphs.linear_regressor(tmp_path / "flat.onnx", [0.0, 0.0], 4.0))
    np.testing.assert_array_equal(output_scale(model, Standardizer.identity(2)), [1.0])


def test_scorer_has_no_output_scale_for_a_classifier_or_without_copies(
    linear_classifier_model: OnnxModel, norm_regressor_model: OnnxModel
) -> None:
    assert RobustnessScorer(linear_classifier_model, Standardizer.identity(2)).flicker_tolerance is None
    no_copies = ScoringConfig(flicker_copies=0)
    assert RobustnessScorer(norm_regressor_model, Standardizer.identity(3), no_copies).flicker_tolerance is None


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
        for name in ("gamma", "flicker", "p_adj", "gamma_logit", "predicted_class", "probability", "margin", "valid"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        assert 0.0 < a.flicker.mean() < 1.0  # the copies really cross the boundary, so flicker is informative
    np.testing.assert_array_equal(first._bank, second._bank)


def test_repeated_calls_draw_new_copies(linear_classifier_model: OnnxModel) -> None:
    scorer = RobustnessScorer(linear_classifier_model, Standardizer.identity(2), ScoringConfig(flicker_copies=32))
    x = np.zeros((4, 2), dtype=np.float32)
    first = scorer.build_rows(x).copy()
    assert not np.array_equal(scorer.build_rows(x), first)
