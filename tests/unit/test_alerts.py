"""The alert engine: for-duration, hysteresis, resolve, deduplication, labels and annotations."""

from __future__ import annotations

import pytest

from monitor.alerts import AlertEngine, AlertEvent, AlertRule, AlertState, fingerprint
from monitor.errors import ConfigError

RULE = AlertRule("HarmonicGammaDrift", "gamma", for_seconds=60.0, resolve_after_seconds=120.0, severity="critical")


def observe(
    engine: AlertEngine,
    condition: bool,
    now: float,
    *,
    segment: str = "eu",
    rule: str = "HarmonicGammaDrift",
    value: float = 0.082,
    verdict: str = "harmful",
) -> AlertEvent | None:
    return engine.observe(
        rule,
        model="credit",
        segment=segment,
        condition=condition,
        value=value,
        reference=0.011,
        now_seconds=now,
        top_features=("f3", "f7"),
        detail="KS p=1e-09",
        verdict=verdict,
    )


@pytest.fixture
def engine() -> AlertEngine:
    return AlertEngine([RULE])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"name": " "}, "name must be a non-empty string"),
        ({"signal": ""}, "signal must be a non-empty string"),
        ({"for_seconds": -1.0}, "for_seconds must be a finite number >= 0"),
        ({"resolve_after_seconds": float("nan")}, "resolve_after_seconds must be a finite number >= 0"),
    ],
)
def test_alert_rule_rejects_bad_parameters(kwargs: dict[str, object], match: str) -> None:
    params: dict[str, object] = {"name": "R", "signal": "gamma", **kwargs}
    with pytest.raises(ConfigError, match=match):
        AlertRule(**params)  # type: ignore[arg-type]


def test_alert_engine_rejects_duplicate_rule_names() -> None:
    with pytest.raises(ConfigError, match="'HarmonicGammaDrift' appears twice"):
        AlertEngine([RULE, RULE])


def test_alert_engine_rejects_no_rules() -> None:
    with pytest.raises(ConfigError, match="at least one AlertRule"):
        AlertEngine([])


def test_alert_engine_unknown_rule_raises(engine: AlertEngine) -> None:
    with pytest.raises(ConfigError, match=r"no alert rule named 'Nope'; configured rules: \['HarmonicGammaDrift'\]"):
        observe(engine, True, 0.0, rule="Nope")


def test_alert_engine_stays_pending_until_for_duration(engine: AlertEngine) -> None:
    assert observe(engine, True, 1000.0) is None
    assert observe(engine, True, 1059.9) is None
    pending = engine.get("HarmonicGammaDrift", model="credit", segment="eu")
    assert pending is not None and pending.state is AlertState.PENDING
    assert engine.firing() == ()

    event = observe(engine, True, 1060.0)

    assert event is not None
    assert event.previous is AlertState.PENDING and event.alert.state is AlertState.FIRING
    assert event.alert.starts_at_seconds == 1000.0  # when the condition first held (Prometheus activeAt)
    assert event.alert.fired_at_seconds == 1060.0
    assert engine.fired_total == 1


def test_alert_engine_zero_for_fires_on_first_observation() -> None:
    engine = AlertEngine([AlertRule("ShadowDisagreement", "shadow_disagreement", for_seconds=0.0)])
    event = observe(engine, True, 5.0, rule="ShadowDisagreement")
    assert event is not None and event.alert.state is AlertState.FIRING


def test_alert_engine_pending_alert_drops_silently_and_restarts_its_for_clock(engine: AlertEngine) -> None:
    observe(engine, True, 0.0)
    assert observe(engine, False, 50.0) is None
    assert engine.active() == ()

    assert observe(engine, True, 70.0) is None  # a fresh pending period starts at 70
    assert observe(engine, True, 129.0) is None
    event = observe(engine, True, 130.0)
    assert event is not None and event.alert.starts_at_seconds == 70.0


