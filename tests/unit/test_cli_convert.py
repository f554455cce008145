"""``harmonic-monitor convert``: joblib → ONNX with skl2onnx, then ``score`` on the result."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import joblib
import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LinearRegression, LogisticRegression

from monitor.cli import main
from monitor.errors import ModelError
from monitor.model.convert import convert_estimator
from tests.unit.onnx_graphs import training_blobs


@pytest.fixture(scope="module")
def classifier() -> LogisticRegression:
    x, y = training_blobs(seed=0)
    return LogisticRegression(random_state=0).fit(x, y)


@pytest.fixture
def joblib_file(tmp_path: Path, classifier: LogisticRegression) -> Path:
    path = tmp_path / "clf.joblib"
    joblib.dump(classifier, path)
    return path


def convert(src: Path, out: Path, *extra: str) -> int:
    return main(["convert", "--sklearn", str(src), "--out", str(out), *extra])


def test_convert_round_trip_scores_like_sklearn(
    tmp_path: Path, joblib_file: Path, classifier: LogisticRegression
) -> None:
    assert convert(joblib_file, tmp_path / "clf.onnx") == 0
    rows, _ = training_blobs(seed=1, n_rows=20)
    np.save(tmp_path / "rows.npy", rows)
    args = ["--model", str(tmp_path / "clf.onnx"), "--data", str(tmp_path / "rows.npy")]
    assert main(["score", *args, "--out", str(tmp_path / "out.csv")]) == 0
    with (tmp_path / "out.csv").open(newline="", encoding="utf-8") as fh:
        out = np.array([[float(c) for c in r] for r in list(csv.reader(fh))[1:]])
    np.testing.assert_array_equal(out[:, 3], classifier.predict(rows))
    np.testing.assert_allclose(out[:, 4], classifier.predict_proba(rows).max(axis=1), atol=1e-5)


def test_convert_regressor_round_trip_has_no_probability_column(tmp_path: Path) -> None:
    x, y = training_blobs(seed=0)
    joblib.dump(LinearRegression().fit(x, y.astype(float)), tmp_path / "reg.joblib")
    assert convert(tmp_path / "reg.joblib", tmp_path / "reg.onnx") == 0
    np.save(tmp_path / "rows.npy", x[:5])
    args = ["--model", str(tmp_path / "reg.onnx"), "--data", str(tmp_path / "rows.npy")]
    main(["score", *args, "--out", str(tmp_path / "out.csv")])
    lines = (tmp_path / "out.csv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "gamma,flicker,p_adj,predicted_class,predicted_value,gamma_se"
    reg = joblib.load(tmp_path / "reg.joblib")
    predicted = [float(line.split(",")[4]) for line in lines[1:]]
    np.testing.assert_allclose(predicted, reg.predict(x[:5]), rtol=1e-5, atol=1e-5)


def test_convert_warns_that_loading_a_pickle_runs_code(
    tmp_path: Path, joblib_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    convert(joblib_file, tmp_path / "clf.onnx")
    assert "runs code from the file; only convert files you trust" in capsys.readouterr().err


def test_convert_reports_the_written_file(
    tmp_path: Path, joblib_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    convert(joblib_file, tmp_path / "sub" / "clf.onnx")
    assert "clf.onnx (LogisticRegression, 2 features)" in capsys.readouterr().err
    assert (tmp_path / "sub" / "clf.onnx").stat().st_size > 0


def test_convert_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert convert(tmp_path / "absent.joblib", tmp_path / "out.onnx") == 2
    assert "absent.joblib' does not exist (expected a joblib file)" in capsys.readouterr().err


def test_convert_does_not_load_a_missing_file_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    convert(tmp_path / "absent.joblib", tmp_path / "out.onnx")
    assert "runs code" not in capsys.readouterr().err


def test_convert_non_estimator_exits_2_naming_its_type(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    joblib.dump({"weights": [1.0, 2.0]}, tmp_path / "dict.joblib")
    assert convert(tmp_path / "dict.joblib", tmp_path / "out.onnx", "--n-features", "2") == 2
    assert "holds a dict, not a scikit-learn estimator" in capsys.readouterr().err


def test_convert_unreadable_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "junk.joblib").write_bytes(b"not a pickle")
    assert convert(tmp_path / "junk.joblib", tmp_path / "out.onnx") == 2
    assert "is not a joblib file: expected a scikit-learn model saved with joblib.dump" in capsys.readouterr().err


def test_convert_writes_nothing_on_error(tmp_path: Path) -> None:
    joblib.dump([1, 2, 3], tmp_path / "list.joblib")
    convert(tmp_path / "list.joblib", tmp_path / "out.onnx")
    assert not (tmp_path / "out.onnx").exists()


class _Unregistered:
    """Looks like an estimator but skl2onnx has no converter for it."""

    n_features_in_ = 2

    def predict(self, x: object) -> None:
        raise NotImplementedError


@pytest.mark.parametrize("classes", [2, 3])
def test_convert_takes_a_hist_gradient_boosting_classifier(tmp_path: Path, classes: int) -> None:
    """skl2onnx hands onnx numpy booleans for these trees' missing-value directions; convert passes them as ints."""
    from sklearn.datasets import make_classification

    x, y = make_classification(n_samples=600, n_features=6, n_informative=4, n_classes=classes, random_state=0)
    model = HistGradientBoostingClassifier(max_iter=15, random_state=0).fit(x, y)
    joblib.dump(model, tmp_path / "hgb.joblib")
    assert convert(tmp_path / "hgb.joblib", tmp_path / "hgb.onnx") == 0
    np.save(tmp_path / "rows.npy", x[:50])
    args = ["--model", str(tmp_path / "hgb.onnx"), "--data", str(tmp_path / "rows.npy")]
    assert main(["score", *args, "--out", str(tmp_path / "out.csv")]) == 0
    with (tmp_path / "out.csv").open(newline="", encoding="utf-8") as fh:
        out = np.array([[float(c) for c in r] for r in list(csv.reader(fh))[1:]])
    np.testing.assert_array_equal(out[:, 3], model.predict(x[:50]))
    np.testing.assert_allclose(out[:, 4], model.predict_proba(x[:50]).max(axis=1), atol=1e-5)


