"""RobustnessScorer: output modes, P_adj, one model call per micro-batch, invalid rows, bad settings.

"Direct" expectations evaluate the same real ONNX model at the centres and at x + r·s⊙v_i built here from
``ball_directions`` (in float32, as the scorer does), then apply the formulas of docs/SPEC-NOTES.md by hand.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from monitor.errors import ConfigError, ModelError
from monitor.model.base import ModelOutput
from monitor.model.onnx import OnnxModel, OnnxRuntimeOptions, argmax_rows
from monitor.model.standardize import Standardizer
from monitor.signals.balls import ball_directions
from monitor.signals.scorer import OUTPUT_SCALE_ROWS, RobustnessScorer, ScoringConfig
from tests.conftest import CountingPredictor
from tests.unit import onnx_graphs

RADIUS = 0.5
#: the curved_classifier_model fixture's per-class curvature q_k (logit_k = x·W_k + b_k + q_k·‖x‖²)
CURVATURE = np.array([0.4, -0.3, 0.1])


def _ball_outputs(
    model: OnnxModel, x: NDArray[np.float64], *, radius: float = RADIUS, ball: str = "simplex+anti"
) -> tuple[ModelOutput, ModelOutput, int]:
    """The model at the centres and at every ball point (B·m rows, event-major), and m."""
    x32 = x.astype(np.float32)
    offsets = (radius * ball_directions(ball, x.shape[1])).astype(np.float32)
    points = (x32[:, None, :] + offsets[None, :, :]).reshape(-1, x.shape[1])
    return model.evaluate(x32), model.evaluate(points), offsets.shape[0]


def _near_boundary_points(model: OnnxModel, rows: int = 6) -> NDArray[np.float64]:
    """Seeded points whose ball (r = RADIUS) crosses a decision boundary of ``model``."""
    candidates = np.random.default_rng(0).uniform(-2.0, 2.0, (400, 2))
    centre, ball, m = _ball_outputs(model, candidates)
    assert centre.label is not None and ball.label is not None
    crossing = (ball.label.reshape(-1, m) != centre.label[:, None]).any(axis=1)
    picked: NDArray[np.float64] = candidates[crossing][:rows]
    assert picked.shape[0] == rows
    return picked


def _scorer(model: OnnxModel, **settings: object) -> RobustnessScorer:
    config = ScoringConfig(**{"radius": RADIUS, "ball": "simplex+anti", "flicker_copies": 0, **settings})  # type: ignore[arg-type]
    return RobustnessScorer(model, Standardizer.identity(model.n_features), config)


# -- one model call per micro-batch -------------------------------------------------------------------------------
def test_scorer_evaluates_a_micro_batch_in_one_model_call(linear_classifier_model: OnnxModel) -> None:
    counting = CountingPredictor(linear_classifier_model)
    scorer = RobustnessScorer(counting, Standardizer.identity(2), ScoringConfig(flicker_copies=16))
    scorer.score(np.random.default_rng(0).normal(size=(9, 2)))
    assert counting.calls == [9 * (1 + 6 + 16)]


def test_scorer_evaluates_a_regressor_batch_in_one_model_call(norm_regressor_model: OnnxModel) -> None:
    counting = CountingPredictor(norm_regressor_model)
    scorer = RobustnessScorer(counting, Standardizer.identity(3), ScoringConfig(ball="rotations:2", flicker_copies=5))
    assert counting.calls == [OUTPUT_SCALE_ROWS]  # the output's scale for the flicker tolerance, once, when built
    counting.calls.clear()
    scorer.score(np.random.default_rng(0).normal(size=(4, 3)))
    assert counting.calls == [4 * (1 + 2 * 8 + 5)]


def test_scorer_rows_per_event_is_one_plus_ball_plus_copies(linear_classifier_model: OnnxModel) -> None:
    scorer = RobustnessScorer(linear_classifier_model, Standardizer.identity(2), ScoringConfig(flicker_copies=10))
    assert (scorer.ball_size, scorer.rows_per_event()) == (6, 17)


# -- output modes ------------------------------------------------------------------------------------------------
def test_scorer_default_output_is_proba_for_a_classifier(linear_classifier_model: OnnxModel) -> None:
    assert _scorer(linear_classifier_model).output == "proba"


def test_scorer_default_output_is_value_for_a_regressor(norm_regressor_model: OnnxModel) -> None:
    assert _scorer(norm_regressor_model).output == "value"


@pytest.mark.parametrize(("output", "field"), [("proba", "proba"), ("logit", "logits")])
def test_scorer_gamma_reads_the_centre_class_at_every_ball_point(
    curved_classifier_model: OnnxModel, output: str, field: str
) -> None:
    """γ of the proba or logit output is |centre's value − mean of the ball points' values|, both read at the
    centre's class, computed here directly."""
    x = _near_boundary_points(curved_classifier_model)
    centre, ball, m = _ball_outputs(curved_classifier_model, x)
    centre_out, ball_out = getattr(centre, field), getattr(ball, field)
    assert centre_out is not None and centre.label is not None and ball_out is not None
    k = centre.label
    ball_k = ball_out.reshape(len(x), m, -1)[np.arange(len(x)), :, k]
    expected = np.abs(centre_out[np.arange(len(x)), k] - ball_k.mean(axis=1, dtype=np.float64))
    np.testing.assert_allclose(_scorer(curved_classifier_model, output=output).score(x).gamma, expected, rtol=1e-6)


