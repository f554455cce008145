"""The accuracy estimate over time: rows cut into periods, one estimate with its interval per period, the realized
accuracy beside it where labels exist (NannyML's chart: the band over time, the reference line, the realized line).

Periods are cut as ``run`` cuts its windows: by event time at multiples of the span (``floor(t / span)``, the
buckets of ``run``'s time windows), or in consecutive chunks of a count of rows in their order (``run``'s count
window). A period with fewer than :data:`~monitor.accuracy.estimators.SMALL_N` scored rows gets no estimate (NaN,
and a note saying so) rather than a number that is mostly noise. A regressor's periods (:func:`loss_over_time`)
carry its MAE the same way (fewer than :data:`~monitor.accuracy.weighted.MIN_WINDOW_ROWS` rows: none).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.accuracy.estimators import SMALL_N, EstimatorFit, estimate, valid_confidence
from monitor.accuracy.regression import LossFit, estimate_loss
from monitor.accuracy.weighted import MIN_WINDOW_ROWS
from monitor.errors import DataError

#: the columns of :func:`estimate_over_time`'s rows, in order
PERIOD_COLUMNS = ("period", "end", "n", "estimate", "lower", "upper", "method", "realized", "n_labelled", "note")


def cut_periods(
    n: int,
    *,
    timestamps: ArrayLike | None = None,
    period_seconds: float | None = None,
    period_events: int | None = None,
) -> list[tuple[float, float, NDArray[np.int64]]]:
    """(start, end, row indices) per period, in order: by event time when ``period_seconds`` (``timestamps`` in
    seconds needed), else chunks of ``period_events`` rows (start and end: row numbers, end exclusive)."""
    if period_seconds is not None:
        if timestamps is None:
            raise DataError("periods of time need each row's event time; give period_events for rows without one")
        if not (period_seconds > 0 and math.isfinite(period_seconds)):
            raise DataError(f"period_seconds must be a finite number > 0; got {period_seconds!r}")
        t = np.asarray(timestamps, dtype=np.float64).reshape(-1)
        if t.shape[0] != n:
            raise DataError(f"{t.shape[0]} timestamps for {n} rows")
        bucket = np.floor(t / period_seconds).astype(np.int64)
        out = []
        for b in np.unique(bucket):
            out.append((float(b * period_seconds), float((b + 1) * period_seconds), np.flatnonzero(bucket == b)))
        return out
    if period_events is None or period_events < 1:
        raise DataError(f"period_events must be an integer >= 1; got {period_events!r}")
    return [
        (float(s), float(min(n, s + period_events)), np.arange(s, min(n, s + period_events)))
        for s in range(0, n, period_events)
    ]


def estimate_over_time(
    fit: EstimatorFit,
    confidence: ArrayLike,
    gamma: ArrayLike,
    flicker: ArrayLike,
    p_adj: ArrayLike,
    *,
    inputs: ArrayLike | None = None,
    correct: ArrayLike | None = None,
    timestamps: ArrayLike | None = None,
    period_seconds: float | None = None,
    period_events: int | None = None,
    method: str | None = None,
    seed: int = 0,  # not a setting: estimate's, passed through (run estimates without one)
) -> list[dict[str, Any]]:
    """One row per period (:data:`PERIOD_COLUMNS`): the primary method's estimate and 90 % interval, and the
    realized accuracy over the period's labelled rows (``correct``: per row 1.0 / 0.0, NaN where unlabelled; None:
    no labels anywhere)."""
    conf = np.asarray(confidence, dtype=np.float64).reshape(-1)
    cols = [np.asarray(a, dtype=np.float64).reshape(-1) for a in (gamma, flicker, p_adj)]
    x = None if inputs is None else np.asarray(inputs, dtype=np.float64).reshape(conf.shape[0], -1)
    ok = None if correct is None else np.asarray(correct, dtype=np.float64).reshape(-1)
    valid = valid_confidence(conf)
    rows: list[dict[str, Any]] = []
    cuts = cut_periods(conf.shape[0], timestamps=timestamps, period_seconds=period_seconds, period_events=period_events)
    for start, end, idx in cuts:
        labelled = np.zeros(0) if ok is None else ok[idx][np.isfinite(ok[idx]) & valid[idx]]
        row: dict[str, Any] = {
            "period": start,
            "end": end,
            "n": int(np.count_nonzero(valid[idx])),
            "estimate": math.nan,
            "lower": math.nan,
            "upper": math.nan,
            "method": method or "",
            "realized": float(np.mean(labelled)) if labelled.shape[0] else math.nan,
            "n_labelled": int(labelled.shape[0]),
            "note": "",
        }
        if row["n"] < SMALL_N:
            row["note"] = f"{row['n']} scored rows (< {SMALL_N}): too few to estimate; no estimate"
        else:
            doc = estimate(
                fit, conf[idx], *(c[idx] for c in cols), inputs=None if x is None else x[idx], method=method, seed=seed
            )
            acc = doc["accuracy"]
            row.update(estimate=acc["estimate"], lower=acc["lower"], upper=acc["upper"], method=acc["method"])
            row["note"] = "; ".join(doc["warnings"])
        rows.append(row)
    return rows


def loss_over_time(
    fit: LossFit,
    inputs: ArrayLike,
    prediction: ArrayLike,
    *,
    target: ArrayLike | None = None,
    timestamps: ArrayLike | None = None,
    period_seconds: float | None = None,
    period_events: int | None = None,
    method: str | None = None,
) -> list[dict[str, Any]]:
    """A regressor's :func:`estimate_over_time`: one row per period (:data:`PERIOD_COLUMNS`) with the MAE estimate
    and its 90 % interval, and the realized MAE over the period's rows with a finite ``target`` (NaN: none)."""
    x = np.asarray(inputs, dtype=np.float64)
    x = x.reshape(x.shape[0], -1)
    p = np.asarray(prediction, dtype=np.float64).reshape(x.shape[0], -1)[:, 0]
    y = None if target is None else np.asarray(target, dtype=np.float64).reshape(-1)
    rows: list[dict[str, Any]] = []
    for start, end, idx in cut_periods(
        x.shape[0], timestamps=timestamps, period_seconds=period_seconds, period_events=period_events
    ):
        scored = np.isfinite(p[idx])
        err = np.zeros(0) if y is None else (y[idx] - p[idx])[scored & np.isfinite(y[idx])]
        row: dict[str, Any] = {
            "period": start,
            "end": end,
            "n": int(np.count_nonzero(scored)),
            "estimate": math.nan,
            "lower": math.nan,
            "upper": math.nan,
            "method": method or "",
            "realized": float(np.mean(np.abs(err))) if err.shape[0] else math.nan,
            "n_labelled": int(err.shape[0]),
            "note": "",
        }
        if row["n"] < MIN_WINDOW_ROWS:
            row["note"] = f"{row['n']} scored rows (< {MIN_WINDOW_ROWS}): too few to estimate; no estimate"
        else:
            doc = estimate_loss(fit, x[idx], p[idx], method=method or "")
            mae = doc["mae"]
            row.update(estimate=mae["estimate"], lower=mae["lower"], upper=mae["upper"], method=doc["method"])
        rows.append(row)
    return rows
