"""A model's label-free accuracy estimate per segment and window, for its watch.

:class:`AccuracyEstimates` keeps the per-event scores (confidence, γ, flicker, P_adj) of the events that entered the
windows, estimates each window's accuracy with a labelled reference's estimators (``reference --labels``) at most
every ``accuracy_interval_seconds``, and says whether HarmonicAccuracyDrop's condition holds. It writes no metric:
the watch publishes what it returns.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from monitor.accuracy import SMALL_N, EstimatorFit, estimate
from monitor.errors import DataError
from monitor.rolling.scores import ScoreRows, ScoreSamples
from monitor.rolling.windows import OTHER, SignalBatch

if TYPE_CHECKING:
    from monitor.runtime.watch import WatchConfig


class AccuracyEstimates:
    """The estimators of a labelled reference (``fit``), their score samples and the last estimates."""

    def __init__(self, config: WatchConfig, buckets: Any) -> None:
        self.config = config
        self.buckets = buckets
        self.fit: EstimatorFit | None = None
        self.samples: ScoreSamples | None = None
        self.estimated_at = -math.inf
        #: segment → window → :func:`monitor.accuracy.estimate`'s result, from the last estimate
        self.last: dict[str, dict[str, dict[str, Any]]] = {}

    def set_fit(self, fit: EstimatorFit | None) -> None:
        """Estimate with ``fit`` from now on; None: stop."""
        self.fit = fit
        self.last.clear()
        self.estimated_at = -math.inf
        self.samples = None
        if fit is not None:
            self.samples = ScoreSamples(
                window_seconds=self.config.window_seconds,
                count_size=self.config.count_window_events,
                capacity=self.config.accuracy_sample_events,
                buckets=self.buckets,
            )

    def keep(self, keys: set[str], drift: SignalBatch, confidence: NDArray[np.float64]) -> None:
        """Add the events that entered the windows to the score samples, under the windows' (folded) segments
        ``keys``."""
        if self.samples is None:
            return
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
        """Every window's accuracy of ``segment`` by every method: ``{window: estimate's result}``."""
        assert self.samples is not None and self.fit is not None
        out: dict[str, dict[str, Any]] = {}
        for wname, rows in self.samples.rows(segment, windows_end).items():
            if rows.n < SMALL_N:  # too few to estimate: no number rather than noise
                continue
            try:
                out[wname] = _estimate_rows(self.fit, rows, self.config.accuracy_method)
            except DataError:  # no row with a confidence in this window
                continue
        self.last[segment] = out
        return out

    def fell(self, segment: str) -> bool:
        """The primary method's point estimate over the count window is below the reference accuracy minus
        ``accuracy_tolerance``, on at least ``accuracy_min_events`` events: with moved inputs, evidence of a loss
        (the verdict's rule), where :meth:`condition` (its upper bound below) is evidence on its own."""
        assert self.fit is not None
        result = self.last.get(segment, {}).get(f"last_{self.config.count_window_events}")
        if result is None or result["n"] < self.config.accuracy_min_events:
            return False
        return bool(result["accuracy"]["estimate"] < self.fit.accuracy - self.config.accuracy_tolerance)

    def condition(self, segment: str) -> tuple[bool, float, str]:
        """(condition, estimate, detail) of HarmonicAccuracyDrop: the primary method's 90 % upper bound over the
        count window is below the reference accuracy minus ``accuracy_tolerance``, on at least
        ``accuracy_min_events`` events. Output-side evidence for the harmful verdict too."""
        assert self.fit is not None
        ref = self.fit.accuracy
        result = self.last.get(segment, {}).get(f"last_{self.config.count_window_events}")
        if result is None:
            return False, float("nan"), ""
        acc = result["accuracy"]
        limit = ref - self.config.accuracy_tolerance
        condition = result["n"] >= self.config.accuracy_min_events and acc["upper"] < limit
        detail = (
            f"{acc['method']} estimate {acc['estimate']:.3f}, 90 % interval [{acc['lower']:.3f}, "
            f"{acc['upper']:.3f}] over the last {result['n']} events; upper bound below reference accuracy "
            f"{ref:.3f} − tolerance {self.config.accuracy_tolerance:g} = {limit:.3f}. A label-free estimate: "
            "delayed labels, when they arrive, override it"
        )
        return bool(condition), float(acc["estimate"]), detail


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
