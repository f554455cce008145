"""The metrics a model's watch produces, written through :mod:`monitor.telemetry`'s typed handles.

:class:`WatchMetrics` is the telemetry side of a watch: :meth:`WatchMetrics.publish` writes the series records of a
:class:`~monitor.runtime.watch_report.WatchReport` (scored batches, window snapshots, accuracy estimates, verdicts,
alert updates, baselines) into series labelled with the model's name, in the order the watch produced them. It keeps
no state of its own besides the model and the metrics state it writes to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor import telemetry as tel
from monitor.clock import MISTIMED_REASONS
from monitor.events import InferenceEvent
from monitor.exporters.prometheus import MetricsState
from monitor.rolling.windows import OTHER, SignalBatch
from monitor.runtime.alert_conditions import AlertUpdate
from monitor.runtime.watch_report import (
    AccuracyValues,
    ConfidenceHarm,
    GammaCells,
    Mistimed,
    NoEvidence,
    ReferenceAccuracy,
    ReferenceMeans,
    Scored,
    VerdictCleared,
    VerdictValues,
    WarmingUp,
    WatchReport,
    WindowValues,
)

#: the verdict gauge's state of a segment with no current evidence (:class:`NoEvidence`)
NO_EVIDENCE = "no-evidence"
#: the per-input drift gauge keeps one series per input up to this many inputs; above it, the
#: :data:`FEATURE_SERIES_TOP` largest by name and the rest folded into ``other`` (their largest distance)
FEATURE_SERIES_MAX = 64
FEATURE_SERIES_TOP = 16


class WatchMetrics:
    """The series of one model's watch in ``state``."""

    def __init__(self, model: str, state: MetricsState) -> None:
        self.model = model
        self.state = state
        for reason in MISTIMED_REASONS:  # pre-registered at 0: rate() sees the first increment
            tel.EVENTS_MISTIMED_TOTAL.inc(state, tel.ModelReason(model, reason), 0.0)

    def publish(self, report: WatchReport) -> None:
        """Write ``report``'s series, in the order the watch produced them."""
        for update in report.series:
            match update:
                case Mistimed():
                    self.mistimed(update)
                case Scored(batch, events, ok):
                    self.scored(batch, events, ok)
                case GammaCells(added):
                    self.gamma_cells(added)
                case WindowValues(segment, snapshots):
                    self.windows(segment, snapshots)
                case AccuracyValues(segment, estimates):
                    self.estimates(segment, estimates)
                case ReferenceAccuracy(accuracy):
                    self.reference_accuracy(accuracy)
                case ConfidenceHarm(harm):
                    tel.CONFIDENCE_HARM_EVIDENCE.set(self.state, tel.Model(self.model), float(harm))
                case ReferenceMeans():
                    self.reference(update)
                case WarmingUp(segment, warming):
                    self.warming_up(segment, warming)
                case VerdictCleared(segment):
                    self.clear_verdict(segment)
                case VerdictValues():
                    self.verdict(update)
                case NoEvidence(segment):
                    self.clear_verdict(segment)
                    tel.DRIFT_VERDICT.set(self.state, tel.ModelSegmentVerdict(self.model, segment, NO_EVIDENCE), 1.0)
                case AlertUpdate():
                    self.alert(update)

    def mistimed(self, placed: Mistimed) -> None:
        """A batch's events placed at the watermark from beyond the skew bound (future timestamps) and its late ones."""
        for reason, count in (("future_timestamp", placed.future), ("late", placed.late)):
            if count:
                tel.EVENTS_MISTIMED_TOTAL.inc(self.state, tel.ModelReason(self.model, reason), float(count))

    def scored(self, batch: SignalBatch, events: Sequence[InferenceEvent], ok: NDArray[np.bool_]) -> None:
        """The per-event histograms of the valid events (``batch``) by segment, and the scored-events counter of
        every event that ``ok`` marks valid."""
        seg_arr = batch.segments
        for seg in np.unique(seg_arr):
            sel = seg_arr == seg
            labels = tel.ModelSegment(self.model, str(seg))
            tel.GAMMA.observe(self.state, labels, batch.gamma[sel])
            tel.FLICKER.observe(self.state, labels, batch.flicker[sel])
            tel.P_ADJ.observe(self.state, labels, batch.p_adj[sel])
            conf = batch.confidence[sel]
            conf = conf[np.isfinite(conf)]  # NaN for a regressor (no classes): no confidence series
            if conf.size:
                tel.CONFIDENCE.observe(self.state, labels, conf)
            margin = batch.margin[sel]
            margin = margin[np.isfinite(margin)]  # NaN for a regressor, like confidence
            if margin.size:
                tel.MARGIN.observe(self.state, labels, margin)
        for ev, good in zip(events, ok, strict=True):
            if good:
                tel.EVENTS_SCORED_TOTAL.inc(
                    self.state, tel.ModelModelVersionSegment(self.model, ev.model_version, ev.segment)
                )

    def gamma_cells(self, added: dict[tuple[str, str, str], float]) -> None:
        """The events the Gamma Map added per (segment, p_bin, gamma_bin)."""
        for (seg, p_bin, gamma_bin), n in added.items():
            tel.GAMMAMAP_EVENTS_TOTAL.inc(
                self.state, tel.ModelSegmentPBinGammaBin(self.model, seg, p_bin, gamma_bin), n
            )

    def windows(self, segment: str, snaps: dict[str, Any]) -> None:
        """Each window's event count and, where it holds events, its signal gauges."""
        for wname, snap in snaps.items():
            labels = tel.ModelSegmentWindow(self.model, segment, wname)
            sig = snap.signals
            tel.WINDOW_EVENTS.set(self.state, labels, snap.events)
            if snap.events == 0:
                continue
            tel.WINDOW_GAMMA_MEAN.set(self.state, labels, sig["gamma"].mean)
            tel.WINDOW_GAMMA_P95.set(self.state, labels, _q(sig["gamma"].quantiles, 0.95))
            tel.WINDOW_FLICKER_MEAN.set(self.state, labels, sig["flicker"].mean)
            tel.WINDOW_STABILITY.set(self.state, labels, 1.0 - sig["flicker"].mean)
            tel.WINDOW_P_ADJ_MEAN.set(self.state, labels, sig["p_adj"].mean)
            if sig["confidence"].count:  # none for a regressor
                tel.WINDOW_CONFIDENCE_MEAN.set(self.state, labels, sig["confidence"].mean)
            if sig["margin"].count:  # none for a regressor
                tel.WINDOW_MARGIN_MEAN.set(self.state, labels, sig["margin"].mean)
            if sig["shadow_disagreement"].count:
                tel.WINDOW_SHADOW_DISAGREEMENT_RATIO.set(self.state, labels, sig["shadow_disagreement"].mean)

    def estimates(self, segment: str, estimates: dict[str, dict[str, Any]]) -> None:
        """Each window's accuracy estimate and its interval, by method; a window without one (too few events) has
        no series, rather than a stale or noisy one."""
        for metric in (tel.ESTIMATED_ACCURACY, tel.ESTIMATED_ACCURACY_LOWER, tel.ESTIMATED_ACCURACY_UPPER):
            metric.clear(self.state, lambda lab: lab[:2] == (self.model, segment))
        for err in (tel.ESTIMATED_ERROR, tel.ESTIMATED_ERROR_LOWER, tel.ESTIMATED_ERROR_UPPER):
            err.clear(self.state, lambda lab: lab[:2] == (self.model, segment))
        for result in list(estimates.values())[:1]:
            self.segment_reference(segment, result.get("segment_reference"))
        for wname, result in estimates.items():
            if "mae" in result:  # a regressor's error (monitor.accuracy.regression.estimate_loss)
                self.errors(segment, wname, result)
                continue
            for method, m in result["methods"].items():
                labels = tel.ModelSegmentWindowMethod(self.model, segment, wname, method)
                tel.ESTIMATED_ACCURACY.set(self.state, labels, m["estimate"])
                tel.ESTIMATED_ACCURACY_LOWER.set(self.state, labels, m["lower"])
                tel.ESTIMATED_ACCURACY_UPPER.set(self.state, labels, m["upper"])

    def errors(self, segment: str, wname: str, result: dict[str, Any]) -> None:
        """A regressor's MAE and RMSE estimates of one window by method, and the reference's."""
        for method, bands in result["methods"].items():
            for loss, band in bands.items():
                labels = tel.ModelSegmentWindowMethodLoss(self.model, segment, wname, method, loss)
                tel.ESTIMATED_ERROR.set(self.state, labels, band["estimate"])
                tel.ESTIMATED_ERROR_LOWER.set(self.state, labels, band["lower"])
                tel.ESTIMATED_ERROR_UPPER.set(self.state, labels, band["upper"])
        for loss in ("mae", "rmse"):
            tel.REFERENCE_ERROR.set(self.state, tel.ModelLoss(self.model, loss), result["reference"][loss])

    def segment_reference(self, segment: str, ref: dict[str, Any] | None) -> None:
        """The segment's own reference accuracy (a regressor's error) where the labelled reference carries it."""
        if ref is None or not ref.get("own"):
            return
        if "mae" in ref:
            for loss in ("mae", "rmse"):
                labels = tel.ModelSegmentLoss(self.model, segment, loss)
                tel.SEGMENT_REFERENCE_ERROR.set(self.state, labels, ref[loss])
        else:
            tel.SEGMENT_REFERENCE_ACCURACY.set(self.state, tel.ModelSegment(self.model, segment), ref["accuracy"])

    def reference_accuracy(self, accuracy: float) -> None:
        tel.REFERENCE_ACCURACY.set(self.state, tel.Model(self.model), accuracy)

    def reference(self, ref: ReferenceMeans) -> None:
        """The model-wide reference's means."""
        tel.REFERENCE_GAMMA_MEAN.set(self.state, tel.Model(self.model), ref.gamma_mean)
        tel.REFERENCE_FLICKER_MEAN.set(self.state, tel.Model(self.model), ref.flicker_mean)

    def warming_up(self, segment: str, warming: bool) -> None:
        tel.SEGMENT_WARMING_UP.set(self.state, tel.ModelSegment(self.model, segment), 1.0 if warming else 0.0)

    def clear_verdict(self, segment: str) -> None:
        """Drop ``segment``'s verdict series (it has no verdict until its new baseline is learned)."""
        tel.DRIFT_VERDICT.clear(self.state, lambda lab: lab[:2] == (self.model, segment))

    def verdict(self, values: VerdictValues) -> None:
        """The segment's verdict, its detectors' statistics and p-values, and its inputs' drift and out-of-range
        shares."""
        segment = values.segment
        self.clear_verdict(segment)
        tel.DRIFT_VERDICT.set(self.state, tel.ModelSegmentVerdict(self.model, segment, values.verdict.value), 1.0)
        for st in values.detectors:
            statistic = float("nan") if st.name in values.untested else st.statistic  # NaN: no test has run yet
            tel.DRIFT_STATISTIC.set(self.state, tel.ModelSegmentSignal(self.model, segment, st.name), statistic)
            if np.isfinite(st.p_value):
                tel.DRIFT_P_VALUE.set(self.state, tel.ModelSegmentSignal(self.model, segment, st.name), st.p_value)
        if values.moved is not None:  # None: the reference holds no feature sample, so nothing is tested
            tel.FEATURE_DRIFT_FEATURES.set(self.state, tel.ModelSegment(self.model, segment), float(values.moved))
        for inputs in values.inputs:
            metric = tel.FEATURE_DRIFT_STATISTIC if inputs.kind == "drift" else tel.INPUT_OUT_OF_RANGE_RATIO
            self.feature_statistics(segment, inputs.names, inputs.values, metric=metric)

    def feature_statistics(
        self,
        segment: str,
        names: Sequence[str],
        statistics: NDArray[np.float64],
        metric: tel.Gauge[tel.ModelSegmentFeature] = tel.FEATURE_DRIFT_STATISTIC,
    ) -> None:
        """``harmonic_feature_drift_statistic`` (or ``metric``): each input's KS distance at the last test, by the
        model's input names; above :data:`FEATURE_SERIES_MAX` inputs only the :data:`FEATURE_SERIES_TOP` largest, the rest as
        ``other`` (their largest), so that an image model does not export one series per pixel."""
        key = (self.model, segment)
        if len(names) <= FEATURE_SERIES_MAX:
            for name, d in zip(names, statistics.tolist(), strict=True):
                metric.set(self.state, tel.ModelSegmentFeature(*key, name), float(d))
            return
        order = np.argsort(-statistics, kind="stable")
        metric.clear(self.state, lambda lab: lab[:2] == key)
        for j in order[:FEATURE_SERIES_TOP].tolist():
            metric.set(self.state, tel.ModelSegmentFeature(*key, names[j]), float(statistics[j]))
        rest = statistics[order[FEATURE_SERIES_TOP:]]
        metric.set(self.state, tel.ModelSegmentFeature(*key, OTHER), float(rest.max()) if rest.size else 0.0)

    def alert(self, update: AlertUpdate) -> None:
        """The alert's firing gauge, and the fired counter when it has just fired."""
        tel.ALERTS_FIRING.set(
            self.state,
            tel.ModelSegmentAlertname(self.model, update.segment, update.rule),
            1.0 if update.firing else 0.0,
        )
        ev = update.transition
        if ev is not None and ev.alert.state.value == "firing":
            tel.ALERTS_FIRED_TOTAL.inc(self.state, tel.ModelAlertname(self.model, update.rule))


def _q(quantiles: Any, q: float) -> float:
    if not quantiles:
        return float("nan")
    if q in quantiles:
        return float(quantiles[q])
    keys = sorted(quantiles)
    return float(quantiles[min(keys, key=lambda k: abs(k - q))])
