"""The model zoo (tests/model_zoo.py): each model runs in onnxruntime and agrees with the framework that
built it, and :func:`~monitor.model.outputs.decide_outputs` reads its outputs as what they are."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest

from monitor.errors import ModelError
from monitor.model.onnx import OnnxModel
from monitor.model.onnx_read import expose_zipmap_input
from monitor.model.outputs import OutputDecision, decide_outputs
from tests import model_zoo
from tests.model_zoo import ZooModel


@dataclass(frozen=True)
class Case:
    build: Callable[[Path], ZooModel]
    #: ONNX input name → (onnxruntime type, shape)
    signature: Signature
    kind: str
    label: str | None = None
    proba: str | None = None
    logits: str | None = None
    values: tuple[str, ...] = ()
    softmax_of: str | None = None
    #: one 2-D float input: OnnxModel loads it today
    loads: bool = False
    #: the onnxruntime output holding the class scores when not ``proba``/``logits`` (the ZipMap output itself)
    scores: str | None = None


Signature = dict[str, tuple[str, list[int | str | None]]]

_COLUMNS: Signature = {
    "x1": ("tensor(float)", [None, 1]),
    "x2": ("tensor(float)", [None, 1]),
    "x3": ("tensor(float)", [None, 1]),
    "colour": ("tensor(string)", [None, 1]),
}
_IRIS: Signature = {"input": ("tensor(float)", [None, 4])}
_ZIPPED = "lgbmprobabilities"  # the tensor onnxmltools' LightGBM ZipMap reads, exposed at load

CASES: dict[str, Case] = {
    "column_transformer_regressor": Case(
        model_zoo.build_column_transformer_regressor, _COLUMNS, "regressor", values=("variable",)
    ),
    "column_transformer_classifier": Case(
        model_zoo.build_column_transformer_classifier,
        _COLUMNS,
        "classifier",
        "output_label",
        "probabilities",
        scores="output_probability",
    ),
    "column_transformer_classifier_tensor": Case(
        lambda d: model_zoo.build_column_transformer_classifier(d, zipmap=False),
        _COLUMNS,
        "classifier",
        "label",
        "probabilities",
    ),
    "lightgbm_binary": Case(
        model_zoo.build_lightgbm_classifier, _IRIS, "classifier", "label", _ZIPPED, loads=True, scores="probabilities"
    ),
    "lightgbm_multiclass": Case(
        lambda d: model_zoo.build_lightgbm_classifier(d, multiclass=True),
        _IRIS,
        "classifier",
        "label",
        _ZIPPED,
        loads=True,
        scores="probabilities",
    ),
    "lightgbm_multiclass_tensor": Case(
        lambda d: model_zoo.build_lightgbm_classifier(d, multiclass=True, zipmap=False),
        _IRIS,
        "classifier",
        "label",
        "probabilities",
        loads=True,
    ),
    "xgboost_binary": Case(
        model_zoo.build_xgboost_classifier, _IRIS, "classifier", "label", "probabilities", loads=True
    ),
    "xgboost_multiclass": Case(
        lambda d: model_zoo.build_xgboost_classifier(d, multiclass=True),
        _IRIS,
        "classifier",
        "label",
        "probabilities",
        loads=True,
    ),
    "cnn_digits": Case(
        model_zoo.build_cnn_digits,
        {"image": ("tensor(float)", ["N", 1, 8, 8])},
        "classifier",
        proba="probabilities",
        logits="logits",
    ),
    "fixed_batch_one": Case(
        model_zoo.build_fixed_batch_one, {"x": ("tensor(float)", [1, 3])}, "regressor", values=("y",)
    ),
    "int64_side_input": Case(
        model_zoo.build_int64_side_input,
        {"x": ("tensor(float)", ["N", 3]), "id": ("tensor(int64)", ["N", 1])},
        "regressor",
        values=("y",),
    ),
    "logits_only_classifier": Case(
        model_zoo.build_logits_only_classifier,
        {"input": ("tensor(float)", ["batch_size", 4])},
        "classifier",
        logits="logits",
        softmax_of="logits",
        loads=True,
    ),
    "multi_output_regressor": Case(
        model_zoo.build_multi_output_regressor,
        {"input": ("tensor(float)", [None, 3])},
        "regressor",
        values=("variable",),
        loads=True,
    ),
    "multi_output_regressor_split": Case(
        lambda d: model_zoo.build_multi_output_regressor(d, split=True),
        {"input": ("tensor(float)", ["N", 3])},
        "regressor",
        values=("y0", "y1"),
        loads=True,
    ),
}


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ZooModel]:
    """Every model built once for the module (the fits take most of this file's time)."""
    folder = tmp_path_factory.mktemp("zoo")
    return {name: case.build(folder) for name, case in CASES.items()}


def _decide(path: Path) -> OutputDecision:
    proto = onnx.load(str(path))
    return decide_outputs(proto.graph, expose_zipmap_input(proto), model=path.name)


@pytest.mark.parametrize("name", list(CASES))
def test_zoo_inputs_match_the_models_signature(zoo: dict[str, ZooModel], name: str) -> None:
    import onnxruntime as ort

    model = zoo[name]
    session = ort.InferenceSession(str(model.path), providers=["CPUExecutionProvider"])
    assert {i.name: (i.type, i.shape) for i in session.get_inputs()} == CASES[name].signature
    dtypes = {"tensor(float)": np.float32, "tensor(int64)": np.int64, "tensor(string)": np.object_}
    for inp in session.get_inputs():
        rows = model.inputs[inp.name]
        assert rows.dtype == dtypes[inp.type] and rows.shape[0] == model.rows
        assert rows.shape[1:] == tuple(inp.shape[1:])
    if "tensor(string)" in {i.type for i in session.get_inputs()}:
        assert all(isinstance(v, str) for v in model.inputs["colour"].ravel())


@pytest.mark.parametrize("name", list(CASES))
def test_zoo_model_agrees_with_the_framework_that_built_it(zoo: dict[str, ZooModel], name: str) -> None:
    model, case = zoo[name], CASES[name]
    outputs = model_zoo.run_with_onnxruntime(model)
    if case.kind == "regressor":
        got = np.hstack([outputs[v].reshape(model.rows, -1) for v in case.values])
        assert got.shape == model.expected.shape
        np.testing.assert_allclose(got, model.expected, rtol=1e-4, atol=1e-4)
        return
    assert model.expected.dtype == np.int64 and model.expected.shape == (model.rows,)
    if case.label is not None:
        np.testing.assert_array_equal(outputs[case.label].reshape(-1), model.expected)
    scores = outputs[case.scores or case.proba or case.logits or ""]
    np.testing.assert_array_equal(scores.argmax(axis=1), model.expected)
    if model.proba is not None and case.softmax_of is None:
        np.testing.assert_allclose(scores, model.proba, atol=1e-5)


@pytest.mark.parametrize("name", list(CASES))
def test_decide_outputs_reads_each_zoo_model_as_what_it_is(zoo: dict[str, ZooModel], name: str) -> None:
    case = CASES[name]
    decision = _decide(zoo[name].path)
    got = (decision.kind, decision.label, decision.proba, decision.logits, decision.values, decision.softmax_of)
    assert got == (case.kind, case.label, case.proba, case.logits, case.values, case.softmax_of), decision.summary()


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.loads])
def test_onnx_model_evaluates_the_single_input_zoo_models_as_their_framework_does(
    zoo: dict[str, ZooModel], name: str
) -> None:
    model = zoo[name]
    loaded = OnnxModel(model.path)
    out = loaded.evaluate(model.inputs["input"])
    assert loaded.kind == CASES[name].kind
    if loaded.kind == "regressor":
        assert out.value is not None
        np.testing.assert_allclose(out.value, model.expected, rtol=1e-4, atol=1e-4)
        return
    np.testing.assert_array_equal(out.label, model.expected)
    assert out.proba is not None and model.proba is not None
    np.testing.assert_allclose(out.proba, model.proba, atol=1e-5)


