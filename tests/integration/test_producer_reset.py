"""End to end: ``harmonic-monitor run`` delivers dead letters and scores again after its broker comes back empty.

A Tansu broker is killed and started again on the same address with nothing in it (no topics, groups or producer
ids), as a re-created cluster would be. kafka-python's idempotent producer holds a producer id the new broker does
not know: its epoch bump is refused and it stays in a fatal state, so the sink must replace it. One sidecar per client
(kafka-python, librdkafka), side by side on the one broker. After the return the test re-creates the topics, produces
valid and invalid events, and reads the dead-letter and scores topics back: every new dead letter and score must
arrive (at-least-once: a duplicate is allowed), every new event must be consumed, and kafka-python's retry warnings
must come as a few summarised lines, not one per retry.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.brokers import TansuBroker
from tests.integration.model_fixtures import ClassifierFiles
from tests.integration.producer_sidecars import deliver_first, producer_sidecar, stopped, wait_delivering
from tests.integration.sidecar import Sidecar
from tests.integration.test_run_kafka import (
    DRAIN_TIMEOUT_SECONDS,
    Record,
    consumer_children,
    interleave,
    invalid_events,
    produce,
    read_topic,
    score_ids,
    valid_events,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CLIENTS = ("kafka-python", "librdkafka")
PARTITIONS = 2
#: log lines a client library may write about one kind of failure in a run (held back by the flood filter)
MAX_FLOOD_LINES = 40


@pytest.fixture
def tansu() -> Iterator[TansuBroker]:
    """A Tansu broker of this test's own: it is killed and restarted empty, which other tests must not see."""
    with TansuBroker() as broker:
        yield broker


def _topics(broker: TansuBroker, client: str) -> tuple[str, str, str]:
    names = (f"reset-in-{client}", f"reset-dlq-{client}", f"reset-scores-{client}")
    for name in names:
        broker.create_topic(name, PARTITIONS)
    return names


def _read_back(broker: TansuBroker, topic: str, done: Callable[[list[Record]], bool], what: str) -> list[Record]:
    """:func:`read_topic` again until ``done`` or :data:`DRAIN_TIMEOUT_SECONDS` (the sidecar is re-sending meanwhile)."""
    deadline = time.monotonic() + DRAIN_TIMEOUT_SECONDS
    while True:
        try:
            return read_topic(broker, topic, done, what, PARTITIONS)
        except AssertionError:
            if time.monotonic() >= deadline:
                raise


def test_dead_letters_and_scores_reach_a_broker_restarted_empty(
    tansu: TansuBroker, classifier: ClassifierFiles, tmp_path: Path
) -> None:
    bad = invalid_events(classifier)
    before = valid_events(classifier, 40, prefix="before")
    after = valid_events(classifier, 120, prefix="after", start=40)
    sidecars: dict[str, Sidecar] = {}
    topics = {client: _topics(tansu, client) for client in CLIENTS}
    for client, (topic, dead_letters, scores) in topics.items():
        sidecars[client] = producer_sidecar(
            tmp_path, tansu, client, classifier, topic=topic, dead_letters=dead_letters, scores=scores
        )
    with contextlib.ExitStack() as stack:
        for sidecar in sidecars.values():
            stack.enter_context(sidecar)
        deliver_first(tansu, ((sidecars[client], topics[client][0]) for client in CLIENTS), before, bad)

        # the broker dies and comes back empty on the same address; the topics are created again, the input topic
        # with the same first records at the same offsets (the consumer's positions stay valid: what is tested here
        # is the producer), then the new ones. The sidecars are stopped meanwhile, so that none of their metadata
        # requests auto-creates a topic before the test creates it with its partitions
        pids = [pid for sidecar in sidecars.values() for pid in (sidecar.pid, *consumer_children(sidecar.pid))]
        assert len(pids) == 2 * len(sidecars)
        with stopped(pids):
            tansu.restart_empty()
            for client in CLIENTS:
                _topics(tansu, client)
                produce(tansu, topics[client][0], interleave(before.messages, bad.messages[:10]))
                produce(tansu, topics[client][0], interleave(after.messages, bad.messages, seed=1))
        returned = time.monotonic()

        expected = set(after.valid_ids)
        for client, sidecar in sidecars.items():
            _, dead_letters, scores = topics[client]
            letters = _read_back(
                tansu,
                dead_letters,
                lambda r: Counter(x.value for x in r) >= Counter(v for _, v in bad.messages),
                f"{client}: every new dead letter",
            )
            records = _read_back(tansu, scores, lambda r: expected <= set(score_ids(r)), f"{client}: every new score")
            assert Counter(x.value for x in letters) >= Counter(v for _, v in bad.messages), client
            assert expected <= set(score_ids(records)), client
            wait_delivering(sidecar, client)
        took = time.monotonic() - returned
        codes = {client: sidecar.terminate()[0] for client, sidecar in sidecars.items()}

    for client in CLIENTS:
        log = (tmp_path / client / "sidecar.log").read_text()
        assert codes[client] == 0, (client, log[-5000:])
        # the client library's retries are summarised by the flood filter, not logged once each
        floods = [line for line in log.splitlines() if "UnknownProducerId" in line or "Aborting producer" in line]
        assert len(floods) <= MAX_FLOOD_LINES, (client, len(floods), floods[:5])
    print(f"delivered {took:.1f} s after the return")
