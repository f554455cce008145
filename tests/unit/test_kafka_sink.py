"""``KafkaSink`` over a fake producer: records held until acknowledged, re-sent after a failure, back-pressure or
counted drops when the buffer is full, ``degraded`` while nothing is delivered, and the counters the service mirrors."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kafka.errors import (
    IllegalStateError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    NotLeaderForPartitionError,
)

from monitor import telemetry as tel
from monitor.config import KafkaSettings
from monitor.runtime.models import load_model_runtime
from monitor.runtime.service import Service
from monitor.source.kafka_config import ProducerConfig
from monitor.source.kafka_sink import STALL_SECONDS, KafkaSink
from monitor.source.replay import ReplaySource
from tests.unit.test_pipeline import FakeClock, events, make_settings, rows

DLQ, SCORES = "events-dlq", "scores"


class FakeFuture:
    """kafka-python's ``FutureRecordMetadata`` as the sink uses it: callbacks now or when the outcome arrives."""

    def __init__(self) -> None:
        self.callbacks: list[Callable[[object], object]] = []
        self.errbacks: list[Callable[[BaseException], object]] = []
        self.done = False
        self.error: BaseException | None = None

    def add_callback(self, f: Callable[..., object], *args: object) -> FakeFuture:
        if self.done and self.error is None:
            f(*args, "metadata")
        else:
            self.callbacks.append(lambda value: f(*args, value))
        return self

    def add_errback(self, f: Callable[..., object], *args: object) -> FakeFuture:
        if self.done and self.error is not None:
            f(*args, self.error)
        else:
            self.errbacks.append(lambda error: f(*args, error))
        return self

    def succeed(self) -> None:
        self.done = True
        for cb in self.callbacks:
            cb("metadata")

    def fail(self, error: BaseException) -> None:
        self.done, self.error = True, error
        for eb in self.errbacks:
            eb(error)


class FakeProducer:
    """Records what the sink hands over; ``refuse`` makes ``send`` raise (no metadata within max_block_ms)."""

    def __init__(self, api_version: tuple[int, ...] = (2, 8)) -> None:
        self.config: dict[str, Any] = {"api_version": api_version}
        self.sent: list[tuple[str, bytes | None, list[tuple[str, bytes]] | None, FakeFuture]] = []
        self.refuse: BaseException | None = None
        self.refuse_topics: dict[str, BaseException] = {}  # like ``refuse``, for one topic only
        self.closed: list[float | None] = []
        self.auto_ack = False  # acknowledge every record as it is sent (a healthy broker)

    def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> FakeFuture:
        if self.refuse is not None:
            raise self.refuse
        if topic in self.refuse_topics:
            raise self.refuse_topics[topic]
        future = FakeFuture()
        self.sent.append((topic, value, headers, future))
        if self.auto_ack:
            future.succeed()
        return future

    def pending(self) -> list[FakeFuture]:
        return [f for *_, f in self.sent if not f.done]

    def ack_all(self) -> None:
        for future in self.pending():
            future.succeed()

    def fail_all(self, error: BaseException) -> None:
        for future in self.pending():
            future.fail(error)

    def values(self) -> list[bytes | None]:
        return [value for _, value, _, _ in self.sent]

    def close(self, timeout: float | None = None) -> None:
        self.closed.append(timeout)


def producer_config(**fields: Any) -> ProducerConfig:
    """The sink's settings (``kafka`` defaults) for the dead-letter and scores topics, with ``fields`` changed."""
    k = KafkaSettings(bootstrap_servers="broker:9092", dead_letter_topic=DLQ, scores_topic=SCORES)
    return replace(ProducerConfig.from_settings(k), **fields)


def make_sink(
    producer: FakeProducer,
    clock: Callable[[], float] | None = None,
    stall_seconds: float = STALL_SECONDS,
    **fields: Any,
) -> KafkaSink:
    return KafkaSink(
        producer_config(**fields), producer=producer, clock=clock or FakeClock(), stall_seconds=stall_seconds
    )


def test_kafka_sink_flush_is_true_only_once_every_record_is_acknowledged() -> None:
    producer = FakeProducer()
    sink = make_sink(producer)
    sink.send(SCORES, b"a")
    sink.send(DLQ, b"b", [("harmonic-invalid-reason", b"not_json")], key=b"not_json")
    assert not sink.flush(0.0)
    producer.ack_all()
    assert sink.flush(0.0)
    assert (sink.held, sink.acknowledged_total, sink.degraded) == (0, 2, None)


