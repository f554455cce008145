"""Alert engine → DeliveryWorker → a real Prometheus Alertmanager on loopback.

Needs ``bash scripts/install-alertmanager.sh`` (Debian package ``prometheus-alertmanager``); the
tests start their own Alertmanager (see ``alertmanager_service.py``) and are never skipped.
Each test uses its own ``model`` label, so they share one Alertmanager without seeing each other.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from monitor.alerts import AlertEngine, AlertEvent, AlertRule, AlertState
from monitor.exporters.delivery import AlertmanagerSender, DeliveryWorker, rfc3339
from monitor.runtime.alert_conditions import HARMFUL_ALERT, INPUT_ALERT
from tests.integration.alertmanager_service import AlertmanagerService, free_port

pytestmark = pytest.mark.integration

RULE = AlertRule("HarmonicGammaDrift", "gamma", for_seconds=60.0, resolve_after_seconds=120.0, severity="critical")
GENERATOR_URL = "http://harmonic-monitor.test:8000/alerts"


#: the inhibition rules of the example configuration (deploy/compose/alertmanager.yml), loaded as shipped
SHIPPED = yaml.safe_load((Path(__file__).resolve().parents[2] / "deploy" / "compose" / "alertmanager.yml").read_text())


@pytest.fixture(scope="module")
def alertmanager() -> Iterator[AlertmanagerService]:
    with AlertmanagerService(inhibit_rules=yaml.safe_dump({"inhibit_rules": SHIPPED["inhibit_rules"]})) as service:
        yield service


def observe(engine: AlertEngine, model: str, condition: bool, now: float) -> AlertEvent | None:
    return engine.observe(
        RULE.name,
        model=model,
        segment="eu",
        condition=condition,
        value=0.082,
        reference=0.011,
        now_seconds=now,
        top_features=("f3", "f7"),
        detail="KS p=1e-09",
    )


def fire(engine: AlertEngine, model: str, starts_at: float) -> AlertEvent:
    """Drive the engine through pending into firing (the `for` duration elapses in engine time)."""
    assert observe(engine, model, True, starts_at) is None
    event = observe(engine, model, True, starts_at + RULE.for_seconds)
    assert event is not None and event.alert.state is AlertState.FIRING
    return event


def parse_time(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def ours(labels: dict[str, str], model: str) -> bool:
    return labels.get("alertname") == RULE.name and labels.get("model") == model


def test_fired_alert_appears_in_alertmanager_with_labels_and_annotations(alertmanager: AlertmanagerService) -> None:
    model = "credit-fired"
    engine = AlertEngine([RULE])
    starts_at = round(time.time()) - 90.0
    event = fire(engine, model, starts_at)

    with DeliveryWorker(AlertmanagerSender(alertmanager.url, generator_url=GENERATOR_URL)) as worker:
        worker.submit(event)
        (alert,) = alertmanager.wait_for_alerts(lambda alerts: len(alerts) == 1, model=model)

    assert alert["labels"] == {
        "alertname": "HarmonicGammaDrift",
        "model": model,
        "segment": "eu",
        "signal": "gamma",
        "severity": "critical",
        "verdict": "harmful",
    }
    assert alert["annotations"] == event.alert.annotations
    assert alert["annotations"]["description"] == (
        "γ window mean 0.082 > reference 0.011 (KS p=1e-09); other inputs moved: f3, f7"
    )
    assert alert["status"]["state"] == "active"
    assert parse_time(alert["startsAt"]) == starts_at
    assert parse_time(alert["endsAt"]) > time.time()  # no endsAt sent: Alertmanager's resolve_timeout applies
    assert alert["generatorURL"] == GENERATOR_URL
    assert alert["receivers"] == [{"name": "webhook"}]
    assert worker.sent_total == 1 and worker.failed_total == 0

    notified = alertmanager.webhook.wait_for_alert(
        lambda a: ours(a["labels"], model) and a["status"] == "firing", timeout_seconds=10
    )
    assert notified["annotations"]["top_features"] == "f3,f7"


def test_resolved_alert_gets_ends_at_and_leaves_the_active_list(alertmanager: AlertmanagerService) -> None:
    model = "credit-resolved"
    engine = AlertEngine([RULE])
    now = round(time.time())
    fired = fire(engine, model, now - 600.0)

    with DeliveryWorker(AlertmanagerSender(alertmanager.url)) as worker:
        worker.submit(fired)
        alertmanager.wait_for_alerts(lambda alerts: len(alerts) == 1, model=model)

        # Condition clears; the hysteresis holds the alert for resolve_after_seconds, then resolves.
        assert observe(engine, model, False, now - 300.0) is None
        assert observe(engine, model, False, now - 300.0 + RULE.resolve_after_seconds - 1) is None
        resolved = observe(engine, model, False, now - 2.0)
        assert resolved is not None and resolved.alert.state is AlertState.RESOLVED
        worker.submit(resolved)

        # Alertmanager's GET /api/v2/alerts hides an alert once its endsAt has passed, whatever the filters.
        alertmanager.wait_for_alerts(lambda alerts: alerts == [], model=model)

    notified = alertmanager.webhook.wait_for_alert(
        lambda a: ours(a["labels"], model) and a["status"] == "resolved", timeout_seconds=10
    )
    assert parse_time(notified["endsAt"]) == now - 2.0
    assert parse_time(notified["startsAt"]) == now - 600.0
    assert (engine.fired_total, engine.resolved_total) == (1, 1)
    assert worker.sent_total == 2 and worker.queue_depth == 0 and worker.firing_count == 0


def test_same_alert_sent_repeatedly_shows_once(alertmanager: AlertmanagerService) -> None:
    model = "credit-dedup"
    engine = AlertEngine([RULE])
    now = round(time.time())
    event = fire(engine, model, now - 120.0)
    # Engine-side dedup: the condition keeps holding, no new transition.
    assert all(observe(engine, model, True, now - 60.0 + i) is None for i in range(20))

    sender = AlertmanagerSender(alertmanager.url)
    for i in range(5):  # five separate POSTs of the same alert
        sender.send([event.alert], now + i)
    worker = DeliveryWorker(sender)  # and the worker, which coalesces its own queued duplicates
    for _ in range(5):
        worker.submit(event)
    with worker:
        pass  # start, then stop: the last flush delivers the queue

    alerts = alertmanager.wait_for_alerts(lambda alerts: len(alerts) >= 1, model=model)
    assert len(alerts) == 1
    assert len(alertmanager.alerts(alertname=RULE.name, model=model, segment="eu")) == 1
    assert worker.sent_total == 1


def test_worker_resends_firing_alerts_so_alertmanager_keeps_them(alertmanager: AlertmanagerService) -> None:
    model = "credit-resend"
    event = fire(AlertEngine([RULE]), model, round(time.time()) - 60.0)

    with DeliveryWorker(AlertmanagerSender(alertmanager.url), resend_interval_seconds=0.3) as worker:
        worker.submit(event)
        (first,) = alertmanager.wait_for_alerts(lambda alerts: len(alerts) == 1, model=model)
        (later,) = alertmanager.wait_for_alerts(
            lambda alerts: len(alerts) == 1 and alerts[0]["updatedAt"] != first["updatedAt"], model=model
        )

    assert parse_time(later["updatedAt"]) > parse_time(first["updatedAt"])
    assert parse_time(later["endsAt"]) > parse_time(first["endsAt"])  # the expiry moves forward
    assert later["startsAt"] == first["startsAt"]
    assert worker.resent_total >= 1


def test_worker_retries_until_a_late_alertmanager_is_up() -> None:
    port = free_port()
    model = "credit-late"
    event = fire(AlertEngine([RULE]), model, round(time.time()) - 60.0)
    sender = AlertmanagerSender(f"http://127.0.0.1:{port}", timeout_seconds=2)

    with DeliveryWorker(sender, initial_backoff_seconds=0.05, max_backoff_seconds=0.2) as worker:
        worker.submit(event)
        deadline = time.monotonic() + 10
        while worker.failed_total < 2 and time.monotonic() < deadline:
            time.sleep(0.02)  # bounded wait for the first failed attempts
        assert worker.failed_total >= 2 and worker.sent_total == 0
        assert worker.last_error is not None and "Is the receiver running" in worker.last_error

        with AlertmanagerService(port=port) as late:
            (alert,) = late.wait_for_alerts(lambda alerts: len(alerts) == 1, model=model)

    assert alert["startsAt"].startswith(rfc3339(event.alert.starts_at_seconds)[:19])
    assert worker.sent_total == 1


def test_the_shipped_inhibit_rule_hides_a_firing_input_alert_behind_a_harmful_shift(
    alertmanager: AlertmanagerService,
) -> None:
    model = "credit-escalated"
    engine = AlertEngine(
        [AlertRule(HARMFUL_ALERT, "outputs", for_seconds=0.0), AlertRule(INPUT_ALERT, "features", for_seconds=0.0)]
    )
    now = time.time()
    events = [
        engine.observe(name, model=model, segment="eu", condition=True, value=1.0, reference=0.0, now_seconds=now)
        for name in (INPUT_ALERT, HARMFUL_ALERT)
    ]
    with DeliveryWorker(AlertmanagerSender(alertmanager.url)) as worker:
        for event in events:
            assert event is not None
            worker.submit(event)
        alerts = alertmanager.wait_for_alerts(
            lambda alerts: {a["status"]["state"] for a in alerts} == {"active", "suppressed"}, model=model
        )
    states = {a["labels"]["alertname"]: a["status"] for a in alerts}
    # the input alert still fires (never "resolved" while the inputs are off); Alertmanager hides it
    assert states[INPUT_ALERT]["state"] == "suppressed" and states[INPUT_ALERT]["inhibitedBy"]
    assert states[HARMFUL_ALERT]["state"] == "active"
