"""A kafka-python ``poll`` that loops instead of waiting does not hold a core: ``KafkaSource`` polls briefly and sleeps.

kafka-python 3.0.12's ``poll`` spins while a heartbeat it wants to send is still in flight; on Kafka 0.9 one
unanswered request held the consumer's core for 30 s. A fake consumer spins on fake clocks here: its poll uses all
its wall time as CPU and returns nothing, until it is given records.
"""

from __future__ import annotations

from typing import Any

import pytest

from monitor.config import KafkaSettings
from monitor.source import kafka as kafka_source
from monitor.source.kafka import SPIN_POLL_MS, ConsumerConfig, KafkaSource, SpinGuard


class Clocks:
    """Fake monotonic, thread CPU and sleep: a spinning poll advances both clocks, a sleep only the wall."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0
        self.slept = 0.0

    def sleep(self, seconds: float) -> None:
        self.wall += seconds
        self.slept += seconds


class SpinningConsumer:
    def __init__(self, clocks: Clocks, answers: list[Any]) -> None:
        self.clocks = clocks
        self.answers = answers
        self.asked: list[int] = []
        self.config: dict[str, Any] = {}

    def subscribe(self, topics: list[str], listener: Any) -> None: ...

    def poll(self, timeout_ms: int, max_records: int) -> Any:
        self.asked.append(timeout_ms)
        answer = self.answers.pop(0) if self.answers else "spin"
        if answer == "spin":  # loops for the whole timeout on this thread
            self.clocks.wall += timeout_ms / 1000
            self.clocks.cpu += timeout_ms / 1000
            return {}
        if answer == "wait":  # waits as it should: wall time, no CPU
            self.clocks.wall += timeout_ms / 1000
            return {}
        return answer

    def commit(self, offsets: Any) -> None: ...

    def close(self, autocommit: bool = False) -> None: ...


@pytest.fixture
def clocks(monkeypatch: pytest.MonkeyPatch) -> Clocks:
    c = Clocks()
    monkeypatch.setattr(kafka_source.time, "monotonic", lambda: c.wall)
    monkeypatch.setattr(kafka_source.time, "thread_time", lambda: c.cpu)
    monkeypatch.setattr(kafka_source.time, "sleep", c.sleep)
    return c


def record(offset: int) -> Any:
    from kafka.consumer.fetcher import ConsumerRecord

    return ConsumerRecord("t", 0, -1, offset, 1, 0, None, b"{}", [], None, -1, 2, -1)


def test_a_spinning_poll_is_cut_to_a_short_one_and_the_rest_slept(
    clocks: Clocks, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kafka.structs import TopicPartition

    consumer = SpinningConsumer(clocks, ["spin", "spin", "spin", {TopicPartition("t", 0): [record(7)]}, "spin"])
    monkeypatch.setattr(kafka_source, "new_consumer", lambda config: consumer)
    source = KafkaSource(
        ConsumerConfig.from_settings(KafkaSettings(bootstrap_servers="b:9092", topic="t", group_id="g"))
    )
    for _ in range(3):
        assert source.poll(0.2, 10) == []
    got = source.poll(0.2, 10)
    assert [r.offset for r in got] == [7]
    assert source.poll(0.2, 10) == []
    # the first poll spun 200 ms; the next two asked for SPIN_POLL_MS and slept the rest; records end the spell
    assert consumer.asked == [200, SPIN_POLL_MS, SPIN_POLL_MS, SPIN_POLL_MS, 200]
    assert clocks.cpu == pytest.approx(0.2 + 2 * SPIN_POLL_MS / 1000 + 0.2)  # the short poll with records took none
    assert clocks.slept == pytest.approx(2 * (0.2 - SPIN_POLL_MS / 1000))
    assert source._spin_guard.spells == 2


def test_a_poll_that_waits_as_it_should_keeps_its_whole_timeout(clocks: Clocks) -> None:
    guard = SpinGuard()
    guard.after(False, wall=0.2, cpu=0.01, timeout_seconds=0.2)  # an idle topic: waited, no CPU
    assert not guard.spinning and guard.timeout_ms(200) == 200 and clocks.slept == 0
    guard.after(False, wall=0.2, cpu=0.2, timeout_seconds=0.2)  # spun
    assert guard.spinning and guard.timeout_ms(200) == SPIN_POLL_MS
    guard.after(False, wall=0.01, cpu=0.0, timeout_seconds=0.2)  # the short poll waited: the spell is over
    assert not guard.spinning and clocks.slept == pytest.approx(0.19)
    guard.after(True, wall=0.05, cpu=0.05, timeout_seconds=0.2)  # busy parsing records is not a spin
    assert not guard.spinning and guard.spells == 1
