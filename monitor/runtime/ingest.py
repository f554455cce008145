"""The pipeline's first seam: Kafka records → decoded events, and the records that do not decode with their reasons.

:class:`Ingest` owns the event decoder and the KServe request/response joiner. It fills an
:class:`~monitor.runtime.stage_results.Ingested` per poll: the events, each with its record, and every record that
does not decode as an :class:`~monitor.runtime.stage_results.Invalid` with its reason; it never raises out of the
loop. The pipeline's :class:`~monitor.runtime.stage_fanout.StageFanout` counts them
(``harmonic_events_consumed_total``, ``harmonic_events_invalid_total{reason}``) and dead-letters the invalid ones
(:mod:`monitor.runtime.dead_letters`). Label records are not read here (see :mod:`monitor.runtime.labels`).
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterable, Sequence

import numpy as np
from numpy.typing import NDArray

from monitor.config import Settings
from monitor.errors import InvalidEventError
from monitor.events import InferenceEvent
from monitor.runtime.stage_results import Ingested, Invalid
from monitor.source.base import DecodesAhead, Positions, RawRecord
from monitor.source.columns import ColumnSpec, EventColumns, decode_columns
from monitor.source.decode import EventDecoder
from monitor.source.decode_ahead import DecodeAhead, event_of
from monitor.source.kserve_join import KServeJoiner
from monitor.source.records import UNDECODABLE_HEADER
from monitor.source.validate import ModelSchema, fast_loads

log = logging.getLogger(__name__)

#: a poll's records left undecoded by the consumer's child are decoded here as columns from this many on (fewer: one
#: by one, which costs less than the column decoder's fixed part)
MIN_COLUMN_ROWS = 32


def undecodable(record: RawRecord) -> bool:
    """Whether ``record`` stands in for a record batch the source could not decode (:data:`UNDECODABLE_HEADER`)."""
    return bool(record.headers) and record.headers[0][0] == UNDECODABLE_HEADER


class Ingest:
    """Decode records into events for the models in ``schemas`` (the first one is the default model)."""

    def __init__(self, settings: Settings, schemas: dict[str, ModelSchema]) -> None:
        self.default_model = next(iter(schemas))
        #: the watched models: the only model names a count of invalid records may carry
        self.models = frozenset(schemas)
        self.decoder = EventDecoder(
            schemas,
            default_model=self.default_model,
            max_bytes=settings.max_event_bytes,
            segments=settings.segments.allowed,
            max_segments=settings.segments.max_segments,
        )
        self.joiner = KServeJoiner(self.decoder)
        #: segment values admitted when the decoder's state was last handed to the source (-1: never)
        self._shared = -1
        #: the decoder's state as the column decoder checks against it, and the segments admitted when it was taken
        self._spec: ColumnSpec | None = None
        self._spec_admitted = -1

    def share_decoder(self, source: object) -> None:
        """Hand the decoder's state to a source that decodes ahead where it reads (the consumer's child process:
        :mod:`monitor.source.decode_ahead`), first and whenever a segment value was admitted since."""
        admitted = len(self.decoder.admitted_segments)
        if isinstance(source, DecodesAhead) and admitted != self._shared:
            self._shared = admitted
            source.decode_ahead(DecodeAhead.of(self.decoder))

    def decode_all(
        self, records: Sequence[RawRecord], now: float, into: Ingested, skip_topic: str | None = None
    ) -> list[RawRecord]:
        """Decode ``records`` into ``into`` as :meth:`decode` does each, except those of ``skip_topic`` (the labels
        topic), which are returned in order; never raises.

        The records decoded as columns where they were read (``records.columns``: :class:`~monitor.source.base.Polled`)
        go into ``into.columns`` as they are, counted once per poll. The common plain event (a record without headers,
        parsed by orjson, taken by the decoder's fast path) is decoded here without :meth:`decode`'s layers of calls
        per record: ~1 µs less of the pipeline's ~15 µs per event. Every other record, and every record while KServe
        halves are held (columns included), goes through :meth:`decode`.
        """
        columns = self._taken_columns(records, skip_topic)
        taken = np.zeros(len(records), dtype=np.bool_)
        for cols in columns:
            taken[cols.rows] = True
        if len(records) - sum(len(c) for c in columns) >= MIN_COLUMN_ROWS and not self.joiner.pending:
            columns += self._columns_here(records, taken, skip_topic)
            for cols in columns:
                taken[cols.rows] = True
        if not columns:
            return self._decode_each(records, range(len(records)), now, into, skip_topic)[0]
        skipped, stop = self._decode_each(records, np.flatnonzero(~taken).tolist(), now, into, skip_topic, stop=True)
        if stop < len(records):  # the joiner holds KServe halves from here on: every record after through decode
            columns = [c.subset(c.rows < stop) for c in columns]
            columns = [c for c in columns if len(c)]
            skipped += self._decode_each(records, range(stop, len(records)), now, into, skip_topic)[0]
        consumed = into.consumed
        for cols in columns:
            consumed[cols.model] = consumed.get(cols.model, 0) + len(cols)
            into.columns.append((cols, records))
        return skipped

    def _columns_here(
        self, records: Sequence[RawRecord], taken: NDArray[np.bool_], skip_topic: str | None
    ) -> list[EventColumns]:
        """The common events among the records not ``taken`` (nor of ``skip_topic``, nor with headers), decoded as
        columns here: the records the consumer's child left (its share: ``AheadShare``), or a whole poll of a source
        in this process."""
        if self._spec_admitted != len(self.decoder.admitted_segments):
            self._spec = DecodeAhead.of(self.decoder).columns()
            self._spec_admitted = len(self.decoder.admitted_segments)
        if self._spec is None:
            return []
        at = [i for i in np.flatnonzero(~taken).tolist() if not records[i].headers and records[i].topic != skip_topic]
        if len(at) < MIN_COLUMN_ROWS:
            return []
        rest = [records[i] for i in at]
        try:
            found = decode_columns(self._spec, [r.value for r in rest], None, [r.timestamp_ms for r in rest])
        except Exception:  # noqa: BLE001 - an optimisation: every record is decoded one by one, which says why
            log.exception("cannot decode a poll as columns; its records are decoded one by one")
            return []
        positions = np.asarray(at, dtype=np.intp)
        for cols in found:
            cols.rows = positions[cols.rows]
        return found

    def _taken_columns(self, records: Sequence[RawRecord], skip_topic: str | None) -> list[EventColumns]:
        """The poll's columns (:class:`~monitor.source.base.Polled`) this decoder takes: none while KServe halves
        are held (every record then goes through :meth:`decode`, expiring them first), none of ``skip_topic``."""
        columns: list[EventColumns] | None = getattr(records, "columns", None)
        if not columns or self.joiner.pending:
            return []
        return [c for c in columns if records[int(c.rows[0])].topic != skip_topic]

    def _decode_each(
        self,
        records: Sequence[RawRecord],
        indices: Iterable[int],
        now: float,
        into: Ingested,
        skip_topic: str | None,
        *,
        stop: bool = False,
    ) -> tuple[list[RawRecord], int]:
        """:meth:`decode_all` on ``records[i]`` for each of ``indices`` (ascending): the records skipped, and where
        it stopped: with ``stop``, after the record from which the joiner holds KServe halves (else at the end)."""
        skipped: list[RawRecord] = []
        joiner, decoder, loads = self.joiner, self.decoder, fast_loads
        common, max_bytes = decoder.common, decoder.max_bytes
        events, consumed = into.events, into.consumed
        for i in indices:
            record = records[i]
            value, headers, topic, partition, offset, stamp, decoded = record
            if topic == skip_topic and not undecodable(record):
                skipped.append(record)  # a labels topic's undecodable batch is refused here, as any other
                continue
            if headers or decoded is not None or joiner.pending or len(value) > max_bytes or loads is None:
                self.decode(record, now, into)  # orjson missing (a broken install): every record in full
                if stop and joiner.pending:
                    return skipped, i + 1
                continue
            doc = event = None
            try:
                doc = loads(value)
                if type(doc) is dict and "specversion" not in doc:
                    event = common(doc, (topic, partition, offset), stamp / 1000.0 if stamp else now)
            except Exception:  # noqa: BLE001 - not JSON for orjson, or anything unforeseen: the full decode says
                doc = None
            if event is None:  # the full decode, from the document parsed here when it is an object
                self.decode(record, now, into, doc if type(doc) is dict else None)
                if stop and joiner.pending:
                    return skipped, i + 1
                continue
            model = event.model
            consumed[model] = consumed.get(model, 0) + 1
            events.append((event, record))
        return skipped, len(records)

    def decode(self, record: RawRecord, now: float, into: Ingested, parsed: dict[str, object] | None = None) -> None:
        """Decode one record into ``into``: its events, or the record as :class:`Invalid` with its reason; never
        raises. ``parsed``: the record's value as parsed already, a JSON object off the common shape.

        The record is counted in ``into.consumed`` once, under its model. A decoder that raises anything but
        :class:`InvalidEventError` is a bug; the record is invalid as ``decode_failed`` and the loop goes on. The
        stand-in for a record batch the source could not decode (:data:`UNDECODABLE_HEADER`) is refused as
        ``undecodable_batch``.
        """
        if undecodable(record):
            why = record.headers[0][1].decode("utf-8", "replace")
            into.refuse(record._replace(headers=record.headers[1:]), "undecodable_batch", f"record batch: {why}")
            return
        event_now = record.timestamp_ms / 1000.0 if record.timestamp_ms else now
        try:
            # the common plain event in one call (or decoded ahead where it was read); anything else through the
            # joiner's full decode, parsed once
            doc = parsed
            if doc is None and not record.headers and not self.joiner.pending:  # held KServe halves: expired first
                if record.decoded is not None:
                    event: InferenceEvent | None = event_of(record.decoded, record.origin)  # type: ignore[arg-type]
                else:
                    doc = self.decoder.parse(record.value)
                    event = None if doc is None else self.decoder.common(doc, record.origin, event_now)
                if event is not None:
                    consumed = into.consumed
                    consumed[event.model] = consumed.get(event.model, 0) + 1
                    into.events.append((event, record))
                    return
            events = self.joiner.update(record.value, record.headers, record.origin, now=event_now, doc=doc)
        except InvalidEventError as exc:
            # under the model the event named once the decoder knew it (a watched one: no label from the wire)
            model = exc.model if exc.model in self.models else "unknown"
            into.count(model)
            into.invalid.append(Invalid(record, exc.reason, str(exc), model=model, error=exc))
            return
        except Exception as exc:  # noqa: BLE001 - isolation: no record may raise out of the loop
            into.refuse(record, "decode_failed", f"{type(exc).__name__}: {exc}", trace=traceback.format_exc())
            return
        # one record counts once, under the model it belongs to (a held KServe half: the default model)
        into.count(events[0].model if events else self.default_model)
        into.events.extend([(ev, record) for ev in events])

    def dropped(self) -> dict[tuple[str, str], int]:
        """The KServe halves dropped so far (never paired), per (model, reason)."""
        return dict(self.joiner.dropped)

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
