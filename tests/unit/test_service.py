"""``Service.run``'s tick: the sidecar's own process collects cyclic garbage by time (monitor/allocator.py)."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor.allocator import TimedCollector
from monitor.runtime.models import load_model_runtime
from monitor.runtime.service import Service
from monitor.source.replay import ReplaySource
from tests.unit.test_pipeline import FakeClock, events, make_settings, rows


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
    assert svc.state.counter_sum("harmonic_events_consumed_total") == 64
