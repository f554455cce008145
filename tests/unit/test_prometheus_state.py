"""Stage 6: MetricsState (the hot path's values) and MetricsServer (the pull endpoint) in
monitor/exporters/prometheus.py — exposition read back over HTTP from a real server on a free port."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from monitor import telemetry as tel
from monitor.config import MetricsSettings
from monitor.exporters import prometheus
from monitor.exporters.http import MetricsServer, Routes
from monitor.exporters.prometheus import MetricsState, StateCollector
from monitor.telemetry import GAMMA_BUCKETS, METRICS, MetricSpec


def get(port: int, path: str) -> tuple[int, str, str]:
    """(status, content type, body) of a GET, error statuses included."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read().decode()
    except urllib.error.HTTPError as exc:
        body = exc.read().decode()
        content_type = exc.headers["Content-Type"]
        exc.close()
        return exc.code, content_type, body


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@pytest.fixture
def state() -> MetricsState:
    return MetricsState()


class FakeReadiness:
    """The pipeline's readiness check, flipped by the test."""

    def __init__(self) -> None:
        self.ok = False

    def __call__(self) -> tuple[bool, dict[str, Any]]:
        return self.ok, {"source_ready": self.ok, "models": {"credit": {"loaded": True}}}


@pytest.fixture
def readiness() -> FakeReadiness:
    return FakeReadiness()


@pytest.fixture
def server(state: MetricsState, readiness: FakeReadiness) -> Iterator[MetricsServer]:
    srv = MetricsServer(
        state,
        settings=MetricsSettings(host="127.0.0.1", port=0),
        routes=Routes(ready=readiness, probes=lambda: {"budget_share": 0.1, "models": {"credit": {"runs": 2}}}),
        registry=CollectorRegistry(auto_describe=False),
    )
    with srv:
        yield srv


# ---------------------------------------------------------------------- MetricsState


def test_prometheus_state_counters_add_and_sum_over_labels(state: MetricsState) -> None:
    state.inc(tel.EVENTS_CONSUMED_TOTAL.name, ("credit",))
    state.inc(tel.EVENTS_CONSUMED_TOTAL.name, ("credit",), 4.0)
    state.inc(tel.EVENTS_CONSUMED_TOTAL.name, ("fraud",), 2.0)
    assert state.counter(tel.EVENTS_CONSUMED_TOTAL.name, ("credit",)) == 5.0
    assert state.counter(tel.EVENTS_CONSUMED_TOTAL.name, ("other",)) == 0.0
    assert state.counter_sum(tel.EVENTS_CONSUMED_TOTAL.name) == 7.0
    state.set_counter(tel.ALERT_DELIVERIES_FAILED_TOTAL.name, ("webhook",), 3.0)
    assert state.counter(tel.ALERT_DELIVERIES_FAILED_TOTAL.name, ("webhook",)) == 3.0


def test_prometheus_state_gauges_set_read_and_clear(state: MetricsState) -> None:
    state.set(tel.DRIFT_VERDICT.name, ("credit", "eu", "stable"), 1.0)
    state.set(tel.DRIFT_VERDICT.name, ("credit", "us", "stable"), 1.0)
    assert state.gauge(tel.DRIFT_VERDICT.name, ("credit", "eu", "stable")) == 1.0
    state.clear_gauges(tel.DRIFT_VERDICT.name, lambda labels: labels[1] == "eu")
    assert state.gauge(tel.DRIFT_VERDICT.name, ("credit", "eu", "stable")) is None
    assert state.gauge(tel.DRIFT_VERDICT.name, ("credit", "us", "stable")) == 1.0


def test_prometheus_state_rejects_undeclared_metrics_and_wrong_labels(state: MetricsState) -> None:
    with pytest.raises(KeyError, match="'harmonic_nope_total' is not declared as a counter"):
        state.inc("harmonic_nope_total", ("credit",))
    with pytest.raises(KeyError, match="is not declared as a gauge"):
        state.set(tel.EVENTS_CONSUMED_TOTAL.name, ("credit",), 1.0)  # a counter, not a gauge
    with pytest.raises(ValueError, match=r"takes labels \('model',\); got \('credit', 'eu'\)"):
        state.inc(tel.EVENTS_CONSUMED_TOTAL.name, ("credit", "eu"))


