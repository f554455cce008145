"""End to end: ``harmonic-monitor run`` rides out a broker outage on its producer topics (dead letters, scores).

The broker goes away while the sidecar holds dead letters and scores it has not delivered yet, and stays away past
the producer's delivery timeout, so every one of them fails at least once inside the producer. One sidecar per
client (kafka-python, librdkafka), side by side on the one broker and its outage. The process must
stay up and say it is degraded, and once the broker is back every dead letter and every score must arrive. The same
run checks two things an operator reads in its log: one log format for the sidecar and its consumer child (set by
the settings alone), and no secret from the settings in any line.

Kafka 0.9 only: Tansu keeps its data in memory, so it cannot stop and come back with the topics and offsets.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from monitor import telemetry as tel
from tests.integration.brokers import Kafka09Broker, free_port
from tests.integration.model_fixtures import ClassifierFiles
from tests.integration.producer_sidecars import deliver_first, producer_sidecar, stopped, wait_delivering
from tests.integration.sidecar import Scrape, Sidecar
from tests.integration.test_run_kafka import (
    DRAIN_TIMEOUT_SECONDS,
    consumer_children,
    interleave,
    invalid_events,
    new_topic,
    produce,
    read_topic,
    score_ids,
    valid_events,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: a password in the settings and in an Alertmanager URL: it must appear in no log line
SECRET = "hunter2-outage"
#: how long the broker stays away (a broker stopped for 60 s)
OUTAGE_SECONDS = 60.0
#: how long the child is given to fetch the events produced while the sidecar itself is stopped
FETCH_SECONDS = 3.0


def producer_failures(s: Scrape, kind: str) -> float:
    return s.total(tel.PRODUCER_FAILURES_TOTAL.name, topic_kind=kind)


#: the sidecars, one per client, side by side on the one broker and its outage (the client's own logger names the
#: child's partition assignments)
CLIENTS = {"kafka-python": "monitor.source.kafka", "librdkafka": "monitor.source.rdkafka"}


@dataclass
class Run:
    """One client's sidecar, its topics and what it must deliver."""

    sidecar: Sidecar
    topic: str
    dead_letters: str
    scores: str
    log: Path


