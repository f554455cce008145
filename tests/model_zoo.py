"""Models as teams deploy them, built inside the tests: no download, seeded data, a few seconds in all.

Each ``build_<name>(dir)`` fits (or seeds) a model with the framework a team would use, converts it to ONNX the
usual way for that framework, writes it as ``dir/<name>.onnx`` and returns a :class:`ZooModel`: the path, a few
rows of valid inputs keyed by ONNX input name (float32, int64, or object arrays of ``str``; shapes
``[rows, ...]``) and what the original framework predicts for those rows.

| builder | inputs | outputs |
|---|---|---|
| ``column_transformer_regressor`` | ``x1``, ``x2``, ``x3`` float [N, 1]; ``colour`` string [N, 1] | ``variable`` float [N, 1] |
| ``column_transformer_classifier`` | the same | ``output_label`` int64 [N]; ``output_probability`` ZipMap (or float [N, 3]) |
| ``lightgbm_classifier`` | ``input`` float [N, 4] | ``label`` int64 (declared [1]); ``probabilities`` ZipMap (or float [N, C]) |
| ``xgboost_classifier`` | ``input`` float [N, 4] | ``label`` int64 [N]; ``probabilities`` float [N, C] |
| ``cnn_digits`` | ``image`` float [N, 1, 8, 8] (raw pixels 0-16) | ``logits``, ``probabilities`` float [N, 10] |
| ``fixed_batch_one`` | ``x`` float [1, 3] | ``y`` float [1, 1] |
| ``int64_side_input`` | ``x`` float [N, 3]; ``id`` int64 [N, 1] | ``y`` float [N, 1] |
| ``logits_only_classifier`` | ``input`` float [N, 4] | ``logits`` float [N, 3] |
| ``multi_output_regressor`` | ``input`` float [N, 3] | ``variable`` float [N, 2] (or ``y0``, ``y1`` float [N, 1]) |

``expected`` holds class labels (int64, shape [rows]) for classifiers and regression values (float64, shape
[rows, D], the outputs' columns side by side in output order) for regressors; ``proba`` holds the framework's own
probabilities where it has them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

#: opset of the graphs built with ``onnx.helper``; onnxruntime >= 1.17 runs them
OPSET = 17
IR_VERSION = 8
#: the highest opset onnxmltools 1.16 converts LightGBM and XGBoost to
_ML_OPSET = 15
_SAMPLE_ROWS = 6
_COLOURS = ("red", "green", "blue")


@dataclass(frozen=True)
class ZooModel:
    """A built model: where it is, a few valid input rows, and what the original framework predicts for them."""

    path: Path
    #: ONNX input name → rows ``[rows, ...]`` in the input's dtype (float32, int64 or object arrays of str)
    inputs: dict[str, np.ndarray]
    #: class labels [rows] (classifiers) or regression values [rows, D] (regressors)
    expected: np.ndarray
    #: the framework's own class probabilities [rows, C], where it has them
    proba: np.ndarray | None = None

    @property
    def rows(self) -> int:
        return len(self.expected)


#: every model of the zoo, by its builder's name (``build_<name>``)
NAMES = [
    "column_transformer_regressor",
    "column_transformer_classifier",
    "lightgbm_classifier",
    "xgboost_classifier",
    "cnn_digits",
    "fixed_batch_one",
    "int64_side_input",
    "logits_only_classifier",
    "multi_output_regressor",
]


def _save(model: onnx.ModelProto, path: Path) -> Path:
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def _save_graph(graph: onnx.GraphProto, path: Path) -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
    return _save(model, path)


def _const(name: str, value: Any, dtype: Any = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name=name)


# -- scikit-learn through skl2onnx: one input per column, a string column one-hot encoded ------------------------------
def _mixed_table(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n rows of three float columns and one colour column (an object array [n, 4]), and their colour indices."""
    rng = np.random.default_rng(seed)
    floats = rng.normal(size=(n, 3))
    colour = rng.integers(0, len(_COLOURS), size=n)
    table = np.empty((n, 4), dtype=object)
    table[:, :3] = floats
    table[:, 3] = np.asarray(_COLOURS, dtype=object)[colour]
    return table, colour


def _column_inputs(table: np.ndarray) -> dict[str, np.ndarray]:
    feeds = {f"x{j + 1}": table[:, j : j + 1].astype(np.float32) for j in range(3)}
    feeds["colour"] = table[:, 3:4].astype(str).astype(object)
    return feeds


