"""Threshold search: the bisection on any P(ε), the seed's worked example, and closed forms on a linear classifier."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from monitor.errors import ProbeError
from monitor.model.standardize import Standardizer
from monitor.probes.mri import open_session
from monitor.probes.threshold import bisect_threshold, bisection_steps, threshold_profile
from tests.unit.test_probes_models import binary_linear

#: seed 000, worked example "Profiling a Diagnostic AI", stage 3: accuracy P(ε) along the pediatric-neurology axis
SEED_TABLE: tuple[tuple[float, float], ...] = (
    (0.0, 0.93),
    (0.5, 0.81),
    (0.625, 0.74),
    (0.656, 0.73),
    (0.6875, 0.71),
    (0.75, 0.68),
)


@pytest.fixture
def seed_curve() -> Callable[[float], float]:
    """The seed's table as P(ε), linearly interpolated (flat beyond the last row)."""
    xs, ys = (np.array(col) for col in zip(*SEED_TABLE, strict=True))

    def p_of(eps: float) -> float:
        return float(np.interp(eps, xs, ys))

    return p_of


def test_bisection_lands_on_the_seed_worked_example(seed_curve: Callable[[float], float]) -> None:
    result = bisect_threshold(seed_curve, delta=0.20, eps_max=1.0, eta=0.01)
    assert result.eps_star is not None
    assert abs(result.eps_star - 0.66) <= 0.02
    assert result.p0 == pytest.approx(0.93) and result.limit == pytest.approx(0.73)
    assert result.eps_high is not None and result.eps_high - result.eps_low <= 0.01
    # the seed's own probes: 0.5 is above the limit, 0.75 below
    assert seed_curve(0.5) >= result.limit > seed_curve(0.75)
    assert result.calls == 2 + bisection_steps(1.0, 0.01)


def test_bisection_reports_none_when_never_crossed(seed_curve: Callable[[float], float]) -> None:
    result = bisect_threshold(seed_curve, delta=0.30, eps_max=1.0, eta=0.01)  # limit 0.63 < min P = 0.68
    assert result.eps_star is None and not result.crossed
    assert result.calls == 2  # P(0) and P(ε_max) only


@pytest.mark.parametrize("crossing", [0.05, 0.31, 0.77, 0.999])
def test_bisection_is_within_eta_of_a_step_crossing(crossing: float) -> None:
    result = bisect_threshold(lambda e: 1.0 if e < crossing else 0.0, delta=0.5, eps_max=1.0, eta=0.004)
    assert result.eps_star is not None and abs(result.eps_star - crossing) <= 0.004


def test_a_crossed_hint_shrinks_the_bracket_and_saves_calls() -> None:
    def curve(e: float) -> float:
        return 1.0 - 3.0 * e

    plain = bisect_threshold(curve, delta=0.3, eps_max=1.0, eta=0.001)
    hinted = bisect_threshold(curve, delta=0.3, eps_max=1.0, eta=0.001, p0=1.0, hint=(0.2, curve(0.2)))
    assert plain.eps_star is not None and hinted.eps_star is not None
    assert abs(plain.eps_star - 0.1) <= 0.001 and abs(hinted.eps_star - 0.1) <= 0.001
    assert hinted.calls == bisection_steps(0.2, 0.001) < plain.calls


@pytest.mark.parametrize(
    ("delta", "eps_max", "eta", "message"),
    [
        (0.0, 1.0, 0.01, "δ .* must be a finite number > 0; got 0.0"),
        (0.2, -1.0, 0.01, "ε_max must be a finite number > 0; got -1.0"),
        (0.2, 1.0, 2.0, "η .* must be > 0 and below ε_max = 1.0; got 2.0"),
        (0.2, 1.0, math.nan, "η .* got nan"),
    ],
)
def test_bisection_rejects_bad_parameters(delta: float, eps_max: float, eta: float, message: str) -> None:
    with pytest.raises(ProbeError, match=message):
        bisect_threshold(lambda e: 1.0, delta=delta, eps_max=eps_max, eta=eta)


def test_bisection_rejects_a_non_finite_curve() -> None:
    with pytest.raises(ProbeError, match="P\\(ε\\) must be finite"):
        bisect_threshold(lambda e: math.nan, delta=0.1, eps_max=1.0, eta=0.1)


# -- closed forms on a real ONNX linear classifier ---------------------------------------------------------------
W = np.array([2.0, -0.5, 0.0, 1.25], dtype=np.float32)
C = 0.25


def _points_with_margins(margins: np.ndarray, seed: int) -> np.ndarray:
    """Float32-exact points x with w·x + c = ±margin (alternating sides)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(len(margins), W.size))
    signs = np.where(np.arange(len(margins)) % 2 == 0, 1.0, -1.0)
    # move along w so that the logit hits the target exactly (up to float32 rounding, measured below)
    logit = x @ W + C
    x = x + ((signs * margins - logit) / (W @ W))[:, None] * W[None, :]
    out: np.ndarray = x.astype(np.float32).astype(np.float64)
    return out


def test_shift_threshold_is_margin_over_weight_for_every_feature(tmp_path: Path) -> None:
    model = binary_linear(tmp_path / "lin.onnx", W, C)
    points = _points_with_margins(np.array([0.15, 0.4, 0.9]), seed=1)
    eta = 1e-3
    for x in points:
        d = abs(float(x @ W.astype(np.float64)) + C)
        session, targets = open_session(model, Standardizer.identity(4), x[None, :], perturbations=["shift"])
        profile = threshold_profile(session, targets, delta=0.5, eps_max=4.0, eta=eta)
        for j, found in enumerate(profile):
            assert (found.perturbation, found.feature) == ("shift", j)
            if W[j] == 0:
                assert found.result.eps_star is None, "a feature the model ignores never flips it"
            else:
                assert found.result.eps_star is not None
                assert abs(found.result.eps_star - d / abs(float(W[j]))) <= eta


def test_region_threshold_is_the_order_statistic_of_the_flip_distances(tmp_path: Path) -> None:
    model = binary_linear(tmp_path / "lin.onnx", W, C)
    margins = np.array([0.1, 0.3, 0.5, 0.7, 0.9])
    points = _points_with_margins(margins, seed=2)
    d = np.abs(points @ W.astype(np.float64) + C)
    session, targets = open_session(model, Standardizer.identity(4), points, perturbations=["shift"])
    found = threshold_profile(session, targets[:1], delta=0.5, eps_max=2.0, eta=1e-3)[0]
    # P(ε) < 1 − 0.5 once 3 of the 5 points flipped: the 3rd smallest d_i / |w_0|
    assert found.result.eps_star is not None
    assert abs(found.result.eps_star - np.sort(d)[2] / abs(float(W[0]))) <= 1e-3


def test_threshold_search_counts_model_rows(tmp_path: Path) -> None:
    model = binary_linear(tmp_path / "lin.onnx", W, C)
    points = _points_with_margins(np.array([0.2, 0.6]), seed=3)
    session, targets = open_session(model, Standardizer.identity(4), points, perturbations=["shift"])
    before = session.evaluations
    profile = threshold_profile(session, targets, delta=0.4, eps_max=2.0, eta=0.01)
    for t in profile:
        # P(0) is the clean output (free); every other call evaluates B points under +ε and −ε
        assert t.rows == (t.result.calls - 1) * 2 * 2
    assert session.evaluations - before == sum(t.rows for t in profile)
    assert profile[2].result.calls == 2  # w_2 = 0: P(0) and P(ε_max), no bisection
