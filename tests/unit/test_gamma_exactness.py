"""γ exactness through real tiny ONNX regressors and the full scorer path.

The scorer builds ball points and evaluates the model in float32, so "exact" means exact up to float32
rounding: every check uses ``atol = F32_SLACK · eps32 · (1 + max|f|)`` where max|f| is the largest output
over the centres and their ball points (the cancellation in f(x) − mean f(ball) loses that much absolute
precision). Centres are drawn with |z| ≤ 2 in standardized units, so |f| stays below ~30 and the tolerance
below ~1e-4 absolute; the γ values checked against non-zero targets (r², r³·|cos 3θ|) are ≥ 1e-3 and get a
relative check of ~1e-3 on top.

Spaces: ``raw`` uses ``Standardizer.identity`` (radius in raw units); ``standardized`` uses a standardizer
with non-trivial mean and per-feature scale, and — where the target function is defined in standardized
coordinates z = (x − μ)/s — the graph computes z itself, so the expected γ is the same as in raw space.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from monitor.model.onnx import OnnxModel
from monitor.model.standardize import Standardizer
from monitor.signals.balls import ball_directions
from monitor.signals.scorer import RobustnessScorer, ScoringConfig
from tests.unit import onnx_graphs

EPS32 = float(np.finfo(np.float32).eps)
F32_SLACK = 32.0  # measured worst case is about 4; the rest is headroom for other CPUs and FMA
SPACES = ["raw", "standardized"]
RADII = [0.05, 0.3, 1.0]


def _standardizer(space: str, n: int) -> Standardizer:
    if space == "raw":
        return Standardizer.identity(n)
    rng = np.random.default_rng(100 + n)
    return Standardizer(mean=rng.uniform(-3.0, 3.0, n), scale=rng.uniform(0.5, 3.0, n))


def _centres(standardizer: Standardizer, seed: int, rows: int = 5) -> NDArray[np.float64]:
    z = np.random.default_rng(seed).uniform(-2.0, 2.0, (rows, standardizer.n_features))
    return standardizer.to_raw(z)


def _gamma(
    model: OnnxModel, standardizer: Standardizer, ball: str, radius: float, x: NDArray[np.float64]
) -> tuple[NDArray[np.float64], float]:
    """γ per row through the scorer, and the float32 absolute tolerance for this model and these points."""
    scorer = RobustnessScorer(
        model, standardizer, ScoringConfig(radius=radius, ball=ball, output="value", flicker_copies=0)
    )
    gamma = scorer.score(x).gamma
    values = model.evaluate(scorer.build_rows(x.astype(np.float32))).value
    assert values is not None
    return gamma, F32_SLACK * EPS32 * (1.0 + float(np.abs(values).max()))


def _polynomial(tmp_path: Path, standardizer: Standardizer, space: str, poly: onnx_graphs.Polynomial) -> OnnxModel:
    """A regressor computing ``poly`` of z = (x − μ)/s (of x itself in raw space)."""
    n = standardizer.n_features
    if space == "raw":
        return OnnxModel(onnx_graphs.polynomial_regressor(tmp_path / "poly.onnx", n, [poly]))
    return OnnxModel(
        onnx_graphs.polynomial_regressor(
            tmp_path / "poly.onnx", n, [poly], mean=standardizer.mean, scale=standardizer.scale
        )
    )


# -- f linear: γ = 0 for every construction --------------------------------------------------------------------
@pytest.mark.parametrize("radius", RADII)
@pytest.mark.parametrize("n", [1, 2, 3, 7])
@pytest.mark.parametrize("ball", ["simplex", "simplex+anti", "rotations:3", "hypercube:4", "hypercube:64"])
@pytest.mark.parametrize("space", SPACES)
def test_gamma_is_zero_for_a_linear_model(tmp_path: Path, space: str, ball: str, n: int, radius: float) -> None:
    std = _standardizer(space, n)
    weights = np.random.default_rng(n).uniform(-2.0, 2.0, n)
    model = OnnxModel(onnx_graphs.linear_regressor(tmp_path / "lin.onnx", weights, 0.7))
    gamma, atol = _gamma(model, std, ball, radius, _centres(std, seed=n))
    np.testing.assert_allclose(gamma, 0.0, atol=atol)


# -- f = z1² − z2²: γ = 0 for simplex and simplex+anti ----------------------------------------------------------
@pytest.mark.parametrize("radius", RADII)
@pytest.mark.parametrize("n", [2, 3, 6])
@pytest.mark.parametrize("ball", ["simplex", "simplex+anti", "rotations:2"])
@pytest.mark.parametrize("space", SPACES)
def test_gamma_is_zero_for_the_harmonic_quadratic(tmp_path: Path, space: str, ball: str, n: int, radius: float) -> None:
    std = _standardizer(space, n)
    model = _polynomial(tmp_path, std, space, onnx_graphs.QUADRATIC_HARMONIC)
    gamma, atol = _gamma(model, std, ball, radius, _centres(std, seed=10 + n))
    np.testing.assert_allclose(gamma, 0.0, atol=atol)


def test_gamma_of_the_harmonic_quadratic_is_nonzero_on_a_sampled_hypercube(tmp_path: Path) -> None:
    # control: with only the ±e1 pair sampled, the mean value property fails (γ = r²), so the zeros above are real
    std = Standardizer.identity(2)
    model = _polynomial(tmp_path, std, "raw", onnx_graphs.QUADRATIC_HARMONIC)
    v = ball_directions("hypercube:2", 2, seed=0)
    gamma, atol = _gamma(model, std, "hypercube:2", 0.3, _centres(std, seed=0))
    assert np.abs(v).sum(axis=0).tolist() in ([2.0, 0.0], [0.0, 2.0])
    np.testing.assert_allclose(gamma, 0.09, rtol=1e-3, atol=atol)


# -- f = ‖z‖²: γ = r² exactly -----------------------------------------------------------------------------------
@pytest.mark.parametrize("radius", RADII)
@pytest.mark.parametrize("n", [1, 2, 4])
@pytest.mark.parametrize("ball", ["simplex", "simplex+anti", "rotations:3", "hypercube:2", "hypercube:8"])
@pytest.mark.parametrize("space", SPACES)
def test_gamma_is_radius_squared_for_the_squared_norm(
    tmp_path: Path, space: str, ball: str, n: int, radius: float
) -> None:
    std = _standardizer(space, n)
    model = _polynomial(tmp_path, std, space, onnx_graphs.squared_norm(n))
    gamma, atol = _gamma(model, std, ball, radius, _centres(std, seed=20 + n))
    np.testing.assert_allclose(gamma, radius**2, rtol=1e-3, atol=atol)


@pytest.mark.parametrize("radius", RADII)
@pytest.mark.parametrize("ball", ["simplex", "simplex+anti", "rotations:3", "hypercube:6"])
def test_gamma_of_raw_squared_norm_scales_with_the_mean_squared_feature_scale(
    tmp_path: Path, ball: str, radius: float
) -> None:
    # f = ‖x‖² in raw units while the radius is in standardized units: ball points are x + r·s⊙v_i, and
    # Σ v_i v_iᵀ ∝ I gives γ = r²·mean(s²) for every construction that covers all axes evenly
    std = Standardizer(mean=np.array([1.0, -2.0, 0.5]), scale=np.array([0.5, 2.0, 1.5]))
    model = OnnxModel(onnx_graphs.polynomial_regressor(tmp_path / "norm.onnx", 3, [onnx_graphs.squared_norm(3)]))
    gamma, atol = _gamma(model, std, ball, radius, _centres(std, seed=3))
    np.testing.assert_allclose(gamma, radius**2 * np.mean(std.scale**2), rtol=1e-3, atol=atol)


# -- f = Re((z1 + i·z2)³): 0 with the reflection, r³·|cos 3θ| for the bare triangle ------------------------------
@pytest.mark.parametrize("radius", RADII)
@pytest.mark.parametrize("n", [2, 3, 5])
@pytest.mark.parametrize("ball", ["simplex+anti", "rotations:2"])
@pytest.mark.parametrize("space", SPACES)
def test_gamma_is_zero_for_the_harmonic_cubic_with_the_reflected_simplex(
    tmp_path: Path, space: str, ball: str, n: int, radius: float
) -> None:
    std = _standardizer(space, n)
    model = _polynomial(tmp_path, std, space, onnx_graphs.CUBIC_HARMONIC)
    gamma, atol = _gamma(model, std, ball, radius, _centres(std, seed=30 + n))
    np.testing.assert_allclose(gamma, 0.0, atol=atol)


def _triangle_orientation() -> float:
    """θ of the 2-D simplex the scorer uses; the three vertices sit at θ, θ ± 2π/3, so cos 3φ is shared."""
    v = ball_directions("simplex", 2)
    angles = np.arctan2(v[:, 1], v[:, 0])
    np.testing.assert_allclose(np.cos(3 * angles), np.cos(3 * angles[0]), atol=1e-12)
    return float(angles[0])


@pytest.mark.parametrize("radius", RADII)
@pytest.mark.parametrize("space", SPACES)
def test_gamma_of_the_harmonic_cubic_on_the_bare_triangle_is_r_cubed_cos_3_theta(
    tmp_path: Path, space: str, radius: float
) -> None:
    std = _standardizer(space, 2)
    model = _polynomial(tmp_path, std, space, onnx_graphs.CUBIC_HARMONIC)
    gamma, atol = _gamma(model, std, "simplex", radius, _centres(std, seed=40))
    expected = radius**3 * abs(np.cos(3 * _triangle_orientation()))
    np.testing.assert_allclose(gamma, expected, rtol=1e-3, atol=atol)


def test_gamma_of_the_harmonic_cubic_on_the_bare_triangle_is_nonzero(tmp_path: Path) -> None:
    std = Standardizer.identity(2)
    model = _polynomial(tmp_path, std, "raw", onnx_graphs.CUBIC_HARMONIC)
    gamma, atol = _gamma(model, std, "simplex", 0.3, _centres(std, seed=41))
    assert abs(np.cos(3 * _triangle_orientation())) > 0.5  # the scorer's triangle is not at a zero of cos 3θ
    assert np.all(gamma > 100 * atol)
