"""Client library log floods held back: of each kind of line one per interval, the next saying how many were held
back; the sidecar's own lines untouched; installed on the handler by ``setup_logging``."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from monitor.logs import ClientLogFloods, setup_logging
from tests.unit.test_pipeline import FakeClock

SENDER = "kafka.producer.sender"
RETRY = "%s: Got error produce response on topic-partition %s, retrying (%s attempts left): %s"


def _record(name: str, msg: str, *args: object, level: int = logging.WARNING) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args, None)


def _retry(partition: int, attempts: int) -> logging.LogRecord:
    tp = f"TopicPartition(topic='dlq', partition={partition})"
    return _record(SENDER, RETRY, "<Sender client_id=harmonic-monitor>", tp, attempts, "UnknownProducerIdError")


def test_a_flood_of_one_kind_is_one_line_per_interval_then_one_with_the_count() -> None:
    clock = FakeClock(0.0)
    floods = ClientLogFloods(interval_seconds=30.0, clock=clock)
    passed = []
    for i in range(2330):  # the numbers in the line (partition, attempts left) do not make another kind
        record = _retry(i % 3, 2_147_483_647 - i)
        if floods.filter(record):
            passed.append(record.getMessage())
        clock.now += 0.0004  # 2,330 lines within the first second
    assert len(passed) == 1 and floods.held_total == 2329
    clock.now = 31.0
    last = _retry(0, 5)
    assert floods.filter(last)
    assert last.getMessage().endswith("UnknownProducerIdError (repeated 2329 times in the last 31 s)")
    assert not floods.filter(_retry(1, 4))  # a new interval began with that line


def test_other_kinds_levels_and_the_sidecars_own_lines_pass() -> None:
    floods = ClientLogFloods(clock=FakeClock(0.0))
    assert floods.filter(_retry(0, 1))
    assert floods.filter(_record(SENDER, "%s: Aborting producer batches due to fatal error: %s", "s", "e"))
    assert floods.filter(_record(SENDER, RETRY, "s", "tp", 1, "e", level=logging.ERROR))  # another level
    assert floods.filter(_record("kafka.net.connection", "%s: Connection lost: %s", "<conn>", "ECONNREFUSED"))
    assert floods.filter(_record("monitor.source.rdkafka.librdkafka", "%s [%s] %s", "FAIL", "rdkafka#producer-1", "x"))
    for _ in range(5):  # the sidecar's own lines, and a logger that only starts with a prefix's letters
        assert floods.filter(_record("monitor.source.kafka", "producer could not deliver a record"))
        assert floods.filter(_record("kafkaesque", "not a client library"))
    assert floods.held_total == 0
    # librdkafka's one template ("%s [%s] %s"): its kinds are told apart by what the line says
    assert floods.filter(_record("monitor.source.rdkafka.librdkafka", "%s [%s] %s", "FAIL", "rdkafka#producer-1", "y"))
    assert not floods.filter(
        _record("monitor.source.rdkafka.librdkafka", "%s [%s] %s", "FAIL", "rdkafka#producer-2", "y")
    )


def test_the_kinds_remembered_are_bounded() -> None:
    floods = ClientLogFloods(clock=FakeClock(0.0), max_kinds=10)
    for i in range(50):
        floods.filter(_record("kafka.cluster", f"topic t{'x' * (i + 1)} changed"))
    assert len(floods._last) <= 10


def test_the_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interval_seconds must be > 0"):
        ClientLogFloods(interval_seconds=0.0)


@pytest.fixture
def _restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.usefixtures("_restore_root")
def test_setup_logging_holds_back_a_client_flood_in_the_log(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging("info", "json")
    for attempt in range(500):
        logging.getLogger(SENDER).warning(RETRY, "<Sender>", "TopicPartition(topic='dlq', partition=0)", attempt, "e")
    logging.getLogger("monitor.source.kafka").warning("Kafka producer replaced")
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert [line["logger"] for line in lines] == [SENDER, "monitor.source.kafka"]
