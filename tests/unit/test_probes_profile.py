"""Probes: the complete threshold profile (every (τ, feature) pair with a status), the growing search range, the
features' names and raw units — bad input first, then the closed form of a logistic model on real bundled data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from monitor.config import load_settings
from monitor.errors import ModelError, ProbeError
from monitor.model.onnx import OnnxModel
from monitor.model.standardize import Standardizer
from monitor.probes.funnel import FunnelConfig, run_funnel
from monitor.probes.profile import FeatureInfo, complete_profile
from monitor.runtime.models import load_model_runtime
from tests.unit import onnx_graphs
from tests.unit.probe_cli import probe_argv, read_report, run_probe

CAP = 8.0


@pytest.fixture(scope="module")
def linear(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two classes, logit difference x0 + x1 + 0.5·x2 (feature 2 matters least)."""
    root = tmp_path_factory.mktemp("profile")
    return onnx_graphs.linear_classifier(root / "lin.onnx", [[0.5, -0.5], [0.5, -0.5], [0.25, -0.25]], [0.0, 0.0])


def _shift_profile(
    model: Path, tmp_path: Path, ref: NDArray[np.float64], pts: NDArray[np.float64], *extra: str
) -> dict[str, Any]:
    """Probe ``pts`` against the reference ``ref`` (both written as CSV) for every feature's shift threshold
    (``--exhaustive --perturbations shift --steps 0``); returns the JSON report."""
    np.savetxt(tmp_path / "ref.csv", ref, delimiter=",")
    np.savetxt(tmp_path / "pts.csv", pts, delimiter=",")
    out = tmp_path / "r.json"
    argv = probe_argv(model, tmp_path / "pts.csv", tmp_path / "ref.csv")
    assert (
        run_probe([*argv, *extra, "--exhaustive", "--perturbations", "shift", "--steps", "0", "--json", str(out)]) == 0
    )
    return read_report(out)


# ---------------------------------------------------------------------------------------------- bad input


