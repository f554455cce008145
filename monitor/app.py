"""The only wiring: source → decode → sample → micro-batch → score → windows/drift/alerts → metrics → commit.

Delivery is at-least-once: positions are committed only after every event before them has been applied (scored
and its results recorded, scores published, dead letters acknowledged). On SIGTERM the loop finishes the batch in
hand, commits, persists state and returns; a watchdog bounds the whole shutdown.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.config import ModelSettings, Settings
from monitor.cpus import intra_op_threads
from monitor.errors import ConfigError, DataError, InvalidEventError, MonitorError
from monitor.events import InferenceEvent, feature_rows
from monitor.exporters.prometheus import MetricsState
from monitor.logs import RateLimitedLogger
from monitor.metrics.scorer import RobustnessScorer, ScoreResult, ScoringConfig
from monitor.model.io import load_rows
from monitor.model.onnx import OnnxModel, OnnxRuntimeOptions
from monitor.model.standardize import Standardizer
from monitor.rolling.labelled import LabelledWindow
from monitor.sampler.base import Sampler
from monitor.source.base import Positions, RawRecord, Sink, Source
from monitor.source.decode import INVALID_REASONS, EventDecoder, KServeJoiner, ModelSchema
from monitor.source.labels import JoinedLabel, LabelDecoder, LabelJoiner, ScoredPrediction
from monitor.watch import ModelWatch, WatchConfig

log = logging.getLogger("monitor.app")
STATE_FILE = "state.json"
STATE_VERSION = 1


@dataclass
class ModelRuntime:
    """One watched model: its ONNX copy, standardizer (None during warm-up), scorer and analytics."""

    settings: ModelSettings
    model: OnnxModel
    standardizer: Standardizer | None = None
    scorer: RobustnessScorer | None = None
    watch: ModelWatch | None = None
    warmup: list[NDArray[np.float64]] = field(default_factory=list)
    #: sampled events waiting for the next micro-batch, each with its shadow disagreement (NaN, 0 or 1) and its
    #: sampling weight (1 / inclusion probability)
    pending: list[tuple[InferenceEvent, float, float]] = field(default_factory=list)
    _fingerprint: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.settings.name

    def scoring_config(self) -> ScoringConfig:
        s = self.settings.scoring
        return ScoringConfig(
            radius=s.radius,
            ball=s.ball,
            output=s.output,
            flicker_copies=s.flicker_copies,
            sigma=s.sigma,
            steps=s.steps,
            seed=s.seed,
            regression_tolerance=s.regression_tolerance,
        )

    def activate(self, standardizer: Standardizer) -> None:
        self.standardizer = standardizer
        self.scorer = RobustnessScorer(self.model, standardizer, self.scoring_config())

    def fingerprint(self) -> dict[str, Any]:
        """What a saved reference was computed from: the model file, the reference file and the scoring settings.

        Persisted beside the reference; a restart with any of them changed rebuilds the reference instead of
        restoring a γ/flicker distribution that no longer describes this model (see ``Pipeline._restore_model``).
        Computed once, when first asked (at start-up): it describes the files this process loaded.
        """
        if self._fingerprint is None:
            reference = self.settings.reference
            self._fingerprint = {
                "model_sha256": _sha256(self.model.path),
                "reference_sha256": None if reference is None else _sha256(reference),
                "scoring": self.settings.scoring.model_dump(mode="json"),
            }
        return self._fingerprint


def load_model_runtime(ms: ModelSettings) -> ModelRuntime:
    model = OnnxModel(
        ms.path,
        OnnxRuntimeOptions(
            providers=ms.providers,
            intra_op_threads=intra_op_threads(ms.threads, str(ms.path)),
            max_rows_per_run=ms.max_rows_per_run,
            rows_in_graph=ms.rows_in_graph,
        ),
    )
    rt = ModelRuntime(settings=ms, model=model)
    if ms.scoring.space == "raw":
        rt.activate(Standardizer.identity(model.n_features))
    elif ms.reference is not None and ms.reference.suffix.lower() == ".json":
        from monitor.commands.reference import read_reference

        rt.activate(read_reference(ms.reference, model.n_features)[0])
    elif ms.reference is not None:
        ref = load_rows(ms.reference)
        if ref.shape[1] != model.n_features:
            raise ConfigError(
                f"reference '{ms.reference}' has {ref.shape[1]} columns; model '{ms.name}' expects "
                f"{model.n_features} features. Was the reference built for another model?"
            )
        rt.activate(Standardizer.fit(ref[np.all(np.isfinite(ref), axis=1)]))
    return rt


class StateStore:
    """``<state_dir>/state.json``, written atomically (temp file + rename)."""

    def __init__(self, state_dir: Path) -> None:
        self.dir = Path(state_dir)
        self.path = self.dir / STATE_FILE

    def load(self) -> dict[str, Any]:
        if not self.path.is_file():
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and data.get("version") == STATE_VERSION:
                _check_state(data)
        except (OSError, ValueError) as exc:  # ValueError: bad JSON, bad UTF-8, or not the shape persist() writes
            # a corrupt state file must not keep the sidecar down: start fresh, keep the bad file for inspection
            bad = self.path.with_suffix(f".corrupt-{int(time.time())}")
            self.path.rename(bad)
            log.error("state file unreadable; starting fresh", extra={"moved_to": str(bad), "error": str(exc)})
            return {}
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            log.warning("state file has an unknown version; ignoring it", extra={"path": str(self.path)})
            return {}
        return data

    def save(self, data: dict[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"version": STATE_VERSION, **data}, default=float), encoding="utf-8")
        os.replace(tmp, self.path)


def _check_state(data: dict[str, Any]) -> None:
    """Raise ValueError when a parsed state file does not have the shape :meth:`Pipeline.persist` writes."""
    counters, models = data.get("counters", []), data.get("models", {})
    if not isinstance(counters, list) or not all(
        isinstance(row, dict)
        and isinstance(row.get("name"), str)
        and isinstance(row.get("labels"), list)
        and isinstance(row.get("value"), int | float)
        for row in counters
    ):
        raise ValueError("state 'counters' is not a list of {name, labels, value} objects")
    if not isinstance(models, dict) or not all(
        isinstance(m, dict) and all(isinstance(m.get(k, {}), dict) for k in ("standardizer", "watch"))
        for m in models.values()
    ):
        raise ValueError("state 'models' is not an object of per-model objects")


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
        schemas = {
            rt.name: ModelSchema(
                rt.model.n_features, rt.settings.feature_names, default_version=rt.settings.version or "unknown"
            )
            for rt in runtimes
        }
        self.decoder = EventDecoder(
            schemas,
            default_model=self.default_model,
            max_bytes=settings.max_event_bytes,
            segments=settings.segments.allowed,
            max_segments=settings.segments.max_segments,
        )
        self.joiner = KServeJoiner(self.decoder)
        self._invalid_log = RateLimitedLogger(log)
        self._thin_rng = np.random.default_rng(0)
        self.labels_topic = settings.kafka.labels_topic
        self.label_decoder = LabelDecoder()
        self.label_joiner = LabelJoiner(settings.labels.ttl_seconds, settings.labels.max_predictions)
        self.label_windows: dict[str, LabelledWindow] = {}
        self._label_rng = np.random.default_rng(1)
        #: called after every scored batch with (runtime, raw rows, result, now) — the probe scheduler's feed
        self.scored_hooks: list[Callable[[ModelRuntime, NDArray[np.float64], ScoreResult, float], None]] = []
        self._consumed: Positions = {}
        self._oldest_pending: float | None = None
        self._last_persist = self.clock()
        self._restore()
        # pre-register the bounded label sets at 0, so rate() sees the first increment of every series
        for reason in INVALID_REASONS:
            self.state.inc("harmonic_events_invalid_total", ("unknown", reason), 0.0)
        for rt in runtimes:
            self.state.inc("harmonic_events_consumed_total", (rt.name,), 0.0)
            self.state.inc("harmonic_scores_nonfinite_total", (rt.name,), 0.0)
        for rt in self.runtimes.values():
            rt.watch = self._new_watch(rt)
            try:
                self._restore_model(rt, self._saved_models.get(rt.name, {}))
            except (MonitorError, KeyError, TypeError, ValueError) as exc:
                # e.g. the model's feature count changed since the state was written: rebuild, do not crash-loop
                log.warning(
                    "saved state does not fit the model; ignoring it", extra={"model": rt.name, "error": str(exc)}
                )
                rt.watch = self._new_watch(rt)
            ref_path = rt.settings.reference
            if rt.standardizer is not None and not rt.watch.has_reference and ref_path is not None:
                if ref_path.suffix.lower() == ".json":
                    from monitor.commands.reference import read_reference

                    rt.watch.install_reference(read_reference(ref_path, rt.model.n_features)[1])
                else:
                    self._reference_from_file(rt)

    # -- state ---------------------------------------------------------------------------------------------
    def _restore(self) -> None:
        data = self.store.load()
        self.state.load_counters(data.get("counters", []))
        self._saved_models: dict[str, dict[str, Any]] = data.get("models", {})
        if data:
            log.info("state restored", extra={"path": str(self.store.path)})

    def _new_watch(self, rt: ModelRuntime) -> ModelWatch:
        return ModelWatch(
            rt.name,
            WatchConfig.from_settings(self.settings, rt.settings.warmup_events),
            self.state,
            on_alert=self.on_alert,
            feature_names=rt.settings.feature_names,
        )

    def _restore_model(self, rt: ModelRuntime, saved: dict[str, Any]) -> None:
        """Re-install a model's saved standardizer (when none is configured) and reference, if they fit the model.

        The saved reference and windows are dropped (and the reference rebuilt from the file or a new warm-up)
        when the model file, the reference file or the scoring settings changed since they were written: their γ
        and flicker are not comparable with what this process computes. A saved warm-up standardizer is kept (it
        describes the traffic, not the model) unless a reference file is configured now.
        """
        assert rt.watch is not None
        n = rt.model.n_features
        current = rt.fingerprint()
        saved_fingerprint = saved.get("fingerprint")
        if "watch" in saved and saved_fingerprint != current:
            changed = (
                ["state written by a version without fingerprints"]
                if not isinstance(saved_fingerprint, dict)
                else [key.removesuffix("_sha256") for key in current if saved_fingerprint.get(key) != current[key]]
            )
            log.warning(
                "saved reference and windows were computed with another model, reference or scoring settings; "
                "rebuilding them",
                extra={"model": rt.name, "changed": changed},
            )
            saved = {k: v for k, v in saved.items() if k != "watch"}
        if rt.standardizer is None and "standardizer" in saved:
            std = Standardizer.from_dict(saved["standardizer"])
            if std.n_features != n:
                raise DataError(f"saved standardizer has {std.n_features} features; model '{rt.name}' expects {n}")
            rt.activate(std)
            log.info("standardizer restored from state", extra={"model": rt.name})
        if "watch" in saved:
            rt.watch.restore(saved["watch"])
            ref = rt.watch.reference
            if ref is not None and ref.n_features != n:
                raise DataError(f"saved reference has {ref.n_features} features; model '{rt.name}' expects {n}")

    def persist(self) -> None:
        models: dict[str, Any] = {}
        for rt in self.runtimes.values():
            entry: dict[str, Any] = {}
            if rt.standardizer is not None:
                entry["standardizer"] = rt.standardizer.to_dict()
            if rt.watch is not None:
                entry["watch"] = rt.watch.dump()
                entry["fingerprint"] = rt.fingerprint()
            models[rt.name] = entry
        self.store.save({"counters": self.state.dump_counters(), "models": models})
        self._last_persist = self.clock()

    def _reference_from_file(self, rt: ModelRuntime) -> None:
        """Score (a bounded sample of) the reference data once to get the reference γ/flicker distribution."""
        assert rt.settings.reference is not None and rt.scorer is not None and rt.watch is not None
        ref = load_rows(rt.settings.reference)
        ref = ref[np.all(np.isfinite(ref), axis=1)]
        rng = np.random.default_rng(rt.settings.scoring.seed)
        if ref.shape[0] > rt.watch.config.reference_max_events:
            ref = ref[rng.choice(ref.shape[0], rt.watch.config.reference_max_events, replace=False)]
        result = self._score_rows(rt, ref, purpose="reference")
        rt.watch.set_reference(ref, result)
        log.info("reference built from file", extra={"model": rt.name, "rows": int(ref.shape[0])})

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
                    self._label_record(record, now)
                else:
                    events.extend(self._ingest(record, now, consumed))
                positions[(record.topic, record.partition)] = record.offset + 1
        finally:  # records read are counted even when a later one fails (they will be re-delivered)
            for model, n in consumed.items():
                self.state.inc("harmonic_events_consumed_total", (model,), float(n))
        events.extend(self.joiner.expire(now))
        self._accept_many(events, now)
        # only now are these records' events pending (or dead-lettered): if anything above raised, the final
        # flush in close() must not commit past records whose events were never applied (at-least-once)
        self._consumed.update(positions)
        full = any(len(rt.pending) >= self.settings.batch.max_events for rt in self.runtimes.values())
        aged = (
            self._oldest_pending is not None
            and (now - self._oldest_pending) * 1000.0 >= self.settings.batch.max_wait_ms
        )
        if full or aged or (records and self._oldest_pending is None):
            self.flush()
        if now - self._last_persist >= 10.0:
            self.persist()
        return len(records)

    def _ingest(self, record: RawRecord, now: float, consumed: dict[str, int]) -> list[InferenceEvent]:
        """Decode one record; invalid ones are counted, dead-lettered and logged (rate-limited), never raised."""
        event_now = record.timestamp_ms / 1000.0 if record.timestamp_ms else now
        try:
            events = self.joiner.update(record.value, record.headers, record.origin, now=event_now)
        except InvalidEventError as exc:
            consumed["unknown"] = consumed.get("unknown", 0) + 1
            self._invalid(record, exc)
            return []
        # one record counts once, under the model it belongs to (a held KServe half: the default model)
        model = events[0].model if events else self.default_model
        consumed[model] = consumed.get(model, 0) + 1
        return events

    def _invalid(self, record: RawRecord, exc: InvalidEventError) -> None:
        self.state.inc("harmonic_events_invalid_total", ("unknown", exc.reason))
        self._invalid_log.warning(exc.reason, "invalid event", reason=exc.reason, error=str(exc), origin=record.origin)
        dlq = self.settings.kafka.dead_letter_topic
        if dlq and self.sink is not None:
            headers = [
                ("harmonic-invalid-reason", exc.reason.encode()),
                ("harmonic-invalid-detail", str(exc).encode()[:1000]),
                ("harmonic-origin", f"{record.topic}/{record.partition}/{record.offset}".encode()),
                *record.headers,
            ]
            # the reason is also the key: brokers before Kafka 0.11 carry no headers (the sink drops them there)
            self.sink.send(dlq, record.value, headers, key=exc.reason.encode())
            self.state.inc("harmonic_events_dead_lettered_total", ("unknown",))

    def _accept_many(self, events: Sequence[InferenceEvent], now: float) -> None:
        """Shadow-check events that carry a live label (one centre-only model call per model), then sample."""
        by_model: dict[str, list[InferenceEvent]] = {}
        for ev in events:
            by_model.setdefault(ev.model, []).append(ev)
        for name, evs in by_model.items():
            rt = self.runtimes[name]
            if rt.scorer is None:
                evs = self._warm_up(rt, evs)
                if not evs:
                    continue
            shadow = self._shadow(rt, evs)
            # the ONNX copy and the live server disagree: always score it (a stale copy must show)
            weights = self.sampler.sample_many(evs, now, [d == 1.0 for d in shadow])
            for ev, disagreement, weight in zip(evs, shadow, weights, strict=True):
                if weight <= 0:
                    continue
                self.state.inc("harmonic_events_sampled_total", (ev.model,))
                rt.pending.append((ev, disagreement, weight))
                if self._oldest_pending is None:
                    self._oldest_pending = now

    def _warm_up(self, rt: ModelRuntime, evs: list[InferenceEvent]) -> list[InferenceEvent]:
        """Feed the warm-up window; returns the events past it (to be scored with the freshly fitted standardizer)."""
        need = rt.settings.warmup_events - len(rt.warmup)
        rt.warmup.extend(ev.features for ev in evs[:need])
        if len(rt.warmup) < rt.settings.warmup_events:
            return []
        rt.activate(Standardizer.fit(np.vstack(rt.warmup)))
        rt.warmup.clear()
        log.info("warm-up complete; standardizer fitted", extra={"model": rt.name})
        self.persist()
        return evs[need:]

    def _shadow(self, rt: ModelRuntime, evs: Sequence[InferenceEvent]) -> list[float]:
        """Shadow agreement (SPEC §4): per event NaN (no live label), 0.0 (agrees) or 1.0 (disagrees).

        The live label is the server's class *value*; it is compared with the ONNX copy's own label output when
        the model has one, else with the predicted class index. One centre-only model call per model per poll.
        """
        idx = [i for i, ev in enumerate(evs) if ev.prediction is not None and ev.prediction.label is not None]
        flags = [float("nan")] * len(evs)
        if not idx or rt.model.kind != "classifier":
            return flags
        rows = feature_rows([evs[i] for i in idx], np.float32)
        out = rt.model.evaluate(rows)
        self.state.inc("harmonic_model_evaluations_total", (rt.name, "shadow"), float(len(idx)))
        ours = out.raw_label if out.raw_label is not None else out.label
        assert ours is not None
        live = [evs[i].prediction.label for i in idx]  # type: ignore[union-attr]
        if ours.dtype.kind in "iub":
            mismatch = np.asarray(live, dtype=np.int64) != ours.astype(np.int64)
        else:
            mismatch = np.array([str(a) != str(b) for a, b in zip(live, ours, strict=True)])
        self.state.inc("harmonic_shadow_compared_total", (rt.name,), float(len(idx)))
        self.state.inc("harmonic_shadow_disagreements_total", (rt.name,), float(mismatch.sum()))
        for j, i in enumerate(idx):
            flags[i] = 1.0 if mismatch[j] else 0.0
        return flags

    def flush(self) -> None:
        """Score everything pending, publish, then commit the consumed positions (at-least-once)."""
        for rt in self.runtimes.values():
            while rt.pending:
                batch = rt.pending[: self.settings.batch.max_events]
                del rt.pending[: len(batch)]
                self._score_batch(rt, batch)
        self._oldest_pending = None
        if self.sink is not None:
            self.sink.flush(30.0)
        self._update_sampling_gauges()
        self._commit()

    def _commit(self) -> None:
        if not self._consumed:
            return
        positions = dict(self._consumed)
        for key, held in self.joiner.held_positions().items():
            if key in positions:
                positions[key] = min(positions[key], held)
        self.source.commit(positions)

    def _score_rows(self, rt: ModelRuntime, rows: NDArray[np.float64], *, purpose: str) -> ScoreResult:
        assert rt.scorer is not None
        result = rt.scorer.score(rows)
        self.state.inc(
            "harmonic_model_evaluations_total", (rt.name, purpose), float(rows.shape[0] * rt.scorer.rows_per_event())
        )
        return result

    def _score_batch(self, rt: ModelRuntime, pending: list[tuple[InferenceEvent, float, float]]) -> None:
        started = time.perf_counter()
        batch = [ev for ev, _, _ in pending]
        shadow = np.array([d for _, d, _ in pending])
        weights = np.array([w for _, _, w in pending])
        rows = feature_rows(batch)
        result = self._score_rows(rt, rows, purpose="events")
        self.state.observe("harmonic_score_batch_duration_seconds", (rt.name,), [time.perf_counter() - started])
        self._count_nonfinite(rt.name, batch, result)
        now = self.clock()
        self.state.observe(
            "harmonic_event_lag_seconds", (rt.name,), np.array([max(0.0, now - ev.timestamp_seconds) for ev in batch])
        )
        assert rt.watch is not None
        rt.watch.update(batch, rows, result, shadow, uniform=self._uniform_subset(rt.name, weights))
        for hook in self.scored_hooks:
            hook(rt, rows, result, now)
        if self.settings.kafka.scores_topic and self.sink is not None:
            self._publish_scores(rt, batch, result)
        if self.labels_topic is not None and rt.model.kind == "classifier":
            self._remember_for_labels(rt, batch, rows, result)

    def _count_nonfinite(self, model: str, batch: list[InferenceEvent], result: ScoreResult) -> None:
        """Valid events whose γ came out NaN or ±inf: the model's own outputs were not finite at the event or around
        it (an overflow at extreme inputs). Their γ stays out of the histograms and the windows' statistics, so they are
        counted here, and logged (rate-limited): a model that breaks down at some inputs is itself a robustness
        finding."""
        bad = np.flatnonzero(result.valid & ~np.isfinite(result.gamma))
        if bad.size:
            self.state.inc("harmonic_scores_nonfinite_total", (model,), float(bad.size))
            self._invalid_log.warning(
                "nonfinite-" + model,
                "model outputs not finite at valid events; their scores are left out of histograms and windows",
                model=model,
                events=int(bad.size),
                event_ids=[batch[i].event_id for i in bad[:3]],
            )

    # -- delayed labels (SPEC §7) -------------------------------------------------------------------------------
    def _label_record(self, record: RawRecord, now: float) -> None:
        self.state.inc("harmonic_labels_consumed_total", ())
        try:
            label = self.label_decoder.decode(record.value, now=now)
        except InvalidEventError as exc:
            self.state.inc("harmonic_labels_invalid_total", (exc.reason,))
            self._invalid_log.warning("label-" + exc.reason, "invalid label", reason=exc.reason, error=str(exc))
            return
        joined = self.label_joiner.add_label(label, now)
        self._apply_labels([joined] if joined is not None else [])

    def _remember_for_labels(
        self, rt: ModelRuntime, batch: list[InferenceEvent], rows: NDArray[np.float64], result: ScoreResult
    ) -> None:
        """Keep each scored prediction (class value, confidence, class under σ = 0.1 noise) until its label comes.

        One extra model call of 2·B rows (centres and one noisy copy each) gives the model's own class values, which
        is what labels carry.
        """
        assert rt.standardizer is not None
        ok = result.valid
        if not ok.any():
            return
        x = rows[ok].astype(np.float32)
        sigma = (self.settings.labels.noise_sigma * rt.standardizer.scale).astype(np.float32)
        noisy = x + self._label_rng.standard_normal(x.shape, dtype=np.float32) * sigma
        out = rt.model.evaluate(np.vstack([x, noisy]))
        self.state.inc("harmonic_model_evaluations_total", (rt.name, "labels"), float(2 * x.shape[0]))
        values = out.raw_label if out.raw_label is not None and out.raw_label.dtype.kind in "iu" else out.label
        assert values is not None
        b = x.shape[0]
        now = self.clock()
        joined: list[JoinedLabel] = []
        for j, i in enumerate(np.flatnonzero(ok)):
            ev = batch[i]
            prediction = ScoredPrediction(
                ev.event_id,
                ev.model,
                ev.model_version,
                ev.segment,
                ev.timestamp_seconds,
                predicted_class=int(values[j]),
                confidence=None if not np.isfinite(result.probability[i]) else float(result.probability[i]),
                noisy_class=int(values[b + j]),
            )
            hit = self.label_joiner.add_prediction(prediction, now)
            if hit is not None:
                joined.append(hit)
        self._apply_labels(joined)

    def _apply_labels(self, joined: list[JoinedLabel]) -> None:
        by_model: dict[str, list[JoinedLabel]] = {}
        for j in joined:
            by_model.setdefault(j.prediction.model, []).append(j)
        for model, items in by_model.items():
            window = self.label_windows.get(model)
            if window is None:
                window = self.label_windows[model] = LabelledWindow(self.settings.labels.window_events)
            window.update(
                [j.correct for j in items], [j.noisy_correct for j in items], [j.prediction.confidence for j in items]
            )
            self.state.inc("harmonic_labels_joined_total", (model,), float(len(items)))
            q = window.get()
            name = f"last_{window.size}"
            self.state.set("harmonic_window_accuracy", (model, "all", name), q.accuracy)
            self.state.set("harmonic_resilience", (model,), q.resilience)
            self.state.set("harmonic_reliability", (model,), q.reliability)
            stability = self._stability(model)
            if np.isfinite(stability):
                self.state.set("harmonic_robustness_composite", (model,), q.composite(stability))
        self.state.set_counter("harmonic_labels_unmatched_total", (), float(self.label_joiner.unmatched_labels_total))

    def _stability(self, model: str) -> float:
        """1 − mean flicker over the model's count windows (all segments)."""
        rt = self.runtimes.get(model)
        if rt is None or rt.watch is None:
            return float("nan")
        values = [rt.watch.windows.count_window(m, seg).values("flicker") for m, seg in rt.watch.windows.keys]
        flat = np.concatenate(values) if values else np.zeros(0)
        flat = flat[np.isfinite(flat)]
        return float(1.0 - flat.mean()) if flat.size else float("nan")

    def _uniform_subset(self, model: str, weights: NDArray[np.float64]) -> NDArray[np.bool_] | None:
        """Thin a class-stratified sample back to uniform inclusion for the windows and drift detectors.

        Stratified sampling over-represents rare live classes (and forced shadow keeps); their γ/flicker would then
        not be comparable with the reference, which was not sampled that way. Keeping each event with probability
        w / w_max (w = 1/inclusion probability, w_max = the largest current stratum weight) gives every offered
        event the same overall inclusion probability 1/w_max. None when the sampler is not class-biased.
        """
        if not getattr(self.sampler, "biases_class_mix", False):
            return None
        stats = self.sampler.snapshot().get(model)
        finite = [st.weight for st in (stats.strata.values() if stats else ()) if np.isfinite(st.weight)]
        w_max = max([*finite, float(weights.max(initial=1.0))])
        keep: NDArray[np.bool_] = self._thin_rng.random(weights.shape[0]) < weights / w_max
        return keep

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
            }
            self.sink.send(topic, json.dumps(doc).encode(), key=ev.event_id.encode())

    def _update_sampling_gauges(self) -> None:
        for name, stats in self.sampler.snapshot().items():
            self.state.set("harmonic_events_sampled_ratio", (name,), stats.fraction)

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
        self._accept_many(self.joiner.flush(), self.clock())
        try:
            self.flush()
        except MonitorError:
            log.exception("final flush failed; uncommitted events will be re-delivered")
        self.persist()
        log.info("pipeline stopped; offsets committed and state persisted", extra={"state": str(self.store.path)})


def _sha256(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _num(v: float) -> float | None:
    return None if not np.isfinite(v) else float(v)
