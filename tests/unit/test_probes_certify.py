"""Probes: the certified radius (randomized smoothing) against its formula, its cap, and in the probe report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom, norm

from monitor.errors import ProbeError
from monitor.probes.certify import CAVEAT, certify, clopper_pearson_lower, noise_copies, radius_cap
from tests.unit import onnx_graphs
from tests.unit.probe_cli import run_probe


def test_the_cap_for_32_agreeing_copies_at_alpha_0_001() -> None:
    assert clopper_pearson_lower(32, 32, 0.001) == pytest.approx(0.001 ** (1 / 32))
    assert clopper_pearson_lower(32, 32, 0.001) == pytest.approx(0.806, abs=5e-4)
    assert radius_cap(1.0, 32, 0.001) == pytest.approx(0.8627, abs=1e-4)  # R ≤ 0.86 σ
    cert = certify(np.full((3, 32), 2), np.full(3, 2), sigma=0.25)
    assert cert.radius.tolist() == pytest.approx([0.25 * 0.8627] * 3, abs=1e-4)
    assert cert.cap == pytest.approx(cert.radius.max())


@pytest.mark.parametrize(("k", "n"), [(20, 32), (28, 32), (90, 100), (7, 9)])
def test_the_lower_bound_is_the_clopper_pearson_one(k: int, n: int) -> None:
    """p_lower solves P(Bin(n, p) ≥ k) = α; R = σ·Φ⁻¹(p_lower) when p_lower > 1/2, else abstain."""
    alpha = 0.01
    p = clopper_pearson_lower(k, n, alpha)
    assert binom.sf(k - 1, n, p) == pytest.approx(alpha, rel=1e-6)
    labels = np.zeros((1, n), dtype=int)
    labels[0, k:] = 1
    cert = certify(labels, np.array([0]), sigma=0.5, alpha=alpha)
    assert cert.count.tolist() == [k] and cert.p_lower[0] == pytest.approx(p)
    if p > 0.5:
        assert cert.radius[0] == pytest.approx(0.5 * norm.ppf(p)) and cert.label[0] == 0
    else:
        assert cert.radius[0] == 0.0 and cert.abstained[0]


def test_selection_and_estimation_copies_are_kept_apart() -> None:
    labels = np.zeros((2, 32), dtype=int)
    labels[1, :8] = 1  # point 1: the selection copies say class 1, the estimation copies never do
    cert = certify(labels, np.array([0, 0]), sigma=1.0, select=8)
    assert cert.copies == 24 and cert.select == 8
    assert cert.label.tolist() == [0, -1] and cert.count.tolist() == [24, 0]
    assert cert.radius[0] == pytest.approx(radius_cap(1.0, 24, 0.001))  # all 24 estimation copies agree
    assert radius_cap(1.0, 24, 0.001) < radius_cap(1.0, 32, 0.001)


def test_bad_input_is_a_clear_error() -> None:
    with pytest.raises(ProbeError, match="selection copies must be in \\[0, 4\\)"):
        certify(np.zeros((1, 4), dtype=int), np.zeros(1), sigma=1.0, select=4)
    with pytest.raises(ProbeError, match="σ must be a finite number > 0"):
        certify(np.zeros((1, 4), dtype=int), np.zeros(1), sigma=0.0)
    with pytest.raises(ProbeError, match="3 clean labels for 1 points"):
        certify(np.zeros((1, 4), dtype=int), np.zeros(3), sigma=1.0)
    with pytest.raises(ProbeError, match="must be \\(points, copies\\)"):
        certify(np.zeros(4, dtype=int), np.zeros(1), sigma=1.0)
    with pytest.raises(ProbeError, match="0 ≤ successes ≤ trials"):
        clopper_pearson_lower(5, 4, 0.01)
    with pytest.raises(ProbeError, match="α must be in"):
        clopper_pearson_lower(1, 4, 1.0)


def test_noise_copies_are_point_major_and_seeded() -> None:
    pts = np.array([[0.0, 0.0], [10.0, 10.0]])
    a, b = noise_copies(pts, 5, 0.1, seed=3), noise_copies(pts, 5, 0.1, seed=3)
    assert a.shape == (10, 2) and np.array_equal(a, b)
    assert np.all(np.abs(a[:5]) < 1.0) and np.all(np.abs(a[5:] - 10.0) < 1.0)


def test_probe_report_shows_the_radius_with_its_caveat_and_cap(tmp_path: Path) -> None:
    model = onnx_graphs.linear_classifier(tmp_path / "lin.onnx", [[1.0, -1.0], [1.0, -1.0]], [0.0, 0.0])
    rng = np.random.default_rng(0)
    pts = rng.normal(size=(20, 2)) * 2.0
    np.savetxt(tmp_path / "pts.csv", pts, delimiter=",")
    out = tmp_path / "r.json"
    argv = ["probe", "--model", str(model), "--data", str(tmp_path / "pts.csv"), "--perturbations", "shift"]
    assert run_probe([*argv, "--steps", "0", "--certify-sigma", "0.5", "--json", str(out)]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    cert = report["certified"]
    assert cert["status"] == "certified" and cert["caveat"] == CAVEAT and "smoothed classifier" in cert["caveat"]
    assert cert["copies"] == 32 and cert["cap"] == pytest.approx(0.5 * 0.8627, abs=1e-4)
    assert cert["cap_over_sigma"] == pytest.approx(0.8627, abs=1e-4) and cert["p_lower_cap"] == pytest.approx(
        0.806, abs=5e-4
    )
    radii = [p["radius"] for p in cert["points"]]
    assert len(radii) == 20 and max(radii) <= cert["cap"] + 1e-12
    # a point far from the boundary x0 + x1 = 0 (distance > the cap) is certified at the cap
    sigma_raw = 0.5 * pts.std(axis=0).max()  # σ in raw units, at its widest
    far = [i for i in range(20) if abs(pts[i].sum()) / np.sqrt(2) > 3.5 * sigma_raw]
    assert far and all(radii[i] == pytest.approx(cert["cap"]) for i in far)
    assert report["evaluations"]["certify"] == cert["rows"] == 20 * 33
    assert run_probe([*argv, "--steps", "0", "--budget", "300", "--json", str(out)]) == 0
    assert json.loads(out.read_text(encoding="utf-8"))["certified"]["reason"].startswith("budget")
    assert run_probe([*argv, "--steps", "0", "--certify-copies", "0", "--json", str(out)]) == 0
    assert json.loads(out.read_text(encoding="utf-8"))["certified"] is None


def test_probe_certified_radius_does_not_apply_to_regressors(tmp_path: Path) -> None:
    model = onnx_graphs.linear_regressor(tmp_path / "reg.onnx", [[1.0], [2.0]])
    np.savetxt(tmp_path / "pts.csv", np.random.default_rng(1).normal(size=(10, 2)), delimiter=",")
    out = tmp_path / "r.json"
    argv = ["probe", "--model", str(model), "--data", str(tmp_path / "pts.csv"), "--perturbations", "shift"]
    assert run_probe([*argv, "--steps", "0", "--json", str(out)]) == 0
    cert = json.loads(out.read_text(encoding="utf-8"))["certified"]
    assert cert["status"] == "not_applicable" and "regressor" in cert["reason"]
