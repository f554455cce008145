"""``Service.run``'s tick: the sidecar's own process collects cyclic garbage by time (monitor/allocator.py), and
alerts move on with the clock when no event arrives (monitor/runtime/watch.py, monitor/clock.py)."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor import telemetry as tel
from monitor.allocator import TimedCollector
from monitor.runtime.models import load_model_runtime
from monitor.runtime.service import Service
from monitor.runtime.watch import SHADOW_ALERT
from monitor.source.replay import ReplaySource
from tests.unit.test_pipeline import MODEL, FakeClock, event, events, make_settings, model_class, rows


class Cycle:
    """An object in a reference cycle with itself: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def collector_only() -> Iterator[None]:
    """Thresholds so high that CPython's automatic collection never runs during the test."""
    saved = gc.get_threshold()
    gc.collect()
    gc.set_threshold(10**9, 10**9, 10**9)
    try:
        yield
    finally:
        gc.set_threshold(*saved)


def test_service_run_collects_cycles_by_time_in_its_tick(tmp_path: Path, collector_only: None) -> None:
    settings = make_settings(tmp_path, kafka={"max_poll_records": 16})
    runtimes = [load_model_runtime(m) for m in settings.models]
    svc = Service(settings, ReplaySource(events(rows(64, seed=3))), runtimes, serve_metrics=False, clock=FakeClock())
    seconds = iter(range(10**6))
    svc.collector = TimedCollector(clock=lambda: float(next(seconds)), enabled=True)  # one second per reading
    garbage = Cycle()
    freed = weakref.ref(garbage)
    del garbage
    assert freed() is not None  # nothing has collected it yet

    with svc:
        svc.run(threading.Event(), until_exhausted=True)

    assert svc.collector.collections >= 1
    assert freed() is None
    assert svc.state.counter_sum(tel.EVENTS_CONSUMED_TOTAL.name) == 64


def test_service_run_resolves_an_alert_when_the_stream_goes_quiet(tmp_path: Path) -> None:
    settings = make_settings(
        tmp_path,
        alerts={"for_seconds": 0, "resolve_after_seconds": 30, "allowed_lag_seconds": 60},
        drift={"every": 50},
        windows={"time_windows_seconds": [60]},
    )
    x = rows(300, seed=4)
    wrong = [event(i, x[i], label=1 - int(c)) for i, c in enumerate(model_class(x))]  # 3 s of live disagreement
    clock = FakeClock()
    start = clock.now
    runtimes = [load_model_runtime(m) for m in settings.models]
    svc = Service(settings, ReplaySource(wrong), runtimes, serve_metrics=False, clock=clock)
    stop = threading.Event()
    resolved_after: list[float] = []

    def one_second_per_turn() -> None:  # then nothing more arrives: only the clock moves
        watch = svc.pipeline.runtimes[MODEL].watch
        assert watch is not None
        if not resolved_after and [ev for ev in watch.fired if ev.alert.state.value == "resolved"]:
            resolved_after.append(clock.now - start)
        clock.now += 1.0
        if clock.now - start > 400:
            stop.set()

    with svc:
        svc.run(stop, tick=one_second_per_turn)

    watch = svc.pipeline.runtimes[MODEL].watch
    assert watch is not None
    assert [(ev.alert.rule.name, ev.alert.state.value) for ev in watch.fired] == [
        (SHADOW_ALERT, "firing"),
        (SHADOW_ALERT, "resolved"),
    ]
    # the last event is ~3 s in; the clock trails the wall by 60 s once events stop, the segment is quiet after its
    # 60 s window, then 30 s of hysteresis
    assert 150.0 <= resolved_after[0] <= 160.0
    assert svc.state.gauge(tel.ALERTS_FIRING.name, (MODEL, "other", SHADOW_ALERT)) == 0.0


def test_service_publishes_the_metrics_snapshot_to_its_server_process_on_its_tick(tmp_path: Path) -> None:
    import http.client

    settings = make_settings(tmp_path, metrics={"host": "127.0.0.1", "port": 0, "min_render_interval_seconds": 1e-9})
    runtimes = [load_model_runtime(m) for m in settings.models]
    svc = Service(settings, ReplaySource(events(rows(64, seed=3))), runtimes, clock=FakeClock())
    assert svc.server is not None
    with svc:
        before = svc.server._seq  # the snapshot published at start
        svc.run(threading.Event(), until_exhausted=True)
        ticked = svc.server._seq - before
        svc.server.publish(force=True)  # the last tick may have fallen inside the interval
        conn = http.client.HTTPConnection("127.0.0.1", svc.server.port, timeout=30)
        try:
            for _ in range(600):  # the server process rereads the snapshot within 0.05 s
                conn.request("GET", "/metrics")
                body = conn.getresponse().read()
                if b'harmonic_events_consumed_total{model="clf"} 64.0' in body:
                    break
        finally:
            conn.close()
    assert ticked >= 1 and svc.server.proc is not None and svc.server.proc.returncode is not None
    assert b'harmonic_events_consumed_total{model="clf"} 64.0' in body
