"""Tiny real ONNX graphs for the stage-3/4 tests, built with ``onnx.helper`` and saved under a tmp path.

Every builder returns the path of the saved ``.onnx`` file. Graphs use opset 17 / IR 8 so that any
onnxruntime >= 1.17 loads them. Regressors take ``x: float[N, n]`` and return ``y: float[N, D]``;
classifiers return ``logits``, ``probabilities`` (softmax) and ``label`` (argmax, int64) as asked.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from numpy.typing import ArrayLike
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8

#: one monomial: (coefficient, {feature index: power}); an empty mapping is the constant term
Monomial = tuple[float, Mapping[int, int]]
Polynomial = Sequence[Monomial]

#: Re((z1 + i·z2)^3) = z1³ − 3·z1·z2²
CUBIC_HARMONIC: Polynomial = ((1.0, {0: 3}), (-3.0, {0: 1, 1: 2}))
#: z1² − z2²
QUADRATIC_HARMONIC: Polynomial = ((1.0, {0: 2}), (-1.0, {1: 2}))


def squared_norm(n_features: int) -> Polynomial:
    """‖z‖² = Σ z_j²."""
    return tuple((1.0, {j: 2}) for j in range(n_features))


class _Names:
    def __init__(self) -> None:
        self._counter = itertools.count()

    def __call__(self, stem: str) -> str:
        return f"{stem}_{next(self._counter)}"


def _save(graph: onnx.GraphProto, path: Path, *, opsets: Sequence[tuple[str, int]] = (("", OPSET),)) -> Path:
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets], ir_version=IR_VERSION
    )
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def _const(name: str, value: ArrayLike, dtype: Any = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name=name)


def _input(n_features: int, name: str = "x") -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, ["N", n_features])


def city_id_node() -> onnx.NodeProto:
    """An ai.onnx.ml LabelEncoder from the string input ``city`` to the int64 ``city_id``: rome 1, oslo 2, else 0."""
    return helper.make_node(
        "LabelEncoder",
        ["city"],
        ["city_id"],
        domain="ai.onnx.ml",
        keys_strings=["rome", "oslo"],
        values_int64s=[1, 2],
        default_int64=0,
    )


def linear_regressor(
    path: Path, weights: ArrayLike, bias: ArrayLike = 0.0, *, output: str = "y", flat: bool = False
) -> Path:
    """y = x·W + b with W (n,) or (n, D); output [N, D] (D = 1 for a vector w), or [N] when ``flat``."""
    w = np.asarray(weights, dtype=np.float32)
    w = w.reshape(-1, 1) if w.ndim == 1 else w
    b = np.broadcast_to(np.asarray(bias, dtype=np.float32), (w.shape[1],))
    inits = [_const("W", w), _const("b", b)]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["xw"])]
    if flat:
        inits.append(_const("axes", [1], np.int64))
        nodes += [helper.make_node("Add", ["xw", "b"], ["y2d"]), helper.make_node("Squeeze", ["y2d", "axes"], [output])]
        info = helper.make_tensor_value_info(output, TensorProto.FLOAT, ["N"])
    else:
        nodes.append(helper.make_node("Add", ["xw", "b"], [output]))
        info = helper.make_tensor_value_info(output, TensorProto.FLOAT, ["N", w.shape[1]])
    graph = helper.make_graph(nodes, "linear_regressor", [_input(w.shape[0])], [info], initializer=inits)
    return _save(graph, path)


def polynomial_regressor(
    path: Path,
    n_features: int,
    outputs: Sequence[Polynomial],
    *,
    mean: ArrayLike | None = None,
    scale: ArrayLike | None = None,
) -> Path:
    """y_d = P_d(z) with z = (x − mean) / scale (z = x when neither is given); output ``y`` [N, D].

    Powers are repeated multiplications, so the graph evaluates each monomial exactly as written.
    """
    name = _Names()
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    z = "x"
    if mean is not None:
        inits.append(_const("mu", np.broadcast_to(np.asarray(mean, dtype=np.float32), (n_features,))))
        nodes.append(helper.make_node("Sub", [z, "mu"], ["x_centred"]))
        z = "x_centred"
    if scale is not None:
        inits.append(_const("s", np.broadcast_to(np.asarray(scale, dtype=np.float32), (n_features,))))
        nodes.append(helper.make_node("Div", [z, "s"], ["z"]))
        z = "z"
    columns: dict[int, str] = {}
    for j in sorted({j for poly in outputs for _, powers in poly for j in powers} | {0}):
        if not 0 <= j < n_features:
            raise ValueError(f"monomial uses feature {j}; the graph has {n_features} features")
        inits.append(_const(f"idx_{j}", [j], np.int64))
        nodes.append(helper.make_node("Gather", [z, f"idx_{j}"], [f"z{j}"], axis=1))  # [N, 1]
        columns[j] = f"z{j}"
    out_columns = []
    for poly in outputs:
        # start from 0·z0 so a constant-only polynomial still has shape [N, 1]
        acc = name("acc")
        inits.append(_const(f"{acc}_zero", 0.0))
        nodes.append(helper.make_node("Mul", [columns[0], f"{acc}_zero"], [acc]))
        for coef, powers in poly:
            factors = [columns[j] for j, p in sorted(powers.items()) for _ in range(p)]
            coef_name = name("coef")
            inits.append(_const(coef_name, coef))
            term = coef_name
            for factor in factors:
                nxt = name("term")
                nodes.append(helper.make_node("Mul", [term, factor], [nxt]))
                term = nxt
            summed = name("acc")
            nodes.append(helper.make_node("Add", [acc, term], [summed]))
            acc = summed
        out_columns.append(acc)
    nodes.append(helper.make_node("Concat", out_columns, ["y"], axis=1))
    graph = helper.make_graph(
        nodes,
        "polynomial_regressor",
        [_input(n_features)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", len(outputs)])],
        initializer=inits,
    )
    return _save(graph, path)


def linear_classifier(
    path: Path,
    weights: ArrayLike,
    bias: ArrayLike,
    *,
    curvature: ArrayLike | None = None,
    outputs: Sequence[str] = ("logits", "probabilities", "label"),
    names: Mapping[str, str] | None = None,
) -> Path:
    """logits = x·W + b (+ q_k·‖x‖² per class k when ``curvature`` q is given); W is (n, C).

    ``outputs`` picks which of ``logits`` [N, C], ``probabilities`` [N, C] (softmax), ``log_probabilities``
    [N, C] (log-softmax) and ``label`` [N] int64 (argmax) the graph exposes, in that order; ``names`` renames them
    (e.g. ``{"logits": "output"}``). The Softmax and ArgMax nodes stay in the graph whichever are exposed.
    """
    w = np.asarray(weights, dtype=np.float32)
    n, c = w.shape
    nodes = [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["affine"])]
    inits = [_const("W", w), _const("b", np.broadcast_to(np.asarray(bias, dtype=np.float32), (c,)))]
    logits = "affine"
    if curvature is not None:
        inits += [
            _const("q", np.broadcast_to(np.asarray(curvature, dtype=np.float32), (c,))),
            _const("axes", [1], np.int64),
        ]
        nodes += [
            helper.make_node("Mul", ["x", "x"], ["x_sq"]),
            helper.make_node("ReduceSum", ["x_sq", "axes"], ["norm_sq"], keepdims=1),  # [N, 1]
            helper.make_node("Mul", ["norm_sq", "q"], ["curved"]),
            helper.make_node("Add", ["affine", "curved"], ["curved_logits"]),
        ]
        logits = "curved_logits"
    name = {o: o for o in ("logits", "probabilities", "log_probabilities", "label")} | dict(names or {})
    nodes += [
        helper.make_node("Identity", [logits], [name["logits"]]),
        helper.make_node("Softmax", [logits], [name["probabilities"]], axis=1),
        helper.make_node("ArgMax", [logits], [name["label"]], axis=1, keepdims=0),
    ]
    if "log_probabilities" in outputs:
        nodes.append(helper.make_node("LogSoftmax", [logits], [name["log_probabilities"]], axis=1))
    infos = {
        "logits": helper.make_tensor_value_info(name["logits"], TensorProto.FLOAT, ["N", c]),
        "probabilities": helper.make_tensor_value_info(name["probabilities"], TensorProto.FLOAT, ["N", c]),
        "log_probabilities": helper.make_tensor_value_info(name["log_probabilities"], TensorProto.FLOAT, ["N", c]),
        "label": helper.make_tensor_value_info(name["label"], TensorProto.INT64, ["N"]),
    }
    graph = helper.make_graph(nodes, "linear_classifier", [_input(n)], [infos[o] for o in outputs], initializer=inits)
    return _save(graph, path)


def logits_network(
    path: Path, n_features: int, classes: int, *, hidden: int = 16, seed: int = 0, output: str = "output"
) -> Path:
    """What a deep-learning export of a classifier looks like: ``output`` = relu(x·W + b)·V + c, [N, classes], with
    nothing after it (no Softmax, ArgMax or label output: the logits alone). Seeded normal weights."""
    rng = np.random.default_rng(seed)
    inits = [
        _const("W1", rng.normal(size=(n_features, hidden))),
        _const("b1", rng.normal(size=hidden) * 0.1),
        _const("W2", rng.normal(size=(hidden, classes))),
        _const("b2", rng.normal(size=classes) * 0.1),
    ]
    nodes = [
        helper.make_node("Gemm", ["x", "W1", "b1"], ["hidden"]),
        helper.make_node("Relu", ["hidden"], ["active"]),
        helper.make_node("Gemm", ["active", "W2", "b2"], [output]),
    ]
    info = helper.make_tensor_value_info(output, TensorProto.FLOAT, ["N", classes])
    return _save(helper.make_graph(nodes, "logits_network", [_input(n_features)], [info], initializer=inits), path)


def sigmoid_classifier(path: Path, weights: ArrayLike, bias: float) -> Path:
    """A binary classifier exposing only P(class 1) as ``probability`` [N] and ``label`` [N] int64."""
    w = np.asarray(weights, dtype=np.float32).reshape(-1, 1)
    inits = [_const("W", w), _const("b", [bias]), _const("half", 0.5), _const("axes", [1], np.int64)]
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["score"]),
        helper.make_node("Sigmoid", ["score"], ["p_col"]),
        helper.make_node("Squeeze", ["p_col", "axes"], ["probability"]),
        helper.make_node("Greater", ["probability", "half"], ["is_one"]),
        helper.make_node("Cast", ["is_one"], ["label"], to=TensorProto.INT64),
    ]
    graph = helper.make_graph(
        nodes,
        "sigmoid_classifier",
        [_input(w.shape[0])],
        [
            helper.make_tensor_value_info("label", TensorProto.INT64, ["N"]),
            helper.make_tensor_value_info("probability", TensorProto.FLOAT, ["N"]),
        ],
        initializer=inits,
    )
    return _save(graph, path)


def double_input_regressor(path: Path, weights: ArrayLike) -> Path:
    """y = x·w with a float64 input and output (the model must be fed doubles)."""
    w = np.asarray(weights, dtype=np.float64).reshape(-1, 1)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])],
        "double_regressor",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["N", w.shape[0]])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, ["N", 1])],
        initializer=[_const("W", w, np.float64)],
    )
    return _save(graph, path)


# -- unsupported signatures ----------------------------------------------------------------------------------
def two_input_model(path: Path) -> Path:
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"])],
        "two_inputs",
        [_input(2, "a"), _input(2, "b")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])],
    )
    return _save(graph, path)


def three_d_input_model(path: Path) -> Path:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "three_d_input",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, 3])],
    )
    return _save(graph, path)


def string_input_model(path: Path) -> Path:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "string_input",
        [helper.make_tensor_value_info("x", TensorProto.STRING, ["N", 2])],
        [helper.make_tensor_value_info("y", TensorProto.STRING, ["N", 2])],
    )
    return _save(graph, path)


def dynamic_width_model(path: Path) -> Path:
    """A float input whose feature dimension is symbolic ("F") rather than a fixed integer."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "dynamic_width",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "F"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "F"])],
    )
    return _save(graph, path)


