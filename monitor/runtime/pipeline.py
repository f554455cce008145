"""The streaming loop, and the only place the stages meet: poll → ingest → score → apply → commit.

One event's path, in the order of the files: :mod:`monitor.source.kafka` polls a :class:`RawRecord`;
:class:`~monitor.runtime.ingest.Ingest` decodes it into an :class:`InferenceEvent` (or returns it as invalid, with
its reason); :class:`~monitor.runtime.scoring.Scoring` samples it, scores it in a micro-batch and applies the result
to the model's :class:`~monitor.runtime.watch.ModelWatch` (windows, detectors, verdicts, alerts). The stages return
what they did (:mod:`~monitor.runtime.stage_results`: the poll's events and invalid records, accepted counts, scored
batches, unscorable events, label reports) and the pipeline's :class:`~monitor.runtime.stage_fanout.StageFanout`
sends each result on as it comes: series into :class:`~monitor.exporters.prometheus.MetricsState` (rendered on
``/metrics``), scores and dead letters to the sink, predictions to the label stage, scored batches to the scored
hooks (the probe scheduler). Each watch reports what it produced; the pipeline's
:class:`~monitor.runtime.fanout.Fanout` sends each report on once the batches are applied: its series, its alert
transitions to delivery, the report to subscribers (``replay``'s timeline). Delayed labels take the side path
:class:`~monitor.runtime.labels.LabelStage`; the state file is :mod:`monitor.runtime.state`.

Delivery is at-least-once: positions are committed only after every event before them has been applied (scored
and its results recorded, scores published, dead letters acknowledged). On SIGTERM the loop finishes the batch in
hand, commits, persists state and returns; a watchdog bounds the whole shutdown.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from monitor import telemetry as tel
from monitor.alerts import AlertEvent
from monitor.config import Settings
from monitor.errors import MonitorError
from monitor.exporters.prometheus import MetricsState
from monitor.logs import RateLimitedLogger
from monitor.runtime.candidate import build_candidates, publish_comparison
from monitor.runtime.dead_letters import DeadLetters
from monitor.runtime.fanout import Fanout
from monitor.runtime.ingest import Ingest, undecodable
from monitor.runtime.labels import LabelStage
from monitor.runtime.models import ModelRuntime
from monitor.runtime.recovery import CrashRecovery
from monitor.runtime.saved_positions import SEEK, SKIP, SavedPositions, Tail, tail_of
from monitor.runtime.scoring import Scoring
from monitor.runtime.scoring_budget import ScoringBudget
from monitor.runtime.stage_fanout import ScoredHook, StageFanout
from monitor.runtime.stage_results import Ingested
from monitor.runtime.state import (
    StateStore,
    model_state,
)
from monitor.runtime.watches import SegmentBaselineFiles, install_watches
from monitor.sampler.base import Sampler
from monitor.source.base import (
    Backlogging,
    Degradable,
    Lagging,
    PartitionOwner,
    Positions,
    RawRecord,
    Seekable,
    SideReading,
    Sink,
    Source,
    partition_spans,
)
from monitor.source.labels import LabelJoiner
from monitor.source.side_read import SideReader, read_below
from monitor.source.validate import ModelSchema

log = logging.getLogger("monitor.runtime.pipeline")


class Pipeline:
    """The streaming loop. Use :meth:`step` (one poll) in tests, :meth:`run` in production."""

    def __init__(
        self,
        settings: Settings,
        source: Source,
        runtimes: Sequence[ModelRuntime],
        sampler: Sampler,
        *,
        state: MetricsState | None = None,
        sink: Sink | None = None,
        clock: Callable[[], float] = time.time,
        on_alert: Callable[[AlertEvent], None] | None = None,
    ) -> None:
        self.settings = settings
        self.source = source
        #: per served model, its candidates (``models[].compare_with``): scored on its batches, never served
        self.candidates = build_candidates(settings, runtimes)
        runtimes = [rt for rt in runtimes if rt.settings.compare_with is None]
        self.runtimes = {rt.name: rt for rt in runtimes}
        self.default_model = runtimes[0].name
        self.sampler = sampler
        self.state = state or MetricsState()
        self.state.limit_versions(settings.segments.max_versions)
        self.sink = sink
        self.clock = clock
        #: where the watches' reports go: series to ``state``, alert transitions to ``on_alert``, reports to subscribers
        self.fanout = Fanout(self.state, on_alert)
        self.store = StateStore(settings.state_dir)
        self.labels_topic = settings.kafka.labels_topic
        #: positions of records whose events are pending or applied (or dead-lettered)
        self._consumed: Positions = {}
        #: positions whose events are all applied: what the next checkpoint saves and then commits
        self._applied: Positions = {}
        self._committed: Positions = {}
        self._last_checkpoint = self.clock()
        self._checkpoint_requested = False
        #: the sink's last flush left dead letters or scores unacknowledged: offsets wait for them
        self._undelivered = False
        #: alert delivery workers (set by the service), asked for their degraded state
        self.alert_workers: Sequence[Any] = ()
        #: the positions, last commits and fingerprints held from the saved state (monitor/runtime/saved_positions.py)
        self.saved = SavedPositions(self.state)
        #: per partition, the fingerprint of the last record processed (offset, timestamp in ms or None, CRC-32 of the
        #: value): saved with the position after it, so that a restart can tell the record now at that offset from
        #: the one applied there (a re-created topic already grown past the saved position)
        self._tails: dict[tuple[str, int], Tail] = {}
        saved = self._restore()
        #: the in-flight marker, and the one-record-at-a-time plan after an unclean exit (runtime/recovery.py)
        self.recovery = CrashRecovery(settings.state_dir)
        invalid_log = RateLimitedLogger(log)
        self._degraded_log = RateLimitedLogger(log, interval_seconds=60.0)
        self.ingest = Ingest(settings, {rt.name: _schema(rt) for rt in runtimes})
        self.labels = LabelStage(settings, self.runtimes, clock)
        self.scoring = Scoring(settings, self.runtimes, sampler, clock, self.candidates)
        #: where ingest's and scoring's results go: series, scores and dead letters, labels, hooks, checkpoints
        self.stages = StageFanout(
            self.state,
            sink,
            scores_topic=settings.kafka.scores_topic,
            labels=self.labels if self.labels_topic is not None else None,
            dead_letters=DeadLetters(settings, self.state, sink, invalid_log, self.runtimes),
            checkpoint_soon=self._request_checkpoint,
            invalid_log=invalid_log,
            models=self.runtimes,
        )
        #: each model's per-segment baselines file, written when they change
        self.baselines = SegmentBaselineFiles(self.store.dir)

        #: ingest first: the sampler's CPU budget from the consumer lag (``control`` None: not budgeted)
        self.budget = ScoringBudget(settings, sampler)
        self.ingest_first = self.budget.control
        install_watches(
            settings,
            self.runtimes.values(),
            saved,
            self.baselines,
            lambda rt: self.stages.evaluated(self.scoring.reference_from_file(rt)),
        )
        self.publish()

    @property
    def scored_hooks(self) -> list[ScoredHook]:
        """Called with every scored batch once applied (a :class:`ScoredBatch`): the probe scheduler's feed."""
        return self.stages.scored_hooks

    @property
    def label_joiner(self) -> LabelJoiner:
        return self.labels.joiner

    def publish(self) -> None:
        """Send every watch's report (series, alert transitions, changes) and the probes' series on (:class:`Fanout`)."""
        self.fanout.drain(rt.watch for rt in self.runtimes.values())
        for cands in self.candidates.values():
            for cand in cands:
                publish_comparison(self.state, cand.take_report())

    def tick_alerts(self) -> None:
        """Move every watch's alerts on to its clock's now without new events (every loop turn), look at the
        candidates' files (:meth:`~monitor.runtime.candidate.Candidate.refresh`), and publish."""
        for rt in self.runtimes.values():
            if rt.watch is not None:
                rt.watch.tick()
        for cands in self.candidates.values():
            for cand in cands:
                cand.refresh()  # a candidate's file replaced: loaded again (or refused) within a few seconds
        self.publish()

    # -- state ---------------------------------------------------------------------------------------------
    def _restore(self) -> dict[str, dict[str, Any]]:
        """Load the saved counters; returns the saved per-model parts (applied once the models' watches exist)."""
        data = self.store.load()
        self.state.load_counters(data.get("counters", []))
        self.saved.restore(data)
        if data:
            log.info("state restored", extra={"path": str(self.store.path)})
        models: dict[str, dict[str, Any]] = data.get("models", {})
        return models

    def persist(self) -> bool:
        """Write the state durably, with the applied positions; False when the state directory cannot take it."""
        self.publish()  # the counters saved are those the watches reported
        self.baselines.save_changed(self.runtimes.values())  # per-segment baselines: their own file
        models = {rt.name: model_state(rt) for rt in self.runtimes.values()}
        positions = self.saved.rows(self._applied, self._committed, self._tails)
        ok = self.store.save({"counters": self.state.dump_counters(), "models": models, **positions})
        tel.DEGRADED.set(self.state, tel.Reason("state_dir"), 0.0 if ok else 1.0)
        if not ok:
            self._degraded_log.warning("state_dir", "state not saved; offsets not committed", error=self.store.degraded)
        return ok

    def _request_checkpoint(self) -> None:
        self._checkpoint_requested = True

    def _checkpoint(self) -> None:
        """Save the state, then commit exactly the positions it holds: a commit never runs ahead of the state."""
        self._last_checkpoint = self.clock()
        self._checkpoint_requested = False
        if not self.persist():
            return
        positions = dict(self._applied)
        if positions and positions != self._committed:
            self.source.commit(positions)
            self._committed = positions

    # -- the loop ------------------------------------------------------------------------------------------
    def step(self, timeout_seconds: float = 0.2) -> int:
        """Poll once, decode/sample everything polled, flush when a batch is full or old. Returns records read."""
        if self._sink_backlogged():
            # back-pressure: unacknowledged dead letters and scores fill the producer's buffer (broker or topic
            # away): read nothing more; flush() re-sends them (waiting about a second) and commits once delivered
            self.flush()
            return 0
        self.ingest.share_decoder(self.source)
        records = self.source.poll(timeout_seconds, self.settings.kafka.max_poll_records)
        self.saved.sought.clear()
        now = self.clock()
        if self.saved.tails and records:
            self._check_by_side_read(records)
        # after an unclean exit, per partition: the records of a partition that had records in flight, one at a
        # time, each applied under its own marker (its dead letters and scores are delivered with the next flush:
        # a crash there is not one record's); every other partition's records as usual, after them
        careful, rest = self.recovery.split(records)
        for record in careful:
            self._process([record], now, careful=True)
            self.stages.scored(self.scoring.score_pending())
            self.recovery.inflight.clear()
        if careful:
            self.flush()
        if rest:
            self._process(rest, now, careful=False)
        if not records:
            self.stages.accepted(self.scoring.accept([(ev, None) for ev in self.ingest.expire(now)], now))
        if (
            self.scoring.batch_due(now)
            or (records and self.scoring.oldest_pending is None)
            or (self.settings.checkpoint_seconds > 0 and self._checkpoint_due(now))
            or self._undelivered
        ):
            self.flush()
        self._ingest_first(now, len(records))
        return len(records)

    def _check_by_side_read(self, records: list[RawRecord]) -> None:
        """Where the source cannot seek its group consumer but reads records on the side (its ``side_reader``): the
        record before a saved position is read there and compared (:meth:`SavedPositions.check_by_side_read`), and a
        new incarnation's records below the first one polled are read there too and processed first (:meth:`_read_below`).
        The reader is closed once no assigned partition has a fingerprint left to compare."""
        source = self.source
        if not isinstance(source, SideReading) or isinstance(source, Seekable):
            return
        reader = source.side_reader
        assigned = source.assigned if isinstance(source, PartitionOwner) else None
        for key, end in self.saved.check_by_side_read(records, reader.read_at, assigned).items():
            self._consumed.pop(key, None)  # nothing read of the old topic counts
            self._applied.pop(key, None)
            self._read_below(reader, key, end)
        left = self.saved.tails.keys() if assigned is None else self.saved.tails.keys() & set(assigned)
        if reader.open and not left:
            reader.close()

    def _read_below(self, reader: SideReader, key: tuple[str, int], end: int) -> None:
        """A new incarnation's records of ``key`` below ``end`` (the first offset polled), read with ``reader`` and
        processed in offset order; a batch is scored (and a checkpoint made) whenever one is due."""
        for chunk in read_below(reader.read, key, end, self.settings.kafka.max_poll_records):
            now = self.clock()
            self._process(chunk, now, careful=False)
            if self.scoring.batch_due(now) or self._undelivered or self._sink_backlogged():
                self.flush()

    def consumer_lag(self) -> float | None:
        """Records the partitions hold past the pipeline's positions (see :func:`records_behind`)."""
        return records_behind(self.source.highwaters if isinstance(self.source, Lagging) else None, self._consumed)

    def _sink_backlogged(self) -> bool:
        """The sink holds back reads: its buffer is full of unacknowledged records (:class:`Backlogging`)."""
        return isinstance(self.sink, Backlogging) and self.sink.backlogged

    def _ingest_first(self, now: float, polled: int) -> None:
        """Ingest first: the sampler's CPU budget from the lag and what scoring took since the last step."""
        lag = self.consumer_lag()
        if lag is not None:
            tel.CONSUMER_LAG_RECORDS.set(self.state, tel.NoLabels(), lag)
        self.budget.step(now, lag, polled, self.scoring.busy_wall, self.scoring.busy_cpu)
        self.scoring.shadow_share = self.budget.shadow_share
        tel.SHADOW_CHECKED_SHARE.set(self.state, tel.NoLabels(), self.budget.shadow_share)

    def _process(self, records: list[RawRecord], now: float, *, careful: bool) -> None:
        """Decode, shadow-check and sample ``records`` (one poll's, or one record after an unclean exit)."""
        recovery = self.recovery
        spans = partition_spans(records)
        recovery.begin(records, spans, careful)
        ingested = Ingested()  # the poll's events and invalid records; consumed counted once per model per poll
        positions: Positions = {}
        last: dict[tuple[str, int], RawRecord] = {}
        try:
            if self.saved.sought or self.saved.held or self.saved.unsent or recovery.poison or recovery.careful_until:
                self._read_each(records, now, ingested, positions, last)
            else:  # the common poll: nothing to check record by record; decoded in one pass
                for record in self.ingest.decode_all(records, now, ingested, self.labels_topic):
                    self.stages.labelled(self.labels.record(record, now))
                last.update({key: span[1] for key, span in spans.items()})
                positions.update({key: record.offset + 1 for key, record in last.items()})
        finally:  # records read are counted (and invalid ones dead-lettered) even when a later one fails
            for key, record in last.items():
                self._tails[key] = tail_of(record)
            ingested.dropped = self.ingest.dropped()
            self.stages.ingested(ingested)
        items = ingested.events
        items.extend((ev, None) for ev in self.ingest.expire(now))
        self.stages.accepted(self.scoring.accept(items, now, ingested.columns))
        # only now are these records' events pending (or dead-lettered): if anything above raised, nothing may
        # commit past records whose events were never applied (at-least-once)
        self._consumed.update(positions)

    def _read_each(
        self, records: list[RawRecord], now: float, ingested: Ingested, positions: Positions, last: dict[Any, RawRecord]
    ) -> None:
        """``records`` one at a time: against saved positions (skipped, or sought), as poison, or in careful mode."""
        for record in records:
            key = (record.topic, record.partition)
            if self.saved.sought and key in self.saved.sought:
                continue  # read before the source's seek: it delivers these again, or others, from there
            if key in self.saved.unsent:  # given up at a rebalance with output in the sink: processed already
                if record.offset < self.saved.unsent[key]:
                    positions[key] = record.offset + 1
                    last[key] = record
                    continue
                del self.saved.unsent[key]
            if self.saved.held and key in self.saved.held:
                seek = self.source.seek if isinstance(self.source, Seekable) else None
                verdict, incarnation = self.saved.decide(key, record, seek)
                if incarnation:  # a new incarnation of the topic: nothing read of the old one counts
                    self._consumed.pop(key, None)
                    self._applied.pop(key, None)
                if verdict == SKIP:
                    positions[key] = record.offset + 1  # applied before: in the state already
                    last[key] = record
                    continue
                if verdict == SEEK:
                    positions.pop(key, None)
                    continue
            if self.recovery.poison and self.recovery.is_poison(record):
                ingested.refuse(record, "crashed_processing", "the process died twice processing it alone")
            elif record.topic == self.labels_topic and not undecodable(record):  # a batch stand-in: refused
                self.stages.labelled(self.labels.record(record, now))
            else:
                self.ingest.decode(record, now, ingested)
            positions[key] = record.offset + 1
            last[key] = record
            if self.recovery.careful_until:  # a partition still in careful mode may leave it now
                self.recovery.processed(record)

    def _checkpoint_due(self, now: float) -> bool:
        interval = self.settings.checkpoint_seconds
        return self._checkpoint_requested or (now - self._last_checkpoint >= interval and bool(self._consumed))

    def flush(self) -> None:
        """Score and apply everything pending, publish; checkpoint (save, then commit) when one is due."""
        self.stages.scored(self.scoring.score_pending())
        self.publish()  # alerts delivered and series written before the sink's flush (up to 30 s) waits
        delivered = self.sink is None or self.sink.flush(30.0)
        self.stages.sampling(self.scoring.sampling())
        self._undelivered = not delivered
        if delivered:  # only then are these events' dead letters and scores acknowledged: they may be committed
            self._applied = self.ingest.committable(self._consumed, self.scoring.held_positions())
        self.recovery.applied()
        if self._checkpoint_due(self.clock()):
            self._checkpoint()

    # -- rebalance (called from inside poll) ---------------------------------------------------------------
    def before_revoke(self, partitions: Sequence[tuple[str, int]]) -> None:
        """Apply and checkpoint everything read from ``partitions`` before the group gives them to another member."""
        self.flush()
        self._checkpoint()
        # the next owner re-reads what this replica had not committed; it has no marker of ours: recovery ends here
        self.recovery.end(partitions, "the partition was revoked")
        # processed, the output handed to the sink (delivered or not: a broker away fails the flush above)
        processed = self.ingest.committable(self._consumed, self.scoring.held_positions())
        for key in partitions:
            # if the commit above does not land (or was not sent), the next delivery skips what we hold
            self.saved.hand_back(key, self._applied.get(key), processed.get(key))
            self._consumed.pop(key, None)
            self._applied.pop(key, None)
            self._committed.pop(key, None)

    def after_assign(self, partitions: Sequence[tuple[str, int]]) -> None:
        return None

    # -- lifecycle -----------------------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return self.source.ready and all(rt.model is not None for rt in self.runtimes.values())

    def degraded(self) -> dict[str, str]:
        """What runs degraded (reason → what to fix): the state directory, the producer, alert delivery. The process
        stays up."""
        workers = (w.degraded for w in self.alert_workers if isinstance(w, Degradable))
        failing = [d for d in workers if isinstance(d, str)]
        found = {
            "state_dir": self.store.degraded,
            "producer": self.sink.degraded if isinstance(self.sink, Degradable) else None,
            "alert_delivery": "; ".join(failing) or None,
            "broker": self.source.degraded if isinstance(self.source, Degradable) else None,
            "recovery": self.recovery.degraded(),
        }
        return {reason: text for reason, text in found.items() if isinstance(text, str)}  # None: not degraded

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """Ready when every model is loaded and partitions are assigned; ``degraded`` lists what needs fixing
        (a degraded sidecar stays ready, so that it stays in the scrape path and shows the fault)."""
        detail: dict[str, Any] = {
            "source_ready": self.source.ready,
            "models": {rt.name: rt.readiness() for rt in self.runtimes.values()},
        }
        if self.candidates:  # scored beside their model, never served: {candidate: the model it would replace}
            detail["candidates"] = {c.name: served for served, cands in self.candidates.items() for c in cands}
            detail["candidate_files"] = {c.name: c.readiness() for cands in self.candidates.values() for c in cands}
        if isinstance(self.source, PartitionOwner):
            detail["partitions"] = [f"{t}/{p}" for t, p in self.source.assigned]
        degraded = self.degraded()
        detail["degraded"] = sorted(degraded)
        if degraded:
            detail["degraded_detail"] = degraded
        for reason in ("state_dir", "producer", "alert_delivery", "recovery", "broker"):
            tel.DEGRADED.set(self.state, tel.Reason(reason), 1.0 if reason in degraded else 0.0)
        ok = self.ready
        tel.READY.set(self.state, tel.NoLabels(), 1.0 if ok else 0.0)
        return ok, detail

    def run(
        self, stop: threading.Event, *, until_exhausted: bool = False, tick: Callable[[], None] | None = None
    ) -> None:
        """Loop until ``stop`` is set (or a finite source is exhausted), then flush, checkpoint and return.

        An exception out of the loop (a bug: every record's own failures are caught where they happen) ends it
        *without* applying or committing anything more: what was in flight stays uncommitted and the in-flight
        marker stays, so the next start re-reads those records one at a time (:class:`~monitor.runtime.state.InFlight`).
        """
        log.info("pipeline started", extra={"models": sorted(self.runtimes)})
        try:
            while not stop.is_set():
                n = self.step()
                if tick is not None:
                    tick()
                if until_exhausted and n == 0 and self.source.exhausted:
                    break
        except KeyboardInterrupt:
            self.close()
            raise
        except Exception:
            log.exception("pipeline stopped by an error; nothing past the last checkpoint is committed")
            raise
        self.close()

    def close(self) -> None:
        """Apply what is pending (and KServe halves still held), checkpoint, and remove the in-flight marker."""
        self.stages.accepted(self.scoring.accept([(ev, None) for ev in self.ingest.drain()], self.clock()))
        for accepted in self.scoring.release_held(self.clock()):
            self.stages.accepted(accepted)
        try:
            self.flush()
        except MonitorError:
            log.exception("final flush failed; uncommitted events will be re-delivered")
            return
        self._checkpoint()
        self.recovery.inflight.clear()
        log.info("pipeline stopped; state saved and offsets committed", extra={"state": str(self.store.path)})


def _schema(rt: ModelRuntime) -> ModelSchema:
    """What the decoder checks a model's events against."""
    return ModelSchema(
        rt.model.n_features,
        rt.model.given_feature_names or rt.settings.feature_names,  # decided at load (settings, reference)
        default_version=rt.settings.version or "unknown",
        signature=rt.model.signature,  # events decoded by its inputs; a plain one also by its input's name
    )


def records_behind(
    highwaters: Callable[[], Mapping[tuple[str, int], int]] | None, positions: Positions
) -> float | None:
    """Records the partitions hold past ``positions`` (log-end offsets as the source last saw them), all partitions
    together; None when the source cannot tell (no ``highwaters``) or has not seen any yet."""
    marks = highwaters() if highwaters is not None else {}
    if not marks:
        return None
    return float(sum(max(0, end - positions[key]) for key, end in marks.items() if key in positions))
