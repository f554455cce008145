"""A regressor's MAE and RMSE without labels through ``reference --labels``, ``estimate`` and the Python API: the
stored loss estimator, the JSON's bands, and the bad input (several outputs, NaN labels, a window too small)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

import monitor
from monitor.cli import main
from monitor.errors import DataError
from monitor.offline.results import LossEstimate
from tests.model_zoo import build_multi_output_regressor


def rows(seed: int, n: int, shift: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Inputs and the target: noise grows with |x2|, so moving x2 moves the model's error (covariate shift)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    x[:, 2] += shift
    y = x[:, 0] + 0.5 * x[:, 1] + rng.normal(size=n) * (0.2 + np.abs(x[:, 2]))
    return x, y


@pytest.fixture(scope="module")
def regressor(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from sklearn.linear_model import LinearRegression

    from monitor.model.convert import convert_estimator

    x, y = rows(0, 800, 0.0)
    return convert_estimator(LinearRegression().fit(x, y), 3, tmp_path_factory.mktemp("reg") / "reg.onnx")


@pytest.fixture(scope="module")
def reference_json(regressor: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    x, y = rows(1, 1200, 0.0)
    y[:100] = np.nan  # rows without a true value are left out of the fit
    out = tmp_path_factory.mktemp("ref") / "ref.json"
    ref = monitor.reference(regressor, x, labels=y, flicker_copies=4, out=out)
    assert ref.fit is None and ref.loss_fit is not None and ref.loss_fit.n == 1100
    return out


def test_the_api_estimates_a_shifted_window_from_the_stored_fit(regressor: Path, reference_json: Path) -> None:
    x, y = rows(2, 800, 1.0)
    est = monitor.estimate(regressor, x, reference_json, labels=y, flicker_copies=4)
    assert isinstance(est, LossEstimate) and est.method == "gbdt"  # the default
    assert est.realized_mae is not None and est.realized_rmse is not None and est.n_labelled == 800
    for band, realized, reference in ((est.mae, est.realized_mae, est.reference_mae),
                                      (est.rmse, est.realized_rmse, est.reference_rmse)):  # fmt: skip
        assert band["lower"] <= realized <= band["upper"], (band, realized)
        assert abs(band["estimate"] - realized) < 0.5 * abs(reference - realized)
    assert set(est.methods) == {"iw", "dle", "dr", "gbdt"}


def test_the_cli_writes_mae_and_rmse(regressor: Path, reference_json: Path, tmp_path: Path) -> None:
    x, _ = rows(3, 400, 1.0)
    data = tmp_path / "window.csv"
    np.savetxt(data, x, delimiter=",")
    out = tmp_path / "est.json"
    argv = ["estimate", "--model", str(regressor), "--data", str(data), "--reference", str(reference_json)]
    assert main([*argv, "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    for key in ("mae", "rmse"):
        assert doc[key]["lower"] <= doc[key]["estimate"] <= doc[key]["upper"]
        assert doc[key]["estimate"] > doc["reference"][key]  # the window's error grew with |x2|
    assert doc["method"] == "gbdt" and doc["domain"]["auc"] > 0.6
    assert main([*argv, "--json", str(out), "--method", "dle"]) == 0
    assert json.loads(out.read_text())["method"] == "dle"
    small = tmp_path / "small.csv"
    np.savetxt(small, x[:20], delimiter=",")
    argv[argv.index(str(data))] = str(small)
    assert main([*argv, "--json", str(tmp_path / "small.json")]) == 2  # too small: refused, nothing written
    assert not (tmp_path / "small.json").exists()


def test_reference_labels_of_a_regressor_on_the_cli(regressor: Path, tmp_path: Path) -> None:
    x, y = rows(4, 300, 0.0)
    data, labels, out = tmp_path / "ref.csv", tmp_path / "y.csv", tmp_path / "ref.json"
    np.savetxt(data, x, delimiter=",")
    np.savetxt(labels, y)
    argv = ["reference", "--model", str(regressor), "--data", str(data), "--labels", str(labels)]
    assert main([*argv, "--out", str(out), "--flicker-copies", "4"]) == 0
    doc = json.loads(out.read_text())
    assert doc["loss_estimator"]["n"] == 300 and "accuracy_estimator" not in doc


def test_bad_input_is_refused_in_one_line(regressor: Path, reference_json: Path, tmp_path: Path) -> None:
    zoo = build_multi_output_regressor(tmp_path)
    x = np.random.default_rng(5).normal(size=(60, 3)) * 10 + 100
    with pytest.raises(DataError, match="2 regression outputs per row; .* single-output regressor"):
        monitor.reference(zoo.path, x, labels=np.ones(60), flicker_copies=4)
    with pytest.raises(DataError, match="at least 50"):
        monitor.estimate(regressor, rows(6, 40, 0.0)[0], reference_json, flicker_copies=4)
    plain = monitor.reference(regressor, rows(7, 200, 0.0)[0], flicker_copies=4)
    with pytest.raises(DataError, match="no fitted loss estimator; build it with the true values"):
        monitor.estimate(regressor, rows(8, 100, 0.0)[0], plain)
    with pytest.raises(DataError, match="not a regressor's"):
        monitor.estimate(regressor, rows(8, 100, 0.0)[0], reference_json, method="atc")
