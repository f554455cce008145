"""Stage 1 for models with several inputs, categorical (string/int/bool) inputs and N-D tensors: events
and KServe requests decoded by the model's :class:`~monitor.model.signature.Signature` into x and held values
(monitor/source/validate.py ``signature_row``, monitor/source/kserve.py), and every misfit refused with a reason and
a message that names the input.

The models are built here with ``onnx.helper``; most tests need only their signature, one runs decoded events
through the ONNX copy and checks it against onnxruntime on the model's own inputs."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from monitor import telemetry as tel
from monitor.errors import ConfigError, InvalidEventError
from monitor.events import InferenceEvent, LivePrediction, feature_rows, held_rows
from monitor.model.onnx import OnnxModel
from monitor.model.signature import HELD_COLUMNS, Signature
from monitor.source.decode import EventDecoder
from monitor.source.kserve import KServeRequest
from monitor.source.kserve_join import KServeJoiner
from monitor.source.validate import INVALID_REASONS, ModelSchema
from tests.unit import onnx_graphs
from tests.unit.test_decode import TS, ce_headers

# ---------------------------------------------------------------------- models


def _const(name: str, value: Any, dtype: Any = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name=name)


def _model(
    nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], inits: list[onnx.TensorProto]
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "m", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])], initializer=inits
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)], ir_version=8
    )
    onnx.checker.check_model(model)
    return model


def side_model() -> onnx.ModelProto:
    """y = x·w + 0.5·id: float x [N, 3], int64 id [N, 1]."""
    return _model(
        [
            helper.make_node("MatMul", ["x", "w"], ["xw"]),
            helper.make_node("Cast", ["id"], ["id_f"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["id_f", "half"], ["id_half"]),
            helper.make_node("Add", ["xw", "id_half"], ["y"]),
        ],
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3]),
            helper.make_tensor_value_info("id", TensorProto.INT64, ["N", 1]),
        ],
        [_const("w", [[1.0], [2.0], [3.0]]), _const("half", 0.5)],
    )


def mixed_model() -> onnx.ModelProto:
    """y = 2·a + b·[1, −1] + offset(city): float a [N, 1], float b [N, 2], string city [N, 1] (skl2onnx's one input
    per column form)."""
    return _model(
        [
            helper.make_node("Mul", ["a", "two"], ["a2"]),
            helper.make_node("MatMul", ["b", "wb"], ["bw"]),
            onnx_graphs.city_id_node(),
            helper.make_node("Gather", ["offsets", "city_id"], ["city_off"], axis=0),
            helper.make_node("Reshape", ["city_off", "col"], ["city_col"]),
            helper.make_node("Add", ["a2", "bw"], ["lin"]),
            helper.make_node("Add", ["lin", "city_col"], ["y"]),
        ],
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 1]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 2]),
            helper.make_tensor_value_info("city", TensorProto.STRING, ["N", 1]),
        ],
        [
            _const("two", 2.0),
            _const("wb", [[1.0], [-1.0]]),
            _const("offsets", [0.0, 10.0, 20.0]),
            _const("col", [-1, 1], np.int64),
        ],
    )


def image_model() -> onnx.ModelProto:
    """y = flatten(img)·w: float img [N, 1, 4, 4] (NCHW)."""
    return _model(
        [helper.make_node("Flatten", ["img"], ["flat"]), helper.make_node("MatMul", ["flat", "w"], ["y"])],
        [helper.make_tensor_value_info("img", TensorProto.FLOAT, ["N", 1, 4, 4])],
        [_const("w", np.arange(16, dtype=np.float32).reshape(16, 1))],
    )


def double_model() -> onnx.ModelProto:
    """y = d·[1, 2] + flag: double d [N, 2], bool flag [N]."""
    return _model(
        [
            helper.make_node("MatMul", ["d", "w"], ["dw"]),
            helper.make_node("Cast", ["dw"], ["dw32"], to=TensorProto.FLOAT),
            helper.make_node("Cast", ["flag"], ["flag_f"], to=TensorProto.FLOAT),
            helper.make_node("Unsqueeze", ["flag_f", "one"], ["flag_col"]),
            helper.make_node("Add", ["dw32", "flag_col"], ["y"]),
        ],
        [
            helper.make_tensor_value_info("d", TensorProto.DOUBLE, ["N", 2]),
            helper.make_tensor_value_info("flag", TensorProto.BOOL, ["N"]),
        ],
        [_const("w", [[1.0], [2.0]], np.float64), _const("one", [1], np.int64)],
    )


def two_float_model() -> onnx.ModelProto:
    """y = p·[1, 2] + q: float p [N, 2], float q [N, 1] (used with ``fixed_features`` p[1])."""
    return _model(
        [helper.make_node("MatMul", ["p", "w"], ["pw"]), helper.make_node("Add", ["pw", "q"], ["y"])],
        [
            helper.make_tensor_value_info("p", TensorProto.FLOAT, ["N", 2]),
            helper.make_tensor_value_info("q", TensorProto.FLOAT, ["N", 1]),
        ],
        [_const("w", [[1.0], [2.0]])],
    )


def sig(model: onnx.ModelProto, fixed: tuple[str, ...] = ()) -> Signature:
    return Signature.from_graph(model.graph, fixed, model="m")


SIGS = {
    "side": sig(side_model()),
    "mixed": sig(mixed_model()),
    "image": sig(image_model()),
    "double": sig(double_model()),
    "fixed": sig(two_float_model(), ("p[1]",)),
}


def decoder() -> EventDecoder:
    models = {name: ModelSchema(s.n_features, signature=s, default_version="1") for name, s in SIGS.items()}
    models["plain"] = ModelSchema(3, ("u", "v", "w"))
    return EventDecoder(models, default_model="side")


def event(model: str, features: object, **fields: Any) -> bytes:
    return json.dumps({"id": "e1", "ts": TS, "model": model, "features": features, **fields}).encode()


def refused(value: bytes, reason: str, *names: str, headers: list[tuple[str, bytes]] | None = None) -> str:
    """Decode ``value``: it must be refused with ``reason`` (a documented one) and a message naming ``names``."""
    assert reason in INVALID_REASONS
    with pytest.raises(InvalidEventError) as info:
        if headers is None:
            decoder().decode(value)
        else:
            decoder().decode_many(value, headers)
    message = str(info.value)
    assert info.value.reason == reason, message
    for name in names:
        assert name in message, (name, message)
    message.encode("utf-8")
    return message


# ---------------------------------------------------------------------- the schema


def test_schema_takes_a_signature_and_checks_its_width() -> None:
    s = SIGS["side"]
    assert ModelSchema(3, signature=s).shaped is s
    with pytest.raises(ConfigError, match="3 perturbable features"):
        ModelSchema(4, signature=s)
    plain = sig(
        _model(
            [helper.make_node("MatMul", ["x", "w"], ["y"])],
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
            [_const("w", [[1.0], [2.0]])],
        )
    )
    assert plain.plain and ModelSchema(2, signature=plain).shaped is None  # a plain model decodes as before
    assert ModelSchema(2, signature=plain) == ModelSchema(2)


def test_plain_signature_decodes_exactly_as_without_one() -> None:
    plain = sig(
        _model(
            [helper.make_node("MatMul", ["x", "w"], ["y"])],
            [helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["N", 2])],
            [_const("w", [[1.0], [2.0]], np.float64)],
        )
    )
    assert plain.plain  # a double [N, 2] input is plain too
    with_sig = EventDecoder({"m": ModelSchema(2, ("u", "v"), signature=plain)}, default_model="m")
    without = EventDecoder({"m": ModelSchema(2, ("u", "v"))}, default_model="m")
    for features in ([1, 2.5], {"v": 2, "u": 1}, [1, float("nan")], [1], {"u": 1}):
        value = json.dumps({"id": "p", "ts": TS, "features": features}).encode()
        try:
            expected: object = without.decode(value)
        except InvalidEventError as exc:
            expected = (exc.reason, str(exc))
        try:
            got: object = with_sig.decode(value)
        except InvalidEventError as exc:
            got = (exc.reason, str(exc))
        assert repr(got) == repr(expected)


# ---------------------------------------------------------------------- accepted forms


def test_int_side_input_by_input_name_and_by_element_name() -> None:
    for features in (
        {"x": [1, 2, 3.5], "id": 7},
        {"id": [7], "x": [1, 2, 3.5]},
        {"x[0]": 1, "x[1]": 2, "x[2]": 3.5, "id": [[7]]},
        {"x": [1, 2, 3.5], "id": 7.0},  # a whole float is a whole number
    ):
        ev = decoder().decode(event("side", features))
        assert ev.features.tolist() == [1.0, 2.0, 3.5]
        assert ev.held is not None and set(ev.held) == {"id"}
        assert ev.held["id"].dtype == np.int64 and ev.held["id"].tolist() == [7]


def test_string_input_and_one_element_float_inputs() -> None:
    for a in (0.5, [0.5], [[0.5]]):
        ev = decoder().decode(event("mixed", {"a": a, "b": [1, -2], "city": "oslo"}))
        assert ev.features.tolist() == [0.5, 1.0, -2.0]
        assert ev.held is not None and ev.held["city"].dtype == object and ev.held["city"].tolist() == ["oslo"]
    by_element = decoder().decode(event("mixed", {"a": 0.5, "b[0]": 1, "b[1]": -2, "city": ["oslo"]}))
    assert by_element.features.tolist() == [0.5, 1.0, -2.0] and by_element.held is not None
    assert by_element.held["city"].tolist() == ["oslo"]
    unicode = decoder().decode(event("mixed", {"a": 0, "b": [0, 0], "city": "Zürich ✓"}))
    assert unicode.held is not None and unicode.held["city"].tolist() == ["Zürich ✓"]


def test_image_input_as_nested_tensor_list_and_element_names() -> None:
    rng = np.random.default_rng(3)
    img = rng.standard_normal((1, 4, 4)).round(3)
    nested = decoder().decode(event("image", {"img": img.tolist()}))
    assert nested.held is None and nested.features.tolist() == img.ravel().tolist()  # row-major, NCHW as given
    flat = decoder().decode(event("image", img.ravel().tolist()))  # no held input: a list of every float
    assert isinstance(flat._features, list)  # the fast path took it as it is
    assert flat.held is None and flat.features.tolist() == img.ravel().tolist()
    names = SIGS["image"].features
    assert names[0] == "img[0,0,0]" and names[-1] == "img[0,3,3]"
    by_name = decoder().decode(event("image", dict(zip(names, img.ravel().tolist(), strict=True))))
    assert by_name.features.tolist() == img.ravel().tolist()


def test_double_input_with_a_bool_input() -> None:
    for flag in (True, [False], 1):
        ev = decoder().decode(event("double", {"d": [1.5, -2.25], "flag": flag}))
        assert ev.features.tolist() == [1.5, -2.25]
        assert ev.held is not None and ev.held["flag"].dtype == np.bool_ and ev.held["flag"].shape == ()
        assert bool(ev.held["flag"]) is bool(flag if not isinstance(flag, list) else flag[0])


def test_fixed_features_travel_as_held_columns_from_a_list_or_a_map() -> None:
    s = SIGS["fixed"]
    assert s.features == ("p[0]", "q") and s.held_features == ("p[1]",)
    for features in ([1.0, 2.0, 3.0], {"p": [1, 2], "q": 3}, {"p[0]": 1, "p[1]": 2, "q": [3]}):
        ev = decoder().decode(event("fixed", features))
        assert ev.features.tolist() == [1.0, 3.0]
        assert ev.held is not None and ev.held[HELD_COLUMNS].dtype == np.float32
        assert ev.held[HELD_COLUMNS].tolist() == [2.0]
    refused(event("fixed", [1.0, 2.0]), "wrong_width", "3 float values")


def test_decoded_events_drive_the_onnx_copy_like_the_models_own_inputs(tmp_path: Path) -> None:
    """x and held from events, stacked (feature_rows, held_rows) and evaluated by the monitor's ONNX copy, give what
    onnxruntime gives on the model's own inputs."""
    model = mixed_model()
    path = tmp_path / "mixed.onnx"
    onnx.save(model, str(path))
    onnx_model = OnnxModel(path, model_kind="regressor")
    schema = ModelSchema(onnx_model.n_features, signature=onnx_model.signature)
    dec = EventDecoder({"mixed": schema}, default_model="mixed")
    rng = np.random.default_rng(7)
    a = rng.standard_normal((6, 1)).round(4)
    b = rng.standard_normal((6, 2)).round(4)
    city = np.array([["rome"], ["oslo"], ["lima"], ["oslo"], ["rome"], ["x"]], dtype=object)
    events = [
        dec.decode(event("mixed", {"a": float(a[i, 0]), "b": b[i].tolist(), "city": str(city[i, 0])})) for i in range(6)
    ]
    got = onnx_model.evaluate(feature_rows(events, np.float32), held_rows(events)).value
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = session.run(None, {"a": a.astype(np.float32), "b": b.astype(np.float32), "city": city})
    assert got is not None
    np.testing.assert_allclose(got, want, rtol=1e-6)


