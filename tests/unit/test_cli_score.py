"""``harmonic-monitor score``: the offline CSV contract, end to end on scikit-learn models converted with skl2onnx."""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from sklearn.linear_model import LinearRegression, LogisticRegression

from monitor.cli import build_parser, main
from tests import model_zoo
from tests.unit.onnx_graphs import sklearn_to_onnx

N_FEATURES = 3
#: very different feature scales, so that standardized and raw radii differ a lot
FEATURE_SCALE = np.array([1.0, 20.0, 0.05])
CLASSIFIER_HEADER = ["gamma", "flicker", "p_adj", "predicted_class", "probability", "margin", "gamma_se"]
REGRESSOR_HEADER = ["gamma", "flicker", "p_adj", "predicted_class", "predicted_value", "gamma_se"]
#: every option of the documented `score` contract
CONTRACT_OPTIONS = [
    "--model",
    "--data",
    "--reference",
    "--radius",
    "--space",
    "--ball",
    "--output",
    "--flicker-copies",
    "--sigma",
    "--steps",
    "--seed",
    "--out",
]


@dataclass(frozen=True)
class Files:
    classifier: Path
    regressor: Path
    data_csv: Path  # no header
    data_csv_header: Path
    data_npy: Path
    rows: NDArray[np.float64]
    estimator: LogisticRegression


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Files:
    """A seeded 3-class logistic regression and a linear regressor on 3 features, plus 12 rows to score."""
    root = tmp_path_factory.mktemp("score_cli")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, N_FEATURES)) * FEATURE_SCALE
    z = x / FEATURE_SCALE
    y = (z[:, 0] + z[:, 1] > 0.3).astype(int) + (z[:, 2] > 0.5).astype(int)
    clf = LogisticRegression(max_iter=1000, random_state=0).fit(x, y)
    reg = LinearRegression().fit(x, z @ np.array([1.0, -2.0, 0.5]))
    rows = rng.normal(size=(12, N_FEATURES)) * FEATURE_SCALE
    f = Files(
        classifier=sklearn_to_onnx(root / "clf.onnx", clf, N_FEATURES, zipmap=False),
        regressor=sklearn_to_onnx(root / "reg.onnx", reg, N_FEATURES),
        data_csv=root / "rows.csv",
        data_csv_header=root / "rows_header.csv",
        data_npy=root / "rows.npy",
        rows=rows,
        estimator=clf,
    )
    np.savetxt(f.data_csv, rows, delimiter=",")
    np.savetxt(f.data_csv_header, rows, delimiter=",", header="a,b,c", comments="")
    np.save(f.data_npy, rows)
    return f


def score(model: Path, data: Path, out: Path, *extra: str) -> int:
    return main(["score", "--model", str(model), "--data", str(data), "--out", str(out), *extra])


def read_output(path: Path) -> tuple[list[str], NDArray[np.float64]]:
    with path.open(newline="", encoding="utf-8") as fh:
        records = list(csv.reader(fh))
    return records[0], np.array([[float(c) for c in r] for r in records[1:]], dtype=np.float64)


def test_score_classifier_header_is_exact(files: Files, tmp_path: Path) -> None:
    assert score(files.classifier, files.data_csv, tmp_path / "out.csv") == 0
    assert (tmp_path / "out.csv").read_text(encoding="utf-8").splitlines()[0] == ",".join(CLASSIFIER_HEADER)


def test_score_regressor_header_has_no_probability(files: Files, tmp_path: Path) -> None:
    assert score(files.regressor, files.data_csv, tmp_path / "out.csv") == 0
    assert (tmp_path / "out.csv").read_text(encoding="utf-8").splitlines()[0] == ",".join(REGRESSOR_HEADER)


@pytest.mark.parametrize("model", ["classifier", "regressor"])
def test_score_writes_one_row_per_input_row(files: Files, tmp_path: Path, model: str) -> None:
    score(getattr(files, model), files.data_csv, tmp_path / "out.csv")
    header, values = read_output(tmp_path / "out.csv")
    assert values.shape == (files.rows.shape[0], len(header))


