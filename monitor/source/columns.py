"""A poll's common plain events decoded as columns, in the consumer's child process.

Why: the pipeline's own Python per event (a JSON document, an event object, a step of the sampler and of the shadow
check each) bounded a whole sidecar at ~0.1 of what librdkafka reads. Here one call per partition batch turns the
record values of the common event shape (``id``, ``ts``, ``model``, ``model_version``, ``segment``, ``features``,
``prediction``: :meth:`~monitor.source.decode.EventDecoder._plain_common`) into arrays: per model, the rows taken,
their ids, versions, timestamps, segments, a float64 matrix of features and the live labels and probabilities
(:class:`EventColumns`). The pipeline samples and shadow-checks on the arrays; only the rows it keeps become
:class:`~monitor.events.InferenceEvent` objects (:meth:`EventColumns.event`).

The parse is msgspec's typed JSON decoder (``_Doc``: one C call per record, no dict per event; measured against orjson
with the columns gathered from its dicts and pyarrow's JSON reader over the poll: docs/DESIGN.md; one call over the
values joined into one JSON array was no faster). The checks are made once per column over each model's records
(:func:`_bulk`) when every one passes; a model's records with any refused among them are checked record by record
(:func:`_row`), which takes the same rows the same way. A record is *taken* only when every field is one the per-record
fast path takes as it is (a printable-ASCII id within its cap, a model the fast path decodes or the default one, a clean
version, the model's width of numbers within float32's range, an epoch-ms ``ts`` or the record's timestamp, an admitted
or allowed segment, no prediction or an int64 ``label`` with probabilities in [0, 1], no ``value`` and no
``specversion``). Every other record (missing field, wrong width, not finite or out of range, bad timestamp, unknown
model, a KServe event, a record with headers, anything msgspec refuses) is left to the per-record decoder in the
pipeline's process, so that every reason, count and dead letter stays that decoder's; tests/unit/test_columns.py feeds
random polls with every fault through both and requires the same events.
"""

from __future__ import annotations

import itertools
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


class _Prediction(msgspec.Struct, gc=False):
    label: int
    probabilities: list[float] | None = None
    value: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class _Doc(msgspec.Struct, gc=False):
    """The common event shape; a record of any other shape fails to decode here and goes to the per-record decoder.
    Not tracked by the cyclic GC (``gc=False``): it holds no cycles, and a poll makes thousands."""

    id: str
    features: list[float]
    ts: int | float | None = None
    model: str | None = None
    model_version: str | None = None
    segment: str | None = None
    prediction: _Prediction | None = None
    specversion: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


_decode = msgspec.json.Decoder(_Doc).decode


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
    #: per row, as decoded (a tuple in :meth:`event`); a (rows, classes) array when every row states as many
    #: (pickled as one buffer, not a list per row)
    probabilities: list[Sequence[float] | None] | NDArray[np.float64]

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
            self.probabilities[keep]
            if isinstance(self.probabilities, np.ndarray)
            else [self.probabilities[j] for j in picked],
        )

    def event(self, j: int, origin: Origin | None) -> InferenceEvent:
        """Row ``j`` as the event the per-record decoder makes of its record, read at ``origin``."""
        probabilities = self.probabilities[j]
        if isinstance(probabilities, np.ndarray):
            probabilities = probabilities.tolist()  # Python floats, as the per-record decoder gives
        prediction = (
            LivePrediction(int(self.labels[j]), None if probabilities is None else tuple(probabilities))
            if self.has_label[j]
            else None
        )
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


