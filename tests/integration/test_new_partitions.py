"""End to end: partitions added to the events topic while ``harmonic-monitor run`` reads it (kafka-python) are
assigned, read and listed by ``/readyz`` within seconds, not after kafka-python's default 5-minute metadata age.

Kafka 0.9: partitions are added through its admin tool (``TopicCommand --alter``); the sidecar reads with
kafka-python (librdkafka refreshes its metadata every 10 s already, ``monitor.source.rdkafka.METADATA_REFRESH_MS``).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka import KafkaProducer

from monitor import telemetry as tel
from tests.integration.brokers import Kafka09Broker
from tests.integration.model_fixtures import ClassifierFiles
from tests.integration.sidecar import partitions_of, sidecar_in
from tests.integration.test_run_kafka import MODEL, group_name, new_topic, run_env, valid_events

pytestmark = pytest.mark.integration

BEFORE, AFTER = 2, 4
#: the metadata age (10 s) and a rebalance, with room for a loaded machine
SEEN_WITHIN_SECONDS = 45.0


def test_new_partitions_are_read_within_the_metadata_age(
    kafka09_broker: Kafka09Broker, classifier: ClassifierFiles, tmp_path: Path
) -> None:
    broker = kafka09_broker
    topic = new_topic(broker, "grown", BEFORE)
    sidecar = sidecar_in(
        tmp_path,
        broker,
        topic=topic,
        group_id=group_name(),
        model=classifier.onnx_path,
        model_name=MODEL,
        reference=classifier.reference_path,
        env=run_env(0, HARMONIC_KAFKA__CLIENT="kafka-python"),
    )
    events = valid_events(classifier, 40, prefix="grown")
    with sidecar:
        assert partitions_of(sidecar.wait_ready()) == set(range(BEFORE))
        broker.add_partitions(topic, AFTER)
        added = time.monotonic()
        producer = KafkaProducer(**broker.kafka_kwargs(), acks="all")
        try:  # only to the new partitions: none of these events can be read through the old ones
            for i, (key, value) in enumerate(events.messages):
                producer.send(topic, key=key, value=value, partition=BEFORE + i % (AFTER - BEFORE))
            producer.flush(30)
        finally:
            producer.close(10)
        sidecar.wait_for_metrics(
            lambda s: s.total(tel.EVENTS_SCORED_TOTAL.name) == len(events.messages),
            "the events on the new partitions scored",
            SEEN_WITHIN_SECONDS,
        )
        took = time.monotonic() - added
        assert partitions_of(sidecar.readyz()[1]) == set(range(AFTER))
        code, _ = sidecar.terminate()
        assert code == 0
    print(f"new partitions read {took:.1f} s after they were added")
