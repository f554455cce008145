"""Single-value constants widened to their partners' rank (monitor/model/broadcast.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from monitor.model.broadcast import widen_scalar_operands
from monitor.model.onnx import OnnxModel


def _model(nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], out_shape: list[object]) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    model.ir_version = 8
    return model


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(["y"], {"x": x})[0])


def test_a_scalar_meeting_a_column_is_reshaped_and_the_results_are_unchanged() -> None:
    """skl2onnx's ``1 - p`` for a binary classifier: Sub(scalar, [N, 1]), then a Mul by a [1]-shaped constant."""
    one = numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one")
    half = numpy_helper.from_array(np.array([0.5], dtype=np.float32), "half")
    model = _model(
        [
            helper.make_node("Sub", ["one", "x"], ["neg"]),
            helper.make_node("Mul", ["neg", "half"], ["scaled"]),
            helper.make_node("Concat", ["scaled", "x"], ["y"], axis=1),
        ],
        [one, half],
        ["N", 2],
    )
    x = np.random.default_rng(0).random((7, 1), dtype=np.float32)
    before = _run(model, x)
    assert widen_scalar_operands(model) == 2
    after = _run(model, x)
    np.testing.assert_array_equal(after, before)
    assert after.shape == (7, 2)
    shapes = {init.name: list(init.dims) for init in model.graph.initializer}
    assert shapes["one_rank2"] == [1, 1] and shapes["half_rank2"] == [1, 1]
    assert [n.input[0] for n in model.graph.node[:1]] == ["one_rank2"]


def test_constants_already_of_full_rank_or_of_unknown_partners_are_left_alone() -> None:
    wide = numpy_helper.from_array(np.array([[2.0]], dtype=np.float32), "wide")
    model = _model([helper.make_node("Add", ["x", "wide"], ["y"])], [wide], ["N", 1])
    assert widen_scalar_operands(model) == 0
    # a partner with no inferred rank (an input without a shape): nothing to widen to
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "two"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.array(2.0, dtype=np.float32), "two")],
    )
    unknown = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    assert widen_scalar_operands(unknown) == 0


def test_a_constant_that_is_also_a_graph_input_is_not_rewritten() -> None:
    """A caller may feed such an initializer: its shape is part of the interface."""
    one = numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one")
    model = _model([helper.make_node("Sub", ["one", "x"], ["y"])], [one], ["N", 1])
    model.graph.input.append(helper.make_tensor_value_info("one", TensorProto.FLOAT, []))
    assert widen_scalar_operands(model) == 0


def test_onnx_model_loads_the_widened_graph(tmp_path: Path) -> None:
    from sklearn.neural_network import MLPClassifier

    from tests.unit import onnx_graphs

    x, y = onnx_graphs.training_blobs(5)
    mlp = MLPClassifier(hidden_layer_sizes=(4,), solver="lbfgs", max_iter=2000, random_state=0).fit(x, y)
    path = onnx_graphs.sklearn_to_onnx(tmp_path / "mlp.onnx", mlp, 2, zipmap=False)
    subs = [n for n in onnx.load(path).graph.node if n.op_type == "Sub"]
    assert subs, "skl2onnx writes the negative class as Sub(1, p)"
    model = OnnxModel(path)
    loaded = onnx.load_from_string(model._model_bytes).graph
    ranks = {init.name: len(init.dims) for init in loaded.initializer}
    assert all(ranks.get(t, 2) == 2 for n in loaded.node if n.op_type == "Sub" for t in n.input)
    rows = x[:9].astype(np.float32)
    np.testing.assert_allclose(model.evaluate(rows).proba, mlp.predict_proba(rows), rtol=1e-5, atol=1e-6)
