"""The memory settings applied at start (monitor/allocator.py)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from monitor.allocator import GC_THRESHOLDS, TimedCollector, freeze_startup_objects, tune_gc


@pytest.fixture(autouse=True)
def _restore_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.set_threshold(*thresholds)
    gc.unfreeze()


def test_tune_gc_raises_the_young_generation_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HARMONIC_GC_TUNING", raising=False)
    gc.set_threshold(700, 10, 10)
    assert tune_gc()
    assert gc.get_threshold() == GC_THRESHOLDS
    assert GC_THRESHOLDS[0] > 700


@pytest.mark.parametrize("value", ["0", "off", "false"])
def test_gc_tuning_can_be_turned_off(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("HARMONIC_GC_TUNING", value)
    gc.set_threshold(700, 10, 10)
    assert not tune_gc()
    freeze_startup_objects()
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_freeze_startup_objects_exempts_what_exists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HARMONIC_GC_TUNING", raising=False)
    gc.unfreeze()
    kept = [[i] for i in range(1000)]  # containers alive at "start-up"
    freeze_startup_objects()
    assert gc.get_freeze_count() >= len(kept)


class _Node:
    def __init__(self) -> None:
        self.other: _Node = self


def test_timed_collector_frees_a_cycle_once_its_second_is_up() -> None:
    gc.set_threshold(10**9, 10, 10)  # no collection by allocation count during the test
    now = [100.0]
    collector = TimedCollector(clock=lambda: now[0], enabled=True)
    assert collector.maybe_collect() is None  # starts the clock
    ref = weakref.ref(_Node())  # unreachable at once, but a cycle: only the collector frees it
    assert ref() is not None
    now[0] = 100.9
    assert collector.maybe_collect() is None and ref() is not None
    now[0] = 101.0
    assert collector.maybe_collect() == 0
    assert ref() is None


def test_timed_collector_collects_older_generations_less_often() -> None:
    now = [0.0]
    collector = TimedCollector(clock=lambda: now[0], enabled=True)
    collector.maybe_collect()
    generations = []
    for second in range(1, 121):
        now[0] = float(second)
        generations.append(collector.maybe_collect())
    assert [i + 1 for i, g in enumerate(generations) if g == 2] == [60, 120]
    assert [i + 1 for i, g in enumerate(generations) if g == 1] == [10, 20, 30, 40, 50, 70, 80, 90, 100, 110]
    assert generations.count(0) == 120 - 12


def test_timed_collector_does_nothing_with_cpythons_gc_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARMONIC_GC_TUNING", "0")
    now = [0.0]
    collector = TimedCollector(clock=lambda: now[0])
    assert not collector.enabled
    for second in range(5):
        now[0] = float(second)
        assert collector.maybe_collect() is None
