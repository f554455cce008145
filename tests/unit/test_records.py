"""``monitor.source.records``: the lean v2 record parse gives exactly what kafka-python's parse gives.

Every test runs kafka-python's own ``Fetcher.PartitionRecords`` and ``LeanPartitionRecords`` on the same fetched
bytes, with the same sequence of ``take(n)`` calls, and compares everything the fetcher and the consumer can see after
each call: the records (whole ``ConsumerRecord``s), or the error's type and message; ``next_fetch_offset``,
``leader_epoch``, records and bytes read, the aborted producer ids, whether the partition was drained. The batches are
built with kafka-python's own builders: plain, keys and null keys, null and empty values, headers (null values,
non-ASCII keys), gzip, log-append time, control and transactional batches (read committed and uncommitted), aborted
transactions, compaction gaps inside and at the end of a batch, a fetch offset inside a batch, legacy message sets
(magic 0 and 1, log-append time, a CRC failure, corrupted lengths), a CRC failure, and corrupted bytes under
``check_crcs=False``.
"""

from __future__ import annotations

import collections
import logging
import random
import struct
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from kafka.consumer.fetcher import Fetcher
from kafka.protocol.consumer import IsolationLevel
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecord, LegacyRecordBatch, LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from kafka.record.util import calc_crc32, calc_crc32c
from kafka.structs import TopicPartition

from monitor.source import records as lean

TP = TopicPartition("events", 3)
T0 = 1_795_168_800_000
ATTRIBUTES = DefaultRecordBatch.ATTRIBUTES_OFFSET  # where the CRC'd part of a v2 batch header starts
Aborted = collections.namedtuple("Aborted", "producer_id first_offset")

