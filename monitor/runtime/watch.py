"""Per-model analytics (wiring of stages 5–6): rolling windows, the reference, drift verdicts and alert rules.

One :class:`ModelWatch` per watched model. It takes every scored micro-batch, updates the windows and the
per-segment drift engines, and every ``drift.every`` events publishes window gauges and the verdict and feeds the
alert engine. Time is one injected :class:`~monitor.clock.WatermarkClock`: the event-time watermark
in replays and the demo, ``max(watermark, wall − alerts.allowed_lag_seconds)`` in ``run``. Time windows cover event
time up to the watermark; alerts run on the clock, and :meth:`ModelWatch.tick` (``Service.run`` calls it every loop
turn) moves them on between batches, so they fire and resolve on time on a quiet stream too. A segment that received
no scored event for its shortest time window (read on the clock, at arrival: a backlog's old timestamps do not count
as quiet) has no current evidence, and its alert conditions count as false.

Each segment is judged against a baseline of its own (:meth:`ModelWatch.baseline`): the one the reference data gave
it (:mod:`monitor.rolling.segment_baselines`), else one learned from its own first ``warmup_events`` events. While a
segment warms up it has no verdict and no drift alert (``harmonic_segment_warming_up`` is 1; ``/readyz`` lists it):
it is never judged against another population's baseline. A stream without segments (every event in ``other``) is
judged against the model-wide reference, as the one population it describes; once a named segment appears, the
folded ``other`` segment warms up a baseline of its own too. Every segment's detectors run at the stated false-alarm
rate on its own events, each calibrated on its own baseline's size.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor import telemetry as tel
from monitor.accuracy import DEFAULT_METHOD, EstimatorFit
from monitor.clock import MISTIMED_REASONS, WatermarkClock
from monitor.config import Settings
from monitor.drift.categories import count_tables, held_columns
from monitor.drift.verdict import DriftSettings as DetectorSettings
from monitor.drift.verdict import Verdict, VerdictEngine, VerdictReport
from monitor.events import InferenceEvent, held_rows
from monitor.exporters.alerts import AlertEngine, AlertEvent, AlertRule, Evidence
from monitor.exporters.prometheus import MetricsState
from monitor.gammamap import (
    GammaMap,
)
from monitor.logs import RateLimitedLogger
from monitor.metrics.scorer import ScoreResult
from monitor.rolling.reference import Reference, WarmupReferenceBuilder
from monitor.rolling.segment_baselines import (
    fold_segments,
    references_from_json,
    references_to_json,
    segment_references,
)
from monitor.rolling.windows import OTHER, SignalBatch, WindowSet
from monitor.runtime.accuracy_watch import AccuracyEstimates
from monitor.runtime.evidence import detector_evidence
from monitor.runtime.gamma_maps import SegmentGammaMaps

log = logging.getLogger("monitor.runtime.watch")

HARMFUL_ALERT = "HarmonicHarmfulShift"
INPUT_ALERT = "HarmonicInputDrift"
SHADOW_ALERT = "HarmonicShadowDisagreement"
ACCURACY_ALERT = "HarmonicAccuracyDrop"

#: the per-input drift gauge keeps one series per input up to this many inputs; above it, the
#: :data:`FEATURE_SERIES_TOP` largest by name and the rest folded into ``other`` (their largest distance)
FEATURE_SERIES_MAX = 64
FEATURE_SERIES_TOP = 16


@dataclass(frozen=True, slots=True)
class DetectorCrossing:
    """A detector of a segment turned on (crossed its threshold) or off, at the batch that did it: what the
    timeline reports besides verdict changes, which the verdict's hysteresis may hold back."""

    detector: str
    on: bool


#: an observer of :class:`ModelWatch` (``ModelWatch.observers``): ``f(segment, change, now, event)``
WatchObserver = Callable[[str, VerdictReport | AlertEvent | DetectorCrossing, float, InferenceEvent | None], None]


