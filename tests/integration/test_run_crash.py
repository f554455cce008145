"""Crashes against real brokers: ``harmonic-monitor run`` SIGKILLed with events in flight, then restarted.

Offsets are committed only after the state that covers them was written (``checkpoint_seconds``), so a kill -9
between two checkpoints loses nothing: what the state does not hold, the broker delivers again. And the records in
flight at the kill are re-processed one at a time after the restart (the in-flight marker), an invalid one among
them dead-lettered and counted once.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from monitor import telemetry as tel
from tests.integration.brokers import Broker
from tests.integration.conftest import broker_for_both_clients
from tests.integration.model_fixtures import ClassifierFiles
from tests.integration.sidecar import Scrape, Sidecar, SidecarError, classifier_sidecar
from tests.integration.test_run_kafka import (
    DRAIN_TIMEOUT_SECONDS,
    MODEL,
    REASON_HEADER,
    committed_offsets,
    group_name,
    produce,
    read_topic,
    run_env,
    score_ids,
    valid_events,
)

#: each test once per broker with kafka-python, and on Kafka 0.9 with librdkafka
kafka_broker = broker_for_both_clients()

pytestmark = pytest.mark.integration

#: long enough that the kill comes before the first checkpoint
CHECKPOINT_SECONDS = "120"


def consumed(s: Scrape) -> float:
    return s.total(tel.EVENTS_CONSUMED_TOTAL.name)


def sidecar(broker: Broker, topic: str, group: str, tmp_path: Path, files: ClassifierFiles, **env: str) -> Sidecar:
    return classifier_sidecar(
        broker,
        files,
        tmp_path,
        topic=topic,
        group_id=group,
        model_name=MODEL,
        dead_letter_topic=f"{topic}-dlq",
        scores_topic=f"{topic}-scores",
        env=run_env(0, **env),
    )


def side_topics(broker: Broker, topic: str) -> None:
    """The dead-letter topic (1 partition) and the scores topic (4) that :func:`sidecar` names after ``topic``."""
    broker.create_topic(f"{topic}-dlq", 1)
    broker.create_topic(f"{topic}-scores", 4)


def all_committed(car: Sidecar, topic: str, group: str, ends: dict[int, int], what: str) -> Scrape:
    """Wait for ``car`` to be ready, then for its group to have committed ``ends`` on ``topic``; returns the settled
    ``/metrics`` page."""
    car.wait_ready()
    return car.wait_for_metrics(
        lambda s: committed_offsets(car.broker, topic, group) == ends, what, DRAIN_TIMEOUT_SECONDS, settle_seconds=0.5
    )


def test_run_killed_before_its_first_checkpoint_loses_no_event(
    kafka_broker: Broker, topic: str, classifier: ClassifierFiles, tmp_path: Path
) -> None:
    group = group_name()
    side_topics(kafka_broker, topic)
    batch = valid_events(classifier, 3000, prefix="k")
    with sidecar(
        kafka_broker, topic, group, tmp_path, classifier, HARMONIC_CHECKPOINT_SECONDS=CHECKPOINT_SECONDS
    ) as first:
        first.wait_ready()
        ends = produce(kafka_broker, topic, batch.messages)
        first.wait_for_metrics(
            lambda s: s.total(tel.EVENTS_SCORED_TOTAL.name) >= len(batch.messages),
            "every event consumed and scored",
            DRAIN_TIMEOUT_SECONDS,
        )
        assert first.kill() == -signal.SIGKILL
    # nothing was checkpointed (unless a rebalance made the group checkpoint what it held: a slow machine's
    # session timeout), so the broker delivers again every event the saved state does not hold
    with sidecar(kafka_broker, topic, group, tmp_path, classifier) as second:
        settled = all_committed(second, topic, group, ends, "the restarted sidecar to apply and commit every event")
        # every event's effect is there exactly once: counted, scored, its score published
        assert consumed(settled) == len(batch.messages)
        assert settled.total(tel.EVENTS_SCORED_TOTAL.name) == len(batch.messages)
        records = read_topic(
            kafka_broker, f"{topic}-scores", lambda r: set(batch.valid_ids) <= set(score_ids(r)), "every score"
        )
        assert set(score_ids(records)) == set(batch.valid_ids)
        code, _ = second.terminate()
    assert code == 0, second.log_tail()


def killed_while_one_record_is_in_flight_alone(car: Sidecar, marker: Path) -> dict[str, object] | None:
    """As soon as ``car`` processes a record alone (an in-flight marker that says ``careful``), SIGKILL it; returns
    that marker (None: recovery ended, or the deadline passed, before one was seen; it is killed then too)."""
    deadline = time.monotonic() + DRAIN_TIMEOUT_SECONDS
    next_check = time.monotonic() + 0.5
    seen: dict[str, object] | None = None
    while time.monotonic() < deadline:
        try:
            seen = json.loads(marker.read_text())
        except (FileNotFoundError, ValueError):  # between two records, or caught mid-replace
            seen = None
        if seen is not None and seen.get("careful"):
            break
        if time.monotonic() >= next_check:
            if recovery_ended(car):
                break
            next_check = time.monotonic() + 0.5
    assert car.kill() == -signal.SIGKILL
    return seen if seen is not None and seen.get("careful") else None


def recovery_ended(car: Sidecar) -> bool:
    """``/readyz`` answers and no longer lists ``recovery`` among what runs degraded."""
    try:
        _, detail = car.readyz()
    except (OSError, ValueError, SidecarError):
        return False
    return "recovery" not in detail.get("degraded", [])


def test_run_killed_with_an_invalid_record_in_flight_reprocesses_it_once(
    kafka_broker: Broker, topic: str, classifier: ClassifierFiles, tmp_path: Path
) -> None:
    """Killed with a batch in flight, then killed again while re-processing it one record at a time (as a crash
    loop's kills land): the invalid record is dead-lettered as itself, every valid event is scored, none is taken
    for poison."""
    group = group_name()
    side_topics(kafka_broker, topic)
    good = valid_events(classifier, 400, prefix="g")
    poison_doc = {"id": "poison", "model": MODEL, "ts": 1_795_000_000_000}
    width = len(classifier.events[0])
    poison = json.dumps({**poison_doc, "features": [float("inf"), float("-inf"), *([0.0] * (width - 2))]}).encode()
    messages = [*good.messages[:200], (b"poison", poison), *good.messages[200:]]
    # the first run holds everything it reads in one pending micro-batch, so the kill finds it all in flight
    in_hand = {"HARMONIC_BATCH__MAX_EVENTS": "10000", "HARMONIC_BATCH__MAX_WAIT_MS": "600000"}
    with sidecar(
        kafka_broker, topic, group, tmp_path, classifier, HARMONIC_CHECKPOINT_SECONDS=CHECKPOINT_SECONDS, **in_hand
    ) as first:
        first.wait_ready()
        ends = produce(kafka_broker, topic, messages)
        first.wait_for_metrics(
            lambda s: consumed(s) >= len(messages), "the batch with the invalid record consumed", DRAIN_TIMEOUT_SECONDS
        )
        assert first.scrape().total(tel.EVENTS_SCORED_TOTAL.name) == 0
        assert first.kill() == -signal.SIGKILL
    marker = tmp_path / "state" / "inflight.json"
    assert marker.exists()
    with sidecar(kafka_broker, topic, group, tmp_path, classifier) as second:
        careful = killed_while_one_record_is_in_flight_alone(second, marker)
    with sidecar(kafka_broker, topic, group, tmp_path, classifier) as second:
        settled = all_committed(second, topic, group, ends, "the restarted sidecar to apply and commit every record")
        assert consumed(settled) == len(messages)
        assert settled.total(tel.EVENTS_SCORED_TOTAL.name) == len(good.messages)
        invalid = {k: v for k, v in settled.by_label(tel.EVENTS_INVALID_TOTAL.name, "reason").items() if v}
        assert invalid == {"not_finite": 1.0}, f"killed with {careful} in flight alone"
        dead = read_topic(kafka_broker, f"{topic}-dlq", lambda r: len(r) >= 1, "the dead letter", partitions=1)
        # at least once: the first run may have sent it before the kill
        assert {r.value for r in dead} == {poison} and all(r.key == b"not_finite" for r in dead)
        if kafka_broker.api_version is None:  # headers need Kafka >= 0.11 (Tansu); Kafka 0.9 keeps the key
            assert {r.headers[REASON_HEADER] for r in dead} == {b"not_finite"}
        code, _ = second.terminate()
    assert code == 0, second.log_tail()
    assert not marker.exists()  # the clean stop removed the in-flight marker
    assert "re-processing them one at a time" in second.log_tail(400)
