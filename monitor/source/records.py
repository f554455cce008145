"""A leaner parse of Kafka record batches for the consumer: less CPU per record in the consumer child.

kafka-python turns every fetched record into a ``DefaultRecord`` object (``DefaultRecordBatch._read_msg``: seven
``decode_varint`` calls, property reads) and then into a ``ConsumerRecord`` (``PartitionRecords._unpack_records``). On a
broker that answers with v2 batches (Tansu, any Kafka ≥ 0.11) that per-record generality is most of what the consumer
child spends parsing. :class:`LeanPartitionRecords` does the same work with the record parse inlined, at less CPU per
record (docs/BENCHMARKS.md, *Ingest vs raw client*, the consumer child's CPU on Tansu): the same ``ConsumerRecord``s,
the same positions (``next_fetch_offset`` after every record), the same metrics (records and bytes read), the same
errors with the same messages, and the same handling of control batches, aborted transactions, compaction gaps and
compression (kafka-python's own decompression). Legacy message sets (magic 0/1, e.g. Kafka 0.9) hold one message per
"batch" when uncompressed: kafka-python reads each through ``MemoryRecords.next_batch``, a ``LegacyRecordBatch``, a
generator, a ``LegacyRecord`` and a second CRC over the same bytes (5.2–5.5 µs per record on 2,000 messages of 584
bytes, against 2.0–2.1 here; v2: 3.7–3.9 against 1.3: ``bench/stream.py parse``); a run of such messages is read
straight from the fetch's buffer (:func:`_legacy_record`, :func:`_legacy_run`), a compressed wrapper through
kafka-python's own record loop (copied unchanged). Consumers with deserializers go through kafka-python's
``_unpack_records`` itself.

It replaces a library internal, so it is installed only where it was checked: :func:`install` compares the source
of every kafka-python function it re-implements or relies on with the hashes recorded here, and leaves the consumer
on kafka-python's own parse (logging why) when any differs. ``tests/unit/test_records.py`` checks the equivalence
against kafka-python on every batch shape, and that the hashes still match the installed kafka-python.

Why it is kept, on by default (``kafka.lean_record_parse``), and what it costs to maintain. Measured with
``bench/stream.py parse`` (docs/BENCHMARKS.md, *Ingest vs raw client*): a legacy message (Kafka 0.9) costs 2.1 µs
here against 5.4 through kafka-python's parse, a v2 record 1.3 against 3.7, and the consumer child's parse is the
bound of the whole pipeline's rate. The price is this module: about
300 lines that mirror kafka-python's private fetcher classes. The hash check bounds that price: a kafka-python upgrade
cannot make it parse wrongly, only fall back to kafka-python's own parse (logged) until someone re-checks the functions
listed in ``CHECKED_SOURCES`` and records the new hashes; setting ``kafka.lean_record_parse: false`` removes it from the
path entirely. The better-suited fast path is a second :class:`~monitor.source.base.Source` on librdkafka
(confluent-kafka), chosen by setting; when that exists and measures faster, this module should go.
"""

from __future__ import annotations

import binascii
import functools
import hashlib
import inspect
import logging
import struct
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

log = logging.getLogger(__name__)

