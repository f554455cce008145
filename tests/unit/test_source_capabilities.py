"""Each source and sink declares exactly the capabilities it has (monitor/source/base.py), and the pipeline's
``isinstance`` checks see exactly those: a table of what each concrete class may do beyond ``Source`` / ``Sink``."""

from __future__ import annotations

import pytest

from monitor.cli.demo import _PhaseSource
from monitor.source.base import (
    Backlogging,
    DecodesAhead,
    Degradable,
    Lagging,
    PartitionOwner,
    ProducerCounts,
    Seekable,
    SideReading,
)
from monitor.source.kafka import KafkaSource
from monitor.source.kafka_process import ProcessKafkaSource
from monitor.source.kafka_sink import KafkaSink
from monitor.source.rdkafka import RdKafkaSource
from monitor.source.replay import MemorySource, ReplaySource
from tests.unit.test_kafka_sink import FakeProducer, make_sink

CAPABILITIES: tuple[type, ...] = (
    Seekable,
    SideReading,
    PartitionOwner,
    Lagging,
    DecodesAhead,
    Degradable,
    Backlogging,
    ProducerCounts,
)

EXPECTED: dict[type, set[type]] = {
    MemorySource: set(),
    ReplaySource: set(),
    _PhaseSource: set(),
    KafkaSource: {Seekable, PartitionOwner, Lagging, Degradable},
    RdKafkaSource: {SideReading, PartitionOwner, Lagging, Degradable},
    ProcessKafkaSource: {SideReading, PartitionOwner, Lagging, DecodesAhead, Degradable},
    KafkaSink: {Backlogging, Degradable, ProducerCounts},
}


@pytest.mark.parametrize("cls", list(EXPECTED), ids=lambda c: c.__name__)
def test_capabilities_each_class_declares_exactly_its_own(cls: type) -> None:
    declared = {cap for cap in CAPABILITIES if cap in cls.__mro__}
    assert declared == EXPECTED[cls]
    # an instance without its constructor's state (no broker, no child process): only what the class declares or
    # defines answers the pipeline's isinstance checks
    bare: object = object.__new__(cls)
    assert {cap for cap in CAPABILITIES if isinstance(bare, cap)} == EXPECTED[cls]


@pytest.mark.parametrize("cls", list(EXPECTED), ids=lambda c: c.__name__)
def test_capabilities_each_declared_method_is_the_class_own(cls: type) -> None:
    # a protocol's method body is a stub: a class that declared a capability without defining it would inherit it
    for cap in EXPECTED[cls]:
        for name, member in vars(cap).items():
            if (callable(member) or isinstance(member, property)) and not name.startswith("_"):
                assert getattr(cls, name) is not member, f"{cls.__name__}.{name} is {cap.__name__}'s stub"


def test_capabilities_of_live_instances() -> None:
    sink = make_sink(FakeProducer())
    assert {cap for cap in CAPABILITIES if isinstance(sink, cap)} == EXPECTED[KafkaSink]
    assert not sink.backlogged and sink.degraded is None and sink.failed_total and sink.dropped_total
    replay = ReplaySource([b"{}"])
    assert {cap for cap in CAPABILITIES if isinstance(replay, cap)} == set()
