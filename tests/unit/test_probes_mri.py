"""MRI vectors, sensitivity matrices and output consistency on tiny real ONNX models."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from monitor.errors import ProbeError
from monitor.model.standardize import Standardizer
from monitor.probes.consistency import output_consistency
from monitor.probes.mri import mri_vector, open_session, scan_mri
from monitor.probes.perturbations import PERTURBATION_NAMES, FeatureShift, GaussianNoise, Quantize
from monitor.probes.sensitivity import sensitivity, sensitivity_matrix
from tests.unit.test_probes_models import binary_linear, linear_regressor


def _points(b: int, n: int, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(b, n)) * scale


def test_mri_is_a_vector_with_one_entry_per_perturbation_type(tmp_path: Path) -> None:
    model = binary_linear(tmp_path / "m.onnx", [2.0, -1.0, 0.0], 0.1)
    x = _points(60, 3, scale=0.3)
    vector = mri_vector(model, Standardizer.fit(x), x, eps=0.2)
    assert list(vector) == list(PERTURBATION_NAMES)
    assert all(0.0 <= r <= 1.0 for r in vector.values())
    assert min(vector.values()) < 1.0  # something flips at ε = 0.2 near the boundary


def test_mri_of_a_feature_the_model_ignores_is_one(tmp_path: Path) -> None:
    model = binary_linear(tmp_path / "m.onnx", [2.0, -1.0, 0.0], 0.1)
    x = _points(60, 3, scale=0.3)
    session, targets = open_session(model, Standardizer.identity(3), x, perturbations=["shift"])
    result = scan_mri(session, targets, 0.2)
    assert result.shift_by_feature is not None
    assert result.shift_by_feature[2] == 1.0 and result.shift_by_feature[0] < 1.0
    assert result.vector["shift"] == pytest.approx(float(np.mean(result.shift_by_feature)))
    assert result.rows == 3 * 2 * 60  # two signs per feature, B rows each


def test_mri_of_a_regressor_is_one_minus_relative_displacement(tmp_path: Path) -> None:
    model = linear_regressor(tmp_path / "r.onnx", [[2.0], [0.0]], [1.0])
    x = _points(10, 2)
    session, targets = open_session(
        model, Standardizer.identity(2), x, perturbations=["shift"], output_scale=np.array([1.0])
    )
    result = scan_mri(session, targets, 0.1)
    assert result.by_target["shift[0]"] == pytest.approx(1.0 - 2.0 * 0.1, abs=1e-6)
    assert result.by_target["shift[1]"] == 1.0
    assert result.vector["shift"] == pytest.approx(0.9, abs=1e-6)


def test_regressor_output_scale_defaults_to_the_std_of_the_outputs(tmp_path: Path) -> None:
    model = linear_regressor(tmp_path / "r.onnx", [[2.0], [0.0]], [0.0])
    x = _points(50, 2)
    session, _ = open_session(model, Standardizer.identity(2), x, perturbations=["noise"])
    assert session.output_scale[0] == pytest.approx(float(np.std(2.0 * x[:, 0])), rel=1e-5)


def test_sensitivity_matrix_matches_the_linear_closed_form(tmp_path: Path) -> None:
    model = linear_regressor(tmp_path / "r.onnx", [[2.0, 0.0], [0.0, -1.0]], [0.0, 0.0])
    result = sensitivity(model, Standardizer.identity(2), _points(4000, 2), eps=0.1, perturbations=["noise", "shift"])
    assert result.columns == ("noise", "shift[0]", "shift[1]")
    np.testing.assert_allclose(result.column("shift[0]"), [0.2, 0.0], atol=1e-6)
    np.testing.assert_allclose(result.column("shift[1]"), [0.0, 0.1], atol=1e-6)
    mean_abs_normal = math.sqrt(2.0 / math.pi)  # E|z| for z ~ N(0, 1)
    np.testing.assert_allclose(result.column("noise"), [0.2 * mean_abs_normal, 0.1 * mean_abs_normal], rtol=0.05)
    names, by_type = result.by_type()
    assert names == ("noise", "shift")
    np.testing.assert_allclose(by_type[:, 1], [0.1, 0.05], atol=1e-6)


def test_sensitivity_of_a_binary_classifier_moves_both_probabilities_equally(tmp_path: Path) -> None:
    model = binary_linear(tmp_path / "m.onnx", [2.0, -1.0], 0.0)
    result = sensitivity(model, Standardizer.identity(2), _points(30, 2), eps=0.1, perturbations=["quantize"])
    assert result.matrix.shape == (2, 1)
    assert result.matrix[0, 0] == pytest.approx(result.matrix[1, 0], abs=1e-6) and result.matrix[0, 0] > 0


def test_sensitivity_draws_cost_rows_only_for_stochastic_perturbations(tmp_path: Path) -> None:
    model = binary_linear(tmp_path / "m.onnx", [2.0, -1.0], 0.0)
    session, targets = open_session(
        model, Standardizer.identity(2), _points(20, 2), perturbations=["noise", "quantize"]
    )
    scan_mri(session, targets, 0.1)
    result = sensitivity_matrix(session, targets, 0.1, draws=3)
    assert result.rows == 2 * 20  # two extra noise draws; draw 0 and quantize come from the MRI's rows


def test_sensitivity_rejects_zero_draws(tmp_path: Path) -> None:
    model = binary_linear(tmp_path / "m.onnx", [2.0, -1.0], 0.0)
    session, targets = open_session(model, Standardizer.identity(2), _points(5, 2), perturbations=["noise"])
    with pytest.raises(ProbeError, match="draws must be >= 1; got 0"):
        sensitivity_matrix(session, targets, 0.1, draws=0)


# -- output consistency ---------------------------------------------------------------------------------------
CONFIGS = (GaussianNoise(), FeatureShift(), Quantize())


def test_consistency_baseline_is_agreement_to_the_number_of_configurations(tmp_path: Path) -> None:
    model = binary_linear(tmp_path / "m.onnx", [2.0, -1.0], 0.0)
    session, _ = open_session(model, Standardizer.identity(2), _points(80, 2, scale=0.2), perturbations=["noise"])
    result = output_consistency(session, CONFIGS, 0.2)
    assert result.configurations == ("clean", "noise", "shift[random]", "quantize")
    assert 0.0 < result.agreement < 1.0
    assert result.baseline == pytest.approx(result.agreement**4)
    # c(x) = 1 only when all four configurations agree, so OC cannot exceed any configuration's agreement
    assert result.output_consistency <= result.agreement + 1e-12
    assert result.score_std.shape == (80,) and result.accuracy is None and result.pdr is None


def test_consistency_of_a_model_that_ignores_its_inputs_is_perfect(tmp_path: Path) -> None:
    model = binary_linear(tmp_path / "m.onnx", [0.0, 0.0], 0.5)
    session, _ = open_session(model, Standardizer.identity(2), _points(20, 2), perturbations=["noise"])
    result = output_consistency(session, CONFIGS, 0.5)
    assert (result.output_consistency, result.agreement, result.baseline) == (1.0, 1.0, 1.0)
    assert result.mean_score_std == pytest.approx(0.0, abs=1e-7)


def test_consistency_with_labels_reports_accuracy_and_drop_rate(tmp_path: Path) -> None:
    model = binary_linear(tmp_path / "m.onnx", [2.0, -1.0], 0.0)
    x = _points(60, 2, scale=0.2)
    session, _ = open_session(model, Standardizer.identity(2), x, perturbations=["noise"])
    assert session.clean.label is not None
    labels = session.clean.label.copy()  # the clean predictions are all correct
    result = output_consistency(session, CONFIGS, 0.2, labels=labels)
    assert result.accuracy == 1.0 and result.baseline == 1.0
    assert result.pdr == pytest.approx(1.0 - result.agreement)  # acc_v = agreement of v when labels = clean
    flipped = 1 - labels
    worse = output_consistency(session, CONFIGS, 0.2, labels=flipped)
    assert worse.accuracy == 0.0 and worse.pdr is None and worse.baseline == 0.0


def test_consistency_rejects_labels_of_the_wrong_length(tmp_path: Path) -> None:
    model = binary_linear(tmp_path / "m.onnx", [2.0, -1.0], 0.0)
    session, _ = open_session(model, Standardizer.identity(2), _points(5, 2), perturbations=["noise"])
    with pytest.raises(ProbeError, match=r"one class index per point \(5\); got 3"):
        output_consistency(session, CONFIGS, 0.1, labels=np.array([0, 1, 0]))
    with pytest.raises(ProbeError, match="class indices in 0..1; got values 0..7"):
        output_consistency(session, CONFIGS, 0.1, labels=np.array([0, 1, 0, 7, 1]))


def test_consistency_of_a_regressor_uses_the_tolerance(tmp_path: Path) -> None:
    model = linear_regressor(tmp_path / "r.onnx", [[1.0], [0.0]], [0.0])
    session, _ = open_session(
        model, Standardizer.identity(2), _points(10, 2), perturbations=["noise"], output_scale=np.array([1.0])
    )
    shift0 = (FeatureShift(feature=0),)
    assert output_consistency(session, shift0, 0.05, tolerance=0.1).output_consistency == 1.0
    assert output_consistency(session, shift0, 0.2, tolerance=0.1).output_consistency == 0.0