def test_score_output_cells_are_numbers_only(files: Files, tmp_path: Path) -> None:
    score(files.classifier, files.data_csv, tmp_path / "out.csv")
    with (tmp_path / "out.csv").open(newline="", encoding="utf-8") as fh:
        cells = [c for record in list(csv.reader(fh))[1:] for c in record]
    assert all(np.isfinite(float(c)) for c in cells)


def test_score_predicted_class_matches_sklearn_in_input_order(files: Files, tmp_path: Path) -> None:
    score(files.classifier, files.data_csv, tmp_path / "out.csv")
    _, values = read_output(tmp_path / "out.csv")
    expected = files.estimator.predict(files.rows)
    assert len(set(expected.tolist())) > 1  # otherwise order would not be tested
    np.testing.assert_array_equal(values[:, 3], expected)


def test_score_probability_matches_sklearn_predict_proba(files: Files, tmp_path: Path) -> None:
    score(files.classifier, files.data_csv, tmp_path / "out.csv")
    _, values = read_output(tmp_path / "out.csv")
    np.testing.assert_allclose(values[:, 4], files.estimator.predict_proba(files.rows).max(axis=1), atol=1e-5)


def test_score_margin_is_top_one_minus_top_two_of_sklearn_predict_proba(files: Files, tmp_path: Path) -> None:
    score(files.classifier, files.data_csv, tmp_path / "out.csv")
    header, values = read_output(tmp_path / "out.csv")
    assert header.index("margin") == header.index("probability") + 1
    top = np.sort(files.estimator.predict_proba(files.rows), axis=1)
    expected = top[:, -1] - top[:, -2]
    assert expected.std() > 0.01  # real, varied values
    np.testing.assert_allclose(values[:, 5], expected, atol=1e-5)


def test_score_margin_of_a_binary_classifier_is_two_probability_minus_one(files: Files, tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(200, N_FEATURES))
    clf = LogisticRegression(random_state=0).fit(x, (x[:, 0] - x[:, 1] > 0).astype(int))
    model = sklearn_to_onnx(tmp_path / "binary.onnx", clf, N_FEATURES, zipmap=False)
    rows = rng.normal(size=(30, N_FEATURES))
    rows[4, 0] = np.nan  # an invalid row: probability and margin both NaN
    np.save(tmp_path / "binary.npy", rows)
    score(model, tmp_path / "binary.npy", tmp_path / "out.csv")
    header, values = read_output(tmp_path / "out.csv")
    probability, margin = values[:, header.index("probability")], values[:, header.index("margin")]
    assert np.isnan(probability[4]) and np.isnan(margin[4])
    valid = np.arange(30) != 4
    np.testing.assert_allclose(margin[valid], 2.0 * probability[valid] - 1.0, atol=1e-6)
    assert (margin[valid] > 0.0).all() and margin[valid].std() > 0.01


def test_score_flicker_of_a_linear_regressor_is_near_zero_with_the_defaults(files: Files, tmp_path: Path) -> None:
    # the tolerance is a fraction of the output's reference IQR, not 0.1 in the output's units
    score(files.regressor, files.data_csv, tmp_path / "out.csv", "--flicker-copies", "256")
    _, values = read_output(tmp_path / "out.csv")
    assert values[:, 1].mean() < 0.03  # 2Φ(−1.349·0.1/0.05) = 0.007 for any exactly linear model


def test_score_regressor_reports_no_class(files: Files, tmp_path: Path) -> None:
    score(files.regressor, files.data_csv, tmp_path / "out.csv")
    _, values = read_output(tmp_path / "out.csv")
    np.testing.assert_array_equal(values[:, 3], -1.0)


def test_score_skips_a_header_row_in_the_input_csv(files: Files, tmp_path: Path) -> None:
    score(files.classifier, files.data_csv, tmp_path / "plain.csv")
    score(files.classifier, files.data_csv_header, tmp_path / "header.csv")
    assert (tmp_path / "header.csv").read_bytes() == (tmp_path / "plain.csv").read_bytes()


