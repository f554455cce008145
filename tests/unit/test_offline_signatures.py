"""Offline commands (``score``, ``reference``, ``probe``) on models of any signature: several inputs, int
and string inputs held fixed, an image tensor; CSV files whose header names the inputs or features, ``.npy`` and
``.npz`` files; clear messages for wrong names, shapes and types.

Models are built here with ``onnx.helper``. Exactness: a model linear in its float inputs has γ = 0 (within float32
rounding, as in ``test_gamma_exactness``) while its int or string inputs vary from row to row — which holds only when
every ball point carries its own row's held values.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from numpy.typing import NDArray
from onnx import TensorProto, helper, numpy_helper

from monitor.cli import main
from monitor.errors import DataError
from monitor.model.base import ModelKind, ModelOutput
from monitor.model.io import load_model_rows, read_model_rows
from monitor.model.onnx import OnnxModel
from monitor.model.signature import Held, Signature
from monitor.model.standardize import Standardizer
from monitor.probes.funnel import FunnelConfig, held_groups, run_funnel
from monitor.probes.regions import RegionIndex
from monitor.rolling.reference_file import HELD_SAMPLE_ROWS, read_held_sample, read_reference, sample_held

OPSET = 17
IR_VERSION = 8
EPS32 = float(np.finfo(np.float32).eps)
F32_SLACK = 32.0  # as test_gamma_exactness
W_SIDE = np.array([1.5, -2.0, 0.5], dtype=np.float32)
COLOURS = ("red", "green", "blue")
COLOUR_VALUE = {"red": 0.0, "green": 1.0, "blue": -2.0}
N_ROWS = 40


def _save(graph: onnx.GraphProto, path: Path, opsets: tuple[tuple[str, int], ...] = (("", OPSET),)) -> Path:
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets], ir_version=IR_VERSION
    )
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def side_input_model(path: Path) -> Path:
    """y = x·w + 0.1·id² : x float [N, 3], id int64 [N, 1] → y float [N, 1]; linear in x."""
    inits = [
        numpy_helper.from_array(W_SIDE.reshape(3, 1), "W"),
        numpy_helper.from_array(np.array([0.1], dtype=np.float32), "c"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["xw"]),
        helper.make_node("Cast", ["id"], ["idf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["idf", "idf"], ["id2"]),
        helper.make_node("Mul", ["id2", "c"], ["side"]),
        helper.make_node("Add", ["xw", "side"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "side_input",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3]),
            helper.make_tensor_value_info("id", TensorProto.INT64, ["N", 1]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])],
        initializer=inits,
    )
    return _save(graph, path)


def string_model(path: Path) -> Path:
    """y = 2·a − 3·b + value(colour) : colour string [N, 1], a and b float [N, 1] → y float [N, 1]."""
    inits = [
        numpy_helper.from_array(np.array([2.0], dtype=np.float32), "two"),
        numpy_helper.from_array(np.array([-3.0], dtype=np.float32), "minus_three"),
    ]
    nodes = [
        helper.make_node(
            "LabelEncoder",
            ["colour"],
            ["cv"],
            domain="ai.onnx.ml",
            keys_strings=list(COLOUR_VALUE),
            values_floats=list(COLOUR_VALUE.values()),
            default_float=-5.0,
        ),
        helper.make_node("Mul", ["a", "two"], ["a2"]),
        helper.make_node("Mul", ["b", "minus_three"], ["b3"]),
        helper.make_node("Add", ["a2", "b3"], ["ab"]),
        helper.make_node("Add", ["ab", "cv"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "string_input",
        [
            helper.make_tensor_value_info("colour", TensorProto.STRING, ["N", 1]),
            helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 1]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 1]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])],
        initializer=inits,
    )
    return _save(graph, path, (("", OPSET), ("ai.onnx.ml", 2)))


def image_model(path: Path) -> Path:
    """A 3-class classifier of 4×4 images: image float [N, 1, 4, 4] → Flatten → Gemm → logits, Softmax."""
    rng = np.random.default_rng(7)
    inits = [
        numpy_helper.from_array(rng.normal(size=(16, 3)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.normal(size=(3,)).astype(np.float32), "b"),
    ]
    nodes = [
        helper.make_node("Flatten", ["image"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "W", "b"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "image",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 1, 4, 4])],
        [
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 3]),
            helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 3]),
        ],
        initializer=inits,
    )
    return _save(graph, path)


@dataclass(frozen=True)
class Files:
    root: Path
    side: Path
    strings: Path
    image: Path
    x: NDArray[np.float32]  # [N, 3]
    ids: NDArray[np.int64]  # [N]
    colour: NDArray[np.str_]  # [N]
    a: NDArray[np.float32]
    b: NDArray[np.float32]
    images: NDArray[np.float32]  # [N, 1, 4, 4]


def _write_csv(path: Path, header: list[str], rows: list[list[Any]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        if header:
            writer.writerow(header)
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Files:
    root = tmp_path_factory.mktemp("offline_signatures")
    rng = np.random.default_rng(0)
    x = (rng.normal(size=(N_ROWS, 3)) * [1.0, 3.0, 0.2] + [0.0, 5.0, -1.0]).astype(np.float32)
    ids = rng.integers(0, 10, size=N_ROWS).astype(np.int64)
    colour = np.array([COLOURS[i % 3] for i in range(N_ROWS)])
    a = rng.normal(size=N_ROWS).astype(np.float32)
    b = (2.0 * rng.normal(size=N_ROWS) + 1.0).astype(np.float32)
    images = rng.uniform(0.0, 16.0, size=(N_ROWS, 1, 4, 4)).astype(np.float32)
    f = Files(
        root, side_input_model(root / "side.onnx"), string_model(root / "strings.onnx"),
        image_model(root / "image.onnx"), x, ids, colour, a, b, images,
    )  # fmt: skip
    # the side-input model: columns by feature name, in another order than the graph's
    _write_csv(
        root / "side.csv",
        ["id", "x[2]", "x[0]", "x[1]"],
        [[int(i), repr(float(r[2])), repr(float(r[0])), repr(float(r[1]))] for i, r in zip(ids, x, strict=True)],
    )
    np.savez(root / "side.npz", x=x, id=ids.reshape(-1, 1))
    # the string model: columns by input name, a string column
    _write_csv(
        root / "strings.csv",
        ["a", "colour", "b"],
        [[repr(float(p)), c, repr(float(q))] for p, c, q in zip(a, colour, b, strict=True)],
    )
    np.savez(root / "strings.npz", colour=colour, a=a, b=b)
    # the image model: [N, 1, 4, 4], [N, 16], a headerless CSV and one naming the elements
    np.save(root / "images.npy", images)
    np.save(root / "images_flat.npy", images.reshape(N_ROWS, 16))
    flat = images.reshape(N_ROWS, 16)
    _write_csv(root / "images.csv", [], [[repr(float(v)) for v in row] for row in flat])
    names = [f"image[0,{i},{j}]" for i in range(4) for j in range(4)]
    order = list(reversed(range(16)))
    _write_csv(
        root / "images_named.csv", [names[k] for k in order], [[repr(float(row[k])) for k in order] for row in flat]
    )
    return f


def score(model: Path, data: Path, out: Path, *extra: str) -> int:
    return main(["score", "--model", str(model), "--data", str(data), "--out", str(out), *extra])


def read_scores(path: Path) -> NDArray[np.float64]:
    with path.open(newline="", encoding="utf-8") as fh:
        records = list(csv.reader(fh))
    return np.array([[float(c) for c in r] for r in records[1:]], dtype=np.float64)


def _atol(values: NDArray[Any]) -> float:
    return F32_SLACK * EPS32 * (1.0 + float(np.abs(values).max()))


# -- reading files --------------------------------------------------------------------------------------------
def test_a_csv_naming_features_in_any_order_reads_x_and_the_int_input(files: Files) -> None:
    model = OnnxModel(files.side)
    x, held = load_model_rows(files.root / "side.csv", model.signature)
    np.testing.assert_array_equal(x, files.x.astype(np.float64))
    assert held is not None
    np.testing.assert_array_equal(held.values["id"], files.ids.reshape(-1, 1))
    assert held.values["id"].dtype == np.int64
    x2, held2 = load_model_rows(files.root / "side.npz", model.signature)
    np.testing.assert_array_equal(x2, x)
    assert held2 is not None
    np.testing.assert_array_equal(held2.values["id"], held.values["id"])


def test_a_csv_with_a_string_column_and_the_npz_give_the_same_rows(files: Files) -> None:
    model = OnnxModel(files.strings)
    table = read_model_rows(files.root / "strings.csv", model.signature)
    x, held = load_model_rows(files.root / "strings.npz", model.signature)
    np.testing.assert_array_equal(table.rows, np.column_stack([files.a, files.b]).astype(np.float64))
    np.testing.assert_array_equal(x, table.rows)
    assert table.held is not None and held is not None
    assert table.held.values["colour"].reshape(-1).tolist() == files.colour.tolist()
    assert held.values["colour"].reshape(-1).tolist() == files.colour.tolist()
    assert "columns by name" in table.describe()


@pytest.mark.parametrize("name", ["images.npy", "images_flat.npy", "images.csv", "images_named.csv"])
def test_image_rows_read_alike_from_every_form(files: Files, name: str) -> None:
    model = OnnxModel(files.image)
    x, held = load_model_rows(files.root / name, model.signature)
    assert held is None
    np.testing.assert_array_equal(x, files.images.reshape(N_ROWS, 16).astype(np.float64))


def test_a_plain_model_reads_an_npz_holding_its_input(files: Files, tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])],
        "plain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])],
        initializer=[numpy_helper.from_array(W_SIDE.reshape(3, 1), "W")],
    )
    model = OnnxModel(_save(graph, tmp_path / "plain.onnx"))
    assert model.signature.plain
    np.savez(tmp_path / "plain.npz", x=files.x)
    x, held = load_model_rows(tmp_path / "plain.npz", model.signature)
    assert held is None
    np.testing.assert_array_equal(x, files.x.astype(np.float64))


# -- score ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["side.csv", "side.npz"])
def test_score_a_model_linear_in_x_has_gamma_zero_while_its_int_input_varies(
    files: Files, tmp_path: Path, name: str
) -> None:
    assert len(set(files.ids.tolist())) > 3
    out = tmp_path / "scores.csv"
    assert score(files.side, files.root / name, out, "--radius", "0.3") == 0
    scores = read_scores(out)
    # gamma, flicker, p_adj, predicted_class, predicted_value and gamma_se (a sampled hypercube)
    assert scores.shape == (N_ROWS, 6)
    values = files.x @ W_SIDE + 0.1 * files.ids.astype(np.float32) ** 2
    np.testing.assert_allclose(scores[:, 0], 0.0, atol=_atol(values))
    np.testing.assert_allclose(scores[:, 4], values, rtol=1e-4, atol=1e-4)  # the regressor's prediction


def test_score_a_model_with_a_string_input_has_gamma_zero_and_reads_csv_and_npz_alike(
    files: Files, tmp_path: Path
) -> None:
    out_csv, out_npz = tmp_path / "csv.csv", tmp_path / "npz.csv"
    assert score(files.strings, files.root / "strings.csv", out_csv, "--radius", "0.3") == 0
    assert score(files.strings, files.root / "strings.npz", out_npz, "--radius", "0.3") == 0
    by_csv, by_npz = read_scores(out_csv), read_scores(out_npz)
    values = 2 * files.a - 3 * files.b + np.array([COLOUR_VALUE[c] for c in files.colour])
    np.testing.assert_allclose(by_csv[:, 0], 0.0, atol=_atol(values))
    np.testing.assert_array_equal(by_csv, by_npz)


def test_score_an_image_model_from_npy_and_csv_gives_the_same_scores(files: Files, tmp_path: Path) -> None:
    results = []
    for name in ("images.npy", "images_flat.npy", "images.csv", "images_named.csv"):
        out = tmp_path / f"{name}.scores.csv"
        assert score(files.image, files.root / name, out, "--flicker-copies", "8") == 0
        results.append(read_scores(out))
    # a classifier: probability and margin after predicted_class, then gamma_se (a sampled hypercube)
    assert results[0].shape == (N_ROWS, 7)
    assert np.all(np.isfinite(results[0]))
    for other in results[1:]:
        np.testing.assert_array_equal(other, results[0])


def test_score_with_fixed_features_holds_a_float_feature(files: Files, tmp_path: Path) -> None:
    out = tmp_path / "scores.csv"
    assert score(files.side, files.root / "side.csv", out, "--fixed-features", "x[2]", "--radius", "0.3") == 0
    values = files.x @ W_SIDE + 0.1 * files.ids.astype(np.float32) ** 2
    np.testing.assert_allclose(read_scores(out)[:, 0], 0.0, atol=_atol(values))
    model = OnnxModel(files.side, fixed_features=("x[2]",))
    assert model.signature.features == ("x[0]", "x[1]")


def test_score_refuses_an_unknown_fixed_feature(
    files: Files, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = score(files.side, files.root / "side.csv", tmp_path / "o.csv", "--fixed-features", "x[7]")
    assert code == 2
    err = capsys.readouterr().err
    assert "fixed_features names ['x[7]']" in err and "'x[0]'" in err


# -- wrong names, shapes and types -----------------------------------------------------------------------------
def _bad_files(files: Files, root: Path) -> dict[str, tuple[Path, Path, list[str]]]:
    """name → (model, data file, fragments the message must hold)."""
    x, ids = files.x, files.ids
    out: dict[str, tuple[Path, Path, list[str]]] = {}
    rows = [[repr(float(r[0])), repr(float(r[1])), repr(float(r[2])), int(i)] for r, i in zip(x, ids, strict=True)]
    out["unknown column"] = (
        files.side,
        _write_csv(root / "unknown.csv", ["x[0]", "x[1]", "x[9]", "id"], rows),
        ["'x[9]'", "does not take", "'x' float [batch, 3]", "'id' int64 [batch, 1]"],
    )
    out["missing column"] = (
        files.side,
        _write_csv(root / "missing.csv", ["x[0]", "x[1]", "x[2]"], [r[:3] for r in rows]),
        ["lacks columns 'id'"],
    )
    bad = [list(r) for r in rows]
    bad[2][3] = "3.5"
    out["fractional id"] = (
        files.side,
        _write_csv(root / "fraction.csv", ["x[0]", "x[1]", "x[2]", "id"], bad),
        ["line 4 column 'id'", "'id' int64 [batch, 1]", "whole numbers", "'3.5'"],
    )
    text = [list(r) for r in rows]
    text[0][1] = "abc"
    out["text in a float column"] = (
        files.side,
        _write_csv(root / "text.csv", ["x[0]", "x[1]", "x[2]", "id"], text),
        ["line 2 column 'x[1]'", "takes a number", "'abc'"],
    )
    np.savez(root / "wide.npz", x=np.zeros((4, 4), dtype=np.float32), id=np.zeros((4, 1), dtype=np.int64))
    out["wide npz array"] = (files.side, root / "wide.npz", ["'x' float [batch, 3]", "[3]", "[4, 4]"])
    np.savez(root / "text_id.npz", x=x, id=np.array([["a"]] * N_ROWS))
    out["text id in npz"] = (files.side, root / "text_id.npz", ["'id' int64 [batch, 1]", "whole numbers", "<U1"])
    np.savez(root / "renamed.npz", features=x, id=ids.reshape(-1, 1))
    out["npz name"] = (files.side, root / "renamed.npz", ["missing 'x'", "unknown 'features'"])
    np.save(root / "side.npy", x)
    out["npy for a held input"] = (files.side, root / "side.npy", ["one array", "'id'", ".npz"])
    np.savez(root / "numeric_colour.npz", colour=np.arange(N_ROWS, dtype=np.float64), a=files.a, b=files.b)
    out["numbers for a string"] = (
        files.strings,
        root / "numeric_colour.npz",
        ["'colour' string [batch, 1]", "takes strings", "float64"],
    )
    out["no header for a string model"] = (
        files.strings,
        _write_csv(root / "no_header.csv", [], [["1.0", "red", "2.0"]]),
        ["no header row naming the model's inputs", "'colour' string [batch, 1]"],
    )
    np.save(root / "small_images.npy", np.zeros((3, 1, 5, 5), dtype=np.float32))
    out["image shape"] = (files.image, root / "small_images.npy", ["[3, 1, 5, 5]", "'image' float [batch, 1, 4, 4]"])
    _write_csv(root / "narrow_images.csv", [], [["1.0"] * 15])
    out["image width"] = (files.image, root / "narrow_images.csv", ["15 columns", "16 float values"])
    return out


BAD = [
    "unknown column",
    "missing column",
    "fractional id",
    "text in a float column",
    "wide npz array",
    "text id in npz",
    "npz name",
    "npy for a held input",
    "numbers for a string",
    "no header for a string model",
    "image shape",
    "image width",
]


@pytest.mark.parametrize("case", BAD)
def test_a_wrong_name_shape_or_type_exits_2_naming_the_input(
    files: Files, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    model, data, fragments = _bad_files(files, tmp_path)[case]
    with pytest.raises(DataError) as caught:
        read_model_rows(data, OnnxModel(model).signature)
    for fragment in fragments:
        assert fragment in str(caught.value), (fragment, str(caught.value))
    capsys.readouterr()
    for command in ("score", "reference", "probe"):
        out = tmp_path / ("out.json" if command != "score" else "out.csv")
        argv = [command, "--model", str(model), "--data", str(data)]
        argv += ["--json", str(out)] if command == "probe" else ["--out", str(out)]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert fragments[0] in err, (command, err)
        assert "Traceback" not in err


# -- reference ------------------------------------------------------------------------------------------------
def test_reference_keeps_a_held_sample_that_loads_back(files: Files, tmp_path: Path) -> None:
    out = tmp_path / "ref.json"
    assert (
        main(["reference", "--model", str(files.side), "--data", str(files.root / "side.csv"), "--out", str(out)]) == 0
    )
    model = OnnxModel(files.side)
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["held_sample"]["values"]["id"]["dtype"] == "int64"
    held = read_held_sample(out, model.signature)
    assert held is not None and len(held) == N_ROWS
    assert held.values["id"].dtype == np.int64 and held.values["id"].shape == (N_ROWS, 1)
    assert sorted(held.values["id"].reshape(-1).tolist()) == sorted(files.ids.tolist())
    standardizer, reference = read_reference(out, model.n_features)
    assert standardizer.n_features == 3
    assert reference.feature_names == ("x[0]", "x[1]", "x[2]")
    np.testing.assert_allclose(reference.gamma_sample, 0.0, atol=_atol(files.x @ W_SIDE + 10.0))


def test_reference_of_a_string_model_keeps_strings(files: Files, tmp_path: Path) -> None:
    out = tmp_path / "ref.json"
    args = ["reference", "--model", str(files.strings), "--data", str(files.root / "strings.npz"), "--out", str(out)]
    assert main([*args, "--sample-rows", "30"]) == 0
    held = read_held_sample(out, OnnxModel(files.strings).signature)
    assert held is not None and len(held) == 30
    assert held.values["colour"].dtype == object
    assert set(held.values["colour"].reshape(-1).tolist()) <= set(COLOURS)


def test_a_reference_without_a_held_sample_still_loads(files: Files, tmp_path: Path) -> None:
    out = tmp_path / "ref.json"
    assert (
        main(["reference", "--model", str(files.side), "--data", str(files.root / "side.csv"), "--out", str(out)]) == 0
    )
    doc = json.loads(out.read_text(encoding="utf-8"))
    del doc["held_sample"]
    out.write_text(json.dumps(doc), encoding="utf-8")
    model = OnnxModel(files.side)
    assert read_held_sample(out, model.signature) is None
    read_reference(out, model.n_features)


def test_a_held_sample_for_another_model_is_refused(files: Files, tmp_path: Path) -> None:
    out = tmp_path / "ref.json"
    assert (
        main(["reference", "--model", str(files.side), "--data", str(files.root / "side.csv"), "--out", str(out)]) == 0
    )
    with pytest.raises(DataError, match=r"keeps held values of \['id'\]; the model holds \['colour'\] fixed"):
        read_held_sample(out, OnnxModel(files.strings).signature)


# -- probe ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("model_name", "data_name"), [("side", "side.csv"), ("strings", "strings.npz")])
def test_probe_evaluates_every_point_with_its_own_held_values(
    files: Files, tmp_path: Path, model_name: str, data_name: str
) -> None:
    out = tmp_path / "report.json"
    model = getattr(files, model_name)
    argv = ["probe", "--model", str(model), "--data", str(files.root / data_name), "--json", str(out)]
    assert main([*argv, "--steps", "2", "--radius", "0.3", "--eps", "0.05"]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["n_points"] == N_ROWS
    # linear in x: γ is 0 at every Algorithm 2 step, which needs each ball point to carry its centre's held values
    for point in report["adversarial"]["points"]:
        assert abs(point["max_gamma"]) < 1e-3
    assert set(report["mri"]) == {"noise", "shift", "dropout", "scale", "quantize", "gamma_ascent"}
    assert all(v is not None for v in report["mri"].values())


def test_probe_an_image_model(files: Files, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    argv = ["probe", "--model", str(files.image), "--data", str(files.root / "images.npy"), "--json", str(out)]
    assert main([*argv, "--steps", "1", "--perturbations", "noise,dropout"]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert set(report["mri"]) == {"noise", "dropout"}


class _Recording:
    """A regressor y = Σx + 100·id that checks every evaluation carries one held row per row."""

    n_features = 2
    kind: ModelKind = "regressor"

    def __init__(self) -> None:
        self.calls: list[int] = []

    def evaluate(self, rows: NDArray[np.float32], held: Held | None = None) -> ModelOutput:
        assert held is not None and len(held) == rows.shape[0]
        self.calls.append(rows.shape[0])
        value = rows.sum(axis=1) + 100.0 * held.values["id"].reshape(-1).astype(np.float32)
        return ModelOutput(value=value.reshape(-1, 1).astype(np.float32))


def test_the_funnel_passes_each_points_held_values_to_every_evaluation() -> None:
    rng = np.random.default_rng(3)
    points = rng.normal(size=(6, 2))
    held = Held({"id": np.array([[0], [1], [1], [2], [0], [3]], dtype=np.int64)})
    model = _Recording()
    result = run_funnel(
        model,
        Standardizer.fit(rng.normal(size=(50, 2))),
        points,
        FunnelConfig(steps=2, radius=0.2),
        held=held,
        output_scale=np.array([1.0]),
    )
    assert model.calls and result.adversarial is not None
    # Σx is linear: γ is 0 everywhere unless a row got another point's id (a jump of 100)
    np.testing.assert_allclose(result.adversarial.gamma_path, 0.0, atol=1e-3)
    assert result.mri is not None and result.mri.vector["noise"] > 0.5


def test_held_groups_keep_first_appearance_order() -> None:
    held = Held({"c": np.array([["b"], ["a"], ["b"]], dtype=object), "id": np.array([1, 2, 1])})
    assert [g.tolist() for g in held_groups(held)] == [[0, 2], [1]]


def test_the_region_index_keeps_each_exemplars_held_values() -> None:
    index = RegionIndex(2, max_exemplars=3)
    raw = np.array([[0.0, 0.0], [0.1, 0.0], [0.0, 0.1], [0.1, 0.1]])
    held = Held({"city": np.array([["a"], ["b"], ["c"], ["d"]], dtype=object), "id": np.arange(4)})
    index.update(raw, raw, np.ones(4), np.zeros(4), np.array([True, True, False, True]), 0.0, held)
    (region,) = index.regions
    kept = region.held()
    assert kept is not None
    np.testing.assert_array_equal(region.points(), raw[[0, 1, 3]])
    assert kept.values["city"].reshape(-1).tolist() == ["a", "b", "d"]
    assert kept.values["id"].tolist() == [0, 1, 3]


def test_a_held_sample_keeps_at_most_256_seeded_rows() -> None:
    held = Held({"id": np.arange(1000).reshape(-1, 1), "c": np.array([str(i) for i in range(1000)], dtype=object)})
    first, again = sample_held(held), sample_held(held)
    assert len(first) == HELD_SAMPLE_ROWS == 256
    np.testing.assert_array_equal(first.values["id"], again.values["id"])
    assert np.all(np.diff(first.values["id"].reshape(-1)) > 0)  # in file order
    assert first.values["c"].reshape(-1).tolist() == [str(i) for i in first.values["id"].reshape(-1)]


def test_header_no_refuses_a_csv_for_a_model_with_a_string_input(files: Files) -> None:
    with pytest.raises(DataError, match=r"no header row naming the model's inputs.*--header no reads the first row"):
        read_model_rows(files.root / "strings.csv", OnnxModel(files.strings).signature, "no")


def test_a_headerless_csv_of_a_float_only_model_with_several_inputs_reads_in_graph_order(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Concat", ["a", "b"], ["y"], axis=1)],
        "two_float_inputs",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 1]),
            helper.make_tensor_value_info("b", TensorProto.DOUBLE, ["N", 2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
    )
    # Concat of float and double is invalid ONNX; the signature is read from the graph's inputs alone
    signature = Signature.from_graph(graph)
    assert signature.features == ("a", "b[0]", "b[1]")
    _write_csv(tmp_path / "rows.csv", [], [["1", "2", "3"], ["4", "5", "6"]])
    x, held = load_model_rows(tmp_path / "rows.csv", signature)
    assert held is None
    np.testing.assert_array_equal(x, [[1, 2, 3], [4, 5, 6]])
    _write_csv(tmp_path / "named.csv", ["b[1]", "a", "b[0]"], [["3", "1", "2"]])
    np.testing.assert_array_equal(load_model_rows(tmp_path / "named.csv", signature)[0], [[1, 2, 3]])
    np.save(tmp_path / "rows.npy", np.array([[1.0, 2.0, 3.0]]))
    np.testing.assert_array_equal(load_model_rows(tmp_path / "rows.npy", signature)[0], [[1, 2, 3]])