def test_prometheus_state_counters_dump_and_load(state: MetricsState) -> None:
    state.inc(tel.EVENTS_SCORED_TOTAL.name, ("credit", "3", "eu"), 10.0)
    state.set(tel.WINDOW_EVENTS.name, ("credit", "eu", "60s"), 5.0)
    rows = state.dump_counters()
    assert rows == [{"name": tel.EVENTS_SCORED_TOTAL.name, "labels": ["credit", "3", "eu"], "value": 10.0}]
    fresh = MetricsState()
    fresh.load_counters(
        [*rows, {"name": tel.WINDOW_EVENTS.name, "labels": ["x"], "value": 1.0}, {"name": "gone", "labels": []}]
    )
    assert fresh.counter(tel.EVENTS_SCORED_TOTAL.name, ("credit", "3", "eu")) == 10.0
    assert fresh.dump_counters() == rows  # gauges and unknown names are not restored as counters


def test_prometheus_state_keeps_the_most_recent_versions_and_removes_the_series_of_the_evicted() -> None:
    """10,000 distinct model_version values made 9,626 series; now at most max_versions per model."""
    state = MetricsState(max_versions=8)
    for i in range(10_000):
        state.inc(tel.EVENTS_SCORED_TOTAL.name, ("credit", f"v{i}", "eu"))
        state.inc(tel.EVENTS_SCORED_TOTAL.name, ("credit", "stable", "eu"))  # seen all along: never evicted
    state.inc(tel.EVENTS_SCORED_TOTAL.name, ("fraud", "v0", "eu"))  # another model keeps its own versions
    versions = {
        lab[1] for (name, lab) in state._counters if name == tel.EVENTS_SCORED_TOTAL.name and lab[0] == "credit"
    }
    assert versions == {"stable", *(f"v{i}" for i in range(10_000 - 7, 10_000))}
    assert state.counter(tel.EVENTS_SCORED_TOTAL.name, ("fraud", "v0", "eu")) == 1.0
    assert state.counter(tel.MODEL_VERSIONS_EVICTED_TOTAL.name, ("credit",)) == 10_000 + 1 - 8
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StateCollector(state))
    text = generate_latest(registry).decode()
    assert text.count("harmonic_events_scored_total{") == 8 + 1


def test_prometheus_state_eviction_removes_counters_gauges_and_histograms_of_that_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found by the label's position in each spec: any metric declared with model and model_version is bounded."""
    specs = {
        "harmonic_test_version_gauge": MetricSpec("harmonic_test_version_gauge", "gauge", "t", ("model_version", "model")),
        "harmonic_test_version_hist": MetricSpec("harmonic_test_version_hist", "histogram", "t", ("model", "model_version"), (1.0,)),
    }  # fmt: skip
    monkeypatch.setattr(prometheus, "SPECS", {**prometheus.SPECS, **specs})
    monkeypatch.setattr(prometheus, "_LABEL_AT", {**prometheus._LABEL_AT, **{n: {"model": 1, "model_version": 0} if "gauge" in n else {"model": 0, "model_version": 1} for n in specs}})  # fmt: skip
    monkeypatch.setattr(prometheus, "_VERSIONED", {**prometheus._VERSIONED, "harmonic_test_version_gauge": (1, 0), "harmonic_test_version_hist": (0, 1)})  # fmt: skip
    state = MetricsState(max_versions=2)
    state.inc(tel.EVENTS_SCORED_TOTAL.name, ("credit", "1", "eu"))
    state.set("harmonic_test_version_gauge", ("1", "credit"), 3.0)
    state.observe("harmonic_test_version_hist", ("credit", "1"), [0.5])
    state.set("harmonic_test_version_gauge", ("1", "fraud"), 3.0)  # the same version of another model stays
    state.inc(tel.EVENTS_SCORED_TOTAL.name, ("credit", "2", "eu"))
    state.observe("harmonic_test_version_hist", ("credit", "3"), [0.5])  # a third version: "1" is the oldest
    assert state.counter(tel.EVENTS_SCORED_TOTAL.name, ("credit", "1", "eu")) == 0.0
    assert state.gauge("harmonic_test_version_gauge", ("1", "credit")) is None
    assert ("harmonic_test_version_hist", ("credit", "1")) not in state._hists
    assert state.gauge("harmonic_test_version_gauge", ("1", "fraud")) == 3.0
    assert state.counter(tel.EVENTS_SCORED_TOTAL.name, ("credit", "2", "eu")) == 1.0


def test_prometheus_state_forget_and_limit_versions() -> None:
    state = MetricsState()
    for version in ("a", "b", "c"):
        state.inc(tel.EVENTS_SCORED_TOTAL.name, ("credit", version, "eu"))
    assert state.forget("model_version", "a", "credit") == 1
    assert state.forget("model_version", "a", "credit") == 0
    state.limit_versions(1)  # "b" is the least recently seen of the two left
    assert [lab[1] for (_, lab) in state._counters if _ == tel.EVENTS_SCORED_TOTAL.name] == ["c"]
    with pytest.raises(ValueError, match=r"max_versions must be >= 1; got 0"):
        MetricsState(max_versions=0)