def test_alert_engine_resolves_after_condition_clear_for_resolve_after(engine: AlertEngine) -> None:
    observe(engine, True, 0.0)
    observe(engine, True, 60.0)
    assert observe(engine, False, 100.0) is None  # hysteresis starts
    assert observe(engine, False, 219.9) is None
    still = engine.get("HarmonicGammaDrift", model="credit", segment="eu")
    assert still is not None and still.state is AlertState.FIRING

    event = observe(engine, False, 220.0, value=0.012)

    assert event is not None
    assert event.previous is AlertState.FIRING and event.alert.state is AlertState.RESOLVED
    assert event.alert.ends_at_seconds == 220.0
    assert event.alert.value == 0.012  # the resolved notice carries the latest numbers
    assert engine.active() == ()
    assert (engine.fired_total, engine.resolved_total) == (1, 1)


def test_alert_engine_hysteresis_does_not_flap_on_a_toggling_condition(engine: AlertEngine) -> None:
    events = [observe(engine, True, 0.0), observe(engine, True, 60.0)]
    # Condition flips every 30 s for an hour: never false for 120 s in a row.
    events += [observe(engine, step % 2 == 0, 60.0 + 30.0 * step) for step in range(1, 121)]

    transitions = [e.alert.state for e in events if e is not None]
    assert transitions == [AlertState.FIRING]
    assert (engine.fired_total, engine.resolved_total) == (1, 0)


def test_alert_engine_clear_timer_restarts_when_condition_returns(engine: AlertEngine) -> None:
    observe(engine, True, 0.0)
    observe(engine, True, 60.0)
    observe(engine, False, 100.0)
    observe(engine, True, 200.0)  # back before 120 s clear: the timer resets
    assert observe(engine, False, 210.0) is None
    assert observe(engine, False, 329.0) is None
    event = observe(engine, False, 330.0)
    assert event is not None and event.alert.state is AlertState.RESOLVED


def test_alert_engine_deduplicates_one_alert_per_fingerprint(engine: AlertEngine) -> None:
    events = [observe(engine, True, 60.0 * i, value=0.05 + i) for i in range(10)]

    assert sum(e is not None for e in events) == 1
    (alert,) = engine.active()
    assert alert.value == 0.05 + 9  # numbers follow the latest observation
    assert alert.fingerprint == fingerprint("HarmonicGammaDrift", "credit", "eu")


def test_alert_engine_keeps_separate_alerts_per_segment_and_rule() -> None:
    engine = AlertEngine([RULE, AlertRule("HarmonicFlicker", "flicker", for_seconds=0.0)])
    observe(engine, True, 0.0, segment="eu")
    observe(engine, True, 0.0, segment="us")
    observe(engine, True, 0.0, rule="HarmonicFlicker")

    keys = [(a.rule.name, a.segment, a.state) for a in engine.active()]
    assert keys == [
        ("HarmonicFlicker", "eu", AlertState.FIRING),
        ("HarmonicGammaDrift", "eu", AlertState.PENDING),
        ("HarmonicGammaDrift", "us", AlertState.PENDING),
    ]
    assert len({a.fingerprint for a in engine.active()}) == 3


def test_alert_engine_fires_again_after_resolving(engine: AlertEngine) -> None:
    observe(engine, True, 0.0)
    observe(engine, True, 60.0)
    observe(engine, False, 100.0)
    observe(engine, False, 220.0)

    assert observe(engine, True, 1000.0) is None
    event = observe(engine, True, 1060.0)

    assert event is not None and event.alert.state is AlertState.FIRING
    assert event.alert.starts_at_seconds == 1000.0 and event.alert.ends_at_seconds is None
    assert (engine.fired_total, engine.resolved_total) == (2, 1)


def test_alert_engine_keeps_verdict_label_while_alert_lives(engine: AlertEngine) -> None:
    observe(engine, True, 0.0, verdict="harmful")
    event = observe(engine, True, 60.0, verdict="input-shift")
    assert event is not None and event.alert.labels["verdict"] == "harmful"


def test_alert_engine_tolerates_a_clock_stepping_back(engine: AlertEngine) -> None:
    observe(engine, True, 1000.0)
    assert observe(engine, True, 900.0) is None  # NTP step: still pending, no crash
    assert observe(engine, True, 1060.0) is not None


