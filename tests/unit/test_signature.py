"""Any model a team deploys: signatures read from the graph, the canonical rewrite, held values through the
scorer (numpy rows and the neighbourhood graph), fixed batch dimensions, and γ = 0 for models linear in their float
inputs while their categorical and id inputs vary from row to row."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx
import pytest
from numpy.typing import NDArray
from onnx import TensorProto, helper, numpy_helper

from monitor.errors import ModelError
from monitor.model.onnx import OnnxModel, OnnxRuntimeOptions
from monitor.model.signature import HELD_COLUMNS, Held, Signature, SignatureError
from monitor.model.standardize import Standardizer
from monitor.signals.scorer import RobustnessScorer, ScoringConfig
from tests import model_zoo
from tests.unit import onnx_graphs

EPS32 = float(np.finfo(np.float32).eps)
BALLS = ["simplex", "simplex+anti", "rotations:3", "hypercube:4"]


def _save(graph: onnx.GraphProto, path: Path, opset: int = 17) -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _mixed_regressor(path: Path) -> Path:
    """y = a·2 + b·[1, −1] + [0.5 if flag else 0] + len-free offset by city: inputs a float [N, 1], b double [N, 2],
    city string [N, 1] (one-hot through a LabelEncoder → Gather), flag bool [N, 1]. Linear in a and b."""
    nodes = [
        helper.make_node("Cast", ["b"], ["b32"], to=TensorProto.FLOAT),
        helper.make_node("MatMul", ["b32", "wb"], ["bw"]),
        helper.make_node("Mul", ["a", "two"], ["a2"]),
        helper.make_node("Add", ["a2", "bw"], ["lin"]),
        onnx_graphs.city_id_node(),
        helper.make_node("Gather", ["city_offsets", "city_id"], ["city_off"], axis=0),
        helper.make_node("Cast", ["flag"], ["flag_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["flag_f", "half"], ["flag_off"]),
        helper.make_node("Add", ["lin", "city_off"], ["y1"]),
        helper.make_node("Add", ["y1", "flag_off"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "mixed",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 1]),
            helper.make_tensor_value_info("city", TensorProto.STRING, ["N", 1]),
            helper.make_tensor_value_info("b", TensorProto.DOUBLE, ["N", 2]),
            helper.make_tensor_value_info("flag", TensorProto.BOOL, ["N", 1]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])],
        initializer=[
            numpy_helper.from_array(np.array([[1.0], [-1.0]], np.float32), "wb"),
            numpy_helper.from_array(np.array([2.0], np.float32), "two"),
            numpy_helper.from_array(np.array([0.5], np.float32), "half"),
            numpy_helper.from_array(np.array([0.0, 10.0, 20.0], np.float32), "city_offsets"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _mixed_inputs(rows: int, seed: int = 0) -> dict[str, NDArray[np.generic]]:
    rng = np.random.default_rng(seed)
    return {
        "a": rng.normal(size=(rows, 1)).astype(np.float32),
        "city": np.array([["rome", "oslo", "lima"][i % 3] for i in range(rows)], dtype=object).reshape(-1, 1),
        "b": rng.normal(size=(rows, 2)),
        "flag": (np.arange(rows) % 2 == 0).reshape(-1, 1),
    }


def _expected_mixed(inputs: dict[str, NDArray[np.generic]]) -> NDArray[np.float64]:
    offsets = {"rome": 10.0, "oslo": 20.0}
    a = np.asarray(inputs["a"], np.float64)[:, 0]
    b = np.asarray(inputs["b"], np.float64)
    city = np.array([offsets.get(c, 0.0) for c in inputs["city"][:, 0]])
    expected: NDArray[np.float64] = (
        2 * a + b[:, 0] - b[:, 1] + city + 0.5 * np.asarray(inputs["flag"][:, 0], np.float64)
    )
    return expected


# -- the signature ----------------------------------------------------------------------------------------------
def test_signature_orders_float_elements_and_holds_the_rest(tmp_path: Path) -> None:
    model = OnnxModel(_mixed_regressor(tmp_path / "m.onnx"))
    sig = model.signature
    assert sig.features == ("a", "b[0]", "b[1]")
    assert [s.name for s in sig.held_inputs] == ["city", "flag"]
    assert model.n_features == 3 and not sig.plain and sig.held_keys == ("city", "flag")
    assert model.describe()["inputs"] == [
        "'a' float [batch, 1]",
        "'city' string [batch, 1]",
        "'b' double [batch, 2]",
        "'flag' bool [batch, 1]",
    ]


def test_a_mixed_model_evaluates_what_onnxruntime_computes_on_its_own_inputs(tmp_path: Path) -> None:
    model = OnnxModel(_mixed_regressor(tmp_path / "m.onnx"))
    inputs = _mixed_inputs(7)
    x, held = model.signature.split(inputs)
    out = model.evaluate(x.astype(np.float32), held)
    assert out.value is not None
    np.testing.assert_allclose(out.value[:, 0], _expected_mixed(inputs), rtol=1e-5, atol=1e-5)


def test_evaluate_without_the_held_values_says_which_are_needed(tmp_path: Path) -> None:
    model = OnnxModel(_mixed_regressor(tmp_path / "m.onnx"))
    with pytest.raises(ModelError, match=r"holds 'city', 'flag' fixed; their values were not given"):
        model.evaluate(np.zeros((2, 3), np.float32))


def test_fixed_features_hold_named_float_columns(tmp_path: Path) -> None:
    model = OnnxModel(_mixed_regressor(tmp_path / "m.onnx"), fixed_features=["b[1]"])
    sig = model.signature
    assert sig.features == ("a", "b[0]") and sig.held_features == ("b[1]",)
    inputs = _mixed_inputs(5, seed=3)
    x, held = sig.split(inputs)
    assert x.shape == (5, 2) and held.values[HELD_COLUMNS].shape == (5, 1)
    np.testing.assert_allclose(held.values[HELD_COLUMNS][:, 0], inputs["b"][:, 1].astype(np.float32))
    out = model.evaluate(x.astype(np.float32), held)
    assert out.value is not None
    np.testing.assert_allclose(out.value[:, 0], _expected_mixed(inputs), rtol=1e-5, atol=1e-5)


def test_fixed_features_must_name_float_features(tmp_path: Path) -> None:
    with pytest.raises(
        ModelError, match=r"fixed_features names \['city'\].*float features are 'a', 'b\[0\]', 'b\[1\]'"
    ):
        OnnxModel(_mixed_regressor(tmp_path / "m.onnx"), fixed_features=["city"])


def test_two_float_inputs_are_one_vector(tmp_path: Path) -> None:
    model = OnnxModel(onnx_graphs.two_input_model(tmp_path / "two.onnx"))
    assert model.signature.features == ("a[0]", "a[1]", "b[0]", "b[1]")
    out = model.evaluate(np.array([[1, 2, 10, 20]], np.float32))
    assert out.value is not None
    np.testing.assert_allclose(out.value, [[11, 22]])


def test_a_three_dimensional_input_is_flattened_row_major(tmp_path: Path) -> None:
    model = OnnxModel(onnx_graphs.three_d_input_model(tmp_path / "3d.onnx"))
    assert model.n_features == 6 and model.signature.features[:2] == ("x[0,0]", "x[0,1]")
    out = model.evaluate(np.arange(12, dtype=np.float32).reshape(2, 6))
    assert out.value is not None
    np.testing.assert_allclose(out.value, np.arange(12).reshape(2, 6))


def test_a_model_without_float_inputs_is_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"has no float feature to perturb: inputs 'x' string \[batch, 2\]"):
        OnnxModel(onnx_graphs.string_input_model(tmp_path / "str.onnx"))


def test_a_symbolic_feature_dimension_is_refused_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"shape \[N, F\]: dimension 1 is not a fixed integer.*export with a fixed"):
        OnnxModel(onnx_graphs.dynamic_width_model(tmp_path / "dyn.onnx"))


def test_an_unsupported_input_type_names_the_supported_ones(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)],
        "c64",
        [helper.make_tensor_value_info("x", TensorProto.COMPLEX64, ["N", 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])],
    )
    with pytest.raises(
        ModelError, match=r"input 'x' is type 14; supported input types are float, double, float16 and bfloat16"
    ):
        OnnxModel(_save(graph, tmp_path / "c64.onnx"))


def test_split_names_the_input_and_shapes_on_a_mismatch(tmp_path: Path) -> None:
    sig = OnnxModel(_mixed_regressor(tmp_path / "m.onnx")).signature
    inputs = _mixed_inputs(3)
    with pytest.raises(ModelError, match=r"missing 'flag'"):
        sig.split({k: v for k, v in inputs.items() if k != "flag"})
    with pytest.raises(ModelError, match=r"input 'b' double \[batch, 2\] expects rows of shape \[2\]; got .*\[3, 3\]"):
        sig.split({**inputs, "b": np.zeros((3, 3))})
    with pytest.raises(ModelError, match=r"'a' has 2 rows; the others have 3|'city' has 3 rows; the others have 2"):
        sig.split({**inputs, "a": np.zeros((2, 1), np.float32)})


def test_row_from_map_reads_inputs_and_element_names(tmp_path: Path) -> None:
    sig = OnnxModel(_mixed_regressor(tmp_path / "m.onnx")).signature
    x, held = sig.row_from_map({"a": 1.5, "b": [2, 3], "city": "oslo", "flag": True})
    assert x == [1.5, 2.0, 3.0] and held["city"].tolist() == ["oslo"] and held["flag"].tolist() == [True]
    x, _ = sig.row_from_map({"a": [1.5], "b[0]": 2, "b[1]": 3, "city": ["rome"], "flag": 0})
    assert x == [1.5, 2.0, 3.0]
    with pytest.raises(SignatureError, match=r"takes strings") as err:
        sig.row_from_map({"a": 1.5, "b": [2, 3], "city": 7, "flag": True})
    assert err.value.reason == "bad_features"
    with pytest.raises(SignatureError, match=r"lacks 'flag'") as err:
        sig.row_from_map({"a": 1.5, "b": [2, 3], "city": "oslo"})
    assert err.value.reason == "missing_field"
    with pytest.raises(SignatureError, match=r"expects 2 values at depth 1; got a list of 3"):
        sig.row_from_map({"a": 1.5, "b": [2, 3, 4], "city": "oslo", "flag": True})


# -- held values through the scorer ----------------------------------------------------------------------------
@pytest.mark.parametrize("ball", BALLS)
@pytest.mark.parametrize("in_graph", [True, False])
def test_gamma_is_zero_for_a_model_linear_in_its_floats_while_held_inputs_vary(
    tmp_path: Path, ball: str, in_graph: bool
) -> None:
    model = OnnxModel(_mixed_regressor(tmp_path / "m.onnx"), OnnxRuntimeOptions(rows_in_graph=in_graph))
    inputs = _mixed_inputs(9, seed=5)
    x, held = model.signature.split(inputs)
    assert len(set(held.values["city"][:, 0])) == 3 and len(set(held.values["flag"][:, 0])) == 2
    scorer = RobustnessScorer(
        model, Standardizer.fit(x), ScoringConfig(radius=0.3, ball=ball, output="value", flicker_copies=4), held
    )
    result = scorer.score(x, held)
    assert scorer.rows_built_in_graph is in_graph
    assert np.all(np.abs(result.gamma) < 64 * EPS32 * 30), result.gamma
    assert np.all(result.flicker == 0.0)


def test_the_neighbourhood_graph_repeats_held_values_for_ball_points_and_copies(tmp_path: Path) -> None:
    """In-graph rows and numpy rows give the same scores for a non-linear model with held inputs."""
    path = model_zoo.build_column_transformer_classifier(tmp_path).path
    inputs = model_zoo.build_column_transformer_classifier(tmp_path).inputs
    results = []
    for in_graph in (True, False):
        model = OnnxModel(path, OnnxRuntimeOptions(rows_in_graph=in_graph))
        x, held = model.signature.split(inputs)
        scorer = RobustnessScorer(model, Standardizer.fit(x), ScoringConfig(radius=0.5, flicker_copies=8), held)
        results.append(scorer.score(x, held))
        assert scorer.rows_built_in_graph is in_graph
    graph, rows = results
    np.testing.assert_allclose(graph.gamma, rows.gamma, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(graph.predicted_class, rows.predicted_class)
    np.testing.assert_allclose(graph.flicker, rows.flicker)


def test_a_neighbourhood_graph_that_disagrees_on_the_first_batch_falls_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = OnnxModel(_mixed_regressor(tmp_path / "m.onnx"))
    x, held = model.signature.split(_mixed_inputs(4))
    scorer = RobustnessScorer(model, Standardizer.fit(x), ScoringConfig(flicker_copies=2, output="value"), held)
    assert scorer._neighbourhood is not None
    scorer._neighbourhood.check_first = lambda **_: "output value differs (test)"
    with caplog.at_level(logging.WARNING):
        result = scorer.score(x, held)
    assert not scorer.rows_built_in_graph and np.all(np.isfinite(result.gamma))
    assert "disagrees with the model on the first batch" in caplog.text


# -- fixed batch dimensions ---------------------------------------------------------------------------------------
def test_a_fixed_batch_of_one_is_made_free_and_checked(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    zoo = model_zoo.build_fixed_batch_one(tmp_path)
    with caplog.at_level(logging.INFO):
        model = OnnxModel(zoo.path)
    assert model._run_batch is None
    assert "fixed batch of 1; made free by a graph rewrite" in caplog.text
    out = model.evaluate(zoo.inputs["x"])
    assert out.value is not None
    np.testing.assert_allclose(out.value, zoo.expected, rtol=1e-5, atol=1e-5)
    scorer = RobustnessScorer(model, Standardizer.fit(zoo.inputs["x"]), ScoringConfig(flicker_copies=3))
    assert scorer.rows_built_in_graph
    assert np.all(np.isfinite(scorer.score(zoo.inputs["x"]).gamma))


def test_a_batch_that_cannot_be_freed_runs_row_by_row_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        model = OnnxModel(onnx_graphs.batch_bound(tmp_path / "bound.onnx"))
    assert model._run_batch == 1
    assert "rows are evaluated in runs of 1" in caplog.text and "µs per run measured at load" in caplog.text
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    out = model.evaluate(x)
    assert out.value is not None
    np.testing.assert_allclose(out.value, x + [1, 2, 3])
    scorer = RobustnessScorer(model, Standardizer.fit(x), ScoringConfig(flicker_copies=2, output="value"))
    assert not scorer.rows_built_in_graph
    assert np.all(np.abs(scorer.score(x).gamma) < 1e-4)


# -- the zoo: every model loads and scores ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", model_zoo.NAMES)
def test_every_zoo_model_loads_evaluates_and_scores(tmp_path: Path, name: str) -> None:
    zoo = getattr(model_zoo, f"build_{name}")(tmp_path)
    model = OnnxModel(zoo.path)
    x, held = model.signature.split(zoo.inputs)
    out = model.evaluate(x.astype(np.float32), held if model.signature.has_held else None)
    if model.kind == "classifier":
        assert out.label is not None
        np.testing.assert_array_equal(out.label, zoo.expected)
    else:
        assert out.value is not None
        np.testing.assert_allclose(out.value, zoo.expected.reshape(len(x), -1), rtol=1e-4, atol=1e-4)
    scorer = RobustnessScorer(
        model, Standardizer.fit(x), ScoringConfig(flicker_copies=4), held if model.signature.has_held else None
    )
    result = scorer.score(x, held if model.signature.has_held else None)
    assert result.valid.all() and np.all(np.isfinite(result.gamma)) and np.all(np.isfinite(result.flicker))


@pytest.mark.parametrize("ball", BALLS)
@pytest.mark.parametrize("name", ["column_transformer_regressor", "int64_side_input"])
def test_zoo_models_linear_in_their_floats_have_gamma_zero(tmp_path: Path, name: str, ball: str) -> None:
    zoo = getattr(model_zoo, f"build_{name}")(tmp_path)
    model = OnnxModel(zoo.path)
    x, held = model.signature.split(zoo.inputs)
    varying = [k for k, v in held.values.items() if len({str(r) for r in v.tolist()}) > 1]
    assert varying, "the held inputs vary from row to row"
    scorer = RobustnessScorer(
        model, Standardizer.fit(x), ScoringConfig(radius=0.3, ball=ball, output="value", flicker_copies=0), held
    )
    gamma = scorer.score(x, held).gamma
    scale = 1.0 + float(np.abs(zoo.expected).max())
    assert np.all(np.abs(gamma) < 64 * EPS32 * scale), gamma


def test_an_image_model_takes_nchw_pixels_as_one_vector(tmp_path: Path) -> None:
    zoo = model_zoo.build_cnn_digits(tmp_path)
    model = OnnxModel(zoo.path)
    assert model.n_features == 64 and model.signature.features[9] == "image[0,1,1]"
    x, _ = model.signature.split(zoo.inputs)
    np.testing.assert_array_equal(x, zoo.inputs["image"].reshape(len(x), 64))


def test_signature_build_refuses_a_model_with_nothing_to_perturb() -> None:
    from monitor.model.signature import InputSpec

    spec = InputSpec("ids", TensorProto.INT64, (2,), None)
    with pytest.raises(ModelError, match="no float feature to perturb"):
        Signature.build([spec])


def test_held_take_repeat_concat_stack() -> None:
    held = Held({"c": np.array([["a"], ["b"]], dtype=object), "i": np.array([[1], [2]])})
    assert held.repeat(2).values["i"][:, 0].tolist() == [1, 1, 2, 2]
    assert Held.concat([held, held.take(np.array([1]))]).values["c"][:, 0].tolist() == ["a", "b", "b"]
    stacked = Held.stack([{"c": np.array(["x"], dtype=object), "i": np.array([3])}] * 2)
    assert len(stacked) == 2 and stacked.values["i"].shape == (2, 1)


# -- standardization of images ------------------------------------------------------------------------------------
def test_image_scales_global_and_per_channel(tmp_path: Path) -> None:
    from monitor.model.signature import InputSpec, scale_groups

    nchw = Signature.build([InputSpec("img", TensorProto.FLOAT, (2, 2, 2), None)])
    assert scale_groups(nchw, "per_feature") is None
    assert scale_groups(nchw, "global").tolist() == [0] * 8  # type: ignore[union-attr]
    assert scale_groups(nchw, "per_channel", 1).tolist() == [0, 0, 0, 0, 1, 1, 1, 1]  # type: ignore[union-attr]
    assert scale_groups(nchw, "per_channel", -1).tolist() == [0, 1, 0, 1, 0, 1, 0, 1]  # type: ignore[union-attr]
    with pytest.raises(ModelError, match="channel_axis 4 is outside input 'img'"):
        scale_groups(nchw, "per_channel", 4)
    rows = np.random.default_rng(0).normal(size=(50, 8)) * np.array([1, 1, 1, 1, 5, 5, 5, 5]) + 3
    rows[:, 0] = 0.0  # a border pixel, always 0: per feature its scale would fall back to 1
    std = Standardizer.fit(rows, groups=scale_groups(nchw, "per_channel", 1))
    assert len(set(std.scale[:4].round(12))) == 1 and len(set(std.scale[4:].round(12))) == 1
    assert std.scale[4] > 3 * std.scale[0]
    np.testing.assert_allclose(std.mean[4:], rows[:, 4:].mean())


def test_the_digits_model_in_pixel_units_and_global_scale(tmp_path: Path) -> None:
    from monitor.model.signature import scale_groups

    zoo = model_zoo.build_cnn_digits(tmp_path)
    model = OnnxModel(zoo.path)
    x, _ = model.signature.split(zoo.inputs)
    for std in (Standardizer.identity(64), Standardizer.fit(x, groups=scale_groups(model.signature, "global"))):
        result = RobustnessScorer(model, std, ScoringConfig(radius=0.5, flicker_copies=8)).score(x)
        assert result.valid.all() and np.all(np.isfinite(result.gamma))


def test_row_from_map_takes_an_image_pixel_by_pixel(tmp_path: Path) -> None:
    from monitor.model.signature import InputSpec

    sig = Signature.build([InputSpec("img", TensorProto.FLOAT, (1, 2, 2), None)])
    pixels = {f"img[0,{i},{j}]": float(2 * i + j) for i in range(2) for j in range(2)}
    x, held = sig.row_from_map(pixels)
    assert x == [0.0, 1.0, 2.0, 3.0] and held == {}
    one = Signature.build(
        [InputSpec("v", TensorProto.FLOAT, (1,), None), InputSpec("w", TensorProto.FLOAT, (2,), None)]
    )
    assert one.row_from_map({"v": 1.0, "w[0]": 2.0, "w[1]": 3.0})[0] == [1.0, 2.0, 3.0]
