"""Stage 6: the HTTP endpoint's limits (monitor/exporters/http.py) — the render cache, the request parser, and a
real :class:`MetricsServer` on a free loopback port held under abuse: half-open and slow clients, too many
connections, scrapes and readiness calls, bad requests.

Nothing sleeps: renders and callbacks are held on ``threading.Event``s, the render interval runs on a fake clock,
and where the real server must act on its own (a read or write timeout of a fraction of a second) the test waits
for that condition with a deadline.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

from monitor import telemetry as tel
from monitor.config import MetricsSettings
from monitor.exporters.http import MetricsServer, Routes
from monitor.exporters.http_request import BadRequest, parse_head
from monitor.exporters.prometheus import MetricsState
from monitor.exporters.render_cache import RenderCache

DEADLINE_SECONDS = 10.0


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Poll a condition on the real server until it holds; AssertionError after the deadline."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {DEADLINE_SECONDS} s")
        time.sleep(0.005)  # polling the real server's own timer, bounded by the deadline


def get(port: int, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=DEADLINE_SECONDS)
    try:
        conn.request(method, path)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def raw(port: int, data: bytes) -> bytes:
    """Send raw bytes, read until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_SECONDS) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def half_open(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_SECONDS)
    sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
    return sock


def closed_by_server(sock: socket.socket) -> bool:
    """True once the server closed ``sock`` (EOF or reset); waits for that up to the socket's timeout."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


class Gate:
    """A callable that blocks until released, and says when it was entered."""

    def __init__(self, result: Any) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = 0
        self.result = result

    def __call__(self) -> Any:
        self.calls += 1
        self.entered.set()
        assert self.release.wait(DEADLINE_SECONDS), "the test never released the gate"
        return self.result


class BlockingCollector:
    """A collector whose collect() waits on a gate: a slow /metrics render."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    def collect(self) -> Iterator[Metric]:
        self.gate()
        yield GaugeMetricFamily("slow_render", "A render the test holds.", value=1.0)


@pytest.fixture
def state() -> MetricsState:
    return MetricsState()


@pytest.fixture
def serve(state: MetricsState) -> Iterator[Callable[..., MetricsServer]]:
    """Starts MetricsServers on free loopback ports with the given limits; closes them after the test."""
    servers: list[MetricsServer] = []

    def start(*, registry: CollectorRegistry | None = None, **kwargs: Any) -> MetricsServer:
        clock = kwargs.pop("clock", time.monotonic)
        ready = kwargs.pop("ready", None)
        srv = MetricsServer(
            state,
            settings=MetricsSettings(host="127.0.0.1", port=0, **kwargs),
            routes=Routes(ready=ready),
            registry=registry,
            clock=clock,
        )
        servers.append(srv.start())
        return srv

    yield start
    for srv in servers:
        srv.close()


def slow_registry(gate: Gate) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BlockingCollector(gate))
    return registry


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    return thread, out


@contextmanager
def slow_scrape(serve: Callable[..., MetricsServer], **limits: Any) -> Iterator[tuple[MetricsServer, list[Any]]]:
    """A server whose one /metrics scrape is stuck in its render for the ``with`` block; yields (server, the
    scrape's (status, headers, body) once the block ends)."""
    gate = Gate(None)
    srv = serve(registry=slow_registry(gate), **limits)
    scrape, out = in_thread(lambda: get(srv.port, "/metrics"))
    assert gate.entered.wait(DEADLINE_SECONDS)
    try:
        yield srv, out
    finally:
        gate.release.set()
        scrape.join(DEADLINE_SECONDS)


# ---------------------------------------------------------------------- RenderCache


def test_render_cache_renders_once_per_interval_from_the_end_of_the_last_render() -> None:
    clock = FakeClock()
    bodies = iter([b"first", b"second"])

    def render() -> bytes:
        clock.now += 0.4  # a render that takes 0.4 s
        return next(bodies)

    cache = RenderCache(render, min_interval_seconds=1.0, clock=clock)
    assert cache.fresh() is None
    assert [cache.get() for _ in range(5)] == [b"first"] * 5
    clock.now += 0.99  # 0.99 s after the render ended: still fresh
    assert cache.get() == b"first" and cache.renders == 1
    clock.now += 0.01
    assert cache.fresh() is None
    assert cache.get() == b"second" and cache.renders == 2


def test_render_cache_does_not_cache_a_failed_render() -> None:
    calls = {"n": 0}

    def render() -> bytes:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("collector broke")
        return b"ok"

    cache = RenderCache(render, min_interval_seconds=1.0, clock=FakeClock())
    with pytest.raises(RuntimeError, match="collector broke"):
        cache.get()
    assert cache.get() == b"ok" and cache.renders == 1


