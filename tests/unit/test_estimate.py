"""Accuracy without labels: the estimators on real models and real bundled data, and the CLI."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.linear_model import LinearRegression, LogisticRegression

from monitor.accuracy import (
    DEFAULT_METHOD,
    METHODS,
    Calibration,
    EstimatorFit,
    estimate,
    estimate_from_scores,
    fit_estimators,
    fit_from_scores,
)
from monitor.accuracy.calibration import fit_logistic
from monitor.accuracy.estimators import atc_threshold
from monitor.cli import main
from monitor.errors import DataError
from monitor.model.onnx import OnnxModel
from monitor.model.standardize import Standardizer
from monitor.signals.scorer import RobustnessScorer, ScoreResult, ScoringConfig
from tests.unit.onnx_graphs import sklearn_to_onnx


@dataclass(frozen=True)
class Case:
    model: Path
    x_ref: NDArray[np.float64]
    y_ref: NDArray[np.int64]
    x_test: NDArray[np.float64]
    y_test: NDArray[np.int64]
    ref: ScoreResult
    test: ScoreResult


def _case(root: Path, name: str, x: NDArray[np.float64], y: NDArray[np.int64], estimator: Any) -> Case:
    rng = np.random.default_rng(0)
    order = rng.permutation(x.shape[0])
    n_train = int(0.4 * x.shape[0])
    n_ref = int(0.3 * x.shape[0])
    train, ref, test = order[:n_train], order[n_train : n_train + n_ref], order[n_train + n_ref :]
    estimator.fit(x[train], y[train])
    path = sklearn_to_onnx(root / f"{name}.onnx", estimator, x.shape[1], zipmap=False)
    model = OnnxModel(path)
    scorer = RobustnessScorer(model, Standardizer.fit(x[ref]), ScoringConfig(flicker_copies=16))
    return Case(path, x[ref], y[ref], x[test], y[test], scorer.score(x[ref]), scorer.score(x[test]))


@pytest.fixture(scope="module")
def cancer(tmp_path_factory: pytest.TempPathFactory) -> Case:
    """Breast cancer (569 rows), a logistic regression on standardized features: about 96 % accurate."""
    data = load_breast_cancer()
    x = (data.data - data.data.mean(axis=0)) / data.data.std(axis=0)
    return _case(tmp_path_factory.mktemp("est"), "cancer_lr", x, data.target, LogisticRegression(C=0.05))


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> Case:
    """Digits (1,797 rows, 10 classes), a small GBDT: about 90 % accurate."""
    data = load_digits()
    gbdt = GradientBoostingClassifier(n_estimators=15, max_depth=2, random_state=0)
    return _case(tmp_path_factory.mktemp("est"), "digits_gbdt", data.data / 16.0, data.target, gbdt)


def _realized(scores: ScoreResult, y: NDArray[np.int64], rows: NDArray[np.bool_] | slice = slice(None)) -> float:
    return float(np.mean(scores.predicted_class[rows] == y[rows]))


def _take(scores: ScoreResult, rows: NDArray[np.bool_]) -> ScoreResult:
    return ScoreResult(**{k: getattr(scores, k)[rows] for k in ScoreResult.__dataclass_fields__})


@pytest.mark.parametrize("name", ["cancer", "digits"])
def test_no_shift_estimates_near_the_realized_accuracy_and_intervals_cover(name: str, request: Any) -> None:
    case: Case = request.getfixturevalue(name)
    fit = fit_from_scores(case.ref, case.y_ref, seed=0)
    assert fit.accuracy == pytest.approx(_realized(case.ref, case.y_ref))
    out = estimate_from_scores(fit, case.test)
    realized = _realized(case.test, case.y_test)
    assert out["n"] == case.x_test.shape[0]
    assert set(out["methods"]) == set(METHODS)
    for method, r in out["methods"].items():
        assert r["lower"] <= r["estimate"] <= r["upper"], method
        assert abs(r["estimate"] - realized) < 0.05, (method, r, realized)
        assert r["lower"] <= realized <= r["upper"], (method, r, realized)


def test_a_strong_covariate_shift_moves_the_estimates_toward_the_realized_accuracy(digits: Case) -> None:
    """Rows selected on the model's hardest side: accuracy drops by many points, the estimates follow."""
    fit = fit_from_scores(digits.ref, digits.y_ref, seed=0)
    # the quantile of the confidence is a feature-quantile selection in the model's own coordinates
    hard = digits.test.probability < np.quantile(digits.test.probability, 0.3)
    shifted = _take(digits.test, hard)
    realized = _realized(digits.test, digits.y_test, hard)
    assert fit.accuracy - realized > 0.10  # the shift is strong
    out = estimate_from_scores(fit, shifted)
    for method in ("harmonic", "ac", "atc", "doc"):
        r = out["methods"][method]
        assert abs(r["estimate"] - realized) < abs(fit.accuracy - realized), (method, r, realized)
        assert r["estimate"] < fit.accuracy - 0.05
    h = out["methods"]["harmonic"]
    assert h["lower"] <= realized <= h["upper"]


