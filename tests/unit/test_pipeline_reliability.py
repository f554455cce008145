"""The reliability floor of the loop (monitor/runtime/pipeline.py, ingest.py, scoring.py, state.py).

Per-record isolation (an event whose decoding or scoring raises is dead-lettered, the rest go on), checkpoints
(offsets are committed only after the state that covers them was written), a state directory that cannot be
written (degraded, never an exit), and the in-flight marker (records in flight at an unclean exit are re-processed
one at a time; one in flight at a crash and alone in flight at the two after it is dead-lettered as
``crashed_processing``).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monitor import telemetry as tel
from monitor.drift import calibrate
from monitor.runtime.pipeline import Pipeline
from monitor.runtime.state import INFLIGHT_FILE, STATE_FILE, InFlight, StateStore
from monitor.source.base import RawRecord
from tests.unit.test_pipeline import (
    MODEL,
    FakeClock,
    RecordingSink,
    RecordingSource,
    event,
    events,
    make_pipeline,
    make_settings,
    rows,
    run_to_end,
)

DLQ = "dlq"


def records(lines: list[bytes], *, start: int = 0) -> list[RawRecord]:
    return [RawRecord(v, topic="t", partition=0, offset=start + i) for i, v in enumerate(lines)]


def reasons(sink: RecordingSink) -> list[str]:
    return [dict(h)["harmonic-invalid-reason"].decode() for _, h, _ in sink.on(DLQ)]


def poison_watch(pipeline: Pipeline, poison_id: str) -> None:
    """Make the model's watch raise on any batch that holds ``poison_id`` (an applying bug for one event)."""
    watch = pipeline.runtimes[MODEL].watch
    assert watch is not None
    real = watch.update

    def update(batch: Any, *args: Any, **kwargs: Any) -> None:
        if any(ev.event_id == poison_id for ev in batch):
            raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")
        real(batch, *args, **kwargs)

    watch.update = update  # type: ignore[method-assign]


def test_pipeline_dead_letters_an_event_whose_scoring_raises_and_scores_the_rest(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, kafka={"max_poll_records": 50, "dead_letter_topic": DLQ})
    sink = RecordingSink()
    source = RecordingSource(records(events(rows(100, seed=3))))
    pipeline = make_pipeline(settings, source, sink=sink)
    poison_watch(pipeline, "e37")
    run_to_end(pipeline)
    state = pipeline.state
    assert state.counter(tel.EVENTS_INVALID_TOTAL.name, (MODEL, "unscorable")) == 1
    assert state.counter_sum(tel.EVENTS_SCORED_TOTAL.name) == 99
    assert reasons(sink) == ["unscorable"]
    value, headers, _ = sink.on(DLQ)[0]
    assert json.loads(value)["id"] == "e37"  # the raw record, kept until applied
    assert dict(headers)["harmonic-origin"] == b"t/0/37"
    assert source.commits[-1][0] == {("t", 0): 100}  # the loop went on past it


def test_pipeline_dead_letters_a_record_whose_decoder_raises_an_unexpected_error(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, kafka={"dead_letter_topic": DLQ})
    sink = RecordingSink()
    lines = events(rows(10, seed=4))
    source = RecordingSource(records(lines))
    pipeline = make_pipeline(settings, source, sink=sink)
    real = pipeline.ingest.decoder.common  # the decode step every plain record meets once parsed

    def common(doc: Any, *args: Any) -> Any:
        if doc["id"] == json.loads(lines[4])["id"]:
            raise RecursionError("maximum recursion depth exceeded")
        return real(doc, *args)

    pipeline.ingest.decoder.common = common  # type: ignore[method-assign]
    run_to_end(pipeline)
    assert pipeline.state.counter(tel.EVENTS_INVALID_TOTAL.name, ("unknown", "decode_failed")) == 1
    assert pipeline.state.counter_sum(tel.EVENTS_SCORED_TOTAL.name) == 9
    assert reasons(sink) == ["decode_failed"]


