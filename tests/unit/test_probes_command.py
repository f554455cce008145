"""``harmonic-monitor probe`` end to end on a scikit-learn model converted with skl2onnx."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from skl2onnx import to_onnx
from sklearn.linear_model import LogisticRegression

from tests.unit.probe_cli import run_probe

N_FEATURES = 4


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A 3-class logistic regression (ZipMap output, as skl2onnx emits it) plus points, reference, labels."""
    root = tmp_path_factory.mktemp("probe_cli")
    rng = np.random.default_rng(0)
    x = (rng.normal(size=(300, N_FEATURES)) * [1.0, 2.0, 0.5, 3.0] + [0.0, 5.0, 1.0, -2.0]).astype(np.float32)
    y = ((x[:, 0] + 0.5 * x[:, 1] - x[:, 2]) > 2.5).astype(int) + (x[:, 3] > 0)
    clf = LogisticRegression(max_iter=500).fit(x, y)
    paths = {
        "model": root / "clf.onnx",
        "points": root / "points.csv",
        "points_npy": root / "points.npy",
        "reference": root / "reference.csv",
        "narrow": root / "narrow.csv",
        "labels": root / "labels.csv",
    }
    paths["model"].write_bytes(to_onnx(clf, x[:1]).SerializeToString())
    np.savetxt(paths["points"], x[:25], delimiter=",", header="a,b,c,d", comments="")
    np.save(paths["points_npy"], x[:25])
    np.savetxt(paths["reference"], x, delimiter=",")
    np.savetxt(paths["narrow"], x[:5, :3], delimiter=",")
    np.savetxt(paths["labels"], y[:25], delimiter=",", fmt="%d")
    return paths