#: sha256 (first 16 hex digits) of ``inspect.getsource`` of each kafka-python function that
#: :class:`LeanPartitionRecords` re-implements or whose behaviour it relies on, per kafka-python release checked;
#: another release whose functions all hash the same is accepted too
CHECKED_SOURCES: dict[str, dict[str, str]] = {
    "3.0.12": {
        "kafka.consumer.fetcher:Fetcher._parse_fetched_data": "3cd93b6d3b7b96e1",  # builds self.PartitionRecords
        "kafka.consumer.fetcher:Fetcher.PartitionRecords.__init__": "69626e7150e62346",
        "kafka.consumer.fetcher:Fetcher.PartitionRecords._unpack_records": "d91ccce28d83483f",
        "kafka.consumer.fetcher:Fetcher.PartitionRecords.take": "9558697bd76730b8",
        "kafka.record.default_records:DefaultRecordBatch.__init__": "8df1286ebd1e7110",
        "kafka.record.default_records:DefaultRecordBatch._maybe_uncompress": "35e0360528daf8bd",
        "kafka.record.default_records:DefaultRecordBatch.__iter__": "b4a70014a33bed92",
        "kafka.record.default_records:DefaultRecordBatch.__next__": "ff2fba2efdb152f4",
        "kafka.record.default_records:DefaultRecordBatch._read_msg": "b203a6ee5e4f423b",
        "kafka.record.default_records:DefaultRecord.__init__": "70882ba702536be0",
        "kafka.record.default_records:DefaultRecord.validate_crc": "ca8f93282fb1a7e5",
        "kafka.record.util:decode_varint": "15359185a92694d1",
        "kafka.record.legacy_records:LegacyRecordBatch.__init__": "1c2d0a8e01321b77",
        "kafka.record.legacy_records:LegacyRecordBatch._read_header": "66625398699c5b67",
        "kafka.record.legacy_records:LegacyRecordBatch.__iter__": "993c55f9dcb40d38",
        "kafka.record.legacy_records:LegacyRecordBatch._read_key_value": "6a9c2352dd9c317b",
        "kafka.record.legacy_records:LegacyRecordBatch._crc_bytes": "f57782315054d333",
        "kafka.record.legacy_records:LegacyRecordBatch.validate_crc": "7e43ff94ed67558f",
        "kafka.record.legacy_records:LegacyRecordBatch.timestamp_type.fget": "30aa8a13f47472d8",
        "kafka.record.legacy_records:LegacyRecord.__init__": "12321714fc2e3799",
        "kafka.record.legacy_records:LegacyRecord.validate_crc": "b87f9aa5529ddc03",
        "kafka.record.legacy_records:LegacyRecord.headers.fget": "8a7c2613142dbd5b",
        "kafka.record.legacy_records:LegacyRecord.size_in_bytes.fget": "6e459e0605a2e7a0",
        "kafka.record.legacy_records:LegacyRecordBatchBuilder.estimate_size_in_bytes": "597e93ec6cc9fcf2",
        "kafka.record.legacy_records:LegacyRecordBatchBuilder.record_size": "4cfab316d535f55d",
        "kafka.record.legacy_records:LegacyRecordBatchBuilder.record_overhead": "2d95d4b329ba6f9a",
        "kafka.record.memory_records:MemoryRecords.__init__": "ebf098b8ae19659e",
        "kafka.record.memory_records:MemoryRecords._cache_next": "f3e185a4c4baddd1",
        "kafka.record.memory_records:MemoryRecords.next_batch": "1b0c89b6e3d3e940",
    },
}

CONSUMER_RECORD_FIELDS = (
    "topic", "partition", "leader_epoch", "offset", "timestamp", "timestamp_type", "key", "value", "headers",
    "checksum", "serialized_key_size", "serialized_value_size", "serialized_header_size",
)  # fmt: skip


def _source_hash(qualified: str) -> str:
    import importlib

    module_name, _, path = qualified.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in path.split("."):
        obj = getattr(obj, part)
    return hashlib.sha256(inspect.getsource(obj).encode()).hexdigest()[:16]


@functools.cache
def refusal() -> str | None:
    """Why the installed kafka-python cannot use :class:`LeanPartitionRecords`; None when it can."""
    import kafka
    from kafka.consumer.fetcher import ConsumerRecord

    version = getattr(kafka, "__version__", "unknown")
    if tuple(ConsumerRecord._fields) != CONSUMER_RECORD_FIELDS:
        return (
            f"kafka-python {version}'s ConsumerRecord has fields {ConsumerRecord._fields}, not {CONSUMER_RECORD_FIELDS}"
        )
    reasons = []
    for checked, expected in CHECKED_SOURCES.items():
        differs = []
        for qualified, digest in expected.items():
            try:
                found = _source_hash(qualified)
            except (ImportError, AttributeError, OSError, TypeError) as exc:
                differs.append(f"{qualified} unreadable ({exc!r})")
                continue
            if found != digest:
                differs.append(f"{qualified} (sha256 {found}, checked {digest})")
        if not differs:
            return None
        reasons.append(f"against {checked}: {', '.join(differs)}")
    return f"kafka-python {version} differs from every release this parse was checked against: {'; '.join(reasons)}"


