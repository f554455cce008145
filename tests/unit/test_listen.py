"""The metrics endpoint's socket (monitor/exporters/listen.py): a taken port is one line that names the port, who holds
it and the fix; ``check-config`` notes it, ``Service.from_settings`` refuses it before building anything."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor.cli import main
from monitor.config import load_settings
from monitor.errors import ConfigError
from monitor.exporters.http_process import ProcessMetricsServer
from monitor.exporters.listen import listen, port_holder
from monitor.exporters.prometheus import MetricsState
from monitor.runtime.service import Service


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port this process listens on."""
    with socket.create_server(("127.0.0.1", 0)) as sock:
        yield int(sock.getsockname()[1])


def test_listen_binds_a_free_port() -> None:
    with listen("127.0.0.1", 0) as sock:
        assert sock.getsockname()[1] > 0


def test_listen_refuses_a_port_in_use_in_one_line_with_its_holder(held_port: int) -> None:
    with pytest.raises(ConfigError) as info:
        listen("127.0.0.1", held_port)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"metrics port {held_port} on 127.0.0.1 is in use (held by pid {os.getpid()} (")
    assert message.endswith("--metrics-port N (metrics.port, HARMONIC_METRICS__PORT)")


def test_port_holder_finds_this_process_and_nobody_on_a_free_port(held_port: int) -> None:
    assert port_holder(held_port) == f"pid {os.getpid()} ({Path('/proc/self/comm').read_text().strip()})"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = int(probe.getsockname()[1])  # bound, not listening
    assert port_holder(free) is None


def test_listen_refuses_an_address_of_no_interface_here() -> None:
    with pytest.raises(
        ConfigError, match=r"^cannot listen on metrics port 9 on 192\.0\.2\.1: .*HARMONIC_METRICS__HOST"
    ):
        listen("192.0.2.1", 9)  # TEST-NET-1: never an address of this host


def test_process_metrics_server_refuses_a_taken_port_as_config_error(held_port: int) -> None:
    settings = load_settings(None, {"models": [{"name": "m", "path": "m.onnx"}], "metrics": {"port": held_port}})
    metrics = settings.metrics.model_copy(update={"host": "127.0.0.1"})
    with pytest.raises(ConfigError, match=f"metrics port {held_port} on 127.0.0.1 is in use"):
        ProcessMetricsServer(MetricsState(), settings=metrics)


def test_service_from_settings_refuses_a_taken_port_before_loading_a_model(held_port: int, tmp_path: Path) -> None:
    # the model file does not exist: reaching the model (or the consumer) would raise something else
    settings = load_settings(
        None,
        {
            "models": [{"name": "m", "path": str(tmp_path / "absent.onnx")}],
            "metrics": {"host": "127.0.0.1", "port": held_port},
            "kafka": {"bootstrap_servers": "127.0.0.1:1"},
        },
    )
    with pytest.raises(ConfigError, match=f"metrics port {held_port} on 127.0.0.1 is in use"):
        Service.from_settings(settings)


def test_check_config_notes_a_taken_port_and_still_passes(
    held_port: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in list(os.environ):
        if name.upper().startswith("HARMONIC_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HARMONIC_METRICS__HOST", "127.0.0.1")
    code = main(["check-config", "--no-load-models", "--model", "m.onnx", "--metrics-port", str(held_port)])
    err = capsys.readouterr().err
    assert code == 0
    assert f"note: metrics port {held_port} on 127.0.0.1 is in use" in err and "`run` here would refuse" in err