# a record: (offset delta, timestamp delta, key, value, headers)
Record = tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def v2_batch(
    base_offset: int,
    records: Sequence[Record],
    *,
    compression: int = 0,
    producer_id: int = -1,
    transactional: bool = False,
    control: bool = False,
    log_append_time: int | None = None,
    last_offset_delta: int | None = None,
    leader_epoch: int = 7,
) -> bytes:
    """One v2 batch from kafka-python's builder, with the header fields the builder does not set patched in (base
    offset, leader epoch, control and log-append-time attributes, a last offset delta past the last record as
    compaction leaves it), and its CRC recomputed."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=transactional, producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1, base_sequence=0 if producer_id >= 0 else -1,
        batch_size=1 << 20,
    )  # fmt: skip
    for delta, ts_delta, key, value, headers in records:
        assert builder.append(delta, timestamp=T0 + ts_delta, key=key, value=value, headers=headers) is not None
    batch = bytearray(builder.build())
    struct.pack_into(">q", batch, 0, base_offset)
    struct.pack_into(">i", batch, 12, leader_epoch)
    attributes = struct.unpack_from(">h", batch, ATTRIBUTES)[0]
    if control:
        attributes |= DefaultRecordBatch.CONTROL_MASK
    if log_append_time is not None:
        attributes |= DefaultRecordBatch.TIMESTAMP_TYPE_MASK
        struct.pack_into(">q", batch, ATTRIBUTES + 2 + 4 + 8, log_append_time)  # MaxTimestamp
    struct.pack_into(">h", batch, ATTRIBUTES, attributes)
    if last_offset_delta is not None:
        struct.pack_into(">i", batch, ATTRIBUTES + 2, last_offset_delta)
    struct.pack_into(">I", batch, DefaultRecordBatch.CRC_OFFSET, calc_crc32c(memoryview(batch)[ATTRIBUTES:]))
    return bytes(batch)


def control_batch(base_offset: int, producer_id: int, *, abort: bool) -> bytes:
    """A transaction marker: a control batch with one record whose key is (version 0, type 0 abort / 1 commit)."""
    key = struct.pack(">hh", 0, 0 if abort else 1)
    value = struct.pack(">hi", 0, 0)
    return v2_batch(base_offset, [(0, 0, key, value, [])], producer_id=producer_id, transactional=True, control=True)


def legacy_batch(magic: int, base_offset: int, values: Sequence[bytes | None], *, compression: int = 0) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=compression, batch_size=1 << 20)
    for i, value in enumerate(values):
        key = None if i % 3 == 0 else b"k%d" % i
        assert builder.append(base_offset + i, timestamp=T0 + i if magic else None, key=key, value=value) is not None
    return bytes(builder.build())


def plain(n: int, start: int = 0) -> list[Record]:
    """n records with values of 20-300 bytes (one- and two-byte varint lengths), growing timestamp deltas (up to
    three-byte varints) and offset deltas past 63 (two-byte varints)."""
    return [(i, 97 * i, None, b"v" * (20 + (start + i) * 37 % 280), []) for i in range(n)]


def varied(n: int) -> list[Record]:
    """Keys and null keys, null and empty values, headers with null values and a non-ASCII key."""
    out: list[Record] = []
    for i in range(n):
        key = None if i % 4 == 0 else b"key-%d" % i
        value = None if i % 5 == 1 else b"" if i % 5 == 2 else (b'{"features": [%d, 2.5]}' % i) * (1 + i % 3)
        headers: list[tuple[str, bytes | None]] = []
        if i % 3 == 1:
            headers = [("content-type", b"application/json"), ("trace", None)]
        elif i % 3 == 2:
            headers = [("modèle", b"\xff\x00" * (i % 7)), ("", b"")]
        out.append((i, -50 + 13 * i, key, value, headers))
    return out


def state(parsed: Any, drained: list[int]) -> tuple[Any, ...]:
    return (
        parsed.next_fetch_offset, parsed.leader_epoch, parsed.records_read, parsed.bytes_read,
        sorted(parsed.aborted_producer_ids), bool(parsed), len(drained),
    )  # fmt: skip


def run(
    cls: type,
    data: bytes,
    takes: Sequence[int | None],
    *,
    fetch_offset: int = 0,
    check_crcs: bool = True,
    isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
    aborted: Sequence[Aborted] = (),
) -> list[tuple[Any, ...]]:
    """What each ``take(n)`` returned or raised, with the partition's state after it."""
    drained: list[int] = []
    parsed = cls(
        fetch_offset, TP, MemoryRecords(data), check_crcs=check_crcs, isolation_level=isolation,
        aborted_transactions=list(aborted), on_drain=lambda _: drained.append(1),
    )  # fmt: skip
    out: list[tuple[Any, ...]] = []
    for n in takes:
        try:
            result: tuple[Any, ...] = ("records", parsed.take(n))
        except Exception as exc:  # noqa: BLE001 - the error itself is what is compared
            result = ("error", type(exc), str(exc))
        out.append((*result, state(parsed, drained)))
    return out


def assert_same(data: bytes, takes: Sequence[int | None] = (None, None), **kw: Any) -> list[tuple[Any, ...]]:
    expected = run(Fetcher.PartitionRecords, data, takes, **kw)
    got = run(lean.lean_partition_records(), data, takes, **kw)
    assert got == expected
    return got


def records_of(outcome: list[tuple[Any, ...]]) -> list[Any]:
    return [r for o in outcome if o[0] == "records" for r in o[1]]


# ---- equivalence on well-formed batches ----------------------------------------------------------------------------


@pytest.mark.parametrize("takes", [(None, None), (1, 7, 64, 500, None, None), (3,) * 200])
def test_plain_batches_give_the_same_records_and_positions_for_any_take_sizes(takes: Sequence[int | None]) -> None:
    data = v2_batch(0, plain(150)) + v2_batch(150, plain(90, 150)) + v2_batch(240, plain(1))
    outcome = assert_same(data, takes)
    got = records_of(outcome)
    assert [r.offset for r in got] == list(range(241))
    assert outcome[-1][-1][0] == 241 and outcome[-1][-1][-1] == 1  # next fetch offset; drained once


