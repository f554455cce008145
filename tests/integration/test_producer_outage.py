"""End to end: ``harmonic-monitor run`` rides out a broker outage on its producer topics (dead letters, scores).

The broker goes away while the sidecar holds dead letters and scores it has not delivered yet, and stays away past
kafka-python's own delivery timeout, so every one of them fails at least once inside the producer. The process must
stay up and say it is degraded, and once the broker is back every dead letter and every score must arrive. The same
run checks two things an operator reads in its log: one log format for the sidecar and its consumer child (set by
the settings alone), and no secret from the settings in any line.

Kafka 0.9 only: Tansu keeps its data in memory, so it cannot stop and come back with the topics and offsets.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from monitor import telemetry as tel
from tests.integration.brokers import Kafka09Broker, free_port
from tests.integration.model_fixtures import ClassifierFiles
from tests.integration.sidecar import Scrape, sidecar_in
from tests.integration.test_run_kafka import (
    DRAIN_TIMEOUT_SECONDS,
    MODEL,
    consumer_children,
    group_name,
    interleave,
    invalid_events,
    new_topic,
    produce,
    read_topic,
    run_env,
    score_ids,
    valid_events,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: kafka-python's delivery timeout for the sidecar's producer: the outage must outlast it (the shortest kafka-python
#: accepts with its 20 ms linger is request_timeout_ms + 20 ms; the sink derives request_timeout_ms from it)
DELIVERY_TIMEOUT_MS = 3000
#: a password in the settings and in an Alertmanager URL: it must appear in no log line
SECRET = "hunter2-outage"
#: how long the broker stays away (a broker stopped for 60 s)
OUTAGE_SECONDS = 60.0
#: how long the child is given to fetch the events produced while the sidecar itself is stopped
FETCH_SECONDS = 3.0


def producer_failures(s: Scrape, kind: str) -> float:
    return s.total(tel.PRODUCER_FAILURES_TOTAL.name, topic_kind=kind)


def test_run_keeps_dead_letters_and_scores_through_a_broker_outage(
    kafka09_broker: Kafka09Broker, kafka09_topic: str, classifier: ClassifierFiles, tmp_path: Path
) -> None:
    broker, topic = kafka09_broker, kafka09_topic
    dead_letters, scores = new_topic(broker, "dlq", partitions=1), new_topic(broker, "scores")
    bad = invalid_events(classifier)
    before = valid_events(classifier, 50, prefix="before")
    held = valid_events(classifier, 150, prefix="held", start=50)
    sidecar = sidecar_in(
        tmp_path,
        broker,
        topic=topic,
        group_id=group_name(),
        model=classifier.onnx_path,
        model_name=MODEL,
        reference=classifier.reference_path,
        dead_letter_topic=dead_letters,
        scores_topic=scores,
        env=run_env(
            0,
            HARMONIC_KAFKA__CONSUMER_PROCESS="true",
            HARMONIC_KAFKA__PRODUCER_DELIVERY_TIMEOUT_MS=str(DELIVERY_TIMEOUT_MS),
            HARMONIC_LOG_FORMAT="json",  # no --log-format flag: the settings decide, for the child too
            HARMONIC_KAFKA__SECURITY__SASL_PLAIN_PASSWORD=SECRET,  # ignored by a PLAINTEXT broker, but a setting
            HARMONIC_ALERTS__ALERTMANAGER_URL=f"http://monitor:{SECRET}@127.0.0.1:{free_port()}",
        ),
    )
    started = time.monotonic()
    with sidecar:
        sidecar.wait_ready()
        # 1. the producer works: the first events' scores and dead letters are delivered
        produce(broker, topic, interleave(before.messages, bad.messages[:10]))
        sidecar.wait_for_metrics(
            lambda s: (
                s.total(tel.EVENTS_SCORED_TOTAL.name) == 50 and s.total(tel.EVENTS_DEAD_LETTERED_TOTAL.name) == 10
            ),
            "the first events scored and dead-lettered",
            DRAIN_TIMEOUT_SECONDS,
        )
        # 2. stop the sidecar itself (not its consumer child), let the child fetch the next events, stop the broker,
        # and only then let the sidecar go on: it decodes and scores them with no broker to deliver to
        children = consumer_children(sidecar.pid)
        assert len(children) == 1
        os.kill(sidecar.pid, signal.SIGSTOP)
        try:
            produce(broker, topic, interleave(held.messages, bad.messages[10:], seed=1))
            time.sleep(FETCH_SECONDS)  # the child keeps polling while its parent is stopped
            broker.stop_broker()
        finally:
            os.kill(sidecar.pid, signal.SIGCONT)
        outage_started = time.monotonic()
        try:
            down = sidecar.wait_for_metrics(
                lambda s: (
                    s.total(tel.EVENTS_SCORED_TOTAL.name) == 200  # still consuming and scoring
                    and producer_failures(s, "scores") > 0
                    and producer_failures(s, "dead_letter") > 0
                    and s.value(tel.DEGRADED.name, reason="producer") == 1.0
                ),
                "every event scored, scores and dead letters failing in the producer, the producer reported degraded",
                DRAIN_TIMEOUT_SECONDS,
            )
            # the outage: the broker stays away a full minute while the sidecar stays up and says so
            sidecar.wait_until(
                lambda: time.monotonic() - outage_started >= OUTAGE_SECONDS,
                f"{OUTAGE_SECONDS:.0f} s of outage with the process up",
                OUTAGE_SECONDS + 10,
            )
            status, detail = sidecar.readyz()
            assert sidecar.running
        finally:
            broker.start_broker()
        outage_seconds = time.monotonic() - outage_started
        # degraded, not dead: still ready, still consuming, saying what is wrong
        assert status == 200 and "producer" in detail["degraded"], detail
        assert "Kafka producer at '127.0.0.1:" in detail["degraded_detail"]["producer"]
        assert down.total(tel.PRODUCER_DROPPED_TOTAL.name) == 0

        # 3. the broker is back: everything held arrives, and the process never stopped
        sidecar.wait_for_metrics(
            lambda s: s.value(tel.DEGRADED.name, reason="producer") == 0.0,
            "the producer to deliver again",
            DRAIN_TIMEOUT_SECONDS,
        )
        expected = {*before.valid_ids, *held.valid_ids}
        records = read_topic(broker, scores, lambda r: expected <= set(score_ids(r)), "every score")
        letters = read_topic(broker, dead_letters, lambda r: len(r) >= len(bad.messages), "every dead letter", 1)
        assert sidecar.running
        code, _ = sidecar.terminate()
    log = (tmp_path / "sidecar.log").read_text()
    assert code == 0, log[-5000:]
    took = time.monotonic() - started

    # at-least-once: every event's score and every invalid record's dead letter, none lost (a record the broker
    # took just before it went away may come twice)
    ids = score_ids(records)
    assert set(ids) == expected
    assert Counter(r.value for r in letters) >= Counter(value for _, value in bad.messages)

    # the log: one format for the sidecar and its consumer child, and no secret in any line
    lines = [line for line in log.splitlines() if line.strip() and not line.startswith("====")]
    entries = [json.loads(line) for line in lines]  # every line is JSON, whichever process wrote it
    # only the child's KafkaSource logs its assignments under this name (the sidecar's under kafka_process)
    assert any(e["logger"] == "monitor.source.kafka" and e["msg"] == "partitions assigned" for e in entries)
    assert any(e["msg"] == "producer could not deliver a record; it is kept and re-sent" for e in entries)
    assert any(e["msg"] == "harmonic-monitor run starting" for e in entries)
    assert SECRET not in log
    print(f"outage {outage_seconds:.1f} s, test {took:.1f} s")
