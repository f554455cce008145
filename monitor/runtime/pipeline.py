"""The streaming loop, and the only place the stages meet: poll → ingest → score → apply → commit.

One event's path, in the order of the files: :mod:`monitor.source.kafka` polls a :class:`RawRecord`;
:class:`~monitor.runtime.ingest.Ingest` decodes it into an :class:`InferenceEvent` (or dead-letters it);
:class:`~monitor.runtime.scoring.Scoring` samples it, scores it in a micro-batch and applies the result to the
model's :class:`~monitor.runtime.watch.ModelWatch` (windows, detectors, verdicts, alerts), which writes the
series into :class:`~monitor.exporters.prometheus.MetricsState`, rendered on ``/metrics``. Delayed labels take the
side path :class:`~monitor.runtime.labels.LabelStage`; the state file is :mod:`monitor.runtime.state`.

Delivery is at-least-once: positions are committed only after every event before them has been applied (scored
and its results recorded, scores published, dead letters acknowledged). On SIGTERM the loop finishes the batch in
hand, commits, persists state and returns; a watchdog bounds the whole shutdown.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from monitor import telemetry as tel
from monitor.config import Settings
from monitor.drift.categories import held_element_names
from monitor.errors import DataError, MonitorError
from monitor.events import InferenceEvent
from monitor.exporters.prometheus import MetricsState
from monitor.logs import RateLimitedLogger
from monitor.rolling.reference_file import read_reference, read_segment_references
from monitor.rolling.segment_baselines import references_from_json
from monitor.runtime.ingest import Ingest
from monitor.runtime.labels import LabelStage
from monitor.runtime.models import ModelRuntime
from monitor.runtime.saved_positions import SEEK, SKIP, SavedPositions, Tail, tail_of
from monitor.runtime.scoring import ScoredHook, Scoring
from monitor.runtime.state import (
    InFlight,
    StateStore,
    load_baselines,
    model_state,
    restore_model,
    save_baselines,
)
from monitor.runtime.watch import ModelWatch, WatchConfig
from monitor.sampler.base import Sampler
from monitor.sampler.ingest_first import IngestFirst
from monitor.source.base import Positions, RawRecord, Sink, Source
from monitor.source.labels import LabelJoiner
from monitor.source.records import UNDECODABLE_HEADER
from monitor.source.validate import PROCESSING_REASONS, ModelSchema

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
        on_alert: Callable[[Any], None] | None = None,
    ) -> None:
        self.settings = settings
        self.source = source
        self.runtimes = {rt.name: rt for rt in runtimes}
        self.default_model = runtimes[0].name
        self.sampler = sampler
        self.state = state or MetricsState()
        self.state.limit_versions(settings.segments.max_versions)
        self.sink = sink
        self.clock = clock
        self.on_alert = on_alert
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
        self.inflight = InFlight(settings.state_dir)
        #: [first, last] offsets per partition of the records polled but not yet applied (the in-flight marker)
        self._unapplied: dict[tuple[str, int], list[int]] = {}
        #: after an unclean exit: per partition, the last offset that was in flight (processed one at a time)
        self._careful_until: dict[tuple[str, int], int] = {}
        #: per partition, the [first, last] offsets in flight at that unclean exit: a record processed alone that is
        #: in flight at the next crash too is poison only when it lies in these (it was in flight at both)
        self._suspects: dict[tuple[str, int], tuple[int, int]] = {}
        #: records that were in flight at two consecutive crashes: dead-lettered without processing
        self._poison: set[tuple[str, int, int]] = set()
        #: the positions, last commits and fingerprints held from the saved state (monitor/runtime/saved_positions.py)
        self.saved = SavedPositions(self.state)
        #: per partition, the fingerprint of the last record processed (offset, timestamp in ms or None, CRC-32 of the
        #: value): saved with the position after it, so that a restart can tell the record now at that offset from
        #: the one applied there (a re-created topic already grown past the saved position)
        self._tails: dict[tuple[str, int], Tail] = {}
        saved = self._restore()
        self._after_unclean_exit(self.inflight.load())
        invalid_log = RateLimitedLogger(log)
        self._degraded_log = RateLimitedLogger(log, interval_seconds=60.0)
        schemas = {
            rt.name: ModelSchema(
                rt.model.n_features,
                rt.settings.feature_names,
                default_version=rt.settings.version or "unknown",
                signature=rt.model.signature,  # events decoded by its inputs; a plain one also by its input's name
            )
            for rt in runtimes
        }
        self.ingest = Ingest(settings, schemas, self.state, sink, invalid_log)
        for reason in PROCESSING_REASONS:
            for rt in runtimes:
                tel.EVENTS_INVALID_TOTAL.inc(self.state, tel.ModelReason(rt.name, reason), 0.0)
        self.labels = LabelStage(settings, self.runtimes, self.state, clock, invalid_log)
        self.scoring = Scoring(
            settings,
            self.runtimes,
            sampler,
            self.state,
            sink,
            self.labels if self.labels_topic is not None else None,
            clock,
            invalid_log,
            self.ingest.dead_letter,
            self._request_checkpoint,
        )
        for rt in runtimes:
            tel.EVENTS_CONSUMED_TOTAL.inc(self.state, tel.Model(rt.name), 0.0)
            tel.SCORES_NONFINITE_TOTAL.inc(self.state, tel.Model(rt.name), 0.0)
        #: per model, the baselines_version of its watch last written to its baselines file
        self._baselines_saved: dict[str, int] = {}

        #: ingest first (a sampler with a CPU cap): the CPU budget follows the consumer lag; None: scoring is not
        #: budgeted (every event scored, or only an event cap)
        cap = getattr(sampler, "cpu_cap_per_second", math.inf)
        poll = settings.kafka.max_poll_records
        self.ingest_first = (
            IngestFirst(cap, backlog_records=5 * poll, caught_up_records=poll) if math.isfinite(cap) else None
        )
        self._scoring_seen = (0.0, 0.0)
        for rt in self.runtimes.values():
            rt.watch = self._new_watch(rt)
            try:
                restore_model(rt, saved.get(rt.name, {}))
            except (MonitorError, KeyError, TypeError, ValueError) as exc:
                # e.g. the model's feature count changed since the state was written: rebuild, do not crash-loop
                log.warning(
                    "saved state does not fit the model; ignoring it", extra={"model": rt.name, "error": str(exc)}
                )
                rt.watch = self._new_watch(rt)
            self._restore_baselines(rt)
            ref_path = rt.settings.reference
            if rt.standardizer is not None and not rt.watch.has_reference and ref_path is not None:
                if ref_path.suffix.lower() == ".json":
                    rt.watch.install_segment_references(read_segment_references(ref_path, rt.model.n_features))
                    rt.watch.install_reference(read_reference(ref_path, rt.model.n_features)[1])
                else:
                    self.scoring.reference_from_file(rt)

    @property
    def scored_hooks(self) -> list[ScoredHook]:
        """Called after every scored batch with (runtime, raw rows, result, now, held values, segments): the probe
        scheduler's feed."""
        return self.scoring.hooks

    @property
    def label_joiner(self) -> LabelJoiner:
        return self.labels.joiner

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

    def _new_watch(self, rt: ModelRuntime) -> ModelWatch:
        watch = ModelWatch(
            rt.name,
            WatchConfig.from_settings(self.settings, rt.settings.warmup_events),
            self.state,
            on_alert=self.on_alert,
            feature_names=rt.model.feature_names,  # the names decided at load (settings' feature_names or the signature's)
        )
        watch.held_names = held_element_names(rt.model.signature)  # the held inputs' category tests, by name
        watch.set_accuracy_fit(rt.accuracy_fit)  # None: the reference holds no labelled fit
        return watch

    def _restore_baselines(self, rt: ModelRuntime) -> None:
        """Re-install a model's saved per-segment baselines (when they were computed with this model, reference and
        scoring settings)."""
        assert rt.watch is not None
        saved = load_baselines(self.store.dir, rt.name, rt.fingerprint())
        if saved:
            try:
                refs = references_from_json(saved)
                if any(ref.n_features != rt.model.n_features for ref in refs.values()):
                    raise DataError("saved segment baselines have another feature count")
            except MonitorError as exc:
                log.warning("saved segment baselines do not fit the model; ignoring them", extra={"error": str(exc)})
                return
            rt.watch.install_segment_references(refs)
            log.info("segment baselines restored from state", extra={"model": rt.name, "segments": sorted(refs)})
        self._baselines_saved[rt.name] = rt.watch.baselines_version

    def persist(self) -> bool:
        """Write the state durably, with the applied positions; False when the state directory cannot take it."""
        for rt in self.runtimes.values():  # per-segment baselines: their own file, written when one changed
            watch = rt.watch
            if (
                watch is not None
                and self._baselines_saved.get(rt.name) != watch.baselines_version
                and save_baselines(self.store.dir, rt.name, rt.fingerprint(), watch.dump_baselines())
            ):
                self._baselines_saved[rt.name] = watch.baselines_version
        models = {rt.name: model_state(rt) for rt in self.runtimes.values()}
        # positions still held from the saved state (no record of that partition seen since) stay in it
        held = {**self.saved.held, **self._applied}
        positions = [[topic, partition, offset] for (topic, partition), offset in sorted(held.items())]
        # what was last committed (before this save's commit): a restart that is handed records below it sees
        # offsets that went back, not a commit that did not land
        committed = {**self.saved.committed, **self._committed}
        # the fingerprint of the record just before each saved position, where this process (or the saved state) has it
        tails = {**self.saved.tails, **self._tails}
        ok = self.store.save(
            {
                "counters": self.state.dump_counters(),
                "models": models,
                "positions": positions,
                "committed": [[t, p, o] for (t, p), o in sorted(committed.items())],
                "tails": [[t, p, *tail] for (t, p), tail in sorted(tails.items()) if held.get((t, p)) == tail[0] + 1],
            }
        )
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

    def _after_unclean_exit(self, marker: dict[str, Any] | None) -> None:
        """Plan the re-processing of what the previous process had in flight when it died (see :class:`InFlight`)."""
        if marker is None:
            return
        ranges = _ranges(marker.get("ranges", {}))
        careful = _ranges(marker.get("careful_until", {}))
        if marker.get("careful"):
            # it died again while one record was processed alone: that record crashed it twice, if it was in flight
            # at the crash before too (a marker without suspects: every record it processed alone was)
            suspects = (
                _ranges(marker["suspects"])
                if "suspects" in marker
                else {k: (0, last) for k, (_, last) in careful.items()}
            )
            self._poison = {
                (t, p, first)
                for (t, p), (first, last) in ranges.items()
                if first == last and (t, p) in suspects and suspects[(t, p)][0] <= first <= suspects[(t, p)][1]
            }
            self._careful_until = {key: last for key, (_, last) in careful.items()}
            self._suspects = {key: suspects[key] for key in self._careful_until if key in suspects}
        else:
            self._careful_until = {key: last for key, (_, last) in ranges.items()}
            self._suspects = dict(ranges)
        log.warning(
            "the previous process stopped while processing records; re-processing them one at a time",
            extra={
                "in_flight": {f"{t}/{p}": list(r) for (t, p), r in ranges.items()},
                "dead_lettered": [f"{t}/{p}/{o}" for t, p, o in sorted(self._poison)],
            },
        )

    # -- the loop ------------------------------------------------------------------------------------------
    def step(self, timeout_seconds: float = 0.2) -> int:
        """Poll once, decode/sample everything polled, flush when a batch is full or old. Returns records read."""
        if self.sink is not None and getattr(self.sink, "backlogged", False):
            # back-pressure: unacknowledged dead letters and scores fill the producer's buffer (broker or topic
            # away): read nothing more; flush() re-sends them (waiting about a second) and commits once delivered
            self.flush()
            return 0
        records = self.source.poll(timeout_seconds, self.settings.kafka.max_poll_records)
        self.saved.sought.clear()
        now = self.clock()
        if records and self._careful_until:
            # after an unclean exit, per partition: the records of a partition that had records in flight, one at a
            # time, each applied under its own marker (its dead letters and scores are delivered with the next flush:
            # a crash there is not one record's); every other partition's records as usual, after them
            careful = [r for r in records if (r.topic, r.partition) in self._careful_until]
            rest = [r for r in records if (r.topic, r.partition) not in self._careful_until] if careful else records
            for record in careful:
                self._process([record], now, careful=True)
                self.scoring.score_pending()
                self.inflight.clear()
            if careful:
                self.flush()
            if rest:
                self._process(rest, now, careful=False)
        elif records:
            self._process(records, now, careful=False)
        if not records:
            self.scoring.accept([(ev, None) for ev in self.ingest.expire(now)], now)
        if (
            self.scoring.batch_due(now)
            or (records and self.scoring.oldest_pending is None)
            or (self.settings.checkpoint_seconds > 0 and self._checkpoint_due(now))
            or self._undelivered
        ):
            self.flush()
        self._ingest_first(now, len(records))
        return len(records)

    def consumer_lag(self) -> float | None:
        """Records the partitions hold past the pipeline's positions (log-end offsets as the source last saw them),
        all partitions together; None when the source cannot tell (no ``highwaters``) or has not seen any yet."""
        highwaters = getattr(self.source, "highwaters", None)
        marks: Mapping[tuple[str, int], int] = highwaters() if highwaters is not None else {}
        if not marks:
            return None
        lag = 0
        for key, end in marks.items():
            position = self._consumed.get(key)
            if position is not None:
                lag += max(0, end - position)
        return float(lag)

    def _ingest_first(self, now: float, polled: int) -> None:
        """Ingest first: the sampler's CPU budget from the lag and what scoring took since the last step."""
        lag = self.consumer_lag()
        if lag is not None:
            tel.CONSUMER_LAG_RECORDS.set(self.state, tel.NoLabels(), lag)
        control = self.ingest_first
        if control is None:
            return
        wall, cpu = self.scoring.busy_wall, self.scoring.busy_cpu
        control.observe(
            now,
            lag_records=lag,
            full_poll=polled >= self.settings.kafka.max_poll_records,
            scoring_wall=wall - self._scoring_seen[0],
            scoring_cpu=cpu - self._scoring_seen[1],
        )
        self._scoring_seen = (wall, cpu)
        set_budget = getattr(self.sampler, "set_cpu_budget", None)
        if set_budget is not None:
            set_budget(control.budget, now)

    def _process(self, records: list[RawRecord], now: float, *, careful: bool) -> None:
        """Decode, shadow-check and sample ``records`` (one poll's, or one record after an unclean exit)."""
        for record in records:
            span = self._unapplied.setdefault((record.topic, record.partition), [record.offset, record.offset])
            span[1] = record.offset
        self._write_marker(records, careful)
        items: list[tuple[InferenceEvent, RawRecord | None]] = []
        positions: Positions = {}
        consumed: dict[str, int] = {}  # one locked counter update per model per poll, not per record
        last: dict[tuple[str, int], RawRecord] = {}
        try:
            for record in records:
                key = (record.topic, record.partition)
                if self.saved.sought and key in self.saved.sought:
                    continue  # read before the source's seek: it delivers these again, or others, from there
                if self.saved.held and key in self.saved.held:
                    verdict, incarnation = self.saved.decide(key, record, getattr(self.source, "seek", None))
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
                if self._poison and (record.topic, record.partition, record.offset) in self._poison:
                    consumed["unknown"] = consumed.get("unknown", 0) + 1
                    self.ingest.dead_letter(
                        record, "crashed_processing", "the process died twice with this record in flight"
                    )
                elif record.headers and record.headers[0][0] == UNDECODABLE_HEADER:
                    consumed["unknown"] = consumed.get("unknown", 0) + 1
                    why = record.headers[0][1].decode("utf-8", "replace")
                    self.ingest.dead_letter(
                        record._replace(headers=record.headers[1:]), "undecodable_batch", f"record batch: {why}"
                    )
                elif self.labels_topic is not None and record.topic == self.labels_topic:
                    self.labels.record(record, now)
                else:
                    items.extend((ev, record) for ev in self.ingest.decode(record, now, consumed))
                positions[key] = record.offset + 1
                last[key] = record
                if key in self._careful_until and record.offset >= self._careful_until[key]:
                    self._end_recovery([key], "its records in flight at the unclean exit are re-processed")
        finally:  # records read are counted even when a later one fails (they will be re-delivered)
            for key, record in last.items():
                self._tails[key] = tail_of(record)
            for model, n in consumed.items():
                tel.EVENTS_CONSUMED_TOTAL.inc(self.state, tel.Model(model), float(n))
            for (model, reason), count in self.ingest.joiner.dropped.items():
                tel.KSERVE_DROPPED_TOTAL.set_total(self.state, tel.ModelReason(model, reason), float(count))
        items.extend((ev, None) for ev in self.ingest.expire(now))
        self.scoring.accept(items, now)
        # only now are these records' events pending (or dead-lettered): if anything above raised, nothing may
        # commit past records whose events were never applied (at-least-once)
        self._consumed.update(positions)

    def _write_marker(self, records: list[RawRecord], careful: bool) -> None:
        if careful:  # one record alone: the marker names it, and keeps the rest of the range still to re-process
            ranges = {f"{r.topic}/{r.partition}": [r.offset, r.offset] for r in records}
            marker: dict[str, Any] = {"ranges": ranges, "careful": True}
            marker["careful_until"] = {f"{t}/{p}": [o, o] for (t, p), o in self._careful_until.items()}
            marker["suspects"] = {f"{t}/{p}": list(span) for (t, p), span in self._suspects.items()}
        else:
            marker = {"ranges": {f"{t}/{p}": list(span) for (t, p), span in self._unapplied.items()}, "careful": False}
        self.inflight.write(marker)

    def _checkpoint_due(self, now: float) -> bool:
        interval = self.settings.checkpoint_seconds
        return self._checkpoint_requested or (now - self._last_checkpoint >= interval and bool(self._consumed))

    def flush(self) -> None:
        """Score and apply everything pending, publish; checkpoint (save, then commit) when one is due."""
        self.scoring.score_pending()
        delivered = self.sink is None or self.sink.flush(30.0)
        self.scoring.update_sampling_gauges()
        self._undelivered = not delivered
        if delivered:  # only then are these events' dead letters and scores acknowledged: they may be committed
            self._applied = self.ingest.committable(self._consumed, self.scoring.held_positions())
        self._unapplied.clear()
        self.inflight.clear()
        if self._checkpoint_due(self.clock()):
            self._checkpoint()

    # -- rebalance (called from inside poll) ---------------------------------------------------------------
    def before_revoke(self, partitions: Sequence[tuple[str, int]]) -> None:
        """Apply and checkpoint everything read from ``partitions`` before the group gives them to another member."""
        self.flush()
        self._checkpoint()
        # the next owner re-reads what this replica had not committed; it has no marker of ours: recovery ends here
        self._end_recovery([key for key in partitions if key in self._careful_until], "the partition was revoked")
        for key in partitions:
            # if the commit above does not land, the next delivery skips what we hold
            self.saved.hand_back(key, self._applied.get(key))
            self._consumed.pop(key, None)
            self._applied.pop(key, None)
            self._committed.pop(key, None)

    def after_assign(self, partitions: Sequence[tuple[str, int]]) -> None:
        return None

    def _end_recovery(self, keys: Sequence[tuple[str, int]], why: str) -> None:
        """These partitions go back to whole batches (logged; ``harmonic_degraded{reason="recovery"}`` follows)."""
        for key in keys:
            until = self._careful_until.pop(key, None)
            self._suspects.pop(key, None)
            if until is not None:
                log.info(
                    "recovery mode ended for a partition: its records are processed in batches again",
                    extra={"partition": f"{key[0]}/{key[1]}", "until_offset": until, "why": why},
                )

    # -- lifecycle -----------------------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return self.source.ready and all(rt.model is not None for rt in self.runtimes.values())

    def degraded(self) -> dict[str, str]:
        """What runs degraded (reason → what to fix): the state directory, the producer, alert delivery. The process
        stays up."""
        found: dict[str, str] = {}
        if self.store.degraded is not None:
            found["state_dir"] = self.store.degraded
        producer = getattr(self.sink, "degraded", None)
        if isinstance(producer, str):
            found["producer"] = producer
        failing = [d for d in (getattr(w, "degraded", None) for w in self.alert_workers) if isinstance(d, str)]
        if failing:
            found["alert_delivery"] = "; ".join(failing)
        broker = getattr(self.source, "degraded", None)
        if isinstance(broker, str):
            found["broker"] = broker
        if self._careful_until:
            parts = ", ".join(f"{t}/{p} up to offset {o}" for (t, p), o in sorted(self._careful_until.items()))
            found["recovery"] = (
                f"after an unclean exit, the records then in flight are re-processed one at a time ({parts}); it "
                "ends by itself when they are read again or the partitions are revoked"
            )
        return found

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """Ready when every model is loaded and partitions are assigned; ``degraded`` lists what needs fixing
        (a degraded sidecar stays ready, so that it stays in the scrape path and shows the fault)."""
        detail: dict[str, Any] = {
            "source_ready": self.source.ready,
            "models": {
                rt.name: {
                    "loaded": True,
                    "scoring": rt.scorer is not None,
                    "warmup_events": len(rt.warmup),
                    # segments still learning their own baseline (no verdict yet): {segment: {events, of}}
                    "segments_warming_up": {} if rt.watch is None else rt.watch.warming_up,
                }
                for rt in self.runtimes.values()
            },
        }
        assigned = getattr(self.source, "assigned", None)
        if assigned is not None:
            detail["partitions"] = [f"{t}/{p}" for t, p in assigned]
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
        marker stays, so the next start re-reads those records one at a time (:class:`InFlight`).
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
        self.scoring.accept([(ev, None) for ev in self.ingest.drain()], self.clock())
        self.scoring.release_held(self.clock())
        try:
            self.flush()
        except MonitorError:
            log.exception("final flush failed; uncommitted events will be re-delivered")
            return
        self._checkpoint()
        self.inflight.clear()
        log.info("pipeline stopped; state saved and offsets committed", extra={"state": str(self.store.path)})


def _ranges(raw: object) -> dict[tuple[str, int], tuple[int, int]]:
    """Marker ranges {"topic/partition": [first, last]} as {(topic, partition): (first, last)}; bad rows dropped."""
    out: dict[tuple[str, int], tuple[int, int]] = {}
    if not isinstance(raw, dict):
        return out
    for key, value in raw.items():
        topic, _, partition = str(key).rpartition("/")
        if (
            topic
            and partition.isdigit()
            and isinstance(value, list)
            and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        ):
            out[(topic, int(partition))] = (value[0], value[1])
    return out
