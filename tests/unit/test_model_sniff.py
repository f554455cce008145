"""A file handed in as a model that is not one: the refusal says what arrived and how to get what is expected.

``--model`` given a CSV file or a joblib pickle, and ``convert --sklearn`` given an ONNX file or rows, as a user meets
them from the command line (exit 2, one line on stderr).
"""

from __future__ import annotations

from pathlib import Path

import joblib
import pytest
from sklearn.linear_model import LogisticRegression

from monitor.cli import main
from monitor.model.sniff import sniff
from tests.unit import onnx_graphs
from tests.unit.onnx_graphs import training_blobs


@pytest.fixture(scope="module")
def classifier() -> LogisticRegression:
    x, y = training_blobs(seed=0)
    return LogisticRegression(random_state=0).fit(x, y)


@pytest.fixture
def rows_csv(tmp_path: Path) -> Path:
    path = tmp_path / "rows.csv"
    path.write_text("age,income\n31,2.5\n44,3.1\n", encoding="utf-8")
    return path


def refusal(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    return err[-1]


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        (b"", "empty"),
        (b"age,income\n31,2.5\n", "csv"),
        (b"a\tb\n1\t2\n", "csv"),
        (b'{"model": "m", "held_tables": {}}', "json"),
        (b"hello\n", "text"),
        (b"\x93NUMPY\x01\x00", "npy"),
        (b"PK\x03\x04rest", "zip"),
        (b"\x89HDF\r\n\x1a\nrest", "hdf5"),
        (b"\x1f\x8b\x08\x00", "compressed"),
        (b"\x08\x07\xff\xff\xff", "onnx-damaged"),
        (b"\x00\x01\x02\xff\xfe", "binary"),
    ],
)
def test_sniff_tells_the_kind_from_the_first_bytes(tmp_path: Path, content: bytes, kind: str) -> None:
    path = tmp_path / "file"
    path.write_bytes(content)
    assert sniff(path).kind == kind


def test_sniff_recognises_joblib_and_onnx_files(tmp_path: Path, classifier: LogisticRegression) -> None:
    joblib.dump(classifier, tmp_path / "plain.joblib")
    joblib.dump(classifier, tmp_path / "small.joblib", compress=3)
    onnx_graphs.linear_classifier(tmp_path / "m.onnx", [[1.0, -1.0], [0.5, 0.2]], [0.0, 0.1])
    assert sniff(tmp_path / "plain.joblib").kind == "pickle"
    assert sniff(tmp_path / "small.joblib").kind == "compressed"
    assert sniff(tmp_path / "m.onnx").kind == "onnx"


def test_a_csv_file_as_model_is_named_as_data(capsys: pytest.CaptureFixture[str], rows_csv: Path) -> None:
    err = refusal(capsys, "score", "--model", str(rows_csv), "--data", str(rows_csv), "--out", "unused.csv")
    assert err == (
        f"error: model '{rows_csv}' is not an ONNX model: expected an ONNX file (.onnx), got CSV text (first line "
        "'age,income'); that is data, not a model: pass the model's .onnx file as --model"
    )
    assert "Wire format" not in err


@pytest.mark.parametrize("compress", [0, 3])
def test_a_joblib_file_as_model_points_at_convert(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], classifier: LogisticRegression, rows_csv: Path, compress: int
) -> None:
    path = tmp_path / "clf.joblib"
    joblib.dump(classifier, path, compress=compress)
    err = refusal(capsys, "reference", "--model", str(path), "--data", str(rows_csv), "--out", str(tmp_path / "r"))
    assert err.startswith(f"error: model '{path}' is not an ONNX model: expected an ONNX file (.onnx), got ")
    assert ("a Python pickle" if compress == 0 else "zlib-compressed data") in err
    assert err.endswith(
        f"converts to ONNX with `harmonic-monitor convert --sklearn {path} --out clf.onnx`; then pass --model clf.onnx"
    )


def test_convert_given_an_onnx_file_says_it_needs_no_conversion(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = onnx_graphs.linear_classifier(tmp_path / "m.onnx", [[1.0, -1.0], [0.5, 0.2]], [0.0, 0.1])
    err = refusal(capsys, "convert", "--sklearn", str(model), "--out", str(tmp_path / "out.onnx"))
    assert err.startswith(
        f"error: '{model}' is not a joblib file: expected a scikit-learn model saved with joblib.dump(model, path), "
        "got an ONNX model (opset "
    )
    assert err.endswith(f"it needs no conversion: pass it to the other commands as it is (--model {model})")
    assert "runs code" not in capsys.readouterr().err  # refused before joblib would unpickle anything


def test_convert_given_rows_names_them(tmp_path: Path, capsys: pytest.CaptureFixture[str], rows_csv: Path) -> None:
    err = refusal(capsys, "convert", "--sklearn", str(rows_csv), "--out", str(tmp_path / "out.onnx"))
    assert "got CSV text (first line 'age,income'); rows are not a model" in err


def test_convert_given_a_cut_pickle_names_the_unpickling_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], classifier: LogisticRegression
) -> None:
    path = tmp_path / "clf.joblib"
    joblib.dump(classifier, path)
    path.write_bytes(path.read_bytes()[:200])
    err = refusal(capsys, "convert", "--sklearn", str(path), "--out", str(tmp_path / "out.onnx"))
    assert err.startswith(f"error: cannot load '{path}' with joblib: UnpicklingError: ")
    assert err.endswith(
        "expected a scikit-learn model saved with joblib.dump(model, path), with the same scikit-learn "
        "installed as when it was saved"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["check-config", "--model", "{m}"],
        ["run", "--model", "{m}", "--bootstrap-servers", "127.0.0.1:9", "--metrics-port", "0"],
        ["probe", "--model", "{m}", "--data", "{d}", "--json", "{o}"],
        ["replay", "--model", "{m}", "--events", "{d}", "--timeline", "{o}"],
        ["report", "--model", "{m}", "--reference", "{d}", "--events", "{d}", "--out", "{o}"],
    ],
    ids=lambda argv: argv[0],
)
def test_every_command_taking_a_model_names_a_joblib_file(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    classifier: LogisticRegression,
    rows_csv: Path,
    argv: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "clf.joblib"
    joblib.dump(classifier, path)
    filled = [a.format(m=path, d=rows_csv, o=tmp_path / "out") for a in argv]
    err = refusal(capsys, *filled)
    assert f"model '{path}' is not an ONNX model: expected an ONNX file (.onnx), got a Python pickle" in err
    assert f"`harmonic-monitor convert --sklearn {path} --out clf.onnx`" in err
