"""Models as today's exporters write them, on the committed torch fixtures (``tests/fixtures/torch/``, written by
``bench/make_torch_fixtures.py`` with torch 2.13.0): external data read from beside the model wherever the process
runs, the fixed batch of torch's default export freed, half-precision inputs cast in the graph, and what
``check-config`` says about them."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from numpy.typing import NDArray
from onnx import TensorProto, helper, numpy_helper

from monitor.cli import main
from monitor.errors import ModelError
from monitor.model import batching
from monitor.model.onnx import OnnxModel
from monitor.model.standardize import Standardizer
from monitor.signals.scorer import RobustnessScorer, ScoringConfig
from tests.unit import onnx_graphs

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "torch"
#: |γ(float16) − γ(float32)| allowed per event: about one float16 step of a probability in [0.5, 1)
#: (2⁻¹¹ ≈ 4.9e-4); docs/MODELS.md states it (measured at most 2.7e-4 on the 1,797 digits)
FLOAT16_GAMMA_TOLERANCE = 5e-4


@pytest.fixture(scope="module")
def digits() -> NDArray[np.float32]:
    from sklearn.datasets import load_digits

    images = load_digits().images
    return (np.asarray(images) / 16.0).astype(np.float32).reshape(len(images), -1)


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory that is not the fixtures' (external data must not resolve against it)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


class _CountingSession:
    """An onnxruntime session that counts its runs."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self.runs = 0

    def run(self, *args: Any, **kwargs: Any) -> Any:
        self.runs += 1
        return self._session.run(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


# -- external data -----------------------------------------------------------------------------------------------
def test_the_default_export_loads_from_another_directory_and_names_its_data_file(elsewhere: Path) -> None:
    model = OnnxModel(FIXTURES / "cnn_dynamo.onnx")
    assert [(d.name, d.size) for d in model.external_data] == [
        ("cnn_dynamo.onnx.data", (FIXTURES / "cnn_dynamo.onnx.data").stat().st_size)
    ]
    assert "cnn_dynamo.onnx.data" in model.external_data[0].describe()
    assert OnnxModel(FIXTURES / "cnn_legacy.onnx").external_data == ()


def test_a_model_copied_with_its_data_file_loads_by_a_relative_path(tmp_path: Path, elsewhere: Path) -> None:
    target = tmp_path / "models"
    target.mkdir()
    for name in ("cnn_dynamo.onnx", "cnn_dynamo.onnx.data"):
        shutil.copy(FIXTURES / name, target / name)
    model = OnnxModel(Path("..") / "models" / "cnn_dynamo.onnx")
    assert model.external_data[0].name == "cnn_dynamo.onnx.data"


def test_a_missing_data_file_is_named_with_where_it_was_looked_for(tmp_path: Path, elsewhere: Path) -> None:
    shutil.copy(FIXTURES / "cnn_dynamo.onnx", tmp_path / "cnn_dynamo.onnx")
    with pytest.raises(ModelError, match=r"external data file 'cnn_dynamo.onnx.data', which should be at '.*") as err:
        OnnxModel(tmp_path / "cnn_dynamo.onnx")
    assert str(tmp_path / "cnn_dynamo.onnx.data") in str(err.value) and "ship both" in str(err.value)


def test_a_data_file_outside_the_models_directory_is_refused(tmp_path: Path) -> None:
    proto = onnx.load(str(FIXTURES / "cnn_dynamo.onnx"), load_external_data=False)
    for tensor in proto.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = "../cnn_dynamo.onnx.data"
    (tmp_path / "inner").mkdir()
    onnx.save(proto, str(tmp_path / "inner" / "m.onnx"))
    shutil.copy(FIXTURES / "cnn_dynamo.onnx.data", tmp_path / "cnn_dynamo.onnx.data")
    with pytest.raises(ModelError, match=r"outside its own directory"):
        OnnxModel(tmp_path / "inner" / "m.onnx")


def test_a_model_reaching_protobufs_limit_is_refused_with_its_size(
    elsewhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("monitor.model.onnx_read.PROTOBUF_LIMIT", 4096)
    with pytest.raises(ModelError, match=r"with its external data \('cnn_dynamo.onnx.data' .*\) is 8.9 kB; .* 2 GiB"):
        OnnxModel(FIXTURES / "cnn_dynamo.onnx")


def test_a_truncated_data_file_is_refused(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "cnn_dynamo.onnx", tmp_path / "cnn_dynamo.onnx")
    (tmp_path / "cnn_dynamo.onnx.data").write_bytes((FIXTURES / "cnn_dynamo.onnx.data").read_bytes()[:100])
    with pytest.raises(ModelError, match=r"cannot read the external data of model .*exceeds available data"):
        OnnxModel(tmp_path / "cnn_dynamo.onnx")


# -- torch's fixed batch -------------------------------------------------------------------------------------------
def test_the_default_export_is_freed_and_agrees_with_the_free_batch_export(
    digits: NDArray[np.float32], elsewhere: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        dynamo = OnnxModel(FIXTURES / "cnn_dynamo.onnx")
    assert dynamo._run_batch is None
    assert "fixed batch of 1; made free by a graph rewrite" in caplog.text
    legacy = OnnxModel(FIXTURES / "cnn_legacy.onnx")
    counting = _CountingSession(dynamo._session)
    dynamo._session = counting
    got, want = dynamo.evaluate(digits), legacy.evaluate(digits)
    assert counting.runs == 1  # all 1,797 rows in one session.run: the batch is free
    assert got.proba is not None and want.proba is not None
    np.testing.assert_array_equal(got.proba, want.proba)
    np.testing.assert_array_equal(got.label, want.label)
    from sklearn.datasets import load_digits

    assert np.mean(got.label == load_digits().target) > 0.9  # the network the fixtures hold, not noise


def test_the_default_export_scores_its_ball_in_the_graph(digits: NDArray[np.float32], elsewhere: Path) -> None:
    dynamo, legacy = OnnxModel(FIXTURES / "cnn_dynamo.onnx"), OnnxModel(FIXTURES / "cnn_legacy.onnx")
    standardizer = Standardizer.fit(digits)
    scores = [RobustnessScorer(m, standardizer, ScoringConfig(flicker_copies=4)) for m in (dynamo, legacy)]
    assert scores[0].rows_built_in_graph
    a, b = (s.score(digits[:40]) for s in scores)
    np.testing.assert_allclose(a.gamma, b.gamma, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(a.predicted_class, b.predicted_class)


def test_a_gru_exports_sequence_first_batch_and_zero_state_are_freed(
    digits: NDArray[np.float32], elsewhere: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """torch writes the GRU's initial state as a constant [1, 1, 16] of zeros and reshapes its output to [8, 1, 16]
    (sequence first: the batch at position 1); neither the first-position rewrite alone nor a kept batch is needed."""
    with caplog.at_level(logging.INFO):
        model = OnnxModel(FIXTURES / "gru_dynamo.onnx")
    assert model.run_batch is None and "made free by a graph rewrite" in caplog.text
    counting = _CountingSession(model._session)
    model._session = counting
    whole = model.evaluate(digits[:60])
    assert counting.runs == 1
    one_by_one = np.concatenate([np.asarray(model.evaluate(digits[i : i + 1]).proba) for i in range(60)])
    np.testing.assert_allclose(np.asarray(whole.proba), one_by_one, rtol=1e-5, atol=1e-6)
    from sklearn.datasets import load_digits

    assert np.mean(model.evaluate(digits).label == load_digits().target) > 0.8


def _allowzero_flatten(path: Path, *, constant_node: bool = False) -> Path:
    """[2, 3, 2] → Reshape(allowzero=1) to [2, 6] → MatMul: the fixed batch of 2 written as torch writes it."""
    w = np.arange(12, dtype=np.float32).reshape(6, 2) / 10
    target = numpy_helper.from_array(np.array([2, -1], np.int64), "target")
    nodes = [
        helper.make_node("Reshape", ["x", "target"], ["flat"], allowzero=1),
        helper.make_node("MatMul", ["flat", "w"], ["y"]),
    ]
    inits = [numpy_helper.from_array(w, "w")]
    if constant_node:
        nodes.insert(0, helper.make_node("Constant", [], ["target"], value=target))
    else:
        inits.append(target)
    graph = helper.make_graph(
        nodes,
        "allowzero",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
        initializer=inits,
        value_info=[helper.make_tensor_value_info("flat", TensorProto.FLOAT, [2, 6])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("constant_node", [False, True])
def test_an_allowzero_reshape_with_a_constant_target_is_freed(tmp_path: Path, constant_node: bool) -> None:
    model = OnnxModel(_allowzero_flatten(tmp_path / "m.onnx", constant_node=constant_node))
    assert model._run_batch is None
    x = np.random.default_rng(0).standard_normal((7, 6)).astype(np.float32)
    out = model.evaluate(x)
    assert out.value is not None
    np.testing.assert_allclose(out.value, x @ (np.arange(12, dtype=np.float32).reshape(6, 2) / 10), rtol=1e-5)


def test_a_batch_that_cannot_be_freed_gives_one_warning_of_ours_and_no_onnxruntime_error_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    with caplog.at_level(logging.WARNING):
        model = OnnxModel(onnx_graphs.batch_bound(tmp_path / "bound.onnx", opset=18))
    assert model._run_batch == 1
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "µs per run measured at load" in warnings[0].getMessage()
    assert "nan" not in warnings[0].getMessage()
    err = capfd.readouterr().err
    assert "onnxruntime" not in err.lower() and "Non-zero status" not in err


def test_a_cost_that_cannot_be_measured_is_said_in_words_never_nan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    model = OnnxModel(onnx_graphs.batch_bound(tmp_path / "bound.onnx", opset=18))
    why = batching.row_cost(
        b"not a model", "x", None, 1, signature=model.signature, options=model.options, providers=model.providers
    )
    assert isinstance(why, str) and why.startswith("onnxruntime: ")
    monkeypatch.setattr(batching, "row_cost", lambda *args, **kwargs: "onnxruntime: no session today")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        OnnxModel(onnx_graphs.batch_bound(tmp_path / "bound.onnx", opset=18))
    message = next(r.getMessage() for r in caplog.records if "cannot be made free" in r.getMessage())
    assert "could not be measured at load (onnxruntime: no session today)" in message and "nan" not in message


# -- half precision ------------------------------------------------------------------------------------------------
def test_a_float16_export_scores_within_the_stated_tolerance_of_its_float32_twin(
    digits: NDArray[np.float32], elsewhere: Path
) -> None:
    m32, m16 = OnnxModel(FIXTURES / "cnn_dynamo.onnx"), OnnxModel(FIXTURES / "cnn_dynamo_fp16.onnx")
    assert m16.signature.inputs[0].type_name == "float16" and m16._run_batch is None
    standardizer = Standardizer.fit(digits)
    rows = digits[:200]
    for radius in (0.05, 0.5):
        config = ScoringConfig(radius=radius, flicker_copies=0)
        a = RobustnessScorer(m32, standardizer, config).score(rows)
        b = RobustnessScorer(m16, standardizer, config).score(rows)
        assert np.all(np.isfinite(b.gamma))
        assert np.max(np.abs(a.gamma - b.gamma)) <= FLOAT16_GAMMA_TOLERANCE
        np.testing.assert_array_equal(a.predicted_class, b.predicted_class)


def _bfloat16_model(path: Path) -> Path:
    """y = (x · W) computed in float32 between bfloat16 input and output, as a bfloat16 export reads."""
    w = np.array([[1.0, -2.0], [0.5, 0.25], [3.0, 1.0]], np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT),
            helper.make_node("MatMul", ["xf", "w"], ["yf"]),
            helper.make_node("Cast", ["yf"], ["y"], to=TensorProto.BFLOAT16),
        ],
        "bf16",
        [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, ["N", 3])],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, ["N", 2])],
        initializer=[numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_a_bfloat16_model_takes_float32_rows_cast_in_the_graph(tmp_path: Path) -> None:
    model = OnnxModel(_bfloat16_model(tmp_path / "bf16.onnx"))
    assert model.signature.inputs[0].type_name == "bfloat16" and not model.signature.plain
    assert model.kind == "regressor"
    x = np.random.default_rng(1).standard_normal((50, 3)).astype(np.float32)
    out = model.evaluate(x)
    assert out.value is not None and out.value.dtype == np.float32
    want = x @ np.array([[1.0, -2.0], [0.5, 0.25], [3.0, 1.0]], np.float32)
    # bfloat16 keeps 8 significant bits: the input and the output are each rounded by at most 2⁻⁹ relative
    np.testing.assert_allclose(out.value, want, rtol=2e-2, atol=2e-2)
    result = RobustnessScorer(model, Standardizer.fit(x), ScoringConfig(flicker_copies=2)).score(x)
    assert np.all(np.isfinite(result.gamma))


# -- check-config ----------------------------------------------------------------------------------------------------
def _check_config(capsys: pytest.CaptureFixture[str], yaml: Path) -> tuple[int, str]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        code = main(["check-config", "--config", str(yaml)])
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    return code, capsys.readouterr().err


def test_check_config_names_the_external_data_file_and_its_size(
    tmp_path: Path, elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    yaml = tmp_path / "m.yaml"
    yaml.write_text(
        f"models:\n  - {{name: digits, path: {FIXTURES / 'cnn_dynamo.onnx'}}}\n"
        f"  - {{name: half, path: {FIXTURES / 'cnn_dynamo_fp16.onnx'}}}\n"
    )
    code, err = _check_config(capsys, yaml)
    size = (FIXTURES / "cnn_dynamo.onnx.data").stat().st_size
    assert code == 0
    assert f"model 'digits': weights in external data 'cnn_dynamo.onnx.data' ({size / 1000:.1f} kB, 1 tensor)" in err
    assert "model 'digits': fixed batch of 1 made free at load (checked against runs of 1)" in err
    assert "model 'half': half-precision input 'image' float16 [1, 1, 8, 8]: perturbed in float32" in err
    assert "model 'digits': half-precision" not in err


def test_check_config_says_a_kept_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bound = onnx_graphs.batch_bound(tmp_path / "bound.onnx", opset=18)
    yaml = tmp_path / "m.yaml"
    yaml.write_text(f"models:\n  - {{name: bound, path: {bound}}}\n")
    code, err = _check_config(capsys, yaml)
    assert code == 0 and "model 'bound': fixed batch of 1 kept: rows are evaluated in runs of 1" in err


def _per_column(path: Path) -> Path:
    """skl2onnx's shape: one [N, 1] float input per column (age, income, debt_ratio), a probability output."""
    names = ["age", "income", "debt_ratio"]
    graph = helper.make_graph(
        [
            helper.make_node("Concat", names, ["x"], axis=1),
            helper.make_node("MatMul", ["x", "w"], ["z"]),
            helper.make_node("Softmax", ["z"], ["probabilities"], axis=1),
        ],
        "columns",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 1]) for n in names],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 2])],
        initializer=[numpy_helper.from_array(np.array([[0.1, -0.1], [0.2, 0.0], [-1.0, 1.0]], np.float32), "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_check_config_refuses_a_feature_name_the_model_does_not_have_with_the_closest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = _per_column(tmp_path / "credit.onnx")
    yaml = tmp_path / "m.yaml"
    yaml.write_text(f"models:\n  - {{name: credit, path: {model}, feature_names: [age, income, debt]}}\n")
    code, err = _check_config(capsys, yaml)
    assert code == 2
    assert "feature_names lists 'debt' (closest: 'debt_ratio'), which name no input element" in err
    assert "its features are age, income, debt_ratio" in err
    yaml.write_text(f"models:\n  - {{name: credit, path: {model}, feature_names: [income, age, debt_ratio]}}\n")
    code, err = _check_config(capsys, yaml)
    assert code == 2 and "in another order; the model's order is age, income, debt_ratio" in err
    yaml.write_text(f"models:\n  - {{name: credit, path: {model}, feature_names: [age, income, debt_ratio]}}\n")
    assert _check_config(capsys, yaml)[0] == 0


def test_run_refuses_a_feature_name_the_model_does_not_have_before_it_connects(tmp_path: Path) -> None:
    """``run`` loads its models with the same check, before any broker is needed: exit 2 with the closest names."""
    import subprocess
    import sys

    model = _per_column(tmp_path / "credit.onnx")
    yaml = tmp_path / "m.yaml"
    yaml.write_text(
        f"models:\n  - {{name: credit, path: {model}, feature_names: [age, income, debt]}}\n"
        "kafka: {bootstrap_servers: '127.0.0.1:1', topic: t, group_id: g}\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "monitor", "run", "--config", str(yaml), "--metrics-port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "error: model 'credit': feature_names lists 'debt' (closest: 'debt_ratio')" in done.stderr


def test_check_config_leaves_a_plain_models_feature_names_free(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = onnx_graphs.linear_classifier(tmp_path / "m.onnx", [[0.0, 1.0], [0.0, -1.0]], [0.0, 0.2])
    yaml = tmp_path / "m.yaml"
    yaml.write_text(f"models:\n  - {{name: m, path: {model}, feature_names: [income, debt]}}\n")
    assert _check_config(capsys, yaml)[0] == 0


def test_check_config_says_logits_read_as_a_regressor_in_its_summary_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = onnx_graphs.logits_network(tmp_path / "net.onnx", 4, 3)
    yaml = tmp_path / "m.yaml"
    yaml.write_text(f"models:\n  - {{name: net, path: {model}}}\n")
    code, err = _check_config(capsys, yaml)
    summary = next(line for line in err.splitlines() if line.startswith("model 'net': inputs"))
    assert code == 0 and "read as a regressor" in summary
    assert "if these 3 values are a classifier's logits (exported without its Softmax), set model_kind: classifier" in (
        summary
    )
    yaml.write_text(f"models:\n  - {{name: net, path: {model}, model_kind: classifier}}\n")
    code, err = _check_config(capsys, yaml)
    assert code == 0 and "exported without its Softmax" not in err
