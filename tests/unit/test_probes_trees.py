"""Probes: exact single-feature ε* for tree ensembles equals a brute-force scan of a fine grid of shifts."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import load_iris
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from monitor.cli.probe import register
from monitor.model.onnx import OnnxModel
from monitor.model.standardize import Standardizer
from monitor.probes.funnel import FunnelConfig, run_funnel
from monitor.probes.perturbations import ProbeSession
from monitor.probes.trees import read_splits, tree_splits
from tests import model_zoo
from tests.unit import onnx_graphs

GRID = 0.002  # standardized units
CAP = 4.0
DELTA = 0.2


def _iris() -> np.ndarray:
    x: np.ndarray = load_iris(return_X_y=True)[0].astype(np.float64)
    return x


def _grid_threshold(model: OnnxModel, std: Standardizer, points: np.ndarray, j: int) -> float | None:
    """The first ε on the grid GRID, 2·GRID, …, CAP where P(ε) (both signs of shift[j]) drops below P(0) − δ."""
    session = ProbeSession(model, std, points)
    clean = session.clean.label
    assert clean is not None
    grid = np.arange(1, int(round(CAP / GRID)) + 1) * GRID
    b = points.shape[0]
    consistent = np.ones((grid.size, b), dtype=bool)
    for sign in (1.0, -1.0):
        rows = np.repeat(points[None, :, :], grid.size, axis=0)
        rows[:, :, j] += sign * grid[:, None] * std.scale[j]
        label = model.evaluate(rows.reshape(-1, points.shape[1]).astype(np.float32)).label
        assert label is not None
        consistent &= label.reshape(grid.size, b) == clean[None, :]
    p = consistent.mean(axis=1)
    hit = np.flatnonzero(p < 1.0 - DELTA)
    return None if hit.size == 0 else float(grid[hit[0]])


def _check_against_grid(model: OnnxModel, points: np.ndarray, reference: np.ndarray) -> int:
    std = Standardizer.fit(reference)
    splits = tree_splits(model.path, model.n_features)
    assert splits is not None, "the trees' splits are read"
    cfg = FunnelConfig(perturbations=("shift",), search_all=True, steps=0, eps_max=CAP, delta=DELTA)
    exact = run_funnel(model, std, points, cfg, splits=splits)
    crossed = 0
    for e in exact.profile:
        assert e.feature is not None and e.threshold is not None and e.threshold.method == "exact_tree"
        grid = _grid_threshold(model, std, points, e.feature)
        eps = e.threshold.result.eps_star
        if grid is None:
            assert eps is None or eps > CAP - GRID, (e.key, eps)
            continue
        crossed += 1
        assert eps is not None, (e.key, grid)
        assert grid - GRID - 1e-9 <= eps <= grid + 1e-9, (e.key, eps, grid)  # the step lies in the grid cell
    return crossed


@pytest.mark.parametrize("multiclass", [False, True])
def test_lightgbm_exact_threshold_equals_the_grid_scan(tmp_path: Path, multiclass: bool) -> None:
    zoo = model_zoo.build_lightgbm_classifier(tmp_path, multiclass=multiclass)
    x = _iris()
    points = x[np.random.default_rng(0).choice(x.shape[0], 12, replace=False)]
    assert _check_against_grid(OnnxModel(zoo.path), points, x) >= 1


def test_xgboost_exact_threshold_equals_the_grid_scan(tmp_path: Path) -> None:
    zoo = model_zoo.build_xgboost_classifier(tmp_path, multiclass=True)
    x = _iris()
    points = x[np.random.default_rng(1).choice(x.shape[0], 12, replace=False)]
    assert _check_against_grid(OnnxModel(zoo.path), points, x) >= 1


def test_a_scaler_before_the_trees_is_mapped_back_to_raw_units(tmp_path: Path) -> None:
    x, y = load_iris(return_X_y=True)
    clf = make_pipeline(StandardScaler(), GradientBoostingClassifier(n_estimators=8, max_depth=2, random_state=0))
    clf.fit(x, y)
    path = onnx_graphs.sklearn_to_onnx(tmp_path / "gb.onnx", clf, 4, zipmap=False)
    nodes = {n.op_type for n in onnx.load(str(path)).graph.node}
    assert {"Scaler", "TreeEnsembleClassifier"} <= nodes
    points = x[np.random.default_rng(2).choice(x.shape[0], 12, replace=False)].astype(np.float64)
    assert _check_against_grid(OnnxModel(path), points, x.astype(np.float64)) >= 1


def _opset5_regressor(path: Path) -> Path:
    """ai.onnx.ml opset 5 ``TreeEnsemble``: two stumps, y = [x0 ≤ 1] ? 0 : 1 plus [x1 < −0.5] ? 0 : 2, and an
    equality split [x0 == 3] ? 5 : 0 (BRANCH_EQ)."""
    node = helper.make_node(
        "TreeEnsemble",
        ["X"],
        ["Y"],
        domain="ai.onnx.ml",
        n_targets=1,
        aggregate_function=1,  # sum
        post_transform=0,
        tree_roots=[0, 1, 2],
        nodes_featureids=[0, 1, 0],
        nodes_splits=numpy_helper.from_array(np.array([1.0, -0.5, 3.0], dtype=np.float32)),
        nodes_modes=numpy_helper.from_array(np.array([0, 1, 4], dtype=np.uint8)),
        nodes_truenodeids=[0, 2, 4],
        nodes_trueleafs=[1, 1, 1],
        nodes_falsenodeids=[1, 3, 5],
        nodes_falseleafs=[1, 1, 1],
        leaf_targetids=[0, 0, 0, 0, 0, 0],
        leaf_weights=numpy_helper.from_array(np.array([0.0, 1.0, 0.0, 2.0, 5.0, 0.0], dtype=np.float32)),
    )
    graph = helper.make_graph(
        [node],
        "opset5",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 5)])
    path.write_bytes(model.SerializeToString())
    return path


def test_opset5_tree_ensemble_with_an_equality_split(tmp_path: Path) -> None:
    model = OnnxModel(_opset5_regressor(tmp_path / "t5.onnx"), model_kind="regressor")
    out = model.evaluate(np.array([[0.0, 0.0], [2.0, -1.0], [3.0, 0.0]], dtype=np.float32)).value
    assert out is not None and out.reshape(-1).tolist() == [2.0, 1.0, 8.0]
    splits = tree_splits(model.path, 2)
    assert splits is not None and splits.equality and splits.nodes == ("TreeEnsemble",)
    assert [t.tolist() for t in splits.thresholds] == [[1.0, 3.0], [-0.5]]
    points = np.array([[0.0, 0.0], [0.5, 0.2], [2.5, 1.0], [-1.0, -0.2]])
    std = Standardizer.identity(2)
    cfg = FunnelConfig(perturbations=("shift",), search_all=True, steps=0, eps_max=CAP, delta=0.2)
    result = run_funnel(model, std, points, cfg, output_scale=np.ones(1), splits=splits)
    eps = {e.key: e.threshold.result.eps_star for e in result.profile if e.threshold is not None}
    # shift[0]: the point at 0.5 crosses x0 ≤ 1 at +0.5 and the one at 2.5 lands on x0 == 3 at +0.5 (only there):
    # one point of four changed is P = 0.75 < 0.8
    assert eps["shift[0]"] == pytest.approx(0.5)
    # shift[1]: x1 = −0.2 passes x1 < −0.5 just beyond −0.3 (the infimum 0.3; at −0.5 itself x1 < −0.5 is false)
    assert eps["shift[1]"] == pytest.approx(0.3)


def test_not_exact_where_the_input_reaches_the_output_another_way(tmp_path: Path) -> None:
    lin = onnx_graphs.linear_classifier(tmp_path / "lin.onnx", [[1.0, -1.0], [1.0, -1.0]], [0.0, 0.0])
    assert tree_splits(lin, 2) is None
    assert tree_splits(tmp_path / "missing.onnx", 2) is None
    assert tree_splits(lin, 2, plain=False) is None
    graph = onnx.load(str(model_zoo.build_lightgbm_classifier(tmp_path).path)).graph
    graph.node.append(helper.make_node("Abs", [graph.input[0].name], ["side"]))  # a second use of the input
    assert read_splits(graph, 4) is None


def test_probe_reports_the_exact_method_and_bisects_on_request(tmp_path: Path) -> None:
    zoo = model_zoo.build_lightgbm_classifier(tmp_path)
    x = _iris()
    np.savetxt(tmp_path / "pts.csv", x[::10], delimiter=",")
    np.savetxt(tmp_path / "ref.csv", x, delimiter=",")
    base = [
        "probe",
        "--model",
        str(zoo.path),
        "--data",
        str(tmp_path / "pts.csv"),
        "--reference",
        str(tmp_path / "ref.csv"),
    ]
    base += ["--exhaustive", "--perturbations", "shift", "--steps", "0"]
    parser = argparse.ArgumentParser(prog="harmonic-monitor")
    register(parser.add_subparsers(dest="command", required=True))
    for extra, method in (([], "exact_tree"), (["--bisect-trees"], "bisection")):
        out = tmp_path / f"{method}.json"
        args = parser.parse_args([*base, *extra, "--json", str(out)])
        assert args.func(args) == 0
        report = json.loads(out.read_text(encoding="utf-8"))
        assert {t["method"] for t in report["thresholds"]} == {method}
        assert (report["trees"] is None) == (method == "bisection")
    exact = json.loads((tmp_path / "exact_tree.json").read_text(encoding="utf-8"))["thresholds"]
    bisect = json.loads((tmp_path / "bisection.json").read_text(encoding="utf-8"))["thresholds"]
    for e, b in zip(exact, bisect, strict=True):
        assert (e["eps_star"] is None) == (b["eps_star"] is None)
        if e["eps_star"] is not None:
            assert abs(e["eps_star"] - b["eps_star"]) <= 0.01  # bisection lands within η of the exact step


def test_not_exact_for_membership_splits_out_of_range_features_or_a_degenerate_scaler(tmp_path: Path) -> None:
    graph = onnx.load(str(_opset5_regressor(tmp_path / "t5.onnx"))).graph
    assert read_splits(graph, 2) is not None
    member = onnx.GraphProto()
    member.CopyFrom(graph)
    modes = next(a for a in member.node[0].attribute if a.name == "nodes_modes")
    modes.t.CopyFrom(numpy_helper.from_array(np.array([0, 6, 4], dtype=np.uint8)))
    assert read_splits(member, 2) is None  # BRANCH_MEMBER
    assert read_splits(graph, 1) is None  # a split on feature 1 of a one-feature input
    scaled = onnx.GraphProto()
    scaled.CopyFrom(graph)
    scaled.node[0].input[0] = "Xs"
    scaled.node.insert(0, helper.make_node("Scaler", ["X"], ["Xs"], domain="ai.onnx.ml", offset=[0.0], scale=[0.0]))
    assert read_splits(scaled, 2) is None  # scale 0: no raw threshold
    scaled.node[0].CopyFrom(helper.make_node("Scaler", ["X"], ["Xs"], domain="ai.onnx.ml", offset=[1.0], scale=[2.0]))
    splits = read_splits(scaled, 2)
    assert splits is not None and [t.tolist() for t in splits.thresholds] == [[1.5, 2.5], [0.75]]  # x = y/2 + 1
