"""``SideReader`` (monitor/source/side_read.py): records of one partition at given offsets, read in no group, beside a
group consumer that cannot seek; over a fake kafka-python consumer."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from kafka.errors import KafkaTimeoutError

from monitor.config import KafkaSettings
from monitor.source import side_read
from monitor.source.kafka import ConsumerConfig
from monitor.source.side_read import SideReader


def kafka_record(offset: int, value: bytes | None = b"v") -> Any:
    from kafka.consumer.fetcher import ConsumerRecord

    return ConsumerRecord("t", 0, -1, offset, 1000 + offset, 0, None, value, [], None, -1, 2, -1)


class FakeConsumer:
    """A partition holding offsets ``log_start``..``end - 1``, read from its position (out of range: the start)."""

    def __init__(self, end: int, *, log_start: int = 0, per_poll: int = 3) -> None:
        self.end, self.log_start, self.per_poll = end, log_start, per_poll
        self.assigned: list[Any] = []
        self.seeks: list[int] = []
        self.pos = 0
        self.closed = False

    def assignment(self) -> set[Any]:
        return set(self.assigned)

    def assign(self, tps: list[Any]) -> None:
        self.assigned = list(tps)

    def seek(self, tp: Any, offset: int) -> None:
        self.seeks.append(offset)
        self.pos = offset

    def poll(self, timeout_ms: int, max_records: int) -> dict[Any, list[Any]]:
        self.pos = max(self.pos, self.log_start)
        got = [kafka_record(o) for o in range(self.pos, min(self.end, self.pos + min(max_records, self.per_poll)))]
        self.pos += len(got)
        return {self.assigned[0]: got} if got else {}

    def position(self, tp: Any) -> int:
        return self.pos

    def close(self, autocommit: bool = False, timeout_ms: int = 0) -> None:
        self.closed = True


class Consumers:
    """What each creation of the reader's consumer gives (an exception to raise, or the consumer), and the settings
    each was created with."""

    def __init__(self) -> None:
        self.queue: list[Any] = []
        self.configs: list[dict[str, Any]] = []

    def new(self, config: dict[str, Any]) -> Any:
        self.configs.append(config)
        item = self.queue.pop(0)
        if isinstance(item, Exception):
            raise item
        return item


@pytest.fixture
def consumers(monkeypatch: pytest.MonkeyPatch) -> Consumers:
    made = Consumers()
    monkeypatch.setattr(side_read, "new_consumer", made.new)
    monkeypatch.setattr(side_read.records, "guard", lambda consumer: True)
    return made


def reader(**kw: Any) -> SideReader:
    settings = KafkaSettings(bootstrap_servers="b:9092", topic="t", group_id="g", max_poll_records=7)
    return SideReader(ConsumerConfig.from_settings(settings), **kw)


def test_a_range_is_read_in_offset_order_up_to_its_end_and_read_on_without_a_seek(consumers: Consumers) -> None:
    consumer = FakeConsumer(20)
    consumers.queue.append(consumer)
    side = reader()
    assert not side.open
    first = side.read(("t", 0), 2, 12, 5)
    assert [r.offset for r in first] == [2, 3, 4, 5, 6]
    assert (first[0].topic, first[0].partition, first[0].timestamp_ms, first[0].value) == ("t", 0, 1002, b"v")
    rest = side.read(("t", 0), 7, 12, 5)
    assert [r.offset for r in rest] == [7, 8, 9, 10, 11]
    assert consumer.seeks == [2]  # the second read goes on where the first stopped
    (config,) = consumers.configs
    assert config["group_id"] is None and config["enable_auto_commit"] is False
    assert config["bootstrap_servers"] == ["b:9092"] and config["auto_offset_reset"] == "earliest"
    side.close()
    assert consumer.closed and not side.open


def test_a_record_gone_by_retention_is_none(consumers: Consumers) -> None:
    consumers.queue.append(FakeConsumer(20, log_start=10))
    side = reader(wait_seconds=0.5)
    assert side.read_at(("t", 0), 9) is None  # lands on 10, past it: not waited for
    found = side.read_at(("t", 0), 12)
    assert found is not None and found.offset == 12


def test_a_cluster_not_reached_reads_nothing_and_is_tried_again(
    consumers: Consumers, caplog: pytest.LogCaptureFixture
) -> None:
    consumers.queue += [KafkaTimeoutError("Unable to bootstrap"), FakeConsumer(5)]
    side = reader()
    with caplog.at_level(logging.WARNING, logger="monitor.source.side_read"):
        assert side.read_at(("t", 0), 1) is None
    assert "side reader not connected" in caplog.text
    found = side.read_at(("t", 0), 1)
    assert found is not None and found.offset == 1


def test_nothing_there_in_time_is_an_empty_read(consumers: Consumers) -> None:
    consumers.queue.append(FakeConsumer(3))
    side = reader(wait_seconds=0.05)
    assert [r.offset for r in side.read(("t", 0), 0, 10, 100)] == [0, 1, 2]  # what came before the wait ran out
    assert side.read(("t", 0), 5, 6, 1) == []
