"""Partitions given up while the sink cannot deliver (monitor/runtime/pipeline.py): a broker away fails the flush of
the rebalance, so nothing is committed past the last delivered record, yet what this process processed (its dead
letters and scores still held in the sink) is skipped when the broker hands the partitions back: scored once,
output once. The state keeps the delivered position: after a restart those records are processed again."""

from __future__ import annotations

import json
from pathlib import Path

from monitor import telemetry as tel
from monitor.runtime.state import STATE_FILE
from tests.unit.test_pipeline import RecordingSink, RecordingSource, events, make_pipeline, make_settings, rows
from tests.unit.test_pipeline_reliability import records

SCORES = "scores"


class AwaySink(RecordingSink):
    """Keeps every record; ``flush`` is False (nothing acknowledged) while ``away``."""

    def __init__(self) -> None:
        super().__init__()
        self.away = False

    def flush(self, timeout_seconds: float) -> bool:
        super().flush(timeout_seconds)
        return not self.away


def test_records_processed_before_a_lost_partition_are_not_processed_again(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, kafka={"scores_topic": SCORES, "max_poll_records": 10})
    lines = events(rows(30, seed=21))
    source = RecordingSource(records(lines))
    sink = AwaySink()
    pipeline = make_pipeline(settings, source, sink=sink)
    pipeline.step(0.0)
    pipeline.flush()  # 0..9 scored and delivered
    sink.away = True
    pipeline.step(0.0)  # 10..19 scored; their scores held by the sink
    pipeline.before_revoke([("t", 0)])  # the session expired while the broker was away: the partition is lost
    assert source.commits[-1][0] == {("t", 0): 10}  # nothing past what was delivered
    saved = json.loads((Path(settings.state_dir) / STATE_FILE).read_text())
    assert saved["positions"] == [["t", 0, 10]]  # a restart processes 10..19 again (their output died with it)
    sink.away = False
    source.next = 10  # handed back from the last commit
    while pipeline.step(0.0):
        pass
    pipeline.close()
    assert pipeline.state.counter_sum(tel.EVENTS_CONSUMED_TOTAL.name) == 30  # 10..19 once
    scored = [json.loads(value)["id"] for value, _, _ in sink.on(SCORES)]
    assert sorted(scored) == sorted(f"e{i}" for i in range(30))  # one score each
    assert source.commits[-1][0] == {("t", 0): 30}