def test_scorer_proba_gamma_differs_from_reading_each_points_own_class(curved_classifier_model: OnnxModel) -> None:
    # guards the proba case above: on these points "max probability at each ball point" gives a different number
    x = _near_boundary_points(curved_classifier_model)
    centre, ball, m = _ball_outputs(curved_classifier_model, x)
    assert centre.proba is not None and ball.proba is not None
    own_class = np.abs(centre.proba.max(axis=1) - ball.proba.max(axis=1).reshape(len(x), m).mean(axis=1))
    gamma = _scorer(curved_classifier_model, output="proba").score(x).gamma
    assert np.abs(gamma - own_class).max() > 1e-3


def test_scorer_logit_gamma_of_quadratic_logits_is_curvature_times_radius_squared(
    curved_classifier_model: OnnxModel,
) -> None:
    # logit_k is affine + q_k·‖x‖², and the ball average of ‖x + r·v‖² is ‖x‖² + r²
    x = np.random.default_rng(1).uniform(-2.0, 2.0, (20, 2))
    result = _scorer(curved_classifier_model, output="logit").score(x)
    expected = np.abs(CURVATURE[result.predicted_class]) * RADIUS**2
    np.testing.assert_allclose(result.gamma, expected, rtol=1e-4, atol=1e-5)


def test_scorer_label_gamma_is_the_class_index_as_a_number(curved_classifier_model: OnnxModel) -> None:
    x = _near_boundary_points(curved_classifier_model)
    centre, ball, m = _ball_outputs(curved_classifier_model, x)
    assert centre.label is not None and ball.label is not None
    expected = np.abs(centre.label - ball.label.reshape(len(x), m).mean(axis=1))
    gamma = _scorer(curved_classifier_model, output="label").score(x).gamma
    np.testing.assert_allclose(gamma, expected, rtol=1e-12)
    assert np.all(gamma > 0)


def test_scorer_label_gamma_is_zero_inside_a_class_region(linear_classifier_model: OnnxModel) -> None:
    x = np.array([[3.0, -3.0], [-3.0, 3.0]])  # scores ±6.2, far from the boundary x1 − x2 + 0.2 = 0
    np.testing.assert_array_equal(_scorer(linear_classifier_model, output="label").score(x).gamma, 0.0)


def test_scorer_value_gamma_of_a_vector_output_is_the_l2_norm(tmp_path: Path) -> None:
    # outputs ‖x‖² and 2‖x‖² − x1: per-output γ = r² and 2r², so the reported γ is √5·r²
    norm2 = onnx_graphs.squared_norm(2)
    twice_minus_x1 = tuple((2.0 * c, p) for c, p in norm2) + ((-1.0, {0: 1}),)
    model = OnnxModel(onnx_graphs.polynomial_regressor(tmp_path / "vec.onnx", 2, [norm2, twice_minus_x1]))
    x = np.random.default_rng(2).uniform(-1.0, 1.0, (5, 2))
    np.testing.assert_allclose(_scorer(model).score(x).gamma, np.sqrt(5.0) * RADIUS**2, rtol=1e-4)


