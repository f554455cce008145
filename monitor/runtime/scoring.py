"""The pipeline's second seam: decoded events → warm-up, shadow check, sampling → micro-batches scored → windows.

:class:`Scoring` keeps each model's pending micro-batch. :meth:`Scoring.accept` feeds the warm-up window (a model
without a reference fits its standardizer on the first events), compares the live server's label with the ONNX
copy (shadow agreement) and asks the sampler which events to score; it returns what it did as
:class:`~monitor.runtime.stage_results.Accepted`. :meth:`Scoring.score_pending` scores them in batches of at most
``batch.max_events`` rows and applies each result to the model's :class:`~monitor.runtime.watch.ModelWatch`
(windows, detectors, alerts), yielding a :class:`~monitor.runtime.stage_results.ScoredBatch` per batch and an
:class:`~monitor.runtime.stage_results.Unscorable` per event it could not apply. Scoring writes no series, sends
nothing to the sink and calls no other stage: the pipeline's
:class:`~monitor.runtime.stage_fanout.StageFanout` sends its results on (telemetry, the scores topic, dead
letters, the predictions kept for delayed labels, the scored hooks).
"""

from __future__ import annotations

import logging
import math
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from monitor.config import Settings
from monitor.events import InferenceEvent, feature_rows, held_rows
from monitor.logs import RateLimitedLogger
from monitor.model.signature import Held
from monitor.runtime.candidate import Candidate, fold_segments
from monitor.runtime.models import (
    HELD_SAMPLE_ROWS,
    ModelRuntime,
    Pending,
)
from monitor.runtime.poll_columns import PollColumns
from monitor.runtime.stage_results import Accepted, SamplingLevel, ScoredBatch, Unscorable
from monitor.sampler.base import Sampler
from monitor.signals.scorer import ScoreResult
from monitor.source.base import RawRecord
from monitor.source.columns import EventColumns

