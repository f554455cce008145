"""The consumer's lean record parse (``monitor/source/records.py``) against real brokers.

The unit tests check it against kafka-python's parse on bytes built by kafka-python's builders; here the bytes are
what a real broker serves: v2 batches from Tansu (keys, null keys, empty values, headers (kafka-python's producer sends no null header value), and
every codec: uncompressed, gzip, snappy, lz4 and zstd producers) and legacy message sets from Kafka 0.9 (which the
lean parse hands to kafka-python's loop; uncompressed, gzip, snappy and lz4: Kafka 0.9 predates zstd).
Two ``KafkaSource``s in different groups read the same topic, one with the lean parse and one with kafka-python's;
they must return the same records, and move the group's position the same way. librdkafka's source
(``kafka.client: librdkafka``) reads the same topic in a third group and must return the same records too: every
codec decoded by either client.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import replace

import pytest
from kafka import KafkaProducer
from kafka.structs import TopicPartition

from monitor.config import KafkaSettings
from monitor.source import records
from monitor.source.base import RawRecord
from monitor.source.kafka import KafkaSource
from monitor.source.kafka_config import ConsumerConfig
from monitor.source.rdkafka import RdKafkaSource
from tests.integration.brokers import CONSUMER_SESSION_TIMEOUT_MS, Broker, TansuBroker

pytestmark = pytest.mark.integration

RECORDS = 600  # per codec


def _codecs(broker: Broker) -> tuple[str | None, ...]:
    """What producers set as ``compression.type``; zstd needs a broker that speaks v2 batches (Kafka ≥ 2.1)."""
    return (None, "gzip", "snappy", "lz4", *(("zstd",) if isinstance(broker, TansuBroker) else ()))


def _produce(broker: Broker, topic: str) -> int:
    """RECORDS records from a producer per codec; headers only where the broker speaks v2."""
    headers = isinstance(broker, TansuBroker)
    sent = 0
    for compression in _codecs(broker):
        producer = KafkaProducer(**broker.kafka_kwargs(), acks="all", compression_type=compression, linger_ms=20)
        futures = []
        for i in range(RECORDS):
            key = None if i % 4 == 0 else b"key-%d" % i
            value = b"" if i % 9 == 4 else b'{"id": "%d", "features": [%d, 0.5]}' % (i, i) * (1 + i % 5)
            extra = {}
            if headers and i % 3:
                extra["headers"] = [("content-type", b"application/json"), ("trace", b""), ("modèle", b"\xff")][
                    : 1 + i % 3
                ]
            futures.append(producer.send(topic, key=key, value=value, **extra))
        producer.flush(timeout=60)
        for f in futures:
            f.get(timeout=30)
        sent += len(futures)
        producer.close(timeout=10)
    return sent


def _read_all(broker: Broker, topic: str, lean: bool, want: int) -> tuple[list[RawRecord], KafkaSource]:
    k = KafkaSettings(bootstrap_servers=broker.bootstrap, topic=topic, group_id=f"lean-{uuid.uuid4().hex[:8]}")
    source = KafkaSource(
        replace(ConsumerConfig.from_settings(k), api_version=broker.api_version,
                session_timeout_ms=CONSUMER_SESSION_TIMEOUT_MS, max_poll_records=37, lean_record_parse=lean)
    )  # fmt: skip
    got: list[RawRecord] = []
    deadline = time.monotonic() + 60
    while len(got) < want and time.monotonic() < deadline:
        got += source.poll(0.2, 37)  # small polls: takes that stop inside batches
    return got, source


def _read_all_librdkafka(broker: Broker, topic: str, want: int) -> list[RawRecord]:
    k = KafkaSettings(bootstrap_servers=broker.bootstrap, topic=topic, group_id=f"rdkafka-{uuid.uuid4().hex[:8]}")
    source = RdKafkaSource(
        replace(ConsumerConfig.from_settings(k), api_version=broker.api_version,
                session_timeout_ms=CONSUMER_SESSION_TIMEOUT_MS, max_poll_records=37)
    )  # fmt: skip
    got: list[RawRecord] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < want and time.monotonic() < deadline:
            got += source.poll(0.2, 37)
    finally:
        source.close()
    return got


def test_the_lean_parse_reads_what_kafka_pythons_parse_reads(kafka_broker: Broker, topic: str) -> None:
    sent = _produce(kafka_broker, topic)
    lean, lean_source = _read_all(kafka_broker, topic, True, sent)
    plain, plain_source = _read_all(kafka_broker, topic, False, sent)
    try:
        assert lean_source.lean_record_parse is True and plain_source.lean_record_parse is False
        assert sent == RECORDS * len(_codecs(kafka_broker)) and len(lean) == sent
        assert not any(records.UNDECODABLE_HEADER in dict(r.headers) for r in lean + plain)  # every batch decoded
        assert sorted(lean, key=lambda r: (r.partition, r.offset)) == sorted(
            plain, key=lambda r: (r.partition, r.offset)
        )
        assert len({(r.partition, r.offset) for r in lean}) == sent  # each record once
        if isinstance(kafka_broker, TansuBroker):
            assert any(("trace", b"") in r.headers for r in lean)
        positions = {
            (r.topic, r.partition): r.offset + 1 for r in sorted(lean, key=lambda r: r.offset)
        }  # what the pipeline would commit
        assert {tp: lean_source._consumer.position(TopicPartition(*tp)) for tp in positions} == positions
        assert {tp: plain_source._consumer.position(TopicPartition(*tp)) for tp in positions} == positions
        # librdkafka decodes every codec of the same topic into the same records
        rdkafka = _read_all_librdkafka(kafka_broker, topic, sent)
        assert sorted(rdkafka, key=lambda r: (r.partition, r.offset)) == sorted(
            plain, key=lambda r: (r.partition, r.offset)
        )
    finally:
        lean_source.close()
        plain_source.close()
