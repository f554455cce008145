"""The per-segment drift verdicts of a model's watch.

:class:`SegmentVerdicts` keeps one :class:`~monitor.drift.verdict.VerdictEngine` per segment that has a baseline
(:class:`~monitor.runtime.baselines.SegmentBaselines`), feeds it each batch's events of that segment, and assesses
its verdict at each evaluation with the verdict's hysteresis: a harmful-shift holds until its output-side evidence
has been off for ``resolve_after_seconds``. Its methods return what happened (:class:`SegmentFeed`,
:class:`Assessment`); the watch reports them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from monitor.drift.verdict import HarmEvidence, Verdict, VerdictEngine, VerdictReport
from monitor.errors import MonitorError
from monitor.rolling.reference import Reference
from monitor.rolling.windows import SignalBatch
from monitor.runtime.baselines import SegmentBaselines

if TYPE_CHECKING:
    from monitor.runtime.watch import WatchConfig


@dataclass(frozen=True, slots=True)
class DetectorCrossing:
    """A detector of a segment turned on (crossed its threshold) or off, at the batch that did it: what the
    timeline reports besides verdict changes, which the verdict's hysteresis may hold back. ``position``: the event
    of the segment's part of the batch at which it crossed (0-based; None: its last)."""

    detector: str
    on: bool
    position: int | None = None


@dataclass(frozen=True, slots=True)
class SegmentFeed:
    """What one batch did to a segment's detectors: whether their alarms differ from the last evaluation's (the
    verdict is then evaluated at once, not at the next ``every`` events), and which detectors turned on or off
    with it."""

    flipped: bool
    crossings: tuple[DetectorCrossing, ...]


@dataclass(frozen=True, slots=True)
class Assessment:
    """A segment's verdict at an evaluation: the report (after the hysteresis), whether its verdict changed from
    the previous report's (the first report counts as a change from stable), the engine and the baseline it was
    judged against. ``position``: where the verdict changed within the segment's part of the last batch fed — the
    event at which its detectors' alarms turned it (:meth:`VerdictEngine.settled_at`); None: at the batch's end (the
    accuracy estimate or the hysteresis turned it, or no change)."""

    report: VerdictReport
    changed: bool
    engine: VerdictEngine
    baseline: Reference
    position: int | None = None


