"""``KafkaSource`` waits out a broker that is away — at start-up and mid-run — instead of raising.

A fake consumer stands in for kafka-python's (the real broker cases are in tests/integration/test_consumer_outage.py):
a cluster that cannot be reached when the consumer is created, or a poll that raises a connection error, leaves the
source up, empty-handed and ``degraded``, with one line of ours; it consumes again once the broker answers.
kafka-python's own lines about connections are held back by :data:`CLIENT_NOISE`.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from kafka.errors import KafkaConfigurationError, KafkaConnectionError, KafkaTimeoutError

from monitor.config import KafkaSettings
from monitor.errors import SourceError
from monitor.source import kafka as kafka_source
from monitor.source.kafka import CLIENT_NOISE, ConsumerConfig, KafkaSource, install_client_noise_filter


class FakeConsumer:
    def __init__(self, polls: list[Any]) -> None:
        self.polls = polls
        self.subscribed: list[str] = []
        self.closed = False
        self.config: dict[str, Any] = {}

    def subscribe(self, topics: list[str], listener: Any) -> None:
        self.subscribed = list(topics)

    def poll(self, timeout_ms: int, max_records: int) -> Any:
        item = self.polls.pop(0) if self.polls else {}
        if isinstance(item, Exception):
            raise item
        return item

    def commit(self, offsets: Any) -> None: ...

    def close(self, autocommit: bool = False) -> None:
        self.closed = True


@pytest.fixture
def attempts(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What each attempt to create the consumer gives: an exception to raise, or the consumer."""
    queue: list[Any] = []

    def new_consumer(config: Any) -> Any:
        item = queue.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    monkeypatch.setattr(kafka_source, "new_consumer", new_consumer)
    monkeypatch.setattr(kafka_source.time, "sleep", lambda seconds: None)  # a poll's wait: not in a unit test
    return queue


def record(offset: int) -> Any:
    from kafka.consumer.fetcher import ConsumerRecord

    return ConsumerRecord("t", 0, -1, offset, 1, 0, None, b"{}", [], None, -1, 2, -1)


def test_a_broker_away_at_start_up_is_waited_for(attempts: list[Any], caplog: pytest.LogCaptureFixture) -> None:
    from kafka.structs import TopicPartition

    consumer = FakeConsumer([{TopicPartition("t", 0): [record(0)]}])
    away = KafkaTimeoutError("Unable to bootstrap from ['b:9092']")
    attempts += [away, away, consumer]
    with caplog.at_level(logging.INFO, logger="monitor.source.kafka"):
        source = KafkaSource(
            ConsumerConfig.from_settings(KafkaSettings(bootstrap_servers="b:9092", topic="t", group_id="g"))
        )  # does not raise
        assert source.degraded is not None and "Kafka broker at 'b:9092' not reachable" in source.degraded
        assert "Unable to bootstrap" in source.degraded
        assert source.poll(0.0, 10) == []  # the second attempt fails too
        assert source.commit({("t", 0): 1}) is None and not source.ready
        got = source.poll(0.0, 10)  # the third attempt connects and reads
    assert [r.offset for r in got] == [0] and consumer.subscribed == ["t"]
    assert source.degraded is None
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count("Kafka broker not reachable; waiting for it (consumption resumes when it is back)") == 1
    assert "Kafka broker reachable again; consuming" in messages
    source.close()
    assert consumer.closed


@pytest.mark.parametrize("api_version", [None, "0.9"])
def test_the_waiting_line_names_the_old_broker_fix_only_without_a_version(
    attempts: list[Any], caplog: pytest.LogCaptureFixture, api_version: str | None
) -> None:
    """Kafka 0.9 cannot be probed for its version: a broker that is up but never bootstraps looks away. Where no
    version is set, the waiting line names ``--api-version 0.9``; where one is set, it does not."""
    attempts += [KafkaTimeoutError("Unable to bootstrap from ['b:9092']"), FakeConsumer([])]
    settings = KafkaSettings(bootstrap_servers="b:9092", topic="t", group_id="g", api_version=api_version)
    with caplog.at_level(logging.WARNING, logger="monitor.source.kafka"):
        source = KafkaSource(ConsumerConfig.from_settings(settings))
    (line,) = [r for r in caplog.records if r.getMessage().startswith("Kafka broker not reachable")]
    if api_version is None:
        assert "--api-version 0.9" in line.fix  # type: ignore[attr-defined]
    else:
        assert not hasattr(line, "fix")
    source.close()


