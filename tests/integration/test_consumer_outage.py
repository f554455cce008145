"""End to end: ``harmonic-monitor run`` waits out a broker that is away, at start-up and mid-run, and consumes again.

Sidecars run at once, each on its own topic and group: kafka-python with the consumer in its child process (the
default on 2 CPUs), kafka-python in-process, and librdkafka (``kafka.client: librdkafka``): here in its child process
(its default on 2 CPUs), on Tansu in-process. Their broker is away before they start (they must come up: ``/healthz`` answers,
``/readyz`` is not ready and names ``broker``), comes back, then goes away again mid-run and comes back. Every event
produced before, between and after the outages must be scored, the processes must never exit, and the client's own
lines about the refused connections must be held back (librdkafka writes ~20 a second): the log has our rate-limited
line instead.

Here Kafka 0.9: the sidecars share one broker process, stopped (SIGKILL mid-run) for ``OUTAGE_SECONDS``. The Tansu
twin (``test_consumer_outage_tansu.py``, a separate file so that pytest-xdist runs the two at once) gives each mode
its own outage length. :func:`wait_out_outages` is the scenario both files run.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from monitor import telemetry as tel
from tests.integration.brokers import Broker, Kafka09Broker
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

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: the broker away at start-up, and mid-run (the default consumer mode's outage: long)
STARTUP_OUTAGE_SECONDS = 5.0
OUTAGE_SECONDS = 60.0
#: our line about an outage comes at most every 30 s (OUTAGE_LOG_SECONDS), and once more when a poll raised
OUR_LINE = "Kafka broker not reachable; waiting for it"
#: the client settings of each mode
MODES: Mapping[str, Mapping[str, str]] = {
    "child": {"HARMONIC_KAFKA__CONSUMER_PROCESS": "true"},
    "in-process": {"HARMONIC_KAFKA__CONSUMER_PROCESS": "false"},
    "librdkafka": {"HARMONIC_KAFKA__CLIENT": "librdkafka"},  # its child process on 2 CPUs
    "librdkafka-in-process": {"HARMONIC_KAFKA__CLIENT": "librdkafka", "HARMONIC_KAFKA__CONSUMER_PROCESS": "false"},
}
#: the client's own lines about refused connections, per client (held back: none may reach the log)
REFUSED_SIGNS = ("ECONNREFUSED", "Connection refused")


@dataclass(frozen=True)
class Outage:
    """One sidecar's broker and how long it is away mid-run (sidecars may share a broker, and then its outage)."""

    broker: Broker
    seconds: float


def test_run_waits_out_a_broker_away_at_start_up_and_mid_run(
    kafka09_broker: Kafka09Broker, classifier: ClassifierFiles, tmp_path: Path
) -> None:
    # librdkafka's consumer started while the broker was away must join its group once the broker is back: at
    # librdkafka's default metadata refresh (5 min) it stayed out of it for minutes (docs/OPERATIONS.md, *Outages
    # with librdkafka*)
    modes = ("child", "in-process", "librdkafka")
    wait_out_outages({mode: Outage(kafka09_broker, OUTAGE_SECONDS) for mode in modes}, classifier, tmp_path)