@pytest.mark.parametrize(
    "compression",
    [
        0,
        DefaultRecordBatch.CODEC_GZIP,
        DefaultRecordBatch.CODEC_SNAPPY,
        DefaultRecordBatch.CODEC_LZ4,
        DefaultRecordBatch.CODEC_ZSTD,
    ],
    ids=["none", "gzip", "snappy", "lz4", "zstd"],
)
def test_keys_null_values_and_headers_are_the_same(compression: int) -> None:
    data = v2_batch(10, varied(40), compression=compression) + v2_batch(50, varied(25), compression=compression)
    got = records_of(assert_same(data, (5, 33, None)))
    assert len(got) == 65
    assert any(r.headers for r in got) and any(r.value is None for r in got) and any(r.key is None for r in got)
    assert any(h == ("trace", None) for r in got for h in r.headers)


def test_log_append_time_batches_carry_the_batch_timestamp() -> None:
    data = v2_batch(0, plain(20), log_append_time=T0 + 999_999)
    got = records_of(assert_same(data))
    assert {r.timestamp for r in got} == {T0 + 999_999} and {r.timestamp_type for r in got} == {1}


def test_compaction_gaps_and_a_removed_tail_move_the_position_like_kafka_python() -> None:
    gappy = [(0, 0, None, b"a", []), (3, 1, None, b"b", []), (4, 2, None, b"c", []), (90, 3, None, b"d", [])]
    data = v2_batch(100, gappy, last_offset_delta=120) + v2_batch(221, plain(5))
    outcome = assert_same(data, (1, 1, 1, 1, 2, None, None))
    assert [r.offset for r in records_of(outcome)] == [100, 103, 104, 190, 221, 222, 223, 224, 225]
    assert [o[-1][0] for o in outcome[:4]] == [101, 104, 105, 191]


def test_a_fetch_offset_inside_a_batch_skips_the_records_before_it() -> None:
    data = v2_batch(0, plain(30), compression=DefaultRecordBatch.CODEC_GZIP) + v2_batch(30, plain(10))
    outcome = assert_same(data, (4, None), fetch_offset=17)
    assert [r.offset for r in records_of(outcome)] == list(range(17, 40))


@pytest.mark.parametrize("isolation", list(IsolationLevel), ids=lambda level: level.name)
def test_transactions_control_batches_and_aborts_are_handled_like_kafka_python(isolation: IsolationLevel) -> None:
    pid_ok, pid_aborted = 41, 42
    data = (
        v2_batch(0, plain(5))
        + v2_batch(5, plain(4), producer_id=pid_aborted, transactional=True)
        + v2_batch(9, plain(3), producer_id=pid_ok, transactional=True)
        + control_batch(12, pid_aborted, abort=True)
        + control_batch(13, pid_ok, abort=False)
        + v2_batch(14, plain(2))
    )
    outcome = assert_same(data, (2, 6, None, None), isolation=isolation, aborted=[Aborted(pid_aborted, 5)])
    offsets = [r.offset for r in records_of(outcome)]
    aborted_offsets = [5, 6, 7, 8]
    if isolation == IsolationLevel.READ_COMMITTED:
        assert offsets == [o for o in range(16) if o not in aborted_offsets and o not in (12, 13)]
    else:
        assert offsets == [o for o in range(16) if o not in (12, 13)]
    assert outcome[-1][-1][0] == 16


def test_a_fetch_of_only_control_batches_returns_nothing_and_moves_past_them() -> None:
    outcome = assert_same(control_batch(50, 9, abort=False) + control_batch(51, 9, abort=True))
    assert records_of(outcome) == [] and outcome[-1][-1][0] == 52


