"""Time that cannot be poisoned: an event stamped ahead of time is placed, counted, and stalls no alert.

``WatermarkClock.place`` bounds a batch's timestamps to ``max_skew_seconds`` ahead of where time is (``run``: the
wall clock; a replay: the watermark or the batch's median); ``ModelWatch`` windows the placed times and counts
``harmonic_events_mistimed_total{reason}``; ``Service`` gives each model its own clock. The replay command's
end-to-end case is in tests/unit/test_replay_command.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from monitor import telemetry as tel
from monitor.clock import WatermarkClock
from monitor.errors import ConfigError
from monitor.runtime.models import load_model_runtime
from monitor.runtime.service import Service
from monitor.runtime.watch import SHADOW_ALERT
from monitor.source.replay import ReplaySource
from tests.unit.test_pipeline import FakeClock, events, make_settings, rows
from tests.unit.test_watch import MODEL as WATCHED
from tests.unit.test_watch import T0, Stream, Wall, fired, make_watch

THREE_HOURS = 3 * 3600.0


def test_place_in_run_puts_a_future_event_at_arrival_and_counts_late_ones() -> None:
    wall = Wall(T0)
    clock = WatermarkClock(60.0, wall=wall, max_skew_seconds=300.0)
    clock.advance(T0 - 1.0)
    placed = clock.place(np.array([T0 - 0.5, T0 + 299.0, T0 + THREE_HOURS, T0 - 61.5, np.nan]))
    assert placed.seconds[:4].tolist() == [T0 - 0.5, T0 + 299.0, T0, T0 - 61.5]
    assert np.isnan(placed.seconds[4])
    assert (placed.future, placed.late) == (1, 1)
    # a backlog read after a restart is behind the wall: nothing in it is ahead of time
    assert clock.place(np.array([T0 - 3600.0, T0 - 3000.0])).future == 0


def test_place_without_a_bound_or_a_batch_changes_nothing() -> None:
    ts = np.array([T0, T0 + 1e9])
    assert WatermarkClock().place(ts).seconds is ts
    empty = np.array([], dtype=np.float64)
    assert WatermarkClock(max_skew_seconds=1.0).place(empty) == (empty, 0, 0)


def test_the_skew_bound_must_be_positive_and_finite() -> None:
    with pytest.raises(ConfigError, match=r"max_skew_seconds must be a finite number > 0.*alerts.max_event_skew"):
        WatermarkClock(max_skew_seconds=0.0)


@pytest.mark.parametrize("skew", [300.0, None], ids=["bounded", "unbounded"])
def test_one_event_three_hours_ahead_before_a_shift_does_not_stop_the_alert_in_run(skew: float | None) -> None:
    wall = Wall(T0)
    watch, state = make_watch(for_seconds=5.0, clock=WatermarkClock(60.0, wall=wall, max_skew_seconds=skew))
    stream = Stream(seed=21)
    for i in range(30):  # live: events arrive half a second after their timestamps
        evs, x, result, shadow = stream.batch(shadow_rate=0.5 if i >= 5 else 0.0)
        if i == 2:  # a producer host whose clock runs 3 h ahead, before the disagreement starts
            evs[0].timestamp_seconds += THREE_HOURS
        watch.update(evs, x, result, shadow)
        wall.now = stream.now + 0.5
        watch.tick()
    future = state.counter(tel.EVENTS_MISTIMED_TOTAL.name, (WATCHED, "future_timestamp"))
    if skew is None:  # the old behaviour: the clock jumped 3 h, the windows hold nothing current, nothing fires
        assert future == 0 and fired(watch, SHADOW_ALERT) == []
    else:
        assert future == 1
        assert fired(watch, SHADOW_ALERT)
        assert watch.clock.watermark <= wall.now + 300.0


def test_each_model_has_its_own_clock_in_run(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    second = settings.models[0].model_copy(update={"name": "second"})
    settings = settings.model_copy(update={"models": [settings.models[0], second]})
    runtimes = [load_model_runtime(m) for m in settings.models]
    source = ReplaySource(events(rows(4, seed=1)))
    with Service(settings, source, runtimes, serve_metrics=False, clock=FakeClock()) as svc:
        clocks = [rt.watch.clock for rt in svc.pipeline.runtimes.values() if rt.watch is not None]
        assert len(clocks) == 2 and clocks[0] is not clocks[1]
        assert all(c.max_skew_seconds == 300.0 and c.allowed_lag_seconds == 60.0 for c in clocks)
