"""End to end: a topic deleted and re-created under the same name, grown past the positions a sidecar saved, is read
from its start when that sidecar restarts with the same state dir and group: every new event counted.

Kafka 0.9 keeps the group's committed offsets of the deleted topic (until ``offsets.retention.minutes``; Tansu 0.6
kept them in some of our runs, dropped them in others: then the new topic is read from 0, below the last commit),
so the broker hands out the new topic from the old committed offset: only the record just before the saved position,
read again and compared with the fingerprint the state saved (its value, and its timestamp where the broker keeps
one), shows that the topic is another one. Run with the consumer in-process (the group consumer re-reads that record
by a seek, then seeks to 0) and in its child process (the group consumer does not seek: that record, and the new
topic's records below the position handed out, are read by a side reader in the sidecar's process and processed
first).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor import telemetry as tel
from tests.integration.brokers import Broker
from tests.integration.model_fixtures import ClassifierFiles
from tests.integration.sidecar import Sidecar
from tests.integration.test_run_kafka import (
    DRAIN_TIMEOUT_SECONDS,
    MODEL,
    group_name,
    new_topic,
    produce,
    run_env,
    valid_events,
)

pytestmark = pytest.mark.integration

PARTITIONS = 2
BEFORE, AFTER = 40, 120
#: the line of a new incarnation seen by the record before the saved position
LINE = "offsets went back: the record at the last applied offset is not the one applied there"
#: the line of offsets handed out below the position last committed
BELOW = "offsets went back: the broker hands out records below the position last committed"


@pytest.mark.parametrize("consumer_process", ["false", "true"], ids=["in-process", "child-process"])
def test_a_re_created_topic_is_read_from_its_start_after_a_restart(
    kafka_broker: Broker, classifier: ClassifierFiles, tmp_path: Path, consumer_process: str
) -> None:
    broker = kafka_broker
    topic, group = new_topic(broker, "recreated", PARTITIONS), group_name()

    def sidecar(run: int) -> Sidecar:
        return Sidecar(
            broker,
            topic=topic,
            group_id=group,
            state_dir=tmp_path / "state",
            log_path=tmp_path / f"run{run}.log",
            model=classifier.onnx_path,
            model_name=MODEL,
            reference=classifier.reference_path,
            env=run_env(0, HARMONIC_KAFKA__CONSUMER_PROCESS=consumer_process),
        )

    ends_before = produce(broker, topic, valid_events(classifier, BEFORE, prefix="old").messages)
    first = sidecar(1)
    with first:
        first.wait_for_metrics(
            lambda s: s.total(tel.EVENTS_SCORED_TOTAL.name) == BEFORE, f"{BEFORE} scored", DRAIN_TIMEOUT_SECONDS
        )
        code, _ = first.terminate()
        assert code == 0
    broker.delete_topic(topic)
    broker.create_topic(topic, PARTITIONS)
    ends_after = produce(broker, topic, valid_events(classifier, AFTER, prefix="new", start=BEFORE).messages)
    assert all(ends_after[p] > ends_before[p] for p in ends_before), (ends_before, ends_after)  # grown past
    second = sidecar(2)
    with second:
        second.wait_for_metrics(
            lambda s: s.total(tel.EVENTS_SCORED_TOTAL.name) == BEFORE + AFTER,
            "every new event scored (the counters carry the first run's)",
            DRAIN_TIMEOUT_SECONDS,
        )
        assert second.scrape().value(tel.OFFSETS_WENT_BACK_TOTAL.name) == len(ends_before)
        code, _ = second.terminate()
        assert code == 0
    log = (tmp_path / "run2.log").read_text()
    # Kafka 0.9 keeps the group's offsets of a deleted topic: only the record before the saved position tells;
    # Tansu kept them in some runs and dropped them in others (then the new topic is read from 0, below the commit)
    seen = log.count(LINE) + (log.count(BELOW) if broker.name == "tansu" else 0)
    assert seen == len(ends_before), log[-4000:]