# ---------------------------------------------------------------------- refused


@pytest.mark.parametrize(
    ("model", "features", "reason", "names"),
    [
        ("side", [1, 2, 3, 4], "bad_type", ["'id'", "name→value map"]),  # a list cannot carry the id
        ("side", {"x": [1, 2, 3]}, "missing_field", ["'id'", "int64"]),
        ("side", {"x": [1, 2, 3], "id": 1, "ids": 2}, "unknown_feature", ["'ids'"]),
        ("side", {"x": [1, 2, 3], "idd": 1}, "unknown_feature", ["'idd'"]),
        ("side", {"x": [1, 2, 3], "id": "7"}, "bad_type", ["'id'", "whole numbers", "'7'"]),
        ("side", {"x": [1, 2, 3], "id": True}, "bad_type", ["'id'", "True"]),
        ("side", {"x": [1, 2, 3], "id": 2**63}, "bad_type", ["'id'", "9223372036854775807"]),
        ("side", {"x": [1, 2, 3], "id": 2.5}, "bad_type", ["'id'", "2.5"]),
        ("side", {"x": [1, 2, 3], "id": [1, 2]}, "bad_type", ["'id'", "one value per row"]),
        ("side", {"x": [1, "2", 3], "id": 1}, "bad_type", ["'x'", "numbers", "str"]),
        ("side", {"x": [1, True, 3], "id": 1}, "bad_type", ["'x'", "bool"]),
        ("side", {"x": [1, 2], "id": 1}, "bad_type", ["'x'", "expects 3 values", "a list of 2"]),
        ("side", {"x": [[1, 2, 3]], "id": 1}, "bad_type", ["'x'", "expects 3 values", "a list of 1"]),
        ("side", {"x": 1.0, "id": 1}, "bad_type", ["'x'", "expects 3 values"]),
        ("side", {"x[0]": 1, "x[1]": 2, "id": 1}, "missing_field", ["'x[2]'"]),
        ("side", {"x": [1, 2, 1e39], "id": 1}, "out_of_range", ["'x'"]),
        ("side", {"x": [1, 2, 10**400], "id": 1}, "out_of_range", ["'x'"]),
        ("side", {"x": {"a": 1}, "id": 1}, "bad_type", ["'x'", "dict"]),
        ("side", "x=1", "bad_type", ["name→value map", "'id' int64"]),
        ("mixed", {"a": 1, "b": [1, 2], "city": 3}, "bad_type", ["'city'", "strings"]),
        ("mixed", {"a": 1, "b": [1, 2], "city": None}, "bad_type", ["'city'", "strings"]),
        ("mixed", {"a": "1", "b": [1, 2], "city": "rome"}, "bad_type", ["'a'", "numbers"]),
        ("mixed", {"a": 1, "b": [1, 2], "city": "bad\ud800"}, "bad_type", ["'city'", "surrogate"]),
        ("mixed", {"a": [1, 2], "b": [1, 2], "city": "rome"}, "bad_type", ["'a'", "one value per row"]),
        ("mixed", {"a": 1, "b": [1, 2]}, "missing_field", ["'city'", "string"]),
        ("mixed", [1, 2, 3], "bad_type", ["'city'"]),
        ("image", {"img": np.zeros((1, 4, 3)).tolist()}, "bad_type", ["'img'", "expects 4 values at depth 3"]),
        ("image", {"img": np.zeros((4, 4)).tolist()}, "bad_type", ["'img'", "expects 1 values at depth 1"]),
        ("image", {"img": np.zeros((1, 4, 4, 1)).tolist()}, "bad_type", ["'img'", "nested deeper"]),
        ("image", [0.0] * 15, "wrong_width", ["16 float values", "15"]),
        ("image", [0.0] * 15 + ["a"], "bad_type", ["'img[0,3,3]'"]),
        ("image", [0.0] * 15 + [1e39], "out_of_range", ["'img[0,3,3]'"]),
        ("double", {"d": [1, 2], "flag": 2}, "bad_type", ["'flag'", "booleans"]),
        ("double", {"d": [1, 2], "flag": "yes"}, "bad_type", ["'flag'", "booleans"]),
        ("double", {"d": [1, 2], "flag": [True, False]}, "bad_type", ["'flag'"]),
    ],
)
def test_misfit_events_are_refused_with_a_reason_naming_the_input(
    model: str, features: object, reason: str, names: list[str]
) -> None:
    refused(event(model, features), reason, "event 'e1'", *names)