def test_alert_labels_identify_rule_model_segment_signal_severity_verdict(engine: AlertEngine) -> None:
    event = AlertEngine([AlertRule("R", "gamma", for_seconds=0, severity="critical")]).observe(
        "R", model="credit", segment="eu", condition=True, value=1.0, reference=0.5, now_seconds=0.0
    )
    assert event is not None
    assert event.alert.labels == {
        "alertname": "R",
        "model": "credit",
        "segment": "eu",
        "signal": "gamma",
        "severity": "critical",
        "verdict": "harmful",
    }


def test_alert_annotations_say_value_reference_and_top_features(engine: AlertEngine) -> None:
    observe(engine, True, 0.0)
    event = observe(engine, True, 60.0)
    assert event is not None
    assert event.alert.annotations == {
        "summary": "HarmonicGammaDrift credit/eu: γ window mean 0.082 > reference 0.011 (KS p=1e-09)",
        "description": "γ window mean 0.082 > reference 0.011 (KS p=1e-09); other inputs moved: f3, f7",
        "value": "0.082",
        "reference": "0.011",
        "top_features": "f3,f7",
    }


def test_alert_annotations_include_runbook_url_when_configured() -> None:
    engine = AlertEngine([AlertRule("R", "flicker", for_seconds=0, runbook_url="https://runbooks/flicker")])
    event = engine.observe("R", model="m", segment="other", condition=True, value=0.3, reference=0.1, now_seconds=0.0)
    assert event is not None
    assert event.alert.annotations["runbook_url"] == "https://runbooks/flicker"
    assert event.alert.annotations["description"] == "flicker window mean 0.30 > reference 0.10"


def test_alert_engine_reset_forgets_alerts_and_counters(engine: AlertEngine) -> None:
    observe(engine, True, 0.0)
    observe(engine, True, 60.0)
    engine.reset()
    assert engine.active() == () and engine.fired_total == 0
    assert observe(engine, True, 100.0) is None  # pending again from scratch


# ---------------------------------------------------------------------------------------- evaluation on a clock


def test_alert_engine_advance_fires_a_pending_alert_without_new_observations(engine: AlertEngine) -> None:
    assert observe(engine, True, 0.0) is None  # pending; the condition was last seen true
    assert engine.advance(59.0) == []
    (event,) = engine.advance(60.0)
    assert event.alert.state is AlertState.FIRING and event.at_seconds == 60.0
    assert engine.fired_total == 1


def test_alert_engine_advance_resolves_a_firing_alert_whose_condition_was_last_false(engine: AlertEngine) -> None:
    observe(engine, True, 0.0)
    observe(engine, True, 60.0)
    assert observe(engine, False, 100.0) is None  # hysteresis starts; then no evaluation for a long time
    assert engine.advance(219.0) == []
    (event,) = engine.advance(220.0)
    assert event.alert.state is AlertState.RESOLVED and event.alert.ends_at_seconds == 220.0


def test_alert_engine_advance_keeps_a_held_condition_firing(engine: AlertEngine) -> None:
    observe(engine, True, 0.0)
    observe(engine, True, 60.0)
    assert engine.advance(10_000.0) == []
    alert = engine.get("HarmonicGammaDrift", model="credit", segment="eu")
    assert alert is not None and alert.state is AlertState.FIRING
    assert alert.value == 0.082 and alert.top_features == ("f3", "f7")  # its numbers are kept


def test_alert_engine_advance_resolves_a_firing_alert_whose_evidence_went_quiet(engine: AlertEngine) -> None:
    observe(engine, True, 0.0)
    observe(engine, True, 60.0)
    observe(engine, True, 0.0, segment="us")
    observe(engine, True, 60.0, segment="us")
    quiet = {("credit", "eu")}
    assert engine.advance(100.0, quiet=quiet) == []  # the condition counts as false from here
    (event,) = engine.advance(220.0, quiet=quiet)
    assert event.alert.segment == "eu" and event.alert.state is AlertState.RESOLVED
    assert [a.segment for a in engine.firing()] == ["us"]


def test_alert_engine_advance_drops_a_quiet_pending_alert(engine: AlertEngine) -> None:
    observe(engine, True, 0.0)
    assert engine.advance(30.0, quiet={("credit", "eu")}) == []
    assert engine.active() == ()