def test_a_conversion_error_is_one_short_line_with_its_cause(tmp_path: Path) -> None:
    with pytest.raises(ModelError) as info:
        convert_estimator(_Unregistered(), 2, tmp_path / "out.onnx")
    assert "\n" not in str(info.value) and len(str(info.value)) < 1200


def test_convert_estimator_unsupported_type_raises_model_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"skl2onnx cannot convert _Unregistered"):
        convert_estimator(_Unregistered(), 2, tmp_path / "out.onnx")


def test_convert_keeps_the_training_columns_names_of_a_frame_fitted_estimator(tmp_path: Path) -> None:
    import pandas as pd

    from monitor.model.onnx import OnnxModel

    x, y = training_blobs(seed=0)
    frame = pd.DataFrame(x, columns=[f"col_{j}" for j in range(x.shape[1])])
    joblib.dump(LogisticRegression(random_state=0).fit(frame, y), tmp_path / "named.joblib")
    assert convert(tmp_path / "named.joblib", tmp_path / "named.onnx") == 0
    model = OnnxModel(str(tmp_path / "named.onnx"))
    assert model.signature.plain and model.feature_names == tuple(frame.columns)
    np.save(tmp_path / "rows.npy", x)
    assert main(["reference", "--model", str(tmp_path / "named.onnx"), "--data", str(tmp_path / "rows.npy"),
                 "--out", str(tmp_path / "ref.json")]) == 0  # fmt: skip
    doc = json.loads((tmp_path / "ref.json").read_text(encoding="utf-8"))
    assert doc["reference"]["feature_names"] == list(frame.columns)
