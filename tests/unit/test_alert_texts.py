"""What an alert says and when it is sent again (monitor/alerts.py, monitor/runtime/alert_conditions.py,
monitor/exporters/delivery.py): a summary under 200 characters whose comparison reads true, a description that says
each thing once, a categorical input by its own statistic, the moved inputs in ``top_features``, the ``signal`` label
of what fired, a resolved alert that says what it resolved, an input alert kept firing through an escalation, a
webhook repeat interval, a verdict gauge that says when it rests on nothing current, and log lines that carry their
fields."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from monitor import telemetry as tel
from monitor.alerts import SUMMARY_MAX, Alert, AlertEngine, AlertEvent, AlertRule, AlertState, Evidence, compare
from monitor.clock import WatermarkClock
from monitor.drift.verdict import Verdict
from monitor.exporters.delivery import DeliveryWorker
from monitor.logs import PlainFormatter
from monitor.runtime.watch import HARMFUL_ALERT, INPUT_ALERT, ModelWatch
from monitor.runtime.watch_metrics import NO_EVIDENCE
from tests.unit.test_watch import MODEL, Stream, Wall, make_watch

KS = "features_ks: KS distance vs its floor, adjusted p = 1e-06, the input's mean"


def test_the_comparison_reads_true_at_any_scale() -> None:
    rng = np.random.default_rng(7)
    for _ in range(2000):
        limit = float(10.0 ** rng.uniform(-6, 4))
        value = limit * (1.0 + float(10.0 ** rng.uniform(-9, 0)))  # just above its threshold, down to 1e-9
        a, sign, b = compare(value, limit).split(" ")
        assert sign == ">" and float(a) > float(b), (value, limit, compare(value, limit))
        assert len(a.split(".")[1]) == len(b.split(".")[1])  # the same decimals for both
    assert compare(0.031, 0.02) == "0.031 > 0.020"  # not "0.03 > 0.02", never "0.02 > 0.02"


def test_the_summary_is_one_line_under_200_characters() -> None:
    rule = AlertRule(INPUT_ALERT, "features", 0.0, 60.0)
    evidence = tuple(
        Evidence(f"a_very_long_input_name_{i}" * 3, 0.3, 0.1, 1.0, 0.0, KS, "KS distance") for i in range(9)
    )
    a = Alert(rule, "credit-scoring-model-v2", "eu-west", AlertState.FIRING, 1.0, 0.0, 0.0, evidence=evidence)
    assert len(a.summary) <= SUMMARY_MAX and "\n" not in a.summary
    assert a.summary.startswith(f"{INPUT_ALERT} credit-scoring-model-v2/eu-west: a_very_long_input_name_0")
    # the description names each input once, with its numbers, and nothing three times
    assert all(a.description.count(e.detector + " KS distance 0.30 > 0.10") == 1 for e in evidence)
    assert "fired" not in a.annotations and "fired:" not in a.description


def test_a_harmful_summary_says_the_loss_in_plain_words_then_the_inputs_by_name() -> None:
    """The summary reads without the detectors' names: each output-side detector's plain words, the moved inputs by
    name; what does not fit in 200 characters is counted, the description keeps every number."""
    rule = AlertRule(HARMFUL_ALERT, "outputs", 0.0, 60.0)
    estimate = Evidence(
        "accuracy_estimate", 0.83, 0.86, 0.83, 0.91, "…", "estimate", "estimated accuracy 0.83, reference 0.91"
    )
    unsure = "confidence fell: 68% of answers in the reference's least sure 50%"
    tail = Evidence("confidence_tail_cusum", 17.9, 11.6, 0.68, 0.5, "…", "CUSUM", unsure)
    inputs = tuple(Evidence(f"f_{i}", 0.3, 0.1, 1.0, 0.0, KS, "KS distance") for i in range(5))
    fragile = Evidence("gamma_cusum", 12.0, 9.8, 0.3, 0.1, "…", "CUSUM", "predictions more fragile: …")
    a = Alert(rule, "credit", "apac", AlertState.FIRING, 0.83, 0.91, 0.0, evidence=(estimate, tail, *inputs, fragile))
    assert a.summary == (
        f"{HARMFUL_ALERT} credit/apac: estimated accuracy 0.83, reference 0.91; inputs moved: f_0, f_1, f_2 (+2 more); "
        "2 more in the description"
    ), a.summary
    short = Alert(rule, "m", "eu", AlertState.FIRING, 0.83, 0.91, 0.0, evidence=a.evidence)
    assert short.summary == (
        f"{HARMFUL_ALERT} m/eu: estimated accuracy 0.83, reference 0.91; {unsure}; inputs moved: f_0, f_1, f_2 (+2 more); "
        "1 more in the description"
    ), short.summary
    assert len(a.summary) <= SUMMARY_MAX and "CUSUM" not in a.summary
    assert "confidence_tail_cusum CUSUM 17.9 > 11.6" in a.description and "f_4 KS distance 0.30 > 0.10" in a.description
    # a long model and segment leave less room: the later groups are counted, never cut mid-word
    long = Alert(
        rule, "credit-scoring-model-v2" * 3, "eu-west" * 4, AlertState.FIRING, 0.83, 0.91, 0.0, evidence=a.evidence
    )
    assert len(long.summary) <= SUMMARY_MAX and long.summary.endswith("reference 0.91; 3 more in the description"), (
        long.summary
    )


def test_an_alert_without_detectors_says_what_decided_it_in_its_summary() -> None:
    rule = AlertRule(HARMFUL_ALERT, "outputs", 0.0, 60.0)
    detail = "harmful-shift: accuracy_estimate fired; " + "x" * 300
    a = Alert(rule, "m", "eu", AlertState.FIRING, 0.012, 0.01, 0.0, detail=detail, value_name="γ window mean")
    assert a.summary.startswith(f"{HARMFUL_ALERT} m/eu: γ window mean 0.012 > reference 0.010 (harmful-shift: ")
    assert len(a.summary) <= SUMMARY_MAX and a.summary.endswith("…")
    assert a.description.count("accuracy_estimate") == 1


def test_a_categorical_input_is_said_by_its_own_statistic() -> None:
    rule = AlertRule(INPUT_ALERT, "features", 0.0, 60.0)
    city = Evidence("city", 0.46, 0.1, 0.0, 0.0, "held_ks: category frequencies, adjusted p = 1e-12", "TV distance")
    a = Alert(rule, "credit", "eu", AlertState.FIRING, 0.0, 0.0, 0.0, evidence=(city,), top_features=("city",))
    assert a.summary == f"{INPUT_ALERT} credit/eu: city TV distance 0.46 > 0.10"
    assert "window 0 vs reference 0" not in a.description and "TV distance 0.46" in a.description


def test_a_resolved_alert_says_what_it_resolved() -> None:
    engine = AlertEngine([AlertRule(INPUT_ALERT, "features", for_seconds=0.0, resolve_after_seconds=30.0)])
    debt = Evidence("debt_ratio", 0.031, 0.02, 0.41, 0.33, KS, "KS distance")
    held = dict(
        model="credit", segment="eu", value=0.41, reference=0.33, evidence=(debt,), top_features=("debt_ratio",)
    )
    fired = engine.observe(INPUT_ALERT, condition=True, now_seconds=0.0, **held)  # type: ignore[arg-type]
    assert fired is not None and fired.alert.summary == f"{INPUT_ALERT} credit/eu: debt_ratio KS distance 0.031 > 0.020"
    assert fired.alert.annotations["top_features"] == "debt_ratio"
    engine.observe(INPUT_ALERT, condition=False, now_seconds=10.0, **held)  # type: ignore[arg-type]
    done = engine.observe(INPUT_ALERT, condition=False, now_seconds=40.0, **held)  # type: ignore[arg-type]
    assert done is not None and done.alert.state is AlertState.RESOLVED
    notes = done.alert.annotations
    assert notes["summary"] == f"resolved: {INPUT_ALERT} credit/eu no longer shows debt_ratio KS distance 0.031 > 0.020"
    assert notes["description"].startswith("The condition no longer holds. It had fired on: debt_ratio KS distance")


def test_the_signal_label_is_what_fired_and_stays_while_the_alert_lives() -> None:
    engine = AlertEngine([AlertRule(HARMFUL_ALERT, "outputs", for_seconds=0.0)])
    obs = dict(model="m", segment="s", value=1.0, reference=0.0)
    ev = engine.observe(HARMFUL_ALERT, condition=True, now_seconds=0.0, signal="confidence", **obs)  # type: ignore[arg-type]
    assert ev is not None and ev.alert.labels["signal"] == "confidence"
    engine.observe(HARMFUL_ALERT, condition=True, now_seconds=1.0, signal="gamma", **obs)  # type: ignore[arg-type]
    (alert,) = engine.firing()
    assert alert.labels["signal"] == "confidence"  # a label: another value would be another alert to Alertmanager


def test_an_input_alert_names_every_input_that_moved_in_top_features() -> None:
    watch, _ = make_watch(for_seconds=1.0)
    watch.feature_names = ("age", "income")
    stream = Stream(seed=21)
    for _ in range(20):
        watch.update(*stream.batch())
    for _ in range(15):  # outliers in income: the range test names it, the per-input KS does not
        events, x, result, shadow = stream.batch()
        x[::20, 1] = 12.0
        watch.update(events, x, result, shadow)
    assert watch.last_reports["other"].top_features == ()
    alert = watch.alerts.get(INPUT_ALERT, model=MODEL, segment="other")
    assert alert is not None and any("out of range" in e.headline for e in alert.evidence)
    assert alert.top_features == ("income",)  # every input its evidence names, once
    assert alert.annotations["top_features"] == "income"


def drift_events(watch: ModelWatch, rule: str) -> list[str]:
    return [ev.alert.state.value for ev in watch.fired if ev.alert.rule.name == rule]


def test_an_escalation_keeps_the_input_alert_firing() -> None:
    watch, _ = make_watch(for_seconds=1.0)  # resolve_after_seconds 30 s = 30 batches
    stream = Stream(seed=31)
    for _ in range(10):
        watch.update(*stream.batch())
    for _ in range(20):
        watch.update(*stream.batch(moved=True))
    assert watch.verdict("other") == Verdict.INPUT_SHIFT and drift_events(watch, INPUT_ALERT) == ["firing"]
    for _ in range(60):  # the outputs go too: harmful-shift, the inputs still off, for twice resolve_after
        watch.update(*stream.batch(moved=True, harmful=True))
    assert watch.verdict("other") == Verdict.HARMFUL_SHIFT and drift_events(watch, HARMFUL_ALERT) == ["firing"]
    assert drift_events(watch, INPUT_ALERT) == ["firing"]  # never "resolved" while its condition holds
    harmful = watch.alerts.get(HARMFUL_ALERT, model=MODEL, segment="other")
    assert harmful is not None and "flicker" in harmful.labels["signal"]  # what fired, not "gamma_flicker"
    for _ in range(60):  # the inputs come back: now it resolves
        watch.update(*stream.batch())
    assert drift_events(watch, INPUT_ALERT) == ["firing", "resolved"]


class Recorder:
    def __init__(self) -> None:
        self.posts: list[tuple[float, list[str]]] = []

    def send(self, alerts: object, now_seconds: float) -> None:
        self.posts.append((now_seconds, [a.state.value for a in alerts]))  # type: ignore[attr-defined]


def test_a_webhook_hears_of_a_firing_alert_once_per_repeat_interval() -> None:
    sender = Recorder()
    worker = DeliveryWorker(sender, resend_interval_seconds=4 * 3600.0)
    rule = AlertRule(INPUT_ALERT, "features", 0.0, 60.0)
    alert = Alert(rule, "m", "s", AlertState.FIRING, 1.0, 0.0, 0.0, fired_at_seconds=0.0, fingerprint="f1")
    worker.submit(AlertEvent(alert, AlertState.PENDING, 0.0))
    for t in range(0, 4 * 3600, 60):  # the delivery thread wakes every minute at most
        worker.process_once(float(t))
    assert sender.posts == [(0.0, ["firing"])]
    worker.process_once(4 * 3600.0)
    assert sender.posts[-1] == (4 * 3600.0, ["firing"])
    worker.submit(
        AlertEvent(Alert(rule, "m", "s", AlertState.RESOLVED, 1.0, 0.0, 0.0, fingerprint="f1"), alert.state, 5.0)
    )
    worker.process_once(4 * 3600.0 + 5)
    assert [states for _, states in sender.posts] == [["firing"], ["firing"], ["resolved"]]


def test_a_quiet_segment_s_verdict_gauge_says_no_evidence_then_recovers() -> None:
    wall = Wall(0.0)
    watch, state = make_watch(for_seconds=5.0, clock=WatermarkClock(60.0, wall=wall))
    stream = Stream(seed=33)
    for _ in range(10):
        watch.update(*stream.batch())
        wall.now = stream.now + 0.5
    for _ in range(40):
        watch.update(*stream.batch(moved=True, harmful=True))
        wall.now = stream.now + 0.5
        watch.tick()
    verdict = (MODEL, "other", Verdict.HARMFUL_SHIFT.value)
    assert state.gauge(tel.DRIFT_VERDICT.name, verdict) == 1.0
    last = stream.now
    for seconds in range(1, 200):  # the stream stops; Service.run ticks every loop turn
        wall.now = last + seconds
        watch.tick()
    assert drift_events(watch, HARMFUL_ALERT) == ["firing", "resolved"]
    series = {lab[2]: v for (name, lab), v in state._gauges.items() if name == tel.DRIFT_VERDICT.name}
    assert series == {NO_EVIDENCE: 1.0}  # not harmful-shift for ever on a quiet stream
    wall.now += 1.0
    stream.index += 20_000  # events again, 200 s of event time later
    for _ in range(2):
        watch.update(*stream.batch())
        wall.now = stream.now + 0.5
    series = {lab[2]: v for (name, lab), v in state._gauges.items() if name == tel.DRIFT_VERDICT.name}
    assert NO_EVIDENCE not in series and sum(series.values()) == 1.0


def test_an_alert_log_line_says_which_alert_without_a_formatter(caplog: pytest.LogCaptureFixture) -> None:
    watch, _ = make_watch(for_seconds=1.0)
    stream = Stream(seed=34)
    with caplog.at_level(logging.WARNING, logger="monitor.runtime.watch"):
        for _ in range(10):
            watch.update(*stream.batch())
        for _ in range(20):
            watch.update(*stream.batch(moved=True))
    (record,) = [r for r in caplog.records if r.getMessage().startswith("alert firing")]
    message = record.getMessage()  # what a notebook's default handler prints
    assert f"alert={INPUT_ALERT} model={MODEL} segment=other: " in message and "KS distance" in message
    plain = PlainFormatter().format(record)
    assert plain.count(f"model={MODEL}") == 1  # the formatter does not say it twice
    assert record.__dict__.get("detail") == "" and "detail=" not in plain  # nor an empty field
