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
from pathlib import Path

import pytest

from monitor.runtime.state import STATE_FILE, STATE_VERSION
from tests.unit.test_pipeline import RecordingSource, events, make_pipeline, make_settings, rows
from tests.unit.test_pipeline_reliability import records


def saved_state(settings: object, *, position: int, committed: int | None) -> None:
    path = Path(settings.state_dir) / STATE_FILE  # type: ignore[attr-defined]
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {"version": STATE_VERSION, "counters": [], "models": {}, "positions": [["t", 0, position]]}
    if committed is not None:
        state["committed"] = [["t", 0, committed]]
    path.write_text(json.dumps(state))


def test_a_redelivery_from_the_last_commit_is_skipped_up_to_the_saved_position(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, kafka={"max_poll_records": 10})
    saved_state(settings, position=20, committed=10)  # killed between saving 20 and committing it
    lines = events(rows(30, seed=3))
    source = RecordingSource(records(lines[10:], start=10))  # the group's offset: the last commit that landed
    pipeline = make_pipeline(settings, source)
    while pipeline.step(0.0):
        pass
    pipeline.close()
    assert pipeline.state.counter_sum("harmonic_events_consumed_total") == 10  # 20..29 only
    assert pipeline.state.counter("harmonic_offsets_went_back_total", ()) == 0


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
    assert pipeline.state.counter_sum("harmonic_events_consumed_total") == 30 - first  # every new event counted
    assert pipeline.state.counter("harmonic_offsets_went_back_total", ()) == 1
    (line,) = [r for r in caplog.records if r.getMessage().startswith("offsets went back")]
    assert (line.partition, line.first_offset, line.last_committed) == ("t/0", first, 20)  # type: ignore[attr-defined]
    assert source.commits[-1][0] == {("t", 0): 30}


def test_the_state_records_the_position_last_committed(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, kafka={"max_poll_records": 10})
    pipeline = make_pipeline(settings, RecordingSource(records(events(rows(10, seed=5)))))
    while pipeline.step(0.0):
        pass
    pipeline.close()
    saved = json.loads((Path(settings.state_dir) / STATE_FILE).read_text())
    assert saved["committed"] == [["t", 0, 10]] and saved["positions"] == [["t", 0, 10]]


def test_a_state_without_committed_positions_keeps_the_saved_positions(tmp_path: Path) -> None:
    """A state written before the position last committed was recorded: the saved positions win, as they did."""
    settings = make_settings(tmp_path, kafka={"max_poll_records": 10})
    saved_state(settings, position=20, committed=None)
    source = RecordingSource(records(events(rows(30, seed=6))))
    pipeline = make_pipeline(settings, source)
    while pipeline.step(0.0):
        pass
    pipeline.close()
    assert pipeline.state.counter_sum("harmonic_events_consumed_total") == 10
    assert pipeline.state.counter("harmonic_offsets_went_back_total", ()) == 0
