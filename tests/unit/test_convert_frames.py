"""``convert`` on a pipeline fitted on a DataFrame (a ColumnTransformer with a string column): one ONNX input per
column, typed from the encoders' categories or from ``--sample``; the converted model scores the DataFrame itself."""

from __future__ import annotations

from pathlib import Path

import joblib
import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

import monitor
from monitor.cli import main
from monitor.model.onnx import OnnxModel


def _frame(n: int = 200) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {
            "age": rng.normal(40, 10, n),
            "income": rng.normal(50, 15, n),
            "city": rng.choice(["paris", "lyon", "nice"], n),
            "rooms": rng.integers(1, 5, n),
        }
    )
    return df, ((df.age > 40) ^ (df.city == "paris")).astype(int).to_numpy()


def _pipeline(columns_by_name: bool = True) -> tuple[object, pd.DataFrame]:
    df, y = _frame()
    num, cat = (["age", "income"], ["city", "rooms"]) if columns_by_name else ([0, 1], [2, 3])
    pipe = make_pipeline(
        ColumnTransformer([("num", StandardScaler(), num), ("cat", OneHotEncoder(handle_unknown="ignore"), cat)]),
        LogisticRegression(),
    )
    pipe.fit(df if columns_by_name else df.to_numpy(), y)
    return pipe, df


@pytest.mark.parametrize("with_sample", [False, True])
def test_a_dataframe_pipeline_converts_to_one_input_per_column_and_scores_the_frame(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], with_sample: bool
) -> None:
    pipe, df = _pipeline()
    joblib.dump(pipe, tmp_path / "m.joblib")
    args = ["convert", "--sklearn", str(tmp_path / "m.joblib"), "--out", str(tmp_path / "m.onnx")]
    if with_sample:
        df.head(20).to_parquet(tmp_path / "sample.parquet")
        args += ["--sample", str(tmp_path / "sample.parquet")]
    assert main(args) == 0
    assert "age (float), income (float), city (string), rooms (int64)" in capsys.readouterr().err
    model = OnnxModel(str(tmp_path / "m.onnx"))
    assert [s.name for s in model.signature.inputs] == ["age", "income", "city", "rooms"]
    scores = monitor.score(tmp_path / "m.onnx", df, flicker_copies=4)
    np.testing.assert_array_equal(scores["class"].to_numpy(), pipe.predict(df))  # type: ignore[attr-defined]


def test_a_column_transformer_fitted_on_an_array_says_what_to_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pipe, _ = _pipeline(columns_by_name=False)
    joblib.dump(pipe, tmp_path / "m.joblib")
    assert main(["convert", "--sklearn", str(tmp_path / "m.joblib"), "--out", str(tmp_path / "m.onnx")]) == 2
    err = capsys.readouterr().err
    assert "fitted without column names" in err and "--sample FILE" in err and not (tmp_path / "m.onnx").exists()


def test_a_sample_missing_a_training_column_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pipe, df = _pipeline()
    joblib.dump(pipe, tmp_path / "m.joblib")
    df.drop(columns=["city"]).to_csv(tmp_path / "sample.csv", index=False)
    args = ["convert", "--sklearn", str(tmp_path / "m.joblib"), "--out", str(tmp_path / "m.onnx")]
    assert main([*args, "--sample", str(tmp_path / "sample.csv")]) == 2
    assert "--sample lacks columns 'city'" in capsys.readouterr().err
