"""``run`` refuses at start what cannot run, before it connects to Kafka: a dead-letter or scores topic it would read
back (a feedback loop), a metrics port another process holds, a reference below the detectors' minimum, a broker
list that is not host:port, an alert URL that is not http(s). Each exits 2 with one line, and the broker behind a
counting proxy sees no connection and the broker no group; the same settings made valid connect through it and
join (the control).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.integration.brokers import Broker, BrokerPool, TcpProxy, free_port
from tests.integration.model_fixtures import ClassifierFiles
from tests.integration.test_run_kafka import group_name

pytestmark = pytest.mark.integration

#: liveness bounds: a refusal comes once the interpreter and the model have loaded; a valid start connects soon after
EXIT_TIMEOUT_SECONDS = 60.0
CONNECT_TIMEOUT_SECONDS = 60.0


@pytest.fixture(scope="module")
def broker(broker_pool: BrokerPool) -> Broker:
    return broker_pool.get("kafka09")  # it lists its consumer groups (Tansu lists none)


@pytest.fixture
def proxy(broker: Broker) -> Iterator[TcpProxy]:
    """The broker's address through a proxy that counts the connections it accepts."""
    counting = TcpProxy(free_port(), broker.port)
    counting.restore()
    try:
        yield counting
    finally:
        counting.cut()


def run_argv(broker: Broker, proxy: TcpProxy, files: ClassifierFiles, topic: str, group: str, *extra: str) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "monitor",
        "run",
        "--bootstrap-servers",
        f"127.0.0.1:{proxy.port}",
        "--topic",
        topic,
        "--group-id",
        group,
        "--model",
        str(files.onnx_path),
        *extra,
    ]
    if broker.api_version is not None:
        argv += ["--api-version", ".".join(str(p) for p in broker.api_version)]
    return argv


def sidecar_env(tmp_path: Path, **variables: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("HARMONIC_")}
    env.update(
        HARMONIC_STATE_DIR=str(tmp_path / "state"),
        HARMONIC_METRICS__HOST="127.0.0.1",
        HARMONIC_KAFKA__SESSION_TIMEOUT_MS="6000",
        **variables,
    )
    return env


def refused(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str]:
    completed = subprocess.run(
        argv, capture_output=True, text=True, timeout=EXIT_TIMEOUT_SECONDS, env=env, cwd=cwd, check=False
    )
    return completed.returncode, completed.stderr


def group_known(broker: Broker, group: str) -> bool:
    """Whether ``broker`` knows consumer group ``group`` (a consumer joined it)."""
    with broker.admin() as admin:
        return any(listed["group_id"] == group for listed in admin.list_groups())


def assert_never_reached(broker: Broker, proxy: TcpProxy, group: str) -> None:
    assert proxy.accepted == 0, "the sidecar connected to the broker before refusing"
    assert not group_known(broker, group)


@pytest.mark.parametrize(
    ("case", "error"),
    [
        ("dead_letter_topic", "error: invalid configuration: 'kafka': dead_letter_topic and topic are both '{topic}'"),
        ("scores_topic", "error: invalid configuration: 'kafka': scores_topic and topic are both '{topic}'"),
        ("metrics_port", "error: metrics port {port} on 127.0.0.1 is in use (held by pid {pid} ("),
        ("small_reference", "error: model 'classifier': reference '{reference}' has 5 usable rows; the drift"),
        ("webhook", "error: invalid configuration: 'alerts.webhook_url': must be an absolute http(s) URL"),
    ],
    ids=["dead_letter_topic", "scores_topic", "metrics_port", "small_reference", "webhook"],
)
def test_run_refuses_at_start_before_connecting_to_the_broker(
    broker: Broker, proxy: TcpProxy, classifier: ClassifierFiles, tmp_path: Path, case: str, error: str
) -> None:
    topic, group = f"refusal-{group_name()}", group_name()
    port = free_port()
    extra = ["--metrics-port", str(port), "--reference", str(classifier.reference_path)]
    variables: dict[str, str] = {}
    held: socket.socket | None = None
    if case in ("dead_letter_topic", "scores_topic"):
        extra += [f"--{case.replace('_', '-')}", topic]
    elif case == "metrics_port":
        held = socket.create_server(("127.0.0.1", port))
    elif case == "small_reference":
        small = tmp_path / "small.csv"
        np.savetxt(small, np.loadtxt(classifier.reference_path, delimiter=",")[:5], delimiter=",")
        extra[-1] = str(small)
    else:
        variables["HARMONIC_ALERTS__WEBHOOK_URL"] = "ftp://alerts.example/hook"
    started = time.monotonic()
    try:
        code, stderr = refused(
            run_argv(broker, proxy, classifier, topic, group, *extra), sidecar_env(tmp_path, **variables), tmp_path
        )
    finally:
        if held is not None:
            held.close()
    expected = error.format(topic=topic, port=port, pid=os.getpid(), reference=extra[-1])
    lines = stderr.splitlines()
    assert code == 2, stderr
    assert lines[-1].startswith(expected), stderr  # the refusal: the last line, and one line
    assert "Traceback" not in stderr
    if case == "metrics_port":
        assert "read as a classifier" not in stderr  # the port is bound before a model loads
    assert_never_reached(broker, proxy, group)
    assert time.monotonic() - started < EXIT_TIMEOUT_SECONDS


def test_run_with_those_settings_made_valid_connects_through_the_proxy(
    broker: Broker, proxy: TcpProxy, classifier: ClassifierFiles, tmp_path: Path
) -> None:
    """The control: what the refusals are measured against does reach the broker."""
    topic, group = f"refusal-{group_name()}", group_name()
    broker.create_topic(topic, 1)
    argv = run_argv(broker, proxy, classifier, topic, group, "--metrics-port", str(free_port()))
    argv += ["--reference", str(classifier.reference_path), "--dead-letter-topic", f"{topic}-dlq"]
    process = subprocess.Popen(argv, env=sidecar_env(tmp_path), cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + CONNECT_TIMEOUT_SECONDS
        while process.poll() is None and time.monotonic() < deadline and not group_known(broker, group):
            time.sleep(0.2)
        assert proxy.accepted > 0 and group_known(broker, group), "a valid sidecar never joined its group"
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=EXIT_TIMEOUT_SECONDS)
    assert process.returncode == 0, stderr
