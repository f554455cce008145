"""The consumer child's frames to the parent (monitor/source/kafka_process.py): records and messages round-trip."""

from __future__ import annotations

import os
import threading

import pytest

from monitor.source.kafka_process import FrameReader, write_frame


def _pipe() -> tuple[int, FrameReader]:
    read, write = os.pipe()
    return write, FrameReader(read)


def test_records_and_messages_round_trip_in_order() -> None:
    write, reader = _pipe()
    batches = [
        ("t", 0, [b'{"a": 1}', b"", b"\x00\xff" * 3], None, [5, 6, 7], [100, None, 102]),
        ("u", 3, [b"x"], [(("ce_type", b"req"),)], [9], [1]),
    ]
    try:
        write_frame(write, "assigned", [("t", 0), ("u", 3)])
        write_frame(write, "records", batches)
        write_frame(write, "records", [])
        assert reader.poll(1.0)
        assert reader.recv() == ("assigned", [("t", 0), ("u", 3)])
        kind, got = reader.recv()
        assert kind == "records" and got == batches
        assert all(type(v) is bytes for batch in got for v in batch[2])
        assert reader.recv() == ("records", [])
        assert not reader.poll(0.0)
    finally:
        os.close(write)
        reader.close()


def test_a_frame_larger_than_the_pipe_arrives_whole() -> None:
    """Written by one thread while read by another, in pieces: values ~4 MB in all, several pipe buffers."""
    write, reader = _pipe()
    values = [bytes([i % 251]) * (1000 + i) for i in range(3000)]
    batch = ("t", 1, values, None, list(range(3000)), [0] * 3000)
    writer = threading.Thread(target=write_frame, args=(write, "records", [batch]))
    writer.start()
    try:
        kind, got = reader.recv()
        assert kind == "records" and got == [batch]
    finally:
        writer.join(timeout=10)
        os.close(write)
        reader.close()


def test_the_end_of_the_stream_is_eof() -> None:
    write, reader = _pipe()
    write_frame(write, "closed", None)
    os.close(write)
    try:
        assert reader.recv() == ("closed", None)
        assert reader.poll(0.0)  # readable: the end
        with pytest.raises(EOFError):
            reader.recv()
    finally:
        reader.close()
