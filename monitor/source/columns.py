"""A poll's common plain events decoded as columns, in the consumer's child process.

Why: the pipeline's own Python per event (a JSON document, an event object, a step of the sampler and of the shadow
check each) bounded a whole sidecar at ~0.1 of what librdkafka reads. Here one call per partition batch turns the
record values of the common event shape (``id``, ``ts``, ``model``, ``model_version``, ``segment``, ``features``,
``prediction``: :meth:`~monitor.source.decode.EventDecoder._plain_common`) into arrays: per model, the rows taken,
their ids, versions, timestamps, segments, a float64 matrix of features and the live labels and probabilities
(:class:`EventColumns`). The pipeline samples and shadow-checks on the arrays; only the rows it keeps become
:class:`~monitor.events.InferenceEvent` objects (:meth:`EventColumns.event`).

The parse is msgspec's typed JSON decoder (``_Doc``: one C call per record, no dict per event; measured against
orjson with the columns gathered from its dicts and pyarrow's JSON reader over the poll: docs/DESIGN.md). The checks
are masks over the poll: a record is *taken* only when every field is one the per-record fast path takes as it is
(a printable-ASCII id within its cap, a model the fast path decodes or the default one, a clean version, the model's
width of numbers within float32's range, an epoch-ms ``ts`` or the record's timestamp, an admitted or allowed
segment, no prediction or an int64 ``label`` with probabilities in [0, 1], no ``value`` and no ``specversion``).
Every other record (missing field, wrong width, not finite or out of range, bad timestamp, unknown model, a KServe
event, a record with headers, anything msgspec refuses) is left to the per-record decoder in the pipeline's
process, so that every reason, count and dead letter stays that decoder's; tests/unit/test_columns.py feeds random
polls with every fault through both and requires the same events.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import msgspec
import numpy as np
from numpy.typing import NDArray

from monitor.events import InferenceEvent, LivePrediction
from monitor.source.validate import (
    FLOAT32_MAX,
    INT64_MAX,
    INT64_MIN,
    MAX_EPOCH_MS,
    MAX_ID_CHARS,
    MAX_VERSION_CHARS,
    MIN_EPOCH_MS,
    Origin,
)


class _Prediction(msgspec.Struct):
    label: int
    probabilities: list[float] | None = None
    value: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class _Doc(msgspec.Struct):
    """The common event shape; a record of any other shape fails to decode here and goes to the per-record decoder."""

    id: str
    features: list[float]
    ts: int | float | None = None
    model: str | None = None
    model_version: str | None = None
    segment: str | None = None
    prediction: _Prediction | None = None
    specversion: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


_decode = msgspec.json.Decoder(_Doc).decode


def _clean(text: str, cap: int) -> bool:
    """Whether ``text`` is one :func:`~monitor.source.validate.clean_text` returns as it is."""
    return len(text) <= cap and text.isascii() and text.isprintable()


@dataclass(slots=True)
class EventColumns:
    """One model's common events of one partition batch (what the consumer's child hands over beside the records)."""

    model: str
    #: the rows' positions among the batch's records
    rows: NDArray[np.intp]
    ids: list[str]
    versions: list[str]
    timestamps: NDArray[np.float64]
    segments: list[str]
    #: (rows, the model's width), finite and within float32's range
    features: NDArray[np.float64]
    #: the live label per row (0 where there is none: ``has_label``)
    labels: NDArray[np.int64]
    has_label: NDArray[np.bool_]
    probabilities: list[tuple[float, ...] | None]

    def __len__(self) -> int:
        return len(self.ids)

    def shifted(self, by: int) -> EventColumns:
        """These columns with ``rows`` counted ``by`` records further on (their place in a longer list)."""
        return replace(self, rows=self.rows + by)

    def subset(self, keep: NDArray[np.bool_]) -> EventColumns:
        """The rows where ``keep`` is True."""
        picked = np.flatnonzero(keep).tolist()
        return EventColumns(
            self.model,
            self.rows[keep],
            [self.ids[j] for j in picked],
            [self.versions[j] for j in picked],
            self.timestamps[keep],
            [self.segments[j] for j in picked],
            self.features[keep],
            self.labels[keep],
            self.has_label[keep],
            [self.probabilities[j] for j in picked],
        )

    def event(self, j: int, origin: Origin | None) -> InferenceEvent:
        """Row ``j`` as the event the per-record decoder makes of its record, read at ``origin``."""
        prediction = LivePrediction(int(self.labels[j]), self.probabilities[j]) if self.has_label[j] else None
        event = InferenceEvent(
            self.ids[j],
            self.model,
            self.versions[j],
            self.features[j],
            float(self.timestamps[j]),
            self.segments[j],
            prediction,
        )
        event.origin = origin
        return event


@dataclass(frozen=True, slots=True)
class ColumnSpec:
    """The decoder state the columns are checked against (:class:`~monitor.source.decode_ahead.DecodeAhead`'s)."""

    #: model → (features, default version): the models whose list events the fast path takes
    models: dict[str, tuple[int, str]]
    default_model: str | None
    max_bytes: int
    segments: frozenset[str] | None
    admitted: frozenset[str]


def decode_columns(
    spec: ColumnSpec,
    values: Sequence[bytes],
    headers: Sequence[object] | None,
    stamps: Sequence[int | None],
    upto: int | None = None,
) -> list[EventColumns]:
    """The common events among the first ``upto`` (default all) of one partition batch's records, per model.

    ``headers`` (per record, or None when no record has any) and ``stamps`` (the records' timestamps in ms, or None)
    as in a :data:`~monitor.source.kafka.PartitionBatch`. A record not taken is in no :class:`EventColumns`.
    """
    n = len(values) if upto is None else min(upto, len(values))
    docs: list[_Doc | None]
    max_bytes = spec.max_bytes
    try:
        if headers is not None or any(len(v) > max_bytes for v in values[:n]):
            raise ValueError
        docs = list(map(_decode, values[:n]))
    except (msgspec.DecodeError, ValueError):
        docs = [_decode_one(values[i], max_bytes) if not (headers and headers[i]) else None for i in range(n)]
    taken = [i for i, d in enumerate(docs) if d is not None and d.specversion is msgspec.UNSET]
    if not taken:
        return []
    good: list[_Doc] = [docs[i] for i in taken]  # type: ignore[misc]
    ok = np.ones(len(good), dtype=np.bool_)

    # ids and versions: as they are (clean_text has nothing to do)
    ok &= np.fromiter((_clean(d.id, MAX_ID_CHARS) for d in good), np.bool_, len(good))
    names = [d.model if d.model is not None else spec.default_model for d in good]
    raw_versions = [d.model_version for d in good]
    clean_versions = {v: v is None or _clean(v, MAX_VERSION_CHARS) for v in set(raw_versions)}
    ok &= np.fromiter((clean_versions[v] for v in raw_versions), np.bool_, len(good))
    # timestamps: epoch ms, or the record's own when there is none
    seconds = np.fromiter(map(_seconds, [d.ts for d in good], [stamps[i] for i in taken]), np.float64, len(good))
    ok &= ~np.isnan(seconds)
    # segments: allowed (others are "other" when clean), or admitted already
    segments, seg_ok = _segments(spec, [d.segment for d in good])
    ok &= seg_ok
    # predictions: an int64 label, probabilities a non-empty list in [0, 1], no value
    preds = [d.prediction for d in good]
    has_label = np.fromiter((p is not None for p in preds), np.bool_, len(good))
    ok &= np.fromiter((p is None or _prediction_ok(p) for p in preds), np.bool_, len(good))
    labels = np.zeros(len(good), dtype=np.int64)
    if has_label.any():
        raw_labels = [p.label if p is not None else 0 for p in preds]
        fits = np.fromiter((INT64_MIN <= x <= INT64_MAX for x in raw_labels), np.bool_, len(good))
        ok &= fits
        labels = np.array([x if f else 0 for x, f in zip(raw_labels, fits.tolist(), strict=True)], dtype=np.int64)

    out: list[EventColumns] = []
    taken_arr = np.asarray(taken, dtype=np.intp)
    for model in dict.fromkeys(names):
        known = spec.models.get(model) if model is not None else None
        if known is None:
            continue  # an unknown or absent model: the per-record decoder names the reason
        width, default_version = known
        mine = ok & np.fromiter(
            (m == model and len(d.features) == width for m, d in zip(names, good, strict=True)), np.bool_, len(good)
        )
        idx = np.flatnonzero(mine)
        if idx.size == 0:
            continue
        rows = idx.tolist()
        features = np.array([good[j].features for j in rows], dtype=np.float64).reshape(len(rows), width)
        within = np.abs(features).max(axis=1, initial=0.0) <= FLOAT32_MAX  # also False for NaN
        if not within.all():
            idx, features = idx[within], features[within]
            rows = idx.tolist()
        if not rows:
            continue
        out.append(
            EventColumns(
                model=model,  # type: ignore[arg-type]
                rows=taken_arr[idx],
                ids=[good[j].id for j in rows],
                versions=[raw_versions[j] or default_version for j in rows],
                timestamps=seconds[idx],
                segments=[segments[j] for j in rows],
                features=features,
                labels=labels[idx],
                has_label=has_label[idx],
                probabilities=[None if preds[j] is None else _probabilities(preds[j]) for j in rows],
            )
        )
    return out


def _decode_one(value: bytes, max_bytes: int) -> _Doc | None:
    if len(value) > max_bytes:
        return None
    try:
        return _decode(value)
    except msgspec.DecodeError:
        return None


def _seconds(ts: int | float | None, stamp: int | None) -> float:
    """The event's time in seconds as the fast path takes it (NaN: it does not): epoch ms compared before any
    conversion (an integer of 400 digits is valid JSON), or the record's timestamp when the event has none."""
    if ts is None:
        return stamp / 1000.0 if stamp else np.nan
    return ts / 1000.0 if MIN_EPOCH_MS <= ts < MAX_EPOCH_MS else np.nan


def _segments(spec: ColumnSpec, raw: list[str | None]) -> tuple[list[str], NDArray[np.bool_]]:
    """Each segment as the decoder gives it, and whether the fast path takes it as it is."""
    verdicts: dict[str | None, str | None] = {}
    for seg in set(raw):
        if seg is None:
            verdicts[seg] = "other"
        elif spec.segments is not None:
            verdicts[seg] = seg if seg in spec.segments else ("other" if seg.isascii() and seg.isprintable() else None)
        else:
            verdicts[seg] = seg if seg in spec.admitted else None
    out = [verdicts[s] for s in raw]
    return [s or "" for s in out], np.fromiter((s is not None for s in out), np.bool_, len(out))


def _prediction_ok(p: _Prediction) -> bool:
    if p.value is not msgspec.UNSET:
        return False
    probs = p.probabilities
    return probs is None or (bool(probs) and min(probs) >= 0.0 and max(probs) <= 1.0)


def _probabilities(p: _Prediction) -> tuple[float, ...] | None:
    return None if p.probabilities is None else tuple(p.probabilities)
