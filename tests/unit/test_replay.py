"""Stage 1: ReplaySource (monitor/source/replay.py) — JSON lines from a file or a list, paced by a fake clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.errors import SourceError
from monitor.source.base import RawRecord, Source
from monitor.source.replay import ReplaySource


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


LINES = [f'{{"id": "e{i}"}}'.encode() for i in range(10)]


def test_replay_polls_in_order_with_line_number_offsets() -> None:
    source = ReplaySource(LINES, topic="t")
    first = source.poll(0.0, 4)
    assert [r.value for r in first] == LINES[:4]
    assert [(r.topic, r.partition, r.offset) for r in first] == [("t", 0, i) for i in range(4)]
    assert first[0].origin == ("t", 0, 0) and first[0].headers == ()
    rest = source.poll(0.0, 100)
    assert [r.offset for r in rest] == list(range(4, 10))
    assert source.exhausted and source.emitted == 10
    assert source.poll(0.0, 100) == []


def test_replay_reads_a_json_lines_file_skipping_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join([LINES[0], b"", b"   ", LINES[1], LINES[2]]) + b"\n")
    source = ReplaySource(path)
    assert [r.value for r in source.poll(0.0, 10)] == LINES[:3]
    assert source.exhausted
    assert [r.value for r in ReplaySource(str(path)).poll(0.0, 10)] == LINES[:3]


def test_replay_missing_file_is_a_source_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"replay file '.*nope.jsonl' does not exist"):
        ReplaySource(tmp_path / "nope.jsonl")


@pytest.mark.parametrize("rate", [0.0, -5.0])
def test_replay_bad_rate_is_a_source_error(rate: float) -> None:
    with pytest.raises(SourceError, match="replay rate must be > 0 events/s"):
        ReplaySource(LINES, rate=rate)


def test_replay_commit_records_positions() -> None:
    source = ReplaySource(LINES)
    assert source.committed == {}
    source.commit({("replay", 0): 3})
    source.commit({("replay", 0): 7})
    assert source.committed == {("replay", 0): 7}


def test_replay_loop_restarts_and_keeps_offsets_increasing() -> None:
    source = ReplaySource(LINES[:3], loop=True)
    records = source.poll(0.0, 7)
    assert [r.value for r in records] == [*LINES[:3], *LINES[:3], LINES[0]]
    assert [r.offset for r in records] == list(range(7))
    assert not source.exhausted


def test_replay_rate_paces_against_the_injected_clock() -> None:
    clock = FakeClock()
    source = ReplaySource(LINES, rate=10.0, clock=clock)
    assert len(source.poll(0.0, 100)) == 1  # one event is due at t = 0
    assert source.poll(0.0, 100) == []  # nothing more due yet; timeout 0 means no wait
    clock.now = 0.5
    assert [r.offset for r in source.poll(0.0, 100)] == [1, 2, 3, 4, 5]
    clock.now = 0.55
    assert source.poll(0.0, 100) == []
    clock.now = 10.0
    assert len(source.poll(0.0, 2)) == 2  # max_records still bounds a poll
    assert len(source.poll(0.0, 100)) == 2 and source.exhausted


def test_replay_empty_source_is_exhausted_and_ready() -> None:
    source = ReplaySource([])
    assert source.exhausted and source.ready
    assert source.poll(0.0, 10) == []
    source.close()


def test_replay_satisfies_the_source_protocol() -> None:
    source: Source = ReplaySource(LINES)
    assert source.ready and not source.exhausted


def test_records_of_a_column_batch_are_raw_records_in_order() -> None:
    from monitor.source.kafka import records_of

    plain = list(records_of(("t", 3, [b"a", b"b"], None, [7, 8], [100, None])))
    assert plain == [RawRecord(b"a", (), "t", 3, 7, 100), RawRecord(b"b", (), "t", 3, 8, None)]
    assert all(type(r) is RawRecord for r in plain) and plain[1].origin == ("t", 3, 8)
    headers = [(("ce_id", b"1"),), ()]
    with_headers = list(records_of(("t", 0, [b"x", b"y"], headers, [0, 1], [5, 6])))
    assert [r.headers for r in with_headers] == headers
    with pytest.raises(ValueError):  # columns of different lengths are a bug, not a short batch
        list(records_of(("t", 0, [b"x"], None, [0, 1], [5, 6])))