def install(consumer: Any) -> bool:
    """Make ``consumer`` (a ``KafkaConsumer``) parse v2 batches with :class:`LeanPartitionRecords`; False (and the
    consumer unchanged) where the installed kafka-python was not checked or deserializers are configured."""
    why = refusal()
    if why is None and not hasattr(getattr(consumer, "_fetcher", None), "PartitionRecords"):
        why = "the consumer has no _fetcher.PartitionRecords"
    if why is None and (consumer.config.get("key_deserializer") or consumer.config.get("value_deserializer")):
        why = "the consumer has deserializers"
    if why is not None:
        log.info("kafka-python's own record parse is used", extra={"reason": why})
        return False
    consumer._fetcher.PartitionRecords = lean_partition_records()
    log.info("lean record parse installed")
    return True


class _KafkaNames(NamedTuple):
    """What the lean parse uses of kafka-python (imported on first use: importing this module imports none of it)."""

    ConsumerRecord: Any
    new_record: Callable[[tuple[Any, ...]], Any]
    corrupt: Any
    read_committed: Any
    log_append_time: int
    decode_varint: Callable[[Any, int], tuple[int, int]]
    legacy_codec_mask: int
    legacy_timestamp_type_mask: int
    #: per magic (0, 1): where the key's length starts (after offset, length, CRC, magic, attributes, the timestamp)
    legacy_key_offset: tuple[int, int]
    #: per magic: what ``LegacyRecord.size_in_bytes`` adds to the key's and value's lengths (log and record overhead)
    legacy_overhead: tuple[int, int]
    unpack_int: Callable[[Any, int], tuple[int]]
    unpack_long: Callable[[Any, int], tuple[int]]
    #: a legacy message's offset, length and CRC
    legacy_header: Callable[[Any, int], tuple[int, int, int]]
    crc32: Callable[[Any], int]
    memory_records: Any
    #: the shortest message ``MemoryRecords.next_batch`` takes
    min_slice: int


@functools.cache
def _kafka_names() -> _KafkaNames:
    import kafka.errors as errors
    from kafka.consumer.fetcher import ConsumerRecord
    from kafka.protocol.consumer import IsolationLevel
    from kafka.record.default_records import DefaultRecordBatch
    from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords
    from kafka.record.util import decode_varint

    return _KafkaNames(
        ConsumerRecord,
        functools.partial(tuple.__new__, ConsumerRecord),
        errors.CorruptRecordError,
        IsolationLevel.READ_COMMITTED,
        DefaultRecordBatch.LOG_APPEND_TIME,
        decode_varint,
        LegacyRecordBatch.CODEC_MASK,
        LegacyRecordBatch.TIMESTAMP_TYPE_MASK,
        (LegacyRecordBatch.KEY_OFFSET_V0, LegacyRecordBatch.KEY_OFFSET_V1),
        tuple(LegacyRecordBatchBuilder.LOG_OVERHEAD + LegacyRecordBatchBuilder.record_overhead(m) for m in (0, 1)),
        struct.Struct(">i").unpack_from,
        struct.Struct(">q").unpack_from,
        struct.Struct(">qiI").unpack_from,
        binascii.crc32,
        MemoryRecords,
        MemoryRecords.MIN_SLICE,
    )


@functools.cache
def lean_partition_records() -> type:
    """The class (built on first use, so that importing this module does not import kafka-python)."""
    from kafka.consumer.fetcher import Fetcher

    class LeanPartitionRecords(Fetcher.PartitionRecords):  # type: ignore[misc]
        def _unpack_records(self, tp: Any, records: Any, key_deserializer: Any, value_deserializer: Any) -> Any:
            if key_deserializer is not None or value_deserializer is not None:
                return super()._unpack_records(tp, records, key_deserializer, value_deserializer)
            return _lean_records(self, tp, records)

    return LeanPartitionRecords


