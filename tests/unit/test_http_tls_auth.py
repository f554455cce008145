"""Stage 6: a real :class:`MetricsServer` with a web config (monitor/exporters/http.py, webconfig.py) — a TLS
handshake with a self-signed certificate made by ``openssl``, and basic auth on every path but ``/healthz``: 401
with ``WWW-Authenticate`` and ``reason="unauthorized"`` for missing or wrong credentials, cached verifications."""

from __future__ import annotations

import base64
import http.client
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import bcrypt
import pytest

from monitor import telemetry as tel
from monitor.config import MetricsSettings
from monitor.exporters.http import MetricsServer
from monitor.exporters.prometheus import MetricsState
from monitor.exporters.webconfig import WebConfig, load_web_config, parse_web_config
from tests.unit.tls_certs import CertFiles, self_signed

DEADLINE_SECONDS = 10.0
HASH = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def state() -> MetricsState:
    return MetricsState()


@pytest.fixture
def serve(state: MetricsState) -> Iterator[Callable[..., MetricsServer]]:
    servers: list[MetricsServer] = []

    def start(web_config: WebConfig, **limits: Any) -> MetricsServer:
        srv = MetricsServer(state, settings=MetricsSettings(host="127.0.0.1", port=0, **limits), web_config=web_config)
        servers.append(srv.start())
        return srv

    yield start
    for srv in servers:
        srv.close()


def client_context(certs: CertFiles) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certs.cert))
    return ctx


def get(
    srv: MetricsServer, path: str, headers: dict[str, str] | None = None, ctx: ssl.SSLContext | None = None
) -> tuple[int, dict[str, str], bytes]:
    conn: http.client.HTTPConnection
    if ctx is not None:
        conn = http.client.HTTPSConnection("localhost", srv.port, timeout=DEADLINE_SECONDS, context=ctx)
    else:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=DEADLINE_SECONDS)
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def tls_config(tmp_path: Path, certs: CertFiles, users: bool = False) -> WebConfig:
    path = tmp_path / "web.yml"
    text = f"tls_server_config:\n  cert_file: {certs.cert}\n  key_file: {certs.key}\n"
    if users:
        text += f"basic_auth_users:\n  prom: '{HASH}'\n"
    path.write_text(text, encoding="utf-8")
    return load_web_config(path)


AUTH_ONLY = parse_web_config({"basic_auth_users": {"prom": HASH}})


# ---------------------------------------------------------------------- TLS


def test_metrics_server_serves_metrics_over_tls(
    tmp_path: Path, certs: CertFiles, serve: Callable[..., MetricsServer]
) -> None:
    srv = serve(tls_config(tmp_path, certs))
    assert srv.scheme == "https"
    status, headers, body = get(srv, "/metrics", ctx=client_context(certs))
    assert status == 200 and b"harmonic_http_requests_total" in body
    assert get(srv, "/healthz", ctx=client_context(certs))[0] == 200


def test_metrics_server_with_tls_refuses_plain_http(
    tmp_path: Path, certs: CertFiles, serve: Callable[..., MetricsServer]
) -> None:
    srv = serve(tls_config(tmp_path, certs))
    with pytest.raises((http.client.HTTPException, ConnectionError)):
        get(srv, "/healthz")


def test_metrics_server_tls_handshake_fails_for_a_client_that_does_not_trust_the_certificate(
    tmp_path: Path, certs: CertFiles, serve: Callable[..., MetricsServer]
) -> None:
    srv = serve(tls_config(tmp_path, certs))
    with pytest.raises(ssl.SSLCertVerificationError):
        get(srv, "/healthz", ctx=ssl.create_default_context())


def test_metrics_server_tls_drops_a_stalled_handshake_after_the_read_timeout(
    tmp_path: Path, certs: CertFiles, serve: Callable[..., MetricsServer]
) -> None:
    srv = serve(tls_config(tmp_path, certs), read_timeout_seconds=0.2)
    with socket.create_connection(("127.0.0.1", srv.port), timeout=DEADLINE_SECONDS) as sock:
        # no ClientHello: the server closes once the handshake timeout passes
        assert sock.recv(1) == b""
    assert get(srv, "/healthz", ctx=client_context(certs))[0] == 200


# ---------------------------------------------------------------------- basic auth


@pytest.mark.parametrize("path", ["/metrics", "/readyz", "/probes"])
@pytest.mark.parametrize(
    "credentials", [None, ("prom", "wrong"), ("nobody", "s3cret")], ids=["missing", "wrong", "user"]
)
def test_metrics_server_answers_401_without_valid_credentials(
    path: str,
    credentials: tuple[str, str] | None,
    serve: Callable[..., MetricsServer],
    state: MetricsState,
) -> None:
    srv = serve(AUTH_ONLY)
    status, headers, body = get(srv, path, basic(*credentials) if credentials else None)
    assert status == 401
    assert headers["www-authenticate"] == 'Basic realm="harmonic-monitor"'
    assert b"s3cret" not in body
    assert state.counter(tel.HTTP_REQUESTS_REJECTED_TOTAL.name, ("unauthorized",)) == 1