def test_a_feature_quantile_shift_on_cancer(cancer: Case) -> None:
    fit = fit_from_scores(cancer.ref, cancer.y_ref, seed=0)
    # the model's hardest cases sit near its boundary: select the middle of its most important feature
    z = cancer.x_test[:, 27]
    rows = np.abs(z - np.median(z)) < np.quantile(np.abs(z - np.median(z)), 0.4)
    out = estimate_from_scores(fit, _take(cancer.test, rows))
    realized = _realized(cancer.test, cancer.y_test, rows)
    h = out["methods"]["harmonic"]
    assert h["lower"] <= realized <= h["upper"]
    assert abs(h["estimate"] - realized) <= abs(fit.accuracy - realized) + 0.02


def test_the_fit_round_trips_through_json(digits: Case) -> None:
    fit = fit_from_scores(digits.ref, digits.y_ref, seed=1)
    doc = json.loads(json.dumps(fit.to_dict()))
    again = EstimatorFit.from_dict(doc)
    assert again.to_dict() == fit.to_dict()
    assert estimate_from_scores(again, digits.test) == estimate_from_scores(fit, digits.test)
    iso = fit_from_scores(digits.ref, digits.y_ref, calibration="isotonic")
    assert EstimatorFit.from_dict(json.loads(json.dumps(iso.to_dict()))).calibration == iso.calibration
    with pytest.raises(DataError, match="not an accuracy-estimator fit"):
        EstimatorFit.from_dict({"format": "x"})
    broken = dict(doc)
    del broken["atc"]
    with pytest.raises(DataError, match="damaged"):
        EstimatorFit.from_dict(broken)


def test_invalid_rows_tiny_windows_weights_and_regressors(cancer: Case) -> None:
    fit = fit_from_scores(cancer.ref, cancer.y_ref)
    t = cancer.test
    conf = t.probability.copy()
    conf[:5] = np.nan
    gamma = t.gamma.copy()
    gamma[5:10] = np.nan  # imputed
    out = estimate(fit, conf, gamma, t.flicker, t.p_adj)
    assert out["n_invalid"] == 5 and out["n"] == len(t) - 5
    assert not out["warnings"]
    tiny = estimate(fit, t.probability[:12], t.gamma[:12], t.flicker[:12], t.p_adj[:12], method="atc")
    assert tiny["accuracy"]["method"] == "atc"
    assert tiny["warnings"] and "wide" in tiny["warnings"][0]
    assert tiny["accuracy"]["sd"] >= 0.5 / np.sqrt(12)  # the worst-case Bernoulli noise of 12 rows
    w = np.where(t.predicted_class == 1, 2.0, 1.0)
    weighted = estimate(fit, t.probability, t.gamma, t.flicker, t.p_adj, weights=w)
    assert weighted["accuracy"]["estimate"] != out["accuracy"]["estimate"]
    nan = np.full(40, np.nan)
    with pytest.raises(DataError, match="for classifiers"):
        fit_estimators(nan, nan, nan, nan, np.ones(40, dtype=bool))
    with pytest.raises(DataError, match="for classifiers"):
        estimate(fit, nan, nan, nan, nan)
    with pytest.raises(DataError, match="unknown"):
        estimate(fit, t.probability, t.gamma, t.flicker, t.p_adj, method="magic")
    with pytest.raises(DataError, match="at least"):
        fit_estimators(conf[5:15], gamma[5:15], t.flicker[5:15], t.p_adj[5:15], np.ones(10, dtype=bool))


