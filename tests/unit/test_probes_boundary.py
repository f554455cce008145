"""Probes: the black-box L2 boundary search against the closed form of logistic regression on real bundled data."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from monitor.cli.probe import register
from monitor.errors import ProbeError
from monitor.model.onnx import OnnxModel
from monitor.model.standardize import Standardizer
from monitor.probes.boundary import minimal_l2
from tests.unit import onnx_graphs

#: HopSkipJump's default query budget in IBM ART (max_eval 10000 per gradient estimate, 50 iterations, init_eval
#: 100) is far above this; the target is a tenth of the ~24,000 rows per point it used on this data
ROWS_PER_POINT = 2_400


@pytest.fixture(scope="module")
def breast_cancer(tmp_path_factory: pytest.TempPathFactory) -> tuple[OnnxModel, np.ndarray, np.ndarray, np.ndarray]:
    x, y = load_breast_cancer(return_X_y=True)
    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(x, y)
    path = onnx_graphs.sklearn_to_onnx(tmp_path_factory.mktemp("l2") / "bc.onnx", clf, x.shape[1], zipmap=False)
    std = Standardizer.fit(x)
    w = clf[1].coef_[0] / clf[0].scale_ * std.scale  # logit per standardized unit
    closed = np.abs(clf.decision_function(x)) / np.linalg.norm(w)
    return OnnxModel(path), x, closed, w


def test_l2_boundary_matches_the_logistic_closed_form(
    breast_cancer: tuple[OnnxModel, np.ndarray, np.ndarray, np.ndarray],
) -> None:
    model, x, closed, _ = breast_cancer
    idx = np.random.default_rng(0).choice(x.shape[0], 50, replace=False)
    result = minimal_l2(model, Standardizer.fit(x), x[idx])
    found = np.isfinite(result.distance)
    # every point whose boundary lies within 3.5 standardized units is found (beyond, float32 probabilities
    # saturate: 1 − p is 0 and the margin has nothing to follow)
    assert found[closed[idx] < 3.5].all()
    ratio = result.distance[found] / closed[idx][found]
    assert ratio.min() >= 1.0 - 1e-3  # never nearer than the true boundary (to bisection resolution)
    assert ratio.max() <= 1.2 and np.median(ratio) <= 1.01
    assert result.rows.mean() <= ROWS_PER_POINT / 10
    for i in np.flatnonzero(~found):
        assert result.status[i] == "not_found" and result.reason[i]
    # the boundary point changes the class: it lies on the hyperplane logit = 0 (to resolution)
    std = Standardizer.fit(x)
    b = std.to_standardized(result.boundary[found])
    z = std.to_standardized(x[idx][found])
    assert np.all(np.linalg.norm(b - z, axis=1) == pytest.approx(result.distance[found]))


def test_l2_boundary_bad_input(tmp_path: Path) -> None:
    reg = OnnxModel(onnx_graphs.linear_regressor(tmp_path / "r.onnx", [[1.0], [2.0]]))
    with pytest.raises(ProbeError, match="needs a classifier, not a regressor"):
        minimal_l2(reg, Standardizer.identity(2), np.zeros((1, 2)))
    clf = OnnxModel(onnx_graphs.linear_classifier(tmp_path / "c.onnx", [[1.0, -1.0]], [0.0, 0.0]))
    with pytest.raises(ProbeError, match="points have 2 features; the model expects 1"):
        minimal_l2(clf, Standardizer.identity(2), np.zeros((1, 2)))
    labels_only = OnnxModel(
        onnx_graphs.linear_classifier(tmp_path / "l.onnx", [[1.0, -1.0]], [0.0, 0.0], outputs=("label",))
    )
    with pytest.raises(ProbeError, match="gives labels only"):
        minimal_l2(labels_only, Standardizer.identity(1), np.zeros((1, 1)))


def test_a_flat_model_reports_not_found_with_a_reason(tmp_path: Path) -> None:
    flat = OnnxModel(onnx_graphs.linear_classifier(tmp_path / "f.onnx", [[0.0, 0.0]], [5.0, 0.0]))
    result = minimal_l2(flat, Standardizer.identity(1), np.zeros((3, 1)))
    assert result.status == ("not_found",) * 3 and all("flat margin" in (r or "") for r in result.reason)
    assert np.isnan(result.distance).all()


def test_probe_reports_the_l2_boundary_beside_the_single_feature_threshold(
    breast_cancer: tuple[OnnxModel, np.ndarray, np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    model, x, closed, _ = breast_cancer
    np.savetxt(tmp_path / "pts.csv", x[:10], delimiter=",")
    np.savetxt(tmp_path / "ref.csv", x, delimiter=",")
    out = tmp_path / "r.json"
    argv = [
        "probe",
        "--model",
        str(model.path),
        "--data",
        str(tmp_path / "pts.csv"),
        "--reference",
        str(tmp_path / "ref.csv"),
    ]
    argv += [
        "--perturbations",
        "shift",
        "--exhaustive",
        "--steps",
        "0",
        "--certify-copies",
        "0",
        "--l2-boundary",
        "--json",
        str(out),
    ]
    parser = argparse.ArgumentParser(prog="harmonic-monitor")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    assert args.func(args) == 0
    section = json.loads(out.read_text(encoding="utf-8"))["boundary_l2"]
    assert section["status"] == "searched" and len(section["points"]) == 10
    for p, c in zip(section["points"], closed[:10], strict=True):
        if p["distance"] is not None:
            assert c <= p["distance"] + 1e-3 <= 1.2 * c + 1e-3
    assert section["single_feature_min_eps_star"] is not None
    # one feature at a time can only be farther than the nearest boundary in any direction
    assert section["min_distance"] <= section["single_feature_min_eps_star"] + 1e-6


def test_reference_anchors_find_every_point_at_the_closed_form(
    breast_cancer: tuple[OnnxModel, np.ndarray, np.ndarray, np.ndarray],
) -> None:
    """The points the margin cannot lead (saturated float32 probabilities) are found from the nearest reference row
    of the other class, and the tangent-plane refinement brings them to the closed form too."""
    model, x, closed, _ = breast_cancer
    idx = np.random.default_rng(0).choice(x.shape[0], 50, replace=False)
    anchors = x[np.random.default_rng(1).choice(x.shape[0], 200, replace=False)]
    result = minimal_l2(model, Standardizer.fit(x), x[idx], anchors=anchors)
    assert result.status == ("found",) * 50
    ratio = result.distance / closed[idx]
    assert ratio.min() >= 1.0 - 1e-3 and ratio.max() <= 1.2
    assert result.rows.mean() + 200 / 50 <= ROWS_PER_POINT / 10
