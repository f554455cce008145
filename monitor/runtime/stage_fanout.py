"""Where the stages' results go: the one place the pipeline sends what ingest, scoring and the labels returned.

:class:`~monitor.runtime.ingest.Ingest`, :class:`~monitor.runtime.scoring.Scoring` and
:class:`~monitor.runtime.labels.LabelStage` return named results (:mod:`monitor.runtime.stage_results`) and send
nothing themselves. :class:`StageFanout` writes their series into the metrics state; sends each scored event's
scores to the scores topic and each invalid record and unscorable event to the dead letters
(:class:`~monitor.runtime.dead_letters.DeadLetters`), both through the sink, before the pipeline's flush asks the
sink for delivery and before positions become committable; hands the scored predictions to the label stage; calls
the scored hooks (the probe scheduler's feed); and asks for a checkpoint when a warm-up completes. A scored hook or
the label stage that raises is logged; the batch stays applied and nothing is dead-lettered for it. The watches'
reports go out through :class:`~monitor.runtime.fanout.Fanout`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable

import numpy as np

from monitor import telemetry as tel
from monitor.exporters.prometheus import MetricsState
from monitor.logs import RateLimitedLogger
from monitor.runtime.dead_letters import DeadLetters
from monitor.runtime.labels import LabelStage
from monitor.runtime.stage_results import (
    Accepted,
    Evaluations,
    Ingested,
    Invalid,
    LabelReport,
    SamplingLevel,
    ScoredBatch,
    Unscorable,
)
from monitor.source.base import Sink

log = logging.getLogger("monitor.runtime.stage_fanout")

#: output columns whose flicker tolerance is a gauge (``output`` label "0" … "15"): bounded for wide outputs
FLICKER_TOLERANCE_COLUMNS = 16

#: called with every scored batch once applied (the probe scheduler's feed)
ScoredHook = Callable[[ScoredBatch], None]
#: called with what every accept did
AcceptedHook = Callable[[Accepted], None]


class StageFanout:
    """Sends scoring's results on: series into ``state``, scores and dead letters to ``sink``, predictions to
    ``labels``, scored batches to :attr:`scored_hooks`, a checkpoint request to ``checkpoint_soon``."""

    def __init__(
        self,
        state: MetricsState,
        sink: Sink | None,
        *,
        scores_topic: str | None,
        labels: LabelStage | None,
        dead_letters: DeadLetters,
        checkpoint_soon: Callable[[], None],
        invalid_log: RateLimitedLogger,
        models: Iterable[str],
    ) -> None:
        self.state = state
        self.sink = sink
        self.scores_topic = scores_topic if sink is not None else None
        self.labels = labels
        self.dead_letters = dead_letters
        self.checkpoint_soon = checkpoint_soon
        self._invalid_log = invalid_log
        #: called with every applied scored batch; one that raises is logged, the others still get the batch
        self.scored_hooks: list[ScoredHook] = []
        #: called with what every accept did (the probe scheduler counts the shadow checks' model rows); one that
        #: raises is logged
        self.accepted_hooks: list[AcceptedHook] = []
        for model in models:  # pre-registered at 0, so that rate() sees the first increment
            tel.EVENTS_CONSUMED_TOTAL.inc(state, tel.Model(model), 0.0)
            tel.SCORES_NONFINITE_TOTAL.inc(state, tel.Model(model), 0.0)

    # -- ingest ---------------------------------------------------------------------------------------------
    def ingested(self, ingested: Ingested) -> None:
        """Count the records read (one counter update per model per poll) and the KServe halves dropped, and
        dead-letter the invalid records."""
        # counted first: the records were read even when a dead letter cannot be sent (a sink that raises)
        for model, n in ingested.consumed.items():
            tel.EVENTS_CONSUMED_TOTAL.inc(self.state, tel.Model(model), float(n))
        for (model, reason), count in ingested.dropped.items():
            tel.KSERVE_DROPPED_TOTAL.set_total(self.state, tel.ModelReason(model, reason), float(count))
        for item in ingested.invalid:
            self.invalid(item)

    def invalid(self, item: Invalid) -> None:
        """Count the inputs it got wrong, then count, log and dead-letter it."""
        if item.error is not None:
            self.dead_letters.count_inputs(item.error)
        self.dead_letters.send(
            item.record, item.reason, item.detail, model=item.model, event=item.event, trace=item.trace
        )

    # -- accept ---------------------------------------------------------------------------------------------
    def accepted(self, accepted: Accepted) -> None:
        """Count what was sampled and shadow-checked, dead-letter what could not be, ask for a checkpoint after a
        warm-up."""
        for model, n in accepted.sampled.items():
            tel.EVENTS_SAMPLED_TOTAL.inc(self.state, tel.Model(model), float(n))
        for model, n in accepted.shadow_compared.items():
            tel.MODEL_EVALUATIONS_TOTAL.inc(self.state, tel.ModelPurpose(model, "shadow"), float(n))
            tel.SHADOW_COMPARED_TOTAL.inc(self.state, tel.Model(model), float(n))
            disagreed = float(accepted.shadow_disagreed.get(model, 0))
            tel.SHADOW_DISAGREEMENTS_TOTAL.inc(self.state, tel.Model(model), disagreed)
        for item in accepted.unscorable:
            self.unscorable(item)
        if accepted.warmed_up:
            self.checkpoint_soon()
        for hook in self.accepted_hooks:
            try:
                hook(accepted)
            except Exception:
                log.exception("accepted-events hook failed")

    # -- score ----------------------------------------------------------------------------------------------
    def scored(self, outcomes: Iterable[ScoredBatch | Unscorable]) -> None:
        """Send each outcome on as it comes (:meth:`~monitor.runtime.scoring.Scoring.score_pending`)."""
        for outcome in outcomes:
            if isinstance(outcome, ScoredBatch):
                self.scored_batch(outcome)
            else:
                self.unscorable(outcome)

    def scored_batch(self, batch: ScoredBatch) -> None:
        """The batch's scoring series; once applied, its hooks, its scores and its predictions for labels."""
        rt, name = batch.rt, batch.model
        self.evaluated(Evaluations(rt, "events", batch.evaluations))
        tel.SCORE_BATCH_DURATION_SECONDS.observe(self.state, tel.Model(name), [batch.score_seconds])
        self._count_nonfinite(batch)
        lag = np.array([max(0.0, batch.now - ev.timestamp_seconds) for ev in batch.events])
        tel.EVENT_LAG_SECONDS.observe(self.state, tel.Model(name), lag)
        if not batch.applied:
            return
        for hook in self.scored_hooks:
            try:
                hook(batch)
            except Exception:  # a probe-scheduler bug must not take the events with it
                log.exception("scored-batch hook failed; the batch is applied", extra={"model": name})
        if self.scores_topic:
            self._publish_scores(batch)
        if self.labels is not None and rt.model.kind == "classifier":
            try:
                report = self.labels.remember(rt, batch.events, batch.rows, batch.result, batch.held)
            except Exception:  # their labels will go unmatched; the scores stand
                log.exception("keeping predictions for delayed labels failed", extra={"model": name})
            else:
                self.labelled(report)

    # -- labels ---------------------------------------------------------------------------------------------
    def labelled(self, report: LabelReport) -> None:
        """The label stage's series: labels read and invalid (logged), rows evaluated, the labelled windows."""
        if report.consumed:
            tel.LABELS_CONSUMED_TOTAL.inc(self.state, tel.NoLabels(), float(report.consumed))
        for reason, detail in report.invalid:
            tel.LABELS_INVALID_TOTAL.inc(self.state, tel.Reason(reason))
            self._invalid_log.warning("label-" + reason, "invalid label", reason=reason, error=detail)
        for model, rows in report.evaluations.items():
            tel.MODEL_EVALUATIONS_TOTAL.inc(self.state, tel.ModelPurpose(model, "labels"), rows)
        for w in report.windows:
            tel.LABELS_JOINED_TOTAL.inc(self.state, tel.Model(w.model), float(w.joined))
            tel.WINDOW_ACCURACY.set(self.state, tel.ModelSegmentWindow(w.model, "all", w.window), w.accuracy)
            tel.RESILIENCE.set(self.state, tel.Model(w.model), w.resilience)
            tel.RELIABILITY.set(self.state, tel.Model(w.model), w.reliability)
            if w.composite is not None:
                tel.ROBUSTNESS_COMPOSITE.set(self.state, tel.Model(w.model), w.composite)
        if report.unmatched_total is not None:
            tel.LABELS_UNMATCHED_TOTAL.set_total(self.state, tel.NoLabels(), report.unmatched_total)

    def evaluated(self, evaluations: Evaluations) -> None:
        """Model rows evaluated under a purpose, and the scorer's scales and flicker tolerance they were scored at."""
        rt = evaluations.rt
        assert rt.scorer is not None
        tel.MODEL_EVALUATIONS_TOTAL.inc(
            self.state, tel.ModelPurpose(rt.name, evaluations.purpose), float(evaluations.rows)
        )
        if rt.scorer.flicker_tolerance is not None:  # a regressor's flip threshold in output units
            for column, tolerance in enumerate(rt.scorer.flicker_tolerance[:FLICKER_TOLERANCE_COLUMNS]):
                tel.FLICKER_TOLERANCE.set(self.state, tel.ModelOutput(rt.name, str(column)), float(tolerance))
        # the σ and r scored at: fixed settings or chosen from the reference (monitor/signals/scales.py)
        tel.SCORING_SCALE.set(self.state, tel.ModelScale(rt.name, "sigma"), rt.scorer.config.sigma)
        tel.SCORING_SCALE.set(self.state, tel.ModelScale(rt.name, "radius"), rt.scorer.config.radius)

    def unscorable(self, item: Unscorable) -> None:
        ev = item.event
        self.dead_letters.send(item.record, "unscorable", item.error, model=ev.model, event=ev, trace=item.traceback)

    def sampling(self, levels: Iterable[SamplingLevel]) -> None:
        """Each model's sampled fraction and the sampler's capacity for it."""
        for level in levels:
            tel.EVENTS_SAMPLED_RATIO.set(self.state, tel.Model(level.model), level.fraction)
            if level.capacity is not None:
                tel.SAMPLER_CAPACITY_EVENTS_PER_SECOND.set(self.state, tel.Model(level.model), level.capacity)

    def _count_nonfinite(self, batch: ScoredBatch) -> None:
        """Valid events whose γ came out NaN or ±inf: the model's own outputs were not finite at the event or around
        it (an overflow at extreme inputs). Their γ stays out of the histograms and the windows' statistics, so they are
        counted here, and logged (rate-limited): a model that breaks down at some inputs is itself a robustness
        finding."""
        bad = batch.nonfinite
        if bad.size:
            model = batch.model
            tel.SCORES_NONFINITE_TOTAL.inc(self.state, tel.Model(model), float(bad.size))
            self._invalid_log.warning(
                "nonfinite-" + model,
                "model outputs not finite at valid events; their scores are left out of histograms and windows",
                model=model,
                events=int(bad.size),
                event_ids=[batch.events[i].event_id for i in bad[:3]],
            )

    def _publish_scores(self, batch: ScoredBatch) -> None:
        topic, sink, result = self.scores_topic, self.sink, batch.result
        assert topic is not None and sink is not None
        for i, ev in enumerate(batch.events):
            doc = {
                "id": ev.event_id,
                "model": ev.model,
                "model_version": ev.model_version,
                "segment": ev.segment,
                "ts": ev.timestamp_seconds,
                "gamma": _num(result.gamma[i]),
                "flicker": _num(result.flicker[i]),
                "p_adj": _num(result.p_adj[i]),
                "predicted_class": int(result.predicted_class[i]),
                "probability": _num(result.probability[i]),
                "margin": _num(result.margin[i]),
            }
            sink.send(topic, json.dumps(doc).encode(), key=ev.event_id.encode())


def _num(v: float) -> float | None:
    return None if not np.isfinite(v) else float(v)
