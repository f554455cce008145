"""``kafka.client: librdkafka``: settings → librdkafka configuration (Kafka 0.9 fallback, security names), and
``RdKafkaSource`` / ``RdProducer`` over fake confluent-kafka clients (column batches, exact manual commits,
rebalance callbacks, delivery reports as the kafka-python future interface ``KafkaSink`` uses)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from kafka import errors

from monitor.config import KafkaSettings
from monitor.errors import ConfigError, SourceError
from monitor.runtime.service import Service
from monitor.source import rdkafka
from monitor.source.base import RebalanceHandler
from monitor.source.kafka_config import ConsumerConfig, ProducerConfig
from monitor.source.kafka_sink import KafkaSink
from monitor.source.rdkafka import RdKafkaSource, RdProducer, consumer_conf, producer_conf, security_conf
from tests.unit.test_pipeline import make_settings

# ------------------------------------------------------------------------------------------ configuration


def test_consumer_conf_commits_only_by_hand_and_carries_the_fetch_settings() -> None:
    k = KafkaSettings(bootstrap_servers=" b1:9092 ,b2:9093,", group_id="g", session_timeout_ms=6000)
    args = ConsumerConfig.from_settings(k)
    conf = consumer_conf(
        args.bootstrap_servers,
        args.group_id,
        api_version=args.api_version,
        security=args.security,
        auto_offset_reset=args.auto_offset_reset,
        session_timeout_ms=args.session_timeout_ms,
        fetch_max_wait_ms=args.fetch_max_wait_ms,
        max_partition_fetch_bytes=args.max_partition_fetch_bytes,
    )
    assert conf == {
        "bootstrap.servers": "b1:9092,b2:9093",
        "client.id": "harmonic-monitor",
        "group.id": "g",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 2000,
        "topic.metadata.refresh.interval.ms": 10_000,
        # a full local queue pauses fetching for this long: librdkafka's 1,000 ms left a decoding consumer idle
        "fetch.queue.backoff.ms": 10,
        "fetch.wait.max.ms": k.fetch_max_wait_ms,
        "max.partition.fetch.bytes": k.max_partition_fetch_bytes,
    }
    # librdkafka accepts every property it is given (a typo would raise here)
    confluent_kafka.Consumer(conf).close()


@pytest.mark.parametrize(
    ("api_version", "expected"),
    [
        ("0.9", {"api.version.request": False, "broker.version.fallback": "0.9.0.1"}),
        ("0.9.0.1", {"api.version.request": False, "broker.version.fallback": "0.9.0.1"}),
        ("0.8.2", {"api.version.request": False, "broker.version.fallback": "0.8.2"}),
        ("0.10", {}),
        ("2.8", {}),
        (None, {}),
    ],
)
def test_brokers_before_0_10_get_version_probing_off_and_a_fallback(
    api_version: str | None, expected: dict[str, Any]
) -> None:
    k = KafkaSettings(api_version=api_version)
    for conf in (
        consumer_conf(
            k.bootstrap_servers,
            k.group_id,
            api_version=k.api_version_tuple(),
            auto_offset_reset=k.auto_offset_reset,
            session_timeout_ms=k.session_timeout_ms,
        ),
        producer_conf(k.bootstrap_servers, api_version=k.api_version_tuple()),
    ):
        got = {key: conf[key] for key in ("api.version.request", "broker.version.fallback") if key in conf}
        assert got == expected


def test_producer_conf_is_acks_all_with_the_delivery_timeout() -> None:
    conf = producer_conf("b:9092", api_version=(0, 9), delivery_timeout_ms=7000, client_id="x")
    assert conf["acks"] == "all"
    assert conf["message.timeout.ms"] == 7000
    assert conf["client.id"] == "x"
    assert conf["broker.version.fallback"] == "0.9.0.1"
    confluent_kafka.Producer(conf).flush(0)


def test_security_takes_kafka_python_or_librdkafka_names() -> None:
    conf = security_conf(
        {
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": "user",
            "sasl_plain_password": "secret",
            "ssl_cafile": "/ca.pem",
            "ssl_check_hostname": True,
            "ssl.key.location": "/key.pem",
        }
    )
    assert conf == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "user",
        "sasl.password": "secret",
        "ssl.ca.location": "/ca.pem",
        "ssl.endpoint.identification.algorithm": "https",
        "ssl.key.location": "/key.pem",
    }


def test_an_unknown_security_name_is_refused_with_the_fix() -> None:
    with pytest.raises(SourceError, match=r"kafka\.security\.ssl_context has no librdkafka equivalent.*dotted name"):
        security_conf({"ssl_context": "x"})


def test_librdkafka_takes_the_consumer_process_as_kafka_python_does(monkeypatch: pytest.MonkeyPatch) -> None:
    assert KafkaSettings(client="librdkafka", consumer_process=False).use_consumer_process() is False
    assert KafkaSettings(client="librdkafka", consumer_process=True).use_consumer_process() is True
    for cpus, expected in ((1, False), (2, True)):  # the default: the child on 2+ CPUs, as with kafka-python
        monkeypatch.setattr("monitor.config_stream.available_cpus", lambda cpus=cpus: cpus)
        assert KafkaSettings(client="librdkafka").use_consumer_process() is expected


def test_the_client_setting_is_checked(tmp_path: Path) -> None:
    with pytest.raises((ValueError, ConfigError), match="kafka-python"):
        KafkaSettings(client="rdkafka")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ the consumer


class FakeMessage:
    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]] | None = None,
        timestamp: tuple[int, int] = (1, 1000),
        error: KafkaError | None = None,
    ) -> None:
        self._t, self._p, self._o, self._v, self._h, self._ts, self._e = (
            topic,
            partition,
            offset,
            value,
            headers,
            timestamp,
            error,
        )

    def topic(self) -> str:
        return self._t

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def value(self) -> bytes | None:
        return self._v

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return self._h

    def timestamp(self) -> tuple[int, int]:
        return self._ts

    def error(self) -> KafkaError | None:
        return self._e


class FakeConsumer:
    """confluent-kafka's ``Consumer`` as ``RdKafkaSource`` uses it; ``consume`` serves scripted batches and runs the
    rebalance callbacks first, as librdkafka does inside ``consume``."""

    instances: list[FakeConsumer] = []

    def __init__(self, conf: dict[str, Any]) -> None:
        self.conf = conf
        self.batches: list[list[FakeMessage]] = []
        self.events: list[tuple[str, list[tuple[str, int]]]] = []
        self.commits: list[list[tuple[str, int, int]]] = []
        self.modes: list[str] = []
        self.commit_result: list[TopicPartition] | None = None
        self.commit_raises: KafkaException | None = None
        self.consume_args: list[tuple[int, float]] = []
        self.closed = False
        #: (topic, partition) → (low, high) as librdkafka last fetched them; -1001: not fetched yet
        self.watermarks: dict[tuple[str, int], tuple[int, int]] = {}
        FakeConsumer.instances.append(self)

    def subscribe(self, topics: list[str], **callbacks: Callable[..., None]) -> None:
        self.topics = topics
        self.callbacks = callbacks

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        self.consume_args.append((num_messages, timeout))
        for kind, parts in self.events:
            self.callbacks[f"on_{kind}"](self, [TopicPartition(t, p) for t, p in parts])
        self.events.clear()
        return self.batches.pop(0) if self.batches else []

    def commit(self, offsets: list[TopicPartition], asynchronous: bool) -> list[TopicPartition] | None:
        if self.commit_raises is not None:
            raise self.commit_raises
        self.commits.append([(tp.topic, tp.partition, tp.offset) for tp in offsets])
        self.modes.append("async" if asynchronous else "sync")
        if asynchronous:  # the outcome comes with a later consume: served here at once
            self.conf["on_commit"](None, self.commit_result or [])
            return None
        return self.commit_result

    def close(self) -> None:
        self.closed = True

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, p in sorted(self.watermarks)]

    def get_watermark_offsets(self, tp: TopicPartition, cached: bool) -> tuple[int, int]:
        assert cached is True  # no request to the broker on the loop's path
        return self.watermarks[(tp.topic, tp.partition)]


def events_source(rebalance: RebalanceHandler | None = None) -> RdKafkaSource:
    """The source these tests drive: topic "events" at b:9092, group "g"."""
    return RdKafkaSource(
        ConsumerConfig.from_settings(KafkaSettings(bootstrap_servers="b:9092", topic="events", group_id="g")),
        rebalance=rebalance,
    )


class Handler:
    def __init__(self, source: list[RdKafkaSource]) -> None:
        self.source = source
        self.calls: list[tuple[str, list[tuple[str, int]]]] = []

    def before_revoke(self, partitions: Sequence[tuple[str, int]]) -> None:
        self.calls.append(("revoke", list(partitions)))
        # the pipeline commits what it checkpointed while the partitions are still owned
        self.source[0].commit({p: 7 for p in partitions})

    def after_assign(self, partitions: Sequence[tuple[str, int]]) -> None:
        self.calls.append(("assign", list(partitions)))


@pytest.fixture
def fake_consumer(monkeypatch: pytest.MonkeyPatch) -> type[FakeConsumer]:
    FakeConsumer.instances = []
    monkeypatch.setattr(confluent_kafka, "Consumer", FakeConsumer)
    return FakeConsumer


def test_source_polls_column_batches_per_partition(fake_consumer: type[FakeConsumer]) -> None:
    source = RdKafkaSource(
        ConsumerConfig.from_settings(
            KafkaSettings(
                bootstrap_servers="b:9092",
                topic="events",
                labels_topic="labels",
                group_id="g",
                api_version="0.9",
                max_poll_records=50,
            )
        )
    )
    consumer = fake_consumer.instances[0]
    assert consumer.topics == ["events", "labels"]
    assert consumer.conf["broker.version.fallback"] == "0.9.0.1"
    assert consumer.conf["enable.auto.commit"] is False
    consumer.events.append(("assign", [("events", 0), ("events", 1)]))
    consumer.batches.append(
        [
            FakeMessage("events", 0, 10, b"a"),
            FakeMessage("events", 1, 3, None, timestamp=(0, -1)),
            FakeMessage("events", 0, 11, b"b", headers=[("h", b"1"), ("n", None)]),
            FakeMessage("events", 0, 12, b"c"),
            FakeMessage("events", 0, -1, None, error=KafkaError(KafkaError._TRANSPORT)),
        ]
    )
    assert not source.ready
    batches = source.poll_columns(0.5, 100)
    assert consumer.consume_args == [(100, 0)]  # records were queued: taken without waiting
    assert source.ready and source.assigned == [("events", 0), ("events", 1)]
    assert batches == [
        ("events", 0, [b"a", b"b", b"c"], [(), (("h", b"1"), ("n", b"")), ()], [10, 11, 12], [1000, 1000, 1000]),
        ("events", 1, [b""], None, [3], [None]),
    ]
    consumer.batches.append([FakeMessage("events", 1, 4, b"d")])
    records = source.poll(0.1, 10)
    assert [(r.value, r.topic, r.partition, r.offset, r.timestamp_ms, r.headers) for r in records] == [
        (b"d", "events", 1, 4, 1000, ())
    ]
    assert source.poll(0.1, 10) == []
    # a poll of errors only (a topic not there yet after a broker restart) is an empty poll, not a crash
    consumer.batches.append([FakeMessage("events", 0, -1, None, error=KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))])
    assert source.poll_columns(0.1, 10) == []
    assert not source.exhausted
    source.close()
    assert consumer.closed


def test_source_waits_for_one_record_only_when_none_is_queued(fake_consumer: type[FakeConsumer]) -> None:
    """librdkafka's batch consume waits for all num_messages or the timeout: the source never asks it to wait for a
    full batch, so a slow topic's records come back as soon as the first arrives."""
    source = RdKafkaSource(
        ConsumerConfig.from_settings(
            KafkaSettings(bootstrap_servers="b:9092", topic="events", group_id="g", max_poll_records=50)
        )
    )
    consumer = fake_consumer.instances[0]
    consumer.batches += [[], [FakeMessage("events", 0, 1, b"a")], [FakeMessage("events", 0, 2, b"b")]]
    (batch,) = source.poll_columns(0.5, 100)
    assert consumer.consume_args == [(100, 0), (1, 0.5), (99, 0)]
    assert batch[2] == [b"a", b"b"] and batch[4] == [1, 2]
    consumer.consume_args.clear()
    assert source.poll_columns(0.2, 100) == [] and consumer.consume_args == [(100, 0), (1, 0.2)]
    source.close()


