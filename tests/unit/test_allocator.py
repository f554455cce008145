"""The memory settings applied at start (monitor/allocator.py)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from monitor.allocator import GC_THRESHOLDS, freeze_startup_objects, tune_gc


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
