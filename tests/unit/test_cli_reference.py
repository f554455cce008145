"""``harmonic-monitor reference`` writes the offline reference JSON; ``read_reference`` loads and checks it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from monitor.errors import DataError
from monitor.rolling.reference_file import REFERENCE_FORMAT, REFERENCE_VERSION, read_reference
from tests.unit.onnx_graphs import training_blobs, zipmap_classifier
from tests.unit.reference_cli import build_reference, reference_from_rows


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-feature logistic regression (skl2onnx, ZipMap output)."""
    path, _ = zipmap_classifier(tmp_path_factory.mktemp("reference_cli") / "clf.onnx", seed=0)
    return path


@pytest.fixture(scope="module")
def rows() -> NDArray[np.float64]:
    x, _ = training_blobs(seed=3, n_rows=60)
    return x


@pytest.fixture(scope="module")
def reference_json(tmp_path_factory: pytest.TempPathFactory, model: Path, rows: NDArray[np.float64]) -> Path:
    return reference_from_rows(tmp_path_factory.mktemp("reference_json"), model, rows, "--feature-names", "age,income")


def test_reference_writes_format_version_standardizer_and_reference(reference_json: Path) -> None:
    doc = json.loads(reference_json.read_text(encoding="utf-8"))
    assert (doc["format"], doc["version"], doc["n_features"]) == (REFERENCE_FORMAT, REFERENCE_VERSION, 2)
    assert set(doc["standardizer"]) == {"mean", "scale"} and isinstance(doc["reference"], dict)


def test_reference_standardizer_is_fitted_on_the_data(reference_json: Path, rows: NDArray[np.float64]) -> None:
    standardizer, _ = read_reference(reference_json, 2)
    np.testing.assert_allclose(standardizer.mean, rows.mean(axis=0), rtol=1e-9)


def test_read_reference_round_trips_events_and_feature_names(reference_json: Path) -> None:
    _, reference = read_reference(reference_json, 2)
    assert (reference.n_events, reference.feature_names) == (60, ("age", "income"))


def test_reference_samples_at_most_sample_rows(tmp_path: Path, model: Path, rows: NDArray[np.float64]) -> None:
    np.save(tmp_path / "rows.npy", rows)
    build_reference(model, tmp_path / "rows.npy", tmp_path / "ref.json", "--sample-rows", "25")
    assert read_reference(tmp_path / "ref.json", 2)[1].n_events == 25


def test_reference_skips_a_numbered_header_row(tmp_path: Path, model: Path, rows: NDArray[np.float64]) -> None:
    np.savetxt(tmp_path / "rows.csv", rows, delimiter=",", header="0,1", comments="")
    assert build_reference(model, tmp_path / "rows.csv", tmp_path / "ref.json") == 0
    assert read_reference(tmp_path / "ref.json", 2)[1].n_events == rows.shape[0]


def test_reference_header_yes_skips_the_first_row(tmp_path: Path, model: Path, rows: NDArray[np.float64]) -> None:
    np.savetxt(tmp_path / "rows.csv", rows, delimiter=",")
    assert build_reference(model, tmp_path / "rows.csv", tmp_path / "ref.json", "--header", "yes") == 0
    assert read_reference(tmp_path / "ref.json", 2)[1].n_events == rows.shape[0] - 1


def test_reference_needs_ten_finite_rows(
    tmp_path: Path, model: Path, rows: NDArray[np.float64], capsys: pytest.CaptureFixture[str]
) -> None:
    few = rows[:12].copy()
    few[:5, 0] = np.nan
    np.save(tmp_path / "few.npy", few)
    assert build_reference(model, tmp_path / "few.npy", tmp_path / "ref.json") == 2
    assert "has 7 finite rows; a reference needs at least 10" in capsys.readouterr().err


def test_reference_rejects_feature_names_of_the_wrong_count(
    tmp_path: Path, model: Path, rows: NDArray[np.float64], capsys: pytest.CaptureFixture[str]
) -> None:
    np.save(tmp_path / "rows.npy", rows)
    assert build_reference(model, tmp_path / "rows.npy", tmp_path / "ref.json", "--feature-names", "a,b,c") == 2
    assert "--feature-names lists 3 names; the model takes 2 features" in capsys.readouterr().err