def _lean_records(self: Any, tp: Any, records: Any) -> Iterator[Any]:
    """kafka-python's ``PartitionRecords._unpack_records`` (``self``) with its deserializers None; only the loop over
    a v2 batch's records differs (marked below), the rest is the same statement for statement."""
    names = _kafka_names()
    try:
        batch = records.next_batch()
        last_batch = None
        while batch is not None:
            last_batch = batch

            if self.check_crcs and not batch.validate_crc():
                raise names.corrupt(
                    f"Record batch for partition {self.topic_partition} at offset {batch.base_offset} failed crc check"
                )

            if batch.magic == 2:
                self.leader_epoch = batch.leader_epoch
                if self.isolation_level == names.read_committed and batch.has_producer_id():
                    self._consume_aborted_transactions_up_to(batch.last_offset)
                    producer_id = batch.producer_id
                    if self._contains_abort_marker(batch):
                        self.aborted_producer_ids.discard(producer_id)
                    elif self._is_batch_aborted(batch):
                        self.next_fetch_offset = batch.next_offset
                        batch = records.next_batch()
                        continue
                if batch.is_control_batch:
                    self.next_fetch_offset = batch.next_offset
                    batch = records.next_batch()
                    continue
                yield from _v2_records(self, tp, batch)  # the lean part
            elif batch.magic >= 0 and not batch._attributes & names.legacy_codec_mask:  # (a corrupt magic is < 0)
                # the lean part for uncompressed legacy messages: this one, and those that follow it
                yield _legacy_record(self, tp, batch, names)
                yield from _legacy_run(self, tp, records, names)
            else:
                yield from _legacy_records(self, tp, batch)

            batch = records.next_batch()
        else:
            if last_batch and last_batch.magic == 2:
                self.next_fetch_offset = last_batch.next_offset
            self.drain()
    except StopIteration:
        log.exception("StopIteration raised unpacking messageset")
        raise RuntimeError("StopIteration raised unpacking messageset") from None


def _legacy_records(self: Any, tp: Any, batch: Any) -> Iterator[Any]:
    """A legacy message set's records (``self``: the ``PartitionRecords``): kafka-python's loop."""
    names = _kafka_names()
    for record in batch:
        if self.check_crcs and not record.validate_crc():
            raise names.corrupt(
                f"Record for partition {self.topic_partition} at offset {record.offset} failed crc check"
            )
        key, value, headers = record.key, record.value, record.headers
        key_size = len(key) if key is not None else -1
        value_size = len(value) if value is not None else -1
        header_size = (
            sum(len(k.encode("utf-8")) + (len(v) if v is not None else 0) for k, v in headers) if headers else -1
        )
        self.records_read += 1
        self.bytes_read += record.size_in_bytes
        self.next_fetch_offset = record.offset + 1
        yield names.ConsumerRecord(
            tp.topic, tp.partition, self.leader_epoch, record.offset, record.timestamp,
            record.timestamp_type, key, value, headers, record.checksum,
            key_size, value_size, header_size,
        )  # fmt: skip


def _legacy_record(self: Any, tp: Any, batch: Any, names: _KafkaNames) -> Any:
    """An uncompressed legacy message (``batch``: kafka-python's ``LegacyRecordBatch`` of that one message) as the
    ``ConsumerRecord`` kafka-python's loop makes of it (``LegacyRecordBatch.__iter__``, ``_read_key_value``,
    ``LegacyRecord``), without the generator and the record object. The record's CRC covers the same bytes as the
    batch's (the message from its magic byte on), which the caller checked already when ``check_crcs`` is on."""
    buffer = batch._buffer
    magic = batch._magic
    unpack_int = names.unpack_int
    pos = names.legacy_key_offset[magic]
    key_size = unpack_int(buffer, pos)[0]
    pos += 4
    key: bytes | None
    value: bytes | None
    if key_size == -1:
        key = None
    else:
        key = buffer[pos : pos + key_size].tobytes()
        pos += key_size
    value_size = unpack_int(buffer, pos)[0]
    pos += 4
    value = None if value_size == -1 else buffer[pos : pos + value_size].tobytes()
    key_size = len(key) if key is not None else -1
    value_size = len(value) if value is not None else -1
    offset = batch._offset
    self.records_read += 1
    # LegacyRecord.size_in_bytes: log overhead, the record overhead of its magic, the key and value
    self.bytes_read += names.legacy_overhead[magic] + max(key_size, 0) + max(value_size, 0)
    self.next_fetch_offset = offset + 1
    timestamp_type = None if magic == 0 else 1 if batch._attributes & names.legacy_timestamp_type_mask else 0
    return names.new_record((
        tp.topic, tp.partition, self.leader_epoch, offset, batch._timestamp, timestamp_type, key, value, [],
        batch._crc, key_size, value_size, -1,
    ))  # fmt: skip


