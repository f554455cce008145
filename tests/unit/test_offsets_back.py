"""Offsets that go back are seen (monitor/runtime/pipeline.py).

The state records the position it last committed beside the positions it holds. After a restart, a partition's
first record at or above that commit is a redelivery of what was applied but not committed (skipped up to the saved
position); one below it means the offsets went back — an operator's reset for reprocessing, a re-created topic,
another cluster at the same address — and the broker's position wins: every record is processed, the case is logged
and counted in ``harmonic_offsets_went_back_total``.
"""

from __future__ import annotations

import json
import logging
import zlib
from pathlib import Path

import pytest

from monitor import telemetry as tel
from monitor.config import Settings
from monitor.runtime.pipeline import Pipeline
from monitor.runtime.state import STATE_FILE, STATE_VERSION
from monitor.source.base import Positions, RawRecord
from tests.unit.test_pipeline import RecordingSource, events, make_pipeline, make_settings, rows, run_to_end
from tests.unit.test_pipeline_reliability import records


def saved_state(settings: object, *, position: int, committed: int | None, tails: list[object] | None = None) -> None:
    """A state file holding partition t/0 at ``position``, its last commit and, where given, the ``tails`` rows
    (the fingerprints of the records before saved positions, malformed ones included where a test wants them)."""
    path = Path(settings.state_dir) / STATE_FILE  # type: ignore[attr-defined]
    path.parent.mkdir(parents=True, exist_ok=True)
    state: dict[str, object] = {
        "version": STATE_VERSION,
        "counters": [],
        "models": {},
        "positions": [["t", 0, position]],
    }
    if committed is not None:
        state["committed"] = [["t", 0, committed]]
    if tails is not None:
        state["tails"] = tails
    path.write_text(json.dumps(state))


def test_a_redelivery_from_the_last_commit_is_skipped_up_to_the_saved_position(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, kafka={"max_poll_records": 10})
    saved_state(settings, position=20, committed=10)  # killed between saving 20 and committing it
    lines = events(rows(30, seed=3))
    source = RecordingSource(records(lines[10:], start=10))  # the group's offset: the last commit that landed
    pipeline = make_pipeline(settings, source)
    run_to_end(pipeline)
    assert pipeline.state.counter_sum(tel.EVENTS_CONSUMED_TOTAL.name) == 10  # 20..29 only
    assert pipeline.state.counter(tel.OFFSETS_WENT_BACK_TOTAL.name, ()) == 0


@pytest.mark.parametrize("first", [0, 5], ids=["re-created-topic", "operator-reset"])
def test_offsets_below_the_last_commit_win_and_are_logged_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, first: int
) -> None:
    settings = make_settings(tmp_path, kafka={"max_poll_records": 10})
    saved_state(settings, position=20, committed=20)
    lines = events(rows(30, seed=4))
    source = RecordingSource(records(lines[first:], start=first))
    pipeline = make_pipeline(settings, source)
    with caplog.at_level(logging.WARNING, logger="monitor.runtime.pipeline"):
        while pipeline.step(0.0):
            pass
    pipeline.close()
    assert pipeline.state.counter_sum(tel.EVENTS_CONSUMED_TOTAL.name) == 30 - first  # every new event counted
    assert pipeline.state.counter(tel.OFFSETS_WENT_BACK_TOTAL.name, ()) == 1
    (line,) = [r for r in caplog.records if r.getMessage().startswith("offsets went back")]
    assert (line.partition, line.first_offset, line.last_committed) == ("t/0", first, 20)  # type: ignore[attr-defined]
    assert source.commits[-1][0] == {("t", 0): 30}


def test_the_state_records_the_position_last_committed(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, kafka={"max_poll_records": 10})
    pipeline = make_pipeline(settings, RecordingSource(records(events(rows(10, seed=5)))))
    run_to_end(pipeline)
    saved = json.loads((Path(settings.state_dir) / STATE_FILE).read_text())
    assert saved["committed"] == [["t", 0, 10]] and saved["positions"] == [["t", 0, 10]]


