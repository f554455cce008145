"""Fitting the label-free accuracy estimators (classifiers) and the loss estimator (regressors) on a scored,
labelled reference (``harmonic-monitor reference --labels``, :func:`monitor.reference` with ``labels``, the demo)."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.accuracy.calibration import CalibrationKind
from monitor.accuracy.estimators import EstimatorFit, fit_estimators, valid_confidence
from monitor.accuracy.regression import LossFit, fit_loss
from monitor.accuracy.segments import segment_accuracy, segment_error
from monitor.config import ScoringSettings, setting_default
from monitor.errors import DataError

if TYPE_CHECKING:
    from monitor.model.onnx import OnnxModel
    from monitor.model.signature import Held
    from monitor.signals.scorer import ScoreResult

log = logging.getLogger(__name__)


def labelled_loss_fit(
    model: OnnxModel,
    rows: NDArray[np.float64],
    held: Held | None,
    target: NDArray[np.float64],
    *,
    seed: int = setting_default(ScoringSettings, "seed"),
    segments: ArrayLike | None = None,
) -> LossFit:
    """A regressor's loss estimator (:mod:`monitor.accuracy.regression`) fitted on reference rows and their true
    values (``target``: NaN where a row has none; those rows are left out); ``segments``: each row's segment, for
    each segment's own reference error (:mod:`monitor.accuracy.segments`).

    Raises
    ------
    DataError
        A model of several regression outputs, or too few rows with a finite target.
    """
    out = model.evaluate(np.nan_to_num(rows).astype(np.float32), held)
    if out.value is None:
        raise DataError("the model gives no regression value; true values are for regressors")
    value = np.asarray(out.value, dtype=np.float64).reshape(rows.shape[0], -1)
    if value.shape[1] != 1:
        raise DataError(
            f"'{model.path}' gives {value.shape[1]} regression outputs per row; the label-free error estimate takes "
            "a single-output regressor (export one model per output, and give each its own labelled reference)"
        )
    fit = fit_loss(rows, value[:, 0], target, seed=seed)
    if segments is None:
        return fit
    return replace(fit, segments=segment_error(np.asarray(target, dtype=np.float64) - value[:, 0], segments))


def labelled_fit(
    model: OnnxModel,
    rows: NDArray[np.float64],
    held: Held | None,
    result: ScoreResult,
    labels: NDArray[np.int64],
    *,
    seed: int = setting_default(ScoringSettings, "seed"),
    calibration: CalibrationKind = "temperature",
    compare: str = "values",
    segments: ArrayLike | None = None,
) -> EstimatorFit:
    """The accuracy estimators fitted on scored, labelled reference rows (cross-fitted: ``fit_estimators``).

    A row is correct when its label equals what the label join of ``run`` compares a delayed label with
    (:class:`monitor.runtime.labels.LabelStage`): the model's own class value when its label output is an integer,
    else the predicted class index; ``compare="indices"``: always the predicted class index (labels given as class
    indices 0..C−1, as ``estimate --reference-labels`` takes them). Labels the model never predicts on these rows are logged as a warning (class
    indices given for a model whose class values differ, say). ``segments``: each row's segment, for each segment's
    own reference accuracy (:mod:`monitor.accuracy.segments`).
    """
    if compare not in ("values", "indices"):
        raise DataError(f"compare must be 'values' or 'indices'; got {compare!r}")
    out = model.evaluate(np.nan_to_num(rows).astype(np.float32), held)
    raw = out.raw_label
    values = raw if compare == "values" and raw is not None and raw.dtype.kind in "iu" else out.label
    if values is None:
        raise DataError("the model gives no predicted class; labels are for classifiers")
    predicted = np.asarray(values).astype(np.int64).reshape(-1)
    unseen = sorted(set(np.unique(labels).tolist()) - set(np.unique(predicted).tolist()))
    if unseen:
        shown = ", ".join(str(v) for v in unseen[:10])
        log.warning(
            "label value(s) %s are never predicted on the reference rows; the model predicts %s. Labels must be the "
            "class values its label output gives (class indices for a model without an integer label output)",
            shown,
            ", ".join(str(v) for v in np.unique(predicted)[:10].tolist()),
        )
    correct = result.valid & (predicted == labels)
    fit = fit_estimators(
        np.where(result.valid, result.probability, np.nan),
        result.gamma,
        result.flicker,
        result.p_adj,
        correct,
        seed=seed,
        calibration=calibration,
        inputs=rows,
    )
    if segments is None:
        return fit
    return replace(fit, segments=segment_accuracy(correct, valid_confidence(result.probability), segments))
