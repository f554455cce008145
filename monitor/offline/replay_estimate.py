"""The label-free estimate per period of a replay (``replay``'s ``accuracy`` rows, :meth:`ReplayTimeline.over_time`).

A model whose reference was built with labels (``reference --labels``) gets, beside its verdict timeline, the
estimate :meth:`~monitor.offline.results.AccuracyEstimate.over_time` gives offline, over the events the pipeline
scored: a classifier's accuracy (:func:`~monitor.accuracy.periods.estimate_over_time`, the primary method of
``accuracy.method``), a regressor's MAE (:func:`~monitor.accuracy.periods.loss_over_time`), each with its 90 %
interval, per period of event time or of a count of scored events; where labels are given (one per event: per
non-blank line of the log, in order; NaN: none), the realized accuracy (a regressor's MAE) of the period's labelled
events beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from monitor.errors import DataError

if TYPE_CHECKING:
    from monitor.runtime.models import ModelRuntime
    from monitor.runtime.stage_results import ScoredBatch


@dataclass
class _Kept:
    """One model's scored events, in the order scored."""

    rt: ModelRuntime
    lines: list[NDArray[np.int64]] = field(default_factory=list)
    times: list[NDArray[np.float64]] = field(default_factory=list)
    rows: list[NDArray[np.float64]] = field(default_factory=list)
    held: list[Any] = field(default_factory=list)
    results: list[Any] = field(default_factory=list)


class PeriodEstimates:
    """A scored-batch hook that keeps what the per-period estimate reads, for the models with a labelled reference;
    :meth:`rows` estimates once the replay is over."""

    def __init__(self, runtimes: list[ModelRuntime]) -> None:
        self.kept = {rt.name: _Kept(rt) for rt in runtimes if rt.accuracy_fit is not None}

    def __bool__(self) -> bool:
        return bool(self.kept)

    def observe(self, batch: ScoredBatch) -> None:
        kept = self.kept.get(batch.model)
        if kept is None:
            return
        kept.lines.append(np.array([-1 if ev.origin is None else ev.origin[2] for ev in batch.events], dtype=np.int64))
        kept.times.append(np.array([ev.timestamp_seconds for ev in batch.events], dtype=np.float64))
        kept.rows.append(batch.rows)
        kept.held.append(batch.held)
        kept.results.append(batch.result)

    def rows(
        self,
        labels: NDArray[Any] | None,
        *,
        method: str,
        period_seconds: float | None,
        period_events: int | None,
    ) -> list[dict[str, Any]]:
        """Per model, one row per period (``model``, ``metric``: ``accuracy`` or ``mae``, then
        :data:`~monitor.accuracy.periods.PERIOD_COLUMNS`); ``labels``: one per event of the log (NaN: none)."""
        out: list[dict[str, Any]] = []
        for name, kept in self.kept.items():
            if not kept.rows:
                continue
            out.extend(
                {"model": name, **row}
                for row in _model_rows(
                    kept, labels, method=method, period_seconds=period_seconds, period_events=period_events
                )
            )
        return out


def _model_rows(
    kept: _Kept,
    labels: NDArray[Any] | None,
    *,
    method: str,
    period_seconds: float | None,
    period_events: int | None,
) -> list[dict[str, Any]]:
    from monitor.accuracy import EstimatorFit
    from monitor.accuracy.periods import estimate_over_time, loss_over_time
    from monitor.accuracy.regression import METHODS as LOSS_METHODS
    from monitor.model.signature import Held

    lines = np.concatenate(kept.lines)
    times = np.concatenate(kept.times)
    x = np.concatenate(kept.rows)
    held = None if kept.held[0] is None else Held.concat(kept.held)
    truth = _labels_at(labels, lines)
    fit = kept.rt.accuracy_fit
    out = kept.rt.model.evaluate(np.nan_to_num(x).astype(np.float32), held)
    cuts = {"timestamps": times, "period_seconds": period_seconds, "period_events": period_events}
    if not isinstance(fit, EstimatorFit):
        assert fit is not None and out.value is not None
        value = np.asarray(out.value, dtype=np.float64).reshape(x.shape[0], -1)
        pick = method if method in LOSS_METHODS else None
        rows = loss_over_time(fit, x, value, target=truth, method=pick, **cuts)  # type: ignore[arg-type]
        return [{"metric": "mae", **r} for r in rows]
    res = kept.results
    valid = np.concatenate([r.valid for r in res])
    conf = np.where(valid, np.concatenate([r.probability for r in res]), np.nan)
    scores = [np.concatenate([getattr(r, f) for r in res]) for f in ("gamma", "flicker", "p_adj")]
    correct = None
    if truth is not None:
        raw = out.raw_label
        predicted = raw if raw is not None and raw.dtype.kind in "iu" else out.label
        if predicted is None:
            raise DataError("the model gives no predicted class; labels are for classifiers")
        ok = valid & np.isfinite(truth)
        correct = np.full(x.shape[0], np.nan)
        correct[ok] = np.asarray(predicted).reshape(-1)[ok].astype(np.int64) == truth[ok].astype(np.int64)
    rows = estimate_over_time(
        fit,
        conf,
        *scores,
        inputs=x,
        correct=correct,
        method=method,
        **cuts,  # type: ignore[arg-type]
    )
    return [{"metric": "accuracy", **r} for r in rows]


def _labels_at(labels: NDArray[Any] | None, lines: NDArray[np.int64]) -> NDArray[np.float64] | None:
    """Each scored event's label (by its position among the log's events; NaN: none)."""
    if labels is None:
        return None
    y = np.asarray(labels, dtype=np.float64).reshape(-1)
    out = np.full(lines.shape[0], math.nan)
    inside = (lines >= 0) & (lines < y.shape[0])
    out[inside] = y[lines[inside]]
    return out
