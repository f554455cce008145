"""A state directory that cannot be written, against a real broker: ``harmonic-monitor run`` runs degraded.

The state directory is a real tmpfs mounted for the test (the runner is root, as in CI): remounted read-only, then
filled to the last byte. The sidecar must stay up and ready, say ``degraded: ["state_dir"]`` in ``/readyz`` and
``harmonic_degraded{reason="state_dir"} 1`` on ``/metrics``, commit nothing while its state cannot be saved (a
commit never runs ahead of the state), leave no temp file on the full volume, and resume saving and committing once
the directory is writable again; a restart on a read-only state directory starts degraded instead of crash-looping.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
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
    committed_offsets,
    group_name,
    merge_ends,
    produce,
    run_env,
    valid_events,
)

#: each test once per broker with kafka-python, and on Kafka 0.9 with librdkafka
kafka_broker = broker_for_both_clients()

pytestmark = pytest.mark.integration


def mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"mount {' '.join(args)} failed (the test needs root): {done.stderr.strip()}"


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs of its own, unmounted at the end."""
    path = tmp_path / "state"
    path.mkdir()
    mount("-t", "tmpfs", "-o", "size=4m", "tmpfs", str(path))
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def degraded(sidecar: Sidecar) -> list[str]:
    status, detail = sidecar.readyz()
    assert status == 200, f"/readyz answered {status} while degraded: {detail}"
    reasons: list[str] = detail["degraded"]
    return reasons


def test_run_stays_up_and_commits_nothing_while_its_state_dir_is_read_only_or_full(
    kafka_broker: Broker, topic: str, classifier: ClassifierFiles, tmp_path: Path, state_dir: Path
) -> None:
    group = group_name()

    def sidecar() -> Sidecar:
        return classifier_sidecar(
            kafka_broker,
            classifier,
            tmp_path,
            topic=topic,
            group_id=group,
            model_name=MODEL,
            state_dir=state_dir,
            env=run_env(0, HARMONIC_CHECKPOINT_SECONDS="1"),
        )

    def committed_are(ends: dict[int, int]) -> bool:
        return committed_offsets(kafka_broker, topic, group) == ends

    with sidecar() as car:
        car.wait_ready()
        ends = produce(kafka_broker, topic, valid_events(classifier, 200, prefix="a").messages)
        car.wait_until(lambda: committed_are(ends), "the first checkpoint", DRAIN_TIMEOUT_SECONDS)

        # read-only: events are still applied, nothing is committed, the fault is shown
        mount("-o", "remount,ro", str(state_dir))
        later = merge_ends(ends, produce(kafka_broker, topic, valid_events(classifier, 200, prefix="b").messages))
        car.wait_for_metrics(
            lambda s: s.total(tel.EVENTS_SCORED_TOTAL.name) >= 400, "the events after the remount scored"
        )
        car.wait_until(lambda: degraded(car) == ["state_dir"], "/readyz to list state_dir as degraded")
        assert car.scrape().value(tel.DEGRADED.name, reason="state_dir") == 1.0
        assert committed_are(ends), "offsets were committed past a state that could not be saved"

        # writable again: the state is saved and the offsets it holds are committed
        mount("-o", "remount,rw", str(state_dir))
        car.wait_until(
            lambda: committed_are(later), "the checkpoint after the directory came back", DRAIN_TIMEOUT_SECONDS
        )
        car.wait_until(lambda: degraded(car) == [], "the degraded state to clear")

        # full: the same, and the failed write leaves no temp file behind on the full volume
        filler = state_dir / "filler"
        with contextlib.suppress(OSError), open(filler, "wb") as fh:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        full = merge_ends(later, produce(kafka_broker, topic, valid_events(classifier, 200, prefix="c").messages))
        car.wait_until(lambda: degraded(car) == ["state_dir"], "/readyz to list state_dir as degraded (full)")
        assert committed_are(later)
        assert not (state_dir / "state.tmp").exists()
        filler.unlink()
        car.wait_until(lambda: committed_are(full), "the checkpoint after space was freed", DRAIN_TIMEOUT_SECONDS)
        assert car.running

        # a stop with a read-only state directory still exits cleanly
        mount("-o", "remount,ro", str(state_dir))
        code, _ = car.terminate()
    assert code == 0, car.log_tail()

    # a start on a read-only state directory: up, ready, degraded at the first checkpoint, not crash-looping
    with sidecar() as again:
        again.wait_ready()
        produce(kafka_broker, topic, valid_events(classifier, 20, prefix="d").messages)
        again.wait_until(lambda: degraded(again) == ["state_dir"], "/readyz to list state_dir as degraded at start")
        code, _ = again.terminate()
    assert code == 0, again.log_tail()