@dataclass(frozen=True, slots=True)
class WatchConfig:
    window_seconds: tuple[float, ...] = (60.0, 300.0, 3600.0)
    count_window_events: int = 2000
    max_segments: int = 20
    detectors: DetectorSettings = DetectorSettings()
    reference_max_events: int = 5000
    warmup_events: int = 2000
    for_seconds: float = 30.0
    resolve_after_seconds: float = 60.0
    shadow_disagreement_threshold: float = 0.02
    runbook_url_base: str = "docs/OPERATIONS.md"
    #: the label-free accuracy estimate (``accuracy`` settings; used only with an :class:`EstimatorFit`)
    accuracy_method: str = DEFAULT_METHOD
    accuracy_tolerance: float = 0.05
    accuracy_interval_seconds: float = 15.0
    accuracy_sample_events: int = 1000
    accuracy_min_events: int = 100

    @classmethod
    def from_settings(cls, s: Settings, warmup_events: int = 2000) -> WatchConfig:
        d = s.drift
        return cls(
            window_seconds=tuple(float(w) for w in s.windows.time_windows_seconds),
            count_window_events=s.windows.count_window_events,
            max_segments=s.segments.max_segments,
            detectors=DetectorSettings(
                cusum_quantile=d.cusum_quantile,
                cusum_rate_ratio=d.cusum_rate_ratio,
                false_alarms_per_million_events=d.false_alarms_per_million_events,
                cusum_threshold=d.cusum_threshold,
                window=d.window,
                every=d.every,
                ks_alpha=d.ks_alpha,
                ks_min_distance=d.ks_min_distance,
                rate_alpha=d.rate_alpha,
                rate_min_increase=d.rate_min_increase,
                feature_alpha=d.feature_alpha,
                feature_min_distance=d.feature_min_distance,
                confidence_detector=d.confidence_detector,
                margin_detector=d.margin_detector,
                range_min_share=d.range_min_share,
                multivariate_detector=d.multivariate_detector,
            ),
            reference_max_events=d.reference_max_events,
            warmup_events=warmup_events,
            for_seconds=s.alerts.for_seconds,
            resolve_after_seconds=s.alerts.resolve_after_seconds,
            shadow_disagreement_threshold=s.alerts.shadow_disagreement_threshold,
            runbook_url_base=s.alerts.runbook_url_base,
            accuracy_method=s.accuracy.method,
            accuracy_tolerance=s.accuracy.tolerance,
            accuracy_interval_seconds=s.accuracy.interval_seconds,
            accuracy_sample_events=s.accuracy.sample_events,
            accuracy_min_events=s.accuracy.min_events,
        )