def test_non_finite_values_are_refused_naming_the_input() -> None:
    """orjson refuses NaN literals; the standard library's parser (the fallback) reads them."""
    nan = b'{"id": "n", "ts": 1795168800000, "model": "side", "features": {"x": [1, NaN, 3], "id": 1}}'
    refused(nan, "not_finite", "'x'", "nan")
    inf = b'{"id": "n", "ts": 1795168800000, "model": "image", "features": [' + b"0, " * 15 + b"Infinity]}"
    refused(inf, "not_finite", "'img[0,3,3]'")
    b_nan = (
        b'{"id": "n", "model": "mixed", "ts": 1795168800000, "features": {"a": 1, "b": [1, -Infinity], "city": "x"}}'
    )
    refused(b_nan, "not_finite", "'b'")


def test_missing_features_names_the_inputs() -> None:
    message = refused(json.dumps({"id": "e1", "ts": TS, "model": "mixed"}).encode(), "missing_field")
    assert "'city' string [batch, 1]" in message and "name→value map" in message


def test_random_misfits_never_escape_as_anything_but_invalid_events() -> None:
    """Seeded: events whose input values are replaced by arbitrary JSON decode or are refused with a documented
    reason; nothing else escapes the decoder."""
    rng = np.random.default_rng(21)
    junk: list[object] = [None, True, 0, -1, 2**64, 10**400, 1.5, 1e300, "s", "", [], {}, [[]], [1, [2]], {"a": 1}]
    good: dict[str, dict[str, object]] = {
        "side": {"x": [1, 2, 3], "id": 4},
        "mixed": {"a": 1, "b": [1, 2], "city": "rome"},
        "image": {"img": np.zeros((1, 4, 4)).tolist()},
        "double": {"d": [1, 2], "flag": True},
        "fixed": {"p": [1, 2], "q": 3},
    }
    outcomes: set[str] = set()
    dec = decoder()
    for _ in range(600):
        model = str(rng.choice(list(good)))
        features: dict[str, object] = dict(good[model])
        key = str(rng.choice(list(features)))
        choice = int(rng.integers(4))
        if choice == 0:
            features[key] = junk[int(rng.integers(len(junk)))]
        elif choice == 1:
            del features[key]
        elif choice == 2:
            features[key + "_"] = junk[int(rng.integers(len(junk)))]
        else:
            value = features[key]
            features[key] = [value, value] if rng.random() < 0.5 else [value]
        try:
            ev = dec.decode(event(model, features))
        except InvalidEventError as exc:
            assert exc.reason in INVALID_REASONS
            str(exc).encode("utf-8")
            outcomes.add("refused")
        else:
            assert len(ev.features) == SIGS[model].n_features and np.isfinite(ev.features).all()
            outcomes.add("accepted")
    assert outcomes == {"accepted", "refused"}