def test_prometheus_state_restored_counters_respect_the_version_bound() -> None:
    rows = [{"name": tel.EVENTS_SCORED_TOTAL.name, "labels": ["credit", str(i), "eu"], "value": 1.0} for i in range(20)]
    state = MetricsState(max_versions=3)
    state.load_counters(rows)
    assert state.counter_sum(tel.EVENTS_SCORED_TOTAL.name) == 3.0


def test_prometheus_state_every_spec_is_well_formed() -> None:
    names = [m.name for m in METRICS]
    assert len(names) == len(set(names))
    for spec in METRICS:
        assert spec.name.startswith("harmonic_")
        assert spec.name.endswith("_total") == (spec.type == "counter"), spec.name
        assert (spec.type == "histogram") == bool(spec.buckets), spec.name
        assert list(spec.buckets) == sorted(spec.buckets)


# ---------------------------------------------------------------------- exposition over HTTP


def test_prometheus_server_exposes_counters_gauges_and_histograms(state: MetricsState, server: MetricsServer) -> None:
    state.inc(tel.EVENTS_CONSUMED_TOTAL.name, ("credit",), 3.0)
    state.set(tel.WINDOW_GAMMA_MEAN.name, ("credit", "eu", "60s"), 0.25)
    state.observe(tel.GAMMA.name, ("credit", "eu"), np.array([0.0, 5e-4, 5e-4, 0.02, 7.0, np.nan]))
    status, content_type, body = get(server.port, "/metrics")
    assert status == 200 and content_type.startswith("text/plain")
    assert "# TYPE harmonic_events_consumed_total counter" in body
    assert "# TYPE harmonic_gamma histogram" in body
    got = samples(body)
    assert got[(tel.EVENTS_CONSUMED_TOTAL.name, (("model", "credit"),))] == 3.0
    assert got[(tel.WINDOW_GAMMA_MEAN.name, (("model", "credit"), ("segment", "eu"), ("window", "60s")))] == 0.25
    lab = (("model", "credit"), ("segment", "eu"))

    def bucket(le: str) -> float:
        return got[("harmonic_gamma_bucket", tuple(sorted((*lab, ("le", le)))))]

    # cumulative "le" buckets; NaN dropped; 0.0 lands in the le="0.0" bucket, 7.0 only in +Inf
    assert bucket("0.0") == 1 and bucket("0.0003") == 1 and bucket("0.001") == 3 and bucket("0.03") == 4
    assert bucket("1.0") == 4 and bucket("+Inf") == 5
    assert got[("harmonic_gamma_count", lab)] == 5
    assert got[("harmonic_gamma_sum", lab)] == pytest.approx(7.021)
    assert len([k for k in got if k[0] == "harmonic_gamma_bucket"]) == len(GAMMA_BUCKETS) + 1


def test_prometheus_server_healthz_is_always_ok(server: MetricsServer) -> None:
    status, content_type, body = get(server.port, "/healthz")
    assert (status, content_type, json.loads(body)) == (200, "application/json", {"status": "ok"})


def test_prometheus_server_readyz_is_503_until_ready_then_200(server: MetricsServer, readiness: FakeReadiness) -> None:
    status, _, body = get(server.port, "/readyz")
    assert status == 503
    assert json.loads(body) == {"ready": False, "source_ready": False, "models": {"credit": {"loaded": True}}}
    readiness.ok = True
    status, content_type, body = get(server.port, "/readyz?verbose=1")
    assert (status, content_type) == (200, "application/json")
    assert json.loads(body)["ready"] is True


def test_prometheus_server_serves_the_probe_report(server: MetricsServer) -> None:
    status, content_type, body = get(server.port, "/probes")
    assert (status, content_type) == (200, "application/json")
    assert json.loads(body) == {"budget_share": 0.1, "models": {"credit": {"runs": 2}}}


def test_prometheus_server_unknown_path_is_404(server: MetricsServer) -> None:
    status, content_type, body = get(server.port, "/nope")
    assert status == 404 and content_type == "text/plain"
    assert "/metrics" in body and "/probes" in body


def test_prometheus_server_defaults_are_ready_and_an_empty_probe_report(state: MetricsState) -> None:
    with MetricsServer(state, settings=MetricsSettings(host="127.0.0.1", port=0)) as srv:
        assert srv.port > 0
        assert get(srv.port, "/readyz")[0] == 200
        assert json.loads(get(srv.port, "/probes")[2]) == {"regions": []}