def test_run_keeps_dead_letters_and_scores_through_a_broker_outage(
    kafka09_broker: Kafka09Broker, classifier: ClassifierFiles, tmp_path: Path
) -> None:
    broker = kafka09_broker
    bad = invalid_events(classifier)
    before = valid_events(classifier, 50, prefix="before")
    held = valid_events(classifier, 150, prefix="held", start=50)
    runs: dict[str, Run] = {}
    for client in CLIENTS:
        topic = new_topic(broker, f"outage-{client}")
        dead_letters, scores = new_topic(broker, "dlq", partitions=1), new_topic(broker, "scores")
        sidecar = producer_sidecar(
            tmp_path,
            broker,
            client,
            classifier,
            topic=topic,
            dead_letters=dead_letters,
            scores=scores,
            HARMONIC_LOG_FORMAT="json",  # no --log-format flag: the settings decide, for the child too
            HARMONIC_KAFKA__SECURITY__SASL_PLAIN_PASSWORD=SECRET,  # ignored by a PLAINTEXT broker, but a setting
            HARMONIC_ALERTS__ALERTMANAGER_URL=f"http://monitor:{SECRET}@127.0.0.1:{free_port()}",
        )
        runs[client] = Run(sidecar, topic, dead_letters, scores, tmp_path / client / "sidecar.log")
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        for run in runs.values():
            stack.enter_context(run.sidecar)
        # 1. the producer works: the first events' scores and dead letters are delivered
        deliver_first(broker, ((run.sidecar, run.topic) for run in runs.values()), before, bad)
        # 2. stop the sidecars themselves (not their consumer children), let the children fetch the next events, stop
        # the broker, and only then let the sidecars go on: they decode and score them with no broker to deliver to
        for run in runs.values():
            assert len(consumer_children(run.sidecar.pid)) == 1
        with stopped(run.sidecar.pid for run in runs.values()):
            for run in runs.values():
                produce(broker, run.topic, interleave(held.messages, bad.messages[10:], seed=1))
            time.sleep(FETCH_SECONDS)  # the children keep polling while their parents are stopped
            broker.stop_broker()
        outage_started = time.monotonic()
        try:
            downs = {
                client: run.sidecar.wait_for_metrics(
                    lambda s: (
                        s.total(tel.EVENTS_SCORED_TOTAL.name) == 200  # still consuming and scoring
                        and producer_failures(s, "scores") > 0
                        and producer_failures(s, "dead_letter") > 0
                        and s.value(tel.DEGRADED.name, reason="producer") == 1.0
                    ),
                    "every event scored, scores and dead letters failing in the producer, the producer degraded",
                    DRAIN_TIMEOUT_SECONDS,
                )
                for client, run in runs.items()
            }
            # the outage: the broker stays away a full minute while the sidecars stay up and say so
            time.sleep(max(0.0, outage_started + OUTAGE_SECONDS - time.monotonic()))  # bounded: the outage itself
            readyz = {client: run.sidecar.readyz() for client, run in runs.items()}
            assert all(run.sidecar.running for run in runs.values())
        finally:
            broker.start_broker()
        outage_seconds = time.monotonic() - outage_started
        for client, (status, detail) in readyz.items():
            # degraded, not dead: still ready, saying what is wrong. librdkafka's group session expires meanwhile
            # and its partitions are lost (applied, not committed: docs/OPERATIONS.md, *Outages with librdkafka*);
            # kafka-python's consumer keeps them. Either way the broker is named, and the sidecar stays ready
            assert status == 200 and {"producer", "broker"} <= set(detail["degraded"]), (client, detail)
            if client == "librdkafka":
                assert not detail["partitions"], detail
            assert "Kafka producer at '127.0.0.1:" in detail["degraded_detail"]["producer"], client
            assert downs[client].total(tel.PRODUCER_DROPPED_TOTAL.name) == 0, client

        # 3. the broker is back: everything held arrives, and the processes never stopped
        expected = {*before.valid_ids, *held.valid_ids}
        delivered = {}
        for client, run in runs.items():
            wait_delivering(run.sidecar, client)
            records = read_topic(broker, run.scores, lambda r: expected <= set(score_ids(r)), "every score")
            letters = read_topic(
                broker, run.dead_letters, lambda r: len(r) >= len(bad.messages), "every dead letter", 1
            )
            delivered[client] = (records, letters)
            assert run.sidecar.running, client
            # the group lost the partitions while the broker was away (librdkafka's session expired; kafka-python's
            # membership is gone with the broker's restart): what was processed is not processed again
            counts = run.sidecar.scrape()
            processed = (counts.total(tel.EVENTS_SCORED_TOTAL.name), counts.total(tel.EVENTS_DEAD_LETTERED_TOTAL.name))
            assert processed == (len(expected), len(bad.messages)), client
        codes = {client: run.sidecar.terminate()[0] for client, run in runs.items()}
    took = time.monotonic() - started

    for client, run in runs.items():
        log = run.log.read_text()
        assert codes[client] == 0, (client, log[-5000:])
        records, letters = delivered[client]
        # at-least-once: every event's score and every invalid record's dead letter, none lost (a record the broker
        # took just before it went away may come twice)
        assert set(score_ids(records)) == expected, client
        assert Counter(r.value for r in letters) >= Counter(value for _, value in bad.messages), client

        # the log: one format for the sidecar and its consumer child, and no secret in any line
        lines = [line for line in log.splitlines() if line.strip() and not line.startswith("====")]
        entries = [json.loads(line) for line in lines]  # every line is JSON, whichever process wrote it
        # only the child's source logs its assignments under its client's name (the sidecar's under kafka_process)
        assigned = [e for e in entries if e["msg"] == "partitions assigned" and e["logger"] == CLIENTS[client]]
        assert assigned, client
        assert any(e["msg"] == "producer could not deliver a record; it is kept and re-sent" for e in entries), client
        assert any(e["msg"] == "harmonic-monitor run starting" for e in entries), client
        assert SECRET not in log, client
        # the clients' own lines about the refused connections are held back (the sink's lines say what fails)
        # (librdkafka's one PROTOERR line from a Kafka 0.9 broker still starting is allowed: docs/OPERATIONS.md)
        clients = ("kafka", "monitor.source.rdkafka.librdkafka")
        errors = [
            e["msg"][:200]
            for e in entries
            if e["level"] == "error" and e["logger"].startswith(clients) and "PROTOERR" not in e["msg"]
        ]
        assert errors == [], (client, errors[:5])
    print(f"outage {outage_seconds:.1f} s, test {took:.1f} s")
