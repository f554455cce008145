"""Time that cannot be poisoned: an event stamped ahead of time is placed, counted, and stalls no alert.

``WatermarkClock.place`` bounds a batch's timestamps to ``max_skew_seconds`` ahead of where time is (``run``: the
wall clock alone; a replay: the watermark or the batch's median); in ``run`` the watermark follows a low quantile of
recent events, so creeping, fast and jittered producer clocks neither drag it nor empty the windows. ``ModelWatch``
windows the placed times and counts ``harmonic_events_mistimed_total{reason}``; ``Service`` gives each model its own
clock. The replay command's end-to-end case is in tests/unit/test_replay_command.py; a creeping clock against a real
broker and webhook in tests/integration/test_run_clock.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from monitor import telemetry as tel
from monitor.clock import WatermarkClock
from monitor.errors import ConfigError
from monitor.rolling.windows import SignalBatch, TimeWindow
from monitor.runtime.models import load_model_runtime
from monitor.runtime.service import Service
from monitor.runtime.watch import SHADOW_ALERT
from monitor.source.replay import ReplaySource
from tests.unit.test_pipeline import FakeClock, events, make_settings, rows
from tests.unit.test_watch import MODEL as WATCHED
from tests.unit.test_watch import T0, Stream, Wall, fired, make_watch

THREE_HOURS = 3 * 3600.0


SKEW = 300.0
LAG = 60.0
#: honest traffic in the simulations: events per second, and the wall seconds between two batches
RATE = 200.0
STEP = 0.5


def test_place_in_run_bounds_from_the_wall_and_places_what_is_ahead_of_the_watermark() -> None:
    wall = Wall(T0)
    clock = WatermarkClock(LAG, wall=wall, max_skew_seconds=SKEW)
    honest = T0 - np.linspace(0.1, 1.0, 30)
    placed = clock.place(np.r_[honest, T0 + 299.0, T0 + THREE_HOURS, T0 - 61.5, np.nan])
    assert clock.watermark == pytest.approx(T0 - 1.0)  # the low quantile of the batch, not its newest event
    assert (placed.future, placed.late) == (1, 1)
    at = clock.watermark
    assert placed.seconds[:32].tolist() == [min(t, at) for t in honest] + [at, at]
    assert placed.seconds[32] == T0 - 61.5 and np.isnan(placed.seconds[33])
    # a backlog read after a restart is behind the wall: nothing in it is ahead of time, and it moves the watermark
    wall.now += 1.0
    assert clock.place(np.array([T0 - 3600.0, T0 - 3000.0])).future == 0
    assert clock.watermark == pytest.approx(T0 - 1.0)  # never back
    assert clock.advance(T0 + THREE_HOURS).watermark == wall.now + SKEW  # nor past wall + skew


@dataclass
class Simulated:
    """What a simulated live stream left: the 60 s window's events at the end, the mistimed counts, and how far the
    watermark ran ahead of the wall clock at most."""

    window_events: int
    future: int
    late: int
    most_ahead: float


Stamps = Callable[[np.random.Generator, float, int], NDArray[np.float64]]


def honest(rng: np.random.Generator, now: float, n: int = int(RATE * STEP)) -> NDArray[np.float64]:
    """``n`` events stamped by clocks that agree with the sidecar's, arriving up to half a second later."""
    return np.asarray(now - rng.uniform(0.0, 0.5, n), dtype=np.float64)


def simulate(stamps: Stamps, seconds: float, seed: int = 0) -> Simulated:
    """Feed batches of ``stamps(rng, wall, i)`` every STEP seconds of wall time through the clock into a 60 s window,
    as ``ModelWatch`` does (place, window the placed times, advance, snapshot at ``min(now, watermark)``)."""
    wall = Wall(T0)
    clock = WatermarkClock(LAG, wall=wall, max_skew_seconds=SKEW)
    window = TimeWindow(60.0, n_features=0)
    rng = np.random.default_rng(seed)
    future = late = 0
    most_ahead = -np.inf
    for i in range(int(seconds / STEP)):
        wall.now = T0 + i * STEP
        placed = clock.place(stamps(rng, wall.now, i))
        window.update(SignalBatch.of(features=np.zeros((placed.seconds.size, 0)), timestamps_seconds=placed.seconds))
        clock.advance(float(placed.seconds.max()))
        future, late = future + placed.future, late + placed.late
        most_ahead = max(most_ahead, clock.watermark - wall.now)
    events = window.snapshot(min(clock.now(), clock.watermark)).events
    return Simulated(events, future, late, most_ahead)


def test_a_creeping_producer_clock_cannot_drag_the_clock() -> None:
    # beside honest traffic, one event every 0.5 s stamped now + 290 s · k: each inside the skew of the one before
    def stamps(rng: np.random.Generator, now: float, i: int) -> NDArray[np.float64]:
        return np.append(honest(rng, now), now + 290.0 * (i + 1))

    run = simulate(stamps, seconds=90.0)
    assert run.most_ahead <= 0.0  # the watermark stays with the honest events
    assert run.future == 180 - 1  # every creeping event but the first (290 s) is beyond wall + 300 s
    assert run.late == 0
    assert run.window_events == pytest.approx(RATE * 60.0, rel=0.03)  # the 60 s window holds the last minute


def test_a_producer_clock_running_20_times_fast_is_flagged() -> None:
    fast_stamp = T0 + np.arange(180) * STEP * 20.0  # 2 of its events per batch (4/s) beside ~196/s honest ones

    def stamps(rng: np.random.Generator, now: float, i: int) -> NDArray[np.float64]:
        return np.append(honest(rng, now, 98), [fast_stamp[i], fast_stamp[i] + 0.1])

    run = simulate(stamps, seconds=90.0)
    walls = T0 + np.arange(180) * STEP
    expected = int(np.count_nonzero(fast_stamp > walls + SKEW) + np.count_nonzero(fast_stamp + 0.1 > walls + SKEW))
    assert run.future == expected and run.future > 250  # flagged once its clock is 300 s ahead (after ~16 s)
    assert run.most_ahead <= 0.0 and run.late == 0
    assert run.window_events == pytest.approx(RATE * 60.0, rel=0.03)


def test_the_watermark_never_passes_wall_plus_skew_even_when_every_clock_runs_fast() -> None:
    run = simulate(lambda rng, now, i: np.full(10, T0 + (now - T0) * 20.0), seconds=60.0)
    assert 0.0 < run.most_ahead <= SKEW
    assert run.future > 0


def test_jittered_producer_clocks_leave_the_windows_full_and_count_nothing_late() -> None:
    # many producers whose clocks scatter ±4 min around the wall clock: the 60 s window holds ~60 s of events
    def stamps(rng: np.random.Generator, now: float, i: int) -> NDArray[np.float64]:
        return np.asarray(now + rng.uniform(-240.0, 240.0, int(RATE * STEP)), dtype=np.float64)

    run = simulate(stamps, seconds=600.0)
    assert run.late == 0 and run.future == 0
    assert run.window_events == pytest.approx(RATE * 60.0, rel=0.1)


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
