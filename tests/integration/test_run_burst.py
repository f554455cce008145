"""A burst against a real broker: 500 valid events produced at once, the sidecar at its default settings
(work-conserving sampling, no event cap): every one is scored, since the engine keeps up with them.

Before work-conserving sampling, the default budget (200 events/s, 2 s burst) scored 1 of such a burst. The
sidecar runs with the sampler's defaults (``HARMONIC_SAMPLER__*`` unset), the reference given, so the cost per
event is measured at start-up as in production.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor import telemetry as tel
from tests.integration.brokers import Broker
from tests.integration.model_fixtures import ClassifierFiles
from tests.integration.sidecar import classifier_sidecar
from tests.integration.test_run_kafka import (
    DRAIN_TIMEOUT_SECONDS,
    MODEL,
    committed_offsets,
    group_name,
    produce,
    valid_events,
)

pytestmark = pytest.mark.integration

BURST = 500


def test_run_scores_every_event_of_a_burst_at_default_settings(
    kafka_broker: Broker, topic: str, classifier: ClassifierFiles, tmp_path: Path
) -> None:
    group = group_name()
    burst = valid_events(classifier, BURST, prefix="burst")
    with classifier_sidecar(kafka_broker, classifier, tmp_path, topic=topic, group_id=group, model_name=MODEL) as car:
        car.wait_ready()
        ends = produce(kafka_broker, topic, burst.messages)
        settled = car.wait_for_metrics(
            lambda s: (
                s.total(tel.EVENTS_SCORED_TOTAL.name) >= BURST and committed_offsets(kafka_broker, topic, group) == ends
            ),
            f"all {BURST} events of the burst scored and committed",
            DRAIN_TIMEOUT_SECONDS,
            settle_seconds=1.0,
        )
        assert car.running, car.log_tail()
        assert settled.total(tel.EVENTS_CONSUMED_TOTAL.name) == BURST
        assert settled.total(tel.EVENTS_SCORED_TOTAL.name, model=MODEL) == BURST
        assert settled.total(tel.EVENTS_SAMPLED_TOTAL.name, model=MODEL) == BURST
        assert settled.value(tel.EVENTS_SAMPLED_RATIO.name, model=MODEL) == 1.0
        code, _ = car.terminate()
    assert code == 0, car.log_tail()
