"""What a model's watch produced since its report was last taken (:meth:`ModelWatch.take_report`).

A :class:`WatchReport` holds two ordered lists of named records. ``series``: the values the telemetry writes
(:meth:`~monitor.runtime.watch_metrics.WatchMetrics.publish`), each taken when the watch computed it, in the order it
computed them (a verdict's series are cleared before they are set again; a model version's counters are written in
event order). ``changes``: what a reader of the stream's story wants (``replay``'s timeline): verdict changes,
detector crossings and alert transitions, each with the time it happened and the event that decided it. The alert
transitions are also what delivery sends (:attr:`WatchReport.alerts`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.alerts import AlertEvent
from monitor.drift.base import DriftState, WindowedTest
from monitor.drift.slots import InputValues as InputValues
from monitor.drift.verdict import Verdict, VerdictEngine, VerdictReport
from monitor.events import InferenceEvent
from monitor.rolling.windows import SignalBatch
from monitor.runtime.alert_conditions import AlertUpdate
from monitor.runtime.verdicts import DetectorCrossing

# -- series: what the telemetry writes ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Mistimed:
    """A batch's events placed at the watermark from beyond the skew bound (future timestamps) and its late ones."""

    future: int
    late: int


@dataclass(frozen=True, slots=True)
class Scored:
    """A scored batch: its valid events' signals (``batch``) and every event with whether it was valid (``ok``)."""

    batch: SignalBatch
    events: Sequence[InferenceEvent]
    ok: NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class GammaCells:
    """The events the Gamma Map added per (segment, p_bin, gamma_bin)."""

    added: dict[tuple[str, str, str], float]


@dataclass(frozen=True, slots=True)
class WindowValues:
    """A segment's windows at an evaluation: ``{window name: WindowSnapshot}``."""

    segment: str
    snapshots: dict[str, Any]


@dataclass(frozen=True, slots=True)
class AccuracyValues:
    """A segment's accuracy estimates at an evaluation: ``{window name: the estimate's result}``."""

    segment: str
    estimates: dict[str, dict[str, Any]]


@dataclass(frozen=True, slots=True)
class ReferenceAccuracy:
    """The labelled reference's accuracy (an accuracy fit was installed)."""

    accuracy: float


@dataclass(frozen=True, slots=True)
class ConfidenceHarm:
    """Whether a fall in the model's confidence is harm evidence in its verdicts (``drift.confidence_harm``)."""

    harm: bool


@dataclass(frozen=True, slots=True)
class ReferenceMeans:
    """The model-wide reference's means (a reference was installed)."""

    gamma_mean: float
    flicker_mean: float


@dataclass(frozen=True, slots=True)
class WarmingUp:
    """Whether a segment is learning its own baseline."""

    segment: str
    warming: bool


@dataclass(frozen=True, slots=True)
class VerdictCleared:
    """A segment has no verdict any more (it learns a baseline of its own)."""

    segment: str


@dataclass(frozen=True, slots=True)
class NoEvidence:
    """A segment received no event for its shortest time window: its last verdict rests on nothing current, and
    the verdict gauge says ``no-evidence`` until an evaluation with events sets it again."""

    segment: str


@dataclass(frozen=True, slots=True)
class VerdictValues:
    """A segment's verdict at an evaluation, its detectors' states, the count of inputs that moved (None: no input
    is tested) and its per-input gauges, in the order they are written."""

    segment: str
    verdict: Verdict
    detectors: tuple[DriftState, ...]
    moved: int | None
    inputs: tuple[InputValues, ...]
    #: the window tests that have not run yet (fewer events than their first test needs): their statistics and
    #: per-input gauges are NaN, not the 0.0 they hold before a test
    untested: tuple[str, ...] = ()

    @classmethod
    def of(cls, segment: str, report: VerdictReport, engine: VerdictEngine) -> VerdictValues:
        """``segment``'s verdict and its engine's detectors and per-input gauges as they are now; ``moved`` counts
        the inputs the slots that name moved inputs as ``top_features`` flagged (the per-input KS)."""
        waiting = untested_windows(engine)
        inputs = tuple(
            g
            if slot.detector.state.name not in waiting
            else dataclasses.replace(g, values=np.full(len(g.names), np.nan))
            for slot in engine.slots
            for g in slot.gauges()
        )
        naming = [slot for slot in engine.slots if slot.spec.names_in == "top_features"]
        moved = sum(len(slot.moved) for slot in naming) if naming else None
        return cls(segment, report.verdict, engine.states, moved, inputs, tuple(waiting))


def untested_windows(engine: VerdictEngine) -> dict[str, dict[str, int]]:
    """The engine's window tests that have not run yet: ``{detector: {"scored": events fed, "needed": events its
    first test needs}}`` (a window test runs first at ``min_events``, then every ``every`` events)."""
    out: dict[str, dict[str, int]] = {}
    for slot in engine.slots:
        det, st = slot.detector, slot.detector.state
        if isinstance(det, WindowedTest) and st.events < det.min_events:
            out[st.name] = {"scored": int(st.events), "needed": int(det.min_events)}
    return out


#: one record of :attr:`WatchReport.series` (an alert's firing state is an :class:`AlertUpdate`)
SeriesUpdate = (
    Mistimed
    | Scored
    | GammaCells
    | WindowValues
    | AccuracyValues
    | ReferenceAccuracy
    | ConfidenceHarm
    | ReferenceMeans
    | WarmingUp
    | VerdictCleared
    | VerdictValues
    | NoEvidence
    | AlertUpdate
)

# -- changes: the stream's story --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VerdictChange:
    """A segment's verdict changed at ``at`` (the first report counts as a change from stable); ``event``: the event
    of the batch being applied at which the segment's detectors turned the verdict, else (the accuracy estimate or
    the hysteresis turned it) the batch's last event; None when the change happened outside a batch (a tick, a direct
    evaluation)."""

    segment: str
    report: VerdictReport
    at: float
    event: InferenceEvent | None


@dataclass(frozen=True, slots=True)
class DetectorCrossed:
    """One of a segment's detectors turned on or off at ``event``, the event of the batch whose value it crossed at
    (the batch's last where that cannot be told)."""

    segment: str
    crossing: DetectorCrossing
    at: float
    event: InferenceEvent | None


@dataclass(frozen=True, slots=True)
class AlertTransition:
    """An alert of a segment fired or resolved (``alert.at_seconds``); ``event`` as in :class:`VerdictChange`."""

    segment: str
    alert: AlertEvent
    event: InferenceEvent | None


WatchChange = VerdictChange | DetectorCrossed | AlertTransition


@dataclass(frozen=True, slots=True)
class WatchReport:
    """What one model's watch produced since its last report: the series to write and the changes to tell."""

    model: str
    series: tuple[SeriesUpdate, ...] = ()
    changes: tuple[WatchChange, ...] = ()

    @property
    def alerts(self) -> tuple[AlertEvent, ...]:
        """The alert transitions (fired / resolved), in the order they happened: what delivery sends."""
        return tuple(c.alert for c in self.changes if isinstance(c, AlertTransition))
