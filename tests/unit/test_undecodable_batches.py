"""A record batch the consumer cannot decode is skipped and dead-lettered, never raised out of ``poll``.

``monitor.source.records.guard`` wraps whichever record parse the consumer uses (kafka-python's own or the lean
one): a batch whose codec library is missing, whose compressed bytes are corrupt, or whose CRC fails becomes one
record in its place (the batch's bytes as fetched, at its last offset, marked with ``UNDECODABLE_HEADER``), and the
partition goes on after it. The pipeline dead-letters that record as ``undecodable_batch``.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path
from typing import Any

import kafka.codec
import pytest
from kafka.consumer.fetcher import Fetcher
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.legacy_records import LegacyRecordBatch
from kafka.record.memory_records import MemoryRecords
from kafka.record.util import calc_crc32c

from monitor import telemetry as tel
from monitor.source import records as lean
from monitor.source.base import RawRecord
from tests.unit.test_pipeline import (
    MODEL,
    RecordingSink,
    RecordingSource,
    events,
    make_pipeline,
    make_settings,
    rows,
    run_to_end,
)
from tests.unit.test_pipeline_reliability import DLQ, reasons
from tests.unit.test_records import TP, legacy_batch, plain, v2_batch

PARSES = {"kafka-python": Fetcher.PartitionRecords, "lean": None}


def parse_class(name: str) -> type:
    base = PARSES[name] or lean.lean_partition_records()
    consumer = type("C", (), {"_fetcher": type("F", (), {"PartitionRecords": base})()})()
    assert lean.guard(consumer) is True
    guarded: type = consumer._fetcher.PartitionRecords
    assert issubclass(guarded, base)
    return guarded


def take_all(cls: type, data: bytes, *, fetch_offset: int = 0) -> tuple[list[Any], int]:
    parsed = cls(fetch_offset, TP, MemoryRecords(data), check_crcs=True)
    got: list[Any] = []
    while parsed:
        got.extend(parsed.take(7))
    return got, parsed.next_fetch_offset


def marker(record: Any) -> str | None:
    return next((v.decode() for k, v in record.headers or () if k == lean.UNDECODABLE_HEADER), None)


@pytest.mark.parametrize("parse", list(PARSES))
@pytest.mark.parametrize(
    "codec", [DefaultRecordBatch.CODEC_SNAPPY, DefaultRecordBatch.CODEC_LZ4, DefaultRecordBatch.CODEC_ZSTD]
)
def test_every_codec_decodes_under_either_parse(parse: str, codec: int) -> None:
    data = v2_batch(0, plain(30), compression=codec) + v2_batch(30, plain(5), compression=codec)
    got, position = take_all(parse_class(parse), data)
    assert [r.offset for r in got] == list(range(35)) and position == 35
    assert [r.value for r in got] == [r[3] for r in plain(30) + plain(5)]
    assert not any(marker(r) for r in got)


@pytest.mark.parametrize("parse", list(PARSES))
@pytest.mark.parametrize("last", [False, True], ids=["between", "last"])
def test_a_batch_whose_codec_library_is_missing_is_skipped_and_stands_as_one_record(
    parse: str, last: bool, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    bad = v2_batch(10, plain(8), compression=DefaultRecordBatch.CODEC_LZ4)
    data = v2_batch(0, plain(10)) + bad + (b"" if last else v2_batch(18, plain(4)))
    monkeypatch.setattr(kafka.codec, "has_lz4", lambda: False)  # as where the library is not installed
    with caplog.at_level(logging.WARNING, logger="monitor.source.records"):
        got, position = take_all(parse_class(parse), data)
    assert [r.offset for r in got] == list(range(10)) + [17] + ([] if last else [18, 19, 20, 21])
    stand_in = got[10]
    assert stand_in.value == bad  # the batch's bytes as fetched
    assert marker(stand_in) == "UnsupportedCodecError: Libraries for lz4 compression codec not found"
    assert position == (18 if last else 22)
    assert [r.getMessage() for r in caplog.records] == [
        "record batch cannot be decoded; it is skipped and dead-lettered"
    ]


@pytest.mark.parametrize("parse", list(PARSES))
def test_corrupt_compressed_bytes_and_a_failed_crc_are_skipped_too(parse: str) -> None:
    zstd = bytearray(v2_batch(5, plain(6), compression=DefaultRecordBatch.CODEC_ZSTD))
    header = DefaultRecordBatch.HEADER_STRUCT.size
    zstd[header + 2 :] = b"\x00" * (len(zstd) - header - 2)

    zstd[DefaultRecordBatch.CRC_OFFSET : DefaultRecordBatch.CRC_OFFSET + 4] = calc_crc32c(
        memoryview(zstd)[DefaultRecordBatch.ATTRIBUTES_OFFSET :]
    ).to_bytes(4, "big")  # a valid CRC over bytes no decompressor takes
    crc = bytearray(v2_batch(11, plain(3)))
    crc[-3] ^= 0x40
    data = v2_batch(0, plain(5)) + bytes(zstd) + bytes(crc) + v2_batch(14, plain(2))
    got, position = take_all(parse_class(parse), data)
    assert [r.offset for r in got] == [0, 1, 2, 3, 4, 10, 13, 14, 15] and position == 16
    assert marker(got[5]) == "ZstdError: zstd decompress error: Unknown frame descriptor"
    assert "failed crc check" in (marker(got[6]) or "")


@pytest.mark.parametrize("parse", list(PARSES))
@pytest.mark.parametrize("codec", [LegacyRecordBatch.CODEC_SNAPPY, LegacyRecordBatch.CODEC_LZ4])
def test_a_legacy_message_set_with_a_missing_codec_is_skipped_at_its_wrapper_offset(
    parse: str, codec: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "has_snappy" if codec == LegacyRecordBatch.CODEC_SNAPPY else "has_lz4"
    wrapper = bytearray(legacy_batch(0, 3, [b"b"] * 4, compression=codec))
    struct.pack_into(">q", wrapper, 0, 6)  # the broker stamps a wrapper with its last inner offset
    data = legacy_batch(0, 0, [b"a"] * 3) + bytes(wrapper) + legacy_batch(0, 7, [b"c"] * 2)
    monkeypatch.setattr(kafka.codec, name, lambda: False)  # as where the library is not installed
    got, position = take_all(parse_class(parse), data)
    assert [r.offset for r in got] == [0, 1, 2, 6, 7, 8] and position == 9
    assert "compression codec not found" in (marker(got[3]) or "")


@pytest.mark.parametrize("parse", list(PARSES))
def test_a_legacy_message_failing_its_crc_among_plain_ones_is_skipped_alone(parse: str) -> None:
    bad = bytearray(legacy_batch(1, 4, [b"bad"]))
    bad[-2] ^= 0x40
    data = legacy_batch(1, 0, [b"a"] * 4) + bytes(bad) + legacy_batch(1, 5, [b"c"] * 3)
    got, position = take_all(parse_class(parse), data)
    assert [r.offset for r in got] == list(range(8)) and position == 8
    assert [bool(marker(r)) for r in got] == [False] * 4 + [True] + [False] * 3
    assert "failed crc check" in (marker(got[4]) or "") and got[4].value == bytes(bad)


@pytest.mark.parametrize("parse", list(PARSES))
def test_broken_framing_still_raises(parse: str) -> None:
    """A fetch whose framing cannot be read names no batch and no offset to skip to: kafka-python's error stands."""
    data = v2_batch(0, plain(3)) + b"\x00" * 8 + b"\x00\x00\x00\x05" + b"\x00" * 5
    parsed = parse_class(parse)(0, TP, MemoryRecords(data), check_crcs=True)
    with pytest.raises(Exception, match="Record size is less than the minimum"):
        while parsed:
            parsed.take(None)


