"""End to end on Tansu: ``harmonic-monitor run`` waits out a broker that is away, at start-up and mid-run.

The scenario of ``test_consumer_outage.py`` (there on Kafka 0.9), in a file of its own so that pytest-xdist runs both
at once. Tansu keeps its data in memory and cannot stop and come back with it, so each sidecar's Tansu sits behind
a proxy that is cut (connections refused, open ones cut: what a client sees of a dead broker) and restored, while the
process keeps its topics and committed offsets. Two brokers, two outage lengths, both outages beginning together:
the default mode's (kafka-python's consumer in its child process) is away ``OUTAGE_SECONDS``; the broker of the two
in-process consumers (kafka-python's and librdkafka's) ``SHORT_OUTAGE_SECONDS`` (shorter than a consumer group's
session would survive on a real cluster's defaults, it comes back while the other is still away).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.brokers import TansuBroker
from tests.integration.model_fixtures import ClassifierFiles
from tests.integration.test_consumer_outage import OUTAGE_SECONDS, Outage, wait_out_outages

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SHORT_OUTAGE_SECONDS = 15.0


@pytest.fixture
def proxied_tansus() -> Iterator[tuple[TansuBroker, TansuBroker]]:
    with TansuBroker(behind_proxy=True) as first, TansuBroker(behind_proxy=True) as second:
        yield first, second


def test_run_waits_out_tansu_away_at_start_up_and_mid_run(
    proxied_tansus: tuple[TansuBroker, TansuBroker], classifier: ClassifierFiles, tmp_path: Path
) -> None:
    child, in_process = proxied_tansus
    outages = {
        "child": Outage(child, OUTAGE_SECONDS),
        "in-process": Outage(in_process, SHORT_OUTAGE_SECONDS),
        "librdkafka-in-process": Outage(in_process, SHORT_OUTAGE_SECONDS),  # the in-process one's broker and outage
    }
    wait_out_outages(outages, classifier, tmp_path)