def _legacy_run(self: Any, tp: Any, records: Any, names: _KafkaNames) -> Iterator[Any]:
    """The uncompressed legacy messages next in the fetch (``records``: its ``MemoryRecords``, or :func:`guard`'s
    wrapper of it), each read straight from the fetch's buffer as ``MemoryRecords.next_batch`` and
    :func:`_legacy_record` would read it, without a ``LegacyRecordBatch`` per message. It stops before the first
    message it does not take as plainly readable (compressed, of another magic, too short, failing its CRC where
    ``check_crcs`` is on, a key or value length outside the message): the caller's loop reads that one through
    ``next_batch`` and reads or refuses it as kafka-python does, with :func:`guard` knowing the batch in hand."""
    memory: Any = getattr(records, "_records", records)
    if type(memory) is not names.memory_records:
        return
    check_crcs = self.check_crcs
    header, unpack_int, unpack_long = names.legacy_header, names.unpack_int, names.unpack_long
    crc32, min_slice, new_record = names.crc32, names.min_slice, names.new_record
    key_offsets, overheads = names.legacy_key_offset, names.legacy_overhead
    topic, partition, epoch = tp.topic, tp.partition, self.leader_epoch
    key: bytes | None
    value: bytes | None
    while True:
        message = memory._next_slice
        if message is None:
            return
        end = len(message)
        if end < min_slice:
            return
        magic, attributes = message[16], message[17]  # unsigned here: 0 and 1 are what kafka-python reads as such
        if magic > 1 or attributes & names.legacy_codec_mask or end < key_offsets[magic] + 8:
            return
        offset, _, crc = header(message, 0)
        if check_crcs and crc32(message[16:]) & 0xFFFFFFFF != crc:
            return
        pos = key_offsets[magic]
        key_size = unpack_int(message, pos)[0]
        pos += 4
        if key_size != -1 and not 0 <= key_size <= end - pos - 4:
            return
        value_at = pos + max(key_size, 0) + 4
        value_size = unpack_int(message, value_at - 4)[0]
        if value_size != -1 and not 0 <= value_size <= end - value_at:
            return
        memory._cache_next()  # what next_batch does before it returns the message
        key = None if key_size == -1 else message[pos : pos + key_size].tobytes()
        value = None if value_size == -1 else message[value_at : value_at + value_size].tobytes()
        timestamp = unpack_long(message, 18)[0] if magic else None
        self.records_read += 1
        self.bytes_read += overheads[magic] + max(key_size, 0) + max(value_size, 0)
        self.next_fetch_offset = offset + 1
        yield new_record((
            topic, partition, epoch, offset, timestamp,
            None if magic == 0 else 1 if attributes & names.legacy_timestamp_type_mask else 0,
            key, value, [], crc, key_size, value_size, -1,
        ))  # fmt: skip


