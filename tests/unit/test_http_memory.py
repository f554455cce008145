"""Memory of the HTTP endpoint's process under TLS connections that never finish their handshake: each costs a
small read buffer while it waits, and what the connections held goes back to the operating system once the read
timeout has closed them (monitor/exporters/connection_memory.py)."""

from __future__ import annotations

import socket
import ssl
import time
from pathlib import Path

from monitor.config import MetricsSettings
from monitor.exporters.connection_memory import HeapTrim
from monitor.exporters.http_process import ProcessMetricsServer
from monitor.exporters.prometheus import MetricsState
from tests.unit.tls_certs import self_signed

DEADLINE_SECONDS = 30.0
#: stalled handshakes held at once (asyncio's own 256 KiB buffer each: ~75 MiB)
STALLED = 300
#: growth of the server process's RSS allowed while they wait, and left once they are closed
PEAK_GROWTH_MB = 40.0
LEFT_GROWTH_MB = 16.0
#: the start of a ClientHello, never finished: the server is inside its handshake
PARTIAL_HELLO = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS in /proc/{pid}/status")


def handshake(port: int) -> None:
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    with (
        socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_SECONDS) as raw,
        ctx.wrap_socket(raw, server_hostname="localhost"),
    ):
        pass


def test_stalled_tls_handshakes_cost_little_and_their_memory_goes_back(tmp_path: Path) -> None:
    certs = self_signed(tmp_path)
    web = tmp_path / "web.yml"
    web.write_text(f"tls_server_config:\n  cert_file: {certs.cert}\n  key_file: {certs.key}\n", encoding="utf-8")
    settings = MetricsSettings(
        host="127.0.0.1", port=0, web_config_file=web, read_timeout_seconds=1.0, max_connections=STALLED + 10
    )
    with ProcessMetricsServer(MetricsState(), settings=settings) as server:
        assert server.proc is not None
        pid = server.proc.pid
        deadline = time.monotonic() + DEADLINE_SECONDS
        while True:  # the child serves TLS once its loop runs
            try:
                handshake(server.port)
                break
            except OSError:
                assert time.monotonic() < deadline, "the HTTP process never completed a TLS handshake"
                time.sleep(0.05)
        before = peak = rss_mb(pid)
        stalled = []
        for _ in range(STALLED):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=DEADLINE_SECONDS)
            sock.sendall(PARTIAL_HELLO)
            stalled.append(sock)
        for sock in stalled:  # each is closed by the server at its read timeout
            sock.settimeout(0.02)
            while True:
                peak = max(peak, rss_mb(pid))
                try:
                    if sock.recv(1) == b"":
                        break
                except TimeoutError:
                    assert time.monotonic() < deadline + DEADLINE_SECONDS, "a stalled handshake was never closed"
            sock.close()
        assert peak - before < PEAK_GROWTH_MB, f"RSS {before:.0f} -> {peak:.0f} MiB with {STALLED} stalled handshakes"
        deadline = time.monotonic() + DEADLINE_SECONDS
        while (now := rss_mb(pid)) - before >= LEFT_GROWTH_MB:
            assert time.monotonic() < deadline, f"RSS {before:.0f} -> {now:.0f} MiB after every connection closed"
            time.sleep(0.1)


def test_heap_trim_trims_after_a_burst_of_ended_connections_only() -> None:
    calls: list[int] = []
    heap = HeapTrim(burst=3, trim=lambda: calls.append(1))
    for _ in range(2):
        heap.ended()
    assert not heap.tick() and calls == []
    heap.ended()
    assert heap.tick() and not heap.tick() and heap.trims == 1 == len(calls)