# ---------------------------------------------------------------------- KServe


def tensor(name: str, shape: list[int], data: object, datatype: str = "FP32") -> dict[str, Any]:
    return {"name": name, "shape": shape, "datatype": datatype, "data": data}


def mixed_request(**replace: dict[str, Any] | None) -> bytes:
    inputs = {
        "a": tensor("a", [2, 1], [0.5, -1.0]),
        "b": tensor("b", [2, 2], [[1, 2], [3, 4]], "FP64"),
        "city": tensor("city", [2, 1], ["rome", "oslo"], "BYTES"),
    }
    inputs.update(replace)  # type: ignore[arg-type]
    return json.dumps({"id": "r1", "inputs": [t for t in inputs.values() if t is not None]}).encode()


def test_kserve_v2_named_inputs_map_by_name_to_one_event_per_row() -> None:
    events = decoder().decode_many(mixed_request(), ce_headers("request", "r1", isvc="mixed"))
    assert [e.event_id for e in events] == ["r1/0", "r1/1"]
    np.testing.assert_array_equal(np.stack([e.features for e in events]), [[0.5, 1, 2], [-1.0, 3, 4]])
    assert [e.held["city"].tolist() for e in events if e.held is not None] == [["rome"], ["oslo"]]
    assert held_rows(events) is not None


