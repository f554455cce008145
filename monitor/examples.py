"""Small example models for the documentation and the API's runnable examples (no training, no download).

>>> from monitor.examples import linear_classifier
>>> linear_classifier().suffix
'.onnx'
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

#: the example classifier's weights (3 features × 3 classes) and biases
WEIGHTS = ((1.0, -0.5, 0.2), (0.3, 0.8, -1.0), (-0.7, 0.1, 0.9))
BIAS = (0.1, 0.0, -0.1)
#: its feature names
FEATURES = ("age", "income", "debt")


def linear_classifier(path: str | Path | None = None) -> Path:
    """A 3-class linear classifier over three float inputs ``age``, ``income``, ``debt`` (one column each, as
    skl2onnx writes a DataFrame-fitted model), with ``probabilities`` and an int64 ``label``; written to ``path``
    (default: a file in the temporary directory, written once per process)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    out = Path(path) if path is not None else Path(tempfile.gettempdir()) / "harmonic-monitor-example-linear.onnx"
    if path is None and out.is_file():
        return out
    nodes = [
        helper.make_node("Concat", list(FEATURES), ["x"], axis=1),
        helper.make_node("MatMul", ["x", "W"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
        helper.make_node("ArgMax", ["logits"], ["label"], axis=1, keepdims=0),
    ]
    inits = [
        numpy_helper.from_array(np.asarray(WEIGHTS, dtype=np.float32), name="W"),
        numpy_helper.from_array(np.asarray(BIAS, dtype=np.float32), name="b"),
    ]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 1]) for n in FEATURES]
    outputs = [
        helper.make_tensor_value_info("label", TensorProto.INT64, ["N"]),
        helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 3]),
    ]
    graph = helper.make_graph(nodes, "example_linear_classifier", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{id(model)}.tmp")
    onnx.save(model, str(tmp))
    tmp.replace(out)
    return out