def test_a_producer_that_cannot_bootstrap_names_the_old_broker_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    import kafka

    def refuse(**kw: Any) -> Any:
        raise KafkaTimeoutError("Unable to bootstrap from ['b:9092']")

    monkeypatch.setattr(kafka, "KafkaProducer", refuse)
    with pytest.raises(SourceError, match=r"cannot connect a producer.*Unable to bootstrap.*--api-version 0\.9"):
        kafka_source._new_producer("b:9092", None, {}, "c", 30_000)
    with pytest.raises(SourceError) as info:
        kafka_source._new_producer("b:9092", (0, 9), {}, "c", 30_000)
    assert "--api-version" not in str(info.value)


def test_a_connection_error_mid_run_is_waited_out(attempts: list[Any]) -> None:
    from kafka.structs import TopicPartition

    consumer = FakeConsumer([KafkaConnectionError("111 ECONNREFUSED"), {TopicPartition("t", 0): [record(5)]}])
    attempts.append(consumer)
    source = KafkaSource(
        ConsumerConfig.from_settings(KafkaSettings(bootstrap_servers="b:9092", topic="t", group_id="g"))
    )
    assert source.degraded is None
    assert source.poll(0.0, 10) == []
    assert source.degraded is not None and "ECONNREFUSED" in source.degraded
    assert [r.offset for r in source.poll(0.0, 10)] == [5]
    assert source.degraded is None


def test_settings_kafka_python_refuses_still_fail_at_once(attempts: list[Any]) -> None:
    attempts.append(KafkaConfigurationError("Unrecognized configs: {'bogus'}"))
    with pytest.raises(SourceError, match=r"cannot connect to Kafka at 'b:9092'.*Unrecognized configs"):
        KafkaSource(ConsumerConfig.from_settings(KafkaSettings(bootstrap_servers="b:9092", topic="t", group_id="g")))


def test_client_noise_holds_back_connection_lines_only(caplog: pytest.LogCaptureFixture) -> None:
    install_client_noise_filter()
    install_client_noise_filter()  # idempotent
    noisy = logging.getLogger("kafka.net.manager")
    assert noisy.filters.count(CLIENT_NOISE) == 1
    held = CLIENT_NOISE.held
    with caplog.at_level(logging.INFO, logger="kafka"):
        noisy.error("Connection failed: %s", "KafkaConnectionError: 111 ECONNREFUSED")
        noisy.warning("Bootstrap bootstrap-0 not ready; waiting %s secs", 0.33)
        noisy.error("something else entirely")
        logging.getLogger("kafka.cluster").error("Metadata refresh: failed %s", "Cancelled")  # the broker went away
        try:  # kafka-python's line when a broker's connection is reset mid-read (log.exception)
            raise ConnectionResetError(104, "Connection reset by peer")
        except ConnectionResetError:
            logging.getLogger("kafka.net.transport").exception("%s: Error receiving network data closing socket", "t")
        noisy.info("Attempting bootstrap to bootstrap-0")  # INFO is not held back (and not shown at WARNING)
    assert CLIENT_NOISE.held == held + 4
    assert [r.getMessage() for r in caplog.records] == [
        "something else entirely",
        "Attempting bootstrap to bootstrap-0",
    ]
    assert "Error receiving network data" in CLIENT_NOISE.last_message