def test_a_torch_export_with_its_default_output_name_reads_as_regression_targets_unless_told(tmp_path: Path) -> None:
    """``torch.onnx.export`` without ``output_names`` calls the logits ``output``: nothing in the graph says they
    are class scores, so they read as 3 regression targets (docs/SPEC-NOTES.md) and the reason says how to
    override; ``model_kind: classifier`` reads them as logits."""
    model = model_zoo.build_logits_only_classifier(tmp_path, output="output")
    decision = _decide(model.path)
    assert decision.kind == "regressor" and decision.values == ("output",)
    assert "set model_kind: classifier" in decision.reason
    forced = OnnxModel(model.path, model_kind="classifier")
    assert forced.decision.softmax_of == "output"
    np.testing.assert_array_equal(forced.evaluate(model.inputs["input"]).label, model.expected)


# -- converter outputs beyond the zoo's models -------------------------------------------------------------------------
def _iris() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_iris

    x, y = load_iris(return_X_y=True)
    return x.astype(np.float32), y


def _convert(estimator: object, options: dict[str, object] | None = None) -> onnx.ModelProto:
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType

    initial = [("x", FloatTensorType([None, 4]))]
    model: onnx.ModelProto = convert_sklearn(
        estimator, initial_types=initial, options=options, target_opset=model_zoo.OPSET
    )
    return model