def test_scorer_reports_the_probability_of_the_predicted_class(curved_classifier_model: OnnxModel) -> None:
    x = np.random.default_rng(3).uniform(-2.0, 2.0, (8, 2))
    proba = curved_classifier_model.evaluate(x.astype(np.float32)).proba
    assert proba is not None
    result = _scorer(curved_classifier_model).score(x)
    np.testing.assert_array_equal(result.predicted_class, proba.argmax(axis=1))
    np.testing.assert_array_equal(result.probability, proba.max(axis=1))


@pytest.mark.parametrize("rows_in_graph", [True, False])
def test_scorer_scores_a_logits_only_classifier_as_the_same_classifier_with_probabilities(
    tmp_path: Path, rows_in_graph: bool
) -> None:
    # one bare output 'output' [N, C] of logits, read as a classifier (model_kind), scores as the
    # same logits exposed with their softmax and argmax: class = argmax, f = softmax at it, γ_logit on the logits
    weights = np.random.default_rng(5).normal(size=(3, 4))
    bias = [0.1, -0.2, 0.0, 0.3]
    options = OnnxRuntimeOptions(rows_in_graph=rows_in_graph)
    bare = onnx_graphs.linear_regressor(tmp_path / "bare.onnx", weights, bias, output="output")
    logits_only = OnnxModel(bare, options, model_kind="classifier")
    full = OnnxModel(onnx_graphs.linear_classifier(tmp_path / "full.onnx", weights, bias), options)
    config = ScoringConfig(radius=0.3, flicker_copies=16, sigma=0.3, seed=3)
    x = np.random.default_rng(6).normal(size=(40, 3))
    got = RobustnessScorer(logits_only, Standardizer.identity(3), config).score(x)
    want = RobustnessScorer(full, Standardizer.identity(3), config).score(x)
    assert 0.0 < want.flicker.mean() < 1.0 and want.gamma.max() > 0  # informative
    np.testing.assert_array_equal(got.predicted_class, want.predicted_class)
    np.testing.assert_array_equal(got.flicker, want.flicker)
    for name in ("gamma", "gamma_logit", "p_adj", "probability", "margin"):
        # γ_logit of linear logits is 0 up to float32 rounding of logits of size ~3 (ball points in one run or another)
        np.testing.assert_allclose(getattr(got, name), getattr(want, name), rtol=1e-5, atol=1e-6, err_msg=name)


def test_scorer_regressor_has_no_class_probability_or_p_adj(norm_regressor_model: OnnxModel) -> None:
    result = _scorer(norm_regressor_model).score(np.zeros((2, 3)))
    np.testing.assert_array_equal(result.predicted_class, -1)
    assert np.isnan(result.probability).all() and np.isnan(result.p_adj).all() and np.isnan(result.gamma_logit).all()


def test_scorer_gamma_does_not_depend_on_the_rest_of_the_batch(curved_classifier_model: OnnxModel) -> None:
    x = np.random.default_rng(4).uniform(-2.0, 2.0, (7, 2))
    scorer = _scorer(curved_classifier_model, ball="rotations:3")
    together = scorer.score(x).gamma
    alone = np.array([scorer.score(row[None, :]).gamma[0] for row in x])
    np.testing.assert_allclose(together, alone, rtol=1e-6, atol=1e-9)


# -- P_adj = P·exp(−N·γ_logit) -----------------------------------------------------------------------------------
def test_scorer_p_adj_is_probability_times_exp_of_minus_n_gamma_logit(curved_classifier_model: OnnxModel) -> None:
    x = _near_boundary_points(curved_classifier_model)
    centre, ball, m = _ball_outputs(curved_classifier_model, x)
    assert centre.proba is not None and centre.logits is not None and centre.label is not None
    assert ball.logits is not None
    k, rows = centre.label, np.arange(len(x))
    gamma_logit = np.abs(
        centre.logits[rows, k] - ball.logits.reshape(len(x), m, -1)[rows, :, k].mean(axis=1, dtype=np.float64)
    )
    expected = centre.proba[rows, k] * np.exp(-25 * gamma_logit)
    result = _scorer(curved_classifier_model, steps=25).score(x)
    np.testing.assert_allclose(result.gamma_logit, gamma_logit, rtol=1e-6)
    np.testing.assert_allclose(result.p_adj, expected, rtol=1e-6)