def test_pipeline_commits_only_positions_held_by_the_saved_state(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, kafka={"max_poll_records": 20}, batch={"max_events": 20})
    store_path = Path(settings.state_dir) / STATE_FILE
    saved: list[Any] = []
    source = RecordingSource(records(events(rows(60, seed=5))))
    source.snapshot = lambda: saved.append(json.loads(store_path.read_text())["positions"]) or 0.0  # type: ignore[func-returns-value]
    pipeline = make_pipeline(settings, source)
    run_to_end(pipeline)
    committed = [positions for positions, _ in source.commits]
    assert committed == [{("t", 0): 20}, {("t", 0): 40}, {("t", 0): 60}]
    # at every commit the state file on disk already held exactly the committed position
    assert saved == [[["t", 0, 20]], [["t", 0, 40]], [["t", 0, 60]]]


def test_pipeline_checkpoints_at_most_every_checkpoint_seconds(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, kafka={"max_poll_records": 10}, checkpoint_seconds=5.0)
    clock = FakeClock()
    source = RecordingSource(records(events(rows(50, seed=6))))
    pipeline = make_pipeline(settings, source, clock=clock)
    for _ in range(3):
        pipeline.step(0.0)
        clock.now += 1.0
    assert source.commits == []  # 3 s: scored, not yet checkpointed
    clock.now += 2.0
    pipeline.step(0.0)
    assert [positions for positions, _ in source.commits] == [{("t", 0): 40}]


def test_pipeline_stays_up_and_commits_nothing_while_the_state_dir_cannot_be_written(tmp_path: Path) -> None:
    blocker = tmp_path / "blocked"
    blocker.write_text("a file where the state directory should be")
    settings = make_settings(
        tmp_path, kafka={"max_poll_records": 10}, batch={"max_events": 10}, state_dir=str(blocker / "state")
    )
    source = RecordingSource(records(events(rows(30, seed=7))))
    pipeline = make_pipeline(settings, source)
    pipeline.step(0.0)
    ready, detail = pipeline.readiness()
    assert source.commits == []
    assert detail["degraded"] == ["state_dir"] and "cannot be written" in detail["degraded_detail"]["state_dir"]
    assert pipeline.state.gauge(tel.DEGRADED.name, ("state_dir",)) == 1.0
    assert ready is (detail["source_ready"] is True)  # degraded is not unready
    blocker.unlink()  # the operator fixes it
    pipeline.step(0.0)
    assert [positions for positions, _ in source.commits] == [{("t", 0): 20}]
    assert pipeline.readiness()[1]["degraded"] == []
    assert pipeline.state.gauge(tel.DEGRADED.name, ("state_dir",)) == 0.0


def test_state_store_save_leaves_no_temp_file_behind_when_it_fails(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / STATE_FILE).mkdir()  # os.replace onto a directory fails after the temp file is written
    assert store.save({"counters": []}) is False
    assert not (tmp_path / "state" / "state.tmp").exists()
    assert store.degraded is not None and store.failed_saves_total == 1


def test_state_store_load_survives_a_corrupt_file_that_cannot_be_moved_aside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = StateStore(tmp_path)
    store.path.write_text("{not json")

    def refuse(self: Path, target: Any) -> Path:
        raise PermissionError(13, "Read-only file system")

    monkeypatch.setattr(Path, "rename", refuse)
    assert store.load() == {}