def test_guard_leaves_a_fetcher_of_another_shape_alone(caplog: pytest.LogCaptureFixture) -> None:
    class Other:
        def _unpack_records(self, tp: Any, records: Any) -> None: ...

    consumer = type("C", (), {"_fetcher": type("F", (), {"PartitionRecords": Other})()})()
    with caplog.at_level(logging.WARNING, logger="monitor.source.records"):
        assert lean.guard(consumer) is False
    assert consumer._fetcher.PartitionRecords is Other
    assert "not skipped" in caplog.records[0].getMessage()


def test_the_pipeline_dead_letters_the_stand_in_with_its_reason_and_goes_on(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, kafka={"dead_letter_topic": DLQ})
    sink = RecordingSink()
    good = [RawRecord(v, topic="t", partition=0, offset=i) for i, v in enumerate(events(rows(6, seed=2)))]
    why = b"UnsupportedCodecError: Libraries for lz4 compression codec not found"
    stand_in = RawRecord(b"\x00raw-batch", ((lean.UNDECODABLE_HEADER, why),), "t", 0, 9)
    source = RecordingSource([*good[:3], stand_in, *[r._replace(offset=10 + i) for i, r in enumerate(good[3:])]])
    pipeline = make_pipeline(settings, source, sink=sink)
    run_to_end(pipeline)
    assert pipeline.state.counter(tel.EVENTS_INVALID_TOTAL.name, ("unknown", "undecodable_batch")) == 1
    assert pipeline.state.counter_sum(tel.EVENTS_SCORED_TOTAL.name) == 6
    assert reasons(sink) == ["undecodable_batch"]
    value, headers, _ = sink.on(DLQ)[0]
    assert value == b"\x00raw-batch"
    assert dict(headers)["harmonic-invalid-detail"] == b"record batch: " + why
    assert dict(headers)["harmonic-origin"] == b"t/0/9"
    assert lean.UNDECODABLE_HEADER not in dict(headers)
    assert source.commits[-1][0] == {("t", 0): 13}
    assert MODEL