log = logging.getLogger("monitor.runtime.scoring")


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
    """Sampling, micro-batching and scoring for every watched model; what it did comes back as named results."""

    def __init__(
        self,
        settings: Settings,
        runtimes: Mapping[str, ModelRuntime],
        sampler: Sampler,
        clock: Callable[[], float],
        candidates: Mapping[str, Sequence[Candidate]] | None = None,
    ) -> None:
        self.settings = settings
        self.runtimes = runtimes
        #: per served model, the candidates scored on its batches (``models[].compare_with``)
        self.candidates: Mapping[str, Sequence[Candidate]] = candidates or {}
        self._candidate_log = RateLimitedLogger(log)
        self.sampler = sampler
        self.clock = clock
        self.thinner = UniformThinner(sampler)
        #: the share of events carrying a live label that the shadow check takes, drawn uniformly per event: 1.0
        #: unless ingest first cuts scoring's CPU budget (:attr:`ScoringBudget.shadow_share`), since the check is a
        #: model run on every such event, not only on the sampled ones
        self.shadow_share = 1.0
        self._shadow_rng = np.random.default_rng(0)  # the shadow check's draw, seeded as the thinner's
        #: when the oldest pending event was sampled (None: nothing pending)
        self.oldest_pending: float | None = None
        #: wall and CPU seconds spent scoring events so far (the ingest-first controller's measure of scoring)
        self.busy_wall = 0.0
        self.busy_cpu = 0.0

    # -- accept: warm-up, shadow, sample ---------------------------------------------------------------------
    def accept(
        self,
        items: Sequence[tuple[InferenceEvent, RawRecord | None]],
        now: float,
        columns: Sequence[tuple[EventColumns, Sequence[RawRecord]]] = (),
    ) -> Accepted:
        """Shadow-check events that carry a live label (one centre-only model call per model), then sample.

        ``items`` pairs each event with the record it came from; ``columns`` are more events as columns, each with
        the poll's records (:class:`~monitor.runtime.ingest.Ingest`'s ``Ingested.columns``): checked and sampled on
        the arrays (:class:`~monitor.runtime.poll_columns.PollColumns`), only the rows kept or held become events.
        If checking or sampling a model's events raises, they are taken again one at a time, and an event that
        still fails is returned as :class:`Unscorable`. What a failed attempt counted before it raised stays counted.
        """
        accepted = Accepted()
        by_model: dict[str, list[tuple[InferenceEvent, RawRecord | None]]] = {}
        if len(self.runtimes) == 1:  # every event decoded is a watched model's: one group, no look-up per event
            if items:
                by_model[next(iter(self.runtimes))] = list(items)
        else:
            for item in items:  # a list per model, not one per event (as setdefault's default would be)
                group = by_model.get(item[0].model)
                if group is None:
                    by_model[item[0].model] = [item]
                else:
                    group.append(item)
        blocks: dict[str, list[tuple[EventColumns, Sequence[RawRecord]]]] = {}
        for block in columns:
            blocks.setdefault(block[0].model, []).append(block)
        for name in dict.fromkeys([*by_model, *blocks]):
            rt, group = self.runtimes[name], by_model.get(name, [])
            try:
                self._accept_model(rt, group, now, accepted, blocks.get(name, ()))
            except Exception:  # noqa: BLE001 - isolation: one event must not stop the others
                for item in group + _events_of(blocks.get(name, ())):
                    try:
                        self._accept_model(rt, [item], now, accepted)
                    except Exception as exc:  # noqa: BLE001
                        accepted.unscorable.append(_unscorable(item[0], item[1], exc))
        # the sampler's event-time reservoir: decisions on events it held at earlier polls
        for ev, weight in self.sampler.release(now):
            ev_held = self.thinner.held.pop(id(ev), None)
            if ev_held is not None and weight > 0:
                self._pend(self.runtimes[ev.model], Pending(ev, ev_held[2], weight, ev_held[1]), now, accepted)
        if self.thinner.held and self.oldest_pending is None:
            self.oldest_pending = now  # held events are on their way: no flush (and commit) as if nothing were
        return accepted

    def held_positions(self) -> dict[tuple[str, int], int]:
        """Per partition, the offset of the first record whose event the sampler still holds undecided: offsets
        are committed only below it (the event is applied once decided)."""
        first: dict[tuple[str, int], int] = {}
        for _, record, _ in self.thinner.held.values():
            if record is not None:
                key = (record.topic, record.partition)
                first[key] = min(first.get(key, record.offset), record.offset)
        return first

    def release_held(self, now: float) -> list[Accepted]:
        """Decide every event the sampler holds (at shutdown): two empty steps, so each model has paused — what it
        held was a burst, scored whole when the CPU budget allows, else sampled evenly."""
        return [self.accept([], now), self.accept([], now)]

    def _pend(self, rt: ModelRuntime, pending: Pending, now: float, accepted: Accepted) -> None:
        model = pending.event.model
        accepted.sampled[model] = accepted.sampled.get(model, 0) + 1
        rt.pending.append(pending)
        if self.oldest_pending is None:
            self.oldest_pending = now

    def _accept_model(
        self,
        rt: ModelRuntime,
        items: list[tuple[InferenceEvent, RawRecord | None]],
        now: float,
        accepted: Accepted,
        columns: Sequence[tuple[EventColumns, Sequence[RawRecord]]] = (),
    ) -> None:
        if columns:
            if rt.scorer is not None and hasattr(self.sampler, "sample_columns") and not rt.model.signature.has_held:
                self._accept_columns(rt, PollColumns(items, columns), now, accepted)
                return
            items = items + _events_of(columns)  # warming up, or a sampler without columns: event by event
        if rt.scorer is None:
            items = self._warm_up(rt, items, accepted)
            if not items:
                return
        evs = [ev for ev, _ in items]
        shadow = self._shadow(rt, evs, accepted)
        # the ONNX copy and the live server disagree: always score it (a stale copy must show)
        weights = self.sampler.sample_many(evs, now, [d == 1.0 for d in shadow])
        held = {id(ev) for ev in getattr(self.sampler, "last_held", ())}
        # the kept and the held only: most events are dropped, and a step per event costs more than finding these
        chosen = range(len(items)) if held else [i for i, weight in enumerate(weights) if weight > 0]
        for i in chosen:
            (ev, record), disagreement, weight = items[i], shadow[i], weights[i]
            if weight > 0:
                self._pend(rt, Pending(ev, disagreement, weight, record), now, accepted)
            elif held and id(ev) in held:  # decided later, by ``Sampler.release`` (see ``accept``)
                self.thinner.held[id(ev)] = (ev, record, disagreement)

    def _accept_columns(self, rt: ModelRuntime, poll: PollColumns, now: float, accepted: Accepted) -> None:
        """:meth:`_accept_model` on a poll with columns: the same shadow check and sampling on the arrays; only the
        events kept or held are made."""
        labels, has_label = poll.labels()
        shadow = self._shadow_columns(rt, poll, labels, has_label, accepted)
        weights = self.sampler.sample_columns(  # type: ignore[attr-defined]
            rt.name, labels, shadow == 1.0, now, poll.event, label_array=poll.label_array()
        )
        held = {id(ev) for ev in getattr(self.sampler, "last_held", ())}
        chosen = np.flatnonzero(weights > 0).tolist()
        if held:
            chosen = sorted(set(chosen) | {i for i, ev in poll.made() if id(ev) in held})
        for i in chosen:
            ev, record, disagreement, weight = poll.event(i), poll.record(i), float(shadow[i]), float(weights[i])
            if weight > 0:
                self._pend(rt, Pending(ev, disagreement, weight, record), now, accepted)
            else:  # decided later, by ``Sampler.release`` (see ``accept``)
                self.thinner.held[id(ev)] = (ev, record, disagreement)

    def _shadow_columns(
        self,
        rt: ModelRuntime,
        poll: PollColumns,
        labels: list[int | None],
        has_label: NDArray[np.bool_],
        accepted: Accepted,
    ) -> NDArray[np.float64]:
        """:meth:`_shadow` on a poll with columns: the same draw, model call and counts; the flags as an array."""
        flags = np.full(len(poll), np.nan)
        if rt.model.kind != "classifier":
            return flags
        drawn = (
            has_label
            if self.shadow_share >= 1.0
            else has_label & (self._shadow_rng.random(len(poll)) < self.shadow_share)
        )
        idx = np.flatnonzero(drawn)
        if not idx.size:
            return flags
        out = rt.model.evaluate(poll.rows(idx, np.float32), None)
        ours = out.raw_label if out.raw_label is not None else out.label
        assert ours is not None
        live = [labels[i] for i in idx.tolist()]
        if ours.dtype.kind in "iub":
            mismatch = np.asarray(live, dtype=np.int64) != ours.astype(np.int64)
        else:
            mismatch = np.array([str(a) != str(b) for a, b in zip(live, ours, strict=True)])
        name = rt.name
        accepted.shadow_compared[name] = accepted.shadow_compared.get(name, 0) + int(idx.size)
        accepted.shadow_disagreed[name] = accepted.shadow_disagreed.get(name, 0) + int(mismatch.sum())
        flags[idx] = mismatch.astype(np.float64)
        return flags

    def _warm_up(
        self, rt: ModelRuntime, evs: list[tuple[InferenceEvent, RawRecord | None]], accepted: Accepted
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
        accepted.warmed_up.append(rt.name)
        return evs[need:]

    def _shadow(self, rt: ModelRuntime, evs: Sequence[InferenceEvent], accepted: Accepted) -> list[float]:
        """Shadow agreement: per event NaN (no live label, or not drawn), 0.0 (agrees) or 1.0 (disagrees).

        The live label is the server's class *value*; it is compared with the ONNX copy's own label output when
        the model has one, else with the predicted class index. One centre-only model call per model per poll,
        on every event with a live label, or on a uniform draw of :attr:`shadow_share` of them while ingest first
        holds scoring back: the compared and disagreed counts stay a uniform sample, so their ratio stays unbiased.
        """
        flags = [float("nan")] * len(evs)
        if rt.model.kind != "classifier":
            return flags
        # every event drawn at the share, then the labelled among the drawn: a uniform draw of the labelled ones,
        # with a step per drawn event rather than per event
        drawn = (
            range(len(evs))
            if self.shadow_share >= 1.0
            else np.flatnonzero(self._shadow_rng.random(len(evs)) < self.shadow_share).tolist()
        )
        idx = [i for i in drawn if evs[i].prediction is not None and evs[i].prediction.label is not None]  # type: ignore[union-attr]
        if not idx:
            return flags
        rows = feature_rows([evs[i] for i in idx], np.float32)
        out = rt.model.evaluate(rows, held_rows([evs[i] for i in idx]))
        ours = out.raw_label if out.raw_label is not None else out.label
        assert ours is not None
        live = [evs[i].prediction.label for i in idx]  # type: ignore[union-attr]
        if ours.dtype.kind in "iub":
            mismatch = np.asarray(live, dtype=np.int64) != ours.astype(np.int64)
        else:
            mismatch = np.array([str(a) != str(b) for a, b in zip(live, ours, strict=True)])
        name = rt.name
        accepted.shadow_compared[name] = accepted.shadow_compared.get(name, 0) + len(idx)
        accepted.shadow_disagreed[name] = accepted.shadow_disagreed.get(name, 0) + int(mismatch.sum())
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

    def score_pending(self) -> Iterator[ScoredBatch | Unscorable]:
        """Score and apply everything pending, in batches of at most ``batch.max_events`` events, yielding each
        scored batch (and each event that could not be applied) as soon as it is done.

        A generator, so that whoever sends the results on does so before the next batch is scored (a scored hook
        sees the model's watch as that batch left it); it must be run to its end.
        """
        for rt in self.runtimes.values():
            while rt.pending:
                batch = rt.pending[: self.settings.batch.max_events]
                del rt.pending[: len(batch)]
                yield from self._score_batch(rt, batch)
        self.oldest_pending = None

    def _score_batch(self, rt: ModelRuntime, pending: list[Pending]) -> Iterator[ScoredBatch | Unscorable]:
        """Score and apply one micro-batch; if that raises, each event alone, returning those that still fail.

        A failure is a bug or an event the model cannot take. Effects the failed batch applied before it raised
        (its scoring's counts, window entries of the events before the failing one) may then be applied a second
        time: at most one micro-batch's worth, logged with the traceback.
        """
        tried: list[ScoredBatch] = []
        try:
            self._apply_batch(rt, pending, tried)
        except Exception as first:  # noqa: BLE001 - isolation: one event must not stop the others
            yield from tried  # scored, not applied: its cost is still reported
            if len(pending) == 1:
                yield _unscorable(pending[0].event, pending[0].record, first)
                return
            for item in pending:
                tried = []
                try:
                    self._apply_batch(rt, [item], tried)
                except Exception as exc:  # noqa: BLE001
                    yield from tried
                    yield _unscorable(item.event, item.record, exc)
                else:
                    yield from tried
            return
        yield from tried

    def score_rows(
        self, rt: ModelRuntime, rows: NDArray[np.float64], held: Held | None = None
    ) -> tuple[ScoreResult, float]:
        """Score raw feature rows (and their held values) with the model's scorer; the result and the model rows
        that took (rows × the scorer's rows per event)."""
        assert rt.scorer is not None
        result = rt.scorer.score(rows, held)
        return result, float(rows.shape[0] * rt.scorer.rows_per_event())

    def _apply_batch(self, rt: ModelRuntime, pending: list[Pending], tried: list[ScoredBatch]) -> None:
        """Score one micro-batch (appended to ``tried`` once scored) and apply it to the model's watch."""
        started, cpu_started = time.perf_counter(), time.process_time()
        batch = [p.event for p in pending]
        shadow = np.array([p.disagreement for p in pending])
        weights = np.array([p.weight for p in pending])
        rows = feature_rows(batch)
        held = held_rows(batch)
        result, evaluations = self.score_rows(rt, rows, held)
        scored = ScoredBatch(rt, batch, rows, held, result, self.clock(), evaluations, time.perf_counter() - started)
        tried.append(scored)
        assert rt.watch is not None
        keep = self.thinner.keep(rt.name, weights)
        rt.watch.update(batch, rows, result, shadow, uniform=keep)
        # the candidates on the same draw and rows: their cost is in this batch's, which the sampler divides by
        for cand in self.candidates.get(rt.name, ()):
            self._score_candidate(rt, cand, batch, rows, held, result, keep)
        # the measured cost (CPU seconds, all threads: onnxruntime's too) that the sampler divides its budget by
        cpu = time.process_time() - cpu_started
        self.sampler.observe_cost(rt.name, len(batch), cpu)
        wall = time.perf_counter() - started
        self.busy_wall += wall
        self.busy_cpu += cpu
        scored.cpu_seconds, scored.wall_seconds, scored.applied = cpu, wall, True

    def _score_candidate(
        self,
        rt: ModelRuntime,
        cand: Candidate,
        batch: Sequence[InferenceEvent],
        rows: NDArray[np.float64],
        held: Held | None,
        result: ScoreResult,
        keep: NDArray[np.bool_] | None,
    ) -> None:
        """Score ``batch`` on ``cand``; a candidate that fails is logged and the served model's events stand."""
        assert rt.scorer is not None and rt.watch is not None
        known = {seg for _, seg in rt.watch.windows.keys}
        try:
            # placed as the watch places them (nothing past its watermark): a producer's clock a day ahead cannot
            # carry the paired windows' end past every event
            ts = np.array([ev.timestamp_seconds for ev in batch], dtype=np.float64)
            if math.isfinite(rt.watch.clock.watermark):
                ts = np.minimum(ts, rt.watch.clock.watermark)
            segments = fold_segments([ev.segment for ev in batch], known)
            cand.score(rt.scorer, rt.held_sample, rows, held, result, ts, segments, keep)
        except Exception as exc:  # noqa: BLE001 - the candidate is an experiment: it never costs the served model
            self._candidate_log.warning(
                "candidate-" + cand.name,
                f"candidate '{cand.name}' could not score a batch of '{rt.name}': {type(exc).__name__}: {exc}",
                model=rt.name,
                candidate=cand.name,
            )

    def sampling(self) -> list[SamplingLevel]:
        """Every model's sampled fraction and the sampler's capacity for it."""
        capacity = getattr(self.sampler, "capacity", None)
        return [
            # a sampler without a capacity scores every event (sampler.events_per_second: 0): no limit, +Inf
            SamplingLevel(name, stats.fraction, capacity(name) if capacity is not None else math.inf)
            for name, stats in self.sampler.snapshot().items()
        ]


def _events_of(
    columns: Sequence[tuple[EventColumns, Sequence[RawRecord]]],
) -> list[tuple[InferenceEvent, RawRecord | None]]:
    """Every row of ``columns`` as an event with its record."""
    out: list[tuple[InferenceEvent, RawRecord | None]] = []
    for cols, records in columns:
        for j, row in enumerate(cols.rows.tolist()):
            out.append((cols.event(j, records[row].origin), records[row]))
    return out


def _unscorable(ev: InferenceEvent, record: RawRecord | None, exc: BaseException) -> Unscorable:
    """The event ``exc`` stopped, with its traceback (call it where ``exc`` is handled)."""
    return Unscorable(ev, record, f"{type(exc).__name__}: {exc}", traceback.format_exc())
