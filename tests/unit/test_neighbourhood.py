"""Ball points and flicker copies built inside the ONNX graph (``OnnxModel.neighbourhood``).

The in-graph path must score exactly what the numpy path scores: same rows (same offsets, same bank rows for the
same seed and call sequence), same outputs up to the last float32 bits, the same bank afterwards; one
``session.run`` per chunk of whole events; and a clean fallback when a graph cannot be wrapped or disagrees.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from numpy.typing import NDArray
from onnx import TensorProto, helper

from monitor.errors import ModelError
from monitor.model import onnx as onnx_module
from monitor.model.neighbourhood import affine_input, binary_positive, linear_head, neighbourhood_graph
from monitor.model.onnx import OnnxModel, OnnxRuntimeOptions
from monitor.model.readout import positive_output
from monitor.model.standardize import Standardizer
from monitor.signals.scorer import RobustnessScorer, ScoringConfig
from tests.conftest import CountingSession
from tests.unit import onnx_graphs

RESULT_FIELDS = ("gamma", "flicker", "p_adj", "gamma_logit", "predicted_class", "probability", "margin", "valid")


def _pair(path: Path, config: ScoringConfig, *, chunk: int = 16384) -> tuple[RobustnessScorer, RobustnessScorer]:
    """The same model and config scored in the graph and in numpy."""
    graph = OnnxModel(path, OnnxRuntimeOptions(max_rows_per_run=chunk, rows_in_graph=True))
    plain = OnnxModel(path, OnnxRuntimeOptions(max_rows_per_run=chunk, rows_in_graph=False))
    std = Standardizer.identity(graph.n_features)
    return RobustnessScorer(graph, std, config), RobustnessScorer(plain, std, config)


def _assert_same_scores(a: Any, b: Any, *, rtol: float = 2e-5, atol: float = 1e-6) -> None:
    for name in RESULT_FIELDS:
        got, want = getattr(a, name), getattr(b, name)
        if np.asarray(want).dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)


def _calls(
    scorer_a: RobustnessScorer, scorer_b: RobustnessScorer, n: int, sizes: tuple[int, ...], **tolerance: float
) -> None:
    rng = np.random.default_rng(1)
    for b in sizes:  # the same call sequence for both scorers: their noise banks stay aligned
        rows = rng.normal(scale=0.7, size=(b, n))
        if b > 2:
            rows[1, 0] = np.nan
            rows[-1, -1] = np.inf
        _assert_same_scores(scorer_a.score(rows), scorer_b.score(rows), **tolerance)
    np.testing.assert_array_equal(scorer_a._bank, scorer_b._bank)


@pytest.mark.parametrize("copies", [0, 16])
@pytest.mark.parametrize("chunk", [1, 90, 10**6])  # rows per run: 1 event at least, a few events, everything
@pytest.mark.parametrize("fixture", ["curved_classifier_model", "norm_regressor_model", "linear_classifier_model"])
def test_in_graph_scores_equal_numpy_scores(
    fixture: str, chunk: int, copies: int, request: pytest.FixtureRequest
) -> None:
    base: OnnxModel = request.getfixturevalue(fixture)
    config = ScoringConfig(radius=0.3, flicker_copies=copies, sigma=0.3, seed=5)
    graph, plain = _pair(base.path, config, chunk=chunk)
    assert graph.rows_built_in_graph and not plain.rows_built_in_graph
    _calls(graph, plain, base.n_features, (1, 2, 7, 33, 100))


@pytest.mark.parametrize("output", ["proba", "logit", "label"])
def test_in_graph_scores_equal_numpy_scores_for_every_output(curved_classifier_model: OnnxModel, output: str) -> None:
    config = ScoringConfig(radius=0.3, output=output, flicker_copies=8, sigma=0.3, seed=2)
    graph, plain = _pair(curved_classifier_model.path, config, chunk=200)
    _calls(graph, plain, 2, (5, 40))


def test_in_graph_rows_are_the_rows_build_rows_writes(curved_classifier_model: OnnxModel, tmp_path: Path) -> None:
    """The wrapped graph with an Identity model returns its input rows: they equal ``build_rows`` bit for bit."""
    path = tmp_path / "identity.onnx"
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["value"])],
        "identity",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("value", TensorProto.FLOAT, ["N", 3])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    config = ScoringConfig(radius=0.2, flicker_copies=8, seed=4)
    std = Standardizer(mean=np.zeros(3), scale=np.array([1.0, 3.0, 0.5]))
    in_graph = RobustnessScorer(OnnxModel(path, OnnxRuntimeOptions(max_rows_per_run=50)), std, config)
    numpy_side = RobustnessScorer(OnnxModel(path, OnnxRuntimeOptions(rows_in_graph=False)), std, config)
    centres = np.random.default_rng(3).normal(size=(9, 3)).astype(np.float32)
    assert in_graph._neighbourhood is not None
    out = in_graph._neighbourhood.evaluate(centres, in_graph._bank[in_graph._noise_pick(9)])
    in_graph._after_batch(9)
    assert out.value is not None
    np.testing.assert_array_equal(out.value, numpy_side.build_rows(centres))


def test_in_graph_runs_once_per_chunk_of_whole_events(curved_classifier_model: OnnxModel) -> None:
    model = OnnxModel(curved_classifier_model.path, OnnxRuntimeOptions(max_rows_per_run=64))
    scorer = RobustnessScorer(model, Standardizer.identity(2), ScoringConfig(flicker_copies=8))
    assert scorer._neighbourhood is not None
    runner = scorer._neighbourhood._runner
    session = CountingSession(runner._session)
    runner._session = session
    per_event = scorer.rows_per_event()  # 1 + 4 + 8 = 13 rows: 4 events per 64-row run
    assert runner.events_per_run == 64 // per_event
    scorer.score(np.random.default_rng(0).normal(size=(10, 2)))
    assert session.batch_sizes == [4, 3, 3]  # centres per run: as few runs as fit, of equal size
    runner.events_per_run = 10**6
    session.batch_sizes.clear()
    scorer.score(np.random.default_rng(0).normal(size=(10, 2)))
    assert session.batch_sizes == [10]  # ONE session.run for the micro-batch


def test_a_run_failure_is_a_model_error_naming_the_batch(curved_classifier_model: OnnxModel) -> None:
    scorer = RobustnessScorer(curved_classifier_model, Standardizer.identity(2), ScoringConfig(flicker_copies=4))

    class Failing:
        def run(self, names: list[str], feeds: dict[str, NDArray[np.float32]]) -> list[NDArray[np.float32]]:
            raise RuntimeError("device lost")

    assert scorer._neighbourhood is not None
    scorer._neighbourhood._runner._session = Failing()
    with pytest.raises(ModelError, match="onnxruntime failed on a batch of 5 events: device lost"):
        scorer.score(np.random.default_rng(0).normal(size=(5, 2)))


def test_double_input_models_get_float32_rows_cast_in_the_graph(tmp_path: Path) -> None:
    path = onnx_graphs.double_input_regressor(tmp_path / "double.onnx", [1.0, -2.0, 0.5])
    config = ScoringConfig(radius=0.3, flicker_copies=8, seed=1)
    graph, plain = _pair(path, config)
    assert graph.rows_built_in_graph
    _calls(graph, plain, 3, (3, 20))


def test_zipmap_and_string_label_classifiers(tmp_path: Path) -> None:
    path, _ = onnx_graphs.zipmap_classifier(tmp_path / "zip.onnx", classes=("no", "yes"))
    graph, plain = _pair(path, ScoringConfig(radius=0.3, flicker_copies=8, seed=3))
    assert graph.rows_built_in_graph
    _calls(graph, plain, 2, (4, 30))


def test_an_old_opset_model_is_wrapped_with_the_attribute_form_of_unsqueeze(tmp_path: Path) -> None:
    path = tmp_path / "opset11.onnx"
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["xw"]),
            helper.make_node("Softmax", ["xw"], ["probabilities"], axis=1),
        ],
        "old",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 2])],
        initializer=[onnx.numpy_helper.from_array(np.array([[1.0, -1.0], [0.5, 2.0]], dtype=np.float32), "W")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 7
    onnx.save(model, path)
    in_graph, plain = _pair(path, ScoringConfig(radius=0.3, flicker_copies=8, seed=3))
    assert in_graph.rows_built_in_graph
    _calls(in_graph, plain, 2, (4, 30))


def test_a_graph_with_subgraphs_falls_back_to_numpy_rows(tmp_path: Path) -> None:
    then = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["then_out"])],
        "then",
        [],
        [helper.make_tensor_value_info("then_out", TensorProto.FLOAT, ["N", 2])],
    )
    other = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["else_out"])],
        "else",
        [],
        [helper.make_tensor_value_info("else_out", TensorProto.FLOAT, ["N", 2])],
    )
    graph = helper.make_graph(
        [helper.make_node("If", ["flag"], ["value"], then_branch=then, else_branch=other)],
        "with_if",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info("value", TensorProto.FLOAT, ["N", 2])],
        initializer=[onnx.numpy_helper.from_array(np.array(True), "flag")],
    )
    path = tmp_path / "if.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    model = OnnxModel(path)
    scorer = RobustnessScorer(model, Standardizer.identity(2), ScoringConfig(flicker_copies=4))
    assert not scorer.rows_built_in_graph
    result = scorer.score(np.zeros((3, 2)))
    np.testing.assert_allclose(result.gamma, 0.0, atol=1e-6)  # the identity is harmonic


def test_a_wrapped_graph_that_disagrees_with_the_model_is_not_used(
    curved_classifier_model: OnnxModel, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = onnx_module.neighbourhood_graph

    def wrong_offsets(*args: Any, **kwargs: Any) -> Any:
        kwargs["offsets"] = kwargs["offsets"] * 3  # a wrapping bug: the graph builds other ball points
        return real(*args, **kwargs)

    monkeypatch.setattr(onnx_module, "neighbourhood_graph", wrong_offsets)
    with caplog.at_level("WARNING"):
        scorer = RobustnessScorer(curved_classifier_model, Standardizer.identity(2), ScoringConfig(radius=0.5))
    assert not scorer.rows_built_in_graph
    assert "neighbourhood graph disagrees with the model" in caplog.text


# -- linear heads: scores from one MatMul of the centre ---------------------------------------------------------
def _sklearn_linear(tmp_path: Path, estimator: Any, n: int, classes: int = 2) -> Path:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, n))
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(int) if classes == 2 else np.digitize(x[:, 0], [-0.4, 0.4])
    from sklearn.base import is_regressor

    if is_regressor(estimator):
        y = x @ rng.normal(size=n)
    estimator.fit(x, y)
    return onnx_graphs.sklearn_to_onnx(tmp_path / "linear.onnx", estimator, n, zipmap=is_regressor(estimator))


@pytest.mark.parametrize("kind", ["binary", "multinomial", "regression"])
def test_linear_heads_score_like_the_numpy_path(tmp_path: Path, kind: str) -> None:
    from sklearn.linear_model import LinearRegression, LogisticRegression

    n = 6
    if kind == "regression":
        path = _sklearn_linear(tmp_path, LinearRegression(), n)
    else:
        path = _sklearn_linear(tmp_path, LogisticRegression(max_iter=500), n, classes=2 if kind == "binary" else 3)
    head = linear_head(onnx.load(path).graph, "X", n)
    assert head is not None and head.weights.shape[1] == n
    config = ScoringConfig(radius=0.3, flicker_copies=16, sigma=0.3, seed=7)
    graph, plain = _pair(path, config, chunk=500)
    assert graph._neighbourhood is not None and graph._neighbourhood.projects_noise
    _calls(graph, plain, n, (1, 9, 64))


def test_linear_head_is_not_used_when_it_would_not_save_work(tmp_path: Path) -> None:
    path, _ = onnx_graphs.zipmap_classifier(tmp_path / "lr2.onnx", zipmap=False)  # 2 targets on 2 features
    assert linear_head(onnx.load(path).graph, "X", 2) is None


# -- the first affine layer on the centres only ------------------------------------------------------------------
def _mlp(tmp_path: Path, n: int = 5, hidden: int = 12, classes: int = 2) -> Path:
    from sklearn.neural_network import MLPClassifier

    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, n))
    y = np.digitize(x[:, 0] + 0.5 * np.sin(2 * x[:, 1]), [-0.3, 0.3][: classes - 1])
    # strongly regularized: probabilities away from 0 and 1, where log(1 − p) in float32 is rounding noise in
    # either path and γ_logit would compare rounding, not the rewrite
    mlp = MLPClassifier(hidden_layer_sizes=(hidden, hidden), alpha=3.0, solver="lbfgs", max_iter=3000, random_state=0)
    return onnx_graphs.sklearn_to_onnx(tmp_path / "mlp.onnx", mlp.fit(x, y), n, zipmap=False)


def _gemm_net(path: Path, n: int, hidden: int, *, trans_b: int, opset: int = 17) -> Path:
    """input → Gemm(W, c) → Relu → MatMul → Softmax, as PyTorch exports a Linear layer (transB = 1)."""
    rng = np.random.default_rng(3)
    w = rng.normal(size=(hidden, n) if trans_b else (n, hidden)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Gemm", ["x", "W", "c"], ["h"], transB=trans_b),
            helper.make_node("Relu", ["h"], ["a"]),
            helper.make_node("MatMul", ["a", "V"], ["z"]),
            helper.make_node("Softmax", ["z"], ["probabilities"], axis=1),
        ],
        "gemm_net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", n])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 3])],
        initializer=[
            onnx.numpy_helper.from_array(w, "W"),
            onnx.numpy_helper.from_array(rng.normal(size=hidden).astype(np.float32), "c"),
            onnx.numpy_helper.from_array(rng.normal(size=(hidden, 3)).astype(np.float32), "V"),
        ],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8), path)
    return path


@pytest.mark.parametrize("classes", [2, 3])
def test_an_mlps_first_layer_runs_on_the_centres_only(tmp_path: Path, classes: int) -> None:
    path = _mlp(tmp_path, classes=classes)
    affine = affine_input(onnx.load(path).graph, "X", 5)
    assert affine is not None and affine.weights.shape == (5, 12)
    ops = [onnx.load(path).graph.node[i].op_type for i in affine.nodes]
    assert ops == ["Cast", "MatMul", "Add"]  # skl2onnx's no-op Cast, then x @ W + b: the bias is folded
    config = ScoringConfig(radius=0.3, flicker_copies=16, sigma=0.3, seed=7)
    graph, plain = _pair(path, config, chunk=700)
    assert graph._neighbourhood is not None and graph._neighbourhood.noise_width == 12
    assert graph._bank_fed.shape == (graph._bank.shape[0], 12)
    wrapped = onnx.load_from_string(
        neighbourhood_graph(
            path.read_bytes(),
            input_name="X",
            output_names=["probabilities"],
            offsets=graph.offsets,
            copies=16,
            input_is_double=False,
        ).model  # type: ignore[union-attr]
    ).graph
    first = [node for node in wrapped.node if "centres" in node.input]
    assert [node.op_type for node in first] == ["MatMul"]  # the B centres, not the B·(1 + m + K) rows
    # x @ W + (δ @ W + b) rounds otherwise than (x + δ) @ W + b: agreement within float32 rounding, as the load-time
    # check asks (the next test: no less accurate than the numpy rows)
    _calls(graph, plain, 5, (1, 9, 64), rtol=1e-4, atol=1e-5)


def test_the_affine_rewrite_is_as_accurate_as_the_numpy_rows(tmp_path: Path) -> None:
    """γ of both paths against the same MLP evaluated in float64 on the exact ball points: the rewrite's error is
    of the float32 rounding the numpy rows already carry (the offset is no longer rounded into x + δ first)."""
    path = _mlp(tmp_path)
    weights = {
        init.name: onnx.numpy_helper.to_array(init).astype(np.float64) for init in onnx.load(path).graph.initializer
    }

    def proba64(rows: NDArray[np.float64]) -> NDArray[np.float64]:
        h = np.maximum(rows @ weights["coefficient"] + weights["intercepts"], 0.0)
        h = np.maximum(h @ weights["coefficient1"] + weights["intercepts1"], 0.0)
        return 1.0 / (1.0 + np.exp(-(h @ weights["coefficient2"] + weights["intercepts2"])[:, 0]))

    config = ScoringConfig(radius=0.3, flicker_copies=0, seed=7)
    graph, plain = _pair(path, config)
    assert graph._neighbourhood is not None and graph._neighbourhood.noise_width == 12
    x = np.random.default_rng(1).normal(scale=0.7, size=(400, 5)).astype(np.float32)
    offsets = graph.offsets.astype(np.float64)
    exact = np.empty(len(x))
    for e, centre in enumerate(x.astype(np.float64)):
        p1 = proba64(np.vstack([centre, centre + offsets]))
        f = p1 if p1[0] > 0.5 else 1.0 - p1  # the centre's class
        exact[e] = abs(f[0] - f[1:].mean())
    in_graph = np.abs(graph.score(x).gamma - exact)
    numpy_rows = np.abs(plain.score(x).gamma - exact)
    assert np.median(numpy_rows) > 0  # float32 rounding is there to compare
    assert np.median(in_graph) <= 2 * np.median(numpy_rows)
    assert in_graph.max() <= 2 * numpy_rows.max() + 1e-7


@pytest.mark.parametrize("trans_b", [0, 1])
def test_a_gemm_first_layer_is_folded_too(tmp_path: Path, trans_b: int) -> None:
    path = _gemm_net(tmp_path / "gemm.onnx", 4, 6, trans_b=trans_b)
    affine = affine_input(onnx.load(path).graph, "x", 4)
    assert affine is not None and affine.weights.shape == (4, 6) and affine.output == "h"
    graph, plain = _pair(path, ScoringConfig(radius=0.3, flicker_copies=8, sigma=0.3, seed=1), chunk=300)
    assert graph._neighbourhood is not None and graph._neighbourhood.noise_width == 6
    _calls(graph, plain, 4, (3, 40), rtol=1e-4, atol=1e-5)


def _edit(path: Path, change: Any) -> onnx.GraphProto:
    model = onnx.load(path)
    change(model.graph)
    return model.graph


def test_the_affine_rewrite_declines_what_it_cannot_fold(tmp_path: Path) -> None:
    path = _gemm_net(tmp_path / "gemm.onnx", 4, 6, trans_b=1)
    assert affine_input(onnx.load(path).graph, "x", 4) is not None

    def second_reader(g: onnx.GraphProto) -> None:  # the input also read elsewhere: its rows are needed
        g.node.append(helper.make_node("Identity", ["x"], ["x_copy"]))

    def weights_computed(g: onnx.GraphProto) -> None:  # B is not a constant
        g.node.insert(0, helper.make_node("Identity", ["W"], ["W2"]))
        g.node[1].input[1] = "W2"

    def exposed(g: onnx.GraphProto) -> None:  # the layer's output is a model output: it must exist as a tensor
        g.output.append(helper.make_tensor_value_info("h", TensorProto.FLOAT, ["N", 6]))

    def scaled(g: onnx.GraphProto) -> None:  # alpha ≠ 1
        g.node[0].attribute.append(helper.make_attribute("alpha", 2.0))

    for change in (second_reader, weights_computed, exposed, scaled):
        assert affine_input(_edit(path, change), "x", 4) is None, change.__name__
    assert affine_input(onnx.load(path).graph, "x", 5) is None  # W is not (n, H) for this input width


def test_a_cast_to_double_before_the_first_layer_is_not_passed_over(tmp_path: Path) -> None:
    path = _mlp(tmp_path)
    graph = onnx.load(path).graph
    cast = graph.node[0]
    assert cast.op_type == "Cast"
    cast.attribute[0].i = TensorProto.DOUBLE
    assert affine_input(graph, "X", 5) is None


def test_neighbourhood_graph_leaves_the_model_graph_alone(curved_classifier_model: OnnxModel) -> None:
    before = curved_classifier_model._model_bytes
    wrapped = neighbourhood_graph(
        before,
        input_name="x",
        output_names=["probabilities"],
        offsets=np.ones((4, 2), dtype=np.float32),
        copies=3,
        input_is_double=False,
    )
    assert wrapped is not None and wrapped.projection is None and wrapped.centre_in_ball
    assert curved_classifier_model._model_bytes == before
    names = {o.name for o in onnx.load_from_string(wrapped.model).graph.output}
    assert names == {"b/probabilities", "f/probabilities"}  # the centres ride in the ball part, as offset 0


def test_the_wrapped_graph_keeps_only_the_nodes_its_outputs_need(tmp_path: Path) -> None:
    """An MLP's label branch (ArgMax → ArrayFeatureExtractor → Reshape → Cast) is dropped from every copy when the
    probabilities are exposed: onnxruntime would run it on every ball point and copy otherwise."""
    from sklearn.neural_network import MLPClassifier

    x, y = onnx_graphs.training_blobs(4)
    mlp = MLPClassifier(hidden_layer_sizes=(8,), solver="lbfgs", max_iter=2000, random_state=0).fit(x, y)
    path = onnx_graphs.sklearn_to_onnx(tmp_path / "mlp.onnx", mlp, 2, zipmap=False)
    plain = onnx.load(path).graph
    assert {"ArgMax", "ArrayFeatureExtractor"} <= {node.op_type for node in plain.node}
    wrapped = neighbourhood_graph(
        path.read_bytes(),
        input_name="X",
        output_names=["probabilities"],
        offsets=np.ones((4, 2), dtype=np.float32),
        copies=3,
        input_is_double=False,
    )
    assert wrapped is not None
    graph = onnx.load_from_string(wrapped.model).graph
    ops = [node.op_type for node in graph.node]
    assert "ArgMax" not in ops and "ArrayFeatureExtractor" not in ops
    assert ops.count("Sigmoid") == 2  # the probabilities still computed once per part (centre + ball, copies)
    read = {t for node in graph.node for t in node.input}
    assert all(init.name in read for init in graph.initializer)  # the label branch's constants went with it
    scorers = _pair(path, ScoringConfig(radius=0.2, flicker_copies=8, seed=2))
    assert scorers[0].rows_built_in_graph
    _calls(*scorers, 2, (5, 40))


@pytest.mark.parametrize("per_run", [1, 4, 218])
def test_chunks_cover_the_batch_in_the_fewest_runs_of_equal_size(per_run: int) -> None:
    from monitor.model.neighbourhood import NeighbourhoodRunner

    class _Input:
        name = "centres"

    class _Session:
        def get_inputs(self) -> list[Any]:
            return [_Input()]

    runner = NeighbourhoodRunner(_Session(), ["y"], m=4, copies=0, events_per_run=per_run)
    for b in (1, 3, 4, 5, 38, 218, 219, 256, 1024):
        bounds = runner.chunks(b)
        assert bounds[0][0] == 0 and bounds[-1][1] == b
        assert all(stop == nxt for (_, stop), (nxt, _) in zip(bounds, bounds[1:], strict=False))
        sizes = [stop - start for start, stop in bounds]
        assert len(bounds) == -(-b // per_run) and max(sizes) <= per_run and max(sizes) - min(sizes) <= 1


def _binary_head(
    path: Path, *, one: float = 1.0, axis: int = 1, swapped: bool = False, constant_node: bool = False
) -> Path:
    """x → MatMul → Sigmoid → p [N, 1]; probabilities = Concat(Sub(one, p), p) — skl2onnx's binary head — or a
    variant the binary rewrite must refuse (another constant, axis, or order)."""
    w = np.array([[1.5], [-2.0], [0.5]], dtype=np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["z"]),
        helper.make_node("Sigmoid", ["z"], ["p"]),
        helper.make_node("Sub", ["one", "p"], ["q"]),
        helper.make_node("Concat", ["p", "q"] if swapped else ["q", "p"], ["probabilities"], axis=axis),
    ]
    inits = [onnx.numpy_helper.from_array(w, "W")]
    one_value = onnx.numpy_helper.from_array(np.array([[one]], dtype=np.float32), "one")
    if constant_node:
        nodes.insert(0, helper.make_node("Constant", [], ["one"], value=one_value))
    else:
        inits.append(one_value)
    graph = helper.make_graph(
        nodes,
        "binary_head",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 2])],
        initializer=inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


def test_binary_positive_finds_p_of_a_one_minus_p_p_table(tmp_path: Path) -> None:
    def found(**variant: Any) -> str | None:
        return binary_positive(onnx.load(_binary_head(tmp_path / "head.onnx", **variant)).graph, "probabilities")

    assert found() == "p"
    assert found(constant_node=True) == "p"
    assert found(axis=-1) == "p"
    assert found(one=2.0) is None  # [2 − p, p] is not a probability table of p
    assert found(axis=0) is None  # rows, not classes
    assert found(swapped=True) is None  # [p, 1 − p]: class 1 would be the first column
    assert binary_positive(onnx.load(_mlp(tmp_path, classes=3)).graph, "probabilities") is None  # a softmax head


@pytest.mark.parametrize("copies", [0, 16])
def test_a_binary_mlp_exposes_p_alone_and_scores_as_the_numpy_rows(tmp_path: Path, copies: int) -> None:
    """skl2onnx's binary MLP: the wrapped graph returns p [rows, 1] without the Sub and Concat on every ball point
    and copy, and the scores agree with the numpy rows' (the affine rewrite's float32 rounding, as above)."""
    path = _mlp(tmp_path)
    graph, plain = _pair(path, ScoringConfig(radius=0.3, flicker_copies=copies, sigma=0.3, seed=7), chunk=700)
    evaluator = graph._neighbourhood
    assert evaluator is not None
    positive = binary_positive(onnx.load(path).graph, "probabilities")
    assert positive is not None
    assert evaluator._runner._fetch == [f"{part}/{positive}" for part in ("b", "f")[: 1 + bool(copies)]]
    out = evaluator.evaluate(np.zeros((2, 5), dtype=np.float32), graph._bank_fed[: 2 * copies] if copies else None)
    assert out.proba is None and out.positive is not None and out.positive.shape == (2 * graph.rows_per_event(),)
    _calls(graph, plain, 5, (1, 9, 64), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("output", ["proba", "label"])
def test_scores_from_p_alone_are_the_scores_from_the_table_bit_for_bit(tmp_path: Path, output: str) -> None:
    """``_binary_results`` against the table path on the same p, with the cases where reading p differs from an
    argmax if done carelessly: p = 0.5 (a tie: class 0), values whose 1 − p rounds, 0 and 1 (log floor), NaN at a
    centre (no class) and at a copy (class 0, as argmax's first NaN)."""
    path = _mlp(tmp_path)
    scorer = _pair(path, ScoringConfig(radius=0.3, flicker_copies=8, output=output, seed=3))[0]
    m, k, b = scorer.ball_size, 8, 6
    p = np.random.default_rng(4).uniform(size=b * (1 + m + k)).astype(np.float32)
    p[0] = 0.5  # centre 0 on the boundary
    p[1] = np.nextafter(np.float32(0.5), np.float32(1))
    p[2] = np.nan  # centre 2: no class
    p[3] = 1.0
    p[4] = 0.0
    p[b : b + m] = np.float32(0.5)  # centre 0's ball: every point a tie
    p[b + m] = np.float32(1e-30)
    p[b * (1 + m)] = np.nan  # a copy of centre 0
    p[b * (1 + m) + 1] = np.float32(0.5)
    from monitor.model.base import ModelOutput

    got = scorer._results(ModelOutput(positive=p), b)
    want = scorer._results(ModelOutput(positive=p).with_table(), b)
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    assert got["predicted_class"][0] == 0 and got["predicted_class"][1] == 1 and got["predicted_class"][2] == -1


def test_a_positive_output_of_the_wrong_shape_is_a_clear_error() -> None:
    with pytest.raises(
        ModelError, match=r"expected P\(class 1\) as float32 \[rows, 1\] from tensor 'b/p'; got float32 \(4, 2\)"
    ):
        positive_output("b/p", {"b/p": np.zeros((4, 2), dtype=np.float32)})