def test_source_commits_exactly_the_positions_of_owned_partitions(
    fake_consumer: type[FakeConsumer], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    source = events_source()
    consumer = fake_consumer.instances[0]
    source.commit({("events", 0): 5})
    assert consumer.commits == []  # nothing assigned yet: nothing to commit
    consumer.events.append(("assign", [("events", 0), ("events", 2)]))
    source.poll(0.0, 1)
    source.commit({("events", 2): 9, ("events", 0): 5, ("events", 3): 1})
    assert consumer.commits == [[("events", 0, 5), ("events", 2, 9)]]
    # a refused commit is logged, never raised: the events are re-delivered
    # (the per-partition result librdkafka returns; its error attribute is read-only on a real TopicPartition)
    failed = SimpleNamespace(topic="events", partition=0, offset=6, error=KafkaError(KafkaError.REBALANCE_IN_PROGRESS))
    consumer.commit_result = [failed]  # type: ignore[list-item]
    source.commit({("events", 0): 6})
    consumer.commit_raises = KafkaException(KafkaError(KafkaError._NO_OFFSET))
    source.commit({("events", 0): 7})
    assert [r.getMessage() for r in caplog.records].count("offset commit failed; events will be re-delivered") == 2
    assert consumer.modes == ["async", "async"]  # off a revoke, a commit does not wait for the coordinator
    # while the broker is away no commit is sent (librdkafka's would wait for it); the close commits the last
    # positions asked for, synchronously, once it is back
    consumer.commit_raises = None
    consumer.commit_result = None
    consumer.conf["error_cb"](KafkaError(KafkaError._ALL_BROKERS_DOWN))
    source.commit({("events", 0): 8})
    assert consumer.commits[-1] == [("events", 0, 6)]
    source.close()
    assert consumer.commits[-1] == [("events", 0, 6)]  # still away at close: not sent
    consumer.conf["stats_cb"](_stats(("b:9092/1", "UP", "learned")))
    source.close()
    assert consumer.commits[-1] == [("events", 0, 8)] and consumer.modes[-1] == "sync"


def test_revoke_applies_and_commits_before_the_partitions_go(fake_consumer: type[FakeConsumer]) -> None:
    holder: list[RdKafkaSource] = []
    handler = Handler(holder)
    holder.append(events_source(handler))
    source, consumer = holder[0], fake_consumer.instances[0]
    consumer.events.append(("assign", [("events", 0), ("events", 1)]))
    source.poll(0.0, 1)
    consumer.events.append(("revoke", [("events", 1)]))
    source.poll(0.0, 1)
    assert handler.calls == [("assign", [("events", 0), ("events", 1)]), ("revoke", [("events", 1)])]
    assert consumer.commits == [[("events", 1, 7)]] and consumer.modes == ["sync"]  # landed while still owned
    assert source.assigned == [("events", 0)]
    # lost partitions (session expired) are dropped without a commit: another member may own them; the handler
    # still applies what it read of them (and holds where it got, for a re-delivery to this member)
    consumer.events.append(("lost", [("events", 0)]))
    source.poll(0.0, 1)
    assert handler.calls[-1] == ("revoke", [("events", 0)])
    assert consumer.commits == [[("events", 1, 7)]]  # the handler's commit of a lost partition is not sent
    assert not source.ready


def test_partitions_lost_while_the_broker_is_away_leave_the_source_ready_and_degraded(
    fake_consumer: type[FakeConsumer],
) -> None:
    source = events_source()
    consumer = fake_consumer.instances[0]
    consumer.conf["error_cb"](KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    assert not source.ready  # away before its first assignment: not ready
    consumer.conf["stats_cb"](_stats(("b:9092/1", "UP", "learned")))
    consumer.events.append(("assign", [("events", 0)]))
    source.poll(0.0, 1)
    consumer.conf["error_cb"](KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    consumer.events.append(("lost", [("events", 0)]))
    source.poll(0.0, 1)
    assert source.assigned == [] and source.degraded is not None
    assert source.ready  # degraded, not dead: it stays in the scrape path
    consumer.conf["stats_cb"](_stats(("b:9092/1", "UP", "learned")))
    assert not source.ready  # the broker is back, the group not joined yet: unready until it assigns again


def test_source_reports_the_log_end_offsets_librdkafka_last_fetched(fake_consumer: type[FakeConsumer]) -> None:
    source = events_source()
    fake_consumer.instances[0].watermarks = {("events", 0): (0, 120), ("events", 1): (-1001, -1001)}
    assert source.highwaters() == {("events", 0): 120}  # a partition not fetched yet has no end to report


def test_client_errors_are_logged_not_raised(
    fake_consumer: type[FakeConsumer], caplog: pytest.LogCaptureFixture
) -> None:
    events_source()
    fake_consumer.instances[0].conf["error_cb"](KafkaError(KafkaError._AUTHENTICATION))
    assert "Kafka client error" in caplog.text


def _stats(*brokers: tuple[str, str, str]) -> str:
    """librdkafka's statistics JSON, its ``brokers`` part: (name, state, source) each."""
    return json.dumps(
        {"brokers": {name: {"name": name, "state": state, "source": source} for name, state, source in brokers}}
    )


def test_a_cluster_not_reached_is_an_outage_until_a_broker_is_up_again(
    fake_consumer: type[FakeConsumer], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    source = events_source()
    conf = fake_consumer.instances[0].conf
    assert conf["statistics.interval.ms"] == rdkafka.STATS_INTERVAL_MS
    # one connection failing is not an outage: another broker may answer
    conf["error_cb"](KafkaError(KafkaError._TRANSPORT, "b:9092/1: Connect to ipv4#10.0.0.1:9092 failed"))
    assert source.degraded is None
    conf["error_cb"](KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    assert source.away is not None
    assert source.degraded is not None and "Kafka broker at 'b:9092' not reachable" in source.degraded
    assert "1/1 brokers are down" in source.degraded
    assert "Kafka broker not reachable; waiting for it" in caplog.text
    # while away, a connection failure is the outage's latest reason
    conf["error_cb"](KafkaError(KafkaError._TRANSPORT, "Connection refused"))
    assert "Connection refused" in (source.degraded or "")
    # the group coordinator is a logical broker: its connection up says nothing of a real one
    conf["stats_cb"](_stats(("b:9092/bootstrap", "INIT", "configured"), ("GroupCoordinator", "UP", "logical")))
    assert source.away is not None
    conf["stats_cb"]("not json")
    assert source.away is not None
    conf["stats_cb"](_stats(("b:9092/1", "UP", "learned"), ("GroupCoordinator", "UP", "logical")))
    assert source.degraded is None
    assert "Kafka broker reachable again" in caplog.text
    # records coming also end an outage
    conf["error_cb"](KafkaError(KafkaError._ALL_BROKERS_DOWN))
    assert source.away is not None
    fake_consumer.instances[0].batches.append([FakeMessage("events", 0, 0, b"{}")])
    assert len(source.poll(0.0, 10)) == 1
    assert source.away is None


def test_librdkafka_lines_about_connections_are_held_back_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    held = rdkafka.CLIENT_NOISE.held
    caplog.set_level(logging.INFO, logger=rdkafka.client_log.name)
    refused = "FAIL [harmonic-monitor#consumer-1] [thrd:b:9092/bootstrap]: Connect to ipv4#10.0.0.1:9092 failed: Connection refused"
    rdkafka.client_log.error(refused)
    rdkafka.client_log.warning("SESSTMOUT [harmonic-monitor#consumer-1]: Consumer group session timed out")
    rdkafka.client_log.error("PROTOERR [harmonic-monitor#consumer-1]: Protocol parse failure for Metadata v0")
    assert rdkafka.CLIENT_NOISE.held == held + 1
    assert "Connection refused" not in caplog.text
    assert "session timed out" in caplog.text and "Protocol parse failure" in caplog.text  # everything else passes


def test_invalid_consumer_settings_are_a_source_error() -> None:
    with pytest.raises(SourceError, match="cannot create a librdkafka client for Kafka at 'b:9092'"):
        RdKafkaSource(
            ConsumerConfig.from_settings(
                KafkaSettings(
                    bootstrap_servers="b:9092", topic="events", group_id="g", security={"no.such.property": "x"}
                )
            )
        )


def test_service_builds_the_librdkafka_source_and_sink(
    tmp_path: Path, fake_consumer: type[FakeConsumer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(confluent_kafka, "Producer", FakeProducer)
    settings = make_settings(
        tmp_path,
        # in this process (the fake consumer's): the child process is the default on 2+ CPUs
        kafka={"client": "librdkafka", "scores_topic": "scores", "api_version": "0.9", "consumer_process": False},
        metrics={"port": 0},  # any free port: 9108 may be taken on a shared machine
    )
    svc = Service.from_settings(settings)
    try:
        assert isinstance(svc.source, RdKafkaSource)
        assert isinstance(svc.sink, KafkaSink)
        assert not svc.sink.headers_supported  # Kafka 0.9 stores no record headers
        assert fake_consumer.instances[0].conf["api.version.request"] is False
    finally:
        svc.sink.close()


# ------------------------------------------------------------------------------------------ the producer


class FakeProducer:
    """confluent-kafka's ``Producer``: ``produce`` queues, ``poll`` serves delivery reports set by the test."""

    def __init__(self, conf: dict[str, Any]) -> None:
        self.conf = conf
        self.queued: list[tuple[str, bytes | None, bytes | None, Any, Callable[..., None]]] = []
        self.raises: BaseException | None = None
        self.purged = False

    def produce(
        self, topic: str, value: bytes | None, key: bytes | None, headers: Any, on_delivery: Callable[..., None]
    ) -> None:
        if self.raises is not None:
            raise self.raises
        self.queued.append((topic, value, key, headers, on_delivery))

    def poll(self, timeout: float) -> int:
        return 0

    def flush(self, timeout: float) -> int:
        return len(self.queued)

    def purge(self) -> None:
        self.purged = True
        self.queued.clear()

    def __len__(self) -> int:
        return len(self.queued)


@pytest.fixture
def producer(monkeypatch: pytest.MonkeyPatch) -> RdProducer:
    monkeypatch.setattr(confluent_kafka, "Producer", FakeProducer)
    return rdkafka.new_rd_producer("b:9092", (0, 9), {}, "harmonic-monitor", 5000)


def test_producer_delivery_reports_reach_the_sink_callbacks(producer: RdProducer) -> None:
    fake: FakeProducer = producer._producer  # type: ignore[assignment]
    assert fake.conf["message.timeout.ms"] == 5000 and fake.conf["acks"] == "all"
    assert producer.config["api_version"] == (0, 9)
    got: list[tuple[str, object]] = []
    for value in (b"a", b"b", b"c"):
        f = producer.send("scores", value=value, key=b"k", headers=[("h", b"v")])
        f.add_callback(lambda tag, meta: got.append((tag, meta)), f"ok-{value.decode()}")
        f.add_errback(lambda tag, exc: got.append((tag, exc)), f"err-{value.decode()}")
    assert [q[:4] for q in fake.queued] == [("scores", v, b"k", [("h", b"v")]) for v in (b"a", b"b", b"c")]
    fake.queued[0][4](None, "msg")
    fake.queued[1][4](KafkaError(KafkaError.MSG_SIZE_TOO_LARGE), None)
    fake.queued[2][4](KafkaError(KafkaError._MSG_TIMED_OUT), None)
    assert got[0] == ("ok-a", "msg")
    assert got[1][0] == "err-b" and isinstance(got[1][1], errors.MessageSizeTooLargeError)
    assert got[2][0] == "err-c" and type(got[2][1]) is errors.KafkaError
    assert "MSG_TIMED_OUT" in str(got[2][1])
    producer.close(0.0)
    assert fake.purged


def test_a_delivery_report_before_the_callbacks_are_added_is_not_lost(producer: RdProducer) -> None:
    # the poll thread may serve the report between produce() returning and the sink adding its callbacks
    fake: FakeProducer = producer._producer  # type: ignore[assignment]
    got: list[tuple[str, object]] = []
    ok, bad = producer.send("scores", value=b"a"), producer.send("scores", value=b"b")
    fake.queued[0][4](None, "msg")
    fake.queued[1][4](KafkaError(KafkaError._MSG_TIMED_OUT), None)
    for f in (ok, bad):
        f.add_callback(lambda meta: got.append(("ok", meta)))
        f.add_errback(lambda exc: got.append(("error", exc)))
    assert got[0] == ("ok", "msg")
    assert got[1][0] == "error" and isinstance(got[1][1], errors.KafkaError)
    assert len(got) == 2  # each outcome once, to the matching side only
    fake.queued[0][4](None, "again")  # a report with no callbacks left runs nothing more
    assert len(got) == 2
    producer.close()


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (BufferError("Local: Queue full"), errors.KafkaTimeoutError),
        (KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)), errors.MessageSizeTooLargeError),
        (KafkaException(KafkaError(KafkaError._UNKNOWN_TOPIC)), errors.KafkaError),
    ],
)
def test_producer_refusals_become_the_errors_the_sink_tells_apart(
    producer: RdProducer, raised: BaseException, expected: type[BaseException]
) -> None:
    fake: FakeProducer = producer._producer  # type: ignore[assignment]
    fake.raises = raised
    with pytest.raises(expected):
        producer.send("scores", value=b"x")
    producer.close()


def test_sink_over_librdkafka_holds_a_record_until_acknowledged(producer: RdProducer) -> None:
    fake: FakeProducer = producer._producer  # type: ignore[assignment]
    sink = KafkaSink(
        ProducerConfig.from_settings(KafkaSettings(bootstrap_servers="b:9092", dead_letter_topic="dlq")),
        producer=producer,
    )
    sink.send("dlq", b"raw bytes \xff", headers=[("reason", b"bad_json")], key=b"bad_json")
    assert sink.held == 1
    assert fake.queued[0][:4] == ("dlq", b"raw bytes \xff", b"bad_json", None)  # 0.9: headers dropped
    fake.queued[0][4](KafkaError(KafkaError._TRANSPORT), None)  # failed: kept and handed over again
    assert sink.held == 1 and sink.failed_total["dead_letter"] == 1
    assert not sink.flush(0.0)
    assert len(fake.queued) == 2
    fake.queued[1][4](None, "msg")
    assert sink.flush(0.0)
    sink.close()


def test_invalid_producer_settings_are_a_source_error() -> None:
    with pytest.raises(SourceError, match="cannot create a librdkafka producer for 'b:9092'"):
        rdkafka.new_rd_producer("b:9092", None, {"no.such.property": "x"}, "x", 5000)


def test_messages_are_grouped_per_partition_in_fetch_order_with_one_topic_or_several() -> None:
    from monitor.source.rdkafka import _runs

    def grouped(messages: list[FakeMessage]) -> dict[tuple[str, int], list[int]]:
        return {key: [m.offset() for m in run] for key, run in _runs(messages).items()}  # type: ignore[arg-type]

    one = [FakeMessage("events", p, o, b"v") for p, o in [(2, 7), (2, 8), (0, 1), (2, 9), (1, 4), (1, 5)]]
    assert grouped(one) == {("events", 2): [7, 8, 9], ("events", 0): [1], ("events", 1): [4, 5]}
    two = [FakeMessage(t, p, o, b"v") for t, p, o in [("a", 0, 1), ("b", 0, 5), ("b", 0, 6), ("a", 0, 2), ("a", 1, 3)]]
    assert grouped(two) == {("a", 0): [1, 2], ("b", 0): [5, 6], ("a", 1): [3]}
