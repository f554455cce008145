"""Poison records against real brokers: every kind that once crashed ``harmonic-monitor run``, then 1,000 valid events.

The kinds: a lone surrogate (valid JSON) in ``segment``, in ``model_version`` and in ``id``; ``Infinity`` and
``-Infinity`` in one event's features; a finite feature beyond float32 (``1e300``); a live label beyond int64; and
10,000 distinct ``model_version`` values. The sidecar must never exit; strings are cleaned at the edge (the event
is scored under the cleaned value, and ``/metrics`` stays readable), values no later stage can use are counted by
reason and dead-lettered, every record is accounted for (consumed = scored + invalid, every event scored here),
the version label stays bounded, and a restart on the same state resumes without reprocessing or losing any.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest

from monitor import telemetry as tel
from tests.integration.brokers import Broker
from tests.integration.conftest import broker_for_both_clients
from tests.integration.model_fixtures import ClassifierFiles
from tests.integration.sidecar import Sidecar, classifier_sidecar
from tests.integration.test_run_kafka import (
    DRAIN_TIMEOUT_SECONDS,
    MODEL,
    Message,
    committed_offsets,
    group_name,
    merge_ends,
    produce,
    read_topic,
    run_env,
    score_ids,
    valid_events,
)

#: each test once per broker with kafka-python, and on Kafka 0.9 with librdkafka
kafka_broker = broker_for_both_clients()

pytestmark = pytest.mark.integration

VERSIONS = 10_000
MAX_VERSIONS = 8


def poison(files: ClassifierFiles) -> tuple[list[Message], Counter[str], int]:
    """The poison records, the invalid reasons they must be counted under, and how many are valid once cleaned."""
    row = [float(v) for v in files.events[0]]
    now_ms = int(time.time() * 1000)

    def raw(doc: dict[str, object]) -> bytes:
        # json.dumps escapes the lone surrogate as \ud800: valid JSON that decodes to a str UTF-8 cannot encode
        return json.dumps({"model": MODEL, "ts": now_ms, "features": row, **doc}).encode()

    cleaned = [
        raw({"id": "p-segment", "segment": "\ud800"}),
        raw({"id": "p-version", "model_version": "\ud800"}),
        raw({"id": "p-\ud800-id"}),
        raw({"id": "p-control", "segment": "eu\x00\x1b[31m"}),
    ]
    invalid = [
        (raw({"id": "p-inf", "features": [float("inf"), float("-inf"), *row[2:]]}), "not_finite"),
        (raw({"id": "p-1e300", "features": [1e300, *row[1:]]}), "out_of_range"),
        (raw({"id": "p-label", "prediction": {"label": 2**70}}), "bad_prediction"),
    ]
    versions = [raw({"id": f"p-v{i}", "model_version": f"v{i}"}) for i in range(VERSIONS)]
    messages = [(b"p", value) for value in [*cleaned, *(v for v, _ in invalid), *versions]]
    return messages, Counter(reason for _, reason in invalid), len(cleaned) + len(versions)


def test_run_survives_every_poison_record_and_accounts_for_every_event(
    kafka_broker: Broker, topic: str, classifier: ClassifierFiles, tmp_path: Path
) -> None:
    group, dlq, scores = group_name(), f"{topic}-dlq", f"{topic}-scores"
    kafka_broker.create_topic(dlq, 1)
    kafka_broker.create_topic(scores, 4)
    bad, reasons, cleaned = poison(classifier)
    good = valid_events(classifier, 1000, prefix="ok")

    def sidecar() -> Sidecar:
        return classifier_sidecar(
            kafka_broker,
            classifier,
            tmp_path,
            topic=topic,
            group_id=group,
            model_name=MODEL,
            dead_letter_topic=dlq,
            scores_topic=scores,
            env=run_env(0, HARMONIC_SEGMENTS__MAX_VERSIONS=str(MAX_VERSIONS)),
        )

    total = len(bad) + len(good.messages)
    with sidecar() as car:
        car.wait_ready()
        ends = merge_ends(produce(kafka_broker, topic, bad), produce(kafka_broker, topic, good.messages))
        settled = car.wait_for_metrics(
            lambda s: committed_offsets(kafka_broker, topic, group) == ends,
            "every record applied and committed",
            DRAIN_TIMEOUT_SECONDS * 2,
            settle_seconds=1.0,
        )
        assert car.running
        consumed = settled.total(tel.EVENTS_CONSUMED_TOTAL.name)
        invalid = {k: v for k, v in settled.by_label(tel.EVENTS_INVALID_TOTAL.name, "reason").items() if v}
        assert consumed == total
        assert invalid == dict(reasons)
        # the cleaned values are the label values: /metrics parsed (the scrape above), the surrogate replaced
        # (harmonic_gamma carries no model_version, so its series outlive the versions' eviction)
        segments = set(settled.by_label("harmonic_gamma_count", "segment"))
        assert "\ufffd" in segments and "eu[31m" in segments
        versions = set(settled.by_label(tel.EVENTS_SCORED_TOTAL.name, "model_version"))
        assert len(versions) <= MAX_VERSIONS, f"{len(versions)} model_version series"
        assert settled.total(tel.MODEL_VERSIONS_EVICTED_TOTAL.name) >= VERSIONS - MAX_VERSIONS
        dead = read_topic(kafka_broker, dlq, lambda r: len(r) >= len(reasons), "the dead letters", partitions=1)
        assert Counter(r.key.decode() for r in dead if r.key) == reasons
        # every other event scored (score-all), once: counted from the scores topic, since an evicted version's
        # counters go with its series
        published = read_topic(
            kafka_broker, scores, lambda r: len(r) >= len(good.messages) + cleaned, "every event's score"
        )
        ids = score_ids(published)
        assert len(ids) == len(good.messages) + cleaned and set(ids.values()) == {1}
        assert set(good.valid_ids) <= set(ids) and "p-\ufffd-id" in ids
        code, _ = car.terminate()
    assert code == 0, car.log_tail()

    # a restart on the same state: nothing re-read, nothing lost, counters restored, more events go through
    more = valid_events(classifier, 100, prefix="more", start=1000)
    with sidecar() as again:
        again.wait_ready()
        ends = merge_ends(ends, produce(kafka_broker, topic, more.messages))
        resumed = again.wait_for_metrics(
            lambda s: committed_offsets(kafka_broker, topic, group) == ends,
            "the new events applied and committed",
            DRAIN_TIMEOUT_SECONDS,
            settle_seconds=1.0,
        )
        assert resumed.total(tel.EVENTS_CONSUMED_TOTAL.name) == total + len(more.messages)
        published = read_topic(
            kafka_broker, scores, lambda r: set(more.valid_ids) <= set(score_ids(r)), "the new events' scores"
        )
        ids = score_ids(published)
        assert len(ids) == len(good.messages) + cleaned + len(more.messages) and set(ids.values()) == {1}
        code, _ = again.terminate()
    assert code == 0, again.log_tail()
