"""Fixtures for the integration tests: real Kafka brokers (see ``brokers.py``), fresh topics and the classifier.

``kafka_broker`` runs a test once per broker (ids ``kafka09`` and ``tansu``); ``kafka09_broker`` is
the same running Kafka 0.9 for tests that need a restart. Brokers start on first use and stay up for
the whole session; a missing binary fails the test with the install command, it is never skipped.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.brokers import Broker, BrokerPool, Kafka09Broker
from tests.integration.model_fixtures import ClassifierFiles, build_classifier

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test in this folder talks to real services: marked ``integration`` here, so a new file cannot forget
    (``pytest -m "not integration"`` must never start a broker)."""
    for item in items:
        if _HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.integration)


#: Partitions of the topic the ``topic`` fixture creates.
TOPIC_PARTITIONS = 4


@pytest.fixture(scope="session")
def broker_pool() -> Iterator[BrokerPool]:
    """Every broker started during the session; all stopped when it ends."""
    with BrokerPool() as pool:
        yield pool


@pytest.fixture(scope="session", params=["kafka09", "tansu"], ids=["kafka09", "tansu"])
def kafka_broker(request: pytest.FixtureRequest, broker_pool: BrokerPool) -> Broker:
    """A running broker; tests using it run once against Kafka 0.9.0.1 and once against Tansu."""
    name: str = request.param
    return broker_pool.get(name)


#: (broker, kafka.client) pairs of the delivery tests (crash, poison, state dir): kafka-python on both brokers,
#: librdkafka on Kafka 0.9 (its version fallback is the harder case; ``test_run_librdkafka.py`` covers Tansu)
DELIVERY_CASES = (("kafka09", "kafka-python"), ("tansu", "kafka-python"), ("kafka09", "librdkafka"))


def broker_for_both_clients() -> Callable[..., Broker]:
    """A ``kafka_broker`` fixture for a delivery-test module (``kafka_broker = broker_for_both_clients()``): each test
    runs once per :data:`DELIVERY_CASES` pair, its sidecars with that ``kafka.client``
    (``MONITOR_TEST_KAFKA_CLIENT``, read when a :class:`~tests.integration.sidecar.Sidecar` is made)."""

    @pytest.fixture(params=DELIVERY_CASES, ids=["kafka09", "tansu", "kafka09-librdkafka"])
    def kafka_broker(
        request: pytest.FixtureRequest, broker_pool: BrokerPool, monkeypatch: pytest.MonkeyPatch
    ) -> Broker:
        name, client = request.param
        monkeypatch.setenv("MONITOR_TEST_KAFKA_CLIENT", client)
        return broker_pool.get(name)

    return kafka_broker


@pytest.fixture(scope="session")
def kafka09_broker(broker_pool: BrokerPool) -> Kafka09Broker:
    """The running Kafka 0.9.0.1 (the same one ``kafka_broker[kafka09]`` gives), for restart tests."""
    broker = broker_pool.get("kafka09")
    assert isinstance(broker, Kafka09Broker)
    return broker


def _fresh_topic(broker: Broker, request: pytest.FixtureRequest) -> str:
    # Test name in the topic helps when reading broker logs; Kafka topic names allow [a-zA-Z0-9._-].
    stem = "".join(c if c.isalnum() else "-" for c in request.node.name)[:80].strip("-")
    name = f"{stem}-{uuid.uuid4().hex[:8]}"
    broker.create_topic(name, TOPIC_PARTITIONS)
    return name


@pytest.fixture
def topic(kafka_broker: Broker, request: pytest.FixtureRequest) -> str:
    """A new topic with 4 partitions on ``kafka_broker``, unique to this test."""
    return _fresh_topic(kafka_broker, request)


@pytest.fixture(scope="module")
def classifier(tmp_path_factory: pytest.TempPathFactory) -> ClassifierFiles:
    """The classifier, its reference and its live rows (:func:`~tests.integration.model_fixtures.build_classifier`),
    built once per test module."""
    return build_classifier(tmp_path_factory.mktemp("model"))


@pytest.fixture
def kafka09_topic(kafka09_broker: Kafka09Broker, request: pytest.FixtureRequest) -> str:
    """A new topic with 4 partitions on ``kafka09_broker``, unique to this test."""
    return _fresh_topic(kafka09_broker, request)
