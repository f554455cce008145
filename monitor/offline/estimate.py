""":func:`estimate` (``harmonic-monitor estimate``): the label-free accuracy of a classifier on unlabelled rows, from
the estimators a reference holds, and the realized accuracy where labels are given."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

import numpy as np
from numpy.typing import NDArray

from monitor.config import WindowSettings, setting_default
from monitor.errors import DataError
from monitor.offline.baseline import load_baseline
from monitor.offline.frames import is_frame
from monitor.offline.keywords import (
    SEED,
    ScoreKeywords,
    ScoringKeywords,
    StandardizeKeywords,
    scoring_config,
    split_keywords,
)
from monitor.offline.results import AccuracyEstimate, LossEstimate
from monitor.offline.rows import (
    MODEL_KIND,
    DataLike,
    ModelLike,
    Rows,
    int_labels,
    load_model,
    read_rows,
    true_values,
)
from monitor.offline.scoring import robustness_scorer, score_rows

#: the periods when none are named: ``run``'s count window
COUNT_WINDOW: int = setting_default(WindowSettings, "count_window_events")

if TYPE_CHECKING:
    from monitor.accuracy import EstimatorFit
    from monitor.model.onnx import OnnxModel
    from monitor.offline.baseline import Baseline
    from monitor.signals.scorer import ScoreResult


def estimate(
    model: ModelLike,
    data: DataLike,
    reference: Any,
    *,
    labels: Any = None,
    method: str | None = None,
    model_kind: str = MODEL_KIND,
    max_events: int | None = None,
    header: str = "auto",
    period_seconds: float | None = None,
    period_events: int | None = None,
    segment_column: str | None = None,
    **options: Unpack[ScoreKeywords],
) -> AccuracyEstimate | LossEstimate:
    """The model's accuracy on unlabelled ``data`` (a regressor: its MAE and RMSE, :class:`LossEstimate`), with a
    90 % interval, from the estimators the reference holds
    (a reference JSON written with labels, or :func:`reference` called with ``labels``); ``labels`` here (an array or
    a DataFrame column name; NaN where a row has none) adds the realized accuracy beside the estimate. The scoring
    options are :func:`score`'s (``harmonic-monitor estimate``'s flags; ``seed`` also seeds the estimators'
    intervals and the domain classifier's folds).

    Over time (:meth:`AccuracyEstimate.over_time`): periods of ``period_seconds`` of event time (a ``.jsonl`` event
    log), else of ``period_events`` rows (default: ``windows.count_window_events``), cut as ``run`` cuts its windows.

    Per segment (:meth:`AccuracyEstimate.by_segment`), where the rows carry theirs (an event log's ``segment``, or
    ``segment_column``: a DataFrame's or a CSV's column): each segment's estimate beside its own reference
    accuracy (MAE) where the labelled reference carries the segment, else the model-wide one.

    Raises
    ------
    DataError
        A reference without fitted estimators (the message says how to build one).
    """
    scoring, standardize = split_keywords("estimate", options, ScoringKeywords, StandardizeKeywords)
    m = load_model(model, model_kind=model_kind)
    base = load_baseline(reference, m, None, header=header, **standardize)
    if m.kind == "regressor":
        return _regressor(m, data, base, labels, method, header, max_events, segment_column)
    if base.fit is None:
        raise DataError(
            "the reference holds no fitted accuracy estimator; build it with labels: "
            "monitor.reference(model, rows, labels=y) or `harmonic-monitor reference --labels`"
        )
    label_column = labels if isinstance(labels, str) and is_frame(data) else None
    rows, segments = _segmented_rows(data, m, base, header, label_column, max_events, segment_column)
    scorer = robustness_scorer(m, base, scoring_config(scoring, base.scales))
    res = score_rows(scorer, rows.x, rows.held)
    y = rows.labels if label_column is not None else (None if labels is None else np.asarray(labels).reshape(-1))
    return accuracy_from_scores(
        base.fit,
        res,
        m,
        rows,
        y,
        method=method,
        seed=scoring.get("seed", SEED),
        period_seconds=period_seconds,
        period_events=period_events,
        segments=segments,
    )


def _segmented_rows(
    data: DataLike,
    model: OnnxModel,
    base: Baseline,
    header: str,
    label_column: str | None,
    max_events: int | None,
    segment_column: str | None,
) -> tuple[Rows, NDArray[np.str_] | None]:
    """The rows and each row's segment: ``segment_column``'s (a DataFrame's, a CSV's), an event log's named
    segments, else None."""
    from monitor.offline.reference import csv_segments, frame_segments

    read: dict[str, Any] = {"header": header, "feature_names": base.feature_names, "label_column": label_column}
    if segment_column is None or is_frame(data):
        rows = read_rows(data, model, max_events=max_events, **read)
        if segment_column is not None:
            seg = frame_segments(data, segment_column)
            return rows, seg[: len(rows)]
        named = rows.segments is not None and set(rows.segments) != {"other"}
        return rows, np.asarray(rows.segments, dtype=str) if named else None
    if not isinstance(data, (str, os.PathLike)):
        raise DataError(
            f"segment_column '{segment_column}' names a column of a DataFrame or of a CSV with a header; the data is "
            f"{type(data).__name__}: pass a DataFrame or a CSV path"
        )
    rows, seg = csv_segments(Path(data), model, segment_column, header)
    if max_events is not None:
        rows, seg = rows.take(np.arange(min(max_events, len(rows)))), seg[:max_events]
    return rows, seg


def _regressor(
    model: OnnxModel,
    data: DataLike,
    base: Baseline,
    labels: Any,
    method: str | None,
    header: str,
    max_events: int | None,
    segment_column: str | None = None,
) -> LossEstimate:
    """A regressor's MAE and RMSE on ``data`` from the reference's loss estimator (and realized, given labels)."""
    from monitor.accuracy.regression import DEFAULT_METHOD, METHODS, estimate_loss

    if base.loss_fit is None:
        raise DataError(
            "the reference holds no fitted loss estimator; build it with the true values: "
            "monitor.reference(model, rows, labels=y) or `harmonic-monitor reference --labels`"
        )
    pick = DEFAULT_METHOD if method in (None, "", "auto") else str(method)
    if pick not in METHODS:
        raise DataError(f"method {pick!r} is not a regressor's; expected one of {', '.join(METHODS)} (or auto)")
    label_column = labels if isinstance(labels, str) and is_frame(data) else None
    rows, segments = _segmented_rows(data, model, base, header, label_column, max_events, segment_column)
    out = model.evaluate(np.nan_to_num(rows.x).astype(np.float32), rows.held)
    value = np.full(len(rows), np.nan) if out.value is None else np.asarray(out.value, dtype=np.float64)
    value = value.reshape(len(rows), -1)
    doc = estimate_loss(base.loss_fit, rows.x, value, method=pick)
    realized: dict[str, float | None] = {"mae": None, "rmse": None}
    n_labelled = 0
    y = rows.labels if label_column is not None else (None if labels is None else true_values(np.asarray(labels)))
    if y is not None:
        y = true_values(y)
        if y.shape[0] != len(rows):
            raise DataError(f"labels: {y.shape[0]} values for {len(rows)} rows; give one true value per row")
        err = (y - value[:, 0])[np.isfinite(y) & np.isfinite(value[:, 0])]
        n_labelled = int(err.size)
        if n_labelled:
            realized = {"mae": float(np.mean(np.abs(err))), "rmse": float(np.sqrt(np.mean(err**2)))}
            doc = {**doc, "realized": {**realized, "n": n_labelled}}
    if segments is not None:
        from monitor.accuracy.by_segment import loss_by_segment

        by = loss_by_segment(base.loss_fit, rows.x, value[:, 0], segments, target=y, method=pick)
        doc = {**doc, "segments": by}
    return LossEstimate(
        doc["mae"],
        doc["rmse"],
        str(doc["method"]),
        float(doc["level"]),
        int(doc["n"]),
        float(doc["reference"]["mae"]),
        float(doc["reference"]["rmse"]),
        doc["methods"],
        tuple(doc["warnings"]),
        realized["mae"],
        realized["rmse"],
        n_labelled,
        doc,
        tuple(doc["caveats"]),
        doc.get("segments", {}),
    )


def accuracy_from_scores(
    fit: EstimatorFit,
    res: ScoreResult,
    model: OnnxModel,
    rows: Rows,
    labels: NDArray[Any] | None,
    *,
    method: str | None = None,
    seed: int = SEED,
    period_seconds: float | None = None,
    period_events: int | None = None,
    segments: NDArray[np.str_] | None = None,
) -> AccuracyEstimate:
    """The estimate over scored rows (and the realized accuracy where ``labels``, one per row, are given; NaN:
    that row has none), whole, per period and per segment (``segments``: each row's; see :func:`estimate`)."""
    from monitor.accuracy import estimate as run_estimate
    from monitor.accuracy import labels_disagree
    from monitor.accuracy.periods import estimate_over_time

    conf = np.where(res.valid, res.probability, np.nan)
    doc = run_estimate(fit, conf, res.gamma, res.flicker, res.p_adj, method=method, seed=seed, inputs=rows.x)
    realized, n_labelled = None, 0
    correct: NDArray[np.float64] | None = None
    if labels is not None:
        if labels.shape[0] != len(rows):
            raise DataError(f"labels: {labels.shape[0]} values for {len(rows)} rows; give one class per row")
        predicted = predicted_values(model, rows)
        ok = res.valid & ~missing(labels)
        n_labelled = int(ok.sum())
        correct = np.full(len(rows), np.nan)
        correct[ok] = predicted[ok] == int_labels(labels[ok])
        realized = float(np.mean(correct[ok])) if n_labelled else None
    if period_seconds is None and period_events is None:
        period_events = COUNT_WINDOW
    periods = estimate_over_time(
        fit,
        conf,
        res.gamma,
        res.flicker,
        res.p_adj,
        inputs=rows.x,
        correct=correct,
        timestamps=rows.timestamps,
        period_seconds=period_seconds,
        period_events=period_events,
        method=doc["accuracy"]["method"],
        seed=seed,
    )
    if segments is not None:
        from monitor.accuracy.by_segment import accuracy_by_segment

        scores = (conf, res.gamma, res.flicker, res.p_adj)
        by = accuracy_by_segment(
            fit, scores, segments, inputs=rows.x, correct=correct, method=doc["accuracy"]["method"], seed=seed
        )
        doc = {**doc, "segments": by}
    acc = doc["accuracy"]
    return AccuracyEstimate(
        float(acc["estimate"]),
        float(acc["lower"]),
        float(acc["upper"]),
        str(acc["method"]),
        float(doc["level"]),
        int(doc["n"]),
        float(doc["reference_accuracy"]),
        {k: {kk: float(vv) for kk, vv in v.items() if isinstance(vv, (int, float))} for k, v in doc["methods"].items()},
        tuple(doc["warnings"]),
        realized,
        n_labelled,
        doc,
        fit,
        tuple(labels_disagree(doc, realized)),
        tuple(periods),
        doc.get("segments", {}),
    )


def missing(values: NDArray[Any]) -> NDArray[np.bool_]:
    """Per value, whether it is missing (NaN, None): a row without a label."""
    v = np.asarray(values)
    if v.dtype.kind == "f":
        nan: NDArray[np.bool_] = np.isnan(v)
        return nan
    if v.dtype.kind == "O":
        return np.array([x is None or (isinstance(x, float) and math.isnan(x)) for x in v], dtype=np.bool_)
    return np.zeros(v.shape[0], dtype=np.bool_)


def predicted_values(model: OnnxModel, rows: Rows) -> NDArray[np.int64]:
    """What a label is compared with: the model's own class value when its label output is an integer, else the
    predicted class index (as ``run``'s label join compares)."""
    out = model.evaluate(np.nan_to_num(rows.x).astype(np.float32), rows.held)
    raw = out.raw_label
    values = raw if raw is not None and raw.dtype.kind in "iu" else out.label
    if values is None:
        raise DataError("the model gives no predicted class; labels are for classifiers")
    return np.asarray(values).astype(np.int64).reshape(-1)
