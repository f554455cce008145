"""A watch's evaluations (:meth:`~monitor.runtime.watch.ModelWatch.evaluate`) and alert ticks
(:meth:`~monitor.runtime.watch.ModelWatch.tick`): per segment its window values, accuracy estimate, verdict and alert
transitions, reported into the watch's pending :class:`~monitor.runtime.watch_report.WatchReport`."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from monitor.alerts import AlertEvent
from monitor.events import InferenceEvent
from monitor.logs import with_fields
from monitor.rolling.windows import WindowSet
from monitor.runtime.accuracy_watch import AccuracyEstimates
from monitor.runtime.alert_conditions import AlertConditions, AlertUpdate
from monitor.runtime.verdicts import SegmentVerdicts
from monitor.runtime.watch_report import (
    AccuracyValues,
    AlertTransition,
    NoEvidence,
    SeriesUpdate,
    VerdictChange,
    VerdictValues,
    WatchChange,
    WindowValues,
)

#: its lines are the watch's (operators filter on the logger name)
log = logging.getLogger("monitor.runtime.watch")


class WatchEvaluation:
    """The evaluations of one model's watch, over its collaborators; what it decides goes into ``series`` and
    ``changes`` (the watch's pending report, shared).

    Parameters
    ----------
    model : the model name.
    windows, accuracy, conditions, verdicts : the watch's windows, accuracy estimates, alert conditions and
        per-segment verdict engines.
    series, changes : the lists the watch's pending report is made of.
    """

    def __init__(
        self,
        model: str,
        windows: WindowSet,
        accuracy: AccuracyEstimates,
        conditions: AlertConditions,
        verdicts: SegmentVerdicts,
        series: list[SeriesUpdate],
        changes: list[WatchChange],
    ) -> None:
        self.model = model
        self.windows = windows
        self.accuracy = accuracy
        self.conditions = conditions
        self.verdicts = verdicts
        self._series = series
        self._changes = changes
        #: every alert transition (fired / resolved), in order
        self.fired: list[AlertEvent] = []
        #: segments whose verdict gauge says no-evidence (quiet: no event for their shortest time window)
        self.no_evidence: set[str] = set()
        #: the last event of the batch being applied (the changes it decided name it); None outside an update
        self.applying: InferenceEvent | None = None
        #: per segment, the events of the batch being applied and the places of the segment's among them, in the
        #: order its detectors took them: a verdict change its detectors turned names the event at which they did
        self.segment_events: dict[str, tuple[Sequence[InferenceEvent], NDArray[np.intp]]] = {}

    def evaluate(self, now: float, watermark: float) -> None:
        """Report window values, verdicts and alert transitions for every segment, at ``now``; time windows end at
        the event-time ``watermark`` (at most ``now``)."""
        windows_end = min(now, watermark) if math.isfinite(watermark) else now
        estimating = self.accuracy.due(now)
        for model, segment in self.windows.keys:
            self._series.append(WindowValues(segment, self.windows.snapshot(model, segment, windows_end)))
            if estimating:
                self._series.append(AccuracyValues(segment, self.accuracy.estimate(segment, windows_end)))
            self._evaluate_segment(segment, now)
            if self.accuracy.fit is not None:  # each segment against its own reference where the reference has it
                ref = self.accuracy.reference(segment)["accuracy"]
                self._alert(self.conditions.accuracy(segment, self.accuracy.condition(segment), ref, now))
            elif self.accuracy.loss_fit is not None:
                ref = self.accuracy.reference(segment)["mae"]
                self._alert(self.conditions.error(segment, self.accuracy.condition(segment), ref, now))

    def _evaluate_segment(self, segment: str, now: float) -> None:
        """``segment``'s shadow alert, and where it has a baseline its verdict and drift alerts."""
        count = self.windows.count_window(self.model, segment)
        self._alert(self.conditions.shadow(segment, count, now))
        # output-side evidence besides the detectors: the accuracy estimate's alert condition
        accuracy_drop, estimate, _ = (
            self.accuracy.condition(segment)
            if self.accuracy.fit is not None or self.accuracy.loss_fit is not None
            else (False, float("nan"), "")
        )
        fell = self.accuracy.fit is not None and self.accuracy.fell(segment)
        if self.accuracy.fit is None:
            estimate = float("nan")  # a regressor's estimate is an error (MAE), not the accuracy a verdict quotes
        quiet = self.conditions.quiet(segment, now)
        assessed = self.verdicts.assess(
            segment, accuracy_drop=accuracy_drop, estimate_fell=fell, accuracy_estimate=estimate, now=now, quiet=quiet
        )
        if assessed is None:
            return  # no baseline yet (warming up): no verdict, never one against another population's baseline
        if assessed.changed:
            own = self.segment_events.get(segment)
            at = self.applying if own is None or assessed.position is None else own[0][int(own[1][assessed.position])]
            self._changes.append(VerdictChange(segment, assessed.report, now, at))
        self._series.append(VerdictValues.of(segment, assessed.report, assessed.engine))
        self.no_evidence.discard(segment)
        if quiet:
            self._no_evidence(segment)
        # the estimate leads a harmful shift it made; every drift alert quotes it as how much, where it has one
        quoted = self.accuracy.evidence(segment) if "accuracy_estimate" in assessed.report.fired else None
        context = self.accuracy.context(segment)
        for update in self.conditions.drift(
            segment, assessed.report, assessed.engine, assessed.baseline, count, now, estimate=quoted, context=context
        ):
            self._alert(update)

    def _alert(self, update: AlertUpdate) -> None:
        """Report the alert's firing state and its transition (fired / resolved), if any, and log the transition."""
        self._series.append(update)
        ev = update.transition
        if ev is None:
            return
        self.fired.append(ev)
        self._changes.append(AlertTransition(update.segment, ev, self.applying))
        where = {"alert": update.rule, "model": self.model, "segment": update.segment}
        log.warning(
            f"{with_fields('alert ' + ev.alert.state.value, **where)}: {ev.alert.finding}",
            extra={**where, "detail": ev.alert.detail},
        )

    def tick(self, now: float) -> None:
        """Move the alerts on to ``now`` without new events; a segment gone quiet has its verdict gauge say
        no-evidence (:meth:`ModelWatch.tick`)."""
        for update in self.conditions.tick(now):
            self._alert(update)
        for segment in self.verdicts.last_reports:
            if segment not in self.no_evidence and self.conditions.quiet(segment, now):
                self._no_evidence(segment)

    def _no_evidence(self, segment: str) -> None:
        """``segment``'s verdict gauge says no-evidence until an evaluation with its events sets it again."""
        self.no_evidence.add(segment)
        self._series.append(NoEvidence(segment))