def test_scorer_p_adj_uses_log_probability_when_the_model_has_no_logits(tmp_path: Path) -> None:
    path = onnx_graphs.linear_classifier(
        tmp_path / "p.onnx", [[1.0, -0.5, 0.0], [0.3, 0.8, -1.0]], [0.1, 0.0, -0.2], outputs=("probabilities", "label")
    )
    model = OnnxModel(path)
    assert not model.has_logits
    x = _near_boundary_points(model)
    centre, ball, m = _ball_outputs(model, x)
    assert centre.proba is not None and centre.label is not None and ball.proba is not None
    k, rows = centre.label, np.arange(len(x))
    log_ball = np.log(ball.proba.reshape(len(x), m, -1)[rows, :, k]).mean(axis=1, dtype=np.float64)
    gamma_logit = np.abs(np.log(centre.proba[rows, k]) - log_ball)
    result = _scorer(model, steps=10).score(x)
    np.testing.assert_allclose(result.p_adj, centre.proba[rows, k] * np.exp(-10 * gamma_logit), rtol=1e-5)


def test_scorer_p_adj_of_a_linear_logit_model_is_the_probability(linear_classifier_model: OnnxModel) -> None:
    # linear logits are harmonic: γ_logit = 0 and the adjustment vanishes
    x = np.random.default_rng(5).uniform(-1.0, 1.0, (6, 2))
    result = _scorer(linear_classifier_model).score(x)
    np.testing.assert_allclose(result.gamma_logit, 0.0, atol=1e-6)
    np.testing.assert_allclose(result.p_adj, result.probability, rtol=1e-4)


def test_scorer_p_adj_equals_the_probability_with_zero_steps(curved_classifier_model: OnnxModel) -> None:
    result = _scorer(curved_classifier_model, steps=0).score(_near_boundary_points(curved_classifier_model))
    np.testing.assert_array_equal(result.p_adj, result.probability)


def test_scorer_p_adj_of_a_logits_only_model_uses_the_softmax_probability(tmp_path: Path) -> None:
    path = onnx_graphs.linear_classifier(
        tmp_path / "lg.onnx", [[1.0, -0.5, 0.0], [0.3, 0.8, -1.0]], [0.1, 0.0, -0.2], outputs=("logits",)
    )
    model = OnnxModel(path)
    x = np.random.default_rng(8).uniform(-2.0, 2.0, (4, 2))
    logits = model.evaluate(x.astype(np.float32)).logits
    assert logits is not None
    softmax = np.exp(logits - logits.max(axis=1, keepdims=True))
    softmax /= softmax.sum(axis=1, keepdims=True)
    result = _scorer(model, output="logit", steps=0).score(x)
    np.testing.assert_allclose(result.probability, softmax.max(axis=1), rtol=1e-5)


def test_scorer_label_only_model_scores_labels_without_p_adj(tmp_path: Path) -> None:
    path = onnx_graphs.linear_classifier(tmp_path / "l.onnx", [[0.0, 1.0], [0.0, -1.0]], [0.0, 0.2], outputs=("label",))
    result = _scorer(OnnxModel(path), output="label").score(np.array([[0.0, 0.0], [3.0, -3.0]]))
    assert result.gamma[0] > 0 and result.gamma[1] == 0
    assert np.isnan(result.p_adj).all() and np.isnan(result.probability).all()


# -- invalid rows ------------------------------------------------------------------------------------------------
def test_scorer_reports_non_finite_rows_as_invalid_with_nan_scores(curved_classifier_model: OnnxModel) -> None:
    x = np.random.default_rng(6).uniform(-2.0, 2.0, (5, 2))
    x[1, 0], x[3, 1] = np.nan, np.inf
    result = _scorer(curved_classifier_model, flicker_copies=8).score(x)
    np.testing.assert_array_equal(result.valid, [True, False, True, False, True])
    for scores in (result.gamma, result.flicker, result.p_adj, result.gamma_logit, result.probability):
        assert np.isnan(scores[[1, 3]]).all() and not np.isnan(scores[[0, 2, 4]]).any()
    np.testing.assert_array_equal(result.predicted_class[[1, 3]], -1)