def test_seek_moves_assigned_partitions_only(attempts: list[Any], caplog: pytest.LogCaptureFixture) -> None:
    """``KafkaSource.seek`` (the pipeline's re-read of the record before a saved position): assigned partitions
    only; kafka-python refusing one (revoked meanwhile) is a warning, not a failure."""
    from kafka.structs import TopicPartition

    sought: list[tuple[Any, int]] = []

    class Seeking(FakeConsumer):
        def seek(self, partition: Any, offset: int) -> None:
            if partition.partition == 1:
                raise AssertionError("Unassigned partition")  # kafka-python's check
            sought.append((partition, offset))

    attempts.append(Seeking([]))
    source = KafkaSource(
        ConsumerConfig.from_settings(
            KafkaSettings(bootstrap_servers="127.0.0.1:1", topic="t", group_id="g", lean_record_parse=False)
        )
    )
    source._assigned.update({("t", 0), ("t", 1)})
    with caplog.at_level(logging.WARNING, logger="monitor.source.kafka"):
        source.seek({("t", 0): 9, ("t", 1): 0, ("t", 2): 4})
    assert sought == [(TopicPartition("t", 0), 9)]
    assert [r.getMessage() for r in caplog.records if r.name == "monitor.source.kafka"] == ["seek not done"]


class Coordinator:
    def __init__(self, state: str) -> None:
        self.state = state
        self._generation = "Generation(generation_id=3, member_id='m', protocol='range')"

    def need_rejoin(self) -> bool:
        return self.state != "<stable>"

    def request_rejoin(self) -> None: ...


class Member(FakeConsumer):
    """A consumer whose group membership (kafka-python's coordinator state) the test sets."""

    def __init__(self, state: str) -> None:
        super().__init__([])
        self._coordinator = Coordinator(state)


class Handler:
    def __init__(self) -> None:
        self.revoked: list[list[tuple[str, int]]] = []

    def before_revoke(self, partitions: Any) -> None:
        self.revoked.append(list(partitions))

    def after_assign(self, partitions: Any) -> None: ...


def test_a_consumer_that_never_rejoins_its_group_is_created_afresh(
    attempts: list[Any], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A member left out of its group while the broker answers (kafka-python once waited for good after a revoke)
    is closed and created again after ``REJOIN_SESSIONS`` session timeouts (at least ``REJOIN_MIN_SECONDS``); the
    partitions it still held are revoked through the handler first; a stable member, with or without partitions,
    is left alone."""
    now = [1000.0]
    monkeypatch.setattr(kafka_source.time, "monotonic", lambda: now[0])
    stuck, fresh = Member("<rebalancing>"), Member("<stable>")
    attempts += [stuck, fresh]
    handler = Handler()
    source = KafkaSource(
        ConsumerConfig.from_settings(
            KafkaSettings(bootstrap_servers="b:9092", topic="t", group_id="g", session_timeout_ms=10_000)
        ),
        rebalance=handler,
    )
    source._assigned.add(("t", 0))
    wait = max(kafka_source.REJOIN_MIN_SECONDS, kafka_source.REJOIN_SESSIONS * 10.0)
    assert wait == 50.0
    source.poll(0.0, 10)  # the wait starts
    now[0] += wait - 1
    source.poll(0.0, 10)
    assert not stuck.closed and source.rejoins == 0
    now[0] += 2
    with caplog.at_level(logging.WARNING, logger="monitor.source.kafka"):
        source.poll(0.0, 10)
    assert stuck.closed and source.rejoins == 1 and handler.revoked == [[("t", 0)]] and not source.ready
    line = [r for r in caplog.records if r.name == "monitor.source.kafka"]
    assert [r.getMessage() for r in line] == [
        "Kafka consumer has not joined its group in time; closing it and joining afresh"
    ]
    assert line[0].__dict__["member_state"] == "<rebalancing>" and line[0].__dict__["waited_seconds"] == 51.0
    source.poll(0.0, 10)  # the next poll creates the consumer again
    assert fresh.subscribed == ["t"]
    now[0] += 10 * wait  # a stable member without partitions (more members than partitions) stays
    source.poll(0.0, 10)
    source.poll(0.0, 10)
    assert not fresh.closed and source.rejoins == 1
