"""A real Prometheus scrapes a real sidecar's ``/metrics`` over TLS with basic auth.

The sidecar is the production :class:`~monitor.runtime.service.Service` with ``metrics.web_config_file`` pointing
at a web config (a self-signed certificate made by ``openssl``, one bcrypt-hashed user). Prometheus (the Debian
binary, as in test_prometheus_scrape.py) scrapes it twice: job ``harmonic-tls`` with ``scheme: https``, the
certificate as ``ca_file`` and the right password, job ``harmonic-tls-wrong`` with a wrong password. The first target
is up and its ``harmonic_`` series are stored; the second is down with a 401.

The binary comes from ``bash scripts/install-prometheus.sh``; without it the tests fail with that command —
they are never skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bcrypt
import numpy as np
import pytest

from monitor import telemetry as tel
from monitor.config import load_settings
from monitor.errors import ConfigError
from monitor.runtime.models import load_model_runtime
from monitor.runtime.service import Service
from monitor.source.replay import ReplaySource
from tests.integration.test_prometheus_scrape import RULES, PrometheusService, serving
from tests.unit import onnx_graphs
from tests.unit.tls_certs import CertFiles, self_signed

pytestmark = pytest.mark.integration

PASSWORD = "scrape-s3cret"

TLS_CONFIG_TEMPLATE = """\
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: harmonic-tls
    scheme: https
    tls_config: {{ca_file: {ca}, server_name: localhost}}
    basic_auth: {{username: prometheus, password: {password}}}
    static_configs:
      - targets: ["127.0.0.1:{target_port}"]
  - job_name: harmonic-tls-wrong
    scheme: https
    tls_config: {{ca_file: {ca}, server_name: localhost}}
    basic_auth: {{username: prometheus, password: not-the-password}}
    static_configs:
      - targets: ["127.0.0.1:{target_port}"]
"""


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def web_config(tmp_path_factory: pytest.TempPathFactory, certs: CertFiles) -> Path:
    path = tmp_path_factory.mktemp("web") / "web-config.yml"
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=10)).decode()
    path.write_text(
        f"tls_server_config:\n  cert_file: {certs.cert}\n  key_file: {certs.key}\n"
        f"basic_auth_users:\n  prometheus: '{hashed}'\n",
        encoding="utf-8",
    )
    return path


def _settings(tmp: Path, web_config: Path) -> Any:
    model = onnx_graphs.linear_classifier(
        tmp / "credit.onnx", [[1.0, -0.5, 0.0], [0.3, 0.8, -1.0]], [0.1, 0.0, -0.2], curvature=[0.4, -0.3, 0.1]
    )
    np.save(tmp / "reference.npy", np.random.default_rng(0).normal(0.0, 1.5, (400, 2)))
    return load_settings(
        None,
        {
            "models": [{"name": "credit", "path": str(model), "reference": str(tmp / "reference.npy")}],
            "sampler": {"events_per_second": 0},
            "batch": {"max_events": 64, "max_wait_ms": 50},
            "metrics": {"host": "127.0.0.1", "port": 0, "web_config_file": str(web_config)},
            "state_dir": str(tmp / "state"),
        },
    )


@pytest.fixture(scope="module")
def sidecar(tmp_path_factory: pytest.TempPathFactory, web_config: Path) -> Iterator[Service]:
    with serving(_settings(tmp_path_factory.mktemp("sidecar"), web_config), "sidecar-tls") as service:
        yield service


@pytest.fixture(scope="module")
def prometheus(sidecar: Service, certs: CertFiles) -> Iterator[PrometheusService]:
    assert sidecar.server is not None and sidecar.server.scheme == "https"
    prom = PrometheusService(sidecar.server.port, RULES)
    prom._config = TLS_CONFIG_TEMPLATE.format(
        ca=json.dumps(str(certs.cert)), password=json.dumps(PASSWORD), target_port=sidecar.server.port
    )
    with prom:
        yield prom


def _target(prometheus: PrometheusService, job: str, health: str) -> list[dict[str, Any]]:
    targets = prometheus.api("targets", state="active")["activeTargets"]
    return [t for t in targets if t["labels"]["job"] == job and t["health"] == health]


def test_prometheus_scrapes_the_sidecar_over_tls_with_basic_auth(prometheus: PrometheusService) -> None:
    (target,) = prometheus.wait_for(lambda: _target(prometheus, "harmonic-tls", "up"), "harmonic-tls target up")
    assert target["scrapeUrl"].startswith("https://")
    assert target["lastError"] == ""


def test_prometheus_stores_harmonic_series_scraped_over_tls(prometheus: PrometheusService) -> None:
    result = prometheus.wait_for(
        lambda: [
            s
            for s in prometheus.query('harmonic_events_consumed_total{job="harmonic-tls", model="credit"}')
            if float(s["value"][1])
        ],
        "harmonic_events_consumed_total > 0 from the TLS job",
    )
    assert [s["metric"]["model"] for s in result] == ["credit"]


def test_prometheus_target_with_a_wrong_password_is_down_with_401(
    prometheus: PrometheusService, sidecar: Service
) -> None:
    (target,) = prometheus.wait_for(
        lambda: _target(prometheus, "harmonic-tls-wrong", "down"), "harmonic-tls-wrong target down"
    )
    assert "401" in target["lastError"], target["lastError"]
    assert not prometheus.query('harmonic_events_consumed_total{job="harmonic-tls-wrong"}')
    # the server process counts it; the pipeline copies its counts in on a tick (well under a second later)
    prometheus.wait_for(
        lambda: sidecar.state.counter(tel.HTTP_REQUESTS_REJECTED_TOTAL.name, ("unauthorized",)) > 0,
        "the 401s counted as unauthorized",
    )


def test_service_refuses_to_start_with_a_malformed_web_config(tmp_path: Path) -> None:
    bad = tmp_path / "web.yml"
    bad.write_text("tls_server_config:\n  cert_file: /nonexistent.crt\n", encoding="utf-8")
    settings = _settings(tmp_path, bad)
    with pytest.raises(ConfigError, match=r"tls_server_config.key_file is required"):
        Service(
            settings, ReplaySource([], rate=1.0), [load_model_runtime(m) for m in settings.models], serve_metrics=True
        )