def test_a_state_without_committed_positions_keeps_the_saved_positions(tmp_path: Path) -> None:
    """A state written before the position last committed was recorded: the saved positions win, as they did."""
    settings = make_settings(tmp_path, kafka={"max_poll_records": 10})
    saved_state(settings, position=20, committed=None)
    source = RecordingSource(records(events(rows(30, seed=6))))
    pipeline = make_pipeline(settings, source)
    run_to_end(pipeline)
    assert pipeline.state.counter_sum(tel.EVENTS_CONSUMED_TOTAL.name) == 10
    assert pipeline.state.counter(tel.OFFSETS_WENT_BACK_TOTAL.name, ()) == 0


# -- a re-created topic already grown past the saved position ---------------------------------------------------------


class GroupLog:
    """One partition as a broker keeps it, read by a group member that cannot seek."""

    def __init__(self, values: list[bytes], *, position: int, timestamps: list[int | None] | None = None) -> None:
        stamps = timestamps if timestamps is not None else [None] * len(values)
        self.records = [
            RawRecord(v, topic="t", partition=0, offset=i, timestamp_ms=ts)
            for i, (v, ts) in enumerate(zip(values, stamps, strict=True))
        ]
        self.position = position
        self.commits: list[Positions] = []
        self.seeks: list[Positions] = []

    def poll(self, timeout_seconds: float, max_records: int) -> list[RawRecord]:
        out = self.records[self.position : self.position + max_records]
        self.position += len(out)
        return out

    def commit(self, positions: Positions) -> None:
        self.commits.append(dict(positions))

    @property
    def ready(self) -> bool:
        return True

    @property
    def exhausted(self) -> bool:
        return self.position >= len(self.records)

    def close(self) -> None:
        return None


class PartitionLog(GroupLog):
    """One partition as a broker keeps it, read by a group member that can seek (``KafkaSource.seek``)."""

    def seek(self, positions: Positions) -> None:
        self.seeks.append(dict(positions))
        self.position = positions[("t", 0)]


def drain(settings: Settings, source: object) -> Pipeline:
    return run_to_end(make_pipeline(settings, source))


def first_run(tmp_path: Path, lines: list[bytes], timestamps: list[int | None] | None = None) -> Settings:
    """A sidecar that read and committed ``lines`` and stopped cleanly: its state dir holds their fingerprints."""
    settings = make_settings(tmp_path, kafka={"max_poll_records": 4})
    drain(settings, PartitionLog(lines, position=0, timestamps=timestamps))
    return settings


def test_the_state_records_the_fingerprint_of_the_record_before_each_saved_position(tmp_path: Path) -> None:
    lines = events(rows(10, seed=7))
    settings = first_run(tmp_path, lines, [1000 + i for i in range(10)])
    saved = json.loads((Path(settings.state_dir) / STATE_FILE).read_text())
    assert saved["tails"] == [["t", 0, 9, 1009, zlib.crc32(lines[9])]]


@pytest.mark.parametrize("stamped", [True, False], ids=["timestamps", "no-timestamps"])
def test_a_re_created_topic_grown_past_the_saved_position_is_read_from_its_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, stamped: bool
) -> None:
    settings = first_run(tmp_path, events(rows(10, seed=8)), [1000 + i for i in range(10)] if stamped else None)
    new = events(rows(25, seed=9))  # the new incarnation: other events, more of them
    # the group's committed offset outlived the topic (Kafka 0.9 keeps it): the broker hands out 10 onwards
    source = PartitionLog(new, position=10, timestamps=[5000 + i for i in range(25)] if stamped else None)
    with caplog.at_level(logging.WARNING, logger="monitor.runtime.pipeline"):
        pipeline = drain(settings, source)
    assert source.seeks == [{("t", 0): 9}, {("t", 0): 0}]  # the record before the saved position, then the start
    assert pipeline.state.counter_sum(tel.EVENTS_CONSUMED_TOTAL.name) == 10 + 25  # every new event counted
    assert pipeline.state.counter(tel.OFFSETS_WENT_BACK_TOTAL.name, ()) == 1
    (line,) = [r for r in caplog.records if "not the one applied there" in r.getMessage()]
    assert (line.partition, line.offset, line.read_from) == ("t/0", 9, 0)  # type: ignore[attr-defined]
    assert source.commits[-1] == {("t", 0): 25}