def _column_pipeline(final: Any) -> Any:
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder

    columns = ColumnTransformer(
        [("numeric", "passthrough", [0, 1, 2]), ("colour", OneHotEncoder(handle_unknown="ignore"), [3])]
    )
    return Pipeline([("columns", columns), ("model", final)])


def _convert_columns(pipeline: Any, path: Path, *, zipmap: bool = True) -> Path:
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType

    initial = [(f"x{j + 1}", FloatTensorType([None, 1])) for j in range(3)]
    initial.append(("colour", StringTensorType([None, 1])))
    options = None if zipmap else {id(pipeline): {"zipmap": False}}
    model = convert_sklearn(pipeline, initial_types=initial, options=options, target_opset=OPSET)
    return _save(model, path)


def build_column_transformer_regressor(dir: Path) -> ZooModel:
    """``Pipeline(ColumnTransformer[passthrough x1..x3, OneHotEncoder(colour)] → LinearRegression)``, skl2onnx.

    The prediction is linear in x1..x3 for every colour (γ = 0 in the numeric inputs).
    """
    from sklearn.linear_model import LinearRegression

    table, colour = _mixed_table(200, seed=21)
    target = table[:, :3].astype(float) @ np.array([1.5, -2.0, 0.5]) + np.array([0.0, 3.0, -1.0])[colour]
    target = target + 0.05 * np.random.default_rng(22).normal(size=len(target))
    pipeline = _column_pipeline(LinearRegression()).fit(table, target)
    path = _convert_columns(pipeline, dir / "column_transformer_regressor.onnx")
    sample = table[:_SAMPLE_ROWS]
    return ZooModel(path, _column_inputs(sample), pipeline.predict(sample).reshape(-1, 1))


def build_column_transformer_classifier(dir: Path, *, zipmap: bool = True) -> ZooModel:
    """The same pipeline ending in a 3-class ``LogisticRegression``; skl2onnx's default ZipMap output unless
    ``zipmap=False`` (then ``output_probability`` is a float tensor [N, 3])."""
    from sklearn.linear_model import LogisticRegression

    table, colour = _mixed_table(300, seed=23)
    scores = table[:, :3].astype(float) @ np.array([[1.0, -1.0, 0.0], [0.0, 1.0, -1.0], [0.5, 0.5, -1.0]])
    scores = scores + np.array([[0.0, 0.5, 0.0], [0.5, 0.0, 0.0], [0.0, 0.0, 0.5]])[colour]
    labels = scores.argmax(axis=1)
    pipeline = _column_pipeline(LogisticRegression(max_iter=500)).fit(table, labels)
    path = _convert_columns(
        pipeline, dir / f"column_transformer_classifier{'' if zipmap else '_tensor'}.onnx", zipmap=zipmap
    )
    sample = table[:_SAMPLE_ROWS]
    return ZooModel(
        path, _column_inputs(sample), pipeline.predict(sample).astype(np.int64), pipeline.predict_proba(sample)
    )


# -- gradient-boosted trees through onnxmltools ------------------------------------------------------------------------
def _iris(multiclass: bool) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_iris

    x, y = load_iris(return_X_y=True)
    y = y if multiclass else (y == 2).astype(np.int64)
    return x.astype(np.float32), y


def _sample_rows(x: np.ndarray) -> np.ndarray:
    """A few rows that cover every iris class (the data is sorted by class)."""
    rows: np.ndarray = x[np.linspace(0, len(x) - 1, _SAMPLE_ROWS).astype(int)]
    return rows


def build_lightgbm_classifier(dir: Path, *, multiclass: bool = False, zipmap: bool = True) -> ZooModel:
    """An ``LGBMClassifier`` on iris (binary: virginica or not; multiclass: 3 species), ``convert_lightgbm`` with
    its defaults (a ZipMap ``probabilities`` output unless ``zipmap=False``)."""
    import lightgbm
    from onnxmltools import convert_lightgbm
    from onnxmltools.convert.common.data_types import FloatTensorType

    x, y = _iris(multiclass)
    classifier = lightgbm.LGBMClassifier(n_estimators=10, num_leaves=4, min_child_samples=5, verbose=-1).fit(x, y)
    model = convert_lightgbm(
        classifier, initial_types=[("input", FloatTensorType([None, 4]))], target_opset=_ML_OPSET, zipmap=zipmap
    )
    name = f"lightgbm_{'multiclass' if multiclass else 'binary'}{'' if zipmap else '_tensor'}.onnx"
    sample = _sample_rows(x)
    return ZooModel(
        _save(model, dir / name),
        {"input": sample},
        np.asarray(classifier.predict(sample), dtype=np.int64),
        np.asarray(classifier.predict_proba(sample)),
    )


