"""The pipeline's second seam: decoded events → warm-up, shadow check, sampling → micro-batches scored → windows.

:class:`Scoring` keeps each model's pending micro-batch. :meth:`Scoring.accept` feeds the warm-up window (a model
without a reference fits its standardizer on the first events), compares the live server's label with the ONNX
copy (shadow agreement) and asks the sampler which events to score. :meth:`Scoring.score_pending` scores
them in batches of at most ``batch.max_events`` rows and applies each result: the model's windows, detectors and
alerts (:class:`~monitor.runtime.watch.ModelWatch`), the scored hooks (the probe scheduler), the scores topic and
the predictions kept for delayed labels.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from monitor import telemetry as tel
from monitor.config import Settings
from monitor.drift.categories import held_columns
from monitor.events import InferenceEvent, feature_rows, held_rows
from monitor.exporters.prometheus import MetricsState
from monitor.logs import RateLimitedLogger
from monitor.model.signature import Held
from monitor.runtime.labels import LabelStage
from monitor.runtime.models import (
    HELD_SAMPLE_ROWS,
    ModelRuntime,
    Pending,
    read_reference_rows,
    read_segmented_reference_rows,
)
from monitor.sampler.base import Sampler
from monitor.signals.scorer import ScoreResult
from monitor.source.base import RawRecord, Sink

log = logging.getLogger("monitor.runtime.scoring")


class DeadLetter(Protocol):
    """:meth:`monitor.runtime.ingest.Ingest.dead_letter`: count, log and dead-letter one event."""

    def __call__(
        self,
        record: RawRecord | None,
        reason: str,
        detail: str,
        *,
        model: str = ...,
        event: InferenceEvent | None = ...,
        exc_info: bool = ...,
    ) -> None: ...


#: output columns whose flicker tolerance is a gauge (``output`` label "0" … "15"): bounded for wide outputs
FLICKER_TOLERANCE_COLUMNS = 16

#: called after every scored batch with (runtime, raw rows, result, now, held values, the events' segments): the
#: probe scheduler's feed
ScoredHook = Callable[[ModelRuntime, NDArray[np.float64], ScoreResult, float, Held | None, list[str]], None]


class UniformThinner:
    """Thins a class-stratified sample back to uniform inclusion for the windows and drift detectors.

    Stratified sampling over-represents rare live classes (and forced shadow keeps); their γ/flicker would then
    not be comparable with the reference, which was not sampled that way. Keeping each event with probability
    w / w_max (w = 1/inclusion probability, w_max = the largest current stratum weight) gives every offered
    event the same overall inclusion probability 1/w_max.
    """

    def __init__(
        self,
        sampler: Sampler,
        seed: int = 0,  # not a setting: the thinning draw's seed, as the sampler's own
    ) -> None:
        self.sampler = sampler
        self._rng = np.random.default_rng(seed)
        #: events the sampler holds undecided (its event-time reservoir, ``Sampler.release``), by ``id``: the event,
        #: its record and its shadow disagreement, until the sampler decides on them
        self.held: dict[int, tuple[InferenceEvent, RawRecord | None, float]] = {}

    def keep(self, model: str, weights: NDArray[np.float64]) -> NDArray[np.bool_] | None:
        """A keep-mask over a batch with these sampling weights; None when the sampler is not class-biased."""
        if not getattr(self.sampler, "biases_class_mix", False):
            return None
        stats = self.sampler.snapshot().get(model)
        finite = [st.weight for st in (stats.strata.values() if stats else ()) if np.isfinite(st.weight)]
        w_max = max([*finite, float(weights.max(initial=1.0))])
        keep: NDArray[np.bool_] = self._rng.random(weights.shape[0]) < weights / w_max
        return keep


class Scoring:
    """Sampling, micro-batching and scoring for every watched model."""

    def __init__(
        self,
        settings: Settings,
        runtimes: Mapping[str, ModelRuntime],
        sampler: Sampler,
        state: MetricsState,
        sink: Sink | None,
        labels: LabelStage | None,
        clock: Callable[[], float],
        invalid_log: RateLimitedLogger,
        dead_letter: DeadLetter,
        checkpoint_soon: Callable[[], None],
    ) -> None:
        self.settings = settings
        self.runtimes = runtimes
        self.sampler = sampler
        self.state = state
        self.sink = sink
        self.labels = labels
        self.clock = clock
        self._invalid_log = invalid_log
        self.dead_letter = dead_letter
        self._checkpoint_soon = checkpoint_soon
        self.thinner = UniformThinner(sampler)
        for model in runtimes:  # pre-registered at 0, so that rate() sees the first increment
            tel.SCORES_NONFINITE_TOTAL.inc(self.state, tel.Model(model), 0.0)
        self.hooks: list[ScoredHook] = []
        #: when the oldest pending event was sampled (None: nothing pending)
        self.oldest_pending: float | None = None
        #: wall and CPU seconds spent scoring events so far (the ingest-first controller's measure of scoring)
        self.busy_wall = 0.0
        self.busy_cpu = 0.0

    # -- accept: warm-up, shadow, sample ---------------------------------------------------------------------
    def accept(self, items: Sequence[tuple[InferenceEvent, RawRecord | None]], now: float) -> None:
        """Shadow-check events that carry a live label (one centre-only model call per model), then sample.

        ``items`` pairs each event with the record it came from. If checking or sampling a model's events raises,
        they are taken again one at a time, and an event that still fails is dead-lettered as ``unscorable``.
        """
        by_model: dict[str, list[tuple[InferenceEvent, RawRecord | None]]] = {}
        for item in items:
            by_model.setdefault(item[0].model, []).append(item)
        for name, group in by_model.items():
            rt = self.runtimes[name]
            try:
                self._accept_model(rt, group, now)
            except Exception:  # noqa: BLE001 - isolation: one event must not stop the others
                for item in group:
                    try:
                        self._accept_model(rt, [item], now)
                    except Exception as exc:  # noqa: BLE001
                        self._unscorable(item[0], item[1], exc)
        # the sampler's event-time reservoir: decisions on events it held at earlier polls
        for ev, weight in self.sampler.release(now):
            ev_held = self.thinner.held.pop(id(ev), None)
            if ev_held is not None and weight > 0:
                self._pend(self.runtimes[ev.model], ev, ev_held[2], weight, ev_held[1], now)
        if self.thinner.held and self.oldest_pending is None:
            self.oldest_pending = now  # held events are on their way: no flush (and commit) as if nothing were

    def held_positions(self) -> dict[tuple[str, int], int]:
        """Per partition, the offset of the first record whose event the sampler still holds undecided: offsets
        are committed only below it (the event is applied once decided)."""
        first: dict[tuple[str, int], int] = {}
        for _, record, _ in self.thinner.held.values():
            if record is not None:
                key = (record.topic, record.partition)
                first[key] = min(first.get(key, record.offset), record.offset)
        return first

    def release_held(self, now: float) -> None:
        """Decide every event the sampler holds (at shutdown): two empty steps, so each model has paused — what it
        held was a burst, scored whole when the CPU budget allows, else sampled evenly."""
        self.accept([], now)
        self.accept([], now)

    def _pend(
        self,
        rt: ModelRuntime,
        ev: InferenceEvent,
        disagreement: float,
        weight: float,
        record: RawRecord | None,
        now: float,
    ) -> None:
        tel.EVENTS_SAMPLED_TOTAL.inc(self.state, tel.Model(ev.model))
        rt.pending.append((ev, disagreement, weight, record))
        if self.oldest_pending is None:
            self.oldest_pending = now

    def _accept_model(self, rt: ModelRuntime, items: list[tuple[InferenceEvent, RawRecord | None]], now: float) -> None:
        if rt.scorer is None:
            items = self._warm_up(rt, items)
            if not items:
                return
        evs = [ev for ev, _ in items]
        shadow = self._shadow(rt, evs)
        # the ONNX copy and the live server disagree: always score it (a stale copy must show)
        weights = self.sampler.sample_many(evs, now, [d == 1.0 for d in shadow])
        held = {id(ev) for ev in getattr(self.sampler, "last_held", ())}
        for (ev, record), disagreement, weight in zip(items, shadow, weights, strict=True):
            if weight > 0:
                self._pend(rt, ev, disagreement, weight, record, now)
            elif held and id(ev) in held:  # decided later, by ``Sampler.release`` (see ``accept``)
                self.thinner.held[id(ev)] = (ev, record, disagreement)

    def _unscorable(self, ev: InferenceEvent, record: RawRecord | None, exc: BaseException) -> None:
        self.dead_letter(record, "unscorable", f"{type(exc).__name__}: {exc}", model=ev.model, event=ev, exc_info=True)

    def _warm_up(
        self, rt: ModelRuntime, evs: list[tuple[InferenceEvent, RawRecord | None]]
    ) -> list[tuple[InferenceEvent, RawRecord | None]]:
        """Feed the warm-up window; returns the events past it (to be scored with the freshly fitted standardizer)."""
        need = rt.settings.warmup_events - len(rt.warmup)
        rt.warmup.extend(ev.features for ev, _ in evs[:need])
        if rt.model.signature.has_held:
            rt.warmup_held.extend(ev.held for ev, _ in evs[:need] if ev.held is not None)
        if len(rt.warmup) < rt.settings.warmup_events:
            return []
        if rt.warmup_held and rt.held_sample is None:  # what a regressor's output scale is measured with
            rt.held_sample = Held.stack(rt.warmup_held[:HELD_SAMPLE_ROWS])
        rt.activate(rt.fit_standardizer(np.vstack(rt.warmup)))
        rt.warmup.clear()
        rt.warmup_held.clear()
        log.info("warm-up complete; standardizer fitted", extra={"model": rt.name})
        self._checkpoint_soon()
        return evs[need:]

    def _shadow(self, rt: ModelRuntime, evs: Sequence[InferenceEvent]) -> list[float]:
        """Shadow agreement: per event NaN (no live label), 0.0 (agrees) or 1.0 (disagrees).

        The live label is the server's class *value*; it is compared with the ONNX copy's own label output when
        the model has one, else with the predicted class index. One centre-only model call per model per poll.
        """
        idx = [i for i, ev in enumerate(evs) if ev.prediction is not None and ev.prediction.label is not None]
        flags = [float("nan")] * len(evs)
        if not idx or rt.model.kind != "classifier":
            return flags
        rows = feature_rows([evs[i] for i in idx], np.float32)
        out = rt.model.evaluate(rows, held_rows([evs[i] for i in idx]))
        tel.MODEL_EVALUATIONS_TOTAL.inc(self.state, tel.ModelPurpose(rt.name, "shadow"), float(len(idx)))
        ours = out.raw_label if out.raw_label is not None else out.label
        assert ours is not None
        live = [evs[i].prediction.label for i in idx]  # type: ignore[union-attr]
        if ours.dtype.kind in "iub":
            mismatch = np.asarray(live, dtype=np.int64) != ours.astype(np.int64)
        else:
            mismatch = np.array([str(a) != str(b) for a, b in zip(live, ours, strict=True)])
        tel.SHADOW_COMPARED_TOTAL.inc(self.state, tel.Model(rt.name), float(len(idx)))
        tel.SHADOW_DISAGREEMENTS_TOTAL.inc(self.state, tel.Model(rt.name), float(mismatch.sum()))
        for j, i in enumerate(idx):
            flags[i] = 1.0 if mismatch[j] else 0.0
        return flags

    # -- score and apply ------------------------------------------------------------------------------------
    def batch_due(self, now: float) -> bool:
        """A model's pending batch is full, or the oldest pending event has waited ``batch.max_wait_ms``."""
        full = any(len(rt.pending) >= self.settings.batch.max_events for rt in self.runtimes.values())
        aged = (
            self.oldest_pending is not None and (now - self.oldest_pending) * 1000.0 >= self.settings.batch.max_wait_ms
        )
        return full or aged

    def score_pending(self) -> None:
        """Score and apply everything pending, in batches of at most ``batch.max_events`` events."""
        for rt in self.runtimes.values():
            while rt.pending:
                batch = rt.pending[: self.settings.batch.max_events]
                del rt.pending[: len(batch)]
                self._score_batch(rt, batch)
        self.oldest_pending = None

    def score_rows(
        self, rt: ModelRuntime, rows: NDArray[np.float64], held: Held | None = None, *, purpose: str
    ) -> ScoreResult:
        """Score raw feature rows (and their held values) with the model's scorer, counting the model evaluations
        under ``purpose``."""
        assert rt.scorer is not None
        result = rt.scorer.score(rows, held)
        tel.MODEL_EVALUATIONS_TOTAL.inc(
            self.state, tel.ModelPurpose(rt.name, purpose), float(rows.shape[0] * rt.scorer.rows_per_event())
        )
        if rt.scorer.flicker_tolerance is not None:  # a regressor's flip threshold in output units
            for column, tolerance in enumerate(rt.scorer.flicker_tolerance[:FLICKER_TOLERANCE_COLUMNS]):
                tel.FLICKER_TOLERANCE.set(self.state, tel.ModelOutput(rt.name, str(column)), float(tolerance))
        # the σ and r scored at: fixed settings or chosen from the reference (monitor/signals/scales.py)
        tel.SCORING_SCALE.set(self.state, tel.ModelScale(rt.name, "sigma"), rt.scorer.config.sigma)
        tel.SCORING_SCALE.set(self.state, tel.ModelScale(rt.name, "radius"), rt.scorer.config.radius)
        return result

    def _score_batch(self, rt: ModelRuntime, pending: list[Pending]) -> None:
        """Score and apply one micro-batch; if that raises, each event alone, dead-lettering those that still fail.

        A failure is a bug or an event the model cannot take. Effects the failed batch applied before it raised
        (counters, window entries of the events before the failing one) may then be applied a second time: at most
        one micro-batch's worth, logged with the traceback.
        """
        try:
            self._apply_batch(rt, pending)
        except Exception as first:  # noqa: BLE001 - isolation: one event must not stop the others
            if len(pending) == 1:
                self._unscorable(pending[0][0], pending[0][3], first)
                return
            for item in pending:
                try:
                    self._apply_batch(rt, [item])
                except Exception as exc:  # noqa: BLE001
                    self._unscorable(item[0], item[3], exc)

    def _apply_batch(self, rt: ModelRuntime, pending: list[Pending]) -> None:
        started, cpu_started = time.perf_counter(), time.process_time()
        batch = [ev for ev, _, _, _ in pending]
        shadow = np.array([d for _, d, _, _ in pending])
        weights = np.array([w for _, _, w, _ in pending])
        rows = feature_rows(batch)
        held = held_rows(batch)
        result = self.score_rows(rt, rows, held, purpose="events")
        tel.SCORE_BATCH_DURATION_SECONDS.observe(self.state, tel.Model(rt.name), [time.perf_counter() - started])
        self._count_nonfinite(rt.name, batch, result)
        now = self.clock()
        tel.EVENT_LAG_SECONDS.observe(
            self.state, tel.Model(rt.name), np.array([max(0.0, now - ev.timestamp_seconds) for ev in batch])
        )
        assert rt.watch is not None
        rt.watch.update(batch, rows, result, shadow, uniform=self.thinner.keep(rt.name, weights))
        # the measured cost (CPU seconds, all threads: onnxruntime's too) that the sampler divides its budget by
        cpu = time.process_time() - cpu_started
        self.sampler.observe_cost(rt.name, len(batch), cpu)
        self.busy_wall += time.perf_counter() - started
        self.busy_cpu += cpu
        segments = [ev.segment for ev in batch]
        for hook in self.hooks:
            try:
                hook(rt, rows, result, now, held, segments)
            except Exception:  # a probe-scheduler bug must not take the events with it
                log.exception("scored-batch hook failed; the batch is applied", extra={"model": rt.name})
        if self.settings.kafka.scores_topic and self.sink is not None:
            self._publish_scores(rt, batch, result)
        if self.labels is not None and rt.model.kind == "classifier":
            try:
                self.labels.remember(rt, batch, rows, result, held)
            except Exception:  # their labels will go unmatched; the scores stand
                log.exception("keeping predictions for delayed labels failed", extra={"model": rt.name})

    def _count_nonfinite(self, model: str, batch: list[InferenceEvent], result: ScoreResult) -> None:
        """Valid events whose γ came out NaN or ±inf: the model's own outputs were not finite at the event or around
        it (an overflow at extreme inputs). Their γ stays out of the histograms and the windows' statistics, so they are
        counted here, and logged (rate-limited): a model that breaks down at some inputs is itself a robustness
        finding."""
        bad = np.flatnonzero(result.valid & ~np.isfinite(result.gamma))
        if bad.size:
            tel.SCORES_NONFINITE_TOTAL.inc(self.state, tel.Model(model), float(bad.size))
            self._invalid_log.warning(
                "nonfinite-" + model,
                "model outputs not finite at valid events; their scores are left out of histograms and windows",
                model=model,
                events=int(bad.size),
                event_ids=[batch[i].event_id for i in bad[:3]],
            )

    def _publish_scores(self, rt: ModelRuntime, batch: list[InferenceEvent], result: ScoreResult) -> None:
        topic = self.settings.kafka.scores_topic
        assert topic is not None and self.sink is not None
        for i, ev in enumerate(batch):
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
            self.sink.send(topic, json.dumps(doc).encode(), key=ev.event_id.encode())

    def update_sampling_gauges(self) -> None:
        for name, stats in self.sampler.snapshot().items():
            tel.EVENTS_SAMPLED_RATIO.set(self.state, tel.Model(name), stats.fraction)
            capacity = getattr(self.sampler, "capacity", None)
            # a sampler without a capacity scores every event (sampler.events_per_second: 0): no limit, +Inf
            value = capacity(name) if capacity is not None else math.inf
            if value is not None:
                tel.SAMPLER_CAPACITY_EVENTS_PER_SECOND.set(self.state, tel.Model(name), value)

    # -- the reference, when it is given as rows --------------------------------------------------------------
    def reference_from_file(self, rt: ModelRuntime) -> None:
        """Score (a bounded sample of) the reference data once to get the reference γ/flicker distribution.

        With ``segments.reference_column`` the reference CSV carries each row's segment in that column (not fed to the
        model): each segment gets its own baseline, from a sample of at most ``drift.reference_max_events`` of its rows.
        The held inputs' count tables are counted over every finite row.
        """
        assert rt.settings.reference is not None and rt.scorer is not None and rt.watch is not None
        column = self.settings.segments.reference_column
        segments = None
        if column is None:
            ref, held = read_reference_rows(rt.settings, rt.model)
        else:
            ref, held, segments = read_segmented_reference_rows(rt.settings, rt.model, column)
        keep = np.flatnonzero(np.all(np.isfinite(ref), axis=1))
        # the held inputs' count tables come from every finite row, not the scored sample: a rare category stays known
        all_held = None if held is None else held_columns(held.take(keep).values, rt.watch.held_names)
        all_segments = None if segments is None else segments[keep]
        rng = np.random.default_rng(rt.settings.scoring.seed)
        cap = rt.watch.config.reference_max_events
        if segments is not None:  # a bounded sample per segment, so a small segment keeps all of its rows
            keep = np.sort(
                np.concatenate(
                    [
                        rows if rows.size <= cap else rng.choice(rows, cap, replace=False)
                        for name in np.unique(segments[keep]).tolist()
                        for rows in [keep[segments[keep] == name]]
                    ]
                )
            )
        elif keep.shape[0] > cap:
            keep = keep[rng.choice(keep.shape[0], cap, replace=False)]
        ref = ref[keep]
        held = None if held is None else held.take(keep)
        cpu_started = time.process_time()
        result = self.score_rows(rt, ref, held, purpose="reference")
        # the first measured cost: the sampler knows what an event costs before the first poll (a backlog read
        # after a restart is then sampled from its first poll on, not scored whole)
        self.sampler.observe_cost(rt.name, int(ref.shape[0]), time.process_time() - cpu_started)
        columns = None if held is None else held_columns(held.values, rt.watch.held_names)
        rt.watch.set_reference(ref, result, None if segments is None else segments[keep], columns)
        if all_held is not None:
            rt.watch.set_held_tables(all_held, all_segments)
        log.info("reference built from file", extra={"model": rt.name, "rows": int(ref.shape[0])})


def _num(v: float) -> float | None:
    return None if not np.isfinite(v) else float(v)
