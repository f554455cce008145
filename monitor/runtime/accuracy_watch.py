"""A model's label-free accuracy estimate per segment and window, for its watch.

:class:`AccuracyEstimates` keeps the per-event scores (confidence, γ, flicker, P_adj) of the events that entered the
windows, estimates each window's accuracy with a labelled reference's estimators (``reference --labels``) at most
every ``accuracy_interval_seconds``, and says whether HarmonicAccuracyDrop's condition holds. It writes no metric:
the watch publishes what it returns.

A regressor's labelled reference holds a loss estimator instead (:class:`~monitor.accuracy.regression.LossFit`):
the samples then keep each event's inputs and output, each window of at least
:data:`~monitor.accuracy.weighted.MIN_WINDOW_ROWS` rows gets its MAE and RMSE by every method
(:func:`~monitor.accuracy.regression.estimate_loss`; the time windows' uniform sample per bucket read unweighted),
and HarmonicErrorRise's condition is the primary method's 90 % lower bound of the MAE over the count window above
the reference MAE × (1 + ``error_tolerance``).

Each segment compares with its own reference performance where the labelled reference carries the segment
(:mod:`monitor.accuracy.segments`; each estimate's ``segment_reference`` says which it read), else with the
model-wide one.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from monitor.accuracy import SMALL_N, EstimatorFit, estimate
from monitor.accuracy.regression import DEFAULT_METHOD as LOSS_DEFAULT
from monitor.accuracy.regression import METHODS as LOSS_METHODS
from monitor.accuracy.regression import LossFit, boosted, estimate_loss
from monitor.accuracy.weighted import MIN_WINDOW_ROWS
from monitor.alert_types import Evidence
from monitor.errors import DataError
from monitor.rolling.scores import FIELDS, ScoreRows, ScoreSamples
from monitor.rolling.windows import OTHER, SignalBatch

if TYPE_CHECKING:
    from monitor.runtime.watch import WatchConfig


class AccuracyEstimates:
    """The estimators of a labelled reference (``fit``), their score samples and the last estimates."""

    def __init__(self, config: WatchConfig, buckets: Any) -> None:
        self.config = config
        self.buckets = buckets
        self.fit: EstimatorFit | None = None
        self.loss_fit: LossFit | None = None
        self.samples: ScoreSamples | None = None
        self.estimated_at = -math.inf
        #: segment → window → :func:`monitor.accuracy.estimate`'s result, from the last estimate
        self.last: dict[str, dict[str, dict[str, Any]]] = {}

    def set_fit(self, fit: EstimatorFit | LossFit | None) -> None:
        """Estimate with ``fit`` from now on (a regressor's: a :class:`LossFit`); None: stop."""
        self.fit = fit if isinstance(fit, EstimatorFit) else None
        self.loss_fit = fit if isinstance(fit, LossFit) else None
        self.last.clear()
        self.estimated_at = -math.inf
        self.samples = None
        if self.loss_fit is not None:
            boosted(self.loss_fit)  # gbdt's models, fitted now rather than at the first window's estimate
        if fit is not None:
            self.samples = ScoreSamples(
                window_seconds=self.config.window_seconds,
                count_size=self.config.count_window_events,
                capacity=self.config.accuracy_sample_events,
                buckets=self.buckets,
                width=len(FIELDS) if self.loss_fit is None else self.loss_fit.center.shape[0] + 1,
            )

    def keep(
        self,
        keys: set[str],
        drift: SignalBatch,
        confidence: NDArray[np.float64],
        value: NDArray[np.float64] | None = None,
    ) -> None:
        """Add the events that entered the windows to the score samples, under the windows' (folded) segments
        ``keys``; ``value``: a regressor's output per event (kept with its inputs when estimating its error)."""
        if self.samples is None:
            return
        if self.loss_fit is not None:
            if value is None:
                return
            values = np.column_stack([drift.features, value])
        else:
            values = np.column_stack([confidence, drift.gamma, drift.flicker, drift.p_adj])
        segs = np.array([s if s in keys else OTHER for s in drift.segments.tolist()])
        for seg in np.unique(segs).tolist():
            sel = segs == seg
            self.samples.update(str(seg), drift.timestamps_seconds[sel], values[sel])

    def due(self, now: float) -> bool:
        """Whether an estimate is due at ``now`` (then it counts as made)."""
        if self.samples is None or now - self.estimated_at < self.config.accuracy_interval_seconds:
            return False
        self.estimated_at = now
        return True

    def estimate(self, segment: str, windows_end: float) -> dict[str, dict[str, Any]]:
        """Every window's accuracy of ``segment`` by every method: ``{window: estimate's result}`` (a regressor's:
        :func:`~monitor.accuracy.regression.estimate_loss`'s)."""
        assert self.samples is not None
        out: dict[str, dict[str, Any]] = {}
        for wname, rows in self.samples.rows(segment, windows_end).items():
            if rows.n < (SMALL_N if self.loss_fit is None else MIN_WINDOW_ROWS):
                continue  # too few to estimate: no number rather than noise
            try:
                if self.loss_fit is not None:
                    method = self.config.accuracy_method
                    out[wname] = estimate_loss(
                        self.loss_fit,
                        rows.values[:, :-1],
                        rows.values[:, -1],
                        method=method if method in LOSS_METHODS else LOSS_DEFAULT,
                    )
                else:
                    assert self.fit is not None
                    out[wname] = _estimate_rows(self.fit, rows, self.config.accuracy_method)
            except DataError:  # no row with a confidence (an output) in this window
                continue
            out[wname]["segment_reference"] = self.reference(segment)
        self.last[segment] = out
        return out

    def reference(self, segment: str) -> dict[str, Any]:
        """What ``segment``'s estimates compare with: ``{"accuracy"}`` (a regressor's ``{"mae", "rmse"}``), ``"n"``
        and ``"own"``: the segment's own reference value, or (False) the model-wide one."""
        if self.loss_fit is not None:
            mae, rmse, n, own = self.loss_fit.reference_of(segment)
            return {"mae": mae, "rmse": rmse, "n": n, "own": own}
        assert self.fit is not None
        accuracy, n, own = self.fit.reference_of(segment)
        return {"accuracy": accuracy, "n": n, "own": own}

    def _count_window(self, segment: str) -> dict[str, Any] | None:
        """The last estimate of ``segment``'s count window (what the alerts and the verdict read), None before one."""
        return self.last.get(segment, {}).get(f"last_{self.config.count_window_events}")

    def fell(self, segment: str) -> bool:
        """The primary method's point estimate over the count window is below the reference accuracy minus
        ``accuracy_tolerance``, on at least ``accuracy_min_events`` events: with moved inputs, evidence of a loss
        (the verdict's rule), where :meth:`condition` (its upper bound below) is evidence on its own."""
        assert self.fit is not None
        result = self._count_window(segment)
        if result is None or result["n"] < self.config.accuracy_min_events:
            return False
        ref = self.reference(segment)["accuracy"]
        return bool(result["accuracy"]["estimate"] < ref - self.config.accuracy_tolerance)

    def evidence(self, segment: str) -> Evidence | None:
        """The primary method's estimate over the count window as the evidence a harmful shift quotes when the
        estimate made it one (:meth:`fell`): its estimate against the reference accuracy minus the tolerance, the
        interval and the events in ``measure``. None without a classifier fit or an estimate."""
        if self.fit is None:
            return None
        result = self._count_window(segment)
        if result is None:
            return None
        acc, ref = result["accuracy"], self.reference(segment)["accuracy"]
        return Evidence(
            "accuracy_estimate",
            float(acc["estimate"]),
            ref - self.config.accuracy_tolerance,
            float(acc["estimate"]),
            ref,
            f"{acc['method']} label-free accuracy, 90 % interval [{acc['lower']:.3f}, {acc['upper']:.3f}] over the "
            f"last {result['n']} events, against the reference accuracy − {self.config.accuracy_tolerance:g}",
            "estimate",
            f"estimated accuracy {acc['estimate']:.2f}, reference {ref:.2f}",
        )

    def context(self, segment: str) -> Evidence | None:
        """The estimate (:meth:`evidence`) as a drift alert's answer to "how much?", on at least
        ``accuracy_min_events`` events; None before that or without a classifier fit."""
        result = self._count_window(segment) if self.fit is not None else None
        if result is None or result["n"] < self.config.accuracy_min_events:
            return None
        return self.evidence(segment)

    def condition(self, segment: str) -> tuple[bool, float, str]:
        """(condition, estimate, detail) of HarmonicAccuracyDrop: the primary method's 90 % upper bound over the
        count window is below the reference accuracy minus ``accuracy_tolerance``, on at least
        ``accuracy_min_events`` events. Output-side evidence for the harmful verdict too."""
        result = self._count_window(segment)
        if self.loss_fit is not None:
            return error_condition(
                self.loss_fit, result, self.config.error_tolerance, self.config.accuracy_min_events, segment
            )
        assert self.fit is not None
        ref, _, own = self.fit.reference_of(segment)
        if result is None:
            return False, float("nan"), ""
        acc = result["accuracy"]
        limit = ref - self.config.accuracy_tolerance
        condition = result["n"] >= self.config.accuracy_min_events and acc["upper"] < limit
        detail = (
            f"{acc['method']} estimate {acc['estimate']:.3f}, 90 % interval [{acc['lower']:.3f}, "
            f"{acc['upper']:.3f}] over the last {result['n']} events; upper bound below {_whose(own, segment)} "
            f"reference accuracy {ref:.3f} − tolerance {self.config.accuracy_tolerance:g} = {limit:.3f}. A label-free estimate: "
            "delayed labels, when they arrive, override it"
        )
        errors = self.fit.confidence_errors
        unsure = None if errors is None else errors.estimate_caveat(self.config.accuracy_tolerance)
        if unsure is not None:
            detail += f"; {unsure}"
        return bool(condition), float(acc["estimate"]), detail


def _whose(own: bool, segment: str) -> str:
    return f"segment {segment}'s" if own else "the model's"


def error_condition(
    fit: LossFit, result: dict[str, Any] | None, tolerance: float, min_events: int, segment: str | None = None
) -> tuple[bool, float, str]:
    """(condition, estimated MAE, detail) of HarmonicErrorRise on the count window's estimate ``result``, against
    ``segment``'s own reference MAE where the labelled reference carries it."""
    if result is None:
        return False, float("nan"), ""
    mae = result["mae"]
    ref, _, _, own = fit.reference_of(segment)
    limit = ref * (1.0 + tolerance)
    detail = (
        f"{result['method']} MAE estimate {mae['estimate']:.4g}, 90 % interval [{mae['lower']:.4g}, "
        f"{mae['upper']:.4g}] over the last {result['n']} events; lower bound above {_whose(own, segment or '')} "
        f"reference MAE {ref:.4g} × "
        f"(1 + tolerance {tolerance:g}) = {limit:.4g}. A label-free estimate: delayed labels, when they arrive, "
        "override it"
    )
    return bool(result["n"] >= min_events and mae["lower"] > limit), float(mae["estimate"]), detail


def _estimate_rows(fit: EstimatorFit, rows: ScoreRows, method: str) -> dict[str, Any]:
    """:func:`monitor.accuracy.estimate` on a window's rows; the weights only when they differ (a sampled window)."""
    w = rows.weights
    weights = None if w.size == 0 or bool(np.all(w == w[0])) else w
    return estimate(
        fit,
        rows.column("confidence"),
        rows.column("gamma"),
        rows.column("flicker"),
        rows.column("p_adj"),
        method=method,
        weights=weights,
    )
