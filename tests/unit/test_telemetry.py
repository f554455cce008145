"""The telemetry package declares every series once and is the only place that names one; its handles type the labels."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from monitor import telemetry as tel
from monitor.exporters.prometheus import MetricsState

MONITOR = Path(__file__).resolve().parents[2] / "monitor"
NAMES = {m.name for m in tel.METRICS}


def test_no_module_but_telemetry_spells_a_series_name() -> None:
    found: list[str] = []
    for path in sorted(MONITOR.rglob("*.py")):
        if path.parent == MONITOR / "telemetry":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES:
                found.append(f"{path.relative_to(MONITOR.parent)}:{node.lineno}: {node.value}")
    assert not found, "series named outside monitor/telemetry/ (use its handle):\n" + "\n".join(found)


def test_every_handle_is_declared_once_and_listed() -> None:
    handles = [v for v in vars(tel).values() if isinstance(v, tel.Counter | tel.Gauge | tel.Histogram)]
    assert len(handles) == len(tel.METRICS) == len(NAMES)
    assert {h.spec for h in handles} == set(tel.METRICS)
    for h in handles:
        assert h.name.startswith("harmonic_") and h.spec.type == h.kind
        assert (h.spec.type == "histogram") == bool(h.spec.buckets), h.name
    with pytest.raises(ValueError, match="declared twice"):
        tel.Counter(tel.EVENTS_CONSUMED_TOTAL.name, "again", tel.Model)


def test_handles_write_and_read_the_store_with_their_label_tuples() -> None:
    state = MetricsState()
    tel.EVENTS_INVALID_TOTAL.inc(state, tel.ModelReason("m", "not_json"))
    tel.EVENTS_INVALID_TOTAL.inc(state, tel.ModelReason(model="m", reason="not_json"), 2.0)
    assert tel.EVENTS_INVALID_TOTAL.value(state, tel.ModelReason("m", "not_json")) == 3.0
    assert state.counter(tel.EVENTS_INVALID_TOTAL.name, ("m", "not_json")) == 3.0  # a NamedTuple is its tuple
    assert tel.EVENTS_INVALID_TOTAL.total(state) == 3.0
    tel.READY.set(state, tel.NoLabels(), 1.0)
    assert tel.READY.get(state, tel.NoLabels()) == 1.0
    tel.FEATURE_DRIFT_STATISTIC.set(state, tel.ModelSegmentFeature("m", "eu", "age"), 0.3)
    tel.FEATURE_DRIFT_STATISTIC.clear(state, lambda lab: lab[:2] == ("m", "eu"))
    assert tel.FEATURE_DRIFT_STATISTIC.get(state, tel.ModelSegmentFeature("m", "eu", "age")) is None
    tel.GAMMA.observe(state, tel.ModelSegment("m", "eu"), [0.0, 0.5])
    assert tel.EVENTS_INVALID_TOTAL.spec.labels == tel.ModelReason._fields == ("model", "reason")


def test_a_missing_label_fails_at_the_call() -> None:
    with pytest.raises(TypeError):
        tel.ModelReason("m")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="takes labels"):  # a plain tuple of the wrong length, past mypy
        MetricsState().inc(tel.EVENTS_INVALID_TOTAL.name, ("m",))