def odd_batch_failing_model(path: Path) -> Path:
    """y = x for [N, 2] rows, through a reshape to [-1, 4] that fails at run time when N is odd."""
    inits = [_const("by_four", [-1, 4], np.int64), _const("by_two", [-1, 2], np.int64)]
    graph = helper.make_graph(
        [
            helper.make_node("Reshape", ["x", "by_four"], ["paired"]),
            helper.make_node("Reshape", ["paired", "by_two"], ["y"]),
        ],
        "odd_batch_failing",
        [_input(2)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])],
        initializer=inits,
    )
    return _save(graph, path)


def batch_bound(path: Path, *, opset: int = OPSET) -> Path:
    """A [1, 3] model whose batch cannot be freed: it flattens its one row to a rank-1 [3] and back (y = x + [1, 2, 3])."""
    graph = helper.make_graph(
        [
            helper.make_node("Reshape", ["x", "flat"], ["row"]),
            helper.make_node("Add", ["row", "c"], ["shifted"]),
            helper.make_node("Reshape", ["shifted", "back"], ["y"]),
        ],
        "bound",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        initializer=[
            _const("c", [1.0, 2.0, 3.0]),
            _const("flat", [3], np.int64),
            _const("back", [1, 3], np.int64),
        ],
    )
    return _save(graph, path, opsets=(("", opset),))


