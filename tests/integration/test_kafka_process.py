"""``ProcessKafkaSource`` against real brokers, driven from this process: records, commits, rebalances, errors.

The end-to-end behaviour of the sidecar with the consumer process (crash, SIGTERM, replicas) is covered by
``test_run_kafka.py``; here the source itself: every record exactly once and in partition order, commits that
land in the group, a rebalance that asks this process to flush before the partitions go, buffered records of a
revoked partition dropped (not applied twice), a clean close, and a clear error when the consumer cannot start.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from kafka import KafkaProducer

from monitor.config import KafkaSettings
from monitor.errors import SourceError
from monitor.source.base import Positions, RawRecord
from monitor.source.kafka import ConsumerConfig
from monitor.source.kafka_process import ProcessKafkaSource
from tests.integration.brokers import CONSUMER_SESSION_TIMEOUT_MS, Broker
from tests.integration.test_run_kafka import committed_offsets, group_name

PARTITIONS = 4


def _produce(broker: Broker, topic: str, n: int, start: int = 0) -> dict[int, int]:
    """``n`` values b"<i>" spread by key over the partitions; returns partition → end offset."""
    producer = KafkaProducer(**broker.kafka_kwargs(), acks="all")
    futures = [producer.send(topic, key=str(i).encode(), value=str(i).encode()) for i in range(start, start + n)]
    producer.flush(timeout=60)
    ends: dict[int, int] = {}
    for f in futures:
        meta = f.get(timeout=30)
        ends[meta.partition] = max(ends.get(meta.partition, 0), meta.offset + 1)
    producer.close(timeout=10)
    return ends


def _source(broker: Broker, topic: str, group: str, **extra: Any) -> ProcessKafkaSource:
    k = KafkaSettings(bootstrap_servers=broker.bootstrap, topic=topic, group_id=group, max_poll_records=50)
    consumer = ConsumerConfig.from_settings(k)
    consumer = replace(consumer, api_version=broker.api_version, session_timeout_ms=CONSUMER_SESSION_TIMEOUT_MS)
    return ProcessKafkaSource(consumer, log_level="info", log_format="plain", client="kafka-python", **extra)


def _drain(source: ProcessKafkaSource, want: int, seconds: float = 60.0) -> list[RawRecord]:
    got: list[RawRecord] = []
    deadline = time.monotonic() + seconds
    while len(got) < want and time.monotonic() < deadline:
        got += source.poll(0.2, 50)
    return got


class Recorder:
    """A rebalance handler that records the calls and commits what it was given, as the pipeline does."""

    def __init__(self) -> None:
        self.source: ProcessKafkaSource | None = None
        self.revoked: list[list[tuple[str, int]]] = []
        self.assigned: list[list[tuple[str, int]]] = []
        self.positions: Positions = {}

    def before_revoke(self, partitions: Sequence[tuple[str, int]]) -> None:
        self.revoked.append(sorted(partitions))
        assert self.source is not None
        self.source.commit(dict(self.positions))

    def after_assign(self, partitions: Sequence[tuple[str, int]]) -> None:
        self.assigned.append(sorted(partitions))


def test_every_record_once_in_partition_order_and_commits_land(kafka_broker: Broker, topic: str) -> None:
    ends = _produce(kafka_broker, topic, 300)
    group = group_name()
    source = _source(kafka_broker, topic, group)
    try:
        records = _drain(source, 300)
        assert sorted(int(r.value) for r in records) == list(range(300))
        for p in range(PARTITIONS):
            offsets = [r.offset for r in records if r.partition == p]
            assert offsets == list(range(len(offsets)))  # in order, no gap, no repeat
        assert source.ready and source.assigned == [(topic, p) for p in range(PARTITIONS)]
        assert all(r.topic == topic and r.headers == () for r in records)
        source.commit({(topic, p): end for p, end in ends.items()})
        source.commit({("not-ours", 0): 5})  # positions of partitions not assigned are ignored
    finally:
        source.close()
    assert committed_offsets(kafka_broker, topic, group) == ends  # durable once close() returned


def test_close_while_a_rebalance_waits_for_this_process(
    kafka_broker: Broker, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A member joins just before close: the child's listener has asked this process to flush ("revoked") when
    "close" is sent. ``close`` answers it, and the child must still read that answer. It once stopped reading
    commands at "close": the listener waited, poll() never returned, the child was killed and its commit lost."""
    ends = _produce(kafka_broker, topic, 100)
    group = group_name()
    source = _source(kafka_broker, topic, group)
    second: ProcessKafkaSource | None = None
    try:
        assert len(_drain(source, 100)) == 100
        second = _source(kafka_broker, topic, group)  # joins the group: this member's partitions are revoked
        # wait, without reading it, for the child's next message: with every record drained, its "revoked"
        assert source._out.poll(60.0), "no rebalance reached the first member"
        source.commit({(topic, p): end for p, end in ends.items()})
        with caplog.at_level(logging.WARNING, logger="monitor.source.kafka_process"):
            source.close()
        assert "did not exit" not in caplog.text
        assert source._process.returncode == 0
    finally:
        source.close()
        if second is not None:
            second.close()
    committed = committed_offsets(kafka_broker, topic, group)
    # what the first member still held after the rebalance is committed; the rest goes to the second member
    assert all(committed[p] in (None, end) for p, end in ends.items()), committed