def test_probe_writes_the_report_with_the_fixed_keys(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.json"
    argv = ["probe", "--model", str(files["model"]), "--data", str(files["points"]), "--json", str(out)]
    fixed = ["--delta", "0.2", "--eps-max", "1.0", "--eta", "0.01"]
    code = run_probe(
        [*argv, "--reference", str(files["reference"]), *fixed, "--eps", "0.3", "--steps", "2", "--screen"]
    )
    assert code == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert list(report["mri"]) == ["noise", "shift", "dropout", "scale", "quantize", "gamma_ascent"]
    assert all(0.0 <= r <= 1.0 for r in report["mri"].values())
    assert set(report["evaluations"]) >= {"mri", "sensitivity", "threshold", "exhaustive"}
    assert report["evaluations"]["funnel"] <= report["evaluations"]["exhaustive"]  # --screen left targets out
    ev = report["evaluations"]
    assert (  # the printed line says what the funnel is made of and what it is compared with
        f"funnel {ev['funnel']} = mri {ev['mri']} + sensitivity {ev['sensitivity']} + threshold {ev['threshold']}; "
        f"threshold search on every target alone: {ev['exhaustive']}, {ev['exhaustive_min']} if none crossed"
    ) in capsys.readouterr().err
    assert report["thresholds"], "some target is fragile at ε = 0.3"
    searched = [t for t in report["thresholds"] if t["status"] != "not_searched"]
    assert {(t["perturbation"], t["feature"]) for t in searched} == {
        (f["perturbation"], f["feature"]) for f in report["fragile"]
    }
    # the profile is complete: every target appears once, the unsearched ones with a reason
    assert [t["key"] for t in report["thresholds"]] == list(report["mri_by_target"])
    assert all(t["reason"] == "robust_at_eps" for t in report["thresholds"] if t["status"] == "not_searched")
    for row in searched:
        assert row["eps_max"] == 1.0 and (row["eps_star"] is None or 0.0 < row["eps_star"] <= 1.0)
        assert row["status"] == ("crossed" if row["crossed"] else "not_crossed")
        assert isinstance(row["feature"], int) if row["perturbation"] == "shift" else row["feature"] is None
    assert report["space"] == "standardized" and report["n_points"] == 25
    assert len(report["sensitivity"]["matrix"]) == 3  # three class probabilities
    assert len(report["adversarial"]["points"]) == 25
    assert report["consistency"]["baseline"] == pytest.approx(
        report["consistency"]["agreement"] ** report["consistency"]["n_configurations"]
    )


def test_probe_exhaustive_raw_space_with_labels(files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "raw.json"
    code = run_probe(
        [
            "probe",
            "--model",
            str(files["model"]),
            "--data",
            str(files["points_npy"]),
            "--json",
            str(out),
            "--space",
            "raw",
            "--exhaustive",
            "--perturbations",
            "noise,shift",
            "--labels",
            str(files["labels"]),
            "--steps",
            "0",
        ]
    )
    assert code == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["space"] == "raw" and report["adversarial"] is None
    keys = [(t["perturbation"], t["feature"]) for t in report["thresholds"]]
    assert keys == [("noise", None)] + [("shift", j) for j in range(N_FEATURES)]  # every target searched
    assert report["consistency"]["accuracy"] is not None and report["consistency"]["baseline_from"] == "accuracy"


def test_probe_missing_model_exits_2_with_a_message(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "x.json"
    code = run_probe(
        ["probe", "--model", str(tmp_path / "nope.onnx"), "--data", str(files["points"]), "--json", str(out)]
    )
    err = capsys.readouterr().err
    assert code == 2 and "nope.onnx' does not exist (expected an .onnx file)" in err
    assert "Traceback" not in err and not out.exists()


def test_probe_missing_data_exits_2_with_a_message(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_probe(
        ["probe", "--model", str(files["model"]), "--data", str(tmp_path / "none.csv"), "--json", "o.json"]
    )
    err = capsys.readouterr().err
    assert code == 2 and "none.csv' does not exist (expected a .csv or .npy file" in err


def test_probe_wrong_width_exits_2_with_a_message(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_probe(["probe", "--model", str(files["model"]), "--data", str(files["narrow"]), "--json", "o.json"])
    err = capsys.readouterr().err
    assert code == 2 and "has 3 columns; the model expects 4 features" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--eta", "9"], "η .* must be > 0 and below ε_max = 8.0; got 9.0"),
        (["--perturbations", "noise,blur"], "perturbation 'blur' is not one of"),
        (["--budget", "0"], "--budget must be a positive number of model rows; got 0"),
        (["--labels", "{points}"], "--labels .* has 100 values; expected one class index per point"),
    ],
)
def test_probe_bad_settings_exit_2_with_a_message(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    extra = [e.format(points=files["points"]) for e in extra]
    code = run_probe(
        ["probe", "--model", str(files["model"]), "--data", str(files["points"]), "--json", "o.json", *extra]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert re.search(message, err), err


def test_probe_unwritable_output_exits_2(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "missing-dir" / "o.json"
    code = run_probe(
        ["probe", "--model", str(files["model"]), "--data", str(files["points"]), "--json", str(target), "--steps", "0"]
    )
    assert code == 2 and "folder" in capsys.readouterr().err and not target.exists()


def test_probe_regressor_scales_by_the_reference_outputs(tmp_path: Path) -> None:
    from sklearn.linear_model import LinearRegression

    rng = np.random.default_rng(1)
    x = rng.normal(size=(200, 3)).astype(np.float32)
    reg = LinearRegression().fit(x, 3.0 * x[:, 0] - x[:, 1])
    model = tmp_path / "reg.onnx"
    model.write_bytes(to_onnx(reg, x[:1]).SerializeToString())
    np.savetxt(tmp_path / "ref.csv", x, delimiter=",")
    np.savetxt(tmp_path / "pts.csv", x[:20], delimiter=",")
    out = tmp_path / "reg.json"
    argv = ["probe", "--model", str(model), "--data", str(tmp_path / "pts.csv"), "--json", str(out)]
    assert run_probe([*argv, "--reference", str(tmp_path / "ref.csv"), "--steps", "0"]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["model"]["kind"] == "regressor"
    assert report["model"]["output_scale"][0] == pytest.approx(float(np.std(reg.predict(x))), rel=1e-3)
    assert report["evaluations"]["reference"] == 200