class SegmentVerdicts:
    """Per segment: its verdict engine, its last report and the state of its hysteresis."""

    def __init__(self, config: WatchConfig, baselines: SegmentBaselines) -> None:
        self.config = config
        self.baselines = baselines
        self.engines: dict[str, VerdictEngine] = {}
        self.last_reports: dict[str, VerdictReport] = {}
        #: segment → its engine's ``alarms_on`` at the last evaluation
        self._alarms_at_eval: dict[str, tuple[bool, ...]] = {}
        #: segment → whether each of its detectors (by name) was on after the last batch (the detector crossings);
        #: by name, so that an engine started on a new baseline with other detectors is compared detector by detector
        self._alarms_seen: dict[str, dict[str, bool]] = {}
        #: segment → (clock reading of the last evaluation with output-side evidence, that harmful report): the
        #: verdict stays harmful-shift until that evidence has been off for ``resolve_after_seconds``
        self._harm_seen: dict[str, tuple[float, VerdictReport]] = {}
        #: segment → the accuracy estimate's harm evidence at the last evaluation (it holds until the next)
        self._harm_at_eval: dict[str, HarmEvidence] = {}
        #: whether a fall in confidence or margin is harm evidence for this model (:meth:`set_confidence_harm`)
        self.confidence_harm = True

    def set_confidence_harm(self, harm: bool) -> None:
        """Count a fall in confidence or margin as harm evidence (``harm``) or as fragility, and the accuracy
        estimate (read from the confidence) as harm evidence or not; engines started under the other rule start
        again on their baselines."""
        if harm != self.confidence_harm:
            self.confidence_harm = harm
            for segment in list(self.engines):
                self.drop(segment)

    def engine(self, segment: str) -> VerdictEngine:
        """``segment``'s engine, started on its baseline (which it must have) at the first call."""
        eng = self.engines.get(segment)
        if eng is None:
            ref = self.baselines.baseline(segment)
            assert ref is not None
            names = self.baselines.feature_names
            if ref.feature_names is None and names is not None and len(names) == ref.n_features:
                ref = dataclasses.replace(ref, feature_names=names)  # the model's names in alerts
            eng = self.engines[segment] = VerdictEngine(
                ref, self.config.detectors, confidence_harm=self.confidence_harm
            )
            self._alarms_at_eval[segment] = eng.alarms_on
        return eng

    def calibrate(self) -> int:
        """Calibrate the detectors of every baseline known now (the model-wide reference, the segments' own), as
        their engines will: the thresholds are cached (:func:`monitor.drift.calibrate.cached`), so a segment's first
        batch takes its engine at once instead of spending about a second calibrating with records in flight (a
        kill then catches them). A baseline the detectors refuse is left to its first batch, which meets the same
        error. Returns how many baselines were calibrated."""
        done = 0
        for ref in (self.baselines.reference, *self.baselines.segment_references.values()):
            if ref is None:
                continue
            try:
                VerdictEngine(ref, self.config.detectors, confidence_harm=self.confidence_harm)
            except MonitorError:
                continue
            done += 1
        return done

    def drop(self, segment: str) -> None:
        """Forget ``segment``'s engine: the next batch starts a new one on its (new) baseline."""
        self.engines.pop(segment, None)
        self._alarms_at_eval.pop(segment, None)

    def forget(self, segment: str) -> bool:
        """Drop ``segment``'s engine and last report, where it has an engine; whether it had."""
        if segment not in self.engines:
            return False
        self.drop(segment)
        self.last_reports.pop(segment, None)
        return True

    def feed(
        self,
        segment: str,
        drift: SignalBatch,
        held: dict[str, NDArray[np.str_]] | None,
    ) -> SegmentFeed:
        """Feed ``segment``'s events of a batch (``drift``, with their ``held`` input columns) to its engine."""
        eng = self.engine(segment).update(
            gamma=drift.gamma,
            flicker=drift.flicker,
            features=drift.features,
            confidence=drift.confidence,
            margin=drift.margin,
            held=held,
        )
        flipped = eng.alarms_on != self._alarms_at_eval[segment]
        return SegmentFeed(flipped, self._crossings(segment, eng))

    def _crossings(self, segment: str, engine: VerdictEngine) -> tuple[DetectorCrossing, ...]:
        """Which of ``segment``'s detectors turned on or off since its last batch (a detector new to it: since off),
        each at the event of the batch where it last crossed."""
        now_on = dict(zip(engine.detector_names, engine.alarms_on, strict=True))
        last_change = {n: c[-1] for n, c in zip(engine.detector_names, engine.changes, strict=True) if c}
        before = self._alarms_seen.get(segment, {})
        self._alarms_seen[segment] = now_on
        return tuple(
            DetectorCrossing(name, is_on, last_change.get(name))
            for name, is_on in now_on.items()
            if before.get(name, False) != is_on
        )

    def assess(
        self,
        segment: str,
        *,
        accuracy_drop: bool,
        now: float,
        quiet: bool,
        accuracy_estimate: float | None = None,
        estimate_fell: bool = False,
    ) -> Assessment | None:
        """``segment``'s verdict at ``now``; None while it has no baseline or no engine yet (warming up): it is
        never judged against another population's baseline. ``accuracy_drop``: the accuracy estimate's alert
        condition, harm evidence besides the detectors (``accuracy_estimate``: its estimate; ``estimate_fell``: the
        estimate itself below tolerance, harm evidence with moved inputs); ``quiet``: the segment has no current
        evidence."""
        baseline = self.baselines.baseline(segment)
        if baseline is None or segment not in self.engines:
            return None
        if not self.confidence_harm:
            # the run's estimate is read from the model's confidence: no more harm evidence than its fall
            accuracy_drop = estimate_fell = False
        engine = self.engines[segment]
        report = self._hold_harm(
            segment,
            engine.assess(
                accuracy_drop=accuracy_drop, accuracy_estimate=accuracy_estimate, estimate_fell=estimate_fell
            ),
            now,
            quiet,
        )
        self._alarms_at_eval[segment] = engine.alarms_on
        harm, harm_before = HarmEvidence(accuracy_drop, estimate_fell), self._harm_at_eval.get(segment, HarmEvidence())
        self._harm_at_eval[segment] = harm
        previous = self.last_reports.get(segment)
        self.last_reports[segment] = report
        changed = report.verdict != (Verdict.STABLE if previous is None else previous.verdict)
        # where in the batch the detectors turned the verdict; a harmful-shift released by the hysteresis turned at
        # the evaluation, on the clock
        held = previous is not None and previous.held_since is not None
        position = engine.settled_at(report.verdict, harm, harm_before) if changed and not held else None
        return Assessment(report, changed, engine, baseline, position)

    def _hold_harm(self, segment: str, report: VerdictReport, now: float, quiet: bool) -> VerdictReport:
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
        if now - at < self.config.resolve_after_seconds and not quiet:
            return dataclasses.replace(harmful, top_features=report.top_features, held_since=at)
        del self._harm_seen[segment]
        return report

    def verdict(self, segment: str) -> Verdict | None:
        rep = self.last_reports.get(segment)
        return None if rep is None else rep.verdict