def _v2_records(self: Any, tp: Any, batch: Any) -> Iterator[Any]:
    """``for record in batch`` (DefaultRecordBatch.__iter__/__next__/_read_msg) fused with the ConsumerRecord built
    from each record: one frame and no per-record objects beyond the record itself. A v2 record has no CRC of its
    own (``DefaultRecord.validate_crc`` is True), so there is none to check."""
    batch._maybe_uncompress()
    buffer = batch._buffer
    pos = batch._pos
    names = _kafka_names()
    decode_varint, corrupt, new_record = names.decode_varint, names.corrupt, names.new_record
    topic, partition, epoch = tp.topic, tp.partition, self.leader_epoch
    base_offset = batch.base_offset
    timestamp_type = batch.timestamp_type
    append_time = batch.max_timestamp if timestamp_type == names.log_append_time else None
    first_timestamp = batch.first_timestamp
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    header_size: int
    for _ in range(batch._num_records):
        try:
            # Record => Length Attributes TimestampDelta OffsetDelta Key Value [HeaderKey HeaderValue];
            # a one- or two-byte varint is decoded in line (zig-zag), longer ones by kafka-python's decode_varint;
            # the blocks repeat on purpose: a helper's call per field is the cost this loop removes
            b = buffer[pos]
            if b < 0x80:
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif buffer[pos + 1] < 0x80:
                b = (b & 0x7F) | (buffer[pos + 1] << 7)
                length, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                length, pos = decode_varint(buffer, pos)
            start = pos
            b = buffer[pos]
            if b < 0x80:
                pos += 1  # attributes: unused
            else:
                _, pos = decode_varint(buffer, pos)
            b = buffer[pos]
            if b < 0x80:
                delta, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif buffer[pos + 1] < 0x80:
                b = (b & 0x7F) | (buffer[pos + 1] << 7)
                delta, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                delta, pos = decode_varint(buffer, pos)
            timestamp = first_timestamp + delta if append_time is None else append_time
            b = buffer[pos]
            if b < 0x80:
                delta, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif buffer[pos + 1] < 0x80:
                b = (b & 0x7F) | (buffer[pos + 1] << 7)
                delta, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                delta, pos = decode_varint(buffer, pos)
            offset = base_offset + delta
            b = buffer[pos]
            if b < 0x80:
                size, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif buffer[pos + 1] < 0x80:
                b = (b & 0x7F) | (buffer[pos + 1] << 7)
                size, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                size, pos = decode_varint(buffer, pos)
            if size >= 0:
                key = bytes(buffer[pos : pos + size])
                pos += size
                key_size = len(key)
            else:
                key, key_size = None, -1
            b = buffer[pos]
            if b < 0x80:
                size, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif buffer[pos + 1] < 0x80:
                b = (b & 0x7F) | (buffer[pos + 1] << 7)
                size, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                size, pos = decode_varint(buffer, pos)
            if size >= 0:
                value = bytes(buffer[pos : pos + size])
                pos += size
                value_size = len(value)
            else:
                value, value_size = None, -1
            if buffer[pos] == 0:
                count, pos = 0, pos + 1
            else:
                count, pos = decode_varint(buffer, pos)
            if count < 0:
                raise corrupt(f"Found invalid number of record headers {count}")
            if count:
                headers, header_size, pos = _v2_headers(buffer, pos, count)
            else:
                headers, header_size = [], -1
            if pos - start != length:
                raise corrupt(
                    "Invalid record size: expected to read "
                    f"{length} bytes in record payload, but instead read {pos - start}"
                )
        except (ValueError, IndexError) as err:
            raise corrupt(f"Found invalid record structure: {err!r}") from None
        self.records_read += 1
        self.bytes_read += length
        self.next_fetch_offset = offset + 1
        yield new_record((
            topic, partition, epoch, offset, timestamp, timestamp_type, key, value, headers, None,
            key_size, value_size, header_size,
        ))  # fmt: skip
    if pos != len(buffer):
        raise corrupt(f"{len(buffer) - pos} unconsumed bytes after all records consumed")


def _v2_headers(buffer: Any, pos: int, count: int) -> tuple[list[tuple[str, bytes | None]], int, int]:
    """A v2 record's ``count`` (> 0) headers from ``pos``: the headers, their size as kafka-python counts it, and the
    position after them."""
    names = _kafka_names()
    decode_varint, corrupt = names.decode_varint, names.corrupt
    headers: list[tuple[str, bytes | None]] = []
    header_value: bytes | None
    header_size = 0
    while count:
        size, pos = decode_varint(buffer, pos)
        if size < 0:
            raise corrupt(f"Invalid negative header key size {size}")
        header_key = buffer[pos : pos + size].decode("utf-8")
        pos += size
        size, pos = decode_varint(buffer, pos)
        if size >= 0:
            header_value = bytes(buffer[pos : pos + size])
            pos += size
        else:
            header_value = None
        headers.append((header_key, header_value))
        header_size += len(header_key.encode("utf-8")) + (len(header_value) if header_value is not None else 0)
        count -= 1
    return headers, header_size, pos


