"""Per segment, the label-free estimate compares with its own segment's reference performance
(monitor/accuracy/segments.py, by_segment.py): the labelled reference records each segment's accuracy (a
regressor's MAE), ``estimate`` reports each segment's estimate beside it, and ``HarmonicErrorRise`` reads it.

A logistic regression on two Gaussian blobs; segment "easy" holds rows far from the decision boundary (about
99 % right), "hard" rows near it (about 65 %). The model-wide accuracy lies between: against it, "hard" would look
harmful and "easy" fine whatever happened to them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from numpy.typing import NDArray
from sklearn.linear_model import LinearRegression, LogisticRegression

import monitor
from monitor.accuracy import EstimatorFit
from monitor.accuracy.regression import LossFit, fit_loss
from monitor.accuracy.segments import MIN_SEGMENT_LABELS, segment_accuracy, segment_error
from monitor.cli import main
from monitor.runtime.accuracy_watch import error_condition
from tests.unit.onnx_graphs import sklearn_to_onnx

#: the frames' feature columns, in the model's order
NAMES = {"feature_names": ("x0", "x1")}


def rows(seed: int, n: int, segment: str) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Rows of one segment: class ±1 blobs, "hard" squeezed onto the boundary x0 + x1 = 0."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, size=n)
    spread = 0.35 if segment == "hard" else 1.0
    centre = 0.1 if segment == "hard" else 2.0
    x = rng.normal(size=(n, 2)) * spread + np.where(y[:, None] == 1, centre, -centre)
    return x, y


def frame(seed: int, n: int) -> pd.DataFrame:
    parts = []
    for k, segment in enumerate(("easy", "hard")):
        x, y = rows(seed + k, n, segment)
        parts.append(pd.DataFrame({"x0": x[:, 0], "x1": x[:, 1], "seg": segment, "y": y}))
    return pd.concat(parts, ignore_index=True)


@pytest.fixture(scope="module")
def labelled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("estimate_segments")
    train = frame(0, 400)
    model = sklearn_to_onnx(
        tmp / "clf.onnx", LogisticRegression().fit(train[["x0", "x1"]], train["y"]), 2, zipmap=False
    )
    ref = frame(10, 300)
    out = tmp / "reference.json"
    monitor.reference(
        model, ref[["x0", "x1", "seg"]], labels=ref["y"].to_numpy(), segment_column="seg", out=out, **NAMES
    )
    return model, out


def test_the_labelled_reference_records_each_segments_accuracy(labelled: tuple[Path, Path]) -> None:
    doc = json.loads(labelled[1].read_text(encoding="utf-8"))
    fit = EstimatorFit.from_dict(doc["accuracy_estimator"])
    assert set(fit.segments) == {"easy", "hard"}
    easy, hard = fit.reference_of("easy"), fit.reference_of("hard")
    assert easy[0] > 0.95 and hard[0] < 0.8 and easy[2] and hard[2], fit.segments
    assert fit.reference_of("elsewhere") == (fit.accuracy, fit.n, False)
    assert EstimatorFit.from_dict(fit.to_dict()).segments == fit.segments


def test_estimate_compares_each_segment_with_its_own_reference(labelled: tuple[Path, Path], tmp_path: Path) -> None:
    model, reference = labelled
    data = frame(20, 300)
    est = monitor.estimate(model, data[["x0", "x1", "seg"]], reference, segment_column="seg", labels=data["y"])
    by = est.by_segment()
    assert list(by.index) == ["easy", "hard"]
    fit = est.fit
    assert fit is not None
    for name in ("easy", "hard"):
        row = by.loc[name]
        assert row["own_reference"] and row["reference_accuracy"] == pytest.approx(fit.reference_of(name)[0])
        assert row["lower"] <= row["realized"] <= row["upper"], row.to_dict()
        assert not row["below_reference"]  # no shift: each segment sits at its own reference accuracy
    assert by.loc["hard", "estimate"] < est.reference_accuracy < by.loc["easy", "estimate"]
    # the command: a CSV with the segment column
    csv = tmp_path / "data.csv"
    data[["x0", "x1", "seg"]].to_csv(csv, index=False)
    out = tmp_path / "est.json"
    argv = ["estimate", "--model", str(model), "--reference", str(reference), "--data", str(csv)]
    assert main([*argv, "--segment-column", "seg", "--json", str(out)]) == 0
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["segments"]["hard"]["estimate"] == pytest.approx(by.loc["hard", "estimate"], abs=0.02)
    assert doc["segments"]["hard"]["own_reference"] is True


def test_segments_with_too_few_labelled_rows_get_no_value_of_their_own() -> None:
    n = MIN_SEGMENT_LABELS
    names = np.array(["a"] * n + ["b"] * (n - 1))
    correct = np.r_[np.ones(n), np.zeros(n - 1)]
    assert segment_accuracy(correct, np.ones(2 * n - 1, bool), names) == {"a": {"accuracy": 1.0, "n": float(n)}}
    err = np.r_[np.full(n, 2.0), np.full(n - 1, 5.0)]
    assert segment_error(err, names) == {"a": {"mae": 2.0, "rmse": 2.0, "n": float(n)}}


def test_a_regressors_segments_read_their_own_reference_error(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(600, 2))
    seg = np.where(np.arange(600) < 300, "calm", "noisy")
    y = x @ np.array([1.0, 2.0]) + rng.normal(size=600) * np.where(seg == "calm", 0.1, 1.0)
    model = sklearn_to_onnx(tmp_path / "reg.onnx", LinearRegression().fit(x, y), 2)
    ref = pd.DataFrame({"x0": x[:, 0], "x1": x[:, 1], "seg": seg})
    built = monitor.reference(model, ref, labels=y, segment_column="seg", model_kind="regressor", **NAMES)
    fit = built.loss_fit
    assert fit is not None and set(fit.segments) == {"calm", "noisy"}
    assert fit.reference_of("calm")[0] < 0.2 < fit.reference_of("noisy")[0]
    assert LossFit.from_dict(fit.to_dict()).segments == fit.segments
    est = monitor.estimate(model, ref, built, segment_column="seg", model_kind="regressor")
    by = est.by_segment()
    assert by.loc["calm", "estimate"] < by.loc["noisy", "estimate"] and by["own_reference"].all()
    # HarmonicErrorRise's condition: a calm segment's MAE of 0.5 is far above its own reference, not the model's
    result = {"n": 500, "method": "iw", "mae": {"estimate": 0.5, "lower": 0.45, "upper": 0.55}}
    holds, _, detail = error_condition(fit, result, 0.5, 100, "calm")
    assert holds and "segment calm's reference MAE" in detail
    assert not error_condition(fit, result, 0.5, 100, "noisy")[0]
    plain = fit_loss(x, x @ np.array([1.0, 2.0]), y, seed=0)
    assert plain.segments == {} and plain.reference_of("calm")[3] is False
