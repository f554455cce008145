"""Seed 001 §4, Tables 1–2: on the two-feature Wine problem the over-fit model of each pair has the higher γ.

Features "flavanoids" and "od280/od315_of_diluted_wines", 80/20 split, models converted with skl2onnx (ZipMap
output, rewritten by OnnxModel), γ with output "label", space raw (identity standardizer), r = 0.05, averaged
over a 50×50 grid on [0, 5] × [1, 4]. Measured with the default simplex+anti ball, split/model seeds 0–2:

    GBDT-1 ≈ 0.008  (paper 0.014)    GBDT-2 ≈ 0.068  (paper 0.051)
    MLP-1  ≈ 0.013  (paper 0.016)    MLP-2  ≈ 0.024  (paper 0.027)

The paper's absolute values depend on its ball and grid; the tests pin the ordering with a margin (over-fit γ at
least 3× / 1.3× the well-fit one for GBDT / MLP; the smallest measured ratios over seeds 0–4 were 5.1× and 1.6×).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from monitor.model.onnx import OnnxModel
from monitor.model.standardize import Standardizer
from monitor.signals.scorer import RobustnessScorer, ScoringConfig
from tests.unit import onnx_graphs

SEEDS = [0, 1, 2]
FEATURES = ("flavanoids", "od280/od315_of_diluted_wines")


def _wine_split(seed: int) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    from sklearn.datasets import load_wine
    from sklearn.model_selection import train_test_split

    wine = load_wine()
    columns = [list(wine.feature_names).index(name) for name in FEATURES]
    x_train, _, y_train, _ = train_test_split(wine.data[:, columns], wine.target, test_size=0.2, random_state=seed)
    return x_train, y_train


def _grid() -> NDArray[np.float64]:
    a, b = np.meshgrid(np.linspace(0.0, 5.0, 50), np.linspace(1.0, 4.0, 50))
    return np.column_stack([a.ravel(), b.ravel()])


def _mean_gamma(tmp_path: Path, make: Callable[[int], Any], seed: int, name: str) -> float:
    from sklearn.exceptions import ConvergenceWarning

    x_train, y_train = _wine_split(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # MLP-1 stops at max_iter = 200, as in the paper
        estimator = make(seed).fit(x_train, y_train)
    model = OnnxModel(onnx_graphs.sklearn_to_onnx(tmp_path / f"{name}-{seed}.onnx", estimator, 2))
    config = ScoringConfig(radius=0.05, output="label", flicker_copies=0)
    return float(RobustnessScorer(model, Standardizer.identity(2), config).score(_grid()).gamma.mean())


def _gbdt(max_depth: int, n_estimators: int, learning_rate: float) -> Callable[[int], Any]:
    from sklearn.ensemble import GradientBoostingClassifier

    return lambda seed: GradientBoostingClassifier(
        max_depth=max_depth,
        n_estimators=n_estimators,
        learning_rate=learning_rate,
        min_samples_split=2,
        random_state=seed,
    )


def _mlp(hidden: tuple[int, ...], max_iter: int, learning_rate_init: float, alpha: float) -> Callable[[int], Any]:
    from sklearn.neural_network import MLPClassifier

    return lambda seed: MLPClassifier(
        hidden_layer_sizes=hidden,
        max_iter=max_iter,
        learning_rate_init=learning_rate_init,
        alpha=alpha,
        random_state=seed,
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_wine_overfit_gbdt_has_higher_gamma_than_the_well_fit_one(tmp_path: Path, seed: int) -> None:
    well_fit = _mean_gamma(tmp_path, _gbdt(max_depth=1, n_estimators=5, learning_rate=0.1), seed, "gbdt1")
    over_fit = _mean_gamma(tmp_path, _gbdt(max_depth=100, n_estimators=200, learning_rate=1.0), seed, "gbdt2")
    assert over_fit > 3.0 * well_fit, (well_fit, over_fit)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_wine_overfit_mlp_has_higher_gamma_than_the_well_fit_one(tmp_path: Path, seed: int) -> None:
    well_fit = _mean_gamma(tmp_path, _mlp((100,), max_iter=200, learning_rate_init=0.001, alpha=1e-4), seed, "mlp1")
    over_fit = _mean_gamma(
        tmp_path, _mlp((100, 500, 1000), max_iter=1000, learning_rate_init=0.01, alpha=0.0), seed, "mlp2"
    )
    assert over_fit > 1.3 * well_fit, (well_fit, over_fit)