def test_kserve_v2_int_side_input_and_order_of_tensors() -> None:
    body = {
        "inputs": [
            tensor("id", [3], [5, -1, 2**62], "INT64"),  # [B] for a [B, 1] input
            tensor("x", [3, 3], list(range(9)), "FP32"),
        ]
    }
    events = decoder().decode_many(json.dumps(body).encode(), ce_headers("request", "r2", isvc="side"))
    assert [e.features.tolist() for e in events] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert [e.held["id"].tolist() for e in events if e.held is not None] == [[5], [-1], [2**62]]


def test_kserve_v2_image_tensor_nested_and_lone_tensor_of_any_name() -> None:
    rng = np.random.default_rng(5)
    images = rng.integers(0, 255, (2, 1, 4, 4)).astype(float)
    body = {"inputs": [tensor("input-0", [2, 1, 4, 4], images.tolist())]}
    events = decoder().decode_many(json.dumps(body).encode(), ce_headers("request", "r3", isvc="image"))
    np.testing.assert_array_equal(np.stack([e.features for e in events]), images.reshape(2, 16))
    assert all(e.held is None for e in events)


def test_kserve_v2_double_and_bool_inputs() -> None:
    body = {"inputs": [tensor("d", [2, 2], [1, 2, 3, 4], "FP64"), tensor("flag", [2], [True, False], "BOOL")]}
    events = decoder().decode_many(json.dumps(body).encode(), ce_headers("request", "r4", isvc="double"))
    assert [bool(e.held["flag"]) for e in events if e.held is not None] == [True, False]


