"""OnnxModel (stage 3): signature checks, output mapping, ZipMap rewrite, chunking, and load-time error messages."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from numpy.typing import NDArray

from monitor.errors import ModelError
from monitor.model.onnx import OnnxModel, OnnxRuntimeOptions
from tests.conftest import CountingSession
from tests.unit import onnx_graphs

ROWS = np.random.default_rng(0).normal(size=(23, 2)).astype(np.float32)


# -- regressors --------------------------------------------------------------------------------------------------
def test_onnx_model_reads_a_regressor_signature(tmp_path: Path) -> None:
    model = OnnxModel(onnx_graphs.linear_regressor(tmp_path / "lin.onnx", [1.0, -2.0], 0.5))
    assert (model.kind, model.n_features, model.input_name) == ("regressor", 2, "x")
    assert model.describe()["outputs"] == ["y"]


def test_onnx_model_regressor_values_match_numpy(tmp_path: Path) -> None:
    model = OnnxModel(onnx_graphs.linear_regressor(tmp_path / "lin.onnx", [1.0, -2.0], 0.5))
    out = model.evaluate(ROWS)
    assert out.value is not None and out.value.dtype == np.float32
    np.testing.assert_allclose(out.value, ROWS @ np.array([[1.0], [-2.0]]) + 0.5, rtol=1e-6, atol=1e-6)


def test_onnx_model_reshapes_a_flat_regressor_output_to_a_column(tmp_path: Path) -> None:
    model = OnnxModel(onnx_graphs.linear_regressor(tmp_path / "flat.onnx", [1.0, 1.0], flat=True))
    out = model.evaluate(ROWS)
    assert out.value is not None and out.value.shape == (23, 1)


def test_onnx_model_feeds_doubles_to_a_double_input_model(tmp_path: Path) -> None:
    model = OnnxModel(onnx_graphs.double_input_regressor(tmp_path / "double.onnx", [1.0, 3.0]))
    out = model.evaluate(ROWS)
    assert out.value is not None
    np.testing.assert_allclose(out.value[:, 0], ROWS @ np.array([1.0, 3.0]), rtol=1e-6, atol=1e-6)


def test_onnx_model_treats_a_lone_raw_output_as_a_regression_value(tmp_path: Path) -> None:
    # "raw" marks logits only next to a classifier's probabilities or labels; alone it is a regressor's output
    model = OnnxModel(onnx_graphs.linear_regressor(tmp_path / "raw.onnx", [1.0, 2.0], output="raw_score"))
    assert model.kind == "regressor" and not model.has_logits
    assert model.evaluate(ROWS).value is not None


# -- classifiers -------------------------------------------------------------------------------------------------
def test_onnx_model_reads_a_classifier_with_logits_probabilities_and_label(linear_classifier_model: OnnxModel) -> None:
    assert (linear_classifier_model.kind, linear_classifier_model.has_logits, linear_classifier_model.has_proba) == (
        "classifier",
        True,
        True,
    )


def test_onnx_model_classifier_outputs_agree(linear_classifier_model: OnnxModel) -> None:
    out = linear_classifier_model.evaluate(ROWS)
    assert out.label is not None and out.proba is not None and out.logits is not None
    assert out.proba.shape == out.logits.shape == (23, 2)
    np.testing.assert_array_equal(out.label, (ROWS[:, 0] - ROWS[:, 1] + 0.2 > 0).astype(np.int64))
    np.testing.assert_allclose(out.proba.sum(axis=1), 1.0, rtol=1e-6)


def test_onnx_model_expands_a_single_probability_column_to_two_classes(tmp_path: Path) -> None:
    model = OnnxModel(onnx_graphs.sigmoid_classifier(tmp_path / "sig.onnx", [1.0, 1.0], 0.1))
    out = model.evaluate(ROWS)
    assert out.proba is not None and out.label is not None and out.proba.shape == (23, 2)
    expected = 1.0 / (1.0 + np.exp(-(ROWS.sum(axis=1) + 0.1)))
    np.testing.assert_allclose(out.proba[:, 1], expected, rtol=1e-5)
    np.testing.assert_array_equal(out.label, (expected > 0.5).astype(np.int64))


def test_onnx_model_labels_a_logits_only_classifier_by_argmax(tmp_path: Path) -> None:
    path = onnx_graphs.linear_classifier(
        tmp_path / "lg.onnx", [[0.0, 1.0], [0.0, -1.0]], [0.0, 0.2], outputs=("logits",)
    )
    model = OnnxModel(path)
    out = model.evaluate(ROWS)
    assert model.kind == "classifier" and model.has_logits
    assert out.logits is not None and out.label is not None
    np.testing.assert_array_equal(out.label, out.logits.argmax(axis=1))


def test_onnx_model_rewrites_a_zipmap_classifier_to_a_probability_tensor(tmp_path: Path) -> None:
    path, estimator = onnx_graphs.zipmap_classifier(tmp_path / "zip.onnx")
    model = OnnxModel(path)
    out = model.evaluate(ROWS)
    assert model.kind == "classifier" and model.has_proba
    assert out.proba is not None and out.label is not None
    np.testing.assert_allclose(out.proba, estimator.predict_proba(ROWS), atol=1e-6)
    np.testing.assert_array_equal(out.label, estimator.predict(ROWS))


def test_onnx_model_maps_string_class_labels_to_indices(tmp_path: Path) -> None:
    path, estimator = onnx_graphs.zipmap_classifier(tmp_path / "zip.onnx", classes=("ham", "spam"))
    out = OnnxModel(path).evaluate(ROWS)
    assert out.label is not None
    np.testing.assert_array_equal(estimator.classes_[out.label], estimator.predict(ROWS))


def test_onnx_model_reads_a_classifier_converted_without_zipmap(tmp_path: Path) -> None:
    path, estimator = onnx_graphs.zipmap_classifier(tmp_path / "plain.onnx", zipmap=False)
    out = OnnxModel(path).evaluate(ROWS)
    assert out.proba is not None
    np.testing.assert_allclose(out.proba, estimator.predict_proba(ROWS), atol=1e-6)


def test_onnx_model_rejects_string_labels_without_probabilities(tmp_path: Path) -> None:
    model = OnnxModel(onnx_graphs.string_label_only_model(tmp_path / "strings.onnx"))
    with pytest.raises(ModelError, match=r"exposes only string labels \('label'\) and no probabilities"):
        model.evaluate(ROWS)


# -- what the outputs are: one decision, logged -------------------------------------------------------
def _softmax(z: NDArray[np.floating]) -> NDArray[np.float64]:
    e = np.exp(np.asarray(z, dtype=np.float64) - z.max(axis=1, keepdims=True))
    softmax: NDArray[np.float64] = e / e.sum(axis=1, keepdims=True)
    return softmax


W3 = [[1.0, -0.5, 0.2], [0.3, 0.8, -1.0]]
B3 = [0.1, 0.0, -0.2]


def test_onnx_model_reads_a_softmax_output_named_output_as_probabilities(tmp_path: Path) -> None:
    path = onnx_graphs.linear_classifier(
        tmp_path / "sm.onnx", W3, B3, outputs=("probabilities",), names={"probabilities": "output"}
    )
    model = OnnxModel(path)
    out = model.evaluate(ROWS)
    assert (model.kind, model.has_proba, model.has_logits) == ("classifier", True, False)
    assert "'output' is computed by Softmax" in model.decision.reason
    assert out.proba is not None
    np.testing.assert_allclose(out.proba, _softmax(ROWS @ np.array(W3) + B3), rtol=1e-5)


def test_onnx_model_reads_a_float_output_beside_an_argmax_label_as_logits(tmp_path: Path) -> None:
    # the float output is the ArgMax's input: logits, not probabilities (it was read as probabilities)
    path = onnx_graphs.linear_classifier(
        tmp_path / "am.onnx", W3, B3, outputs=("logits", "label"), names={"logits": "output"}
    )
    model = OnnxModel(path)
    out = model.evaluate(ROWS)
    assert (model.kind, model.has_logits, model.has_proba) == ("classifier", True, True)
    assert model.decision.logits == "output" and model.decision.softmax_of == "output"
    assert out.logits is not None and out.proba is not None and out.label is not None
    logits = ROWS @ np.array(W3) + B3
    np.testing.assert_allclose(out.logits, logits, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.proba, _softmax(logits), rtol=1e-5)  # confidence: the softmax of the logits
    np.testing.assert_array_equal(out.label, logits.argmax(axis=1))


def test_onnx_model_reads_a_log_softmax_output_as_logits(tmp_path: Path) -> None:
    path = onnx_graphs.linear_classifier(
        tmp_path / "ls.onnx", W3, B3, outputs=("log_probabilities",), names={"log_probabilities": "output"}
    )
    model = OnnxModel(path)
    out = model.evaluate(ROWS)
    assert (model.kind, model.decision.logits) == ("classifier", "output")
    assert out.proba is not None
    np.testing.assert_allclose(out.proba, _softmax(ROWS @ np.array(W3) + B3), rtol=1e-5)


def test_onnx_model_reads_a_bare_wide_output_as_regression_targets_and_says_how_to_override(tmp_path: Path) -> None:
    model = OnnxModel(onnx_graphs.logits_network(tmp_path / "net.onnx", 2, 10))
    assert model.kind == "regressor" and model.decision.values == ("output",)
    assert "set model_kind: classifier if they are class scores" in model.decision.reason
    out = model.evaluate(ROWS)
    assert out.value is not None and out.value.shape == (23, 10)


def test_onnx_model_kind_classifier_reads_a_bare_output_as_logits(tmp_path: Path) -> None:
    # an exported network whose one output 'output' [N, 10] holds logits
    plain = OnnxModel(onnx_graphs.logits_network(tmp_path / "net.onnx", 2, 10))
    model = OnnxModel(plain.path, model_kind="classifier")
    out = model.evaluate(ROWS)
    assert (model.kind, model.has_logits, model.has_proba) == ("classifier", True, True)
    assert "model_kind: classifier" in model.decision.reason
    logits = plain.evaluate(ROWS).value
    assert logits is not None and out.logits is not None and out.proba is not None
    np.testing.assert_array_equal(out.logits, logits)
    np.testing.assert_array_equal(out.label, logits.argmax(axis=1))
    np.testing.assert_allclose(out.proba, _softmax(logits.astype(np.float64)), rtol=1e-5, atol=1e-7)


def test_onnx_model_kind_regressor_reads_a_classifiers_floats_as_values(linear_classifier_model: OnnxModel) -> None:
    model = OnnxModel(linear_classifier_model.path, model_kind="regressor")
    assert model.kind == "regressor" and model.decision.values == ("logits", "probabilities")
    assert model.decision.ignored == ("label",)
    out = model.evaluate(ROWS)
    assert out.value is not None and out.value.shape == (23, 4) and out.label is None


def test_onnx_model_kind_regressor_needs_a_float_output(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"model_kind: regressor but has no float outputs \('label' tensor\(string\)"):
        OnnxModel(onnx_graphs.string_label_only_model(tmp_path / "s.onnx"), model_kind="regressor")


def test_onnx_model_reads_a_single_logit_column_as_a_binary_classifier(tmp_path: Path) -> None:
    model = OnnxModel(onnx_graphs.linear_regressor(tmp_path / "logit.onnx", [[1.0], [-1.0]], 0.2, output="logit"))
    out = model.evaluate(ROWS)
    z = ROWS[:, 0] - ROWS[:, 1] + 0.2
    assert model.kind == "classifier" and out.proba is not None and out.proba.shape == (23, 2)
    np.testing.assert_allclose(out.proba[:, 1], 1.0 / (1.0 + np.exp(-z)), rtol=1e-5)
    np.testing.assert_array_equal(out.label, (z > 0).astype(np.int64))


def test_onnx_model_reads_a_scikit_learn_regressor_by_its_regressor_node(tmp_path: Path) -> None:
    from sklearn.linear_model import LinearRegression

    x = np.random.default_rng(0).normal(size=(50, 3))
    estimator = LinearRegression().fit(x, x @ np.array([1.0, 2.0, -1.0]))
    model = OnnxModel(onnx_graphs.sklearn_to_onnx(tmp_path / "lr.onnx", estimator, 3))
    assert model.kind == "regressor" and model.decision.reason == "'variable' is computed by LinearRegressor"


def test_onnx_model_says_a_zipmap_classifier_was_read_by_its_zipmap(tmp_path: Path) -> None:
    path, _ = onnx_graphs.zipmap_classifier(tmp_path / "zip.onnx")
    model = OnnxModel(path)
    assert model.kind == "classifier" and "fed a ZipMap" in model.decision.reason


def test_onnx_model_logs_its_kind_decision_in_one_info_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = onnx_graphs.linear_classifier(
        tmp_path / "am.onnx", W3, B3, outputs=("logits", "label"), names={"logits": "output"}
    )
    with caplog.at_level(logging.INFO, logger="monitor.model.onnx"):
        OnnxModel(path)
    lines = [r.getMessage() for r in caplog.records if r.name == "monitor.model.onnx" and r.levelno == logging.INFO]
    assert lines == [
        "model 'am.onnx' read as a classifier; probabilities from softmax of 'output'; logits from 'output'; labels "
        "from 'label'; why: 'output' is read by ArgMax and Softmax (class scores)"
    ]


def test_onnx_model_describes_its_kind_decision(linear_classifier_model: OnnxModel) -> None:
    reason = linear_classifier_model.describe()["kind_reason"]
    assert reason == "'probabilities' is computed by Softmax; 'logits' is named like logits"


# -- chunking ----------------------------------------------------------------------------------------------------
def test_onnx_model_results_do_not_depend_on_the_chunk_size(linear_classifier_model: OnnxModel) -> None:
    chunked = OnnxModel(linear_classifier_model.path, OnnxRuntimeOptions(max_rows_per_run=7))
    whole, parts = linear_classifier_model.evaluate(ROWS), chunked.evaluate(ROWS)
    assert whole.proba is not None and parts.proba is not None
    np.testing.assert_array_equal(parts.label, whole.label)
    np.testing.assert_allclose(parts.proba, whole.proba, rtol=1e-6)


def test_onnx_model_runs_the_session_once_per_chunk(linear_classifier_model: OnnxModel) -> None:
    model = OnnxModel(linear_classifier_model.path, OnnxRuntimeOptions(max_rows_per_run=7))
    session = CountingSession(model._session)
    model._session = session
    model.evaluate(ROWS)
    assert session.batch_sizes == [7, 7, 7, 2]
    assert len(session.batch_sizes) == math.ceil(23 / 7)


def test_onnx_model_runs_the_session_once_when_the_batch_fits(linear_classifier_model: OnnxModel) -> None:
    model = OnnxModel(linear_classifier_model.path, OnnxRuntimeOptions(max_rows_per_run=23))
    session = CountingSession(model._session)
    model._session = session
    model.evaluate(ROWS)
    assert session.batch_sizes == [23]


def test_onnx_model_rejects_a_chunk_size_below_one(linear_classifier_model: OnnxModel) -> None:
    with pytest.raises(ModelError, match="max_rows_per_run must be >= 1; got 0"):
        OnnxModel(linear_classifier_model.path, OnnxRuntimeOptions(max_rows_per_run=0))


def test_onnx_model_reports_a_failing_run_with_the_batch_size(tmp_path: Path) -> None:
    model = OnnxModel(onnx_graphs.odd_batch_failing_model(tmp_path / "odd.onnx"))
    with pytest.raises(ModelError, match="onnxruntime failed on a batch of 3 rows"):
        model.evaluate(ROWS[:3])


# -- providers ---------------------------------------------------------------------------------------------------
def test_onnx_model_falls_back_to_cpu_for_an_unavailable_provider(
    linear_classifier_model: OnnxModel, caplog: pytest.LogCaptureFixture
) -> None:
    if "TensorrtExecutionProvider" in ort.get_available_providers():
        pytest.skip("TensorRT is available here")
    with caplog.at_level(logging.WARNING, logger="monitor.model.onnx"):
        model = OnnxModel(linear_classifier_model.path, OnnxRuntimeOptions(providers=("tensorrt",)))
    assert model.providers == ["CPUExecutionProvider"]
    assert "execution provider not available" in caplog.text


def _provider_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "monitor.model.onnx" and r.levelno == logging.WARNING]


def test_onnx_model_cuda_then_cpu_runs_on_cpu_with_one_warning_where_cuda_is_absent(
    linear_classifier_model: OnnxModel, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CPUExecutionProvider"])
    with caplog.at_level(logging.WARNING, logger="monitor.model.onnx"):
        model = OnnxModel(linear_classifier_model.path, OnnxRuntimeOptions(providers=("cuda", "cpu")))
        model.evaluate(ROWS)
    assert model.providers == ["CPUExecutionProvider"]
    warnings = _provider_warnings(caplog)
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "CUDAExecutionProvider" in warnings[0].getMessage() and "onnxruntime-gpu" in warnings[0].getMessage()


class _SessionOn:
    """Wraps a real CPU session, recording the providers asked for and reporting ``reports`` as its providers."""

    asked: list[list[str]] = []

    def __init__(self, reports: list[str] | None) -> None:
        self.reports = reports

    def __call__(self, model: Any, sess_options: Any = None, providers: Any = None) -> Any:
        _SessionOn.asked.append(list(providers))
        real = _REAL_SESSION(model, sess_options=sess_options, providers=["CPUExecutionProvider"])
        reports = list(providers) if self.reports is None else self.reports
        return SimpleNamespace(
            get_providers=lambda: reports,
            **{name: getattr(real, name) for name in ("run", "get_inputs", "get_outputs", "get_modelmeta")},
        )


_REAL_SESSION = ort.InferenceSession


@pytest.mark.parametrize("reports", [None, ["CPUExecutionProvider"]], ids=["cuda-works", "cuda-fails-to-start"])
def test_onnx_model_cuda_then_cpu_asks_for_cuda_where_the_build_has_it(
    linear_classifier_model: OnnxModel,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    reports: list[str] | None,
) -> None:
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    monkeypatch.setattr(ort, "InferenceSession", _SessionOn(reports))
    _SessionOn.asked = []
    with caplog.at_level(logging.WARNING, logger="monitor.model.onnx"):
        model = OnnxModel(linear_classifier_model.path, OnnxRuntimeOptions(providers=("cuda", "cpu")))
    assert _SessionOn.asked[0] == ["CUDAExecutionProvider", "CPUExecutionProvider"]
    warnings = _provider_warnings(caplog)
    if reports is None:
        assert model.providers == ["CUDAExecutionProvider", "CPUExecutionProvider"] and warnings == []
    else:
        assert model.providers == ["CPUExecutionProvider"]
        assert len(warnings) == 1 and "failed to initialise" in warnings[0].getMessage()


# -- bad inputs --------------------------------------------------------------------------------------------------
def test_onnx_model_rejects_rows_of_the_wrong_width(linear_classifier_model: OnnxModel) -> None:
    with pytest.raises(ModelError, match=r"model input 'x' expects rows of 2 features; got an array of shape \(4, 5\)"):
        linear_classifier_model.evaluate(np.zeros((4, 5), dtype=np.float32))


def test_onnx_model_rejects_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"model file '.*absent\.onnx' does not exist \(expected an \.onnx file\)"):
        OnnxModel(tmp_path / "absent.onnx")


def test_onnx_model_rejects_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist"):
        OnnxModel(tmp_path)


def test_onnx_model_rejects_a_file_that_is_not_onnx(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(b"this is a CSV, not a model\n1,2,3\n")
    with pytest.raises(ModelError, match=r"model '.*model\.onnx' is not an ONNX model: .* got CSV text"):
        OnnxModel(path)


def test_onnx_model_rejects_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    with pytest.raises(ModelError, match=r"model '.*empty\.onnx' is not an ONNX model: .* got an empty file"):
        OnnxModel(path)


def test_onnx_model_rejects_outputs_that_are_neither_classifier_nor_regressor(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"has outputs 'positive' tensor\(bool\).*expected a probability tensor"):
        OnnxModel(onnx_graphs.bool_output_model(tmp_path / "bool.onnx"))


def _spin_stop(session: ort.InferenceSession) -> str | None:
    """The session's ``session.force_spinning_stop`` entry, None when it is not set (onnxruntime's default)."""
    try:
        return str(session.get_session_options().get_session_config_entry("session.force_spinning_stop"))
    except RuntimeError:
        return None


@pytest.mark.parametrize(("spin_after_run", "expected"), [(False, "1"), (True, None)])
def test_onnx_model_sessions_stop_their_threads_spinning_after_a_run_unless_asked(
    linear_classifier_model: OnnxModel, spin_after_run: bool, expected: str | None
) -> None:
    model = OnnxModel(linear_classifier_model.path, OnnxRuntimeOptions(spin_after_run=spin_after_run))
    offsets = np.zeros((3, 2), dtype=np.float32)
    evaluator = model.neighbourhood(offsets, copies=2)
    assert evaluator is not None, "the linear classifier's graph is wrapped"
    # both sessions the scorer and the shadow check run: the model's own and the wrapped graph's
    assert _spin_stop(model._session) == expected
    assert _spin_stop(evaluator._runner._session) == expected


def test_onnx_model_stops_spinning_by_default() -> None:
    assert OnnxRuntimeOptions().spin_after_run is False


def _allow_spinning(session: ort.InferenceSession) -> str | None:
    """The session's ``session.intra_op.allow_spinning`` entry, None when it is not set (onnxruntime's default: 1)."""
    try:
        return str(session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning"))
    except RuntimeError:
        return None


@pytest.mark.parametrize(("spin", "expected"), [(False, "0"), (True, None)])
def test_onnx_model_sessions_threads_sleep_while_they_wait_for_work_unless_asked(
    linear_classifier_model: OnnxModel, spin: bool, expected: str | None
) -> None:
    model = OnnxModel(linear_classifier_model.path, OnnxRuntimeOptions(spin=spin))
    evaluator = model.neighbourhood(np.zeros((3, 2), dtype=np.float32), copies=2)
    assert evaluator is not None, "the linear classifier's graph is wrapped"
    assert _allow_spinning(model._session) == expected
    assert _allow_spinning(evaluator._runner._session) == expected
    assert OnnxRuntimeOptions().spin is False