@pytest.mark.parametrize("path", ["/metrics", "/readyz", "/probes"])
def test_metrics_server_serves_with_valid_credentials(path: str, serve: Callable[..., MetricsServer]) -> None:
    srv = serve(AUTH_ONLY)
    assert get(srv, path, basic("prom", "s3cret"))[0] == 200


def test_metrics_server_leaves_healthz_open_for_liveness_probes(
    serve: Callable[..., MetricsServer], state: MetricsState
) -> None:
    srv = serve(AUTH_ONLY)
    assert get(srv, "/healthz")[0] == 200
    assert state.counter(tel.HTTP_REQUESTS_REJECTED_TOTAL.name, ("unauthorized",)) == 0


def test_metrics_server_verifies_a_credential_once_and_then_serves_from_the_cache(
    serve: Callable[..., MetricsServer],
) -> None:
    srv = serve(AUTH_ONLY)
    for _ in range(5):
        assert get(srv, "/metrics", basic("prom", "s3cret"))[0] == 200
    assert srv.auth is not None and srv.auth.bcrypt_checks == 1


def test_metrics_server_serves_tls_and_basic_auth_together(
    tmp_path: Path, certs: CertFiles, serve: Callable[..., MetricsServer]
) -> None:
    srv = serve(tls_config(tmp_path, certs, users=True))
    ctx = client_context(certs)
    assert get(srv, "/metrics", ctx=ctx)[0] == 401
    assert get(srv, "/metrics", basic("prom", "s3cret"), ctx=ctx)[0] == 200


def test_metrics_server_without_web_config_stays_plain_and_open(serve: Callable[..., MetricsServer]) -> None:
    srv = serve(WebConfig())
    assert srv.scheme == "http" and srv.auth is None
    assert get(srv, "/metrics")[0] == 200


def test_metrics_server_bounds_password_checks_and_keeps_healthz_answering(
    serve: Callable[..., MetricsServer], state: MetricsState, monkeypatch: pytest.MonkeyPatch
) -> None:
    srv = serve(AUTH_ONLY, workers=1)  # at most 2 * workers password checks in flight
    release = threading.Event()

    def stuck_verify(header: str | None) -> bool:
        release.wait(DEADLINE_SECONDS)
        return False

    assert srv.auth is not None
    monkeypatch.setattr(srv.auth, "verify", stuck_verify)
    flood = [threading.Thread(target=get, args=(srv, "/metrics", basic("prom", f"guess{i}"))) for i in range(2)]
    for thread in flood:
        thread.start()
    deadline = time.monotonic() + DEADLINE_SECONDS
    while srv._auth_jobs < 2:  # both checks taken (one running, one queued)
        assert time.monotonic() < deadline, "the password checks did not start"
        time.sleep(0.005)  # polling the real server, bounded by the deadline
    try:
        status, headers, _ = get(srv, "/metrics", basic("prom", "guess3"))
        assert status == 503 and headers["retry-after"] == "1"
        assert get(srv, "/healthz")[0] == 200
        assert state.counter(tel.HTTP_REQUESTS_REJECTED_TOTAL.name, ("pool_full",)) == 1
    finally:
        release.set()
        for thread in flood:
            thread.join(DEADLINE_SECONDS)
    assert state.counter(tel.HTTP_REQUESTS_REJECTED_TOTAL.name, ("unauthorized",)) == 2


def test_metrics_server_counts_stalled_tls_handshakes_against_the_connection_cap(
    tmp_path: Path, certs: CertFiles, serve: Callable[..., MetricsServer], state: MetricsState
) -> None:
    # raw TCP connections that never send a ClientHello: each holds a slot from its accept
    srv = serve(tls_config(tmp_path, certs), max_connections=3, read_timeout_seconds=30.0)
    stalled = [socket.create_connection(("127.0.0.1", srv.port), timeout=DEADLINE_SECONDS) for _ in range(3)]
    try:
        # the fourth connection closes the longest-waiting handshake to make room
        assert get(srv, "/healthz", ctx=client_context(certs))[0] == 200
        assert stalled[0].recv(1) == b""
        assert state.counter(tel.HTTP_REQUESTS_REJECTED_TOTAL.name, ("too_many_connections",)) >= 1
    finally:
        for sock in stalled:
            sock.close()


def test_metrics_server_closes_a_stalled_tls_handshake_at_the_read_timeout_and_counts_it(
    tmp_path: Path, certs: CertFiles, serve: Callable[..., MetricsServer], state: MetricsState
) -> None:
    srv = serve(tls_config(tmp_path, certs), read_timeout_seconds=0.2)
    with socket.create_connection(("127.0.0.1", srv.port), timeout=DEADLINE_SECONDS) as sock:
        sock.sendall(b"\x16\x03\x01")  # the start of a ClientHello, never finished
        assert sock.recv(1) == b""
    # the server counts the timeout after it closes the connection: the count may trail the close by a moment
    deadline = time.monotonic() + DEADLINE_SECONDS
    while state.counter(tel.HTTP_REQUESTS_REJECTED_TOTAL.name, ("read_timeout",)) < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert state.counter(tel.HTTP_REQUESTS_REJECTED_TOTAL.name, ("read_timeout",)) == 1
