"""What kafka-python's per-record parse costs in the consumer child, and the floor under it (issue 3).

The streaming ratio on Tansu sits at about 0.8 because the consumer child spends a little more CPU than the whole
raw consume (docs/BENCHMARKS.md, streaming): it runs kafka-python's parse of every fetched record, then builds the
column batch it hands over. This script times those steps in-process, no broker, on the bytes a fetch returns:
v2 record batches (Tansu's format) of SPEC §1 events built as ``bench/stream.py`` builds them, filled to the
producer's default ``batch_size`` (16,384 bytes) as kafka-python's producer fills them. Per record, median over
interleaved rounds:

- ``PartitionRecords.take()``: the fetcher's generator over one partition's fetched bytes — batch CRC-32C, record
  parse (``DefaultRecordBatch``), and a ``ConsumerRecord`` per record — with ``check_crcs`` on (the default) and off;
- the same ``take()`` with the consumer's lean parse (``monitor.source.records``, what the child installs; checked
  here to give kafka-python's records);
- ``DefaultRecordBatch`` iteration alone: the record parse without the fetcher's ``ConsumerRecord`` step;
- the column batch the child builds from the ``ConsumerRecord`` list (``monitor.source.kafka.columns_of``);
- the consumer child's memory and GC settings apply throughout (``monitor/allocator.py``: malloc thresholds, GC
  thresholds raised, start-up objects frozen), as in the child;
- a floor: one tight pure-Python loop reading each record's offset, timestamp and value (kafka-python's own
  ``decode_varint``, the batch CRC checked) into the same columns. It measures how much of the parse is
  kafka-python's per-record generality, and is checked here to give exactly kafka-python's offsets, timestamps and
  values on these batches; it is not product code (no headers, control or transactional batches, compression).

Usage::

    .venv/bin/python bench/record_parse.py
    .venv/bin/python bench/record_parse.py --records 50000 --rounds 61
"""

from __future__ import annotations

import argparse
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka.consumer.fetcher import Fetcher
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from kafka.record.util import decode_varint
from kafka.structs import TopicPartition
from machine import machine  # bench/machine.py: the script's folder is on sys.path
from stream import build_fixture, encode_events

from monitor.allocator import freeze_startup_objects, tune_gc, tune_malloc
from monitor.source.kafka import PartitionBatch, columns_of
from monitor.source.records import lean_partition_records, refusal

#: kafka-python's producer default ``batch_size``
BATCH_BYTES = 16384


def fetched_bytes(values: list[bytes]) -> tuple[bytes, int]:
    """The values as consecutive v2 record batches of at most BATCH_BYTES, as one partition's fetched bytes."""
    out = bytearray()
    offset, batches = 0, 0
    i = 0
    while i < len(values):
        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=0, is_transactional=False, producer_id=-1, producer_epoch=-1,
            base_sequence=-1, batch_size=BATCH_BYTES,
        )  # fmt: skip
        first = i
        while i < len(values):
            if (
                builder.append(i - first, timestamp=1_795_168_800_000 + i, key=None, value=values[i], headers=[])
                is None
            ):
                break
            i += 1
        batch = bytearray(builder.build())
        struct.pack_into(">q", batch, 0, offset)  # base offset
        offset += i - first
        out += batch
        batches += 1
    return bytes(out), batches


def take(data: bytes, check_crcs: bool, cls: type = Fetcher.PartitionRecords) -> list[Any]:
    records = cls(0, TopicPartition("t", 0), MemoryRecords(data), check_crcs=check_crcs)
    taken: list[Any] = records.take()
    return taken


def batch_records(data: bytes) -> int:
    n = 0
    records = MemoryRecords(data)
    batch = records.next_batch()
    while batch is not None:
        for _record in batch:
            n += 1
        batch = records.next_batch()
    return n


def floor(data: bytes) -> PartitionBatch:
    """Offsets, timestamps and values of plain v2 batches in one loop (see the module docstring: a floor, not a parser
    for every batch)."""
    values: list[bytes] = []
    offsets: list[int] = []
    stamps: list[int | None] = []
    records = MemoryRecords(data)
    batch = records.next_batch()
    while batch is not None:
        assert isinstance(batch, DefaultRecordBatch) and batch.validate_crc()
        buffer, pos = batch._buffer, batch._pos
        base, first = batch.base_offset, batch.first_timestamp
        for _ in range(batch._num_records):
            length, pos = decode_varint(buffer, pos)
            end = pos + length
            pos += 1  # attributes: one byte
            delta_ts, pos = decode_varint(buffer, pos)
            delta_offset, pos = decode_varint(buffer, pos)
            key_length, pos = decode_varint(buffer, pos)
            pos += max(key_length, 0)
            value_length, pos = decode_varint(buffer, pos)
            values.append(bytes(buffer[pos : pos + value_length]))
            offsets.append(base + delta_offset)
            stamps.append(first + delta_ts)
            pos = end
        batch = records.next_batch()
    return ("t", 0, values, None, offsets, stamps)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=41)
    args = ap.parse_args()
    malloc, gc_tuned = tune_malloc(), tune_gc()  # what the consumer child applies at its start
    print(f"machine: {machine('kafka', 'crc32c')}; the child's malloc / GC settings applied: {malloc} / {gc_tuned}")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    with tempfile.TemporaryDirectory() as tmp:
        values = encode_events(build_fixture(Path(tmp)), args.records)
    data, batches = fetched_bytes(values)
    reference = take(data, True)
    got = floor(data)
    assert got == columns_of("t", 0, reference), "the floor loop disagrees with kafka-python"
    assert got[2] == values
    assert take(data, True, lean_partition_records()) == reference, "the lean parse disagrees with kafka-python"
    print(f"lean parse usable with this kafka-python: {refusal() or 'yes'}")
    freeze_startup_objects()  # as the child does once its consumer exists
    steps: dict[str, Callable[[], object]] = {
        "PartitionRecords.take(), check_crcs on (the consumer's default)": lambda: take(data, True),
        "PartitionRecords.take(), check_crcs off": lambda: take(data, False),
        "the lean parse (monitor/source/records.py): take(), check_crcs on": lambda: take(
            data, True, lean_partition_records()
        ),
        "DefaultRecordBatch iteration alone (no ConsumerRecord)": lambda: batch_records(data),
        "the child's column batch from the ConsumerRecords": lambda: columns_of("t", 0, reference),
        "floor: one loop to the same columns, batch CRC checked": lambda: floor(data),
    }
    samples: dict[str, list[float]] = {name: [] for name in steps}
    for fn in steps.values():
        fn()
    for r in range(args.rounds):
        names = list(steps)
        names = names[r % len(names) :] + names[: r % len(names)]  # rotate: each step follows each other alike
        for name in names:
            t0 = time.perf_counter()
            steps[name]()
            samples[name].append(time.perf_counter() - t0)
    print(
        f"\n{args.records:,} records of {sum(map(len, values)) / len(values):.0f} bytes in {batches} v2 batches "
        f"({args.records / batches:.1f} records each); median of {args.rounds} interleaved rounds\n"
    )
    print("| step | µs per record |\n|---|---:|")
    for name, times in samples.items():
        print(f"| {name} | {statistics.median(times) / args.records * 1e6:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
