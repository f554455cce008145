"""End to end: a producer whose clock creeps ahead cannot drag ``harmonic-monitor run``'s clock.

Against a real Kafka 0.9 broker, a sidecar scoring the classifier posts its alerts to a real HTTP webhook receiver.
Honest traffic (100 events/s stamped when produced) runs beside a producer that stamps one event every 0.5 s
``now + 290 s · k``: each stamp is within ``alerts.max_event_skew_seconds`` (300 s) of the one before, so a bound
measured from the watermark let it drag the clock an hour ahead, empty the windows and silence every alert. Then the
honest traffic's inputs shift: the drift alert must reach the webhook, every creeping event past the first (which is
290 s ahead, inside the bound) must be counted ``future_timestamp``, no honest event ``late``, and the 60 s window
must hold the run's events.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml
from kafka import KafkaProducer

from monitor import telemetry as tel
from monitor.runtime.alert_conditions import HARMFUL_ALERT, INPUT_ALERT
from tests.integration.alertmanager_service import NotificationReceiver
from tests.integration.brokers import Kafka09Broker
from tests.integration.model_fixtures import ClassifierFiles
from tests.integration.sidecar import sidecar_in
from tests.integration.test_run_kafka import DRAIN_TIMEOUT_SECONDS, group_name, new_topic

MODEL = "credit"
#: honest events per second, produced in chunks every CHUNK_SECONDS
RATE = 100
CHUNK_SECONDS = 0.1
#: the creeping producer: one event every CREEP_EVERY seconds stamped now + CREEP_STEP · k
CREEP_EVERY = 0.5
CREEP_STEP = 290.0
#: seconds of stable traffic before the inputs shift; bound on the alert reaching the webhook after the shift
STABLE_SECONDS = 8.0
ALERT_TIMEOUT_SECONDS = 60.0
DRIFT_ALERTS = (INPUT_ALERT, HARMFUL_ALERT)


@pytest.fixture
def receiver() -> Iterator[NotificationReceiver]:
    server = NotificationReceiver()
    server.start()
    try:
        yield server
    finally:
        server.close()


class Traffic(threading.Thread):
    """Honest events (shifted once ``shift`` is set) and the creeping producer's, until ``stop`` is set."""

    def __init__(self, broker: Kafka09Broker, topic: str, files: ClassifierFiles) -> None:
        super().__init__(daemon=True)
        self.producer = KafkaProducer(**broker.kafka_kwargs(), acks=1, linger_ms=5)
        self.topic, self.files = topic, files
        self.shift, self.stop = threading.Event(), threading.Event()
        self.honest = self.creeping = 0
        # the inputs move by two reference standard deviations on every feature
        self.offset = 2.0 * files.events.std(axis=0)

    def send(self, event_id: str, row: np.ndarray, ts_seconds: float) -> None:
        doc = {"id": event_id, "features": [float(v) for v in row], "ts": int(ts_seconds * 1000)}
        self.producer.send(self.topic, key=event_id.encode(), value=json.dumps(doc).encode())

    def run(self) -> None:
        per_chunk = int(RATE * CHUNK_SECONDS)
        next_creep = time.time() + CREEP_EVERY
        while not self.stop.is_set():
            now = time.time()
            for _ in range(per_chunk):
                row = self.files.events[self.honest % len(self.files.events)]
                self.send(f"h{self.honest}", row + self.offset if self.shift.is_set() else row, now)
                self.honest += 1
            if now >= next_creep:
                self.creeping += 1
                self.send(f"c{self.creeping}", self.files.events[0], now + CREEP_STEP * self.creeping)
                next_creep += CREEP_EVERY
            self.producer.flush(timeout=10)
            time.sleep(max(0.0, now + CHUNK_SECONDS - time.time()))
        self.producer.close(timeout=10)


def drift_alert(alert: dict[str, object]) -> bool:
    labels = alert["labels"]
    assert isinstance(labels, dict)
    return alert["status"] == "firing" and labels.get("model") == MODEL and labels.get("alertname") in DRIFT_ALERTS


def test_a_creeping_producer_clock_neither_silences_alerts_nor_escapes_the_count(
    kafka09_broker: Kafka09Broker, classifier: ClassifierFiles, receiver: NotificationReceiver, tmp_path: Path
) -> None:
    topic = new_topic(kafka09_broker, "creeping-clock", partitions=2)
    config = tmp_path / "monitor.yaml"
    settings = {
        "sampler": {"events_per_second": 0},  # every event scored, the creeping ones included
        "drift": {"window": 200, "every": 25},
        "batch": {"max_events": 50},
        "alerts": {"webhook_url": receiver.url, "for_seconds": 1.0, "resolve_after_seconds": 600.0},
        "probes": {"enabled": False},
    }
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    sidecar = sidecar_in(
        tmp_path,
        kafka09_broker,
        topic=topic,
        group_id=group_name(),
        model=classifier.onnx_path,
        model_name=MODEL,
        reference=classifier.reference_path,
        config=config,
    )
    traffic = Traffic(kafka09_broker, topic, classifier)
    with sidecar:
        sidecar.wait_ready()
        traffic.start()
        try:
            time.sleep(STABLE_SECONDS)
            traffic.shift.set()
            try:
                receiver.wait_for_alert(drift_alert, ALERT_TIMEOUT_SECONDS)
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{sidecar.log_tail(40)}") from None
        finally:
            traffic.stop.set()
            traffic.join(30)
        sent = traffic.honest + traffic.creeping
        scrape = sidecar.wait_for_metrics(
            lambda s: s.total(tel.EVENTS_SCORED_TOTAL.name, model=MODEL) >= sent,
            f"all {sent} events scored",
            DRAIN_TIMEOUT_SECONDS,
            settle_seconds=0.5,
        )
    mistimed = scrape.by_label(tel.EVENTS_MISTIMED_TOTAL.name, "reason", model=MODEL)
    # every creeping event but the first (290 s ahead: inside the bound) was stamped beyond wall + 300 s
    assert traffic.creeping >= STABLE_SECONDS / CREEP_EVERY - 2  # the clock ran ~40 min ahead on the old bound
    assert mistimed.get("future_timestamp") == traffic.creeping - 1, mistimed
    assert mistimed.get("late", 0.0) == 0.0, mistimed  # honest events stamped when produced are never late
    # the whole run lies within the last minute: the 60 s window holds (nearly) every event, not a frozen handful
    in_window = scrape.total(tel.WINDOW_EVENTS.name, model=MODEL, window="60s")
    assert in_window >= 0.9 * sent, (in_window, sent)
