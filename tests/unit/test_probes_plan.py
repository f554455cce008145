"""Probes: a region's probe plan (monitor/probes/plan.py) bounds what the funnel then evaluates, stage by stage."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from monitor.model.onnx import OnnxModel
from monitor.model.standardize import Standardizer
from monitor.probes.funnel import FunnelConfig, run_funnel
from monitor.probes.plan import PLAN_STAGES, plan_probe
from monitor.probes.profile import FeatureInfo
from monitor.probes.trees import tree_splits
from tests import model_zoo
from tests.unit.test_probes_models import binary_linear, linear_regressor
from tests.unit.test_probes_trees import _iris, _opset5_regressor

W = np.array([3.0, -2.0, 1.5, 0.0])


def _near_boundary(seed: int, b: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(b, W.size))
    out: np.ndarray = x * (rng.uniform(0.02, 0.3, size=b) / np.abs(x @ W))[:, None]
    return out


def _check(plan_rows: dict[str, int], used: dict[str, int]) -> None:
    for stage, rows in used.items():
        assert rows <= plan_rows[stage], (stage, rows, plan_rows[stage])


@pytest.mark.parametrize(
    "cfg",
    [
        FunnelConfig(steps=5),  # every τ, γ-ascent included, every target searched
        FunnelConfig(perturbations=("noise", "shift", "dropout", "scale", "quantize"), steps=5, search_all=False),
        FunnelConfig(steps=0, eps_start=None, sensitivity_draws=6),
    ],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_plan_bounds_every_stage_of_a_classifier_probe(tmp_path: Path, cfg: FunnelConfig, seed: int) -> None:
    model = binary_linear(tmp_path / "lin.onnx", W, 0.0)
    std = Standardizer.identity(W.size)
    points = _near_boundary(seed, 16)
    plan = plan_probe(model, std, points, cfg, certify_copies=8)
    assert set(plan.rows) == set(PLAN_STAGES) and plan.points == 16
    assert plan.rows["certify"] == 16 * 9 and plan.total == sum(plan.rows.values())
    result = run_funnel(model, std, points, cfg)
    assert result.complete
    _check(plan.rows, result.evaluations)
    assert result.total_rows <= plan.total - plan.rows["certify"]
    # the bound is a plan, not a guess: within a small factor of what the probe took
    assert plan.total - plan.rows["certify"] <= 4 * result.total_rows


def test_plan_bounds_a_regressor_and_leaves_out_features_of_zero_spread(tmp_path: Path) -> None:
    model = linear_regressor(tmp_path / "reg.onnx", np.array([[1.0], [2.0], [0.5]]), np.array([0.1]))
    reference = np.random.default_rng(3).normal(size=(200, 3))
    reference[:, 2] = 4.0  # zero spread: never searched
    std = Standardizer.fit(reference)
    features = FeatureInfo.build(("a", "b", "c"), std, reference=reference, std=reference.std(axis=0))
    points = reference[:12] + 0.01
    cfg = FunnelConfig(steps=3)
    plan = plan_probe(model, std, points, cfg, features=features)
    everything = plan_probe(model, std, points, cfg)
    assert plan.rows["threshold"] < everything.rows["threshold"] and plan.rows["certify"] == 0
    result = run_funnel(model, std, points, cfg, features=features, output_scale=np.ones(1))
    assert result.complete
    _check(plan.rows, result.evaluations)


def test_plan_counts_the_exact_tree_steps_point_by_point(tmp_path: Path) -> None:
    model = OnnxModel(_opset5_regressor(tmp_path / "t5.onnx"), model_kind="regressor")
    splits = tree_splits(model.path, 2)
    assert splits is not None and splits.equality
    points = np.array([[0.0, 0.0], [0.5, 0.2], [2.5, 1.0], [-1.0, -0.2]])
    std = Standardizer.identity(2)
    cfg = FunnelConfig(perturbations=("shift",), steps=0, eps_max=4.0)
    plan = plan_probe(model, std, points, cfg, splits=splits)
    result = run_funnel(model, std, points, cfg, output_scale=np.ones(1), splits=splits)
    assert plan.rows["threshold"] == result.evaluations["threshold"]  # exact: one row per step, per point and sign
    lgbm = OnnxModel(model_zoo.build_lightgbm_classifier(tmp_path, zipmap=False).path)
    tree = tree_splits(lgbm.path, lgbm.n_features)
    assert tree is not None
    iris = _iris()
    x = iris[::15]
    std = Standardizer.fit(iris)
    cfg = FunnelConfig(steps=2)
    plan = plan_probe(lgbm, std, x, cfg, splits=tree, certify_copies=4)
    result = run_funnel(lgbm, std, x, cfg, splits=tree)
    assert result.complete
    assert plan.rows["threshold"] >= result.evaluations["threshold"]
    _check(plan.rows, result.evaluations)