def test_render_cache_callers_queued_behind_a_render_share_its_bytes() -> None:
    gate = Gate(b"body")
    cache = RenderCache(gate, min_interval_seconds=1.0, clock=FakeClock())
    first, out = in_thread(cache.get)
    assert gate.entered.wait(DEADLINE_SECONDS)
    waiters = [in_thread(cache.get) for _ in range(8)]
    gate.release.set()
    for thread, _ in [(first, out), *waiters]:
        thread.join(DEADLINE_SECONDS)
    assert [o[0] for _, o in [(first, out), *waiters]] == [b"body"] * 9
    assert gate.calls == 1 and cache.renders == 1


def test_render_cache_rejects_a_non_positive_interval() -> None:
    with pytest.raises(ValueError, match=r"min_interval_seconds must be > 0; got 0"):
        RenderCache(lambda: b"", min_interval_seconds=0)


# ---------------------------------------------------------------------- limits and parsing


def test_parse_head_reads_method_path_and_keep_alive() -> None:
    r = parse_head(b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n")
    assert (r.method, r.path, r.keep_alive) == ("GET", "/metrics", True)
    assert not parse_head(b"GET / HTTP/1.1\r\nConnection: Close\r\n\r\n").keep_alive
    assert not parse_head(b"GET / HTTP/1.0\r\n\r\n").keep_alive
    assert parse_head(b"HEAD / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").keep_alive


@pytest.mark.parametrize(
    ("head", "status", "message"),
    [
        (b"GET /metrics\r\n\r\n", 400, "malformed request line"),
        (b"GET /metrics HTTP/2.0\r\n\r\n", 505, "HTTP/1.0 or HTTP/1.1 expected; got 'HTTP/2.0'"),
        (b"GET / HTTP/1.1\r\nno colon\r\n\r\n", 400, "malformed header line"),
        (b"GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\n", 400, "carry no body"),
        (b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "carry no body"),
    ],
)
def test_parse_head_rejects_malformed_requests(head: bytes, status: int, message: str) -> None:
    with pytest.raises(BadRequest, match=message) as info:
        parse_head(head)
    assert info.value.status == status


# ---------------------------------------------------------------------- the real server


def test_metrics_server_renders_once_per_interval_however_many_scrapers(
    state: MetricsState, serve: Callable[..., MetricsServer]
) -> None:
    clock = FakeClock()
    srv = serve(clock=clock, min_render_interval_seconds=1.0, max_concurrent_scrapes=32)
    state.inc(tel.EVENTS_CONSUMED_TOTAL.name, ("credit",), 3.0)
    bodies = {get(srv.port, "/metrics")[2] for _ in range(20)}
    state.inc(tel.EVENTS_CONSUMED_TOTAL.name, ("credit",), 4.0)  # not seen until the interval has passed
    bodies |= {get(srv.port, "/metrics")[2] for _ in range(5)}
    assert len(bodies) == 1 and srv.cache.renders == 1
    clock.now += 1.0
    status, headers, body = get(srv.port, "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    assert srv.cache.renders == 2
    consumed = [
        s.value
        for f in text_string_to_metric_families(body.decode())
        for s in f.samples
        if s.name == tel.EVENTS_CONSUMED_TOTAL.name
    ]
    assert consumed == [7.0]


def test_metrics_server_serves_one_render_at_most_max_concurrent_scrapes_times(
    serve: Callable[..., MetricsServer],
) -> None:
    class RenderNumber:
        def __init__(self) -> None:
            self.n = 0

        def collect(self) -> Iterator[Metric]:
            self.n += 1
            yield GaugeMetricFamily("render_number", "Which render this body came from.", value=float(self.n))

    registry = CollectorRegistry(auto_describe=False)
    registry.register(RenderNumber())
    srv = serve(registry=registry, min_render_interval_seconds=0.05, max_concurrent_scrapes=2)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=DEADLINE_SECONDS)
    numbers = []
    try:
        for _ in range(7):  # one scraper loop: the third request of a render waits for the next render
            conn.request("GET", "/metrics")
            body = conn.getresponse().read().decode()
            numbers.append(next(line for line in body.splitlines() if line.startswith("render_number ")))
    finally:
        conn.close()
    assert max(numbers.count(n) for n in numbers) <= 2, numbers
    assert srv.cache.renders >= 4


def test_metrics_server_counts_requests_by_path_and_times_renders(
    state: MetricsState, serve: Callable[..., MetricsServer]
) -> None:
    clock = FakeClock()
    srv = serve(clock=clock)
    for path in ("/metrics", "/healthz", "/healthz", "/readyz", "/probes", "/nope", "/metrics/x"):
        get(srv.port, path)
    counts = {p: state.counter(tel.HTTP_REQUESTS_TOTAL.name, (p,)) for p in ("metrics", "healthz", "readyz")}
    assert counts == {"metrics": 1.0, "healthz": 2.0, "readyz": 1.0}
    assert state.counter(tel.HTTP_REQUESTS_TOTAL.name, ("probes",)) == 1.0
    assert state.counter(tel.HTTP_REQUESTS_TOTAL.name, ("other",)) == 2.0
    clock.now += 1.0
    body = get(srv.port, "/metrics")[2].decode()  # the second render shows the first one's duration
    assert "harmonic_http_render_duration_seconds_count 1.0" in body


def test_metrics_server_head_answers_headers_only(serve: Callable[..., MetricsServer]) -> None:
    srv = serve()
    status, headers, body = get(srv.port, "/healthz", method="HEAD")
    assert status == 200 and body == b"" and int(headers["content-length"]) > 0


def test_metrics_server_drops_a_half_open_connection_after_the_read_timeout(
    state: MetricsState, serve: Callable[..., MetricsServer]
) -> None:
    srv = serve(read_timeout_seconds=0.2)
    sock = half_open(srv.port)
    started = time.monotonic()
    assert closed_by_server(sock)
    assert time.monotonic() - started < DEADLINE_SECONDS
    sock.close()
    wait_until(lambda: state.counter(tel.HTTP_REQUESTS_REJECTED_TOTAL.name, ("read_timeout",)) == 1.0, "counted")


def test_metrics_server_keep_alive_connection_serves_several_requests(serve: Callable[..., MetricsServer]) -> None:
    srv = serve()
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=DEADLINE_SECONDS)
    try:
        for path in ("/healthz", "/metrics", "/readyz"):
            conn.request("GET", path)
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 200 and not resp.will_close
    finally:
        conn.close()