def test_building_blocks() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(400, 2))
    y = rng.random(400) < 1 / (1 + np.exp(-(0.5 + x @ np.array([1.5, -1.0]))))
    coef, intercept = fit_logistic(x, y, c=1e6)
    ref = LogisticRegression(C=1e6, tol=1e-10, max_iter=10000).fit(x, y)
    assert np.allclose(coef, ref.coef_[0], atol=1e-4) and intercept == pytest.approx(ref.intercept_[0], abs=1e-4)
    assert fit_logistic(x, np.ones(400, dtype=bool))[0].tolist() == [0.0, 0.0]
    conf = np.array([0.9, 0.9, 0.9, 0.9, 0.6, 0.5])
    t, frac = atc_threshold(conf, 0.5)  # 3 of 6 above t: ties at 0.9 share out
    assert t == 0.9 and (conf > t).mean() + frac * (conf == t).mean() == pytest.approx(0.5)
    cal = Calibration.fit(conf, np.array([True, True, True, False, False, False]))
    assert np.all(np.diff(cal.apply(np.linspace(0.5, 1, 11))) >= 0)


def test_cli_end_to_end(cancer: Case, tmp_path: Path) -> None:
    ref_x, ref_y, data = tmp_path / "ref.npy", tmp_path / "labels.csv", tmp_path / "data.csv"
    np.save(ref_x, cancer.x_ref)
    np.savetxt(ref_y, cancer.y_ref, fmt="%d")
    np.savetxt(data, cancer.x_test, delimiter=",")
    out = tmp_path / "out.json"
    args = ["estimate", "--model", str(cancer.model), "--data", str(data), "--flicker-copies", "8", "--json", str(out)]
    code = main([*args, "--reference-data", str(ref_x), "--reference-labels", str(ref_y), "--method", "doc"])
    assert code == 0
    doc = json.loads(out.read_text())
    assert {"n", "accuracy", "methods"} <= set(doc)
    assert doc["n"] == cancer.x_test.shape[0]
    assert set(doc["accuracy"]) >= {"estimate", "lower", "upper", "method"} and doc["accuracy"]["method"] == "doc"
    for r in doc["methods"].values():
        assert {"estimate", "lower", "upper"} <= set(r)
    assert abs(doc["accuracy"]["estimate"] - _realized(cancer.test, cancer.y_test)) < 0.05
    assert "cannot see a change of the label given the inputs" in doc["caveats"][0]
    assert doc["domain"]["inputs"] is True and 0 < doc["domain"]["ess"] <= doc["reference_n"]
    # a reference JSON holding a stored fit: used without --reference-data
    main(["reference", "--model", str(cancer.model), "--data", str(ref_x), "--out", str(tmp_path / "r.json")])
    ref_doc = json.loads((tmp_path / "r.json").read_text())
    ref_doc["accuracy_estimator"] = fit_from_scores(cancer.ref, cancer.y_ref, inputs=cancer.x_ref).to_dict()
    (tmp_path / "r.json").write_text(json.dumps(ref_doc))
    assert main([*args, "--reference", str(tmp_path / "r.json")]) == 0
    again = json.loads(out.read_text())
    assert (
        DEFAULT_METHOD == "auto"
        and again["accuracy"]["method"] == "iw"
        and again["fit"]["source"].endswith("(accuracy_estimator)")
    )
    # no fit anywhere, and a regressor: refused with a reason
    assert (
        main(["reference", "--model", str(cancer.model), "--data", str(ref_x), "--out", str(tmp_path / "p.json")]) == 0
    )
    assert main([*args, "--reference", str(tmp_path / "p.json")]) == 2
    reg = sklearn_to_onnx(tmp_path / "reg.onnx", LinearRegression().fit(cancer.x_ref, cancer.y_ref), 30)
    bad = ["estimate", "--model", str(reg), "--data", str(data), "--json", str(out)]
    assert main([*bad, "--reference-data", str(ref_x), "--reference-labels", str(ref_y)]) == 2
