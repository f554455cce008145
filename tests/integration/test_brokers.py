"""Smoke tests of the real-Kafka test infrastructure (``brokers.py``) against both brokers.

If these fail, every other integration test would fail for reasons unrelated to the monitor:
they check produce, partitioning, consumer groups with manual commits, and (Kafka 0.9) that
messages and committed offsets survive a broker restart.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable

import pytest
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition

from tests.integration.brokers import Broker, BrokerError, Kafka09Broker, TansuBroker

pytestmark = pytest.mark.integration

MESSAGES = 200
PARTITIONS = 4
#: Bound on consuming a batch; the first group join on Tansu alone takes session_timeout_ms / 2.
CONSUME_TIMEOUT_SECONDS = 60.0


def produce(broker: Broker, topic: str, values: Iterable[int]) -> dict[int, int]:
    """Send ``values`` keyed by themselves, wait for every ack; return messages per partition."""
    per_partition: dict[int, int] = {}
    producer = KafkaProducer(**broker.kafka_kwargs(), acks="all", linger_ms=5)
    try:
        futures = [producer.send(topic, key=str(v).encode(), value=str(v).encode()) for v in values]
        for future in futures:
            metadata = future.get(timeout=30)
            per_partition[metadata.partition] = per_partition.get(metadata.partition, 0) + 1
    finally:
        producer.close(timeout=10)
    return per_partition


def consume(consumer: KafkaConsumer, count: int) -> list[int]:
    """Poll until ``count`` messages arrived; fail with what did arrive after the deadline."""
    values: list[int] = []
    deadline = time.monotonic() + CONSUME_TIMEOUT_SECONDS
    while len(values) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            values.extend(int(record.value) for record in records)
    assert len(values) == count, (
        f"expected {count} messages within {CONSUME_TIMEOUT_SECONDS:.0f} s, got {len(values)}; "
        f"assignment={consumer.assignment()}"
    )
    return values


def group_name() -> str:
    return f"smoke-{uuid.uuid4().hex[:8]}"


def test_broker_round_trips_messages_through_a_consumer_group(kafka_broker: Broker, topic: str) -> None:
    per_partition = produce(kafka_broker, topic, range(MESSAGES))
    assert sorted(per_partition) == list(range(PARTITIONS)), "keys should spread over all 4 partitions"

    consumer = KafkaConsumer(topic, **kafka_broker.consumer_kwargs(group_name()))
    try:
        assert consumer.partitions_for_topic(topic) == set(range(PARTITIONS))
        values = consume(consumer, MESSAGES)
        consumer.commit()
        partitions = {TopicPartition(topic, p) for p in range(PARTITIONS)}
        assert consumer.assignment() == partitions
        committed = {tp.partition: consumer.committed(tp) for tp in partitions}
    finally:
        consumer.close()

    assert sorted(values) == list(range(MESSAGES))
    assert committed == per_partition
    assert kafka_broker.partition_count(topic) == PARTITIONS


@pytest.mark.parametrize("partitions", [1, 7])
def test_broker_creates_topic_with_requested_partitions(kafka_broker: Broker, partitions: int) -> None:
    # On Kafka 0.9 this must not depend on num.partitions (4): TopicCommand sets the count.
    name = f"parts-{partitions}-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(name, partitions)
    assert kafka_broker.partition_count(name) == partitions


def test_broker_kafka_kwargs_pin_api_version_only_for_kafka09(kafka_broker: Broker) -> None:
    kwargs = kafka_broker.kafka_kwargs()
    assert kwargs["bootstrap_servers"] == kafka_broker.bootstrap
    assert kwargs.get("api_version") == ((0, 9) if kafka_broker.name == "kafka09" else None)


@pytest.mark.parametrize("kill", [False, True], ids=["clean-shutdown", "sigkill"])
def test_kafka09_restart_keeps_messages_and_committed_offsets(
    kafka09_broker: Kafka09Broker, kafka09_topic: str, kill: bool
) -> None:
    per_partition = produce(kafka09_broker, kafka09_topic, range(MESSAGES))
    group = group_name()
    # Commit half of each partition, so the group must resume mid-partition after the restart.
    half = {TopicPartition(kafka09_topic, p): n // 2 for p, n in per_partition.items()}
    consumer = KafkaConsumer(kafka09_topic, **kafka09_broker.consumer_kwargs(group))
    try:
        consume(consumer, MESSAGES)
        consumer.commit({tp: OffsetAndMetadata(offset, "", -1) for tp, offset in half.items()})
    finally:
        consumer.close()

    kafka09_broker.restart(kill=kill)

    resumed = KafkaConsumer(kafka09_topic, **kafka09_broker.consumer_kwargs(group))
    try:
        committed = {tp: resumed.committed(tp) for tp in half}
        rest = consume(resumed, MESSAGES - sum(half.values()))
    finally:
        resumed.close()
    fresh = KafkaConsumer(kafka09_topic, **kafka09_broker.consumer_kwargs(group_name()))
    try:
        everything = consume(fresh, MESSAGES)
    finally:
        fresh.close()

    assert committed == half
    assert sorted(everything) == list(range(MESSAGES))
    assert len(set(rest)) == len(rest) == MESSAGES - sum(half.values())


def test_tansu_restart_is_refused_because_storage_is_in_memory() -> None:
    with pytest.raises(BrokerError, match="in memory"):
        TansuBroker().restart()