def test_a_rebalance_asks_this_process_to_flush_and_commits_its_positions(
    kafka09_broker: Broker, kafka09_topic: str
) -> None:
    broker, topic = kafka09_broker, kafka09_topic
    _produce(broker, topic, 200)
    group = group_name()
    recorder = Recorder()
    first = _source(broker, topic, group, rebalance=recorder)
    recorder.source = first
    second: ProcessKafkaSource | None = None
    try:
        records = _drain(first, 200)
        applied = [r for r in records if r.partition in (0, 1)]  # "apply" two partitions' records only
        recorder.positions = {(topic, p): max(r.offset for r in applied if r.partition == p) + 1 for p in (0, 1)}
        second = _source(broker, topic, group)  # joins the group: the first member's partitions are revoked
        deadline = time.monotonic() + 60.0
        while not recorder.revoked and time.monotonic() < deadline:
            first.poll(0.2, 50)  # the revoke reaches this process through poll, as in the pipeline
        assert recorder.revoked and recorder.revoked[0] == [(topic, p) for p in range(PARTITIONS)]
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline and committed_offsets(broker, topic, group).get(0) is None:
            first.poll(0.2, 50)
            second.poll(0.2, 50)
        committed = committed_offsets(broker, topic, group)
        assert committed[0] == recorder.positions[(topic, 0)]  # committed by the child before the group re-formed
        assert committed[1] == recorder.positions[(topic, 1)]
        assert committed[2] is None and committed[3] is None  # nothing applied there: nothing committed
    finally:
        first.close()
        if second is not None:
            second.close()


def test_records_of_a_revoked_partition_still_buffered_are_dropped(kafka_broker: Broker, topic: str) -> None:
    _produce(kafka_broker, topic, 400)
    source = _source(kafka_broker, topic, group_name())
    try:
        first = _drain(source, 1)
        assert first  # the child has fetched; more records wait in this process's buffer
        deadline = time.monotonic() + 30.0
        while not source.buffered() and time.monotonic() < deadline:
            source._handle(*source._recv())
        buffered = {(r.topic, r.partition) for r in source.buffered()}
        assert buffered
        gone = sorted(buffered)[0]
        source._handle("revoked", (10**6, [gone]))  # as the child reports it (the child is not waiting on 10**6)
        left = source.buffered()
        assert all((r.topic, r.partition) != gone for r in left)
        assert gone not in source.assigned
    finally:
        source.close()


def test_a_consumer_that_cannot_start_is_a_source_error_with_the_reason() -> None:
    k = KafkaSettings(bootstrap_servers="127.0.0.1:9", topic="t", group_id="g", security={"bogus_option": 1})
    consumer = ConsumerConfig.from_settings(k)
    with pytest.raises(SourceError, match=r"cannot connect to Kafka at '127\.0\.0\.1:9'.*Unrecognized configs"):
        ProcessKafkaSource(consumer, log_level="info", log_format="plain", client="kafka-python")


def test_close_is_idempotent_and_a_dead_child_is_a_source_error(kafka_broker: Broker, topic: str) -> None:
    source = _source(kafka_broker, topic, group_name())
    source._process.kill()
    source._process.wait(timeout=10)
    with pytest.raises(SourceError, match="consumer process exited"):
        for _ in range(50):
            source.poll(0.2, 10)
    source.close()
    source.close()


def test_the_child_hands_over_the_common_events_as_columns(kafka_broker: Broker, topic: str) -> None:
    """With the pipeline's decoder state sent, the child decodes a share of each poll as columns: each row's event is
    the one the pipeline's decoder makes of its record; the rest comes over as records only."""
    from monitor.source.base import Polled
    from monitor.source.decode import EventDecoder
    from monitor.source.decode_ahead import DecodeAhead
    from monitor.source.validate import ModelSchema

    producer = KafkaProducer(**kafka_broker.kafka_kwargs(), acks="all")
    for i in range(200):
        doc = f'{{"id": "c{i}", "ts": {1_795_168_800_000 + i}, "features": [{i}.5, 1.0], "segment": "eu"}}'
        producer.send(topic, key=str(i).encode(), value=doc.encode())
    producer.flush(timeout=60)
    producer.close(timeout=10)
    decoder = EventDecoder({"m": ModelSchema(2, None, default_version="1")}, default_model="m", segments=["eu"])
    source = _source(kafka_broker, topic, group_name())
    try:
        source.decode_ahead(DecodeAhead.of(decoder))
        polls: list[Polled] = []
        deadline = time.monotonic() + 60.0
        while sum(map(len, polls)) < 200 and time.monotonic() < deadline:
            got = source.poll(0.2, 50)
            if got:
                assert isinstance(got, Polled)
                polls.append(got)
    finally:
        source.close()
    assert sum(map(len, polls)) == 200
    taken = 0
    for polled in polls:
        for cols in polled.columns:
            for j, row in enumerate(cols.rows.tolist()):
                record = polled[row]
                event = cols.event(j, record.origin)
                own = decoder.decode(record.value, origin=record.origin)
                assert (event.event_id, event.features.tolist(), event.timestamp_seconds, event.segment) == (
                    own.event_id,
                    own.features.tolist(),
                    own.timestamp_seconds,
                    own.segment,
                )
                taken += 1
    assert taken > 0
