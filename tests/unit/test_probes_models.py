"""Tiny real ONNX models for the probe tests (built with ``onnx.helper``), and checks that they compute what the
closed-form tests assume.

``linear_classifier``: logits = x·W + b (MatMul + Add), probabilities = Softmax(logits), label = ArgMax(logits).
For two classes with W = [0 | w] and b = [0, c] the logit margin of x is d = |w·x + c|, and a shift of feature j by
ε changes it by w_j·ε, so the class flips at exactly ε = d / |w_j|.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from numpy.typing import ArrayLike
from onnx import TensorProto, helper, numpy_helper

from monitor.model.onnx import OnnxModel
from monitor.model.standardize import Standardizer
from monitor.probes.perturbations import ProbeSession


def _save(graph: onnx.GraphProto, path: Path) -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def linear_classifier(path: Path, weights: ArrayLike, bias: ArrayLike) -> OnnxModel:
    """A softmax-linear classifier with W (n, C), b (C,); outputs label, logits, probabilities."""
    w = np.asarray(weights, dtype=np.float32)
    b = np.asarray(bias, dtype=np.float32)
    n, c = w.shape
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["xw"]),
            helper.make_node("Add", ["xw", "b"], ["logits"]),
            helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
            helper.make_node("ArgMax", ["logits"], ["label"], axis=1, keepdims=0),
        ],
        "linear_classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", n])],
        [
            helper.make_tensor_value_info("label", TensorProto.INT64, ["N"]),
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", c]),
            helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", c]),
        ],
        initializer=[numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")],
    )
    return OnnxModel(_save(graph, path))


def binary_linear(path: Path, w: ArrayLike, c: float = 0.0) -> OnnxModel:
    """Two classes; class 1 iff w·x + c > 0."""
    wv = np.asarray(w, dtype=np.float32)
    return linear_classifier(path, np.column_stack([np.zeros_like(wv), wv]), [0.0, c])


def linear_regressor(path: Path, weights: ArrayLike, bias: ArrayLike) -> OnnxModel:
    """y = x·W + b, W (n, D); output ``y`` [N, D]."""
    w = np.asarray(weights, dtype=np.float32)
    b = np.asarray(bias, dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"])],
        "linear_regressor",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", w.shape[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", w.shape[1]])],
        initializer=[numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")],
    )
    return OnnxModel(_save(graph, path))


def test_binary_linear_predicts_the_sign_of_the_logit(tmp_path: Path) -> None:
    model = binary_linear(tmp_path / "m.onnx", [2.0, -1.0], c=0.5)
    out = model.evaluate(np.array([[1.0, 0.0], [-1.0, 0.0]], dtype=np.float32))
    assert model.kind == "classifier" and model.has_logits and model.has_proba
    assert out.label is not None and out.label.tolist() == [1, 0]


def test_binary_linear_flips_at_margin_over_weight(tmp_path: Path) -> None:
    model = binary_linear(tmp_path / "m.onnx", [2.0, -1.0], c=0.0)
    session = ProbeSession(model, Standardizer.identity(2), np.array([[0.3, 0.0]]))
    # margin 0.6: feature 0 (w = 2) flips at a shift of −0.3, feature 1 (w = −1) at +0.6
    below = model.evaluate(np.array([[0.3 - 0.29, 0.0], [0.3, 0.59]], dtype=np.float32))
    above = model.evaluate(np.array([[0.3 - 0.31, 0.0], [0.3, 0.61]], dtype=np.float32))
    assert below.label is not None and above.label is not None
    assert below.label.tolist() == [1, 1] and above.label.tolist() == [0, 0]
    assert session.clean.label is not None and session.clean.label.tolist() == [1]


def test_linear_regressor_is_affine(tmp_path: Path) -> None:
    model = linear_regressor(tmp_path / "r.onnx", [[1.0], [2.0]], [0.5])
    out = model.evaluate(np.array([[1.0, 1.0]], dtype=np.float32))
    assert model.kind == "regressor" and out.value is not None
    np.testing.assert_allclose(out.value, [[3.5]])
