"""A producer that can never send again is replaced: ``KafkaSink`` over fake producers that turn fatal, the records
they held re-sent through the new one (nothing lost, nothing counted twice), the replacements paced by a backoff;
and ``fatal_error`` on the real clients' producers (kafka-python's idempotent producer, librdkafka's)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import confluent_kafka
import pytest
from kafka.errors import KafkaError, OutOfOrderSequenceNumberError

from monitor.errors import SourceError
from monitor.source import rdkafka
from monitor.source.kafka_sink import KafkaSink
from monitor.source.producer_renewal import Renewal, fatal_error
from tests.unit.test_kafka_sink import DLQ, SCORES, FakeProducer, producer_config
from tests.unit.test_pipeline import FakeClock
from tests.unit.test_rdkafka import FakeProducer as FakeRdProducer

FATAL = KafkaError("Unexpected error in InitProducerIdResponse: [Error -1] UnknownError")


class Factory:
    """Makes fake producers, one per call (or raises ``refuse``); the last one made is ``made[-1]``."""

    def __init__(self) -> None:
        self.made: list[FakeProducer] = []
        self.refuse: BaseException | None = None

    def __call__(self) -> FakeProducer:
        if self.refuse is not None:
            raise self.refuse
        self.made.append(FakeProducer())
        return self.made[-1]


def _sink(factory: Factory, clock: FakeClock) -> KafkaSink:
    return KafkaSink(producer_config(), new_producer=factory, clock=clock)


def _go_fatal(producer: FakeProducer) -> None:
    """What kafka-python's idempotent producer does when its broker refuses its epoch bump: fatal, batches aborted."""
    producer.fatal_error = FATAL  # type: ignore[attr-defined]
    producer.fail_all(FATAL)


def test_a_fatal_producer_is_replaced_and_what_it_held_is_sent_again() -> None:
    factory, clock = Factory(), FakeClock()
    sink = _sink(factory, clock)
    first = factory.made[0]
    sink.send(SCORES, b"acked")
    first.ack_all()
    sink.send(SCORES, b"s1")
    sink.send(DLQ, b"d1")
    sink.send(DLQ, b"d2")
    first.pending()[0].fail(OutOfOrderSequenceNumberError())  # one failed before the fatal state: waiting
    _go_fatal(first)  # the rest aborted with the fatal error
    assert sink.held == 3 and sink.failed_total == {"dead_letter": 2, "scores": 1}
    assert not sink.flush(0.0)
    assert len(factory.made) == 2 and first.closed == [0.0]
    second = factory.made[1]
    assert sorted(v for v in second.values() if v is not None) == [b"d1", b"d2", b"s1"]
    second.ack_all()
    assert sink.flush(0.0)
    assert (sink.held, sink.acknowledged_total, sink.renewal.total) == (0, 4, 1)


def test_records_in_flight_in_the_replaced_producer_are_sent_again_and_its_late_outcomes_ignored() -> None:
    factory, clock = Factory(), FakeClock()
    sink = _sink(factory, clock)
    first = factory.made[0]
    sink.send(SCORES, b"s1")
    sink.send(SCORES, b"s2")
    first.fatal_error = FATAL  # type: ignore[attr-defined]  # fatal, but its futures not failed (yet)
    assert not sink.flush(0.0)
    second = factory.made[1]
    assert second.values() == [b"s1", b"s2"]
    first.pending()[0].succeed()  # the old producer's late answers: the records are in the new one already
    first.fail_all(FATAL)
    assert sink.held == 2 and sink.failed_total["scores"] == 0
    second.ack_all()
    assert sink.flush(0.0) and sink.acknowledged_total == 2


def test_replacements_back_off_and_start_over_once_one_delivers() -> None:
    factory, clock = Factory(), FakeClock()
    sink = _sink(factory, clock)
    sink.send(SCORES, b"s")
    _go_fatal(factory.made[0])
    sink.flush(0.0)
    assert len(factory.made) == 2
    _go_fatal(factory.made[1])  # the new one goes fatal at once (the broker is still confused)
    sink.flush(0.0)
    assert len(factory.made) == 2  # not yet: the backoff (1 s) runs
    clock.now += 1.0
    sink.flush(0.0)
    assert len(factory.made) == 3 and sink.renewal.backoff_seconds == 4.0
    factory.made[2].ack_all()
    assert sink.flush(0.0) and sink.renewal.backoff_seconds == 1.0


def test_a_replacement_that_cannot_be_made_keeps_the_records_and_is_tried_again() -> None:
    factory, clock = Factory(), FakeClock()
    sink = _sink(factory, clock)
    sink.send(DLQ, b"d")
    _go_fatal(factory.made[0])
    factory.refuse = SourceError("cannot connect a producer to Kafka at 'broker:9092'")
    assert not sink.flush(0.0)
    assert sink.held == 1 and sink.renewal.total == 0
    factory.refuse = None
    sink.flush(0.0)
    assert len(factory.made) == 1 and sink.renewal.wait_seconds == 1.0  # within the backoff
    clock.now += 1.0
    sink.flush(0.0)
    assert len(factory.made) == 2 and factory.made[1].values() == [b"d"]


def test_a_producer_given_without_a_factory_is_never_replaced() -> None:
    producer = FakeProducer()
    sink = KafkaSink(producer_config(), producer=producer, clock=FakeClock())
    sink.send(DLQ, b"d")
    _go_fatal(producer)
    assert not sink.flush(0.0)
    assert sink.held == 1 and producer.closed == [] and sink.renewal.total == 0


@pytest.fixture
def kafka_python_producer() -> Iterator[object]:
    from kafka import KafkaProducer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        # no broker there: the producer is only built (api_version given: no bootstrap at construction)
        producer = KafkaProducer(bootstrap_servers="127.0.0.1:9", api_version=(2, 8), reconnect_backoff_ms=10_000)
    yield producer
    producer.close(timeout=0)


def test_fatal_error_reads_kafka_pythons_idempotent_producer(kafka_python_producer: object) -> None:
    # pins kafka-python's private state the sink reads: its transaction manager's fatal error
    assert fatal_error(kafka_python_producer) is None
    kafka_python_producer._transaction_manager.transition_to_fatal_error(FATAL)  # type: ignore[attr-defined]
    assert fatal_error(kafka_python_producer) is FATAL


def test_fatal_error_reads_librdkafkas_fatal_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(confluent_kafka, "Producer", FakeRdProducer)
    producer = rdkafka.new_rd_producer("b:9092", None, {}, "harmonic-monitor", 5000)
    try:
        producer._on_client_error(confluent_kafka.KafkaError(confluent_kafka.KafkaError._TRANSPORT))
        assert fatal_error(producer) is None  # a connection error: librdkafka retries by itself
        fatal = confluent_kafka.KafkaError(confluent_kafka.KafkaError._FATAL, "producer fenced", fatal=True)
        producer._on_client_error(fatal)
        assert isinstance(fatal_error(producer), KafkaError)
    finally:
        producer.close(0.0)


def test_renewal_refuses_a_backoff_that_cannot_be() -> None:
    with pytest.raises(ValueError, match="0 < first_seconds <= max_seconds"):
        Renewal(5.0, 1.0)
