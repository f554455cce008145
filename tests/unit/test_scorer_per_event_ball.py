"""The per-event sampled hypercube in the scorer: each event's ball moves one feature per point by ±r·s, its axes
come from the seed and the event's values (reproducible in any batch), and γ agrees with a hand computation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from monitor.model.onnx import OnnxModel, OnnxRuntimeOptions
from monitor.model.standardize import Standardizer
from monitor.signals.balls import event_keys, hypercube_axes
from monitor.signals.scorer import RobustnessScorer, ScoringConfig
from tests.unit import onnx_graphs

N = 300  # above the simplex limit: the hypercube is drawn per event


@pytest.fixture
def scorer(tmp_path: Path) -> RobustnessScorer:
    model = OnnxModel(onnx_graphs.logits_network(tmp_path / "net.onnx", N, 3, hidden=8), model_kind="classifier")
    rng = np.random.default_rng(0)
    std = Standardizer.fit(rng.normal(2.0, 3.0, size=(200, N)))
    return RobustnessScorer(model, std, ScoringConfig(ball="hypercube:16", radius=0.5, flicker_copies=0, seed=7))


def rows(seed: int, b: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(2.0, 3.0, size=(b, N)).astype(np.float32)


def test_each_ball_point_moves_one_feature_by_r_times_its_scale(scorer: RobustnessScorer) -> None:
    assert scorer.per_event_ball and scorer.rows_built_in_graph  # its input feeds an affine layer (Gemm)
    x = rows(1, 5)
    built = scorer.build_rows(x)
    ball = built[5 : 5 * 17].reshape(5, 16, N)
    step = (0.5 * scorer.standardizer.scale).astype(np.float32)
    axes = hypercube_axes(event_keys(x, 7), N, 8)
    for e in range(5):
        diff = ball[e] - x[e]
        moved = np.flatnonzero(np.any(diff != 0, axis=0))
        assert sorted(moved.tolist()) == sorted(axes[e].tolist())  # 8 distinct features, each in a ± pair
        for i, a in enumerate(axes[e]):
            assert np.count_nonzero(diff[i]) == 1 and diff[i, a] == pytest.approx(step[a], rel=1e-5)
            assert diff[i + 8, a] == pytest.approx(-step[a], rel=1e-5)
    # events differ in their axes
    assert len({tuple(sorted(a)) for a in axes.tolist()}) == 5


def test_an_event_gets_the_same_ball_and_gamma_in_any_batch(scorer: RobustnessScorer) -> None:
    x = rows(2, 40)
    first = scorer.score(x)
    again = scorer.score(np.concatenate([rows(3, 7), x[::-1]]))
    np.testing.assert_allclose(again.gamma[7:], first.gamma[::-1], rtol=1e-5, atol=1e-7)
    assert np.array_equal(scorer.event_axes(x[3:4]), scorer.event_axes(x)[3:4])


def test_gamma_matches_a_hand_computation_on_the_sampled_axes(scorer: RobustnessScorer) -> None:
    x = rows(4, 6)
    result = scorer.score(x)
    axes = scorer.event_axes(x)
    step = (0.5 * scorer.standardizer.scale).astype(np.float32)
    p = scorer.model.evaluate(x).proba
    assert p is not None
    for e in range(6):
        pts = np.repeat(x[e : e + 1], 16, axis=0)
        pts[np.arange(8), axes[e]] += step[axes[e]]
        pts[np.arange(8, 16), axes[e]] -= step[axes[e]]
        pb = scorer.model.evaluate(pts).proba
        assert pb is not None
        c = int(np.argmax(p[e]))
        assert result.gamma[e] == pytest.approx(abs(p[e, c] - pb[:, c].mean()), rel=1e-4, abs=1e-6)


def test_a_different_seed_draws_other_axes(tmp_path: Path, scorer: RobustnessScorer) -> None:
    other = RobustnessScorer(
        scorer.model, scorer.standardizer, ScoringConfig(ball="hypercube:16", radius=0.5, flicker_copies=0, seed=8)
    )
    x = rows(5, 10)
    assert not np.array_equal(other.event_axes(x), scorer.event_axes(x))


def test_in_graph_ball_agrees_with_rows_built_in_numpy(tmp_path: Path, scorer: RobustnessScorer) -> None:
    numpy_model = OnnxModel(
        onnx_graphs.logits_network(tmp_path / "net2.onnx", N, 3, hidden=8),
        OnnxRuntimeOptions(rows_in_graph=False),
        model_kind="classifier",
    )
    plain = RobustnessScorer(numpy_model, scorer.standardizer, scorer.config)
    assert scorer.rows_built_in_graph and not plain.rows_built_in_graph
    x = rows(6, 300)
    a, b = scorer.score(x), plain.score(x)
    assert np.array_equal(a.predicted_class, b.predicted_class)
    np.testing.assert_allclose(a.gamma, b.gamma, rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(a.p_adj, b.p_adj, rtol=1e-3, atol=1e-6)


def test_a_model_without_an_affine_input_builds_the_per_event_ball_in_numpy(tmp_path: Path) -> None:
    model = OnnxModel(onnx_graphs.polynomial_regressor(tmp_path / "poly.onnx", N, [onnx_graphs.squared_norm(N)]))
    std = Standardizer.identity(N)
    scorer = RobustnessScorer(model, std, ScoringConfig(ball="hypercube:16", radius=0.5, flicker_copies=0))
    assert scorer.per_event_ball and not scorer.rows_built_in_graph
    x = rows(7, 4) * np.float32(0.01)  # small values: float32 keeps r² = 0.25 exact to 1e-4
    # f = ‖x‖²: every ±e_a pair averages to ‖x‖² + r², so γ = r² whichever axes an event draws
    np.testing.assert_allclose(scorer.score(x).gamma, 0.25, rtol=1e-3)