def build_xgboost_classifier(dir: Path, *, multiclass: bool = False) -> ZooModel:
    """An ``XGBClassifier`` on iris (binary or 3 species), ``convert_xgboost`` with its defaults."""
    import xgboost
    from onnxmltools import convert_xgboost
    from onnxmltools.convert.common.data_types import FloatTensorType

    x, y = _iris(multiclass)
    classifier = xgboost.XGBClassifier(n_estimators=10, max_depth=2, n_jobs=1).fit(x, y)
    model = convert_xgboost(classifier, initial_types=[("input", FloatTensorType([None, 4]))], target_opset=_ML_OPSET)
    sample = _sample_rows(x)
    return ZooModel(
        _save(model, dir / f"xgboost_{'multiclass' if multiclass else 'binary'}.onnx"),
        {"input": sample},
        np.asarray(classifier.predict(sample), dtype=np.int64),
        np.asarray(classifier.predict_proba(sample)),
    )


# -- graphs built with onnx.helper, as deep-learning exports look ----------------------------------------------------
def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    result: np.ndarray = e / e.sum(axis=1, keepdims=True)
    return result


def _conv_features(images: np.ndarray, kernels: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Conv 3x3 (pad 1) → Relu → MaxPool 2x2 → Flatten, in numpy: [N, 1, 8, 8] → [N, K·4·4]."""
    n = images.shape[0]
    padded = np.pad(images[:, 0], ((0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))  # [N, 8, 8, 3, 3]
    conv = np.einsum("nhwij,kij->nkhw", windows, kernels[:, 0]) + bias[None, :, None, None]
    relu = np.maximum(conv, 0.0)
    pooled = relu.reshape(n, kernels.shape[0], 4, 2, 4, 2).max(axis=(3, 5))
    flat: np.ndarray = pooled.reshape(n, -1)
    return flat


def build_cnn_digits(dir: Path) -> ZooModel:
    """A small CNN on sklearn's 8x8 digits: Conv → Relu → MaxPool → Flatten → Gemm (logits) → Softmax.

    Input ``image`` float32 [N, 1, 8, 8] in raw pixel units (0-16). The convolution is random but seeded; the Gemm
    head is a ridge fit on its features. Outputs ``logits`` and ``probabilities`` [N, 10].
    """
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = digits.images.astype(np.float32)[:, None]
    rng = np.random.default_rng(8)
    kernels = (rng.normal(size=(6, 1, 3, 3)) / 12.0).astype(np.float32)
    conv_bias = (0.1 * rng.normal(size=6)).astype(np.float32)
    features = _conv_features(images.astype(np.float64), kernels.astype(np.float64), conv_bias.astype(np.float64))
    design = np.hstack([features, np.ones((len(features), 1))])
    onehot = np.eye(10)[digits.target]
    coef = np.linalg.solve(design.T @ design + 1.0 * np.eye(design.shape[1]), design.T @ onehot)
    weight = (4.0 * coef[:-1]).astype(np.float32)  # [96, 10]; x4: sharper softmax
    head_bias = (4.0 * coef[-1]).astype(np.float32)

    nodes = [
        helper.make_node("Conv", ["image", "conv_w", "conv_b"], ["conv"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"]),
        helper.make_node("MaxPool", ["relu"], ["pool"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["pool"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn_digits",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 1, 8, 8])],
        [
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10]),
            helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 10]),
        ],
        initializer=[
            _const("conv_w", kernels),
            _const("conv_b", conv_bias),
            _const("fc_w", weight),
            _const("fc_b", head_bias),
        ],
    )
    path = _save_graph(graph, dir / "cnn_digits.onnx")
    sample = images[: _SAMPLE_ROWS * 2 : 2]  # rows 0, 2, 4, ...: digits 0, 2, 4, ...
    logits = _conv_features(sample.astype(np.float64), kernels.astype(np.float64), conv_bias.astype(np.float64))
    logits = logits @ weight.astype(np.float64) + head_bias
    return ZooModel(path, {"image": sample}, logits.argmax(axis=1).astype(np.int64), _softmax(logits))


def build_fixed_batch_one(dir: Path) -> ZooModel:
    """A small MLP regressor exported with a fixed batch of 1, as ``torch.onnx.export`` writes one traced on a
    single example: input ``x`` float32 [1, 3], a ``Reshape`` to the hard-coded shape [1, -1] between its layers
    (``h.view(1, -1)``), output ``y`` float32 [1, 1].

    ``inputs`` holds several rows: the model takes them one at a time.
    """
    rng = np.random.default_rng(1)
    w1, b1 = rng.normal(size=(3, 8)).astype(np.float32), rng.normal(size=8).astype(np.float32)
    w2, b2 = rng.normal(size=(8, 1)).astype(np.float32), rng.normal(size=1).astype(np.float32)
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]),
        helper.make_node("Relu", ["h"], ["relu"]),
        helper.make_node("Reshape", ["relu", "batch_one"], ["flat"]),
        helper.make_node("Gemm", ["flat", "w2", "b2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "fixed_batch_one",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])],
        initializer=[
            _const("w1", w1),
            _const("b1", b1),
            _const("batch_one", [1, -1], np.int64),
            _const("w2", w2),
            _const("b2", b2),
        ],
    )
    path = _save_graph(graph, dir / "fixed_batch_one.onnx")
    x = rng.normal(size=(4, 3)).astype(np.float32)
    expected = np.maximum(x.astype(np.float64) @ w1 + b1, 0.0) @ w2 + b2
    return ZooModel(path, {"x": x}, expected)


def build_int64_side_input(dir: Path) -> ZooModel:
    """y = x·w + b + table[id]: float features ``x`` [N, 3] and an int64 id ``id`` [N, 1] (a per-id offset read by
    ``Gather``); output ``y`` float32 [N, 1]. Linear in ``x`` for every id (γ = 0 in the float input)."""
    rng = np.random.default_rng(6)
    w = np.array([[0.8], [-1.2], [0.3]], dtype=np.float32)
    table = rng.normal(size=5).astype(np.float32)  # ids 0..4
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["linear"]),
        helper.make_node("Gather", ["offsets", "id"], ["offset"], axis=0),  # [N, 1]
        helper.make_node("Add", ["linear", "offset"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "int64_side_input",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3]),
            helper.make_tensor_value_info("id", TensorProto.INT64, ["N", 1]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])],
        initializer=[_const("w", w), _const("b", [0.5]), _const("offsets", table)],
    )
    path = _save_graph(graph, dir / "int64_side_input.onnx")
    x = rng.normal(size=(_SAMPLE_ROWS, 3)).astype(np.float32)
    ids = (np.arange(_SAMPLE_ROWS) % len(table)).astype(np.int64).reshape(-1, 1)
    expected = x.astype(np.float64) @ w + 0.5 + table[ids[:, 0], None]
    return ZooModel(path, {"x": x, "id": ids}, expected)


def build_logits_only_classifier(dir: Path, *, output: str = "logits") -> ZooModel:
    """An MLP as ``torch.onnx.export`` writes one (``Gemm`` with ``transB=1``, ``Relu``) with its logits as the only
    output (PyTorch's losses take logits): input ``input`` float32 [N, 4] (iris), output ``output`` float32
    [N, 3], named ``logits`` (``output_names=["logits"]``) unless ``output`` says otherwise (torch's default
    name is ``output``). Its hidden layer is random but seeded, its head a ridge fit."""
    x, y = _iris(True)
    rng = np.random.default_rng(7)
    w1 = rng.normal(size=(16, 4)).astype(np.float32)  # torch's Linear weight layout: [out, in]
    b1 = rng.normal(size=16).astype(np.float32)
    hidden = np.maximum(x.astype(np.float64) @ w1.T + b1, 0.0)
    design = np.hstack([hidden, np.ones((len(hidden), 1))])
    coef = np.linalg.solve(design.T @ design + 0.1 * np.eye(design.shape[1]), design.T @ (4.0 * np.eye(3)[y] - 2.0))
    w2, b2 = coef[:-1].T.astype(np.float32), coef[-1].astype(np.float32)  # [3, 16], [3]
    nodes = [
        helper.make_node("Gemm", ["input", "fc1.weight", "fc1.bias"], ["/fc1/Gemm_output_0"], transB=1),
        helper.make_node("Relu", ["/fc1/Gemm_output_0"], ["/relu/Relu_output_0"]),
        helper.make_node("Gemm", ["/relu/Relu_output_0", "fc2.weight", "fc2.bias"], [output], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "main_graph",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch_size", 4])],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, ["batch_size", 3])],
        initializer=[
            _const("fc1.weight", w1),
            _const("fc1.bias", b1),
            _const("fc2.weight", w2),
            _const("fc2.bias", b2),
        ],
    )
    path = _save_graph(graph, dir / f"logits_only_{output}.onnx")
    sample = _sample_rows(x)
    logits = np.maximum(sample.astype(np.float64) @ w1.T + b1, 0.0) @ w2.T.astype(np.float64) + b2
    return ZooModel(path, {"input": sample}, logits.argmax(axis=1).astype(np.int64), _softmax(logits))


def build_multi_output_regressor(dir: Path, *, split: bool = False) -> ZooModel:
    """Two regression targets from sklearn's linnerud data (3 exercise counts → weight and waist).

    ``split=False``: a scikit-learn ``LinearRegression`` fitted on both targets, converted with skl2onnx: one
    output ``variable`` float32 [N, 2] (a ``LinearRegressor`` node). ``split=True``: a two-headed network built
    with ``onnx.helper`` (as a Keras or torch model with two heads exports): outputs ``y0`` and ``y1`` float32
    [N, 1]. Input ``input`` float32 [N, 3] either way.
    """
    from sklearn.datasets import load_linnerud
    from sklearn.linear_model import LinearRegression

    data = load_linnerud()
    x = data.data.astype(np.float32)
    targets = data.target[:, :2]
    sample = x[:_SAMPLE_ROWS]
    if not split:
        from skl2onnx import convert_sklearn
        from skl2onnx.common.data_types import FloatTensorType

        regressor = LinearRegression().fit(x, targets)
        model = convert_sklearn(regressor, initial_types=[("input", FloatTensorType([None, 3]))], target_opset=OPSET)
        path = _save(model, dir / "multi_output_regressor.onnx")
        return ZooModel(path, {"input": sample}, regressor.predict(sample))
    rng = np.random.default_rng(2)
    w1 = (rng.normal(size=(3, 8)) / np.array([[10.0], [200.0], [200.0]])).astype(np.float32)  # tanh unsaturated
    b1 = (0.5 * rng.normal(size=8)).astype(np.float32)
    hidden = np.tanh(x.astype(np.float64) @ w1 + b1)
    design = np.hstack([hidden, np.ones((len(hidden), 1))])
    coef = np.linalg.solve(design.T @ design + 0.01 * np.eye(design.shape[1]), design.T @ targets)
    heads = [(coef[:-1, j : j + 1].astype(np.float32), coef[-1, j : j + 1].astype(np.float32)) for j in range(2)]
    nodes = [
        helper.make_node("MatMul", ["input", "w1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["hb"]),
        helper.make_node("Tanh", ["hb"], ["trunk"]),
    ]
    inits = [_const("w1", w1), _const("b1", b1)]
    for j, (w, b) in enumerate(heads):
        nodes += [
            helper.make_node("MatMul", ["trunk", f"head{j}_w"], [f"head{j}"]),
            helper.make_node("Add", [f"head{j}", f"head{j}_b"], [f"y{j}"]),
        ]
        inits += [_const(f"head{j}_w", w), _const(f"head{j}_b", b)]
    graph = helper.make_graph(
        nodes,
        "multi_output_regressor",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info(f"y{j}", TensorProto.FLOAT, ["N", 1]) for j in range(2)],
        initializer=inits,
    )
    path = _save_graph(graph, dir / "multi_output_regressor_split.onnx")
    trunk = np.tanh(sample.astype(np.float64) @ w1 + b1)
    expected = np.hstack([trunk @ w.astype(np.float64) + b for w, b in heads])
    return ZooModel(path, {"input": sample}, expected)


def run_with_onnxruntime(model: ZooModel) -> dict[str, np.ndarray]:
    """The model's outputs on its ``inputs``, straight from onnxruntime: {output name: array}.

    A fixed batch dimension of 1 is fed row by row (outputs stacked); a ZipMap output (a list of {class: p}) comes
    back as a float array [rows, C] in class order.
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3  # onnxmltools declares LightGBM's label output as [1]: onnxruntime warns per run
    session = ort.InferenceSession(str(model.path), sess_options=options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    if all(i.shape[0] == 1 for i in session.get_inputs()):
        parts = [session.run(names, {k: v[r : r + 1] for k, v in model.inputs.items()}) for r in range(model.rows)]
        results = [np.concatenate([np.asarray(p[j]) for p in parts]) for j in range(len(names))]
    else:
        results = session.run(names, model.inputs)
    outputs: dict[str, np.ndarray] = {}
    for name, value in zip(names, results, strict=True):
        if isinstance(value, list):  # ZipMap: one {class: probability} per row
            keys = sorted(value[0])
            value = np.array([[row[k] for k in keys] for row in value], dtype=np.float32)
        outputs[name] = np.asarray(value)
    return outputs