def test_kafka_sink_keeps_a_failed_record_and_sends_it_again_at_the_next_flush() -> None:
    producer = FakeProducer()
    sink = make_sink(producer)
    sink.send(SCORES, b"a")
    producer.fail_all(KafkaTimeoutError("Expiring 1 record(s): 120000 ms has passed since batch creation"))
    assert sink.failed_total == {"dead_letter": 0, "scores": 1}
    degraded = sink.degraded
    assert degraded is not None and "scores records fail (KafkaTimeoutError" in degraded and "broker:9092" in degraded
    assert not sink.flush(0.0)  # handed over again, not acknowledged yet
    assert producer.values() == [b"a", b"a"]
    producer.ack_all()
    assert sink.flush(0.0)
    assert sink.degraded is None


def test_kafka_sink_record_without_metadata_waits_and_the_next_ones_queue_behind_it() -> None:
    producer = FakeProducer()
    sink = make_sink(producer)
    producer.refuse = KafkaTimeoutError("Failed to update metadata after 5.0 secs.")
    sink.send(DLQ, b"first")
    sink.send(DLQ, b"second")  # queued: not a second max_block_ms wait while the broker is away
    assert producer.values() == [] and sink.held == 2 and sink.failed_total["dead_letter"] == 1
    assert not sink.flush(0.0)  # still refused: nothing handed over, nothing lost
    producer.refuse = None
    assert not sink.flush(0.0)
    assert producer.values() == [b"first", b"second"]
    producer.ack_all()
    assert sink.flush(0.0)


def test_kafka_sink_topic_without_metadata_does_not_hold_back_another_topic() -> None:
    producer = FakeProducer()
    sink = make_sink(producer)
    producer.refuse_topics[SCORES] = KafkaTimeoutError("Failed to update metadata after 5.0 secs.")
    sink.send(SCORES, b"s1")
    sink.send(DLQ, b"d1")  # another topic: handed over at once, not queued behind the refused scores
    sink.send(SCORES, b"s2")  # the same topic: queued behind s1, in order
    assert producer.values() == [b"d1"] and sink.failed_total == {"dead_letter": 0, "scores": 1}
    producer.ack_all()
    assert not sink.flush(0.0) and sink.held == 2
    del producer.refuse_topics[SCORES]
    sink.send(DLQ, b"d2")
    assert not sink.flush(0.0)
    assert producer.values() == [b"d1", b"d2", b"s1", b"s2"]
    producer.ack_all()
    assert sink.flush(0.0) and sink.held == 0


def test_kafka_sink_is_backlogged_while_the_buffer_is_full() -> None:
    producer = FakeProducer()
    sink = make_sink(producer, buffer_bytes=100)
    sink.send(SCORES, b"x" * 60)
    assert not sink.backlogged
    sink.send(SCORES, b"y" * 60)  # kept: back-pressure is the pipeline's (it stops reading), not a drop
    assert sink.backlogged and sink.held == 2
    producer.ack_all()
    assert not sink.backlogged and sink.flush(0.0)


def test_kafka_sink_drops_and_counts_records_beyond_the_buffer_only_when_told() -> None:
    producer = FakeProducer()
    sink = make_sink(producer, buffer_bytes=100, drop_when_full=True)
    sink.send(DLQ, b"x" * 60)
    sink.send(DLQ, b"y" * 60)
    assert sink.dropped_total[("dead_letter", "buffer_full")] == 1
    assert not sink.backlogged and producer.values() == [b"x" * 60]
    producer.ack_all()
    assert sink.flush(0.0)


@pytest.mark.parametrize("when", ["on send", "from the broker"])
def test_kafka_sink_drops_a_record_too_large_to_ever_be_taken(when: str) -> None:
    producer = FakeProducer()
    sink = make_sink(producer)
    if when == "on send":
        producer.refuse = MessageSizeTooLargeError("The message is 5000000 bytes when serialized")
        sink.send(DLQ, b"big")
    else:
        sink.send(DLQ, b"big")
        producer.fail_all(MessageSizeTooLargeError())
    assert sink.dropped_total[("dead_letter", "too_large")] == 1
    assert sink.flush(0.0) and sink.degraded is None


def test_kafka_sink_is_degraded_when_nothing_is_acknowledged_for_stall_seconds() -> None:
    producer, clock = FakeProducer(), FakeClock(100.0)
    sink = make_sink(producer, clock, stall_seconds=5.0)
    sink.send(SCORES, b"a")
    clock.now += 4.9
    assert sink.degraded is None
    clock.now += 0.2
    degraded = sink.degraded
    assert degraded is not None and "no acknowledgement for 5 s" in degraded and "1 records kept" in degraded
    producer.ack_all()
    assert sink.degraded is None