def split_columns(
    columns: Sequence[EventColumns], start: int, end: int
) -> tuple[list[EventColumns], list[EventColumns]]:
    """The columns of the records ``[start, end)`` of the buffer, their rows counted from ``start`` (what a poll
    returns), and those of the records from ``end`` on, as they are (what stays buffered). A batch split between two
    polls has its columns split with it: every row decoded by the child is taken, none decoded again."""
    now: list[EventColumns] = []
    later: list[EventColumns] = []
    for cols in columns:
        first, last = int(cols.rows[0]), int(cols.rows[-1])
        if last < start:
            continue  # returned before
        if first >= end:
            later.append(cols)
        elif first >= start and last < end:
            now.append(cols.shifted(-start))
        else:
            rows = cols.rows
            mine = (rows >= start) & (rows < end)
            if mine.any():
                now.append(cols.subset(mine).shifted(-start))
            if last >= end:
                later.append(cols.subset(rows >= end))
    return now, later


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
    mine = values if n == len(values) else values[:n]
    docs: list[_Doc | None]
    max_bytes = spec.max_bytes
    whole = False
    try:
        if headers is not None or (n and max(map(len, mine)) > max_bytes):
            raise ValueError
        docs = list(map(_decode, mine))
        whole = True
    except (msgspec.DecodeError, ValueError):
        docs = [_decode_one(values[i], max_bytes) if not (headers and headers[i]) else None for i in range(n)]
    groups = _one_model(spec, docs) if whole else None  # type: ignore[arg-type]
    found = [
        cols for model, at in (groups or _groups(spec, docs)) if (cols := _model_columns(spec, model, docs, at, stamps))
    ]
    return sorted(found, key=lambda cols: int(cols.rows[0])) if len(found) > 1 else found


def _one_model(spec: ColumnSpec, docs: list[_Doc]) -> list[tuple[str, range]] | None:
    """Every record decoded and naming the same model (or none, the default one): the common poll, found without a
    name per record; None otherwise."""
    named = [d.model for d in docs]
    first = named[0] if named else None
    if not named or named.count(first) != len(named):
        return None
    model = first if first is not None else spec.default_model
    return None if model is None else [(model, range(len(docs)))]


def _groups(spec: ColumnSpec, docs: list[_Doc | None]) -> list[tuple[str, Sequence[int]]]:
    """The decoded records' positions per model named (or the default one), in the order models first appear."""
    names = [None if d is None else (spec.default_model if d.model is None else d.model) for d in docs]
    first = names[0] if names else None
    if first is not None and names.count(first) == len(names):  # the common poll: one model throughout
        return [(first, list(range(len(names))))]
    groups: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        if name is not None:
            groups.setdefault(name, []).append(i)
    return list(groups.items())


def _model_columns(
    spec: ColumnSpec, model: str, docs: list[_Doc | None], at: Sequence[int], stamps: Sequence[int | None]
) -> EventColumns | None:
    """One model's records as columns: checked in bulk when every one of them is taken as it is (the common poll),
    else record by record (:func:`_row`); both take the same rows the same way."""
    group = docs if len(at) == len(docs) else [docs[i] for i in at]
    cols = _bulk(spec, model, group, at, stamps)  # type: ignore[arg-type]
    if cols is not None:
        return cols
    rows = [row for i in at if (row := _row(spec, docs[i], stamps[i], i)) is not None]  # type: ignore[arg-type]
    return _columns(model, rows) if rows else None


def _printable(texts: list[str], cap: int) -> bool:
    """Every text printable ASCII of at most ``cap`` characters (one check over their concatenation)."""
    joined = "".join(texts)
    return max(map(len, texts), default=0) <= cap and joined.isascii() and joined.isprintable()