def test_a_feature_of_zero_reference_spread_is_not_searched_with_its_reason(linear: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    ref = rng.normal(size=(200, 3))
    ref[:, 1] = 4.0  # no spread: a standardized unit means nothing for it
    report = _shift_profile(linear, tmp_path, ref, ref[:10])
    by_key = {t["key"]: t for t in report["thresholds"]}
    assert list(by_key) == ["shift[0]", "shift[1]", "shift[2]"]
    zero = by_key["shift[1]"]
    assert (zero["status"], zero["reason"], zero["rows"], zero["searched"]) == ("not_searched", "zero_spread", 0, None)
    assert "does not vary" in zero["reason_text"]
    assert report["features"]["zero_spread"] == ["x[1]"]
    assert all(by_key[k]["status"] != "not_searched" for k in ("shift[0]", "shift[2]"))


def test_a_model_whose_inputs_are_all_held_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = onnx_graphs.string_input_model(tmp_path / "s.onnx")
    (tmp_path / "pts.csv").write_text("x[0],x[1]\na,b\n", encoding="utf-8")
    code = run_probe(
        ["probe", "--model", str(model), "--data", str(tmp_path / "pts.csv"), "--json", str(tmp_path / "o.json")]
    )
    err = capsys.readouterr().err
    assert code == 2 and "no float feature to perturb" in err and "Traceback" not in err
    assert not (tmp_path / "o.json").exists()


def test_held_elements_are_listed_as_not_searched(linear: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    pts = rng.normal(size=(12, 3))
    np.savetxt(tmp_path / "pts.csv", pts, delimiter=",", header="x[0],x[1],x[2]", comments="")
    out = tmp_path / "r.json"
    argv = ["probe", "--model", str(linear), "--data", str(tmp_path / "pts.csv"), "--fixed-features", "x[2]"]
    assert run_probe([*argv, "--perturbations", "shift,noise", "--steps", "0", "--json", str(out)]) == 0
    report = read_report(out)
    held = [t for t in report["thresholds"] if t["reason"] == "held"]
    assert [(t["name"], t["status"]) for t in held] == [("x[2]", "not_searched")]
    assert [t["key"] for t in report["thresholds"] if t["reason"] != "held"] == ["shift[0]", "shift[1]", "noise"]
    assert report["profile"]["reasons"]["held"] == 1 and report["profile"]["entries"] == 4


def test_points_outside_the_reference_range_are_counted_per_feature(linear: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    ref = rng.uniform(-1.0, 1.0, size=(200, 3))
    pts = rng.uniform(-0.5, 0.5, size=(10, 3))
    pts[:3, 0] = 5.0  # three points far beyond the reference's range of feature 0
    report = _shift_profile(linear, tmp_path, ref, pts)
    outside = {t["key"]: t["outside_reference"] for t in report["thresholds"]}
    assert outside == {"shift[0]": 3, "shift[1]": 0, "shift[2]": 0}
    assert report["features"]["outside_reference"] == {"x[0]": 3}
    assert all(t["status"] in ("crossed", "not_crossed") for t in report["thresholds"])


def test_complete_profile_reasons() -> None:
    entries = complete_profile(
        [("shift", 0), ("shift", 1), ("shift", 2), ("noise", None)],
        [],
        mri={"shift[0]": 0.5, "shift[1]": 0.5, "shift[2]": 0.95, "noise": 0.4},
        flagged=["shift[0]", "shift[1]", "noise"],
        fragile=["shift[0]", "noise"],
        zero_spread=[],
        stopped_at="threshold",
        eps=0.1,
        mri_cut=0.9,
        sensitivity_cut=0.01,
    )
    got = [(e.key, e.status, e.reason) for e in entries]
    assert got == [
        ("shift[0]", "not_searched", "budget"),  # fragile, but the budget ran out in the threshold stage
        ("shift[1]", "not_searched", "robust_at_eps"),  # flagged by the MRI, insensitive
        ("shift[2]", "not_searched", "robust_at_eps"),  # MRI above the cut
        ("noise", "not_searched", "budget"),
    ]
    assert "sensitivity" in (entries[1].detail or "") and "mri_cut 0.9" in (entries[2].detail or "")


def test_run_funnel_rejects_feature_info_of_another_width(linear: Path) -> None:
    model = OnnxModel(linear)
    pts = np.zeros((4, 3))
    std = Standardizer.fit(np.eye(2))
    with pytest.raises(ProbeError, match="feature info names 2 features; the points have 3"):
        run_funnel(model, Standardizer.fit(np.eye(3)), pts, features=FeatureInfo.build(["a", "b"], std))
    with pytest.raises(ProbeError, match="2 feature names for 3 features"):
        FeatureInfo.build(["a", "b"], Standardizer.fit(np.eye(3)))


# ---------------------------------------------------------------------------------------------- names


def test_feature_names_come_from_the_signature_and_can_be_renamed_once_each(linear: Path) -> None:
    model = OnnxModel(linear)
    assert model.feature_names == ("x[0]", "x[1]", "x[2]")
    with pytest.raises(ModelError, match="gives 2 feature names; model 'lin.onnx' perturbs 3 features"):
        model.name_features(["a", "b"], source="--data header")
    with pytest.raises(ModelError, match="names features more than once: a"):
        model.name_features(["a", "a", "b"], source="--data header")
    with pytest.raises(ModelError, match="empty feature names at positions \\[1\\]"):
        model.name_features(["a", " ", "b"], source="--data header")
    model.name_features(["a", "b", "c"], source="--data header")
    assert model.feature_names == ("a", "b", "c")


def test_the_feature_names_setting_names_the_models_features(linear: Path, tmp_path: Path) -> None:
    flags = {
        "models": [{"name": "m", "path": str(linear), "feature_names": ["age", "income", "debt"]}],
        "state_dir": str(tmp_path / "state"),
    }
    rt = load_model_runtime(load_settings(None, flags).models[0])
    assert rt.model.feature_names == ("age", "income", "debt")


def test_a_csv_header_names_every_threshold_in_raw_units(tmp_path: Path) -> None:
    data = load_breast_cancer()
    names = [str(n).replace(" ", "_") for n in data.feature_names]
    x, y = data.data, data.target
    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(x, y)
    model = onnx_graphs.sklearn_to_onnx(tmp_path / "bc.onnx", clf, x.shape[1], zipmap=False)
    np.savetxt(tmp_path / "pts.csv", x[:20], delimiter=",", header=",".join(names), comments="")
    np.savetxt(tmp_path / "ref.csv", x, delimiter=",", header=",".join(names), comments="")
    out = tmp_path / "r.json"
    argv = probe_argv(model, tmp_path / "pts.csv", tmp_path / "ref.csv")
    assert run_probe([*argv, "--perturbations", "shift,noise", "--steps", "0", "--exhaustive", "--json", str(out)]) == 0
    report = read_report(out)
    assert report["features"]["names"] == names
    shifts = [t for t in report["thresholds"] if t["perturbation"] == "shift"]
    assert [t["name"] for t in shifts] == names  # every feature, once, by its header name
    scale = x.std(axis=0)
    for t in shifts:
        j = t["feature"]
        assert t["raw_per_unit"] == pytest.approx(scale[j])
        assert t["eps_max_raw"] == pytest.approx(t["eps_max"] * scale[j])
        if t["status"] == "crossed":
            assert t["eps_star_raw"] == pytest.approx(t["eps_star"] * scale[j])
        assert t["reference_range_raw"] == pytest.approx([x[:, j].min(), x[:, j].max()])
    assert any(t["status"] == "crossed" for t in shifts), "the default range finds thresholds"


# ---------------------------------------------------------------------------------------------- the range


def test_default_range_finds_the_logistic_closed_form_on_breast_cancer(tmp_path: Path) -> None:
    """ε*_j = |logit| / |w_j·s_j| (standardized units) for one point: with the default range (1 growing to 8) every
    closed form inside the cap is found within η, every one beyond it is reported not crossed."""
    data = load_breast_cancer()
    x, y = data.data, data.target
    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(x, y)
    model = OnnxModel(onnx_graphs.sklearn_to_onnx(tmp_path / "bc.onnx", clf, x.shape[1], zipmap=False))
    standardizer = Standardizer.fit(x)
    scaler, lr = clf[0], clf[1]
    w_std = lr.coef_[0] / scaler.scale_ * standardizer.scale  # logit change per standardized unit of each feature
    config = FunnelConfig(perturbations=("shift",), steps=0)  # the library's defaults: no exhaustive flag
    assert (config.eps_start, config.eps_max, config.eta, config.search_all) == (1.0, CAP, 0.01, True)
    rng = np.random.default_rng(3)
    inside = 0
    for i in rng.choice(x.shape[0], size=15, replace=False):
        point = x[i : i + 1]
        logit = float(clf.decision_function(point)[0])
        closed = np.abs(logit) / np.maximum(np.abs(w_std), 1e-300)
        result = run_funnel(model, standardizer, point, config)
        by_feature = {e.feature: e for e in result.profile}
        for j in range(x.shape[1]):
            e = by_feature[j]
            if closed[j] < CAP - config.eta:
                inside += 1
                assert e.status == "crossed", (i, j, closed[j])
                assert e.threshold is not None and e.threshold.result.eps_star is not None
                assert abs(e.threshold.result.eps_star - closed[j]) <= config.eta, (i, j, closed[j])
            elif closed[j] > CAP + config.eta:
                assert e.status == "not_crossed", (i, j, closed[j])
    assert inside > 100  # most (point, feature) pairs have their boundary inside the cap


def _breast_cancer_cli(tmp_path: Path) -> tuple[Any, np.ndarray, list[str]]:
    """A logistic pipeline on the bundled breast-cancer data, its reference CSV and the probe argv stem."""
    data = load_breast_cancer()
    x, y = data.data, data.target
    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(x, y)
    model = onnx_graphs.sklearn_to_onnx(tmp_path / "bc.onnx", clf, x.shape[1], zipmap=False)
    np.savetxt(tmp_path / "ref.csv", x, delimiter=",")
    return clf, x, ["probe", "--model", str(model), "--reference", str(tmp_path / "ref.csv")]


def test_the_cli_defaults_find_the_logistic_closed_form_on_breast_cancer_points(tmp_path: Path) -> None:
    """`probe` with every default (no --exhaustive): each point's shift thresholds whose closed form
    ε*_j = |logit| / |w_j·s_j| lies inside the cap are crossed at it; the MRI screen at ε = 0.1 (which every
    target passes) no longer keeps them out of the search. ``--screen`` asks for the cheap screen explicitly."""
    clf, x, argv = _breast_cancer_cli(tmp_path)
    scaler, lr = clf[0], clf[1]
    w_std = lr.coef_[0] / scaler.scale_ * x.std(axis=0)  # logit change per standardized unit (reference std)
    inside = 0
    for i in np.random.default_rng(5).choice(x.shape[0], size=3, replace=False):
        np.savetxt(tmp_path / "pt.csv", x[i : i + 1], delimiter=",")
        out = tmp_path / f"r{i}.json"
        assert run_probe([*argv, "--data", str(tmp_path / "pt.csv"), "--json", str(out)]) == 0
        report = read_report(out)
        assert report["config"]["search_all"] is True and report["config"]["eps_max"] == CAP
        closed = abs(float(clf.decision_function(x[i : i + 1])[0])) / np.abs(w_std)
        shifts = {t["feature"]: t for t in report["thresholds"] if t["perturbation"] == "shift"}
        assert sorted(shifts) == list(range(x.shape[1]))
        assert all(t["status"] != "not_searched" for t in report["thresholds"])
        for j, t in shifts.items():
            if closed[j] < CAP - 0.01:
                inside += 1
                assert t["status"] == "crossed", (i, j, closed[j])
                assert t["eps_star"] == pytest.approx(closed[j], abs=0.01), (i, j)
            elif closed[j] > CAP + 0.01:
                assert t["status"] == "not_crossed" and t["searched"] == [0.0, CAP], (i, j, closed[j])
    assert inside >= 10
    screened = tmp_path / "screen.json"
    assert run_probe([*argv, "--data", str(tmp_path / "pt.csv"), "--screen", "--json", str(screened)]) == 0
    report = read_report(screened)
    assert report["config"]["search_all"] is False
    assert {t["reason"] for t in report["thresholds"] if t["perturbation"] == "shift"} == {"robust_at_eps"}


def test_a_fixed_range_still_works_with_eps_start_at_the_cap(linear: Path) -> None:
    model = OnnxModel(linear)
    pts = np.full((1, 3), 1.0)  # logit difference 2.5: a shift of x0 by −2.5 crosses
    cfg = FunnelConfig(perturbations=("shift",), search_all=True, steps=0, eps_start=None, eps_max=1.0)
    result = run_funnel(model, Standardizer.identity(3), pts, cfg)
    assert [e.status for e in result.profile] == ["not_crossed"] * 3
    grown = run_funnel(
        model, Standardizer.identity(3), pts, FunnelConfig(perturbations=("shift",), search_all=True, steps=0)
    )
    eps = [e.threshold.result.eps_star if e.threshold else None for e in grown.profile]
    assert eps[0] == pytest.approx(2.5, abs=0.01) and eps[1] == pytest.approx(2.5, abs=0.01)
    assert eps[2] == pytest.approx(5.0, abs=0.01)


def test_probe_scale_global_gives_every_feature_one_unit(linear: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    ref = rng.normal(size=(200, 3)) * [1.0, 3.0, 0.0]  # feature 2 constant: with one global unit it still moves
    report = _shift_profile(linear, tmp_path, ref, ref[:8], "--scale", "global")
    units = [t["raw_per_unit"] for t in report["thresholds"]]
    assert units == pytest.approx([ref.std()] * 3)
    assert report["features"]["zero_spread"] == [] and all(t["status"] != "not_searched" for t in report["thresholds"])


def test_region_summary_gives_the_centre_in_raw_units_and_the_exemplars_held_values() -> None:
    from monitor.model.signature import Held
    from monitor.probes.regions import RegionIndex
    from monitor.probes.scheduler import region_summary

    std = Standardizer(mean=np.array([10.0, -1.0]), scale=np.array([2.0, 0.5]))
    raw = np.array([[10.0, -1.0], [12.0, -0.5], [10.0, -1.0]])
    z = std.to_standardized(raw)
    held = Held({"city": np.array(["Oslo", "Lima", "Oslo"], dtype=object), "channel": np.array([3, 3, 4])})
    index = RegionIndex(2, radius=10.0).update(z, raw, np.ones(3), np.zeros(3), np.ones(3, dtype=bool), 0.0, held)
    (region,) = index.regions
    info = FeatureInfo.build(["temperature", "pressure"], std)
    out = region_summary(region, info)
    assert out["centre_raw"] == pytest.approx({"temperature": raw[:, 0].mean(), "pressure": raw[:, 1].mean()})
    assert out["held_values"] == {"city": ["Oslo", "Lima"], "channel": [3, 4]}
    assert "centre_raw" not in region_summary(region, None)