def test_an_empty_control_batch_under_read_committed_fails_like_kafka_python() -> None:
    """kafka-python reads the marker with next(batch); on an empty batch that is a StopIteration it reports as a
    RuntimeError (a kafka-python issue)."""
    empty = v2_batch(5, [], producer_id=9, transactional=True, control=True)
    outcome = assert_same(v2_batch(0, plain(5)) + empty, (None, None), isolation=IsolationLevel.READ_COMMITTED)
    assert outcome[1][:3] == ("error", RuntimeError, "StopIteration raised unpacking messageset")


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("compression", [0, 1, 2, 3], ids=["none", "gzip", "snappy", "lz4"])
def test_legacy_message_sets_give_the_same_records(magic: int, compression: int) -> None:
    values: list[bytes | None] = [b"x" * i for i in range(12)] + [None]
    data = legacy_batch(magic, 0, values, compression=compression) + legacy_batch(magic, 13, [b"y"] * 3)
    got = records_of(assert_same(data, (5, None, None)))
    assert [r.offset for r in got] == list(range(16))


def test_uncompressed_legacy_messages_are_read_without_kafka_pythons_record_objects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = legacy_batch(0, 0, [b"a", None, b"ccc"]) + legacy_batch(1, 3, [b"d"] * 2)
    expected = run(Fetcher.PartitionRecords, data, (None, None))
    monkeypatch.setattr(LegacyRecord, "__init__", lambda *a: pytest.fail("a LegacyRecord was built"))
    assert run(lean.lean_partition_records(), data, (None, None)) == expected


def _legacy_with_attributes(message: bytes, set_bits: int) -> bytes:
    """One uncompressed legacy message with attribute bits set and its CRC recomputed."""
    out = bytearray(message)
    out[LegacyRecordBatch.MAGIC_OFFSET + 1] |= set_bits
    struct.pack_into(
        ">I", out, LegacyRecordBatch.CRC_OFFSET, calc_crc32(memoryview(out)[LegacyRecordBatch.MAGIC_OFFSET :])
    )
    return bytes(out)


def test_legacy_log_append_time_and_a_crc_failure_are_the_same() -> None:
    appended = b"".join(_legacy_with_attributes(legacy_batch(1, i, [b"v%d" % i]), 0x08) for i in range(3))
    got = records_of(assert_same(appended))
    assert {r.timestamp_type for r in got} == {1}
    bad = bytearray(legacy_batch(0, 3, [b"value"]))
    bad[-2] ^= 0x10
    outcome = assert_same(appended + bytes(bad) + legacy_batch(0, 4, [b"after"]), (None, None, None))
    assert outcome[1][0] == "error" and "failed crc check" in outcome[1][2]


@pytest.mark.parametrize("magic", [0, 1])
def test_corrupted_legacy_messages_unchecked_give_the_same_records_or_error(magic: int) -> None:
    """Key and value lengths made negative, short or past the message, CRCs left stale, ``check_crcs`` off."""
    key_at = LegacyRecordBatch.KEY_OFFSET_V1 if magic else LegacyRecordBatch.KEY_OFFSET_V0
    rng = random.Random(magic)
    errors = 0
    for _ in range(60):
        messages = [bytearray(legacy_batch(magic, i, [b"value-%d" % i])) for i in range(4)]
        which = messages[rng.randrange(4)]
        at = key_at + rng.choice([0, 4])  # the key's length, or the value's (the key is null: -1, 4 bytes)
        struct.pack_into(">i", which, at, rng.choice([-7, -2, 0, 1, 3, 200]))
        errors += any(o[0] == "error" for o in assert_same(b"".join(messages), (2, None), check_crcs=False))
    assert 0 < errors < 60  # both the records and the error paths are reached


@pytest.mark.parametrize("check_crcs", [True, False])
def test_legacy_messages_with_any_byte_changed_give_the_same_records_or_error(check_crcs: bool) -> None:
    """A byte changed anywhere in one of a run of messages (its length, CRC, magic, attributes, timestamp, key or
    value), or the fetch cut short inside a message, read the same as kafka-python reads them."""
    rng = random.Random(7)
    for _ in range(150):
        magic = rng.randrange(2)
        messages = [bytearray(legacy_batch(magic, i, [b"v" * rng.randrange(0, 9)])) for i in range(5)]
        which = messages[rng.randrange(1, 5)]
        which[rng.randrange(len(which))] = rng.choice([0x00, 0x01, 0x02, 0x08, 0x80, 0xFF, rng.randrange(256)])
        data = b"".join(messages)
        if rng.random() < 0.2:
            data = data[: rng.randrange(len(data) - len(messages[-1]), len(data))]
        assert_same(data, (3, None), check_crcs=check_crcs)


