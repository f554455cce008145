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

The watch orders the work of its collaborators and reports what they return:
:class:`~monitor.runtime.baselines.SegmentBaselines` (the reference, the per-segment baselines and their warm-ups),
:class:`~monitor.runtime.verdicts.SegmentVerdicts` (the per-segment verdict engines and the verdict's hysteresis),
:class:`~monitor.runtime.alert_conditions.AlertConditions` (the alert rules, their conditions and the segments' quiet
time), with :class:`~monitor.runtime.accuracy_watch.AccuracyEstimates` and
:class:`~monitor.runtime.gamma_maps.SegmentGammaMaps`; :class:`~monitor.runtime.watch_evaluation.WatchEvaluation`
runs its evaluations and alert ticks. It writes no metric and delivers nothing: every method adds to
a pending :class:`~monitor.runtime.watch_report.WatchReport` (the series to write, the verdict changes, detector
crossings and alert transitions), and :meth:`ModelWatch.take_report` hands it over. The pipeline's
:class:`~monitor.runtime.fanout.Fanout` sends it on: series to :class:`~monitor.runtime.watch_metrics.WatchMetrics`,
alert transitions to delivery, the whole report to its subscribers (``replay``'s timeline).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.accuracy import DEFAULT_METHOD, EstimatorFit
from monitor.accuracy.confidence_errors import confidence_harm
from monitor.accuracy.regression import LossFit
from monitor.alerts import AlertEvent
from monitor.clock import WatermarkClock
from monitor.config import (
    AccuracySettings,
    AlertSettings,
    DriftSettings,
    ModelSettings,
    SegmentSettings,
    Settings,
    WindowSettings,
    setting_default,
)
from monitor.drift.categories import held_columns
from monitor.drift.verdict import Verdict, VerdictReport
from monitor.events import InferenceEvent, held_rows
from monitor.gammamap import GammaMap
from monitor.logs import RateLimitedLogger, with_fields
from monitor.rolling.reference import Reference
from monitor.rolling.segment_baselines import references_from_json
from monitor.rolling.windows import OTHER, SignalBatch, WindowSet
from monitor.runtime.accuracy_watch import AccuracyEstimates
from monitor.runtime.alert_conditions import ACCURACY_ALERT as ACCURACY_ALERT
from monitor.runtime.alert_conditions import HARMFUL_ALERT as HARMFUL_ALERT
from monitor.runtime.alert_conditions import INPUT_ALERT as INPUT_ALERT
from monitor.runtime.alert_conditions import SHADOW_ALERT as SHADOW_ALERT
from monitor.runtime.alert_conditions import AlertConditions
from monitor.runtime.baselines import SegmentBaselines
from monitor.runtime.gamma_maps import SegmentGammaMaps
from monitor.runtime.verdicts import DetectorCrossing as DetectorCrossing
from monitor.runtime.verdicts import SegmentVerdicts
from monitor.runtime.watch_evaluation import WatchEvaluation
from monitor.runtime.watch_report import (
    ConfidenceHarm,
    DetectorCrossed,
    GammaCells,
    Mistimed,
    ReferenceAccuracy,
    ReferenceMeans,
    Scored,
    SeriesUpdate,
    VerdictCleared,
    WarmingUp,
    WatchChange,
    WatchReport,
    untested_windows,
)
from monitor.signals.scorer import ScoreResult

log = logging.getLogger("monitor.runtime.watch")


@dataclass(frozen=True, slots=True)
class WatchConfig:
    window_seconds: tuple[float, ...] = tuple(float(w) for w in setting_default(WindowSettings, "time_windows_seconds"))
    count_window_events: int = setting_default(WindowSettings, "count_window_events")
    max_segments: int = setting_default(SegmentSettings, "max_segments")
    detectors: DriftSettings = DriftSettings()
    warmup_events: int = setting_default(ModelSettings, "warmup_events")
    for_seconds: float = setting_default(AlertSettings, "for_seconds")
    resolve_after_seconds: float = setting_default(AlertSettings, "resolve_after_seconds")
    shadow_disagreement_threshold: float = setting_default(AlertSettings, "shadow_disagreement_threshold")
    runbook_url_base: str = setting_default(AlertSettings, "runbook_url_base")
    #: the label-free accuracy estimate (``accuracy`` settings; used only with an :class:`EstimatorFit`)
    accuracy_method: str = DEFAULT_METHOD
    accuracy_tolerance: float = setting_default(AccuracySettings, "tolerance")
    error_tolerance: float = setting_default(AccuracySettings, "error_tolerance")
    accuracy_interval_seconds: float = setting_default(AccuracySettings, "interval_seconds")
    accuracy_sample_events: int = setting_default(AccuracySettings, "sample_events")
    accuracy_min_events: int = setting_default(AccuracySettings, "min_events")

    @classmethod
    def from_settings(
        cls, s: Settings, warmup_events: int = setting_default(ModelSettings, "warmup_events")
    ) -> WatchConfig:
        d = s.drift
        return cls(
            window_seconds=tuple(float(w) for w in s.windows.time_windows_seconds),
            count_window_events=s.windows.count_window_events,
            max_segments=s.segments.max_segments,
            detectors=d,
            warmup_events=warmup_events,
            for_seconds=s.alerts.for_seconds,
            resolve_after_seconds=s.alerts.resolve_after_seconds,
            shadow_disagreement_threshold=s.alerts.shadow_disagreement_threshold,
            runbook_url_base=s.alerts.runbook_url_base,
            accuracy_method=s.accuracy.method,
            accuracy_tolerance=s.accuracy.tolerance,
            error_tolerance=s.accuracy.error_tolerance,
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
    feature_names : names used in alerts for the features that moved (default f0, f1, …).
    clock : the clock windows and alerts read; each batch advances its watermark. Default: event time of this
        model's own events (a replay). The service shares one among all models (``clock`` attribute).
    """

    def __init__(
        self,
        model: str,
        config: WatchConfig,
        *,
        feature_names: Sequence[str] | None = None,
        clock: WatermarkClock | None = None,
    ) -> None:
        self.model = model
        self.clock = clock if clock is not None else WatermarkClock()
        self._mistimed_log = RateLimitedLogger(log)
        self.config = config
        #: what the watch produced since :meth:`take_report`: the series to write, the changes to tell
        self._series: list[SeriesUpdate] = []
        self._changes: list[WatchChange] = []
        #: element names of the held inputs (``monitor.drift.categories.held_element_names`` of the signature), for
        #: the category tests' names; None: ``input`` / ``input[i]``
        self.held_names: dict[str, list[str]] | None = None
        #: whether the model has class probabilities (a regressor has no confidence to count as harm evidence)
        self.classifier = True
        self.windows = WindowSet(
            window_seconds=config.window_seconds,
            count_size=config.count_window_events,
            max_models=1,
            max_segments=config.max_segments,
        )
        #: the alert rules, their conditions and the segments' last arrivals; ``alerts`` is their engine
        self.conditions = AlertConditions(model, config)
        self.alerts = self.conditions.engine
        #: the model-wide reference and each segment's own baseline, with the warm-ups learning them
        self.baselines = SegmentBaselines(config, tuple(feature_names) if feature_names else None)
        #: the per-segment verdict engines, judged against :attr:`baselines`
        self.verdicts = SegmentVerdicts(config, self.baselines)
        self._since_eval = 0
        #: the label-free accuracy estimate (:meth:`set_accuracy_fit`)
        self.accuracy = AccuracyEstimates(config, self.windows.buckets)
        #: the Gamma Map (classifiers): per segment, the last count_window_events events' (P, γ) cells
        self.gamma = SegmentGammaMaps(config.count_window_events, config.max_segments)
        #: the evaluations and alert ticks, reporting into this watch's pending report
        self.evaluation = WatchEvaluation(
            model, self.windows, self.accuracy, self.conditions, self.verdicts, self._series, self._changes
        )
        #: every alert transition (fired / resolved) of this watch, in order
        self.fired: list[AlertEvent] = self.evaluation.fired
        #: segments whose verdict gauge says no-evidence (quiet: no event for their shortest time window)
        self.no_evidence: set[str] = self.evaluation.no_evidence

    def take_report(self) -> WatchReport:
        """What the watch produced since the last call (series, verdict changes, detector crossings, alert
        transitions, each in order); the next report starts empty."""
        report = WatchReport(self.model, tuple(self._series), tuple(self._changes))
        self._series.clear()  # in place: the evaluation reports into the same lists
        self._changes.clear()
        return report

    # -- accuracy without labels (monitor/runtime/accuracy_watch.py) ------------------------------------------
    @property
    def accuracy_fit(self) -> EstimatorFit | LossFit | None:
        """The labelled reference's estimators the accuracy (a regressor's error) is estimated with (None: no
        estimate)."""
        return self.accuracy.fit or self.accuracy.loss_fit

    @property
    def last_estimates(self) -> dict[str, dict[str, dict[str, Any]]]:
        """segment → window → the last accuracy estimate."""
        return self.accuracy.last

    def set_accuracy_fit(self, fit: EstimatorFit | LossFit | None) -> None:
        """Estimate accuracy per window with ``fit`` (a labelled reference's, ``reference --labels``; a regressor's
        MAE and RMSE with a :class:`LossFit`); None: stop."""
        self.accuracy.set_fit(fit)
        if isinstance(fit, EstimatorFit):
            self._series.append(ReferenceAccuracy(fit.accuracy))
        harm, why = confidence_harm(
            self.config.detectors.confidence_harm,
            fit.confidence_errors if isinstance(fit, EstimatorFit) else None,
            self.config.accuracy_tolerance,
        )
        if not harm or isinstance(fit, EstimatorFit):
            log.info(f"model '{self.model}': {why}", extra={"model": self.model})
        self.verdicts.set_confidence_harm(harm)
        if self.classifier and not isinstance(fit, LossFit):
            self._series.append(ConfidenceHarm(harm))

    # -- reference and baselines (monitor/runtime/baselines.py) ----------------------------------------------
    @property
    def feature_names(self) -> tuple[str, ...] | None:
        """Names used in alerts for the features that moved (None: f0, f1, …); baselines built later carry them."""
        return self.baselines.feature_names

    @feature_names.setter
    def feature_names(self, names: tuple[str, ...] | None) -> None:
        self.baselines.feature_names = names

    @property
    def reference(self) -> Reference | None:
        """The model-wide reference (None until reference data, a saved state or the warm-up gives one)."""
        return self.baselines.reference

    @property
    def has_reference(self) -> bool:
        return self.baselines.reference is not None

    @property
    def segment_references(self) -> dict[str, Reference]:
        """segment → its own baseline: from reference data that carries the segment, or learned by its warm-up."""
        return self.baselines.segment_references

    @property
    def segmented(self) -> bool:
        """A named segment (not ``other``) was seen: ``other`` is then a population of its own."""
        return self.baselines.segmented

    @property
    def baselines_version(self) -> int:
        """Changes whenever a segment gets a baseline: the pipeline rewrites its baselines file only then."""
        return self.baselines.version

    @property
    def warming_up(self) -> dict[str, dict[str, int]]:
        """The segments still learning their baseline: ``{segment: {"events": seen, "of": needed}}``."""
        return self.baselines.warming_up

    @property
    def untested_windows(self) -> dict[str, dict[str, dict[str, int]]]:
        """Per judged segment, its window tests that have not run yet: ``{segment: {detector: {"scored", "needed"}}}``
        (their ``harmonic_drift_statistic`` is NaN until then)."""
        return {seg: w for seg, eng in self.verdicts.engines.items() if (w := untested_windows(eng))}

    def baseline(self, segment: str) -> Reference | None:
        """The reference ``segment`` is judged against (:meth:`SegmentBaselines.baseline`); None while it warms up."""
        return self.baselines.baseline(segment)

    def set_reference(
        self,
        rows: NDArray[np.float64],
        result: ScoreResult,
        segments: NDArray[np.str_] | None = None,
        held: dict[str, NDArray[np.str_]] | None = None,
    ) -> None:
        """The model-wide reference from scored reference rows; with ``segments`` (one label per row: reference data
        that carries the segment) also each segment's own baseline (:func:`segment_references`)."""
        refs = self.baselines.scored(rows, result, segments, held)
        if refs.segments is not None:
            self.install_segment_references(refs.segments)
        self.install_reference(refs.reference)

    def set_held_tables(self, held: dict[str, NDArray[np.str_]], segments: NDArray[np.str_] | None = None) -> None:
        """Count the held inputs' category tables over all reference rows (``held``: one column per held element;
        ``segments``: each row's segment, for the per-segment baselines), replacing those of the scored sample."""
        self.baselines.set_held_tables(held, segments)
        for segment in list(self.verdicts.engines):
            self.verdicts.drop(segment)  # rebuilt on the next batch, with the tables

    def install_reference(self, ref: Reference) -> None:
        """The model-wide reference (the baseline of an unsegmented stream); segments with their own keep theirs."""
        self.baselines.set_reference(ref)
        self.gamma.set_edges(ref.gamma_edges)  # the model's Gamma Map edges come with its reference
        for segment in [s for s in self.verdicts.engines if s not in self.segment_references]:
            self.verdicts.drop(segment)
        self._series.append(ReferenceMeans(ref.gamma_mean, ref.flicker_mean))

    def install_segment_references(self, refs: dict[str, Reference]) -> None:
        """Give segments their own baselines (reference data that carries the segment, or a saved state)."""
        self.baselines.install(refs)
        for segment in refs:
            self.verdicts.drop(segment)
            self._series.append(WarmingUp(segment, False))
        if refs:
            log.info("per-segment baselines installed", extra={"model": self.model, "segments": sorted(refs)})

    def _segment_warm_up(
        self, segment: str, batch: SignalBatch, held: dict[str, NDArray[np.str_]] | None = None
    ) -> None:
        """Feed ``segment``'s warm-up; at ``warmup_events`` events its baseline is built and its detectors start."""
        step = self.baselines.segment_warm_up(segment, batch, held)
        if step.started:
            log.info(
                "segment warming up its own baseline",
                extra={"model": self.model, "segment": segment, "events": self.config.warmup_events},
            )
        if step.built is not None:
            self.install_segment_references({segment: step.built})
            log.info("segment baseline built from its warm-up", extra={"model": self.model, "segment": segment})
        else:
            self._series.append(WarmingUp(segment, True))

    def _become_segmented(self) -> None:
        """A named segment appeared: ``other`` is no longer the whole stream, so it stops using the model-wide
        reference and warms up a baseline of its own (unless the reference data gave it one)."""
        self.baselines.segmented = True
        if OTHER not in self.segment_references and self.verdicts.forget(OTHER):
            self._series.append(VerdictCleared(OTHER))
            log.info(
                "segment 'other' now learns its own baseline (named segments appeared)", extra={"model": self.model}
            )

    def dump(self, *, segments: bool = True, encoded: bool = False) -> dict[str, Any]:
        """The reference and, unless ``segments`` is False, the per-segment baselines (the pipeline keeps those in a
        file of their own, rewritten only when one changes: :meth:`dump_baselines`); ``encoded``: see
        :meth:`Baselines.dump`."""
        return self.baselines.dump(segments=segments, encoded=encoded)

    def dump_baselines(self) -> dict[str, Any]:
        """The per-segment baselines as JSON (``{segment: reference dict}``)."""
        return self.baselines.dump_baselines()

    def restore(self, data: dict[str, Any]) -> None:
        if data.get("reference"):
            self.install_reference(Reference.from_dict(data["reference"]))
            log.info("reference restored from state", extra={"model": self.model})
        self.baselines.segmented = bool(data.get("segmented", False))
        self.install_segment_references(references_from_json(data.get("segments", {})))

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

        If it raises, the events' counts this call reported (scored, mistimed) are taken back: the pipeline then
        tries each event alone and dead-letters those that fail again, so an event is counted once, by the attempt
        that applies it, or not at all.
        """
        start = len(self._series)
        try:
            self._update(events, rows, result, shadow, uniform)
        except BaseException:
            self._series[start:] = [s for s in self._series[start:] if not isinstance(s, Scored | Mistimed)]
            raise

    def _update(
        self,
        events: Sequence[InferenceEvent],
        rows: NDArray[np.float64],
        result: ScoreResult,
        shadow: NDArray[np.float64],
        uniform: NDArray[np.bool_] | None,
    ) -> None:
        ok = result.valid
        # timestamps ahead of the watermark are placed at it, those beyond the skew bound counted (monitor/clock.py):
        # one producer's stray, creeping or fast clock cannot move this model's windows and alerts past every event
        placed = self.clock.place(np.array([ev.timestamp_seconds for ev in events], dtype=np.float64))
        ts = placed.seconds
        self._series.append(Mistimed(placed.future, placed.late))
        if placed.future:
            self._mistimed_log.warning(
                "future_timestamp",
                with_fields(
                    "event timestamps ahead of time; placed at the watermark (producer clocks?)", model=self.model
                ),
                model=self.model,
                events=placed.future,
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
        self._series.append(Scored(batch, events, ok))
        now = self.clock.advance(float(batch.timestamps_seconds.max())).now()
        self.conditions.arrive([str(seg) for seg in np.unique(batch.segments)], now)
        drift = batch if uniform is None else full.take(ok & uniform)
        drift_held = _held_inputs(events, ok if uniform is None else ok & uniform, self.held_names)
        if drift.size:
            self._series.append(GammaCells(self.gamma.update(drift)))
            self.windows.update(self.model, drift)
            if self.accuracy.samples is not None:
                sel = ok if uniform is None else ok & uniform
                value = None if result.value is None else result.value[sel]
                self.accuracy.keep({seg for _, seg in self.windows.keys}, drift, result.probability[sel], value)
        # a detector of a segment this batch fed turned on or off: the verdict is evaluated now, not at the next
        # `every` events, so a change is reported at the batch that caused it (the cadence paces the gauges)
        flipped = False
        if self.reference is None and drift.size:
            ref = self.baselines.warm_up(drift, drift_held)
            if ref is not None:
                self.install_reference(ref)
                log.info("reference built from the warm-up window", extra={"model": self.model})
        places = np.flatnonzero(ok if uniform is None else ok & uniform)  # each drift event's place in ``events``
        if drift.size:
            flipped = self._feed_segments(drift, drift_held, events, places)
        self._since_eval += batch.size
        if self._since_eval >= self.config.detectors.every or flipped:
            self._since_eval = 0
            self.evaluation.applying = events[-1]  # the event the changes name, unless their detectors name another
            try:
                self.evaluate(now)
            finally:
                self.evaluation.applying = None
                self.evaluation.segment_events.clear()
        else:
            self.evaluation.segment_events.clear()

    def _feed_segments(
        self,
        drift: SignalBatch,
        drift_held: dict[str, NDArray[np.str_]] | None,
        events: Sequence[InferenceEvent],
        places: NDArray[np.intp],
    ) -> bool:
        """Feed each segment's events of the batch to its warm-up or its detectors; whether a detector's alarm
        differs from the last evaluation's. Detector crossings go to the report, each naming the event at which the
        detector crossed (``places``: each ``drift`` event's place in the batch's ``events``)."""
        flipped = False
        last = events[-1]
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
            fed = self.verdicts.feed(seg, drift.take(sel), seg_held)
            flipped = flipped or fed.flipped
            own = places[sel]
            self.evaluation.segment_events[seg] = (events, own)
            self._changes.extend(
                DetectorCrossed(seg, c, self.clock.now(), last if c.position is None else events[int(own[c.position])])
                for c in fed.crossings
            )
        return flipped

    # -- the Gamma Map (monitor/runtime/gamma_maps.py) -----------------------------------------------------
    def gamma_maps(self) -> dict[str, Any]:
        """The model's Gamma Map for ``/gammamap`` (:meth:`SegmentGammaMaps.to_json`) against its reference, with
        ``segment_references`` (each segment's own baseline's map, where it has one) and ``classes`` (K as the
        reference's predicted classes show it, for the drawing's P axis from 1/K; None without a reference)."""
        own = {
            seg: ref.gamma_map.to_json()
            for seg, ref in sorted(self.baselines.segment_references.items())
            if ref.gamma_map is not None
        }
        ref = self.reference
        classes = max(ref.class_mix) + 1 if ref is not None and ref.class_mix else None
        return {**self.gamma.to_json(ref), "segment_references": own, "classes": classes}

    def gamma_map_pair(self, segment: str | None = None) -> tuple[GammaMap, GammaMap | None]:
        """(live, reference) maps for drawing (:meth:`SegmentGammaMaps.pair`): a segment's against its own baseline
        where it has one with a map (from reference data carrying the segment, or its warm-up), else against the
        model-wide reference."""
        own = None if segment is None else self.baselines.segment_references.get(segment)
        return self.gamma.pair(segment, own if own is not None and own.gamma_map is not None else self.reference)

    # -- evaluation (monitor/runtime/watch_evaluation.py) ---------------------------------------------------
    def evaluate(self, now: float | None = None) -> None:
        """Report window values, verdicts and alert transitions for every segment, at ``now`` (default: the clock).

        Time windows end at the event-time watermark (at most ``now``): during a backlog they describe the events
        being read, not the empty last minute of wall time.
        """
        self.evaluation.evaluate(self.clock.now() if now is None else now, self.clock.watermark)

    def tick(self) -> None:
        """Move the alerts on to the clock's now without new events: pending ones fire after ``for_seconds``,
        false or quiet ones resolve after ``resolve_after_seconds``; a segment gone quiet (no event for its shortest
        time window) has its verdict gauge say no-evidence. Cheap when no alert is pending or firing."""
        self.evaluation.tick(self.clock.now())

    @property
    def last_reports(self) -> dict[str, VerdictReport]:
        """segment → its verdict report at the last evaluation."""
        return self.verdicts.last_reports

    def verdict(self, segment: str) -> Verdict | None:
        return self.verdicts.verdict(segment)


def _held_inputs(
    events: Sequence[InferenceEvent], keep: NDArray[np.bool_], held_names: dict[str, list[str]] | None
) -> dict[str, NDArray[np.str_]] | None:
    """The held input values (string, int, bool inputs; fixed_features) of the rows ``keep`` selects, one column per
    element; None where the events carry none."""
    held = held_rows(events) if events and events[0].held is not None else None
    if held is None or len(held) != len(events):
        return None
    return {name: col[keep] for name, col in held_columns(held.values, held_names).items()}