def test_kserve_v1_instances_as_maps_for_a_model_with_inputs() -> None:
    body = {"instances": [{"a": 1, "b": [2, 3], "city": "rome"}, {"a": [4], "b[0]": 5, "b[1]": 6, "city": ["x"]}]}
    events = decoder().decode_many(json.dumps(body).encode(), ce_headers("request", "r5", isvc="mixed"))
    assert [e.features.tolist() for e in events] == [[1, 2, 3], [4, 5, 6]]
    assert [e.held["city"].tolist() for e in events if e.held is not None] == [["rome"], ["x"]]
    refused(
        json.dumps({"instances": [{"a": 1, "b": [2, 3]}]}).encode(),
        "missing_field",
        "KServe request 'r5' instance 0",
        "'city'",
        headers=ce_headers("request", "r5", isvc="mixed"),
    )


def test_kserve_join_keeps_the_held_values() -> None:
    joiner = KServeJoiner(decoder())
    headers = ce_headers("request", "r6", isvc="mixed")
    assert joiner.update(mixed_request(), headers, now=0.0) == []
    response = {"outputs": [{"name": "y", "shape": [2, 1], "datatype": "FP32", "data": [1.5, 2.5]}]}
    events = joiner.update(json.dumps(response).encode(), ce_headers("response", "r6", isvc="mixed"), now=0.1)
    assert [e.prediction for e in events] == [LivePrediction(value=(1.5,)), LivePrediction(value=(2.5,))]
    assert [e.held["city"].tolist() for e in events if e.held is not None] == [["rome"], ["oslo"]]
    # and released unpaired at expiry, still with them
    joiner.update(mixed_request(), ce_headers("request", "r7", isvc="mixed"), now=1.0)
    expired = joiner.expire(100.0)
    assert [e.held["city"].tolist() for e in expired if e.held is not None] == [["rome"], ["oslo"]]


