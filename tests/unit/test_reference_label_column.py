"""``reference --labels NAME``: the true class read from a column of the ``--data`` CSV, as ``compare --labels`` and
``monitor.reference(..., labels="y")`` read it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from monitor.cli import main
from tests.unit.onnx_graphs import training_blobs, zipmap_classifier
from tests.unit.reference_cli import build_reference


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-feature classifier and 300 labelled rows: rows.csv (a, b, y, segment), x.csv (a, b), y.csv (y)."""
    root = tmp_path_factory.mktemp("label_column")
    zipmap_classifier(root / "clf.onnx", seed=0)
    x, y = training_blobs(seed=5, n_rows=300)
    segments = np.where(np.arange(300) % 2 == 0, "eu", "us")
    lines = [f"{a!r},{b!r},{c},{s}" for (a, b), c, s in zip(x.tolist(), y.tolist(), segments, strict=True)]
    (root / "rows.csv").write_text("a,b,y,segment\n" + "\n".join(lines) + "\n", encoding="utf-8")
    (root / "x.csv").write_text(
        "a,b,segment\n" + "\n".join(f"{a!r},{b!r},{s}" for (a, b), s in zip(x.tolist(), segments, strict=True)) + "\n",
        encoding="utf-8",
    )
    (root / "y.csv").write_text("y\n" + "\n".join(str(c) for c in y.tolist()) + "\n", encoding="utf-8")
    return root


def _without_created(path: Path) -> dict[str, object]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc.pop("created", None)
    return dict(doc)


def test_a_label_column_of_the_data_writes_the_file_a_labels_file_writes(files: Path, tmp_path: Path) -> None:
    by_file, by_column = tmp_path / "by_file.json", tmp_path / "by_column.json"
    seg = ("--segment-column", "segment")
    assert build_reference(files / "clf.onnx", files / "x.csv", by_file, "--labels", str(files / "y.csv"), *seg) == 0
    assert build_reference(files / "clf.onnx", files / "rows.csv", by_column, "--labels", "y", *seg) == 0
    doc = _without_created(by_column)
    assert "accuracy_estimator" in doc and doc == _without_created(by_file)


def test_a_label_name_that_is_neither_a_file_nor_a_column_is_refused_naming_the_columns(
    files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["reference", "--model", str(files / "clf.onnx"), "--data", str(files / "rows.csv"), "--labels", "label"]
        + ["--out", str(tmp_path / "ref.json")]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "--labels 'label' is neither a file nor a column of '" in err
    assert (
        "(its header: a, b, y, segment); give a file of one true class per row, or the name of the --data column" in err
    )


def test_a_frame_whose_columns_do_not_name_the_inputs_is_refused_with_the_feature_names_fix(files: Path) -> None:
    import pandas as pd

    import monitor
    from monitor.errors import DataError

    frame = pd.read_csv(files / "rows.csv")
    with pytest.raises(
        DataError, match=r"lacks columns 'X\[0\]'.*; name the columns that are its features, in order: "
    ):
        monitor.reference(files / "clf.onnx", frame, labels="y")
    ref = monitor.reference(files / "clf.onnx", frame, labels="y", feature_names=["a", "b"])
    assert ref.reference.n_events == 300 and ref.fit is not None


def test_a_frames_label_and_segment_columns_named_by_the_call_are_not_features(files: Path) -> None:
    """``monitor.reference(model, df, labels="y", segment_column="segment")`` on a plain model reads the frame's
    other columns in order as its features, as the CLI reads the same CSV."""
    import pandas as pd

    import monitor
    from monitor.errors import DataError

    frame = pd.read_csv(files / "rows.csv")
    built = monitor.reference(
        str(files / "clf.onnx"), frame, labels="y", segment_column="segment", flicker_copies=4, seed=0
    )
    assert built.reference.feature_names == ("a", "b")
    assert any("'eu' (150 rows)" in note or "eu (150" in note for note in built.notes), built.notes
    assert built.fit is not None and built.reference.n_events == 300
    with pytest.raises(DataError, match="lacks columns"):  # an unnamed extra column stays a refusal
        monitor.reference(str(files / "clf.onnx"), frame, labels="y", flicker_copies=4)
