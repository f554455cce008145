"""Invalid records: counted by reason, logged (rate-limited) and sent to the dead-letter topic with the reason.

:class:`DeadLetters` is the one dead-letter path. The pipeline's :class:`~monitor.runtime.stage_fanout.StageFanout`
calls it with what the stages returned: the records ingest could not decode (or the pipeline would not apply: a
record in flight at two crashes, an undecodable record batch) and the events scoring could not apply. A dead letter
carries the raw record and its reason, detail and origin in headers; the reason is also its key.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from monitor import telemetry as tel
from monitor.config import Settings
from monitor.errors import InvalidEventError
from monitor.events import InferenceEvent
from monitor.exporters.prometheus import MetricsState
from monitor.logs import RateLimitedLogger
from monitor.rolling.windows import OTHER
from monitor.source.base import RawRecord, Sink
from monitor.source.validate import INVALID_REASONS, PROCESSING_REASONS

#: input names per model with their own ``harmonic_input_invalid_total`` series (the per-input drift gauges' bound)
INPUT_SERIES_MAX = 64


class DeadLetters:
    """Counts, logs and dead-letters invalid records for the models named in ``models``."""

    def __init__(
        self,
        settings: Settings,
        state: MetricsState,
        sink: Sink | None,
        invalid_log: RateLimitedLogger,
        models: Iterable[str],
    ) -> None:
        self.state = state
        self.sink = sink
        self.topic = settings.kafka.dead_letter_topic
        self._invalid_log = invalid_log
        #: per model, the input names that have a harmonic_input_invalid_total series
        self._input_series: dict[str, set[str]] = {}
        # pre-register the bounded label set at 0, so rate() sees the first increment of every series
        for reason in (*INVALID_REASONS, *PROCESSING_REASONS):
            tel.EVENTS_INVALID_TOTAL.inc(self.state, tel.ModelReason("unknown", reason), 0.0)
        for model in models:
            for reason in PROCESSING_REASONS:
                tel.EVENTS_INVALID_TOTAL.inc(self.state, tel.ModelReason(model, reason), 0.0)

    def count_inputs(self, exc: InvalidEventError) -> None:
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

    def send(
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
        dlq = self.topic
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