def wait_out_outages(outages: Mapping[str, Outage], classifier: ClassifierFiles, tmp_path: Path) -> None:
    """One sidecar per consumer mode in ``outages``: its broker away at start-up, then mid-run for its outage's
    seconds (outages begin together; a broker shared by sidecars must have one length); every event scored."""
    brokers = {id(o.broker): o.broker for o in outages.values()}
    lengths = {id(o.broker): o.seconds for o in outages.values()}
    assert len(lengths) == len({(id(o.broker), o.seconds) for o in outages.values()}), "one length per broker"
    topics = {mode: new_topic(o.broker, f"outage-{mode}") for mode, o in outages.items()}
    sidecars = {
        mode: Sidecar(
            o.broker,
            topic=topics[mode],
            group_id=group_name(),
            state_dir=tmp_path / mode / "state",
            log_path=tmp_path / f"{mode}.log",
            model=classifier.onnx_path,
            model_name=MODEL,
            reference=classifier.reference_path,
            env=run_env(0, **MODES[mode]),
        )
        for mode, o in outages.items()
    }
    batches = [valid_events(classifier, 40, prefix=f"b{k}", start=40 * k) for k in range(3)]
    for broker in brokers.values():
        broker.stop_broker()
    try:
        for sidecar in sidecars.values():
            sidecar.start()
        for sidecar in sidecars.values():  # up, not ready, saying why
            sidecar.wait_until(lambda s=sidecar: s.get("/healthz")[0] == 200, "/healthz", DRAIN_TIMEOUT_SECONDS)
            sidecar.wait_until(
                lambda s=sidecar: "broker" in s.readyz()[1]["degraded"], "degraded: broker", DRAIN_TIMEOUT_SECONDS
            )
            status, _ = sidecar.readyz()
            assert status == 503
        time.sleep(STARTUP_OUTAGE_SECONDS)  # bounded: the outage itself
        assert all(s.running for s in sidecars.values())
    finally:
        for broker in brokers.values():
            broker.start_broker()
    try:
        for mode, sidecar in sidecars.items():
            sidecar.wait_ready(DRAIN_TIMEOUT_SECONDS)
            produce(outages[mode].broker, topics[mode], batches[0].messages)
        for sidecar in sidecars.values():
            sidecar.wait_for_metrics(
                lambda s: s.total(tel.EVENTS_SCORED_TOTAL.name) == 40, "40 scored", DRAIN_TIMEOUT_SECONDS
            )
        began = time.monotonic()
        away = dict(brokers)
        for broker in brokers.values():
            broker.stop_broker()  # a clean stop (after a SIGKILL, later tests on this broker were seen not to rejoin their groups)
        try:
            for sidecar in sidecars.values():
                sidecar.wait_for_metrics(
                    lambda s: s.value(tel.DEGRADED.name, reason="broker") == 1.0,
                    "degraded: broker, mid-run",
                    DRAIN_TIMEOUT_SECONDS,
                )
            for key in sorted(away, key=lengths.__getitem__):  # each broker back after its own outage
                time.sleep(max(0.0, began + lengths[key] - time.monotonic()))  # bounded: the outage itself
                assert all(s.running for s in sidecars.values())
                assert all(s.get("/healthz")[0] == 200 for s in sidecars.values())
                away.pop(key).start_broker()
                for mode, outage in outages.items():  # consumed again while other brokers are still away
                    if id(outage.broker) == key:
                        produce(outage.broker, topics[mode], batches[1].messages + batches[2].messages)
        finally:
            for broker in away.values():
                broker.start_broker()
        for sidecar in sidecars.values():
            sidecar.wait_for_metrics(
                lambda s: (
                    s.total(tel.EVENTS_SCORED_TOTAL.name) == 120 and s.value(tel.DEGRADED.name, reason="broker") == 0
                ),
                "every event scored after the outages, the broker back",
                DRAIN_TIMEOUT_SECONDS,
            )
        for mode, sidecar in sidecars.items():
            code, _ = sidecar.terminate()
            assert code == 0, mode
    finally:
        for sidecar in sidecars.values():
            if sidecar.running:
                sidecar.kill()
    for mode in outages:
        log = (tmp_path / f"{mode}.log").read_text()
        ours = log.count(OUR_LINE)
        assert 1 <= ours <= 8, (mode, ours, log[-4000:])
        theirs = [
            line
            for line in log.splitlines()
            if any(sign in line for sign in REFUSED_SIGNS) and (" kafka." in line or "librdkafka" in line)
        ]
        assert theirs == [], (mode, theirs[:5])  # the client's lines about the refused connections held back
        # librdkafka's PROTOERR: its first metadata answer from a Kafka 0.9 broker still starting fails to parse;
        # it asks again (every event is scored above)
        errors = [line for line in log.splitlines() if "ERROR" in line and "kafka." in line and "PROTOERR" not in line]
        assert errors == [], (mode, errors[:5])
        assert "Kafka broker reachable again" in log, mode
