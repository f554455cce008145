"""Log-end offsets for the consumer lag: ``KafkaSource.highwaters`` reads kafka-python's last fetched high
watermarks (no request), ``ProcessKafkaSource`` keeps what its child reports. Fakes stand in for the client and the
child; the real broker path runs in the pipeline benchmarks and the metric-writers integration test."""

from __future__ import annotations

from typing import Any

from kafka import TopicPartition

from monitor.source.kafka import KafkaSource
from monitor.source.kafka_process import ProcessKafkaSource


class FakeConsumer:
    def __init__(self, marks: dict[TopicPartition, int | None], fail: bool = False) -> None:
        self.marks, self.fail = marks, fail

    def assignment(self) -> set[TopicPartition]:
        if self.fail:
            raise RuntimeError("rebalance under way")
        return set(self.marks)

    def highwater(self, tp: TopicPartition) -> int | None:
        return self.marks[tp]


def kafka_source(consumer: Any) -> KafkaSource:
    source = object.__new__(KafkaSource)
    source._consumer = consumer
    return source


def test_kafka_source_reports_the_fetched_log_ends_and_skips_partitions_not_fetched_yet() -> None:
    consumer = FakeConsumer({TopicPartition("t", 0): 120, TopicPartition("t", 1): None})
    assert kafka_source(consumer).highwaters() == {("t", 0): 120}
    assert kafka_source(None).highwaters() == {}  # not connected yet
    assert kafka_source(FakeConsumer({}, fail=True)).highwaters() == {}


def test_process_source_keeps_the_childs_reports_for_the_partitions_it_holds() -> None:
    source = object.__new__(ProcessKafkaSource)
    source._assigned = {("t", 0), ("t", 1)}
    source._highwaters = {}
    source._handle("highwaters", {("t", 0): 10, ("t", 1): 7})
    source._handle("highwaters", {("t", 0): 15})
    source._assigned.discard(("t", 1))  # revoked: its log end no longer counts
    assert source.highwaters() == {("t", 0): 15}