def test_kserve_request_events_carry_held_rows() -> None:
    req = KServeRequest("c", "m", "1", 0.0, np.zeros((2, 1)), None, ({"k": np.array([1])}, {"k": np.array([2])}))
    assert [int(e.held["k"][0]) for e in req.events() if e.held is not None] == [1, 2]
    assert all(isinstance(e, InferenceEvent) for e in req.events())


@pytest.mark.parametrize(
    ("replace", "reason", "names"),
    [
        ({"cty": tensor("cty", [2, 1], ["a", "b"], "BYTES")}, "unknown_feature", ["'cty'", "'city' string"]),
        ({"city": None}, "missing_field", ["'city'"]),
        ({"a": tensor("a", [2, 1], [1, 2], "INT64")}, "bad_type", ["'a' float", "FP16 or FP32 or FP64", "INT64"]),
        ({"a": tensor("a", [2, 1], ["1", "2"], "BYTES")}, "bad_type", ["'a' float", "BYTES"]),
        ({"city": tensor("city", [2, 1], [1.0, 2.0], "FP32")}, "bad_type", ["'city' string", "BYTES", "FP32"]),
        ({"city": tensor("city", [2, 1], [1, "b"], "BYTES")}, "bad_type", ["'city' string", "element 0"]),
        ({"b": tensor("b", [2, 3], [0] * 6, "FP32")}, "wrong_width", ["'b' float [batch, 2]", "[2, 3]"]),
        ({"b": tensor("b", [2, 2], [0] * 3, "FP32")}, "wrong_width", ["'b'", "needs 4 values", "3 values"]),
        ({"b": tensor("b", [3, 2], [0] * 6, "FP32")}, "wrong_width", ["'b'", "3 rows"]),
        ({"b": tensor("b", [2, 2], [0, 0, True, 0], "FP32")}, "bad_type", ["'b'", "element 2", "True"]),
        ({"b": tensor("b", [2, 2], [0, 0, 1e39, 0], "FP32")}, "out_of_range", ["'b'", "element 2"]),
        ({"b": tensor("b", [2, 2], [0, 0, 10**400, 0], "FP32")}, "out_of_range", ["'b'"]),
        ({"b": tensor("b", [2, 2], 5, "FP32")}, "bad_type", ["'b'", "data must be a list"]),
        ({"b": tensor("b", [2, -2], [0] * 4, "FP32")}, "bad_type", ["'b'", "sizes"]),
        ({"b": {"name": "b", "shape": [2, 2], "data": [0] * 4}}, "missing_field", ["'datatype'"]),
        ({"city": tensor("city", [2, 1], ["ok", "\ud800"], "BYTES")}, "bad_type", ["'city'", "surrogate"]),
    ],
)
def test_kserve_v2_misfits_are_refused_with_a_reason_naming_the_input(
    replace: dict[str, Any], reason: str, names: list[str]
) -> None:
    refused(
        mixed_request(**replace),
        reason,
        "KServe request 'r1'",
        *names,
        headers=ce_headers("request", "r1", isvc="mixed"),
    )


def test_kserve_v2_int_and_bool_misfits() -> None:
    headers = ce_headers("request", "r8", isvc="side")
    x = tensor("x", [1, 3], [1, 2, 3])
    for id_tensor, names in (
        (tensor("id", [1, 1], [2**63], "INT64"), ["'id' int64", "9223372036854775807"]),
        (tensor("id", [1, 1], [1.5], "INT64"), ["'id' int64", "1.5"]),
        (tensor("id", [1, 1], [True], "BOOL"), ["'id' int64", "BOOL"]),
        (tensor("id", [1, 1], ["7"], "INT64"), ["'id' int64", "'7'"]),
    ):
        refused(json.dumps({"inputs": [x, id_tensor]}).encode(), "bad_type", *names, headers=headers)
    nan = b'{"inputs": [{"name": "x", "shape": [1, 3], "datatype": "FP32", "data": [1, NaN, 3]}, '
    nan += b'{"name": "id", "shape": [1], "datatype": "INT64", "data": [1]}]}'
    refused(nan, "not_finite", "'x'", headers=headers)
    flag = {"inputs": [tensor("d", [1, 2], [1, 2], "FP64"), tensor("flag", [1], [2], "BOOL")]}
    refused(json.dumps(flag).encode(), "bad_type", "'flag' bool", headers=ce_headers("request", "r9", isvc="double"))