def test_a_revoke_before_the_first_record_keeps_what_tells_a_re_created_topic(tmp_path: Path) -> None:
    """A group's second join at start-up revokes the partitions before this process read any record of them: the
    saved position, commit and fingerprint still speak for them, so a re-created topic is still seen and read from its
    start (dropping them skipped the new topic's first records as already applied)."""
    settings = first_run(tmp_path, events(rows(10, seed=8)), [1000 + i for i in range(10)])
    source = PartitionLog(events(rows(25, seed=9)), position=10, timestamps=[5000 + i for i in range(25)])
    pipeline = make_pipeline(settings, source)
    pipeline.before_revoke([("t", 0)])
    pipeline.after_assign([("t", 0)])
    run_to_end(pipeline)
    assert source.seeks == [{("t", 0): 9}, {("t", 0): 0}]
    assert pipeline.state.counter_sum(tel.EVENTS_CONSUMED_TOTAL.name) == 10 + 25  # every new event counted
    assert pipeline.state.counter(tel.OFFSETS_WENT_BACK_TOTAL.name, ()) == 1


def test_the_same_topic_grown_since_is_read_on_from_the_saved_position(tmp_path: Path) -> None:
    lines = events(rows(20, seed=10))
    stamps: list[int | None] = [1000 + i for i in range(20)]
    settings = first_run(tmp_path, lines[:10], stamps[:10])
    source = PartitionLog(lines, position=10, timestamps=stamps)
    pipeline = drain(settings, source)
    assert source.seeks == [{("t", 0): 9}]  # one record re-read and compared: the same one, skipped
    assert pipeline.state.counter_sum(tel.EVENTS_CONSUMED_TOTAL.name) == 20  # 10 before, 10 new: none twice
    assert pipeline.state.counter(tel.OFFSETS_WENT_BACK_TOTAL.name, ()) == 0
    assert source.commits[-1] == {("t", 0): 20}


def test_the_same_value_with_another_timestamp_is_another_record(tmp_path: Path) -> None:
    """A producer that re-sends the same events into a re-created topic: the broker's timestamps tell them apart."""
    lines = events(rows(10, seed=11))
    settings = first_run(tmp_path, lines, [1000 + i for i in range(10)])
    source = PartitionLog(lines + lines, position=10, timestamps=[9000 + i for i in range(20)])
    pipeline = drain(settings, source)
    assert pipeline.state.counter(tel.OFFSETS_WENT_BACK_TOTAL.name, ()) == 1
    assert pipeline.state.counter_sum(tel.EVENTS_CONSUMED_TOTAL.name) == 10 + 20


def test_the_same_value_without_timestamps_cannot_be_told_apart(tmp_path: Path) -> None:
    """Message format v0 (Kafka 0.9) keeps no timestamps: the same value re-sent at the same offset looks the same."""
    lines = events(rows(10, seed=12))
    settings = first_run(tmp_path, lines)
    source = PartitionLog(lines + lines, position=10)
    pipeline = drain(settings, source)
    assert pipeline.state.counter(tel.OFFSETS_WENT_BACK_TOTAL.name, ()) == 0
    assert pipeline.state.counter_sum(tel.EVENTS_CONSUMED_TOTAL.name) == 10 + 10  # 0..9 of the new one unseen


def test_a_redelivery_compares_the_record_before_the_saved_position_as_it_passes(tmp_path: Path) -> None:
    """The last commit did not land: the broker hands out records below the saved position anyway; the one just
    before it is compared without a seek."""
    lines = events(rows(20, seed=13))
    settings = make_settings(tmp_path, kafka={"max_poll_records": 4})
    saved_state(settings, position=12, committed=8, tails=[["t", 0, 11, None, zlib.crc32(lines[11])]])
    source = PartitionLog(lines, position=8)
    pipeline = drain(settings, source)
    assert source.seeks == []
    assert pipeline.state.counter_sum(tel.EVENTS_CONSUMED_TOTAL.name) == 8  # 12..19
    assert pipeline.state.counter(tel.OFFSETS_WENT_BACK_TOTAL.name, ()) == 0


def test_a_saved_fingerprint_whose_record_is_gone_is_read_on_from_the_broker(tmp_path: Path) -> None:
    """The record before the saved position was deleted (retention): the seek lands past it; read on, no loop."""
    lines = events(rows(10, seed=14))
    settings = first_run(tmp_path, lines)

    class Retained(PartitionLog):
        def seek(self, positions: Positions) -> None:
            super().seek({key: max(offset, 10) for key, offset in positions.items()})  # log start 10

    source = Retained(lines + events(rows(5, seed=15)), position=10)
    pipeline = drain(settings, source)
    assert source.seeks == [{("t", 0): 10}]
    assert pipeline.state.counter_sum(tel.EVENTS_CONSUMED_TOTAL.name) == 15
    assert pipeline.state.counter(tel.OFFSETS_WENT_BACK_TOTAL.name, ()) == 0