def test_scorer_scores_valid_rows_as_if_the_invalid_ones_were_absent(curved_classifier_model: OnnxModel) -> None:
    x = np.random.default_rng(7).uniform(-2.0, 2.0, (5, 2))
    dirty = x.copy()
    dirty[2] = [np.nan, -np.inf]
    scorer = _scorer(curved_classifier_model)
    clean = scorer.score(np.delete(x, 2, axis=0))
    mixed = scorer.score(dirty)
    np.testing.assert_allclose(np.delete(mixed.gamma, 2), clean.gamma, rtol=1e-6)
    np.testing.assert_allclose(np.delete(mixed.p_adj, 2), clean.p_adj, rtol=1e-6)


def test_scorer_reports_rows_beyond_float32_range_as_invalid(curved_classifier_model: OnnxModel) -> None:
    result = _scorer(curved_classifier_model).score(np.array([[1e39, 0.0], [0.1, 0.2]]))
    np.testing.assert_array_equal(result.valid, [False, True])
    assert np.isnan(result.gamma[0]) and result.predicted_class[0] == -1


def test_scorer_judges_float32_rows_at_the_edges_of_their_range(curved_classifier_model: OnnxModel) -> None:
    big = np.finfo(np.float32).max
    x = np.array([[big, big], [-big, big], [0.1, 0.2]], dtype=np.float32)  # finite; their float32 sum would overflow
    scorer = _scorer(curved_classifier_model)
    np.testing.assert_array_equal(scorer.score(x).valid, [True, True, True])
    x[1, 1] = np.inf
    np.testing.assert_array_equal(scorer.score(x).valid, [True, False, True])
    x[0, 0] = -np.inf  # beside +inf: the sum is NaN, not ±inf
    np.testing.assert_array_equal(scorer.score(x).valid, [False, False, True])


