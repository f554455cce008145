"""Recovery mode after an unclean exit ends, and applies per partition (monitor/runtime/pipeline.py).

The partitions that had records in flight at the crash are re-processed one record at a time; every other partition
reads in batches as usual. Recovery ends for a partition once its records in flight are read again, or when it is
revoked (logged); while any partition is in it, ``harmonic_degraded{reason="recovery"}`` is 1. A record is
dead-lettered as ``crashed_processing`` only if it was in flight at a crash and alone in flight at the two crashes
after it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from monitor import telemetry as tel
from monitor.runtime.pipeline import Pipeline
from monitor.runtime.state import INFLIGHT_FILE, InFlight
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


def on(partition: int, lines: list[bytes], start: int = 0) -> list[RawRecord]:
    return [RawRecord(v, topic="t", partition=partition, offset=start + i) for i, v in enumerate(lines)]


def write_marker(settings: Any, marker: dict[str, Any]) -> None:
    InFlight(Path(settings.state_dir)).path.parent.mkdir(parents=True, exist_ok=True)
    (Path(settings.state_dir) / INFLIGHT_FILE).write_text(json.dumps(marker))


def recording(pipeline: Pipeline) -> list[dict[str, Any]]:
    markers: list[dict[str, Any]] = []
    write = pipeline.recovery.inflight.write
    pipeline.recovery.inflight.write = lambda m: (markers.append(m), write(m))[-1]  # type: ignore[method-assign]
    return markers


def test_only_the_partition_that_had_records_in_flight_is_processed_one_at_a_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = make_settings(tmp_path, kafka={"max_poll_records": 40})
    write_marker(settings, {"ranges": {"t/0": [0, 4]}, "careful": False})
    lines = events(rows(20, seed=4))
    # one poll with both partitions, as a consumer returns them
    source = RecordingSource([*on(0, lines[:10]), *on(1, lines[10:])])
    pipeline = make_pipeline(settings, source)
    assert pipeline.recovery.careful_until == {("t", 0): 4}
    assert "recovery" in pipeline.degraded() and "t/0 up to offset 4" in pipeline.degraded()["recovery"]
    pipeline.readiness()
    assert pipeline.state.gauge(tel.DEGRADED.name, ("recovery",)) == 1.0
    markers = recording(pipeline)
    with caplog.at_level(logging.INFO, logger="monitor.runtime.pipeline"):
        while pipeline.step(0.0):
            pass
    careful = [m for m in markers if m["careful"]]
    batched = [m for m in markers if not m["careful"]]
    assert {p for m in careful for p in m["ranges"]} == {"t/0"}  # partition 1 never one at a time
    assert [m["ranges"]["t/0"] for m in careful] == [[o, o] for o in range(10)]  # the rest of this poll's, too
    assert batched and batched[0]["ranges"] == {"t/1": [0, 9]}
    assert pipeline.recovery.careful_until == {} and "recovery" not in pipeline.degraded()
    pipeline.readiness()
    assert pipeline.state.gauge(tel.DEGRADED.name, ("recovery",)) == 0.0
    ended = [r for r in caplog.records if r.getMessage().startswith("recovery mode ended")]
    assert [(r.partition, r.until_offset) for r in ended] == [("t/0", 4)]  # type: ignore[attr-defined]
    pipeline.close()
    assert pipeline.state.counter_sum(tel.EVENTS_SCORED_TOTAL.name) == 20


def test_a_revoked_partition_leaves_recovery_mode(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = make_settings(tmp_path)
    write_marker(settings, {"ranges": {"t/0": [0, 4], "t/1": [7, 9]}, "careful": False})
    pipeline = make_pipeline(settings, RecordingSource([]))
    with caplog.at_level(logging.INFO, logger="monitor.runtime.pipeline"):
        pipeline.before_revoke([("t", 0)])
    assert pipeline.recovery.careful_until == {("t", 1): 9} and pipeline.recovery.suspects == {("t", 1): (7, 9)}
    ended = [r for r in caplog.records if r.getMessage().startswith("recovery mode ended")]
    assert [r.why for r in ended] == ["the partition was revoked"]  # type: ignore[attr-defined]
    pipeline.before_revoke([("t", 1)])
    assert pipeline.recovery.careful_until == {} and "recovery" not in pipeline.degraded()
    pipeline.close()


@pytest.mark.parametrize(
    ("suspects", "strikes", "poison"),
    [
        ({"t/0": [0, 9]}, {"t/0/6": 1}, True),
        ({"t/0": [0, 9]}, {}, False),
        ({"t/0": [0, 9]}, {"t/0/5": 1}, False),
        ({"t/0": [7, 9]}, {"t/0/6": 1}, False),
        ({"t/1": [0, 9]}, {"t/0/6": 1}, False),
    ],
    ids=[
        "alone-at-two-crashes",
        "alone-at-one-crash",
        "another-record-struck",
        "not-in-the-first-range",
        "another-partition",
    ],
)
def test_crashed_processing_only_for_a_record_alone_in_flight_at_two_crashes_after_the_first(
    tmp_path: Path, suspects: dict[str, list[int]], strikes: dict[str, int], poison: bool
) -> None:
    settings = make_settings(tmp_path, kafka={"max_poll_records": 10, "dead_letter_topic": DLQ})
    careful_until = {key: [span[1], span[1]] for key, span in suspects.items()}
    marker = {"ranges": {"t/0": [6, 6]}, "careful": True, "careful_until": careful_until, "suspects": suspects}
    write_marker(settings, {**marker, "strikes": strikes} if strikes else marker)
    lines = events(rows(10, seed=9))
    sink = RecordingSink()
    pipeline = make_pipeline(settings, RecordingSource(on(0, lines[6:], start=6)), sink=sink)
    run_to_end(pipeline)
    assert reasons(sink) == (["crashed_processing"] if poison else [])
    assert pipeline.state.counter_sum(tel.EVENTS_SCORED_TOTAL.name) == (3 if poison else 4)


class Killed(BaseException):
    """A kill -9 in the middle of processing: nothing after it runs, no handler catches it."""


def killed_at(pipeline: Pipeline, event_id: str) -> None:
    """Make ``pipeline`` die (:class:`Killed`) whenever a batch holding ``event_id`` is applied."""
    watch = pipeline.runtimes[MODEL].watch
    assert watch is not None
    real = watch.update

    def update(batch: Any, *args: Any, **kwargs: Any) -> None:
        if any(ev.event_id == event_id for ev in batch):
            raise Killed
        real(batch, *args, **kwargs)

    watch.update = update  # type: ignore[method-assign]


@pytest.mark.parametrize(
    ("kills_alone", "poison"), [(1, False), (2, True)], ids=["killed-once-alone", "killed-twice-alone"]
)
def test_a_record_is_poison_only_after_two_kills_with_it_alone_in_flight(
    tmp_path: Path, kills_alone: int, poison: bool
) -> None:
    """A batch in flight at a kill, then ``kills_alone`` restarts that die while offset 6 is processed alone (as a
    crash loop's kills may land on any record): once is chance, the record is scored; twice, it is poison."""
    settings = make_settings(tmp_path, kafka={"max_poll_records": 10, "dead_letter_topic": DLQ})
    lines = events(rows(10, seed=9))
    victim = json.loads(lines[6])["id"]
    first = make_pipeline(settings, RecordingSource(on(0, lines)))
    first._process(first.source.poll(0.0, 10), first.clock(), careful=False)  # killed with 0..9 in flight
    for _ in range(kills_alone):
        restarted = make_pipeline(settings, RecordingSource(on(0, lines)))
        killed_at(restarted, victim)
        with pytest.raises(Killed):
            run_to_end(restarted)
    sink = RecordingSink()
    last = make_pipeline(settings, RecordingSource(on(0, lines)), sink=sink)
    run_to_end(last)
    assert reasons(sink) == (["crashed_processing"] if poison else [])
    assert last.state.counter_sum(tel.EVENTS_SCORED_TOTAL.name) == (9 if poison else 10)


def test_a_careful_marker_carries_the_ranges_of_the_first_crash(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, kafka={"max_poll_records": 10})
    write_marker(settings, {"ranges": {"t/0": [2, 5]}, "careful": False})
    lines = events(rows(8, seed=2))
    pipeline = make_pipeline(settings, RecordingSource(on(0, lines)))
    markers = recording(pipeline)
    pipeline.step(0.0)
    assert markers[0] == {
        "ranges": {"t/0": [0, 0]},
        "careful": True,
        "careful_until": {"t/0": [5, 5]},
        "suspects": {"t/0": [2, 5]},
    }
    pipeline.close()


def test_partition_spans_are_each_partitions_first_and_last_record_however_the_runs_interleave() -> None:
    """The marker's ranges and the poll's positions come from these: runs of one partition, runs of two topics with
    the same partition number, a partition met again after another's run, a run of one record."""
    from monitor.source.base import partition_spans

    records = on(0, [b"a"] * 3) + on(1, [b"b"], start=7) + on(0, [b"c"] * 2, start=3)
    records += [
        RawRecord(b"l", topic="labels", partition=0, offset=40),
        RawRecord(b"l", topic="labels", partition=0, offset=41),
    ]
    records += on(2, [b"d"] * 4, start=10)
    spans = {key: (first.offset, last.offset) for key, (first, last) in partition_spans(records).items()}
    reference: dict[tuple[str, int], tuple[int, int]] = {}
    for r in records:  # the plain loop it replaces
        key = (r.topic, r.partition)
        reference[key] = (reference.get(key, (r.offset, r.offset))[0], r.offset)
    assert spans == reference == {("t", 0): (0, 4), ("t", 1): (7, 7), ("labels", 0): (40, 41), ("t", 2): (10, 13)}
    assert partition_spans([]) == {}


def test_the_marker_is_written_over_in_place_and_read_back_whole(tmp_path: Path) -> None:
    flight = InFlight(tmp_path)
    flight.write({"ranges": {"t/0": [1, 2000], "t/1": [5, 9]}, "careful": False})
    inode = flight.path.stat().st_ino
    flight.write({"ranges": {"t/0": [3, 4]}, "careful": False})  # shorter: padded with spaces
    assert flight.load() == {"ranges": {"t/0": [3, 4]}, "careful": False}
    assert flight.path.stat().st_ino == inode  # written over, not replaced
    big = {"ranges": {f"t/{p}": [p, p + 1] for p in range(400)}, "careful": False}  # over a page: a rename
    flight.write(big)
    assert flight.load() == big and flight.path.stat().st_ino != inode
    flight.write({"ranges": {}, "careful": True})  # the file is longer than a page: a rename again, and short
    assert flight.load() == {"ranges": {}, "careful": True} and flight.path.stat().st_size < 100
    flight.clear()
    assert not flight.path.exists() and flight.load() is None
    flight.write({"ranges": {"t/0": [7, 7]}, "careful": False})  # made afresh after a clear
    assert flight.load() == {"ranges": {"t/0": [7, 7]}, "careful": False}
