"""The pipeline's first seam: Kafka records → decoded events, with every invalid record counted and dead-lettered.

:class:`Ingest` owns the event decoder and the KServe request/response joiner. A record that does not decode is
counted under ``harmonic_events_invalid_total{reason}``, logged (rate-limited) and sent to the dead-letter topic
with its reason in a header; it never raises out of the loop. Label records are not read here (see
:mod:`monitor.runtime.labels`).
"""

from __future__ import annotations

import json
import traceback

from monitor import telemetry as tel
from monitor.config import Settings
from monitor.errors import InvalidEventError
from monitor.events import InferenceEvent
from monitor.exporters.prometheus import MetricsState
from monitor.logs import RateLimitedLogger
from monitor.rolling.windows import OTHER
from monitor.source.base import Positions, RawRecord, Sink
from monitor.source.decode import EventDecoder
from monitor.source.kserve_join import KServeJoiner
from monitor.source.validate import INVALID_REASONS, PROCESSING_REASONS, ModelSchema

#: input names per model with their own ``harmonic_input_invalid_total`` series (the per-input drift gauges' bound)
INPUT_SERIES_MAX = 64


class Ingest:
    """Decode records into events for the models in ``schemas`` (the first one is the default model)."""

    def __init__(
        self,
        settings: Settings,
        schemas: dict[str, ModelSchema],
        state: MetricsState,
        sink: Sink | None,
        invalid_log: RateLimitedLogger,
    ) -> None:
        self.settings = settings
        self.state = state
        self.sink = sink
        self.default_model = next(iter(schemas))
        self.decoder = EventDecoder(
            schemas,
            default_model=self.default_model,
            max_bytes=settings.max_event_bytes,
            segments=settings.segments.allowed,
            max_segments=settings.segments.max_segments,
        )
        self.joiner = KServeJoiner(self.decoder)
        self._invalid_log = invalid_log
        #: per model, the input names that have a harmonic_input_invalid_total series
        self._input_series: dict[str, set[str]] = {}
        # pre-register the bounded label set at 0, so rate() sees the first increment of every series
        for reason in (*INVALID_REASONS, *PROCESSING_REASONS):
            tel.EVENTS_INVALID_TOTAL.inc(self.state, tel.ModelReason("unknown", reason), 0.0)
        for model in schemas:
            tel.EVENTS_CONSUMED_TOTAL.inc(self.state, tel.Model(model), 0.0)
            for reason in PROCESSING_REASONS:
                tel.EVENTS_INVALID_TOTAL.inc(self.state, tel.ModelReason(model, reason), 0.0)

    def decode(self, record: RawRecord, now: float, consumed: dict[str, int]) -> list[InferenceEvent]:
        """Decode one record; invalid ones are counted, dead-lettered and logged (rate-limited), never raised.

        ``consumed`` counts records per model (one locked counter update per model per poll happens later). A decoder
        that raises anything but :class:`InvalidEventError` is a bug; the record is dead-lettered as
        ``decode_failed`` and the loop goes on.
        """
        event_now = record.timestamp_ms / 1000.0 if record.timestamp_ms else now
        try:
            events = self.joiner.update(record.value, record.headers, record.origin, now=event_now)
        except InvalidEventError as exc:
            consumed["unknown"] = consumed.get("unknown", 0) + 1
            self._count_inputs(exc)
            self.dead_letter(record, exc.reason, str(exc))
            return []
        except Exception as exc:  # noqa: BLE001 - isolation: no record may raise out of the loop
            consumed["unknown"] = consumed.get("unknown", 0) + 1
            self.dead_letter(record, "decode_failed", f"{type(exc).__name__}: {exc}", trace=traceback.format_exc())
            return []
        # one record counts once, under the model it belongs to (a held KServe half: the default model)
        model = events[0].model if events else self.default_model
        consumed[model] = consumed.get(model, 0) + 1
        return events

    def _count_inputs(self, exc: InvalidEventError) -> None:
        """``harmonic_input_invalid_total``: one count per input whose value the event got wrong, under the model
        the event named; a model's first :data:`INPUT_SERIES_MAX` input names get series, later ones ``other``."""
        if not exc.inputs or exc.model is None:
            return
        seen = self._input_series.setdefault(exc.model, set())
        for name, problem in exc.inputs:
            if name not in seen and len(seen) >= INPUT_SERIES_MAX:
                name = OTHER
            else:
                seen.add(name)
            tel.INPUT_INVALID_TOTAL.inc(self.state, tel.ModelFeatureProblem(exc.model, name, problem))

    def dead_letter(
        self,
        record: RawRecord | None,
        reason: str,
        detail: str,
        *,
        model: str = "unknown",
        event: InferenceEvent | None = None,
        trace: str | None = None,
    ) -> None:
        """Count an invalid event under ``reason``, log it (rate-limited) and send it to the dead-letter topic.

        ``record`` is the raw record it came from; without one (a KServe request whose response never came) the
        dead letter carries the event's identity as JSON. ``trace``: the traceback of the error that stopped it,
        logged with it.
        """
        tel.EVENTS_INVALID_TOTAL.inc(self.state, tel.ModelReason(model, reason))
        origin = record.origin if record is not None else None
        logged = {"traceback": trace} if trace is not None else {}
        self._invalid_log.warning(
            reason, "invalid event", reason=reason, error=detail, origin=origin, model=model, **logged
        )
        dlq = self.settings.kafka.dead_letter_topic
        if not dlq or self.sink is None:
            return
        if record is not None:
            value, extra = record.value, record.headers
            where = f"{record.topic}/{record.partition}/{record.offset}"
        else:
            ident = {"id": event.event_id, "model": event.model} if event is not None else {}
            value, extra, where = json.dumps(ident).encode(), (), "none"
        headers = [
            ("harmonic-invalid-reason", reason.encode()),
            ("harmonic-invalid-detail", detail.encode("utf-8", "replace")[:1000]),
            ("harmonic-origin", where.encode("utf-8", "replace")),
            *extra,
        ]
        # the reason is also the key: brokers before Kafka 0.11 carry no headers (the sink drops them there)
        self.sink.send(dlq, value, headers, key=reason.encode())
        tel.EVENTS_DEAD_LETTERED_TOTAL.inc(self.state, tel.Model(model))

    def expire(self, now: float) -> list[InferenceEvent]:
        """KServe halves whose partner did not come in time, as events (request only)."""
        return self.joiner.expire(now)

    def drain(self) -> list[InferenceEvent]:
        """Every KServe half still held, as events (at shutdown)."""
        return self.joiner.flush()

    def committable(self, consumed: Positions, undecided: Positions | None = None) -> Positions:
        """``consumed`` held back to the first record of any KServe half still waiting for its partner, and to the
        ``undecided`` positions (the first record of an event the sampler still holds, per partition)."""
        positions = dict(consumed)
        waiting = list(self.joiner.held_positions().items()) + list((undecided or {}).items())
        for key, held in waiting:
            if key in positions:
                positions[key] = min(positions[key], held)
        return positions
