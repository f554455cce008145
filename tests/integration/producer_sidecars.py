"""What the producer-sink end-to-end tests share (test_producer_outage.py, test_producer_reset.py): one sidecar per
Kafka client with its dead-letter and scores topics and its consumer in a child process, the first events delivered
through each, processes held stopped while the broker changes under them, and the wait for the producer to deliver
again."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable, Iterator
from pathlib import Path

from monitor import telemetry as tel
from tests.integration.brokers import Broker
from tests.integration.model_fixtures import ClassifierFiles
from tests.integration.sidecar import Sidecar, classifier_sidecar
from tests.integration.test_run_kafka import (
    DRAIN_TIMEOUT_SECONDS,
    MODEL,
    Batch,
    group_name,
    interleave,
    produce,
    run_env,
)

#: the sidecar producer's delivery timeout: short, so that an outage outlasts it and records that failed are re-sent
#: soon (the shortest kafka-python accepts with its 20 ms linger is request_timeout_ms + 20 ms; the sink derives
#: request_timeout_ms from it)
DELIVERY_TIMEOUT_MS = 3000
#: invalid records among the first events
FIRST_INVALID = 10


def producer_sidecar(
    tmp_path: Path,
    broker: Broker,
    client: str,
    files: ClassifierFiles,
    *,
    topic: str,
    dead_letters: str,
    scores: str,
    **env: str,
) -> Sidecar:
    """A sidecar in ``tmp_path / client`` on ``client`` (kafka-python, librdkafka), its consumer in a child process,
    scoring every event of ``topic`` into ``scores`` and dead-lettering invalid records into ``dead_letters``;
    ``env`` adds settings."""
    (tmp_path / client).mkdir()
    return classifier_sidecar(
        broker,
        files,
        tmp_path / client,
        topic=topic,
        group_id=group_name(),
        model_name=MODEL,
        dead_letter_topic=dead_letters,
        scores_topic=scores,
        env=run_env(
            0,
            HARMONIC_KAFKA__CLIENT=client,
            HARMONIC_KAFKA__CONSUMER_PROCESS="true",
            HARMONIC_KAFKA__PRODUCER_DELIVERY_TIMEOUT_MS=str(DELIVERY_TIMEOUT_MS),
            **env,
        ),
    )


def deliver_first(broker: Broker, runs: Iterable[tuple[Sidecar, str]], first: Batch, bad: Batch) -> None:
    """Each (sidecar, input topic) ready, given ``first``'s events and :data:`FIRST_INVALID` of ``bad``'s, and every
    one of them scored or dead-lettered: the producer works before anything happens to the broker."""
    runs = list(runs)
    for sidecar, topic in runs:
        sidecar.wait_ready()
        produce(broker, topic, interleave(first.messages, bad.messages[:FIRST_INVALID]))
    for sidecar, _ in runs:
        sidecar.wait_for_metrics(
            lambda s: (
                s.total(tel.EVENTS_SCORED_TOTAL.name) == len(first.valid_ids)
                and s.total(tel.EVENTS_DEAD_LETTERED_TOTAL.name) == FIRST_INVALID
            ),
            "the first events scored and dead-lettered",
            DRAIN_TIMEOUT_SECONDS,
        )


@contextlib.contextmanager
def stopped(pids: Iterable[int]) -> Iterator[None]:
    """The processes ``pids`` stopped (SIGSTOP) for the block, and continued after it whatever happens."""
    held = list(pids)
    for pid in held:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in held:
            os.kill(pid, signal.SIGCONT)


def wait_delivering(sidecar: Sidecar, client: str) -> None:
    """Until the sidecar's producer says it delivers again (``harmonic_degraded{reason="producer"}`` 0)."""
    sidecar.wait_for_metrics(
        lambda s: s.value(tel.DEGRADED.name, reason="producer") == 0.0,
        f"{client}: the producer to deliver again",
        DRAIN_TIMEOUT_SECONDS,
    )