def _numbered_header_csv(files: Files, tmp_path: Path) -> Path:
    """500 rows of floats under a header row of column numbers, as pandas writes a frame without names."""
    rows = np.random.default_rng(1).normal(size=(500, N_FEATURES)) * FEATURE_SCALE
    path = tmp_path / "numbered.csv"
    np.savetxt(path, rows, delimiter=",", header="1,2,3", comments="")
    return path


def test_score_takes_a_numbered_first_row_for_a_header_and_says_so(
    files: Files, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert score(files.classifier, _numbered_header_csv(files, tmp_path), tmp_path / "out.csv") == 0
    err = capsys.readouterr().err
    assert read_output(tmp_path / "out.csv")[1].shape[0] == 500
    assert "read 500 rows × 3 columns from" in err
    assert "header row detected: 1,2,3 (use --header no to read it as data)" in err
    assert "scored 500 of 500 rows" in err


def test_score_header_no_reads_a_numbered_first_row_as_data(files: Files, tmp_path: Path) -> None:
    data = _numbered_header_csv(files, tmp_path)
    assert score(files.classifier, data, tmp_path / "out.csv", "--header", "no") == 0
    assert read_output(tmp_path / "out.csv")[1].shape[0] == 501


def test_score_reads_npy_like_csv(files: Files, tmp_path: Path) -> None:
    score(files.classifier, files.data_csv, tmp_path / "csv.csv")
    score(files.classifier, files.data_npy, tmp_path / "npy.csv")
    _, from_csv = read_output(tmp_path / "csv.csv")
    _, from_npy = read_output(tmp_path / "npy.csv")
    # np.savetxt writes 18 significant digits, so the CSV round trip is exact to float32 input precision
    np.testing.assert_allclose(from_npy, from_csv, rtol=1e-6, atol=1e-9)


def _rows_with_nan(files: Files, tmp_path: Path) -> Path:
    rows = files.rows.copy()
    rows[2, 1] = np.nan
    path = tmp_path / "nan.npy"
    np.save(path, rows)
    return path


def test_score_warns_on_stderr_naming_a_nan_row(
    files: Files, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert score(files.classifier, _rows_with_nan(files, tmp_path), tmp_path / "out.csv") == 0
    assert "warning: 1 of 12 rows contain NaN or infinite values and were not scored (data rows 3)" in (
        capsys.readouterr().err
    )


def test_score_writes_nan_for_a_nan_row_and_scores_the_others(files: Files, tmp_path: Path) -> None:
    score(files.classifier, _rows_with_nan(files, tmp_path), tmp_path / "out.csv")
    _, values = read_output(tmp_path / "out.csv")
    others = np.delete(values, 2, axis=0)
    assert np.isnan(values[2]).all()
    assert np.isfinite(others).all()
    np.testing.assert_array_equal(others[:, 3], files.estimator.predict(np.delete(files.rows, 2, axis=0)))


def test_score_wrong_width_exits_2_naming_expected_and_got(
    files: Files, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    narrow = tmp_path / "narrow.csv"
    np.savetxt(narrow, files.rows[:, :2], delimiter=",")
    assert score(files.classifier, narrow, tmp_path / "out.csv") == 2
    assert "has 2 columns; the model expects 3 features" in capsys.readouterr().err


def test_score_wrong_width_names_the_header_and_how_to_drop_a_label_column(
    files: Files, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wide = tmp_path / "wide.csv"
    np.savetxt(
        wide, np.column_stack([files.rows, np.zeros(len(files.rows))]), delimiter=",", header="a,b,c,y", comments=""
    )
    assert score(files.classifier, wide, tmp_path / "out.csv") == 2
    err = capsys.readouterr().err
    assert "has 4 columns (a, b, c, y); the model expects 3 features. Was the file written for another model? " in err
    assert "Else drop the columns it does not read (labels: --labels NAME, segments: --segment-column NAME" in err


def test_score_missing_model_exits_2_with_a_clear_message(
    files: Files, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert score(tmp_path / "absent.onnx", files.data_csv, tmp_path / "out.csv") == 2
    assert "error: model file '" in capsys.readouterr().err


def test_score_missing_data_exits_2_with_a_clear_message(
    files: Files, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert score(files.classifier, tmp_path / "absent.csv", tmp_path / "out.csv") == 2
    err = capsys.readouterr().err.splitlines()[-1]  # after the model's load log line
    assert err.startswith("error: data file '") and "absent.csv' does not exist" in err


def test_score_does_not_write_output_on_error(files: Files, tmp_path: Path) -> None:
    score(files.classifier, tmp_path / "absent.csv", tmp_path / "out.csv")
    assert not (tmp_path / "out.csv").exists()


def test_score_rejects_a_batch_size_below_one(files: Files, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert score(files.classifier, files.data_csv, tmp_path / "out.csv", "--batch-size", "0") == 2
    assert "error: --batch-size must be >= 1; got 0" in capsys.readouterr().err


def test_score_raw_space_changes_gamma(files: Files, tmp_path: Path) -> None:
    score(files.classifier, files.data_csv, tmp_path / "std.csv", "--space", "standardized")
    score(files.classifier, files.data_csv, tmp_path / "raw.csv", "--space", "raw")
    _, standardized = read_output(tmp_path / "std.csv")
    _, raw = read_output(tmp_path / "raw.csv")
    assert not np.allclose(standardized[:, 0], raw[:, 0], rtol=0.1)


def test_score_reference_sets_the_standardization(files: Files, tmp_path: Path) -> None:
    wide = tmp_path / "wide.npy"
    np.save(wide, files.rows * 10.0)  # a reference 10x wider: radius and sigma grow 10x in raw units
    score(files.classifier, files.data_csv, tmp_path / "self.csv")
    score(files.classifier, files.data_csv, tmp_path / "ref.csv", "--reference", str(wide))
    assert read_output(tmp_path / "ref.csv")[1][:, 0].mean() > read_output(tmp_path / "self.csv")[1][:, 0].mean()


def test_score_is_deterministic_for_a_seed(files: Files, tmp_path: Path) -> None:
    options = ("--seed", "7", "--sigma", "0.5", "--ball", "rotations:3")
    score(files.classifier, files.data_csv, tmp_path / "first.csv", *options)
    score(files.classifier, files.data_csv, tmp_path / "second.csv", *options)
    assert (tmp_path / "first.csv").read_bytes() == (tmp_path / "second.csv").read_bytes()


def test_score_flicker_depends_on_the_seed(files: Files, tmp_path: Path) -> None:
    # sigma large enough that copies cross the class boundaries, so flicker is not identically 0
    score(files.classifier, files.data_csv, tmp_path / "s0.csv", "--seed", "0", "--sigma", "1.0")
    score(files.classifier, files.data_csv, tmp_path / "s1.csv", "--seed", "1", "--sigma", "1.0")
    flicker0, flicker1 = read_output(tmp_path / "s0.csv")[1][:, 1], read_output(tmp_path / "s1.csv")[1][:, 1]
    assert flicker0.any() and not np.array_equal(flicker0, flicker1)


def test_score_zero_flicker_copies_leaves_flicker_unmeasured(files: Files, tmp_path: Path) -> None:
    score(files.classifier, files.data_csv, tmp_path / "out.csv", "--flicker-copies", "0")
    values = read_output(tmp_path / "out.csv")[1]
    assert np.isnan(values[:, 1]).all() and np.isfinite(values[:, 0]).all()


def _score_subparser() -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    choices: dict[str, Any] = dict(sub.choices)
    score_parser: argparse.ArgumentParser = choices["score"]
    return score_parser


def test_score_help_lists_every_contract_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["score", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert [o for o in CONTRACT_OPTIONS if o not in text] == []


def test_score_help_documents_every_option() -> None:
    undocumented = [a.option_strings for a in _score_subparser()._actions if not a.help]
    assert undocumented == []


def python_m_monitor(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m monitor ARGS`` in a child process (60 s at most), its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "monitor", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_score_python_m_monitor_writes_the_same_file(files: Files, tmp_path: Path) -> None:
    score(files.classifier, files.data_csv, tmp_path / "in_process.csv")
    args = ["score", "--model", str(files.classifier), "--data", str(files.data_csv)]
    completed = python_m_monitor(*args, "--out", str(tmp_path / "module.csv"))
    assert completed.returncode == 0, completed.stderr
    assert (tmp_path / "module.csv").read_bytes() == (tmp_path / "in_process.csv").read_bytes()


def test_score_python_m_monitor_exits_2_on_a_missing_file(files: Files, tmp_path: Path) -> None:
    args = ["score", "--model", str(files.classifier), "--data", str(tmp_path / "absent.csv")]
    completed = python_m_monitor(*args, "--out", str(tmp_path / "out.csv"))
    assert (completed.returncode, completed.stderr.splitlines()[-1][:17]) == (2, "error: data file ")


def test_the_cli_starts_without_importing_scipy() -> None:
    """Every command pays the CLI's imports before its own work; scipy (0.9 s of imports) is loaded by the drift tests
    where they first need it, so ``score`` on 20,000 rows stays at ≥ 0.7 of onnxruntime alone (docs/BENCHMARKS.md)."""
    import subprocess
    import sys

    code = (
        "import sys; from monitor.cli import build_parser; build_parser(); import monitor.drift; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('scipy', 'sklearn')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout


@pytest.fixture(scope="module")
def logits_only(tmp_path_factory: pytest.TempPathFactory) -> tuple[model_zoo.ZooModel, Path]:
    """torch's default export of a classifier: the logits alone, as an output named ``output``; and its rows."""
    folder = tmp_path_factory.mktemp("logits")
    zoo = model_zoo.build_logits_only_classifier(folder, output="output")
    np.save(folder / "rows.npy", zoo.inputs["input"])
    return zoo, folder / "rows.npy"


def test_score_a_logits_only_model_read_as_a_classifier_gives_argmax_and_softmax(
    logits_only: tuple[model_zoo.ZooModel, Path], tmp_path: Path
) -> None:
    zoo, rows = logits_only
    assert score(zoo.path, rows, tmp_path / "out.csv", "--model-kind", "classifier") == 0
    header, out = read_output(tmp_path / "out.csv")
    assert header == CLASSIFIER_HEADER
    assert zoo.proba is not None
    np.testing.assert_array_equal(out[:, 3], zoo.expected)  # the class: argmax of the logits
    np.testing.assert_allclose(out[:, 4], zoo.proba.max(axis=1), rtol=1e-5)  # the probability: their softmax
    top2 = np.sort(zoo.proba, axis=1)[:, -2:]
    np.testing.assert_allclose(out[:, 5], top2[:, 1] - top2[:, 0], rtol=1e-4, atol=1e-6)
    assert np.all((out[:, 2] > 0) & (out[:, 2] <= out[:, 4] + 1e-6))  # p_adj = probability · exp(−N·γ_logit)


def test_score_says_when_logits_are_read_as_a_regressor(
    logits_only: tuple[model_zoo.ZooModel, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    zoo, rows = logits_only
    assert score(zoo.path, rows, tmp_path / "out.csv") == 0
    header, out = read_output(tmp_path / "out.csv")
    several = [c for c in REGRESSOR_HEADER if c != "predicted_value"]  # several outputs: no one value per row
    assert header == several and np.isnan(out[:, 2]).all() and (out[:, 3] == -1).all()
    assert (
        "note: 'output' gives 3 values per row and the graph does not mark them as class scores (no Softmax, ArgMax "
        "or label output), so the model is read as a regressor: p_adj is nan and predicted_class -1 (classifier "
        "signals). If these are a classifier's logits, pass --model-kind classifier: the class is then their argmax "
        "and the probability their softmax"
    ) in capsys.readouterr().err
    assert score(zoo.path, rows, tmp_path / "out.csv", "--model-kind", "regressor") == 0
    assert "note:" not in capsys.readouterr().err  # said on purpose: no note