class ModelWatch:
    """Windows, reference, drift and alerts for one model.

    Parameters
    ----------
    model : the model name (metric label).
    config : windows, detectors, alert timing.
    state : where metrics go.
    on_alert : called with each :class:`AlertEvent` (fired / resolved) — the delivery worker's ``submit``.
    feature_names : names used in alerts for the features that moved (default f0, f1, …).
    clock : the clock windows and alerts read; each batch advances its watermark. Default: event time of this
        model's own events (a replay). The service shares one among all models (``clock`` attribute).
    """

    def __init__(
        self,
        model: str,
        config: WatchConfig,
        state: MetricsState,
        *,
        on_alert: Callable[[AlertEvent], None] | None = None,
        feature_names: Sequence[str] | None = None,
        clock: WatermarkClock | None = None,
    ) -> None:
        self.model = model
        self.clock = clock if clock is not None else WatermarkClock()
        self._mistimed_log = RateLimitedLogger(log)
        for reason in MISTIMED_REASONS:  # pre-registered at 0: rate() sees the first increment
            tel.EVENTS_MISTIMED_TOTAL.inc(state, tel.ModelReason(model, reason), 0.0)
        self.config = config
        self.state = state
        self.on_alert = on_alert
        self.feature_names = tuple(feature_names) if feature_names else None
        #: element names of the held inputs (``monitor.drift.categories.held_element_names`` of the signature), for
        #: the category tests' names; None: ``input`` / ``input[i]``
        self.held_names: dict[str, list[str]] | None = None
        self.windows = WindowSet(
            window_seconds=config.window_seconds,
            count_size=config.count_window_events,
            max_models=1,
            max_segments=config.max_segments,
        )
        timing = (config.for_seconds, config.resolve_after_seconds)

        def rule(name: str, signal: str, severity: str) -> AlertRule:
            url = f"{config.runbook_url_base}#{name.lower()}" if config.runbook_url_base else ""
            return AlertRule(name, signal, *timing, severity=severity, runbook_url=url)

        self.alerts = AlertEngine(
            [
                rule(HARMFUL_ALERT, "gamma_flicker", "warning"),
                rule(INPUT_ALERT, "features", "info"),
                rule(SHADOW_ALERT, "shadow_disagreement", "critical"),
                rule(ACCURACY_ALERT, "accuracy", "warning"),
            ]
        )
        self.reference: Reference | None = None
        self._builder: WarmupReferenceBuilder | None = None
        #: segment → its own baseline: from reference data that carries the segment, or learned by its warm-up
        self.segment_references: dict[str, Reference] = {}
        #: segment → the warm-up collecting its first events (while it has no baseline)
        self._segment_builders: dict[str, WarmupReferenceBuilder] = {}
        #: a named segment (not ``other``) was seen: ``other`` is then a population of its own, not the whole stream
        self.segmented = False
        #: changes whenever a segment gets a baseline: the pipeline rewrites its baselines file only then
        self.baselines_version = 0
        #: segment → (clock reading of the last evaluation with output-side evidence, that harmful report): the
        #: verdict stays harmful-shift until that evidence has been off for ``resolve_after_seconds``
        self._harm_seen: dict[str, tuple[float, VerdictReport]] = {}
        #: segment → its engine's ``alarms_on`` after the last batch (detector crossings for the observers)
        self._alarms_seen: dict[str, tuple[bool, ...]] = {}
        self._engines: dict[str, VerdictEngine] = {}
        self._since_eval = 0
        #: per segment, the clock's reading when its last scored event arrived (what "quiet" is judged on)
        self._arrived: dict[str, float] = {}
        #: a segment with no arrival for this long on the clock is quiet: its shortest time window
        self._quiet_seconds = min(config.window_seconds)
        self.last_reports: dict[str, VerdictReport] = {}
        #: segment → its engine's ``alarms_on`` at the last evaluation
        self._alarms_at_eval: dict[str, tuple[bool, ...]] = {}
        self.fired: list[AlertEvent] = []
        #: the label-free accuracy estimate (:meth:`set_accuracy_fit`)
        self.accuracy = AccuracyEstimates(config, self.windows.buckets)
        # -- observer hook (``replay``'s timeline, monitor/runtime/replay.py) ------------------------------------------
        #: called as ``f(segment, change, now, event)`` when a segment's verdict changes (``change``: the new
        #: VerdictReport; the first report counts as a change from stable) and when an alert fires or resolves
        #: (``change``: the AlertEvent); ``event`` is the last event of the batch being applied, None when the
        #: change happened outside :meth:`update` (``tick``, a direct ``evaluate``)
        self.observers: list[WatchObserver] = []
        self._applying: InferenceEvent | None = None
        #: the Gamma Map (classifiers): per segment, the last count_window_events events' (P, γ) cells
        self.gamma = SegmentGammaMaps(config.count_window_events, config.max_segments)

    # -- accuracy without labels (monitor/runtime/accuracy_watch.py) ------------------------------------------
    @property
    def accuracy_fit(self) -> EstimatorFit | None:
        """The labelled reference's estimators the accuracy is estimated with (None: no estimate)."""
        return self.accuracy.fit

    @property
    def last_estimates(self) -> dict[str, dict[str, dict[str, Any]]]:
        """segment → window → the last accuracy estimate."""
        return self.accuracy.last

    def set_accuracy_fit(self, fit: EstimatorFit | None) -> None:
        """Estimate accuracy per window with ``fit`` (a labelled reference's, ``reference --labels``); None: stop."""
        self.accuracy.set_fit(fit)
        if fit is not None:
            tel.REFERENCE_ACCURACY.set(self.state, tel.Model(self.model), fit.accuracy)

    def _publish_estimates(self, segment: str, estimates: dict[str, dict[str, Any]]) -> None:
        for wname, result in estimates.items():
            for method, m in result["methods"].items():
                labels = tel.ModelSegmentWindowMethod(self.model, segment, wname, method)
                tel.ESTIMATED_ACCURACY.set(self.state, labels, m["estimate"])
                tel.ESTIMATED_ACCURACY_LOWER.set(self.state, labels, m["lower"])
                tel.ESTIMATED_ACCURACY_UPPER.set(self.state, labels, m["upper"])

    def _accuracy_alert(self, segment: str, now: float) -> None:
        """HarmonicAccuracyDrop: :meth:`AccuracyEstimates.condition` holds."""
        assert self.accuracy.fit is not None
        condition, value, detail = self.accuracy.condition(segment)
        self._observe_alert(
            ACCURACY_ALERT,
            segment,
            condition,
            value,
            self.accuracy.fit.accuracy,
            now,
            detail=detail,
            verdict=Verdict.HARMFUL_SHIFT.value,
            value_name="estimated accuracy",
            reference_name="reference accuracy",
        )

    # -- reference -----------------------------------------------------------------------------------------
    @property
    def has_reference(self) -> bool:
        return self.reference is not None

    def set_reference(
        self,
        rows: NDArray[np.float64],
        result: ScoreResult,
        segments: NDArray[np.str_] | None = None,
        held: dict[str, NDArray[np.str_]] | None = None,
    ) -> None:
        """The model-wide reference from scored reference rows; with ``segments`` (one label per row: reference data
        that carries the segment) also each segment's own baseline (:func:`segment_references`)."""
        ok = result.valid
        if segments is not None:
            self.install_segment_references(
                segment_references(
                    np.asarray(segments)[ok],
                    gamma=result.gamma[ok],
                    flicker=result.flicker[ok],
                    features=rows[ok],
                    predicted_class=result.predicted_class[ok],
                    confidence=result.probability[ok],
                    margin=result.margin[ok],
                    feature_names=self.feature_names,
                    max_segments=self.config.max_segments,
                    max_sample=self.config.reference_max_events,
                    held=None if held is None else {k: v[ok] for k, v in held.items()},
                )
            )
        ref = Reference.from_arrays(
            gamma=result.gamma[ok],
            flicker=result.flicker[ok],
            features=rows[ok],
            predicted_class=result.predicted_class[ok],
            feature_names=self.feature_names,
            max_sample=self.config.reference_max_events,
            confidence=result.probability[ok],
            margin=result.margin[ok],
            held=None if held is None else {k: v[ok] for k, v in held.items()},
        )
        self.install_reference(ref)

    def set_held_tables(self, held: dict[str, NDArray[np.str_]], segments: NDArray[np.str_] | None = None) -> None:
        """Count the held inputs' category tables over all reference rows (``held``: one column per held element;
        ``segments``: each row's segment, for the per-segment baselines), replacing those of the scored sample."""
        if self.reference is not None:
            self.reference = dataclasses.replace(self.reference, held_tables=count_tables(held))
        if segments is not None and self.segment_references:
            folded = fold_segments(segments, self.config.max_segments)
            for name, ref in list(self.segment_references.items()):
                sel = folded == name
                if sel.any():
                    tables = count_tables({k: v[sel] for k, v in held.items()})
                    self.segment_references[name] = dataclasses.replace(ref, held_tables=tables)
        for segment in list(self._engines):
            self._drop_engine(segment)  # rebuilt on the next batch, with the tables

    def install_reference(self, ref: Reference) -> None:
        """The model-wide reference (the baseline of an unsegmented stream); segments with their own keep theirs."""
        self.reference = ref
        for segment in [s for s in self._engines if s not in self.segment_references]:
            self._drop_engine(segment)
        self._builder = None
        tel.REFERENCE_GAMMA_MEAN.set(self.state, tel.Model(self.model), ref.gamma_mean)
        tel.REFERENCE_FLICKER_MEAN.set(self.state, tel.Model(self.model), ref.flicker_mean)

    def install_segment_references(self, refs: dict[str, Reference]) -> None:
        """Give segments their own baselines (reference data that carries the segment, or a saved state)."""
        if refs:
            self.baselines_version += 1
        for segment, ref in refs.items():
            self.segment_references[segment] = ref
            self._segment_builders.pop(segment, None)
            self._drop_engine(segment)
            tel.SEGMENT_WARMING_UP.set(self.state, tel.ModelSegment(self.model, segment), 0.0)
        if refs:
            log.info("per-segment baselines installed", extra={"model": self.model, "segments": sorted(refs)})

    def _drop_engine(self, segment: str) -> None:
        self._engines.pop(segment, None)
        self._alarms_at_eval.pop(segment, None)

    def baseline(self, segment: str) -> Reference | None:
        """The reference ``segment`` is judged against: its own (from reference data or its warm-up); the model-wide
        one for ``other`` while the stream has no named segment; None while it warms up."""
        ref = self.segment_references.get(segment)
        if ref is None and segment == OTHER and not self.segmented:
            return self.reference
        return ref

    @property
    def warming_up(self) -> dict[str, dict[str, int]]:
        """The segments still learning their baseline: ``{segment: {"events": seen, "of": needed}}``."""
        return {s: {"events": b.count, "of": b.events} for s, b in sorted(self._segment_builders.items())}

    def _segment_warm_up(
        self, segment: str, batch: SignalBatch, held: dict[str, NDArray[np.str_]] | None = None
    ) -> None:
        """Feed ``segment``'s warm-up; at ``warmup_events`` events its baseline is built and its detectors start."""
        builder = self._segment_builders.get(segment)
        if builder is None:
            builder = self._segment_builders[segment] = WarmupReferenceBuilder(
                self.config.warmup_events, feature_names=self.feature_names, max_sample=self.config.reference_max_events
            )
            log.info(
                "segment warming up its own baseline",
                extra={"model": self.model, "segment": segment, "events": self.config.warmup_events},
            )
        builder.update(
            gamma=batch.gamma,
            flicker=batch.flicker,
            features=batch.features,
            predicted_class=batch.predicted_class,
            confidence=batch.confidence,
            margin=batch.margin,
            held=held,
        )
        if builder.ready:
            del self._segment_builders[segment]
            self.install_segment_references({segment: builder.build()})
            log.info("segment baseline built from its warm-up", extra={"model": self.model, "segment": segment})
        else:
            tel.SEGMENT_WARMING_UP.set(self.state, tel.ModelSegment(self.model, segment), 1.0)

    def _become_segmented(self) -> None:
        """A named segment appeared: ``other`` is no longer the whole stream, so it stops using the model-wide
        reference and warms up a baseline of its own (unless the reference data gave it one)."""
        self.segmented = True
        if OTHER not in self.segment_references and OTHER in self._engines:
            self._drop_engine(OTHER)
            self.last_reports.pop(OTHER, None)
            tel.DRIFT_VERDICT.clear(self.state, lambda lab: lab[:2] == (self.model, OTHER))
            log.info(
                "segment 'other' now learns its own baseline (named segments appeared)", extra={"model": self.model}
            )

    def dump(self, *, segments: bool = True) -> dict[str, Any]:
        """The reference and, unless ``segments`` is False, the per-segment baselines (the pipeline keeps those in a
        file of their own, rewritten only when one changes: :meth:`dump_baselines`)."""
        out: dict[str, Any] = {
            "reference": None if self.reference is None else self.reference.to_dict(),
            "segmented": self.segmented,
        }
        if segments:
            out["segments"] = self.dump_baselines()
        return out

    def dump_baselines(self) -> dict[str, Any]:
        """The per-segment baselines as JSON (``{segment: reference dict}``)."""
        return references_to_json(self.segment_references)

    def restore(self, data: dict[str, Any]) -> None:
        if data.get("reference"):
            self.install_reference(Reference.from_dict(data["reference"]))
            log.info("reference restored from state", extra={"model": self.model})
        self.segmented = bool(data.get("segmented", False))
        self.install_segment_references(references_from_json(data.get("segments", {})))

    def _engine(self, segment: str) -> VerdictEngine:
        eng = self._engines.get(segment)
        if eng is None:
            ref = self.baseline(segment)
            assert ref is not None
            if (
                ref.feature_names is None
                and self.feature_names is not None
                and len(self.feature_names) == ref.n_features
            ):
                ref = dataclasses.replace(ref, feature_names=self.feature_names)  # the model's names in alerts
            eng = self._engines[segment] = VerdictEngine(ref, self.config.detectors)
            self._alarms_at_eval[segment] = eng.alarms_on
        return eng

    # -- per batch -----------------------------------------------------------------------------------------
    def update(
        self,
        events: Sequence[InferenceEvent],
        rows: NDArray[np.float64],
        result: ScoreResult,
        shadow: NDArray[np.float64],
        *,
        uniform: NDArray[np.bool_] | None = None,
    ) -> None:
        """Feed one scored micro-batch; ``shadow`` is per event NaN (no live label), 0 (agrees) or 1.

        ``uniform`` (optional) selects the events that enter the windows and drift detectors — the pipeline thins a
        class-stratified sample back to uniform inclusion so windows stay comparable with the reference. Counters
        and histograms always see every scored event.
        """
        ok = result.valid
        # timestamps too far ahead of where time is are placed at arrival (run) or at the watermark (replay): one
        # producer's stray clock cannot move this model's windows and alerts past every event (monitor/clock.py)
        placed = self.clock.place(np.array([ev.timestamp_seconds for ev in events], dtype=np.float64))
        ts = placed.seconds
        for reason, count in (("future_timestamp", placed.future), ("late", placed.late)):
            if count:
                tel.EVENTS_MISTIMED_TOTAL.inc(self.state, tel.ModelReason(self.model, reason), float(count))
                if reason == "future_timestamp":
                    self._mistimed_log.warning(
                        reason,
                        "event timestamps ahead of time; placed at arrival (producer clocks?)",
                        model=self.model,
                        events=count,
                        bound_seconds=self.clock.max_skew_seconds,
                    )
        segments = [ev.segment for ev in events]
        batch = SignalBatch.of(
            features=rows,
            timestamps_seconds=ts,
            gamma=result.gamma,
            flicker=result.flicker,
            p_adj=result.p_adj,
            shadow_disagreement=shadow,
            predicted_class=result.predicted_class,
            segment=segments,
            confidence=result.probability,
            margin=result.margin,
        )
        full = batch
        batch = full.take(ok)
        if batch.size == 0:
            return
        seg_arr = batch.segments
        for seg in np.unique(seg_arr):
            sel = seg_arr == seg
            labels = (self.model, str(seg))
            tel.GAMMA.observe(self.state, tel.ModelSegment(*labels), batch.gamma[sel])
            tel.FLICKER.observe(self.state, tel.ModelSegment(*labels), batch.flicker[sel])
            tel.P_ADJ.observe(self.state, tel.ModelSegment(*labels), batch.p_adj[sel])
            conf = batch.confidence[sel]
            conf = conf[np.isfinite(conf)]  # NaN for a regressor (no classes): no confidence series
            if conf.size:
                tel.CONFIDENCE.observe(self.state, tel.ModelSegment(*labels), conf)
            margin = batch.margin[sel]
            margin = margin[np.isfinite(margin)]  # NaN for a regressor, like confidence
            if margin.size:
                tel.MARGIN.observe(self.state, tel.ModelSegment(*labels), margin)
        for ev, good in zip(events, ok, strict=True):
            if good:
                tel.EVENTS_SCORED_TOTAL.inc(
                    self.state, tel.ModelModelVersionSegment(self.model, ev.model_version, ev.segment)
                )
        now = self.clock.advance(float(batch.timestamps_seconds.max())).now()
        for seg in np.unique(seg_arr):
            self._arrived[str(seg)] = now
        drift = batch if uniform is None else full.take(ok & uniform)
        # held input values (string, int, bool inputs; fixed_features) of the drift rows, one column per element
        held = held_rows(events) if events and events[0].held is not None else None
        drift_held: dict[str, NDArray[np.str_]] | None = None
        if held is not None and len(held) == len(events):
            cols = held_columns(held.values, self.held_names)
            keep = ok if uniform is None else ok & uniform
            drift_held = {name: col[keep] for name, col in cols.items()}
        if drift.size:
            for (seg, p_bin, gamma_bin), n in self.gamma.update(drift).items():
                tel.GAMMAMAP_EVENTS_TOTAL.inc(
                    self.state, tel.ModelSegmentPBinGammaBin(self.model, seg, p_bin, gamma_bin), n
                )
            self.windows.update(self.model, drift)
            if self.accuracy.samples is not None:
                conf = result.probability[ok] if uniform is None else result.probability[ok & uniform]
                self.accuracy.keep({seg for _, seg in self.windows.keys}, drift, conf)
        # a detector of a segment this batch fed turned on or off: the verdict is evaluated now, not at the next
        # `every` events, so a change is reported at the batch that caused it (the cadence paces the gauges)
        flipped = False
        if self.reference is None and drift.size:
            self._warm_up(drift, drift_held)
        if drift.size:
            # each event under its segment as the windows keep it (segments beyond max_segments fold into other)
            keys = {s for _, s in self.windows.keys}
            if not self.segmented and any(s != OTHER for s in keys):
                self._become_segmented()
            drift_segs = np.array([s if s in keys else OTHER for s in drift.segments.tolist()])
            for seg in np.unique(drift_segs).tolist():
                sel = drift_segs == seg
                seg_held = None if drift_held is None else {k: v[sel] for k, v in drift_held.items()}
                if self.baseline(seg) is None:
                    if self.segmented:
                        self._segment_warm_up(seg, drift.take(sel), seg_held)
                    continue
                eng = self._engine(seg).update(
                    gamma=drift.gamma[sel],
                    flicker=drift.flicker[sel],
                    features=drift.features[sel],
                    confidence=drift.confidence[sel],
                    margin=drift.margin[sel],
                    held=seg_held,
                )
                flipped = flipped or eng.alarms_on != self._alarms_at_eval[seg]
                if self.observers:
                    self._crossings(seg, eng, events[-1])
        self._since_eval += batch.size
        if self._since_eval >= self.config.detectors.every or flipped:
            self._since_eval = 0
            self._applying = events[-1]  # for the observers
            try:
                self.evaluate(now)
            finally:
                self._applying = None

    # -- the Gamma Map (monitor/runtime/gamma_maps.py) -----------------------------------------------------
    def gamma_maps(self) -> dict[str, Any]:
        """The model's Gamma Map for ``/gammamap`` (:meth:`SegmentGammaMaps.to_json`) against its reference."""
        return self.gamma.to_json(self.reference)

    def gamma_map_pair(self, segment: str | None = None) -> tuple[GammaMap, GammaMap | None]:
        """(live, reference) maps for drawing (:meth:`SegmentGammaMaps.pair`)."""
        return self.gamma.pair(segment, self.reference)

    def _warm_up(self, batch: SignalBatch, held: dict[str, NDArray[np.str_]] | None = None) -> None:
        if self._builder is None:
            self._builder = WarmupReferenceBuilder(
                self.config.warmup_events, feature_names=self.feature_names, max_sample=self.config.reference_max_events
            )
        self._builder.update(
            gamma=batch.gamma,
            flicker=batch.flicker,
            features=batch.features,
            predicted_class=batch.predicted_class,
            confidence=batch.confidence,
            margin=batch.margin,
            held=held,
        )
        if self._builder.ready:
            self.install_reference(self._builder.build())
            log.info("reference built from the warm-up window", extra={"model": self.model})

    # -- evaluation ----------------------------------------------------------------------------------------
    def evaluate(self, now: float | None = None) -> None:
        """Publish window gauges, verdicts and alert transitions for every segment, at ``now`` (default: the clock).

        Time windows end at the event-time watermark (at most ``now``): during a backlog they describe the events
        being read, not the empty last minute of wall time.
        """
        if now is None:
            now = self.clock.now()
        windows_end = min(now, self.clock.watermark) if math.isfinite(self.clock.watermark) else now
        estimating = self.accuracy.due(now)
        for model, segment in self.windows.keys:
            snaps = self.windows.snapshot(model, segment, windows_end)
            for wname, snap in snaps.items():
                labels = (self.model, segment, wname)
                sig = snap.signals
                tel.WINDOW_EVENTS.set(self.state, tel.ModelSegmentWindow(*labels), snap.events)
                if snap.events == 0:
                    continue
                tel.WINDOW_GAMMA_MEAN.set(self.state, tel.ModelSegmentWindow(*labels), sig["gamma"].mean)
                tel.WINDOW_GAMMA_P95.set(self.state, tel.ModelSegmentWindow(*labels), _q(sig["gamma"].quantiles, 0.95))
                tel.WINDOW_FLICKER_MEAN.set(self.state, tel.ModelSegmentWindow(*labels), sig["flicker"].mean)
                tel.WINDOW_STABILITY.set(self.state, tel.ModelSegmentWindow(*labels), 1.0 - sig["flicker"].mean)
                tel.WINDOW_P_ADJ_MEAN.set(self.state, tel.ModelSegmentWindow(*labels), sig["p_adj"].mean)
                if sig["confidence"].count:  # none for a regressor
                    tel.WINDOW_CONFIDENCE_MEAN.set(self.state, tel.ModelSegmentWindow(*labels), sig["confidence"].mean)
                if sig["margin"].count:  # none for a regressor
                    tel.WINDOW_MARGIN_MEAN.set(self.state, tel.ModelSegmentWindow(*labels), sig["margin"].mean)
                if sig["shadow_disagreement"].count:
                    tel.WINDOW_SHADOW_DISAGREEMENT_RATIO.set(
                        self.state, tel.ModelSegmentWindow(*labels), sig["shadow_disagreement"].mean
                    )
            if estimating:
                self._publish_estimates(segment, self.accuracy.estimate(segment, windows_end))
            self._evaluate_segment(segment, snaps, now)
            if self.accuracy_fit is not None:
                self._accuracy_alert(segment, now)

    def _evaluate_segment(self, segment: str, snaps: dict[str, Any], now: float) -> None:
        count = self.windows.count_window(self.model, segment)
        shadow_vals = count.values("shadow_disagreement")
        shadow_vals = shadow_vals[np.isfinite(shadow_vals)]
        shadow_rate = float(shadow_vals.mean()) if shadow_vals.size >= 50 else 0.0
        self._observe_alert(
            SHADOW_ALERT,
            segment,
            shadow_rate > self.config.shadow_disagreement_threshold,
            shadow_rate,
            self.config.shadow_disagreement_threshold,
            now,
            detail=f"live server vs ONNX copy over the last {shadow_vals.size} events; a stale or wrong ONNX copy "
            "invalidates every other signal",
            verdict="shadow",
            value_name="disagreement rate",
            reference_name="threshold",
        )
        baseline = self.baseline(segment)
        if baseline is None or segment not in self._engines:
            return  # no baseline yet (warming up): no verdict, never one against another population's baseline
        # output-side evidence besides the detectors: the accuracy estimate's alert condition
        accuracy_drop = self.accuracy.fit is not None and self.accuracy.condition(segment)[0]
        engine = self._engines[segment]
        report = self._hold_harm(segment, engine.assess(accuracy_drop=accuracy_drop), now)
        self._alarms_at_eval[segment] = engine.alarms_on
        previous = self.last_reports.get(segment)
        self.last_reports[segment] = report
        if report.verdict != (Verdict.STABLE if previous is None else previous.verdict):
            self._notify(segment, report, now)
        tel.DRIFT_VERDICT.clear(self.state, lambda lab: lab[:2] == (self.model, segment))
        tel.DRIFT_VERDICT.set(self.state, tel.ModelSegmentVerdict(self.model, segment, report.verdict.value), 1.0)
        for st in self._engines[segment].states:
            tel.DRIFT_STATISTIC.set(self.state, tel.ModelSegmentSignal(self.model, segment, st.name), st.statistic)
            if np.isfinite(st.p_value):
                tel.DRIFT_P_VALUE.set(self.state, tel.ModelSegmentSignal(self.model, segment, st.name), st.p_value)
        features = engine.feature_drift
        if features is not None:  # None: the reference holds no feature sample, so nothing is tested
            tel.FEATURE_DRIFT_FEATURES.set(
                self.state, tel.ModelSegment(self.model, segment), float(len(features.moved))
            )
            self._publish_feature_statistics(segment, features.feature_names, features.statistics)
        held_drift = engine.held_drift
        if held_drift is not None:  # held inputs: their category distance, and their unseen share as "out of range"
            self._publish_feature_statistics(segment, held_drift.feature_names, held_drift.statistics)
            self._publish_feature_statistics(
                segment,
                held_drift.feature_names,
                held_drift.unseen_shares,
                metric=tel.INPUT_OUT_OF_RANGE_RATIO,
            )
        if engine.input_range is not None:
            self._publish_feature_statistics(
                segment,
                engine.input_range.feature_names,
                engine.input_range.shares,
                metric=tel.INPUT_OUT_OF_RANGE_RATIO,
            )
        gamma_now = float(np.nanmean(count.values("gamma")[-self.config.detectors.window :]))
        top = tuple(name for name, _ in report.top_features)
        outputs, inputs = detector_evidence(engine, baseline, count, self.config.detectors)
        harmful = report.verdict == Verdict.HARMFUL_SHIFT
        shown = (*outputs, *inputs) if harmful else inputs
        first = shown[0] if shown else None
        self._observe_alert(
            HARMFUL_ALERT,
            segment,
            harmful,
            gamma_now if first is None else first.window,
            baseline.gamma_mean if first is None else first.reference,
            now,
            top_features=top,
            detail=report.message,
            verdict=Verdict.HARMFUL_SHIFT.value,
            evidence=shown if harmful else (),
            value_name="" if first is None else first.measure,
        )
        self._observe_alert(
            INPUT_ALERT,
            segment,
            report.verdict == Verdict.INPUT_SHIFT,
            inputs[0].window if inputs else float("nan"),
            inputs[0].reference if inputs else float("nan"),
            now,
            top_features=top,
            detail=report.message,
            verdict=Verdict.INPUT_SHIFT.value,
            evidence=inputs if report.verdict == Verdict.INPUT_SHIFT else (),
            value_name=inputs[0].measure if inputs else "input window mean",
        )

    def _crossings(self, segment: str, engine: VerdictEngine, event: InferenceEvent) -> None:
        """Tell the observers which of ``segment``'s detectors turned on or off with this batch."""
        now_on = engine.alarms_on
        before = self._alarms_seen.get(segment, (False,) * len(now_on))
        self._alarms_seen[segment] = now_on
        if now_on == before:
            return
        saved, self._applying = self._applying, event
        try:
            for name, was, is_on in zip(engine.detector_names, before, now_on, strict=True):
                if was != is_on:
                    self._notify(segment, DetectorCrossing(name, is_on), self.clock.now())
        finally:
            self._applying = saved

    def _hold_harm(self, segment: str, report: VerdictReport, now: float) -> VerdictReport:
        """Verdict hysteresis: a harmful-shift holds until its output-side evidence has been off for
        ``resolve_after_seconds`` (the alert's own hysteresis), so one shift does not flap a segment between
        input-shift and harmful-shift. The held report names the detectors it last fired on."""
        if report.verdict == Verdict.HARMFUL_SHIFT:
            self._harm_seen[segment] = (now, report)
            return report
        seen = self._harm_seen.get(segment)
        if seen is None:
            return report
        at, harmful = seen
        if now - at < self.config.resolve_after_seconds and not self._quiet(segment, now):
            return dataclasses.replace(harmful, top_features=report.top_features, held_since=at)
        del self._harm_seen[segment]
        return report

    def _publish_feature_statistics(
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

    def _observe_alert(
        self,
        rule: str,
        segment: str,
        condition: bool,
        value: float,
        reference: float,
        now: float,
        *,
        top_features: Sequence[str] = (),
        detail: str = "",
        verdict: str = "harmful",
        evidence: Sequence[Evidence] = (),
        value_name: str = "",
        reference_name: str = "reference",
    ) -> None:
        ev = self.alerts.observe(
            rule,
            model=self.model,
            segment=segment,
            condition=condition and not self._quiet(segment, now),
            value=value,
            reference=reference,
            now_seconds=now,
            top_features=top_features,
            detail=detail,
            verdict=verdict,
            evidence=evidence,
            value_name=value_name,
            reference_name=reference_name,
        )
        self._publish(rule, segment, ev)

    def _publish(self, rule: str, segment: str, ev: AlertEvent | None) -> None:
        """The alert's firing gauge, and a transition's counter, log line and delivery."""
        firing = self.alerts.get(rule, model=self.model, segment=segment)
        is_firing = firing is not None and firing.state.value == "firing"
        tel.ALERTS_FIRING.set(
            self.state, tel.ModelSegmentAlertname(self.model, segment, rule), 1.0 if is_firing else 0.0
        )
        if ev is None:
            return
        if ev.alert.state.value == "firing":
            tel.ALERTS_FIRED_TOTAL.inc(self.state, tel.ModelAlertname(self.model, rule))
        self.fired.append(ev)
        self._notify(segment, ev, ev.at_seconds)
        log.warning(
            "alert " + ev.alert.state.value,
            extra={"alert": rule, "model": self.model, "segment": segment, "detail": ev.alert.detail},
        )
        if self.on_alert is not None:
            self.on_alert(ev)

    def _notify(self, segment: str, change: VerdictReport | AlertEvent | DetectorCrossing, now: float) -> None:
        """Call the observers (the observer hook); one that raises is logged, the batch goes on."""
        for observe in self.observers:
            try:
                observe(segment, change, now, self._applying)
            except Exception:
                log.exception("watch observer failed", extra={"model": self.model, "segment": segment})

    def _quiet(self, segment: str, now: float) -> bool:
        """No scored event of ``segment`` arrived within its shortest time window of the clock."""
        return now - self._arrived.get(segment, -math.inf) > self._quiet_seconds

    def tick(self) -> None:
        """Move the alerts on to the clock's now without new events: pending ones fire after ``for_seconds``,
        false or quiet ones resolve after ``resolve_after_seconds``. Cheap when no alert is pending or firing."""
        active = self.alerts.active()
        now = self.clock.now()
        if not active or not math.isfinite(now):
            return
        quiet = {(self.model, a.segment) for a in active if self._quiet(a.segment, now)}
        transitions = {(ev.alert.rule.name, ev.alert.segment): ev for ev in self.alerts.advance(now, quiet=quiet)}
        for alert in active:
            key = (alert.rule.name, alert.segment)
            self._publish(*key, transitions.get(key))

    def verdict(self, segment: str) -> Verdict | None:
        rep = self.last_reports.get(segment)
        return None if rep is None else rep.verdict


def _q(quantiles: Any, q: float) -> float:
    if not quantiles:
        return float("nan")
    if q in quantiles:
        return float(quantiles[q])
    keys = sorted(quantiles)
    return float(quantiles[min(keys, key=lambda k: abs(k - q))])