@pytest.mark.parametrize("output", ["proba", "logit", "label"])
def test_scorer_gives_nan_scores_without_warnings_where_the_model_outputs_overflow(
    curved_classifier_model: OnnxModel, output: str
) -> None:
    # finite rows at which the quadratic logits overflow float32: inf logits, NaN probabilities
    x = np.array([[1e20, 1e20], [0.1, 0.2], [-1e20, 3e19]], dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's RuntimeWarnings (invalid value, overflow) would raise here
        result = _scorer(curved_classifier_model, output=output, flicker_copies=8).score(x)
        clean = _scorer(curved_classifier_model, output=output, flicker_copies=8).score(x[1:2])
    np.testing.assert_array_equal(result.valid, [True, True, True])
    # NaN probabilities at the event: no class (argmax would name the first NaN's column), so no score read at it
    np.testing.assert_array_equal(result.predicted_class, [-1, clean.predicted_class[0], -1])
    for scores in (result.gamma, result.gamma_logit, result.flicker, result.p_adj, result.probability):
        assert np.isnan(scores[[0, 2]]).all()
    np.testing.assert_allclose(result.gamma[1], clean.gamma[0], rtol=1e-6)
    assert result.flicker[1] == clean.flicker[0]


def test_scorer_skips_the_model_call_when_every_row_is_invalid(linear_classifier_model: OnnxModel) -> None:
    counting = CountingPredictor(linear_classifier_model)
    result = RobustnessScorer(counting, Standardizer.identity(2)).score(np.full((3, 2), np.nan))
    assert counting.calls == [] and not result.valid.any() and len(result) == 3


# -- bad inputs and settings -----------------------------------------------------------------------------------
def test_scorer_rejects_rows_of_the_wrong_width(linear_classifier_model: OnnxModel) -> None:
    with pytest.raises(ModelError, match=r"model expects rows of 2 features; got an array of shape \(4, 3\)"):
        _scorer(linear_classifier_model).score(np.zeros((4, 3)))


def test_scorer_rejects_a_one_dimensional_row(linear_classifier_model: OnnxModel) -> None:
    with pytest.raises(ModelError, match=r"expects rows of 2 features; got an array of shape \(2,\)"):
        _scorer(linear_classifier_model).score(np.zeros(2))


def test_scorer_rejects_a_standardizer_of_another_width(linear_classifier_model: OnnxModel) -> None:
    with pytest.raises(ConfigError, match="reference data has 3 features; the model expects 2"):
        RobustnessScorer(linear_classifier_model, Standardizer.identity(3))


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"radius": 0.0}, "radius must be > 0; got 0.0"),
        ({"radius": float("nan")}, "radius must be > 0; got nan"),
        ({"flicker_copies": -1}, "flicker_copies must be >= 0; got -1"),
        ({"sigma": -0.1}, "sigma must be > 0; got -0.1"),
        ({"steps": -3}, "steps must be >= 0; got -3"),
        ({"regression_tolerance": 0.0}, "regression_tolerance must be > 0; got 0.0"),
        ({"ball": "cube"}, "ball 'cube' is not one of"),
    ],
)
def test_scoring_config_rejects_bad_settings(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ScoringConfig(**settings)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("probs", "output 'probs' is not one of proba, logit, label, value"),
        ("value", "output 'value' needs a regressor; this model is a classifier"),
    ],
)
def test_scorer_rejects_an_output_the_classifier_cannot_give(
    linear_classifier_model: OnnxModel, output: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        _scorer(linear_classifier_model, output=output)


@pytest.mark.parametrize("output", ["proba", "logit", "label"])
def test_scorer_rejects_classifier_outputs_for_a_regressor(norm_regressor_model: OnnxModel, output: str) -> None:
    with pytest.raises(ConfigError, match=f"output '{output}' needs a classifier; this model is a regressor"):
        _scorer(norm_regressor_model, output=output)


def test_scorer_rejects_logit_output_without_a_logit_tensor(tmp_path: Path) -> None:
    path = onnx_graphs.linear_classifier(
        tmp_path / "p.onnx", [[0.0, 1.0], [0.0, -1.0]], [0.0, 0.2], outputs=("probabilities", "label")
    )
    with pytest.raises(ConfigError, match="output 'logit' needs a model output carrying logits"):
        _scorer(OnnxModel(path), output="logit")


def test_scorer_rejects_proba_output_for_a_label_only_model(tmp_path: Path) -> None:
    path = onnx_graphs.linear_classifier(tmp_path / "l.onnx", [[0.0, 1.0], [0.0, -1.0]], [0.0, 0.2], outputs=("label",))
    with pytest.raises(ConfigError, match="output 'proba' needs a probability output; this model exposes labels only"):
        _scorer(OnnxModel(path), output="proba")


def test_scorer_auto_output_falls_back_to_label_for_a_label_only_model(tmp_path: Path) -> None:
    path = onnx_graphs.linear_classifier(tmp_path / "l.onnx", [[0.0, 1.0], [0.0, -1.0]], [0.0, 0.2], outputs=("label",))
    assert _scorer(OnnxModel(path)).output == "label"


# -- the class index the scorer reads (OnnxModel labels) ----------------------------------------------------------
@pytest.mark.parametrize("classes", [1, 2, 3, 5, 8, 9, 12])
def test_model_labels_are_numpys_argmax_including_ties_and_nan(classes: int) -> None:
    rng = np.random.default_rng(classes)
    table = rng.integers(0, 3, size=(4000, classes)).astype(np.float32)  # many tied maxima
    table[::7] = rng.random((len(table[::7]), classes), dtype=np.float32)
    table[5, -1] = np.inf
    table[7, :] = np.inf  # tied infinities: the first wins
    table[8] = -0.0
    table[9, 0] = 0.0
    columnwise = 2 <= classes <= 8
    # no NaN: 2-8 columns take the column comparison (its narrow indices are bool / uint8, numpy's are int64)
    np.testing.assert_array_equal(argmax_rows(table), table.argmax(axis=1))
    assert argmax_rows(table).dtype == np.int64
    narrow = argmax_rows(table, narrow=True)
    np.testing.assert_array_equal(narrow.astype(np.int64), table.argmax(axis=1))
    assert narrow.dtype == (np.bool_ if classes == 2 else np.uint8) if columnwise else narrow.dtype == np.int64
    table[6, 0] = -np.inf  # beside +inf: still the column comparison, the same indices
    np.testing.assert_array_equal(argmax_rows(table), table.argmax(axis=1))
    np.testing.assert_array_equal(argmax_rows(table, narrow=True).astype(np.int64), table.argmax(axis=1))
    table[11, classes // 2] = np.nan  # a NaN counts as the maximum, as in numpy
    table[12] = np.nan
    np.testing.assert_array_equal(argmax_rows(table), table.argmax(axis=1))
    assert argmax_rows(table, narrow=True).dtype == np.int64  # a NaN anywhere: numpy's row-wise argmax
    assert argmax_rows(table[:0]).shape == (0,)