def test_kafka_sink_flush_gives_the_loop_back_when_nothing_is_acknowledged(caplog: pytest.LogCaptureFixture) -> None:
    ticks = iter(range(0, 10**6, 10))  # every reading of the clock is 10 s later: no real waiting
    sink = make_sink(FakeProducer(), lambda: float(next(ticks)), stall_seconds=5.0)
    sink.send(SCORES, b"a")
    with caplog.at_level("WARNING", logger="monitor.source.kafka"):
        assert not sink.flush(30.0)
    (record,) = caplog.records
    assert record.getMessage() == "producer cannot deliver; records kept for re-sending"
    assert "no acknowledgement for" in str(record.__dict__["problem"])


def test_kafka_sink_acknowledgement_of_one_kind_leaves_the_other_failing() -> None:
    producer = FakeProducer()
    sink = make_sink(producer)
    sink.send(DLQ, b"a")
    producer.fail_all(NotLeaderForPartitionError())
    sink.send(SCORES, b"b")
    producer.ack_all()
    degraded = sink.degraded
    assert degraded is not None and "dead_letter records fail" in degraded and "scores" not in degraded.split(";")[0]


def test_kafka_sink_drops_headers_for_brokers_before_0_11() -> None:
    producer = FakeProducer(api_version=(0, 9))
    sink = make_sink(producer)
    sink.send(DLQ, b"a", [("harmonic-invalid-reason", b"not_json")], key=b"not_json")
    assert producer.sent[0][2] == []


def test_kafka_sink_close_does_not_wait_for_records_the_broker_never_acknowledged() -> None:
    producer = FakeProducer()
    sink = make_sink(producer)
    sink.close(timeout_seconds=5.0)
    sink = make_sink(producer)
    sink.send(SCORES, b"a")
    sink.close(timeout_seconds=5.0)
    assert producer.closed == [5.0, 0.0]


class FakeSenderThread:
    """kafka-python's sender thread, as far as a forced close goes."""

    def __init__(self) -> None:
        self.forced = False

    def force_close(self) -> None:
        self.forced = True

    def join(self, timeout: float | None = None) -> None:
        return None


class StuckProducer(FakeProducer):
    """A producer whose first close raises, as kafka-python's does while batches are incomplete."""

    def __init__(self) -> None:
        super().__init__()
        self._sender = FakeSenderThread()

    def close(self, timeout: float | None = None) -> None:
        super().close(timeout)
        if len(self.closed) == 1:
            raise KafkaTimeoutError("Timeout waiting for future")


def test_kafka_sink_close_aborts_what_kafka_python_still_holds_without_counting_it_failed() -> None:
    producer = StuckProducer()
    sink = make_sink(producer)
    sink.send(SCORES, b"a")
    sink.close(timeout_seconds=5.0)
    producer.fail_all(IllegalStateError("Producer is closed forcefully."))  # what the forced close does
    assert producer._sender.forced and producer.closed == [0.0, 0.0]
    assert sink.failed_total["scores"] == 0 and sink.held == 0


def test_kafka_sink_refuses_an_unknown_topic_kind() -> None:
    with pytest.raises(ValueError, match=r"topic kinds must be among \('dead_letter', 'scores'\); got \['labels'\]"):
        KafkaSink(producer_config(topic_kinds={"t": "labels"}), producer=FakeProducer())


def test_service_mirrors_the_sink_counters_into_the_producer_metrics(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, kafka={"max_poll_records": 16, "scores_topic": SCORES})
    producer = FakeProducer()
    sink = make_sink(producer)
    sink.send(SCORES, b"a")
    producer.fail_all(KafkaTimeoutError())
    runtimes = [load_model_runtime(m) for m in settings.models]
    svc = Service(
        settings, ReplaySource(events(rows(16, seed=3))), runtimes, sink=sink, serve_metrics=False, clock=FakeClock()
    )
    producer.auto_ack = True  # the broker is back: the failed record and every score are acknowledged at once
    with svc:
        svc.run(threading.Event(), until_exhausted=True)
    assert svc.state.counter(tel.PRODUCER_FAILURES_TOTAL.name, ("scores",)) == 1
    assert svc.state.counter(tel.PRODUCER_DROPPED_TOTAL.name, ("dead_letter", "buffer_full")) == 0
    assert len(producer.sent) > 16  # the failed record again, and a score per event