def test_a_short_magic_1_message_in_a_run_reads_the_same() -> None:
    short = bytearray(legacy_batch(1, 1, [None]))
    del short[-2:]  # a message too short for its value's length (its framing length says so)
    struct.pack_into(">i", short, 8, len(short) - 12)
    assert_same(legacy_batch(1, 0, [b"a"]) + bytes(short) + legacy_batch(1, 2, [b"c"]), (None, None), check_crcs=False)


def test_mixed_legacy_and_v2_batches_in_one_fetch() -> None:
    data = legacy_batch(1, 0, [b"old"] * 4) + v2_batch(4, varied(6))
    assert [r.offset for r in records_of(assert_same(data, (3, None)))] == list(range(10))


def test_an_empty_fetch_is_drained_at_once() -> None:
    assert assert_same(b"", (None, 5)) == run(Fetcher.PartitionRecords, b"", (None, 5))


# ---- equivalence on bad bytes --------------------------------------------------------------------------------------


def test_a_batch_failing_its_crc_raises_the_same_error_after_the_good_batches() -> None:
    bad = bytearray(v2_batch(20, plain(5)))
    bad[-3] ^= 0x40
    outcome = assert_same(v2_batch(0, plain(20)) + bytes(bad), (None, None, None))
    assert outcome[0][0] == "records" and len(outcome[0][1]) == 20
    assert outcome[1][0] == "error" and "failed crc check" in outcome[1][2]


def _corruptions(seed: int) -> bytes:
    """Valid batches with bytes changed inside the records (not the batch header): a random byte, a varint's
    continuation bit, or a length made negative or huge; the CRCs are left stale (the parse runs unchecked)."""
    rng = random.Random(seed)
    batches = [v2_batch(0, varied(12)), v2_batch(12, plain(8)), v2_batch(20, varied(5))]
    which = rng.randrange(len(batches))
    batch = bytearray(batches[which])
    header = DefaultRecordBatch.HEADER_STRUCT.size
    for _ in range(rng.choice([1, 1, 2, 4])):
        at = rng.randrange(header, len(batch))
        kind = rng.randrange(4)
        if kind == 0:
            batch[at] = rng.randrange(256)
        elif kind == 1:
            batch[at] |= 0x80
        elif kind == 2:
            batch[at] = 0x01  # zig-zag -1
        else:
            batch[at] = rng.choice([0x7F, 0x03, 0xFE])
    batches[which] = bytes(batch)
    return b"".join(batches)


@pytest.mark.parametrize("chunk", range(8))
def test_corrupted_records_give_the_same_records_then_the_same_error(chunk: int) -> None:
    errors = 0
    for seed in range(chunk * 100, chunk * 100 + 100):
        outcome = assert_same(_corruptions(seed), (7, None, None, None), check_crcs=False)
        errors += any(o[0] == "error" for o in outcome)
    assert errors > 50  # the corruptions do reach the error paths


def _with_count(batch: bytes, count: int) -> bytes:
    """The batch with its record count changed (the CRC left stale)."""
    out = bytearray(batch)
    struct.pack_into(">i", out, DefaultRecordBatch.HEADER_STRUCT.size - 4, count)
    return bytes(out)