def test_read_reference_rejects_wrong_n_features(reference_json: Path) -> None:
    with pytest.raises(DataError, match=r"was built for 2 features; the model takes 3"):
        read_reference(reference_json, 3)


def test_read_reference_rejects_json_of_another_format(tmp_path: Path) -> None:
    (tmp_path / "other.json").write_text(json.dumps({"format": "something-else", "version": 1}), encoding="utf-8")
    with pytest.raises(DataError, match=r"is not a harmonic-monitor reference \(format 'something-else', version 1\)"):
        read_reference(tmp_path / "other.json", 2)


def test_read_reference_rejects_a_newer_version(tmp_path: Path, reference_json: Path) -> None:
    doc = json.loads(reference_json.read_text(encoding="utf-8"))
    newer = REFERENCE_VERSION + 1
    (tmp_path / "newer.json").write_text(json.dumps({**doc, "version": newer}), encoding="utf-8")
    with pytest.raises(DataError, match=rf"is not a harmonic-monitor reference .*version {newer}\)"):
        read_reference(tmp_path / "newer.json", 2)


def test_read_reference_rejects_json_that_is_not_an_object(tmp_path: Path) -> None:
    (tmp_path / "list.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(DataError, match=r"is not a harmonic-monitor reference \(a JSON list, not an object\)"):
        read_reference(tmp_path / "list.json", 2)


def test_read_reference_rejects_a_file_that_is_not_json(tmp_path: Path) -> None:
    (tmp_path / "rows.csv").write_text("1,2\n3,4\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"cannot read reference JSON '.*rows\.csv'"):
        read_reference(tmp_path / "rows.csv", 2)


def test_read_reference_rejects_a_missing_file_naming_the_command_that_builds_it(tmp_path: Path) -> None:
    with pytest.raises(
        DataError,
        match=r"reference JSON '.*absent\.json' does not exist; .*`harmonic-monitor reference --model MODEL\.onnx "
        r"--data ROWS\.csv --out .*absent\.json`",
    ):
        read_reference(tmp_path / "absent.json", 2)


@pytest.mark.parametrize("damage", ["drop-standardizer", "reference-not-object", "drop-gamma-sample"])
def test_read_reference_rejects_a_damaged_file(tmp_path: Path, reference_json: Path, damage: str) -> None:
    doc = json.loads(reference_json.read_text(encoding="utf-8"))
    if damage == "drop-standardizer":
        del doc["standardizer"]
    elif damage == "reference-not-object":
        doc["reference"] = [1, 2]
    else:
        del doc["reference"]["gamma_sample"]
    (tmp_path / "damaged.json").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(DataError, match=r"damaged|rebuild"):
        read_reference(tmp_path / "damaged.json", 2)


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_reference_refuses_a_sample_rows_below_one_naming_the_flag(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_reference(model, tmp_path / "rows.npy", tmp_path / "ref.json", "--sample-rows", value)
    assert exit_info.value.code == 2 and "argument --sample-rows: " in capsys.readouterr().err


def test_reference_from_a_csv_header_records_its_names_for_a_plain_model(
    tmp_path: Path, model: Path, rows: NDArray[np.float64]
) -> None:
    """A plain model's one input has generic element names; the CSV header names its columns, and alerts and the
    report name inputs by what the reference records."""
    data = tmp_path / "named.csv"
    np.savetxt(data, rows, delimiter=",", header="age,income", comments="")
    assert build_reference(model, data, tmp_path / "ref.json") == 0
    _, reference = read_reference(tmp_path / "ref.json", 2)
    assert reference.feature_names == ("age", "income")


def test_reference_from_a_named_frame_records_its_columns(model: Path, rows: NDArray[np.float64]) -> None:
    import pandas as pd

    import monitor

    frame = pd.DataFrame(rows, columns=["age", "income"])
    assert monitor.reference(str(model), frame, flicker_copies=4).reference.feature_names == ("age", "income")
    # columns pandas numbered itself name nothing
    assert monitor.reference(str(model), pd.DataFrame(rows), flicker_copies=4).reference.feature_names is None