def _bulk(
    spec: ColumnSpec, model: str, docs: list[_Doc], at: Sequence[int], stamps: Sequence[int | None]
) -> EventColumns | None:
    """The model's records as columns when :func:`_row` takes every one of them, each check made once over the
    group; None when any record is one it refuses or changes otherwise (the caller then goes record by record)."""
    known = spec.models.get(model)
    if known is None or [d.specversion for d in docs].count(msgspec.UNSET) != len(docs):
        return None
    width, default_version = known
    ids = [d.id for d in docs]
    features = [d.features for d in docs]
    lengths = set(map(len, features))
    if (lengths and lengths != {width}) or not _printable(ids, MAX_ID_CHARS):
        return None
    named = [d.model_version for d in docs]
    distinct = set(named)
    distinct.discard(None)
    if not _printable(list(distinct), MAX_VERSION_CHARS):  # type: ignore[arg-type]
        return None
    one: dict[str | None, str] = {
        v: v for v in distinct if v is not None
    }  # one string object per value: pickled once, referenced after
    one[None] = default_version
    versions = list(map(one.__getitem__, named))
    seconds = _seconds([d.ts for d in docs], stamps, at)
    segments = _segments(spec, [d.segment for d in docs])
    predicted = _predictions([d.prediction for d in docs])
    if seconds is None or segments is None or predicted is None:
        return None
    labels, has_label, probabilities = predicted
    cols = EventColumns(
        model,
        np.arange(at.start, at.stop, dtype=np.intp) if isinstance(at, range) else np.array(at, dtype=np.intp),
        ids,
        versions,
        seconds,
        segments,
        np.fromiter(itertools.chain.from_iterable(features), np.float64, len(docs) * width).reshape(-1, width),
        labels,
        has_label,
        probabilities,
    )
    if not cols.features.size or (cols.features.max() <= FLOAT32_MAX and cols.features.min() >= -FLOAT32_MAX):
        return cols
    within = np.abs(cols.features).max(axis=1, initial=0.0) <= FLOAT32_MAX
    return cols.subset(within) if within.any() else None


def _seconds(
    ts: list[int | float | None], all_stamps: Sequence[int | None], at: Sequence[int]
) -> NDArray[np.float64] | None:
    """The events' times in seconds (``ts``, else the timestamp of the record at ``at``), or None when one is
    refused."""
    if None in ts:
        stamps = [all_stamps[i] for i in at]
        if not all(s for t, s in zip(ts, stamps, strict=True) if t is None):
            return None
        given = [t for t in ts if t is not None]
        ms = [s if t is None else t for t, s in zip(ts, stamps, strict=True)]
    else:
        given = ms = ts  # type: ignore[assignment]
    # compared before any conversion, as :func:`_row` does: a 400-digit integer is valid JSON
    if given and not (min(given) >= MIN_EPOCH_MS and max(given) < MAX_EPOCH_MS):
        return None
    return np.array(ms, dtype=np.float64) / 1000.0


def _segments(spec: ColumnSpec, named: list[str | None]) -> list[str] | None:
    """The events' segments as :func:`_row` takes them, each distinct value judged once; None when one is refused."""
    taken: dict[str | None, str] = {}
    for segment in set(named):
        if segment is None:
            taken[segment] = "other"
        elif spec.segments is not None:
            if segment in spec.segments:
                taken[segment] = segment
            elif segment.isascii() and segment.isprintable():
                taken[segment] = "other"
            else:
                return None
        elif segment in spec.admitted:
            taken[segment] = segment
        else:
            return None
    return list(map(taken.__getitem__, named))  # one string object per value: pickled once, referenced after


_Predicted = tuple[NDArray[np.int64], NDArray[np.bool_], list[Sequence[float] | None] | NDArray[np.float64]]


def _predictions(predictions: list[_Prediction | None]) -> _Predicted | None:
    """The live labels, which rows have one, and the probabilities, as :func:`_row` takes them; or None."""
    n = len(predictions)
    if predictions.count(None) == n:
        return np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.bool_), [None] * n
    given = [p for p in predictions if p is not None] if None in predictions else predictions
    if [p.value for p in given].count(msgspec.UNSET) != len(given):  # type: ignore[union-attr]
        return None
    labels = [p.label for p in given]  # type: ignore[union-attr]
    if not (min(labels) >= INT64_MIN and max(labels) <= INT64_MAX):
        return None
    lists = [p.probabilities for p in given]  # type: ignore[union-attr]
    stated = [x for x in lists if x is not None] if None in lists else lists
    flat = np.fromiter(itertools.chain.from_iterable(stated), np.float64)  # type: ignore[arg-type]
    if stated and not (all(stated) and flat.min() >= 0.0 and flat.max() <= 1.0):
        return None
    if len(given) == n:
        widths = set(map(len, stated))  # type: ignore[arg-type]
        if len(stated) == n and len(widths) == 1:
            return np.array(labels, dtype=np.int64), np.ones(n, dtype=np.bool_), flat.reshape(n, widths.pop())
        return np.array(labels, dtype=np.int64), np.ones(n, dtype=np.bool_), lists
    has_label = np.array([p is not None for p in predictions], dtype=np.bool_)
    all_labels = np.zeros(n, dtype=np.int64)
    all_labels[has_label] = labels
    return all_labels, has_label, [None if p is None else p.probabilities for p in predictions]