def _overflowing_varint(batch: bytes) -> bytes:
    """The batch with its second record's length replaced by a varint longer than 64 bits."""
    records = list(MemoryRecords(batch).next_batch())  # type: ignore[union-attr]
    at = DefaultRecordBatch.HEADER_STRUCT.size + records[0].size_in_bytes + 1
    return batch[:at] + b"\xff" * 12 + batch[at + 12 :]


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (lambda b: _with_count(b, 11), "unconsumed bytes after all records consumed"),
        (lambda b: _with_count(b, 13), "Found invalid record structure: IndexError"),
        (_overflowing_varint, "Found invalid record structure: ValueError('Out of int64 range')"),
        (lambda b: b[:-1] + b"\x03", "Found invalid number of record headers -2"),
    ],
    ids=["count-short", "count-long", "varint-overflow", "negative-header-count"],
)
def test_each_batch_level_error_of_kafka_python_is_reproduced(corrupt: Callable[[bytes], bytes], message: str) -> None:
    good = v2_batch(0, plain(3))
    outcome = assert_same(good + corrupt(v2_batch(3, plain(12))), (None, None), check_crcs=False)
    assert outcome[0][0] == "records" and outcome[1][0] == "error" and message in outcome[1][2], outcome[1]


# ---- what it does not take over ------------------------------------------------------------------------------------


class Upper:
    def deserialize(self, topic: str, headers: Any, data: bytes | None) -> bytes | None:
        return None if data is None else data.upper()


def test_with_deserializers_kafka_pythons_own_parse_runs() -> None:
    data = v2_batch(0, varied(10))

    def parse(cls: type) -> list[Any]:
        parsed = cls(0, TP, MemoryRecords(data), key_deserializer=Upper(), value_deserializer=Upper())
        taken: list[Any] = parsed.take()
        return taken

    got = parse(lean.lean_partition_records())
    assert got == parse(Fetcher.PartitionRecords)
    assert got[3].value == varied(10)[3][3].upper()  # type: ignore[union-attr]


# ---- the version gate ----------------------------------------------------------------------------------------------


def test_the_installed_kafka_python_is_the_checked_one() -> None:
    """The dev extra pins kafka-python to the release whose sources are recorded; if this fails after a kafka-python
    upgrade, re-run this file's equivalence tests on it and record the new hashes (``CHECKED_SOURCES``)."""
    lean.refusal.cache_clear()
    assert lean.refusal() is None


def test_a_changed_kafka_python_function_is_refused_with_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    checked = {v: dict(h) for v, h in lean.CHECKED_SOURCES.items()}
    for hashes in checked.values():
        hashes["kafka.record.util:decode_varint"] = "0" * 16
    monkeypatch.setattr(lean, "CHECKED_SOURCES", checked)
    lean.refusal.cache_clear()
    try:
        why = lean.refusal()
    finally:
        lean.refusal.cache_clear()
    assert why is not None and "kafka.record.util:decode_varint" in why and "checked 0000000000000000" in why


class FakeConsumer:
    def __init__(self, **config: Any) -> None:
        self.config = {"key_deserializer": None, "value_deserializer": None, **config}
        self._fetcher = type("F", (), {"PartitionRecords": Fetcher.PartitionRecords})()


def test_install_replaces_the_fetchers_partition_records() -> None:
    consumer = FakeConsumer()
    assert lean.install(consumer) is True
    assert consumer._fetcher.PartitionRecords is lean.lean_partition_records()
    assert Fetcher.PartitionRecords is not lean.lean_partition_records()  # the class itself is left alone


def test_install_leaves_a_consumer_with_deserializers_alone_and_says_why(caplog: pytest.LogCaptureFixture) -> None:
    consumer = FakeConsumer(value_deserializer=Upper())
    with caplog.at_level(logging.INFO, logger="monitor.source.records"):
        assert lean.install(consumer) is False
    assert consumer._fetcher.PartitionRecords is Fetcher.PartitionRecords
    assert [r.reason for r in caplog.records] == ["the consumer has deserializers"]  # type: ignore[attr-defined]


def test_install_on_a_refused_kafka_python_leaves_the_consumer_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    refuse: Callable[[], str] = lambda: "kafka-python 9.9 differs"  # noqa: E731
    monkeypatch.setattr(lean, "refusal", refuse)
    consumer = FakeConsumer()
    assert lean.install(consumer) is False
    assert consumer._fetcher.PartitionRecords is Fetcher.PartitionRecords