def bool_output_model(path: Path, n_features: int = 2) -> Path:
    """Only a boolean output: neither a classifier nor a regressor signature."""
    inits = [_const("zero", 0.0)]
    graph = helper.make_graph(
        [helper.make_node("Greater", ["x", "zero"], ["positive"])],
        "bool_output",
        [_input(n_features)],
        [helper.make_tensor_value_info("positive", TensorProto.BOOL, ["N", n_features])],
        initializer=inits,
    )
    return _save(graph, path)


def string_label_only_model(path: Path, classes: Sequence[str] = ("no", "yes")) -> Path:
    """A classifier exposing only string labels (classes[argmax(x)]) and no probabilities."""
    graph = helper.make_graph(
        [
            helper.make_node("ArgMax", ["x"], ["index"], axis=1, keepdims=0),
            helper.make_node("Gather", ["classes", "index"], ["label"], axis=0),
        ],
        "string_labels",
        [_input(len(classes))],
        [helper.make_tensor_value_info("label", TensorProto.STRING, ["N"])],
        initializer=[numpy_helper.from_array(np.array(list(classes), dtype=object), name="classes")],
    )
    return _save(graph, path)


# -- scikit-learn through skl2onnx ----------------------------------------------------------------------------
def training_blobs(seed: int, n_rows: int = 120) -> tuple[np.ndarray, np.ndarray]:
    """Two seeded Gaussian blobs in 2-D: rows (n_rows, 2) and 0/1 targets."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, size=n_rows)
    x = rng.normal(size=(n_rows, 2)) + np.where(y[:, None] == 1, 1.5, -1.5)
    return x, y


def sklearn_to_onnx(path: Path, estimator: Any, n_features: int, *, zipmap: bool = True) -> Path:
    """Convert a fitted scikit-learn estimator with skl2onnx (float input ``X`` [None, n])."""
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import FloatTensorType

    options = None if zipmap else {id(estimator): {"zipmap": False}}
    model = to_onnx(
        estimator,
        initial_types=[("X", FloatTensorType([None, n_features]))],
        options=options,
        target_opset={"": OPSET, "ai.onnx.ml": 3},
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model.SerializeToString())
    return path


def zipmap_classifier(
    path: Path, *, seed: int = 0, classes: Sequence[Any] = (0, 1), zipmap: bool = True
) -> tuple[Path, Any]:
    """A LogisticRegression on :func:`training_blobs`, converted with skl2onnx (ZipMap output by default).

    Returns the path and the fitted estimator (so tests can compare with ``predict_proba``).
    """
    from sklearn.linear_model import LogisticRegression

    x, y = training_blobs(seed)
    target = np.asarray(classes)[y]
    estimator = LogisticRegression(random_state=seed).fit(x, target)
    return sklearn_to_onnx(path, estimator, 2, zipmap=zipmap), estimator