def test_metrics_server_evicts_the_longest_waiting_connection_when_full(
    state: MetricsState, serve: Callable[..., MetricsServer]
) -> None:
    srv = serve(max_connections=2, read_timeout_seconds=60.0)
    oldest, newer = half_open(srv.port), half_open(srv.port)
    wait_until(lambda: len(srv._open) == 2, "both connections accepted")
    assert get(srv.port, "/healthz")[0] == 200  # a third one gets in; the oldest half-open one makes room
    assert closed_by_server(oldest)
    newer.settimeout(0.05)
    with pytest.raises(TimeoutError):
        newer.recv(1)  # still open: nothing to read, no EOF
    for sock in (oldest, newer):
        sock.close()
    assert state.counter(tel.HTTP_REQUESTS_REJECTED_TOTAL.name, ("too_many_connections",)) == 1.0


def test_metrics_server_refuses_a_connection_when_every_one_is_busy(
    state: MetricsState, serve: Callable[..., MetricsServer]
) -> None:
    with (
        slow_scrape(serve, max_connections=1) as (srv, _),
        socket.create_connection(("127.0.0.1", srv.port), timeout=DEADLINE_SECONDS) as sock,
    ):
        sock.sendall(b"GET /healthz HTTP/1.1\r\n\r\n")
        assert closed_by_server(sock)
    assert state.counter(tel.HTTP_REQUESTS_REJECTED_TOTAL.name, ("too_many_connections",)) == 1.0


def test_metrics_server_answers_503_beyond_the_scrape_cap_and_healthz_meanwhile(
    state: MetricsState, serve: Callable[..., MetricsServer]
) -> None:
    with slow_scrape(serve, max_concurrent_scrapes=1) as (srv, out):  # the render is stuck: /metrics is slow
        status, headers, body = get(srv.port, "/metrics")
        assert (status, headers["retry-after"]) == (503, "1") and b"too many concurrent scrapes" in body
        assert get(srv.port, "/healthz")[0] == 200
    assert out[0][0] == 200 and b"slow_render 1.0" in out[0][2]
    assert state.counter(tel.HTTP_REQUESTS_REJECTED_TOTAL.name, ("too_many_scrapes",)) == 1.0


def test_metrics_server_answers_503_when_the_worker_pool_is_full(
    state: MetricsState, serve: Callable[..., MetricsServer]
) -> None:
    gate = Gate((True, {}))
    srv = serve(workers=1, ready=gate)
    calls = [in_thread(lambda: get(srv.port, "/readyz")) for _ in range(2)]  # one running, one queued
    assert gate.entered.wait(DEADLINE_SECONDS)
    wait_until(lambda: srv._pool_jobs == 2, "one readiness call running and one queued")
    status, _, body = get(srv.port, "/readyz")
    assert status == 503 and body.startswith(b"busy")
    assert get(srv.port, "/healthz")[0] == 200
    gate.release.set()
    for thread, out in calls:
        thread.join(DEADLINE_SECONDS)
        assert out[0][0] == 200
    assert state.counter(tel.HTTP_REQUESTS_REJECTED_TOTAL.name, ("pool_full",)) == 1.0