@pytest.mark.parametrize("classes", [2, 3])
def test_decide_outputs_refuses_probabilities_split_into_one_output_per_class(classes: int) -> None:
    """skl2onnx ``zipmap='columns'``: one [N] output per class. Reading the first as the probabilities would take
    P(class 0) for P(class 1); the message says how to convert instead."""
    from sklearn.linear_model import LogisticRegression

    x, y = _iris()
    y = y if classes == 3 else (y == 2).astype(np.int64)
    proto = _convert(LogisticRegression(max_iter=500).fit(x, y), {"zipmap": "columns"})
    with pytest.raises(ModelError, match=r"one probability output per class \('i0', 'i1'.*zipmap.: False"):
        decide_outputs(proto.graph, expose_zipmap_input(proto))


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("estimator", ["LinearSVC", "RidgeClassifier"])
def test_a_linear_classifiers_decision_scores_read_as_logits(tmp_path: Path, estimator: str, classes: int) -> None:
    """skl2onnx names a ``LinearSVC``'s or ``RidgeClassifier``'s decision scores (margins of any sign and size)
    ``probabilities``: they are logits, and their softmax (sigmoid for a binary model's one score column, though
    [N, 2] is declared) the probabilities; the class stays the framework's."""
    from sklearn.linear_model import RidgeClassifier
    from sklearn.svm import LinearSVC

    x, y = _iris()
    y = y if classes == 3 else (y == 2).astype(np.int64)
    fitted = (LinearSVC(max_iter=10_000) if estimator == "LinearSVC" else RidgeClassifier()).fit(x, y)
    proto = _convert(fitted)
    decision = decide_outputs(proto.graph, expose_zipmap_input(proto))
    assert decision.kind == "classifier" and decision.logits == "probabilities", decision.summary()
    assert decision.softmax_of == "probabilities" and "decision scores of LinearClassifier" in decision.reason
    path = tmp_path / "linear.onnx"
    onnx.save(proto, str(path))
    out = OnnxModel(path).evaluate(x)
    assert out.proba is not None and out.proba.shape == (len(x), classes)
    np.testing.assert_allclose(out.proba.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(out.label, fitted.predict(x))


def test_a_logistic_regressions_classifier_node_still_reads_as_probabilities() -> None:
    from sklearn.linear_model import LogisticRegression

    x, y = _iris()
    proto = _convert(LogisticRegression(max_iter=500).fit(x, (y == 2).astype(np.int64)), {"zipmap": False})
    decision = decide_outputs(proto.graph, expose_zipmap_input(proto))
    assert decision.proba == "probabilities" and decision.logits is None and decision.softmax_of is None
