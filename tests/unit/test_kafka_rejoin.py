"""``hold_rejoin``: a rejoin kafka-python's coordinator starts for changed metadata stays needed until the join
completes (the integration test ``tests/integration/test_kafka_rejoin.py`` shows the stall it prevents)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from monitor.source.kafka import hold_rejoin


class Coordinator:
    """kafka-python's ``ConsumerCoordinator`` as far as a rejoin goes: needed while the leader's assignment differs
    from the metadata, or while a rejoin is pending (``rejoin_needed``, cleared when a join completes)."""

    def __init__(self) -> None:
        self.rejoin_needed = False
        self.metadata_changed = False

    def need_rejoin(self) -> bool:
        return self.metadata_changed or self.rejoin_needed

    def request_rejoin(self) -> None:
        self.rejoin_needed = True


def test_a_rejoin_for_changed_metadata_stays_needed_until_the_join_completes() -> None:
    coordinator = Coordinator()
    assert hold_rejoin(SimpleNamespace(_coordinator=coordinator))
    assert not coordinator.need_rejoin()
    coordinator.metadata_changed = True
    assert coordinator.need_rejoin()  # a poll starts the join
    coordinator.metadata_changed = False  # the join's new assignment matches the metadata again
    assert coordinator.need_rejoin()  # a later poll still completes the join
    coordinator.rejoin_needed = False  # kafka-python: the join completed
    assert not coordinator.need_rejoin()


def test_a_coordinator_of_another_shape_is_left_alone(caplog: pytest.LogCaptureFixture) -> None:
    consumer = SimpleNamespace(_coordinator=SimpleNamespace(need_rejoin=lambda: False))
    with caplog.at_level(logging.WARNING, logger="monitor.source.kafka"):
        assert not hold_rejoin(consumer)
    assert "another shape" in caplog.text