def test_state_store_load_drops_counters_whose_labels_cannot_be_encoded(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    rows_ = [
        {"name": tel.EVENTS_CONSUMED_TOTAL.name, "labels": ["m"], "value": 3},
        {"name": tel.EVENTS_CONSUMED_TOTAL.name, "labels": ["\ud800"], "value": 1},
    ]
    store.path.write_text(json.dumps({"version": 1, "counters": rows_, "models": {}}))
    assert [r["labels"] for r in store.load()["counters"]] == [["m"]]


def crash_with_in_flight(pipeline: Pipeline) -> None:
    """Poll once and stop as a kill -9 would: the poll's records in flight, nothing applied or committed."""
    records_ = pipeline.source.poll(0.0, pipeline.settings.kafka.max_poll_records)
    pipeline._process(records_, pipeline.clock(), careful=False)


def test_pipeline_reprocesses_in_flight_records_one_at_a_time_after_an_unclean_exit(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, kafka={"max_poll_records": 10})
    lines = events(rows(25, seed=8))
    first = make_pipeline(settings, RecordingSource(records(lines)))
    crash_with_in_flight(first)
    marker = json.loads((Path(settings.state_dir) / INFLIGHT_FILE).read_text())
    assert marker == {"ranges": {"t/0": [0, 9]}, "careful": False}
    source = RecordingSource(records(lines))  # uncommitted: the broker delivers from offset 0 again
    again = make_pipeline(settings, source)
    assert again.recovery.careful_until == {("t", 0): 9}
    markers: list[dict[str, Any]] = []
    write = again.recovery.inflight.write
    again.recovery.inflight.write = lambda marker: (markers.append(marker), write(marker))[-1]  # type: ignore[method-assign]
    while again.step(0.0):
        pass
    again.close()
    # offsets 0..9 each processed alone under its own marker, then the rest in batches again
    assert [m["ranges"] for m in markers[:10]] == [{"t/0": [o, o]} for o in range(10)]
    assert all(m["careful"] for m in markers[:10]) and not any(m["careful"] for m in markers[10:])
    assert markers[10]["ranges"] == {"t/0": [10, 19]}
    assert source.commits[-1][0] == {("t", 0): 25} and again.recovery.careful_until == {}
    assert again.state.counter_sum(tel.EVENTS_SCORED_TOTAL.name) == 25
    assert not (Path(settings.state_dir) / INFLIGHT_FILE).exists()  # a clean stop removes the marker


def test_pipeline_dead_letters_a_record_in_flight_at_three_consecutive_crashes(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, kafka={"max_poll_records": 10, "dead_letter_topic": DLQ})
    lines = events(rows(10, seed=9))
    InFlight(Path(settings.state_dir)).path.parent.mkdir(parents=True)
    # the previous process died while processing offset 6 alone, as did the one before it, after an earlier crash
    # with 0..9 in flight
    marker = {"ranges": {"t/0": [6, 6]}, "careful": True, "careful_until": {"t/0": [9, 9]}, "strikes": {"t/0/6": 1}}
    (Path(settings.state_dir) / INFLIGHT_FILE).write_text(json.dumps(marker))
    sink = RecordingSink()
    source = RecordingSource(records(lines[6:], start=6))
    pipeline = make_pipeline(settings, source, sink=sink)
    run_to_end(pipeline)
    assert reasons(sink) == ["crashed_processing"]
    assert sink.on(DLQ)[0][0] == lines[6]
    assert pipeline.state.counter(tel.EVENTS_INVALID_TOTAL.name, ("unknown", "crashed_processing")) == 1
    assert pipeline.state.counter_sum(tel.EVENTS_SCORED_TOTAL.name) == 3  # offsets 7, 8, 9
    assert source.commits[-1][0] == {("t", 0): 10}


class ExplodingSource(RecordingSource):
    """Raises out of its second poll: an error the loop does not expect."""

    def poll(self, timeout_seconds: float, max_records: int) -> list[RawRecord]:
        if self.next >= 10:
            raise RuntimeError("boom")
        return super().poll(timeout_seconds, max_records)


def test_pipeline_run_commits_nothing_more_and_keeps_the_marker_when_the_loop_raises(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, kafka={"max_poll_records": 10}, checkpoint_seconds=60.0)
    source = ExplodingSource(records(events(rows(30, seed=10))))
    pipeline = make_pipeline(settings, source)
    with pytest.raises(RuntimeError, match="boom"):
        pipeline.run(threading.Event())
    assert source.commits == []  # nothing was checkpointed yet; the error did not commit the batch in hand
    assert not (Path(settings.state_dir) / STATE_FILE).exists()


def test_pipeline_counts_every_record_once_when_some_are_poison(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, kafka={"max_poll_records": 64, "dead_letter_topic": DLQ})
    sink = RecordingSink()
    good = events(rows(40, seed=11))
    lines = [*good[:20], b'{"id": "x", "ts": 1, "features": [Infinity]}', event(99, np.zeros(2)), *good[20:]]
    source = RecordingSource(records(lines))
    pipeline = make_pipeline(settings, source, sink=sink)
    poison_watch(pipeline, "e99")
    run_to_end(pipeline)
    state = pipeline.state
    consumed = state.counter_sum(tel.EVENTS_CONSUMED_TOTAL.name)
    scored = state.counter_sum(tel.EVENTS_SCORED_TOTAL.name)
    invalid = state.counter_sum(tel.EVENTS_INVALID_TOTAL.name)
    assert (consumed, scored, invalid) == (42, 40, 2)
    assert len(sink.on(DLQ)) == 2


def test_pipeline_skips_records_the_saved_state_holds_when_their_commit_did_not_land(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, kafka={"max_poll_records": 10})
    lines = events(rows(30, seed=12))
    first = make_pipeline(settings, RecordingSource(records(lines[:20])))
    while first.step(0.0):
        pass
    first.close()  # state saved with position 20 ...
    path = Path(settings.state_dir) / STATE_FILE
    saved = json.loads(path.read_text())
    assert saved["positions"] == [["t", 0, 20]]
    saved["committed"] = []  # as a kill between that save and its commit leaves it: no commit had landed before
    path.write_text(json.dumps(saved))
    # ... but the commit was lost (a kill between the save and the commit): the broker delivers from 0 again
    source = RecordingSource(records(lines))
    again = make_pipeline(settings, source)
    while again.step(0.0):
        pass
    again.close()
    state = again.state
    assert state.counter_sum(tel.EVENTS_CONSUMED_TOTAL.name) == 30  # 20 restored + 10 new, none twice
    assert state.counter_sum(tel.EVENTS_SCORED_TOTAL.name) == 30
    assert source.commits[-1][0] == {("t", 0): 30}
    assert again.saved.held == {}


def test_pipeline_keeps_a_held_position_in_the_state_until_its_partition_is_read_again(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, kafka={"max_poll_records": 10})
    first = make_pipeline(settings, RecordingSource(records(events(rows(10, seed=13)))))
    while first.step(0.0):
        pass
    first.close()
    idle = make_pipeline(settings, RecordingSource([]))  # restarted; nothing delivered yet
    idle.step(0.0)
    idle.close()
    assert json.loads((Path(settings.state_dir) / STATE_FILE).read_text())["positions"] == [["t", 0, 10]]


def test_pipeline_calibrates_its_detectors_before_any_record_is_in_flight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A calibration takes about a second: spent while records are in flight, it widens the window in which a kill
    catches them (and a record processed alone after a crash then looks like poison). It is spent at start."""
    monkeypatch.setattr(calibrate, "_CACHE", {})  # nothing calibrated by an earlier test
    settings = make_settings(tmp_path, kafka={"max_poll_records": 10})
    marker = Path(settings.state_dir) / INFLIGHT_FILE
    in_flight_at_calibration: list[bool] = []
    real = calibrate.cached

    def cached(key: tuple[object, ...], compute: Any) -> Any:
        def recorded() -> Any:
            in_flight_at_calibration.append(marker.exists())
            return compute()

        return real(key, recorded)

    monkeypatch.setattr(calibrate, "cached", cached)
    pipeline = make_pipeline(settings, RecordingSource(records(events(rows(40, seed=12)))))
    at_start = len(in_flight_at_calibration)
    run_to_end(pipeline)
    assert pipeline.state.counter_sum(tel.EVENTS_SCORED_TOTAL.name) == 40
    assert at_start > 0 and in_flight_at_calibration == [False] * at_start  # all before the first poll, none after