def test_metrics_server_answers_500_when_a_handler_raises(serve: Callable[..., MetricsServer]) -> None:
    def broken() -> tuple[bool, dict[str, Any]]:
        raise RuntimeError("readiness broke")

    srv = serve(ready=broken)
    status, _, body = get(srv.port, "/readyz")
    assert status == 500 and b"RuntimeError: readiness broke" in body
    assert get(srv.port, "/healthz")[0] == 200


@pytest.mark.parametrize(
    ("request_bytes", "status_line"),
    [
        (b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", b"HTTP/1.1 405 Method Not Allowed"),
        (b"GET /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", b"HTTP/1.1 400 Bad Request"),
        (b"GET /metrics HTTP/9.9\r\n\r\n", b"HTTP/1.1 505 HTTP Version Not Supported"),
        (b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 9000 + b"\r\n\r\n", b"HTTP/1.1 431 Request Header Fields Too Large"),
    ],
)
def test_metrics_server_refuses_bad_requests_and_closes(
    state: MetricsState, serve: Callable[..., MetricsServer], request_bytes: bytes, status_line: bytes
) -> None:
    srv = serve()
    answer = raw(srv.port, request_bytes)
    assert answer.startswith(status_line + b"\r\n") and b"Connection: close\r\n" in answer
    assert state.counter(tel.HTTP_REQUESTS_REJECTED_TOTAL.name, ("bad_request",)) == 1.0


def test_metrics_server_drops_a_client_that_does_not_read_its_response(
    state: MetricsState, serve: Callable[..., MetricsServer]
) -> None:
    class Big:
        def collect(self) -> Iterator[Metric]:
            yield GaugeMetricFamily("big", "x" * 32_000_000, value=1.0)  # more than the socket buffers hold

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Big())
    srv = serve(write_timeout_seconds=0.3, registry=registry)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(DEADLINE_SECONDS)
    sock.connect(("127.0.0.1", srv.port))
    try:
        sock.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")  # and never read
        wait_until(
            lambda: state.counter(tel.HTTP_REQUESTS_REJECTED_TOTAL.name, ("write_timeout",)) == 1.0,
            "the write timeout",
        )
    finally:
        sock.close()
    assert get(srv.port, "/healthz")[0] == 200


def test_metrics_server_healthz_answers_within_1s_under_300_half_open_and_16_scrapers(
    state: MetricsState, serve: Callable[..., MetricsServer]
) -> None:
    for i in range(200):  # a state with some weight: renders take a while
        state.observe(tel.GAMMA.name, (f"m{i % 8}", f"s{i}"), [0.001, 0.01])
    threads_before = threading.active_count()
    # the half-open connections must outlive their opening on a busy machine (300 connects and 16 scrapers): a read
    # timeout of a few seconds closed the first ones before the last were open, and the 300 were never held at once
    srv = serve(read_timeout_seconds=30.0)
    stop = threading.Event()

    def scrape_loop() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=DEADLINE_SECONDS)
        while not stop.is_set():
            conn.request("GET", "/metrics")
            conn.getresponse().read()
        conn.close()

    scrapers = [threading.Thread(target=scrape_loop, daemon=True) for _ in range(16)]
    held = [half_open(srv.port) for _ in range(300)]
    try:
        for t in scrapers:
            t.start()
        wait_until(lambda: len(srv._open) >= 300, "300 half-open connections held")
        latencies = []
        for _ in range(10):
            started = time.monotonic()
            assert get(srv.port, "/healthz")[0] == 200
            latencies.append(time.monotonic() - started)
        server_threads = threading.active_count() - threads_before - len(scrapers)
    finally:
        stop.set()
        for t in scrapers:
            t.join(DEADLINE_SECONDS)
        for sock in held:
            sock.close()
    assert max(latencies) < 1.0, latencies
    assert server_threads <= 2 + srv.settings.workers, f"{server_threads} server threads for 316 connections"
    assert state.counter(tel.HTTP_REQUESTS_TOTAL.name, ("metrics",)) > 0


def test_http_reject_reasons_are_the_ones_the_metric_documents() -> None:
    from monitor.exporters.http import REJECT_REASONS
    from monitor.exporters.prometheus import SPECS

    help_text = SPECS[tel.HTTP_REQUESTS_REJECTED_TOTAL.name].help
    assert all(reason in help_text for reason in REJECT_REASONS), help_text