def test_plain_kserve_models_keep_their_behaviour() -> None:
    """A plain model next to shaped ones: several tensors still map onto feature_names as columns."""
    body = {"inputs": [tensor(n, [1], [v], "FP64") for n, v in (("w", 3), ("u", 1), ("v", 2))]}
    (ev,) = decoder().decode_many(json.dumps(body).encode(), ce_headers("request", "p1", isvc="plain"))
    assert ev.features.tolist() == [1, 2, 3] and ev.held is None
    assert math.isclose(float(ev.features.sum()), 6.0)


# ---------------------------------------------------------------------- through the pipeline


def test_pipeline_scores_a_mixed_type_stream_and_counts_misfits_by_reason(tmp_path: Path) -> None:
    """monitor/runtime/pipeline.py gives the decoder the model's signature: map events with a string input are
    scored, misfits counted by reason, and the loop goes on."""
    from monitor.config import load_settings
    from monitor.exporters.prometheus import MetricsState
    from monitor.runtime.models import load_model_runtime
    from monitor.runtime.pipeline import Pipeline
    from monitor.runtime.service import build_sampler
    from monitor.source.replay import ReplaySource

    path = tmp_path / "mixed.onnx"
    onnx.save(mixed_model(), str(path))
    model = {"name": "mixed", "path": str(path), "version": "1", "warmup_events": 30, "scoring": {"flicker_copies": 4}}
    settings = load_settings(
        None,
        {
            "models": [model],
            "state_dir": str(tmp_path / "state"),
            "sampler": {"events_per_second": 0},
            "probes": {"enabled": False},
        },
    )
    rng = np.random.default_rng(11)
    cities = ["rome", "oslo", "lima"]
    lines = [
        json.dumps(
            {
                "id": f"e{i}",
                "ts": 1_795_000_000_000 + i,
                "model": "mixed",
                "features": {"a": float(rng.normal()), "b": rng.normal(size=2).tolist(), "city": cities[i % 3]},
            }
        ).encode()
        for i in range(80)
    ]
    misfits = [
        ({"a": 1, "b": [1, 2]}, "missing_field"),
        ({"a": 1, "b": [1, 2, 3], "city": "rome"}, "bad_type"),
        ({"a": 1, "b": [1, 2], "city": 7}, "bad_type"),
        ({"a": 1, "b": [1, 2], "city": "rome", "zip": 1}, "unknown_feature"),
        ({"a": 1e39, "b": [1, 2], "city": "rome"}, "out_of_range"),
    ]
    lines += [
        json.dumps({"id": f"bad{i}", "ts": 1_795_000_000_000, "model": "mixed", "features": f}).encode()
        for i, (f, _) in enumerate(misfits)
    ]
    runtimes = [load_model_runtime(m) for m in settings.models]
    pipeline = Pipeline(
        settings, ReplaySource(lines), runtimes, build_sampler(settings), state=MetricsState(), clock=lambda: 0.0
    )
    for _ in range(1000):
        if pipeline.step(0.0) == 0 and pipeline.source.exhausted:
            break
    pipeline.close()
    state = pipeline.state
    assert state.counter_sum(tel.EVENTS_CONSUMED_TOTAL.name) == 85
    assert state.counter_sum(tel.EVENTS_SCORED_TOTAL.name) == 80 - 30  # after the warm-up
    assert state.counter_sum(tel.EVENTS_INVALID_TOTAL.name) == len(misfits)
    for reason in {r for _, r in misfits}:
        # counted under the model the events named (a watched one)
        assert state.counter(tel.EVENTS_INVALID_TOTAL.name, ("mixed", reason)) == sum(r == reason for _, r in misfits)
