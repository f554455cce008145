"""End to end: ``harmonic-monitor run`` fires an alert at a webhook whose answer body never ends.

The receiver (:class:`~tests.endless_receiver.EndlessReceiver`, a real HTTP server on 127.0.0.1) takes the POST,
answers 200 and streams its body for as long as the client reads. The sidecar reads 64 KiB of it, closes the
connection and counts the delivery as made: its memory stays where it was, nothing is counted failed, and the
oversized answer is logged.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from monitor import telemetry as tel
from monitor.runtime.alert_conditions import SHADOW_ALERT
from tests.endless_receiver import EndlessReceiver
from tests.integration.brokers import Kafka09Broker
from tests.integration.model_fixtures import ClassifierFiles
from tests.integration.sidecar import Sidecar, classifier_sidecar
from tests.integration.test_run_kafka import MODEL, group_name, produce, run_env

#: labelled events, every one disagreeing with the ONNX copy: HarmonicShadowDisagreement needs 50 in its window
EVENTS = 120
#: agreeing events scored before the baseline is read
WARM_UP = 50
#: what the sidecar's resident memory may grow by from ready to the end of the oversized answer
RSS_GROWTH_BOUND_MB = 100.0
#: liveness bound on the alert reaching the receiver and on its answer being cut off
DEADLINE_SECONDS = 60.0
OVERSIZED_LINE = "with a body over 64 KiB"


def rss_mb(pid: int) -> float:
    """The process's resident set (``VmRSS`` of /proc/<pid>/status) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS in /proc/{pid}/status")


def labelled_events(files: ClassifierFiles, count: int, *, agree: bool) -> list[tuple[bytes, bytes]]:
    """``count`` valid events whose live label is the ONNX copy's (``agree``) or its opposite."""
    now_ms = int(time.time() * 1000)
    out = []
    for i in range(count):
        label = int(files.onnx_labels[i % len(files.events)]) ^ (not agree)
        event_id = f"{'agree' if agree else 'disagree'}-{i}"
        doc = {
            "id": event_id,
            "model": MODEL,
            "features": [float(v) for v in files.events[i % len(files.events)]],
            "ts": now_ms,
            "prediction": {"label": label},
        }
        out.append((event_id.encode(), json.dumps(doc).encode()))
    return out


def test_an_endless_webhook_answer_leaves_the_sidecar_memory_bounded_and_the_alert_delivered(
    kafka09_broker: Kafka09Broker, kafka09_topic: str, classifier: ClassifierFiles, tmp_path: Path
) -> None:
    with EndlessReceiver("close") as receiver:
        env = run_env(
            0,
            HARMONIC_ALERTS__WEBHOOK_URL=receiver.url,
            HARMONIC_ALERTS__FOR_SECONDS="0",
            HARMONIC_PROBES__ENABLED="false",
        )
        car: Sidecar = classifier_sidecar(
            kafka09_broker, classifier, tmp_path, topic=kafka09_topic, group_id=group_name(), model_name=MODEL, env=env
        )
        with car:
            car.wait_ready()
            # a first batch scored before the baseline: the first scoring's own allocations are not the answer's
            produce(kafka09_broker, kafka09_topic, labelled_events(classifier, WARM_UP, agree=True))
            car.wait_for_metrics(
                lambda s: s.total(tel.EVENTS_SCORED_TOTAL.name) >= WARM_UP, "warm-up scored", DEADLINE_SECONDS
            )
            before = rss_mb(car.pid)
            produce(kafka09_broker, kafka09_topic, labelled_events(classifier, EVENTS, agree=False))
            assert receiver.wait_for_posts(1, DEADLINE_SECONDS), car.log_tail(40)
            peak, deadline = before, time.monotonic() + DEADLINE_SECONDS
            while OVERSIZED_LINE not in car.log_tail(400) and time.monotonic() < deadline:
                peak = max(peak, rss_mb(car.pid))
                assert peak - before < RSS_GROWTH_BOUND_MB, (
                    f"RSS {before:.0f} -> {peak:.0f} MiB while the receiver streamed {receiver.sent_bytes >> 20} MiB"
                )
                time.sleep(0.05)
            assert OVERSIZED_LINE in car.log_tail(400), f"no oversized-answer line\n{car.log_tail(40)}"
            streamed = receiver.sent_bytes
            time.sleep(1.0)  # the connection is closed: the receiver's stream has ended
            assert receiver.sent_bytes == streamed
            peak = max(peak, rss_mb(car.pid))
            scrape = car.scrape()
    assert peak - before < RSS_GROWTH_BOUND_MB, f"RSS {before:.0f} -> {peak:.0f} MiB"
    fired = [a for body in receiver.bodies for a in body["alerts"] if a["labels"]["alertname"] == SHADOW_ALERT]
    assert fired and fired[0]["status"] == "firing", receiver.bodies
    assert scrape.total(tel.ALERTS_FIRED_TOTAL.name, alertname=SHADOW_ALERT) >= 1
    assert scrape.total(tel.ALERT_DELIVERIES_FAILED_TOTAL.name) == 0
    assert scrape.value(tel.DEGRADED.name, reason="alert_delivery") == 0
