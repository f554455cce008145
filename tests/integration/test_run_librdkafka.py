"""End to end with ``kafka.client: librdkafka``: ``harmonic-monitor run`` on confluent-kafka against Kafka 0.9
(version probing off, ``broker.version.fallback``) and Tansu.

One run consumes a mix of valid and invalid events, publishes a score per valid event, dead-letters every invalid
record unchanged, and commits the end of the log when stopped with SIGTERM; a restart with the same group reads only
the events produced since. The sink over the librdkafka producer keeps and re-sends what fails while the broker is
away.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from monitor import telemetry as tel
from monitor.config import KafkaSettings
from monitor.source.kafka_config import ProducerConfig
from monitor.source.kafka_sink import KafkaSink
from monitor.source.rdkafka import new_rd_producer
from monitor.source.validate import INVALID_REASONS
from tests.integration.brokers import Broker, Kafka09Broker
from tests.integration.model_fixtures import ClassifierFiles
from tests.integration.sidecar import Sidecar, classifier_sidecar
from tests.integration.test_run_kafka import (
    DRAIN_TIMEOUT_SECONDS,
    MODEL,
    committed_offsets,
    consumed,
    consumer_children,
    group_name,
    interleave,
    invalid_events,
    merge_ends,
    new_topic,
    produce,
    read_topic,
    run_env,
    score_ids,
    valid_events,
)

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("consumer_process", ["false", "true"], ids=["in-process", "consumer-process"])
def test_librdkafka_client_scores_dead_letters_and_commits(
    kafka_broker: Broker, topic: str, classifier: ClassifierFiles, tmp_path: Path, consumer_process: str
) -> None:
    dead_letters = new_topic(kafka_broker, "dlq", partitions=1)
    scores = new_topic(kafka_broker, "scores", partitions=1)
    group, state = group_name(), tmp_path / "state"

    def sidecar() -> Sidecar:
        return classifier_sidecar(
            kafka_broker,
            classifier,
            tmp_path,
            topic=topic,
            group_id=group,
            model_name=MODEL,
            state_dir=state,
            dead_letter_topic=dead_letters,
            scores_topic=scores,
            env=run_env(0, HARMONIC_KAFKA__CLIENT="librdkafka", HARMONIC_KAFKA__CONSUMER_PROCESS=consumer_process),
        )

    good = valid_events(classifier, 150, prefix="first")
    bad = invalid_events(classifier)
    later = valid_events(classifier, 50, prefix="later", start=150)
    n, m = len(good.messages), len(bad.messages)
    ends = produce(kafka_broker, topic, interleave(good.messages, bad.messages))

    # 1. everything consumed, each valid event scored, each invalid one dead-lettered byte for byte
    with sidecar() as first:
        first.wait_ready()
        assert len(consumer_children(first.pid)) == (1 if consumer_process == "true" else 0)
        s = first.wait_for_metrics(
            lambda s: consumed(s) >= n + m and committed_offsets(kafka_broker, topic, group) == ends,
            f"{n + m} events consumed and their offsets committed",
            DRAIN_TIMEOUT_SECONDS,
            settle_seconds=0.5,
        )
        code, _ = first.terminate()
    assert code == 0, f"SIGTERM exit status {code}\n{first.log_tail()}"
    assert consumed(s) == n + m
    assert s.total(tel.EVENTS_SCORED_TOTAL.name, model=MODEL) == len(good.valid_ids)
    assert s.total(tel.EVENTS_DEAD_LETTERED_TOTAL.name) == m
    letters = read_topic(kafka_broker, dead_letters, lambda r: len(r) >= m, "dead letters", partitions=1)
    assert sorted(r.value for r in letters) == sorted(value for _, value in bad.messages)
    # the reason is the key (which reason depends on the model's settings: no feature names here)
    assert {(r.key or b"").decode() for r in letters} <= set(INVALID_REASONS)
    first_scores = read_topic(
        kafka_broker, scores, lambda r: set(good.valid_ids) <= set(score_ids(r)), "first scores", partitions=1
    )
    assert score_ids(first_scores) == Counter(good.valid_ids)
    assert committed_offsets(kafka_broker, topic, group) == ends

    # 2. a restart of the same group reads only what was produced since the commit
    ends = merge_ends(ends, produce(kafka_broker, topic, later.messages))
    with sidecar() as second:
        second.wait_ready()
        s = second.wait_for_metrics(
            lambda s: committed_offsets(kafka_broker, topic, group) == ends,
            "the new events' offsets committed",
            DRAIN_TIMEOUT_SECONDS,
            settle_seconds=0.5,
        )
        code, _ = second.terminate()
    assert code == 0, f"SIGTERM exit status {code}\n{second.log_tail()}"
    # the counters restored from the state dir, plus the new events only: nothing committed was read again
    assert consumed(s) == n + m + len(later.messages)
    every = {*good.valid_ids, *later.valid_ids}
    records = read_topic(kafka_broker, scores, lambda r: every <= set(score_ids(r)), "every score", partitions=1)
    assert score_ids(records) == Counter([*good.valid_ids, *later.valid_ids]), "an event was scored twice or never"


def test_librdkafka_sink_keeps_and_resends_records_through_a_broker_outage(
    kafka09_broker: Kafka09Broker, tmp_path: Path
) -> None:
    """``KafkaSink`` over the librdkafka producer: records that time out inside librdkafka while the broker is away
    are counted, kept and re-sent, and every one arrives once it is back (Kafka 0.9: it restarts with its data)."""
    broker = kafka09_broker
    topic = new_topic(broker, "outage", partitions=1)
    producer = new_rd_producer(broker.bootstrap, broker.api_version, {}, "harmonic-test", 1000)
    config = ProducerConfig.from_settings(KafkaSettings(bootstrap_servers=broker.bootstrap, scores_topic=topic))
    sink = KafkaSink(config, producer=producer, stall_seconds=1.0)
    try:
        for i in range(20):
            sink.send(topic, f"before-{i}".encode())
        assert sink.flush(30.0), sink.degraded
        broker.stop_broker()
        try:
            for i in range(20):
                sink.send(topic, f"during-{i}".encode())
            deadline = time.monotonic() + 30.0
            while sink.failed_total["scores"] == 0 and time.monotonic() < deadline:
                assert not sink.flush(1.0)
            assert sink.failed_total["scores"] > 0, "no delivery failed within librdkafka's message timeout"
            assert sink.held == 20
            assert sink.degraded is not None and "scores records fail" in sink.degraded
        finally:
            broker.start_broker()
        deadline = time.monotonic() + 60.0
        while not sink.flush(1.0):
            assert time.monotonic() < deadline, sink.degraded
        assert sink.held == 0 and sink.degraded is None
    finally:
        sink.close()
    records = read_topic(broker, topic, lambda r: len({x.value for x in r}) >= 40, "every record", partitions=1)
    expected = {f"{stage}-{i}".encode() for stage in ("before", "during") for i in range(20)}
    assert {r.value for r in records} == expected  # at-least-once: a record acknowledged late may come twice
