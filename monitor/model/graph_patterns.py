"""Stage 3 helper: the graph shapes the neighbourhood rewrite can use, recognized in a model's ONNX graph.

:func:`linear_head` finds a LinearClassifier/LinearRegressor reading the input alone, :func:`affine_input` the first
affine layer the input feeds (``MatMul`` [+ ``Add``] or ``Gemm``), :func:`binary_positive` a binary classifier's
``Concat([1 − p, p])``. :func:`monitor.model.neighbourhood.neighbourhood_graph` rewrites what they find (the module
docstring there says why each pays).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from numpy.typing import NDArray
from onnx import TensorProto, helper, numpy_helper

__all__ = ["AffineInput", "LinearHead", "affine_input", "binary_positive", "float_initializer", "linear_head"]


@dataclass(frozen=True, slots=True)
class LinearHead:
    """The LinearClassifier/LinearRegressor reading the model input (see :func:`linear_head`)."""

    index: int  # of the node in the graph
    weights: NDArray[np.float64]  # (T, n)
    intercepts: NDArray[np.float32]  # (T,)
    #: the standard op replacing the node's post-transform once its scores are ``x @ W.T + intercepts``: "" (none),
    #: "Sigmoid" or "Softmax"
    lowered: str
    output: str  # the node output the lowered ops write (probabilities, or the regressor's values)


_LOWERED_POST = {"NONE": "", "LOGISTIC": "Sigmoid", "SOFTMAX": "Softmax"}


def linear_head(graph: onnx.GraphProto, input_name: str, n: int) -> LinearHead | None:
    """The linear head when the input feeds only a LinearClassifier/LinearRegressor with T < n targets.

    Such a node computes ``x @ W.T + b`` before its post-transform, so ``(x + δ) @ W.T = x @ W.T + δ @ W.T``:
    the ball points and noisy copies can be built with T numbers per row instead of n. onnxruntime's linear
    kernels also cost a few ns per row (docs/BENCHMARKS.md, *Engine vs bound*, the logistic regression), mostly
    per-row work, so where the node's semantics are plain standard ops — a classifier with one score per class
    (T = classes ≥ 2), post-transform NONE, LOGISTIC or SOFTMAX, whose label output feeds no other node; a regressor
    with post-transform NONE — the copies compute ``Add`` (+ ``Sigmoid``/``Softmax``) instead, and labels come from
    the probabilities. ``OnnxModel.neighbourhood`` checks the wrapped graph against the model before using it.
    """
    consumers = [i for i, node in enumerate(graph.node) if input_name in node.input]
    if len(consumers) != 1 or any(o.name == input_name for o in graph.output):
        return None
    index = consumers[0]
    node = graph.node[index]
    if node.domain != "ai.onnx.ml" or node.op_type not in ("LinearClassifier", "LinearRegressor"):
        return None
    if list(node.input) != [input_name]:
        return None
    coefficients = next((a for a in node.attribute if a.name == "coefficients"), None)
    if coefficients is None or not coefficients.floats or len(coefficients.floats) % n:
        return None
    w = np.asarray(coefficients.floats, dtype=np.float64).reshape(-1, n)
    targets = w.shape[0]
    if targets >= n:
        return None
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    raw_intercepts = attrs.get("intercepts") or [0.0] * targets
    if len(raw_intercepts) != targets:
        return None
    intercepts = np.asarray(raw_intercepts, dtype=np.float32)
    post = attrs.get("post_transform", b"NONE")
    post = post.decode() if isinstance(post, bytes) else str(post)
    consumed = {t for other in graph.node for t in other.input}
    lowered: str | None = None
    output = node.output[0]
    if node.op_type == "LinearClassifier":
        classes = len(attrs.get("classlabels_ints") or attrs.get("classlabels_strings") or [])
        if len(node.output) == 2 and node.output[0] not in consumed and targets == classes >= 2:
            lowered = _LOWERED_POST.get(post)
            output = node.output[1]
    elif post == "NONE":
        lowered = ""
    if lowered is None:
        return None
    return LinearHead(index, w, intercepts, lowered, output)


@dataclass(frozen=True, slots=True)
class AffineInput:
    """The model's first affine layer, ``[Cast →] MatMul(W) [→ Add(b)]`` or ``Gemm``, reading the input (see
    :func:`affine_input`)."""

    nodes: tuple[int, ...]  # indices of the nodes it replaces, in graph order
    weights: NDArray[np.float64]  # (n, H): x @ weights
    bias: NDArray[np.float64]  # (H,)
    output: str  # the tensor its last node writes, [rows, H]


def float_initializer(graph: onnx.GraphProto, name: str) -> NDArray[np.float64] | None:
    """The float32 initializer ``name`` as float64; None when there is none of that name or it is not float32."""
    for init in graph.initializer:
        if init.name == name:
            value = numpy_helper.to_array(init)
            return value.astype(np.float64) if value.dtype == np.float32 else None
    return None


def affine_input(graph: onnx.GraphProto, input_name: str, n: int) -> AffineInput | None:
    """The affine layer the (float32) input feeds alone: ``MatMul`` by an (n, H) initializer, then optionally an
    ``Add`` of an H-value initializer, or a ``Gemm`` (alpha = beta = 1, A not transposed) with initializer B and
    C; a float-to-float ``Cast`` before it is passed over.

    Since ``(x + δ) @ W + b = x @ W + (δ @ W + b)``, the ball points' and copies' first-layer activations can be
    built from the centres' ``x @ W`` (B rows) and the offsets' ``δ @ W + b`` — computed once for the ball, and
    for the flicker noise bank when it is drawn — instead of multiplying every one of the B·(1 + m + K) rows.
    """
    consumers: dict[str, list[int]] = {}
    for i, node in enumerate(graph.node):
        for t in node.input:
            consumers.setdefault(t, []).append(i)
    exposed = {o.name for o in graph.output}

    def only_consumer(tensor: str) -> int | None:
        readers = consumers.get(tensor, [])
        return readers[0] if len(readers) == 1 and tensor not in exposed else None

    index = only_consumer(input_name)
    nodes: list[int] = []
    tensor = input_name
    # an Identity (the input rewrite of monitor/model/signature.py names the model's input with one) or a
    # float-to-float Cast before the layer is passed over
    while index is not None and graph.node[index].op_type in ("Cast", "Identity"):
        node = graph.node[index]
        if node.domain not in ("", "ai.onnx"):
            return None
        if node.op_type == "Cast" and next((a.i for a in node.attribute if a.name == "to"), None) != TensorProto.FLOAT:
            return None
        nodes.append(index)
        tensor = node.output[0]
        index = only_consumer(tensor)
    if index is None:
        return None
    node = graph.node[index]
    if node.domain not in ("", "ai.onnx") or list(node.input[:1]) != [tensor]:
        return None
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if node.op_type == "MatMul":
        w = float_initializer(graph, node.input[1])
        bias: NDArray[np.float64] | None = None
    elif node.op_type == "Gemm" and len(node.input) == 3 and attrs.get("alpha", 1.0) == 1.0:
        if attrs.get("beta", 1.0) != 1.0 or attrs.get("transA", 0):
            return None
        w = float_initializer(graph, node.input[1])
        if w is not None and attrs.get("transB", 0):
            w = w.T
        bias = float_initializer(graph, node.input[2])
    else:
        return None
    if w is None or w.ndim != 2 or w.shape[0] != n:
        return None
    h = w.shape[1]
    nodes.append(index)
    out = node.output[0]
    after = only_consumer(out) if node.op_type == "MatMul" else None
    if after is not None and graph.node[after].op_type == "Add" and graph.node[after].domain in ("", "ai.onnx"):
        add = graph.node[after]
        other = add.input[1] if add.input[0] == out else add.input[0]
        value = float_initializer(graph, other)
        if value is not None and value.shape in ((h,), (1, h)):  # the bias is folded into the offsets
            bias = value.reshape(h)
            nodes.append(after)
            out = add.output[0]
    if out in exposed:
        return None
    if bias is None:
        bias = np.zeros(h)
    elif bias.size != h or bias.ndim > 2 or bias.shape[-1] != h:
        return None
    return AffineInput(tuple(nodes), w, bias.reshape(h), out)


def binary_positive(graph: onnx.GraphProto, proba_name: str) -> str | None:
    """The tensor p [rows, 1] when the probability output ``proba_name`` is ``Concat([1 − p, p], axis=1)``, else None.

    That is how skl2onnx writes a binary classifier's probabilities after a sigmoid (an MLP, SGD or any
    ``predict_proba`` of the form [1 − p, p]): ``Sub(1, p)`` then ``Concat`` along the class axis. The scorer needs
    no more than p for such a model — the class is 1 exactly where ``p > 1 − p`` in float32, which is what the
    table's row-wise argmax finds, and f at class 0 is ``1 − p`` computed as the graph's ``Sub`` computes it — so the
    wrapped graph exposes p and leaves out the ``Sub`` and ``Concat`` on every ball point and copy (see
    ``OnnxModel.neighbourhood``). The constant must be a single 1 (any shape of one element); the ``Sub`` must read
    the same tensor the ``Concat`` takes second. ``OnnxModel.neighbourhood`` checks the result against the model.
    """
    producers = {t: node for node in graph.node for t in node.output}
    concat = producers.get(proba_name)
    if concat is None or concat.op_type != "Concat" or concat.domain not in ("", "ai.onnx") or len(concat.input) != 2:
        return None
    if next((a.i for a in concat.attribute if a.name == "axis"), None) not in (1, -1):
        return None
    negative, positive = concat.input
    sub = producers.get(negative)
    if sub is None or sub.op_type != "Sub" or sub.domain not in ("", "ai.onnx") or list(sub.input[1:]) != [positive]:
        return None
    one = float_initializer(graph, sub.input[0])
    constant = producers.get(sub.input[0])
    if one is None and constant is not None and constant.op_type == "Constant":
        value = next((a.t for a in constant.attribute if a.name == "value" and a.HasField("t")), None)
        if value is not None and value.data_type == TensorProto.FLOAT:
            one = numpy_helper.to_array(value).astype(np.float64)
    return positive if one is not None and one.size == 1 and float(one.reshape(-1)[0]) == 1.0 else None
