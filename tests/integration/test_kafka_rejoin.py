"""A group member that rejoins because its topic's metadata changed completes the rejoin by itself, on Kafka 0.9.

kafka-python's leader rejoins when the partitions it assigned differ from what the metadata now says (new
partitions; or, at start-up, the metadata that lands just after the first assignment). Its JoinGroup and SyncGroup
run as a task on kafka-python's IO thread, and the join is completed (member stable, heartbeats on, partitions
assigned) only by a ``poll`` that finds a rejoin still needed. kafka-python 3.0.12 does not note that rejoin as
pending: once the task has performed the new assignment nothing says a rejoin is needed, and a ``poll`` that gave up
waiting for the task (its time spent in the revoke handler's flush) left the member in ``<rebalancing>`` for good —
the benchmark's stall, until the source's membership watchdog closed the consumer and created it afresh.
librdkafka runs its group's joins on its own thread, whatever its caller does: the same scenario with it is here too.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

import pytest

from monitor.config import KafkaSettings
from monitor.source.kafka import ColumnSource, KafkaSource
from monitor.source.kafka_config import ConsumerConfig
from monitor.source.rdkafka import RdKafkaSource
from tests.integration.brokers import CONSUMER_SESSION_TIMEOUT_MS, Kafka09Broker
from tests.integration.test_run_kafka import group_name, new_topic

BEFORE, AFTER = 2, 4
#: the revoke handler's flush: longer than a poll's wait, as the pipeline's flush of a busy window can be
FLUSH_SECONDS = 1.0
#: the caller's work between polls (scoring a batch): the join's answers arrive meanwhile
WORK_SECONDS = 0.3
#: liveness bound on a join and on the metadata age (10 s) plus the rejoin, with room for a loaded machine
#: (the membership watchdog would close a stalled consumer after 30 s: it must not be what ends the wait)
JOIN_WITHIN_SECONDS = 45.0


class SlowFlush:
    """A rebalance handler whose flush before a revoke takes :data:`FLUSH_SECONDS`."""

    def __init__(self) -> None:
        self.revoked: list[list[tuple[str, int]]] = []

    def before_revoke(self, partitions: Sequence[tuple[str, int]]) -> None:
        if partitions:
            self.revoked.append(sorted(partitions))
            time.sleep(FLUSH_SECONDS)

    def after_assign(self, partitions: Sequence[tuple[str, int]]) -> None:
        pass


def _poll_until_assigned(source: ColumnSource, topic: str, partitions: int) -> None:
    want = [(topic, p) for p in range(partitions)]
    deadline = time.monotonic() + JOIN_WITHIN_SECONDS
    while not (source.assigned == want and (not isinstance(source, KafkaSource) or source._joined())):
        assert time.monotonic() < deadline, f"not assigned {want} in time; holds {source.assigned}"
        source.poll_columns(0.2, 100)
        time.sleep(WORK_SECONDS)


@pytest.mark.parametrize("client", ["kafka-python", "librdkafka"])
def test_a_rejoin_for_new_partitions_completes_while_the_flush_outlasts_the_poll(
    kafka09_broker: Kafka09Broker, client: str
) -> None:
    broker = kafka09_broker
    topic = new_topic(broker, "rejoin", BEFORE)
    settings = KafkaSettings(bootstrap_servers=broker.bootstrap, topic=topic, group_id=group_name())
    config = replace(
        ConsumerConfig.from_settings(settings),
        api_version=broker.api_version,
        session_timeout_ms=CONSUMER_SESSION_TIMEOUT_MS,
    )
    handler = SlowFlush()
    source: KafkaSource | RdKafkaSource = (
        KafkaSource(config, rebalance=handler) if client == "kafka-python" else RdKafkaSource(config, rebalance=handler)
    )
    try:
        _poll_until_assigned(source, topic, BEFORE)
        handler.revoked.clear()
        broker.add_partitions(topic, AFTER)
        _poll_until_assigned(source, topic, AFTER)
        assert handler.revoked == [[(topic, p) for p in range(BEFORE)]]  # one rejoin, flushed first
        # joined by itself, not closed and created afresh by the watchdog (kafka-python's source has one)
        assert getattr(source, "rejoins", 0) == 0, (
            "the member was closed and created afresh: its own rejoin never completed"
        )
    finally:
        source.close()
