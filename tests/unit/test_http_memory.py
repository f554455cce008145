"""Memory of the HTTP endpoint's process under TLS connections that never finish their handshake: each costs a
small read buffer while it waits, and what the connections held goes back to the operating system once the read
timeout has closed them (monitor/exporters/connection_memory.py)."""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from pathlib import Path
from typing import Any

from monitor.config import MetricsSettings
from monitor.exporters.connection_memory import (
    TLS_INCOMING_HIGH_WATER_BYTES,
    TLS_READ_BUFFER_BYTES,
    HeapTrim,
    start_tls,
)
from monitor.exporters.http import _AcceptPaused
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


def test_start_tls_speaks_tls_with_a_one_record_buffer_and_a_small_incoming_bound(tmp_path: Path) -> None:
    """The server side of a real handshake through :func:`start_tls`: the reader and writer speak TLS afterwards,
    and the connection's TLS protocol holds one record's buffer and stops reading past its incoming bound."""
    certs = self_signed(tmp_path)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(certs.cert, certs.key)
    client_ctx = ssl.create_default_context(cafile=str(certs.cert))
    seen: dict[str, int] = {}

    async def main() -> bytes:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await start_tls(writer, server_ctx)
            lean: Any = writer.transport._ssl_protocol  # type: ignore[attr-defined]  # the TLS protocol under the stream
            seen["buffer"] = len(lean._ssl_buffer)
            seen["high"] = lean._incoming_high_water
            writer.write((await reader.readline()).upper())
            await writer.drain()
            writer.close()

        loop = asyncio.get_running_loop()
        # as the metrics server accepts: reading paused until the handler upgrades, so the hello waits for TLS
        server = await loop.create_server(
            lambda: _AcceptPaused(asyncio.StreamReader(loop=loop), handle, loop=loop), "127.0.0.1", 0
        )
        port = server.sockets[0].getsockname()[1]
        async with server:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=client_ctx, server_hostname="localhost"
            )
            writer.write(b"hello\n")
            answer = await asyncio.wait_for(reader.readline(), DEADLINE_SECONDS)
            writer.close()
            return answer

    assert asyncio.run(main()) == b"HELLO\n"
    assert seen == {"buffer": TLS_READ_BUFFER_BYTES, "high": TLS_INCOMING_HIGH_WATER_BYTES}
    assert TLS_READ_BUFFER_BYTES < 20 * 1024 and TLS_INCOMING_HIGH_WATER_BYTES < 100 * 1024  # asyncio's: 256 KiB each