#: one taken record: (its position, id, version, seconds, segment, features, label or None, probabilities, model)
_Row = tuple[int, str, str, float, str, list[float], int | None, tuple[float, ...] | None, str]


def _row(spec: ColumnSpec, doc: _Doc, stamp: int | None, at: int) -> _Row | None:
    """The record's fields as the fast path takes them, or None where it does not take them as they are."""
    name = doc.model if doc.model is not None else spec.default_model
    known = spec.models.get(name) if name is not None else None
    if known is None or name is None or doc.specversion is not msgspec.UNSET:
        return None  # an unknown or absent model, a structured CloudEvent: the per-record decoder says
    width, version = known
    features, event_id = doc.features, doc.id
    if len(features) != width or not (len(event_id) <= MAX_ID_CHARS and event_id.isascii() and event_id.isprintable()):
        return None
    if doc.model_version is not None:
        version = doc.model_version
        if not (len(version) <= MAX_VERSION_CHARS and version.isascii() and version.isprintable()):
            return None
    ts = doc.ts
    if ts is None:
        if not stamp:
            return None
        seconds = stamp / 1000.0
    elif MIN_EPOCH_MS <= ts < MAX_EPOCH_MS:  # compared before any conversion: a 400-digit integer is valid JSON
        seconds = ts / 1000.0
    else:
        return None
    segment = doc.segment
    if segment is None:
        segment = "other"
    elif spec.segments is not None:
        if segment not in spec.segments:
            if not (segment.isascii() and segment.isprintable()):
                return None  # cleaned, it might be allowed
            segment = "other"
    elif segment not in spec.admitted:
        return None  # only the pipeline's decoder admits a segment value
    prediction = doc.prediction
    if prediction is None:
        return at, event_id, version, seconds, segment, features, None, None, name
    label, probabilities = prediction.label, prediction.probabilities
    if prediction.value is not msgspec.UNSET or not INT64_MIN <= label <= INT64_MAX:
        return None
    if probabilities is None:
        return at, event_id, version, seconds, segment, features, label, None, name
    if not probabilities or min(probabilities) < 0.0 or max(probabilities) > 1.0:
        return None
    return at, event_id, version, seconds, segment, features, label, tuple(probabilities), name


def _columns(model: str, rows: list[_Row]) -> EventColumns | None:
    """One model's taken rows as columns, without those beyond float32's range (the per-record decoder's)."""
    at, ids, versions, seconds, segments, features, labels, probabilities, _ = zip(*rows, strict=True)
    matrix = np.array(features, dtype=np.float64).reshape(len(rows), -1)
    within = np.abs(matrix).max(axis=1, initial=0.0) <= FLOAT32_MAX
    has_label = np.array([x is not None for x in labels], dtype=np.bool_)
    cols = EventColumns(
        model=model,
        rows=np.array(at, dtype=np.intp),
        ids=list(ids),
        versions=list(versions),
        timestamps=np.array(seconds, dtype=np.float64),
        segments=list(segments),
        features=matrix,
        labels=np.array([0 if x is None else x for x in labels], dtype=np.int64),
        has_label=has_label,
        probabilities=list(probabilities),
    )
    if within.all():
        return cols
    return cols.subset(within) if within.any() else None


def _decode_one(value: bytes, max_bytes: int) -> _Doc | None:
    if len(value) > max_bytes:
        return None
    try:
        return _decode(value)
    except msgspec.DecodeError:
        return None