def test_a_fingerprint_not_before_its_saved_position_is_ignored(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, kafka={"max_poll_records": 4})
    saved_state(settings, position=10, committed=10, tails=[["t", 0, 3, None, 1], ["t", 0, 9, "x", 1], "junk"])
    source = PartitionLog(events(rows(15, seed=16)), position=10)
    pipeline = drain(settings, source)
    assert source.seeks == []
    assert pipeline.state.counter_sum(tel.EVENTS_CONSUMED_TOTAL.name) == 5


# -- the same, with a group member that cannot seek but reads on the side (the consumer in its child process) ----------


class FakeSideReader:
    """``SideReader`` over a partition's records: the records kept from ``log_start`` on."""

    def __init__(self, records: list[RawRecord], *, log_start: int = 0) -> None:
        self.records = records
        self.log_start = log_start
        self.reads: list[tuple[int, int]] = []
        self.open = False
        self.closes = 0

    def read(self, key: tuple[str, int], start: int, end: int, max_records: int) -> list[RawRecord]:
        assert key == ("t", 0)
        self.reads.append((start, end))
        self.open = True
        kept = [r for r in self.records if max(start, self.log_start) <= r.offset < end]
        return kept[:max_records]

    def read_at(self, key: tuple[str, int], offset: int) -> RawRecord | None:
        found = self.read(key, offset, offset + 1, 1)
        return found[0] if found else None

    def close(self) -> None:
        self.open = False
        self.closes += 1


class SideReadLog(GroupLog):
    """A group member without ``seek``, with a ``side_reader`` over the same partition."""

    def __init__(
        self, values: list[bytes], *, position: int, timestamps: list[int | None] | None = None, log_start: int = 0
    ) -> None:
        super().__init__(values, position=position, timestamps=timestamps)
        self.side_reader = FakeSideReader(self.records, log_start=log_start)

    @property
    def assigned(self) -> list[tuple[str, int]]:
        return [("t", 0)]


def offsets_processed(pipeline: Pipeline) -> list[int]:
    """Have ``pipeline`` note the offsets of the records it processes, in order (the list it returns)."""
    seen: list[int] = []
    process = pipeline._process

    def noting(records: list[RawRecord], now: float, *, careful: bool) -> None:
        seen.extend(r.offset for r in records)
        process(records, now, careful=careful)

    pipeline._process = noting  # type: ignore[method-assign]
    return seen


def test_without_seek_the_same_topic_is_checked_by_a_side_read_and_read_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lines = events(rows(20, seed=20))
    stamps: list[int | None] = [1000 + i for i in range(20)]
    settings = first_run(tmp_path, lines[:10], stamps[:10])
    source = SideReadLog(lines, position=10, timestamps=stamps)
    pipeline = make_pipeline(settings, source)
    seen = offsets_processed(pipeline)
    with caplog.at_level(logging.INFO, logger="monitor.runtime.pipeline"):
        run_to_end(pipeline)
    assert source.side_reader.reads == [(9, 10)]  # the record before the saved position, read once
    assert not source.side_reader.open  # closed once no check is left
    assert seen == list(range(10, 20))
    assert pipeline.state.counter_sum(tel.EVENTS_CONSUMED_TOTAL.name) == 20  # 10 before, 10 new: none twice
    assert pipeline.state.counter(tel.OFFSETS_WENT_BACK_TOTAL.name, ()) == 0
    assert [r.getMessage() for r in caplog.records].count(
        "checking the record before the saved position with a side read"
    ) == 1
    assert source.commits[-1] == {("t", 0): 20}


