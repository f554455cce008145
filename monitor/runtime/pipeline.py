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
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from monitor.config import Settings
from monitor.errors import MonitorError
from monitor.events import InferenceEvent
from monitor.exporters.prometheus import MetricsState
from monitor.logs import RateLimitedLogger
from monitor.rolling.reference_file import read_reference
from monitor.runtime.ingest import Ingest
from monitor.runtime.labels import LabelStage
from monitor.runtime.models import ModelRuntime
from monitor.runtime.scoring import ScoredHook, Scoring
from monitor.runtime.state import StateStore, model_state, restore_model
from monitor.runtime.watch import ModelWatch, WatchConfig
from monitor.sampler.base import Sampler
from monitor.source.base import Positions, Sink, Source
from monitor.source.labels import LabelJoiner
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
        on_alert: Callable[[Any], None] | None = None,
    ) -> None:
        self.settings = settings
        self.source = source
        self.runtimes = {rt.name: rt for rt in runtimes}
        self.default_model = runtimes[0].name
        self.sampler = sampler
        self.state = state or MetricsState()
        self.sink = sink
        self.clock = clock
        self.on_alert = on_alert
        self.store = StateStore(settings.state_dir)
        self.labels_topic = settings.kafka.labels_topic
        self._consumed: Positions = {}
        self._last_persist = self.clock()
        saved = self._restore()
        invalid_log = RateLimitedLogger(log)
        schemas = {
            rt.name: ModelSchema(
                rt.model.n_features, rt.settings.feature_names, default_version=rt.settings.version or "unknown"
            )
            for rt in runtimes
        }
        self.ingest = Ingest(settings, schemas, self.state, sink, invalid_log)
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
            self.persist,
        )
        for rt in runtimes:
            self.state.inc("harmonic_events_consumed_total", (rt.name,), 0.0)
            self.state.inc("harmonic_scores_nonfinite_total", (rt.name,), 0.0)
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
            ref_path = rt.settings.reference
            if rt.standardizer is not None and not rt.watch.has_reference and ref_path is not None:
                if ref_path.suffix.lower() == ".json":
                    rt.watch.install_reference(read_reference(ref_path, rt.model.n_features)[1])
                else:
                    self.scoring.reference_from_file(rt)

    @property
    def scored_hooks(self) -> list[ScoredHook]:
        """Called after every scored batch with (runtime, raw rows, result, now): the probe scheduler's feed."""
        return self.scoring.hooks

    @property
    def label_joiner(self) -> LabelJoiner:
        return self.labels.joiner

    # -- state ---------------------------------------------------------------------------------------------
    def _restore(self) -> dict[str, dict[str, Any]]:
        """Load the saved counters; returns the saved per-model parts (applied once the models' watches exist)."""
        data = self.store.load()
        self.state.load_counters(data.get("counters", []))
        if data:
            log.info("state restored", extra={"path": str(self.store.path)})
        models: dict[str, dict[str, Any]] = data.get("models", {})
        return models

    def _new_watch(self, rt: ModelRuntime) -> ModelWatch:
        return ModelWatch(
            rt.name,
            WatchConfig.from_settings(self.settings, rt.settings.warmup_events),
            self.state,
            on_alert=self.on_alert,
            feature_names=rt.settings.feature_names,
        )

    def persist(self) -> None:
        models = {rt.name: model_state(rt) for rt in self.runtimes.values()}
        self.store.save({"counters": self.state.dump_counters(), "models": models})
        self._last_persist = self.clock()

    # -- the loop ------------------------------------------------------------------------------------------
    def step(self, timeout_seconds: float = 0.2) -> int:
        """Poll once, decode/sample everything polled, flush when a batch is full or old. Returns records read."""
        records = self.source.poll(timeout_seconds, self.settings.kafka.max_poll_records)
        now = self.clock()
        events: list[InferenceEvent] = []
        positions: Positions = {}
        consumed: dict[str, int] = {}  # one locked counter update per model per poll, not per record
        try:
            for record in records:
                if self.labels_topic is not None and record.topic == self.labels_topic:
                    self.labels.record(record, now)
                else:
                    events.extend(self.ingest.decode(record, now, consumed))
                positions[(record.topic, record.partition)] = record.offset + 1
        finally:  # records read are counted even when a later one fails (they will be re-delivered)
            for model, n in consumed.items():
                self.state.inc("harmonic_events_consumed_total", (model,), float(n))
        events.extend(self.ingest.expire(now))
        self.scoring.accept(events, now)
        # only now are these records' events pending (or dead-lettered): if anything above raised, the final
        # flush in close() must not commit past records whose events were never applied (at-least-once)
        self._consumed.update(positions)
        if self.scoring.batch_due(now) or (records and self.scoring.oldest_pending is None):
            self.flush()
        if now - self._last_persist >= 10.0:
            self.persist()
        return len(records)

    def flush(self) -> None:
        """Score everything pending, publish, then commit the consumed positions (at-least-once)."""
        self.scoring.score_pending()
        if self.sink is not None:
            self.sink.flush(30.0)
        self.scoring.update_sampling_gauges()
        self._commit()

    def _commit(self) -> None:
        if not self._consumed:
            return
        self.source.commit(self.ingest.committable(self._consumed))

    # -- rebalance (called from inside poll) ---------------------------------------------------------------
    def before_revoke(self, partitions: Sequence[tuple[str, int]]) -> None:
        self.flush()
        for key in partitions:
            self._consumed.pop(key, None)

    def after_assign(self, partitions: Sequence[tuple[str, int]]) -> None:
        return None

    # -- lifecycle -----------------------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return self.source.ready and all(rt.model is not None for rt in self.runtimes.values())

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        detail: dict[str, Any] = {
            "source_ready": self.source.ready,
            "models": {
                rt.name: {"loaded": True, "scoring": rt.scorer is not None, "warmup_events": len(rt.warmup)}
                for rt in self.runtimes.values()
            },
        }
        assigned = getattr(self.source, "assigned", None)
        if assigned is not None:
            detail["partitions"] = [f"{t}/{p}" for t, p in assigned]
        ok = self.ready
        self.state.set("harmonic_ready", (), 1.0 if ok else 0.0)
        return ok, detail

    def run(
        self, stop: threading.Event, *, until_exhausted: bool = False, tick: Callable[[], None] | None = None
    ) -> None:
        """Loop until ``stop`` is set (or a finite source is exhausted), then flush, commit and persist."""
        log.info("pipeline started", extra={"models": sorted(self.runtimes)})
        try:
            while not stop.is_set():
                n = self.step()
                if tick is not None:
                    tick()
                if until_exhausted and n == 0 and self.source.exhausted:
                    break
        finally:
            self.close()

    def close(self) -> None:
        self.scoring.accept(self.ingest.drain(), self.clock())
        try:
            self.flush()
        except MonitorError:
            log.exception("final flush failed; uncommitted events will be re-delivered")
        self.persist()
        log.info("pipeline stopped; offsets committed and state persisted", extra={"state": str(self.store.path)})
