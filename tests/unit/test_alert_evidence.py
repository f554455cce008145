"""Alerts that say what fired (monitor/runtime/watch.py, monitor/alerts.py): each detector that fired with
its own statistic, threshold, window and reference values; the moved inputs by name; the per-input drift gauge; the
verdict's hysteresis and the detector crossings the watch reports."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from monitor import telemetry as tel
from monitor.alerts import Alert, AlertRule, AlertState, Evidence
from monitor.drift.verdict import Verdict
from monitor.exporters.delivery import WebhookSender
from monitor.exporters.prometheus import MetricsState
from monitor.rolling.reference import Reference
from monitor.runtime.watch import (
    HARMFUL_ALERT,
    INPUT_ALERT,
    SHADOW_ALERT,
    DetectorCrossing,
    ModelWatch,
)
from monitor.runtime.watch_metrics import FEATURE_SERIES_TOP, WatchMetrics
from monitor.runtime.watch_report import DetectorCrossed, WatchReport
from tests.unit.test_watch import MODEL, Stream, make_watch


def flicker_only(stream: Stream, n: int = 100) -> tuple[object, ...]:
    """A batch whose flicker rises while γ stays as in the reference."""
    events, x, result, shadow = stream.batch(n)
    unstable = stream.rng.random(n) < 0.5
    flicker = np.where(unstable, stream.rng.binomial(32, 0.3, n) / 32.0, 0.0)
    return events, x, dataclasses.replace(result, flicker=flicker), shadow


def alert(watch: ModelWatch, rule: str) -> Alert:
    found = watch.alerts.get(rule, model=MODEL, segment="other")
    assert found is not None
    return found


def test_a_flicker_alert_gives_flicker_numbers_not_gamma() -> None:
    """Flicker rising alone is fragility, not a loss: input-shift, its clauses in HarmonicInputDrift."""
    watch, _ = make_watch(for_seconds=1.0)
    stream = Stream(seed=11)
    for _ in range(10):
        watch.update(*stream.batch())
    for _ in range(30):
        watch.update(*flicker_only(stream))  # type: ignore[arg-type]
    assert watch.verdict("other") == Verdict.INPUT_SHIFT
    assert "fragility rose" in watch.last_reports["other"].message
    assert watch.alerts.get(HARMFUL_ALERT, model=MODEL, segment="other") is None
    a = alert(watch, INPUT_ALERT)
    assert a.evidence and all(e.detector.startswith("flicker") for e in a.evidence), a.evidence
    for e in a.evidence:
        assert "flicker" in e.measure and e.window > e.reference
        if e.detector == "flicker_cusum":
            assert e.statistic > e.threshold
    notes = a.annotations
    assert "γ" not in notes["description"] and "gamma" not in notes["description"]
    assert float(notes["value"]) == pytest.approx(a.evidence[0].window, rel=1e-5)


def test_an_input_alert_names_the_inputs_with_their_numbers() -> None:
    watch, state = make_watch(for_seconds=1.0)
    watch.feature_names = ("age", "income")  # what the pipeline passes: the model's input names
    stream = Stream(seed=12)
    for _ in range(30):
        watch.update(*stream.batch(moved=True))
    assert watch.verdict("other") == Verdict.INPUT_SHIFT
    a = alert(watch, INPUT_ALERT)
    (moved,) = [e for e in a.evidence if e.detector == "income" and "percentiles" not in e.measure]
    assert moved.detector == "income" and a.top_features == ("income",)
    assert moved.window == pytest.approx(1.5, abs=0.2) and moved.reference == pytest.approx(0.0, abs=0.1)
    assert moved.statistic >= moved.threshold == watch.config.detectors.feature_min_distance
    assert a.annotations["description"].startswith("income KS distance 0.")
    assert float(a.annotations["value"]) == pytest.approx(moved.window, rel=1e-5)
    # the per-input gauge, by name
    assert state.gauge(tel.FEATURE_DRIFT_STATISTIC.name, (MODEL, "other", "income")) == pytest.approx(moved.statistic)
    assert state.gauge(tel.FEATURE_DRIFT_STATISTIC.name, (MODEL, "other", "age")) < 0.1


def test_the_shadow_alert_names_its_rate_and_threshold() -> None:
    watch, _ = make_watch(for_seconds=1.0)
    stream = Stream(seed=13)
    for _ in range(5):
        watch.update(*stream.batch(shadow_rate=0.5))
    description = alert(watch, SHADOW_ALERT).annotations["description"]
    assert description.startswith("disagreement rate 0.") and " > threshold 0.020 " in description


def gauges(state: MetricsState) -> dict[str, float]:
    return {
        labels[2]: value for (name, labels), value in state._gauges.items() if name == tel.FEATURE_DRIFT_STATISTIC.name
    }


def test_the_per_input_gauge_folds_wide_inputs_into_the_largest_and_other() -> None:
    _, state = make_watch()
    names = [f"px[{i}]" for i in range(100)]
    d = np.linspace(0.0, 0.99, 100)
    metrics = WatchMetrics(MODEL, state)
    metrics.feature_statistics("other", names, d)
    series = gauges(state)
    assert len(series) == FEATURE_SERIES_TOP + 1
    assert series["px[99]"] == pytest.approx(0.99) and "px[0]" not in series
    assert series["other"] == pytest.approx(d[100 - FEATURE_SERIES_TOP - 1])
    metrics.feature_statistics("other", names, d[::-1].copy())  # the top set changes: old series go
    series = gauges(state)
    assert "px[99]" not in series and series["px[0]"] == pytest.approx(0.99) and len(series) == FEATURE_SERIES_TOP + 1


def test_harmful_shift_holds_until_its_output_evidence_has_been_off_for_resolve_after() -> None:
    watch, _ = make_watch(for_seconds=1.0)  # resolve_after_seconds 30 s = 3,000 events at 100 events/s
    crossings: list[tuple[str, DetectorCrossing]] = []

    def observe(report: WatchReport) -> None:
        crossings.extend((c.segment, c.crossing) for c in report.changes if isinstance(c, DetectorCrossed))

    watch.fanout.subscribers.append(observe)
    stream = Stream(seed=14)
    for _ in range(10):
        watch.update(*stream.batch(moved=True))
    for _ in range(20):
        watch.update(*stream.batch(moved=True, harmful=True))
    assert watch.verdict("other") == Verdict.HARMFUL_SHIFT
    on = [c.detector for _, c in crossings if c.on]
    assert "features_ks" in on and any(d.startswith(("gamma", "flicker")) for d in on)
    verdicts = []
    for _ in range(60):  # outputs back to normal, inputs still moved
        watch.update(*stream.batch(moved=True))
        rep = watch.last_reports["other"]
        verdicts.append((rep.verdict, rep.held_since is not None))
    # the output detectors went off at some point; the verdict stayed harmful (held) for 30 s of event time after
    off = [i for i, (v, held) in enumerate(verdicts) if held]
    assert off, verdicts
    flipped = [i for i, (v, _) in enumerate(verdicts) if v == Verdict.INPUT_SHIFT]
    assert flipped and flipped[0] > off[0]
    assert 29 <= flipped[0] - off[0] <= 31  # 30 s = 30 batches of 100 events at 100 events/s
    assert all(v == Verdict.INPUT_SHIFT for v, _ in verdicts[flipped[0] :])  # no flapping back
    assert any(not c.on for _, c in crossings)  # the timeline still sees where each detector went off


def test_the_webhook_payload_carries_the_evidence() -> None:
    rule = AlertRule(HARMFUL_ALERT, "outputs", 0.0, 60.0, severity="warning")
    plain = "predictions flicker more: 30% of events' flicker in the reference's top 10%"
    ev = Evidence(
        "flicker_cusum", 14.0, 12.0, 0.3, 0.1, "share of flicker above the reference's 90th percentile", "CUSUM", plain
    )
    a = Alert(rule, "m", "eu", AlertState.FIRING, 0.3, 0.1, 1.0, evidence=(ev,), fired_at_seconds=1.0)
    body = WebhookSender("http://127.0.0.1:9/hook").payload([a], 2.0)
    (item,) = body["alerts"]  # type: ignore[misc]
    assert item["evidence"] == [
        {
            "detector": "flicker_cusum",
            "statistic": 14.0,
            "statistic_name": "CUSUM",
            "threshold": 12.0,
            "window": 0.3,
            "reference": 0.1,
            "measure": "share of flicker above the reference's 90th percentile",
            "plain": plain,
        }
    ]
    assert item["annotations"]["description"].startswith("flicker_cusum CUSUM 14.0 > 12.0 (share of flicker")
    assert item["annotations"]["summary"] == f"{HARMFUL_ALERT} m/eu: {plain}"


def test_input_noise_is_seen_by_the_range_test_and_named() -> None:
    watch, state = make_watch(for_seconds=1.0)
    watch.feature_names = ("age", "income")
    stream = Stream(seed=21)
    for _ in range(20):
        watch.update(*stream.batch())
    assert watch.verdict("other") == Verdict.STABLE
    for _ in range(15):  # noise on income: its spread grows 1.5×, its centre stays (KS distance about 0.1)
        events, x, result, shadow = stream.batch()
        x[:, 1] *= 1.5
        watch.update(events, x, result, shadow)
    report = watch.last_reports["other"]
    assert report.verdict == Verdict.INPUT_SHIFT and "inputs_range" in report.fired, report
    assert [name for name, _ in report.out_of_range] == ["income"]
    assert "outside the reference range: income" in report.message
    a = alert(watch, INPUT_ALERT)
    (ev,) = [e for e in a.evidence if "percentiles" in e.measure]
    assert ev.detector == "income" and ev.window >= 0.02 > 0.005 > ev.reference
    share = state.gauge(tel.INPUT_OUT_OF_RANGE_RATIO.name, (MODEL, "other", "income"))
    assert share is not None and share > 0.02
    assert state.gauge(tel.INPUT_OUT_OF_RANGE_RATIO.name, (MODEL, "other", "age")) < 0.02  # type: ignore[operator]


def test_the_range_test_keeps_quiet_on_a_stationary_stream() -> None:
    watch, _ = make_watch()
    stream = Stream(seed=16)
    for _ in range(100):
        watch.update(*stream.batch())
    engine = watch.verdicts.engines["other"]
    assert engine.detector("inputs_range") is not None and engine.detector("inputs_range").state.alarms == 0
    assert watch.verdict("other") == Verdict.STABLE


def test_a_correlation_flip_every_per_input_test_misses_is_an_input_shift() -> None:
    rng = np.random.default_rng(41)

    def correlated(n: int, sign: float) -> np.ndarray:
        z = rng.normal(size=n)
        return np.column_stack([z, sign * z + 0.3 * rng.normal(size=n)])

    s = Stream(100)
    gamma, flicker = s.signals(5000)
    ref = Reference.from_arrays(gamma=gamma, flicker=flicker, features=correlated(5000, 1.0))
    watch, state = make_watch(for_seconds=1.0, with_reference=False)
    watch.install_reference(ref)
    stream = Stream(seed=42)
    for _ in range(20):
        events, _, result, shadow = stream.batch()
        watch.update(events, correlated(len(events), 1.0), result, shadow)
    assert watch.verdict("other") == Verdict.STABLE
    for _ in range(12):  # the same marginals, the correlation flipped
        events, _, result, shadow = stream.batch()
        watch.update(events, correlated(len(events), -1.0), result, shadow)
    report = watch.last_reports["other"]
    assert report.verdict == Verdict.INPUT_SHIFT and report.fired == ("inputs_pca",), report
    engine = watch.verdicts.engines["other"]
    assert (
        engine.detector("features_ks") is not None and not engine.detector("features_ks").drift_detected
    )  # per-input KS is blind
    a = alert(watch, INPUT_ALERT)
    (ev,) = a.evidence
    assert ev.detector == "inputs_pca" and ev.window > 3 * ev.reference and "reconstruction error" in ev.measure