@pytest.mark.parametrize("stamped", [True, False], ids=["timestamps", "no-timestamps"])
def test_without_seek_a_re_created_topic_is_seen_by_a_side_read_and_its_first_records_processed_first(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, stamped: bool
) -> None:
    settings = first_run(tmp_path, events(rows(10, seed=8)), [1000 + i for i in range(10)] if stamped else None)
    new = events(rows(25, seed=9))
    source = SideReadLog(new, position=10, timestamps=[5000 + i for i in range(25)] if stamped else None)
    pipeline = make_pipeline(settings, source)
    seen = offsets_processed(pipeline)
    with caplog.at_level(logging.WARNING, logger="monitor.runtime.pipeline"):
        run_to_end(pipeline)
    # the record before the saved position, then the new topic's records below the position handed out, in chunks
    assert source.side_reader.reads == [(9, 10), (0, 10), (4, 10), (8, 10)]
    assert seen == list(range(25))  # in offset order: 0..9 read on the side before the group's 10..24
    assert pipeline.state.counter_sum(tel.EVENTS_CONSUMED_TOTAL.name) == 10 + 25  # every new event counted
    assert pipeline.state.counter(tel.OFFSETS_WENT_BACK_TOTAL.name, ()) == 1
    (line,) = [r for r in caplog.records if "not the one applied there" in r.getMessage()]
    assert (line.partition, line.offset, line.read_from) == ("t/0", 9, 0)  # type: ignore[attr-defined]
    committed = [c[("t", 0)] for c in source.commits]
    assert committed == sorted(committed) and committed[-1] == 25  # never back, never past what was applied
    assert not source.side_reader.open


def test_without_seek_a_record_before_the_saved_position_gone_by_retention_is_read_on(tmp_path: Path) -> None:
    lines = events(rows(10, seed=14))
    settings = first_run(tmp_path, lines)
    source = SideReadLog(lines + events(rows(5, seed=15)), position=10, log_start=10)
    pipeline = make_pipeline(settings, source)
    seen = offsets_processed(pipeline)
    run_to_end(pipeline)
    assert source.side_reader.reads == [(9, 10)]
    assert seen == list(range(10, 15))
    assert pipeline.state.counter_sum(tel.EVENTS_CONSUMED_TOTAL.name) == 15
    assert pipeline.state.counter(tel.OFFSETS_WENT_BACK_TOTAL.name, ()) == 0


def test_without_seek_a_redelivery_is_checked_by_a_side_read_and_skipped_up_to_the_saved_position(
    tmp_path: Path,
) -> None:
    """The last commit did not land: the broker hands out records below the saved position; the record before it is
    read on the side first (were it another one, the records before it would be a new topic's), found the same, and
    the redelivered records are skipped up to the saved position."""
    lines = events(rows(20, seed=13))
    settings = make_settings(tmp_path, kafka={"max_poll_records": 4})
    saved_state(settings, position=12, committed=8, tails=[["t", 0, 11, None, zlib.crc32(lines[11])]])
    source = SideReadLog(lines, position=8)
    pipeline = drain(settings, source)
    assert source.side_reader.reads == [(11, 12)]
    assert pipeline.state.counter_sum(tel.EVENTS_CONSUMED_TOTAL.name) == 8  # 12..19
    assert pipeline.state.counter(tel.OFFSETS_WENT_BACK_TOTAL.name, ()) == 0


@pytest.mark.parametrize("position", [0, 4, 9], ids=["from-0", "below-the-saved-position", "at-the-fingerprint"])
def test_without_seek_a_re_created_topic_handed_out_below_the_saved_position_loses_no_record(
    tmp_path: Path, position: int
) -> None:
    """The state saved no commit (the first run committed once, at its close) and the broker hands out the new topic
    below the saved position (it dropped the group's offset, or kept another): nothing tells but the fingerprint,
    compared before any record is skipped; the new topic's records below the first one handed out are read first."""
    settings = first_run(tmp_path, events(rows(10, seed=8)), [1000 + i for i in range(10)])
    path = Path(settings.state_dir) / STATE_FILE
    state = json.loads(path.read_text())
    state["committed"] = []
    path.write_text(json.dumps(state))
    source = SideReadLog(events(rows(25, seed=9)), position=position, timestamps=[5000 + i for i in range(25)])
    pipeline = make_pipeline(settings, source)
    seen = offsets_processed(pipeline)
    run_to_end(pipeline)
    assert seen == list(range(25))
    checked = [] if position == 9 else [(9, 10)]  # at 9 the record handed out is compared itself
    assert source.side_reader.reads == checked + [(start, position) for start in range(0, position, 4)]
    assert pipeline.state.counter_sum(tel.EVENTS_CONSUMED_TOTAL.name) == 10 + 25
    assert pipeline.state.counter(tel.OFFSETS_WENT_BACK_TOTAL.name, ()) == 1
    assert source.commits[-1] == {("t", 0): 25}
