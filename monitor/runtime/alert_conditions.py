"""The alert rules of a model's watch, when their conditions hold, and what their alerts say.

:class:`AlertConditions` owns the model's :class:`~monitor.alerts.AlertEngine` with its four rules and the
arrival time of each segment's last scored event. A segment with no arrival for its shortest time window is quiet:
its conditions count as false, so its alerts resolve on a stream that went silent. Each observation and each
:meth:`AlertConditions.tick` returns :class:`AlertUpdate` results (whether the alert fires now, and the transition
that just happened); the watch publishes them and delivers the transitions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Unpack

import numpy as np

from monitor.alert_types import Evidence
from monitor.alerts import AlertDetails, AlertEngine, AlertEvent, AlertRule
from monitor.drift.verdict import Verdict, VerdictEngine, VerdictReport
from monitor.rolling.reference import Reference
from monitor.runtime.evidence import detector_evidence

if TYPE_CHECKING:
    from monitor.runtime.watch import WatchConfig

HARMFUL_ALERT = "HarmonicHarmfulShift"
INPUT_ALERT = "HarmonicInputDrift"
SHADOW_ALERT = "HarmonicShadowDisagreement"
ACCURACY_ALERT = "HarmonicAccuracyDrop"
ERROR_ALERT = "HarmonicErrorRise"


#: what a drift alert adds where it quotes the label-free estimate: each estimate carries what it cannot see, in words
#: (docs/DESIGN.md, *One domain classifier*)
ESTIMATE_BLIND = (
    "the accuracy estimate reads the model's outputs: a change of the label given the inputs (concept shift, label "
    "noise) does not show in it"
)
#: the output-side signal families a harmful shift can fire on, in the order its ``signal`` label names them
HARM_SIGNALS = ("gamma", "flicker", "confidence", "margin", "accuracy")


def harm_signal(fired: Sequence[str]) -> str:
    """HarmonicHarmfulShift's ``signal`` label: the output-side families among the detectors that ``fired``.

    >>> harm_signal(("confidence_cusum", "features_ks")), harm_signal(("gamma_ks", "flicker_rate", "gamma_cusum"))
    ('confidence', 'gamma+flicker')
    >>> harm_signal(("accuracy_estimate",)), harm_signal(())
    ('accuracy', 'outputs')
    """
    families = {name.split("_", 1)[0] for name in fired}
    return "+".join(f for f in HARM_SIGNALS if f in families) or "outputs"


@dataclass(frozen=True, slots=True)
class AlertUpdate:
    """One rule of one segment after an observation or a tick: whether its alert is firing now, and the
    transition (fired or resolved) that just happened, if any."""

    rule: str
    segment: str
    firing: bool
    transition: AlertEvent | None


class AlertConditions:
    """The model's alert engine, its rules' conditions and the segments' last arrivals."""

    def __init__(self, model: str, config: WatchConfig) -> None:
        self.model = model
        self.config = config
        timing = (config.for_seconds, config.resolve_after_seconds)

        def rule(name: str, signal: str, severity: str) -> AlertRule:
            url = f"{config.runbook_url_base}#{name.lower()}" if config.runbook_url_base else ""
            return AlertRule(name, signal, *timing, severity=severity, runbook_url=url)

        self.engine = AlertEngine(
            [
                rule(HARMFUL_ALERT, "outputs", "warning"),
                rule(INPUT_ALERT, "features", "info"),
                rule(SHADOW_ALERT, "shadow_disagreement", "critical"),
                rule(ACCURACY_ALERT, "accuracy", "warning"),
                rule(ERROR_ALERT, "error", "warning"),
            ]
        )
        #: per segment, the clock's reading when its last scored event arrived (what "quiet" is judged on)
        self.arrived: dict[str, float] = {}
        #: a segment with no arrival for this long on the clock is quiet: its shortest time window
        self.quiet_seconds = min(config.window_seconds)

    def arrive(self, segments: Sequence[str], now: float) -> None:
        """Scored events of ``segments`` arrived at ``now`` (the clock's reading)."""
        for segment in segments:
            self.arrived[segment] = now

    def quiet(self, segment: str, now: float) -> bool:
        """No scored event of ``segment`` arrived within its shortest time window of the clock."""
        return now - self.arrived.get(segment, -math.inf) > self.quiet_seconds

    def observe(
        self,
        rule: str,
        segment: str,
        condition: bool,
        value: float,
        reference: float,
        now: float,
        **details: Unpack[AlertDetails],
    ) -> AlertUpdate:
        """Feed one evaluation of ``rule`` for ``segment`` (``details`` pass on to :meth:`AlertEngine.observe`); a
        quiet segment's condition counts as false."""
        ev = self.engine.observe(
            rule,
            model=self.model,
            segment=segment,
            condition=condition and not self.quiet(segment, now),
            value=value,
            reference=reference,
            now_seconds=now,
            **details,
        )
        return self._update(rule, segment, ev)

    def _update(self, rule: str, segment: str, ev: AlertEvent | None) -> AlertUpdate:
        firing = self.engine.get(rule, model=self.model, segment=segment)
        return AlertUpdate(rule, segment, firing is not None and firing.state.value == "firing", ev)

    def shadow(self, segment: str, count: Any, now: float) -> AlertUpdate:
        """HarmonicShadowDisagreement: the live server and the ONNX copy disagree on more than the threshold's share
        of the count window's labelled events (at least 50 of them)."""
        shadow_vals = count.values("shadow_disagreement")
        shadow_vals = shadow_vals[np.isfinite(shadow_vals)]
        shadow_rate = float(shadow_vals.mean()) if shadow_vals.size >= 50 else 0.0
        return self.observe(
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

    def accuracy(
        self, segment: str, condition: tuple[bool, float, str], reference_accuracy: float, now: float
    ) -> AlertUpdate:
        """HarmonicAccuracyDrop; ``condition``: :meth:`AccuracyEstimates.condition`'s (holds, estimate, detail)."""
        holds, value, detail = condition
        return self.observe(
            ACCURACY_ALERT,
            segment,
            holds,
            value,
            reference_accuracy,
            now,
            detail=detail,
            verdict=Verdict.HARMFUL_SHIFT.value,
            value_name="estimated accuracy",
            reference_name="reference accuracy",
        )

    def error(self, segment: str, condition: tuple[bool, float, str], reference_mae: float, now: float) -> AlertUpdate:
        """HarmonicErrorRise (a regressor); ``condition``: :meth:`AccuracyEstimates.condition`'s (holds, estimated
        MAE, detail)."""
        holds, value, detail = condition
        return self.observe(
            ERROR_ALERT,
            segment,
            holds,
            value,
            reference_mae,
            now,
            detail=detail,
            verdict=Verdict.HARMFUL_SHIFT.value,
            value_name="estimated MAE",
            reference_name="reference MAE",
        )

    def drift(
        self,
        segment: str,
        report: VerdictReport,
        engine: VerdictEngine,
        baseline: Reference,
        count: Any,
        now: float,
        estimate: Evidence | None = None,
        context: Evidence | None = None,
    ) -> list[AlertUpdate]:
        """HarmonicHarmfulShift and HarmonicInputDrift from the segment's verdict ``report``, with the evidence of
        its detectors (:func:`detector_evidence`) and, where the accuracy estimate is harm evidence, ``estimate``
        (first: what the loss is, in the model's own terms). ``context``, the estimate on enough events, ends the
        evidence of HarmonicInputDrift, and of HarmonicHarmfulShift where it is not its ``estimate`` (how much, as
        far as a label-free estimate can say: the detail says what it cannot see). HarmonicInputDrift holds while
        any input test fires, whatever the outputs say: a segment that escalates to harmful-shift keeps it firing
        (Alertmanager's inhibition rule hides it behind HarmonicHarmfulShift), never resolves it while the inputs
        are off. ``top_features``: the inputs that moved, those named in the evidence first."""
        outputs, inputs = detector_evidence(engine, baseline, count, self.config.detectors)
        if estimate is not None:
            outputs = (estimate, *outputs)
        detectors = set(engine.detector_names)
        moved = [e.detector for e in inputs if e.detector not in detectors]
        top = tuple(dict.fromkeys([*moved, *(name for name, _ in report.top_features)]))
        harmful = report.verdict == Verdict.HARMFUL_SHIFT
        extra = () if context is None else (context,)
        shown = (*outputs, *inputs, *(extra if estimate is None else ())) if harmful else ()
        blind = ESTIMATE_BLIND if estimate is not None or context is not None else ""
        first = shown[0] if shown else None
        held = (
            "held: its output-side evidence went off; it resolves once that has stayed off for "
            "alerts.resolve_after_seconds"
        )
        why = (held if report.held_since is not None else "") if outputs or inputs else report.message
        harmful_update = self.observe(
            HARMFUL_ALERT,
            segment,
            harmful,
            float(np.nanmean(count.values("gamma")[-self.config.detectors.window :]))
            if first is None
            else first.window,
            baseline.gamma_mean if first is None else first.reference,
            now,
            top_features=top,
            detail="; ".join(filter(None, (why, blind))),
            verdict=Verdict.HARMFUL_SHIFT.value,
            evidence=shown,
            value_name="γ window mean" if first is None else first.measure,
            signal=harm_signal(report.fired),
        )
        input_update = self.observe(
            INPUT_ALERT,
            segment,
            bool(inputs),
            inputs[0].window if inputs else float("nan"),
            inputs[0].reference if inputs else float("nan"),
            now,
            top_features=top,
            detail="; ".join((*report.not_harm, ESTIMATE_BLIND) if inputs and extra else report.not_harm),
            verdict=Verdict.INPUT_SHIFT.value,
            evidence=(*inputs, *extra) if inputs else (),
            value_name=inputs[0].measure if inputs else "input window mean",
        )
        return [harmful_update, input_update]

    def tick(self, now: float) -> list[AlertUpdate]:
        """Move the pending and firing alerts on to ``now`` without new events (quiet segments' conditions count as
        false): one update per such alert, with its transition if it fired or resolved. Cheap when none is
        active."""
        active = self.engine.active()
        if not active or not math.isfinite(now):
            return []
        quiet = {(self.model, a.segment) for a in active if self.quiet(a.segment, now)}
        transitions = {(ev.alert.rule.name, ev.alert.segment): ev for ev in self.engine.advance(now, quiet=quiet)}
        return [
            self._update(alert.rule.name, alert.segment, transitions.get((alert.rule.name, alert.segment)))
            for alert in active
        ]