#: the header that marks a record standing for a whole batch that could not be decoded (its value: the batch's
#: bytes as fetched; the header's value: why). The pipeline dead-letters such a record as ``undecodable_batch``.
UNDECODABLE_HEADER = "harmonic-undecodable-batch"


class _Batches:
    """A fetch's ``MemoryRecords``, batch by batch, remembering the batch in hand and its bytes as fetched."""

    __slots__ = ("_records", "batch", "raw")

    def __init__(self, records: Any) -> None:
        self._records = records
        self.batch: Any = None
        self.raw: Any = b""

    def next_batch(self) -> Any:
        self.batch = None  # an error while reading the framing itself leaves no batch to blame
        batch = self._records.next_batch()
        if batch is not None:
            self.raw = batch._buffer  # before any decompression replaces it (a view: no copy)
        self.batch = batch
        return batch


def guard(consumer: Any) -> bool:
    """Make ``consumer`` (a ``KafkaConsumer``) skip record batches it cannot decode rather than raise from ``poll``.

    kafka-python raises from ``poll`` for a batch it cannot decode (a codec whose library is missing, corrupt
    compressed bytes, a failed CRC), and raises again on every poll and every restart: one bad batch would stop the
    partition for good. Guarded, such a batch becomes one record in its place: the batch's bytes as fetched, at the
    batch's last offset, with :data:`UNDECODABLE_HEADER` saying why; the partition goes on after it. Works over
    either parse (kafka-python's own or the lean one). False (the consumer unchanged, logged) where the installed
    kafka-python's fetcher does not have the shape relied on.
    """
    fetcher: Any = getattr(consumer, "_fetcher", None)
    base = getattr(fetcher, "PartitionRecords", None)
    unpack = getattr(base, "_unpack_records", None)
    try:
        params = list(inspect.signature(unpack).parameters) if unpack is not None else []
    except (TypeError, ValueError):
        params = []
    if params != ["self", "tp", "records", "key_deserializer", "value_deserializer"]:
        log.warning(
            "undecodable record batches are not skipped: kafka-python's fetcher has another shape",
            extra={"parameters": params},
        )
        return False
    fetcher.PartitionRecords = _guarded(base)
    return True


@functools.cache
def _guarded(base: Any) -> type:
    from kafka.consumer.fetcher import ConsumerRecord

    class GuardedPartitionRecords(base):  # type: ignore[misc]
        next_fetch_offset: int
        leader_epoch: int

        def _unpack_records(self, tp: Any, records: Any, key_deserializer: Any, value_deserializer: Any) -> Any:
            batches = _Batches(records)
            while True:
                try:
                    yield from super()._unpack_records(tp, batches, key_deserializer, value_deserializer)
                    return
                except Exception as exc:  # noqa: BLE001 - any failure to decode one batch is that batch's
                    batch = batches.batch
                    if batch is None:
                        raise  # the fetch's framing itself: no batch and no offsets to skip to
                    last = batch.next_offset - 1 if batch.magic == 2 else batch.base_offset
                    why = str(exc)  # kafka-python's errors name their class; others get it here
                    if not why.startswith(type(exc).__name__):
                        why = f"{type(exc).__name__}: {why}"
                    log.warning(
                        "record batch cannot be decoded; it is skipped and dead-lettered",
                        extra={"partition": f"{tp.topic}/{tp.partition}", "offset": last, "reason": why},
                    )
                    self.next_fetch_offset = max(self.next_fetch_offset, last + 1)
                    raw = bytes(batches.raw)
                    yield ConsumerRecord(
                        tp.topic, tp.partition, self.leader_epoch, last, None, None, None, raw,
                        [(UNDECODABLE_HEADER, why.encode("utf-8", "replace"))], None, -1, len(raw), -1,
                    )  # fmt: skip
                    # and on with the batches after it (kafka-python's loop again, from where it stopped)

    return GuardedPartitionRecords
