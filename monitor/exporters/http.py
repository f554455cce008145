"""Stage 6: the HTTP endpoint — ``/metrics`` (rendered from :class:`~monitor.exporters.prometheus.MetricsState`),
``/healthz``, ``/readyz`` and ``/probes`` — built to hold under abuse.

In ``harmonic-monitor run`` this server runs in a process of its own and serves the snapshots the pipeline publishes
(:mod:`monitor.exporters.http_process`): ``render``, ``ready``, ``probes`` and ``health`` then read the latest one.

Design. One asyncio event loop in one thread owns every connection: accepting, reading request heads, writing
responses. A connection costs a file descriptor and a buffer, never a thread, so neither 300 half-open connections
nor a flood of new ones can grow the thread count. Work that may block runs on fixed thread pools behind it:

- ``/healthz`` is answered on the loop itself: no render, no pool (a counter increment is all it shares with the
  pipeline). It answers while the pools are full and a render is stuck.
- ``/metrics`` is served from :class:`RenderCache`: the exposition is rendered at most once per
  ``min_render_interval_seconds`` (measured from the end of the last render) on a one-thread render pool, one
  render at a time; every scraper in that interval gets the same bytes. N scrapers cost the pipeline's lock one
  copy of :class:`MetricsState` per interval, not N. One render is served at most ``max_concurrent_scrapes`` times:
  a scraper beyond that waits for the next render, so scraper loops cost a bounded number of responses per
  interval, not as many as they can ask for. At most ``max_concurrent_scrapes`` scrapes are in flight (waiting or
  writing); one more is answered 503 at once.
- ``/readyz``, ``/probes`` and ``/gammamap`` call the pipeline's callbacks on a pool of ``workers`` threads, with at most as many
  again queued; beyond that, 503 at once.

Limits. A request head (request line and headers, at most 8 KiB) must arrive within ``read_timeout_seconds`` of the
connection opening or of the previous response, else the connection is closed; a response must drain within
``write_timeout_seconds``. At most ``max_connections`` are open: a new one beyond that closes the connection that
has waited longest for its request (half-open or idle keep-alive), or is itself closed when every one is busy.
Requests carry no body (one with ``Content-Length`` or ``Transfer-Encoding`` is 400); GET and HEAD only. Every
refusal is counted in ``harmonic_http_requests_rejected_total{reason}`` and logged (rate-limited).

Why the standard library and not uvicorn. Measured with ``bench/abuse.py`` (figures in docs/BENCHMARKS.md, *HTTP
endpoint under abuse*): the server before this one lost most of ingest under scraper loops and held a thread per
half-open connection. This one keeps ingest within the machine's noise, renders about once a second, closes every
half-open connection after the read timeout, answers every ``/healthz`` probe and runs 4 threads. uvicorn 0.54 over the
same render cache never closed a half-open connection — its keep-alive timer starts only after a first response, and it
has no request-head timeout (Kludex/uvicorn#157) — and with ``limit_concurrency`` they fill the cap, so every
``/healthz`` got 503; it also serves scraper loops as fast as they ask, at ingest's expense. The loop here is the
standard library's asyncio, so TLS is an ``ssl.SSLContext`` handed to ``start_server``.

TLS and basic auth. With ``web_config`` (``metrics.web_config_file``, the Prometheus exporter-toolkit's
format, :mod:`monitor.exporters.webconfig`) the port speaks TLS only; the handshake must finish within
``read_timeout_seconds``. A connection is counted against ``max_connections`` from its accept, handshake included:
a client that opens TCP and never finishes the handshake holds one slot, can be closed to make room like a
half-open plain connection, and is closed at the read timeout. While it waits it holds a 17 KiB read buffer, not
asyncio's 256 KiB, and after a burst of ended connections the freed memory goes back to the OS
(:mod:`monitor.exporters.connection_memory`). With ``basic_auth_users``, every path but
``/healthz`` needs ``Authorization: Basic``: ``/healthz`` stays open so that a kubelet liveness probe needs no
credentials (it reveals nothing but "alive"), while ``/metrics``, ``/readyz`` and ``/probes`` answer 401 with ``WWW-Authenticate: Basic realm="harmonic-monitor"``
(``reason="unauthorized"``) to a missing or wrong credential. A credential verified in the last minute is accepted
on the loop at once; any other goes to bcrypt (~0.1 s by design) on a one-thread auth pool with at most
``2 * workers`` waiting, beyond which it gets 503 at once (``pool_full``): a flood of bad passwords costs one core
at most and never stalls the loop, ``/healthz`` or a scraper whose credential is cached.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Literal, cast, get_args

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from monitor import telemetry as tel
from monitor.config import MetricsSettings
from monitor.exporters.connection_memory import HeapTrim, start_tls
from monitor.exporters.http_request import MAX_HEAD_BYTES, BadRequest, Request, parse_head
from monitor.exporters.prometheus import MetricsState, StateCollector
from monitor.exporters.render_cache import RenderCache
from monitor.exporters.webconfig import BasicAuth, WebConfig, unauthorized_header
from monitor.logs import RateLimitedLogger

log = logging.getLogger("monitor.exporters.http")

ReadyCheck = Callable[[], tuple[bool, dict[str, Any]]]
JsonProvider = Callable[[], Any]
#: a handler that reads the query string's parameters (first value of each) and returns (status, body, content type)
QueryHandler = Callable[[Mapping[str, str]], tuple[int, bytes, str]]
#: (status, body, content type)
_Response = tuple[int, bytes, str]

#: ``harmonic_http_requests_rejected_total{reason}``: the fixed set of reasons
RejectReason = Literal["read_timeout", "write_timeout", "too_many_connections", "too_many_scrapes", "pool_full", "bad_request", "unauthorized"]  # fmt: skip
REJECT_REASONS: tuple[RejectReason, ...] = get_args(RejectReason)
#: ``harmonic_http_requests_total{path}``: the fixed set of paths (anything else counts as ``other``)
PATHS = ("metrics", "healthz", "readyz", "probes", "gammamap", "other")
#: how often freed connection memory is handed back to the OS after a burst (:class:`HeapTrim`)
TRIM_INTERVAL_SECONDS = 2.0
_JSON = "application/json"
_TEXT = "text/plain"
_FIX: dict[RejectReason, str] = {
    "read_timeout": "a client opened a connection and did not finish its request in time (slow or half-open client)",
    "write_timeout": "a client did not read its response in time",
    "too_many_connections": "more connections than metrics.max_connections: find the client that opens them",
    "too_many_scrapes": "more concurrent scrapes than metrics.max_concurrent_scrapes: check who scrapes /metrics",
    "pool_full": "/readyz or /probes calls, or password checks, queued beyond their pool: a slow readiness callback or a flood of wrong passwords",
    "bad_request": "malformed, oversized or non-GET requests: something other than a scraper talks to this port",
    "unauthorized": "a request without valid basic-auth credentials: check the scraper's basic_auth against basic_auth_users in metrics.web_config_file",
}


@dataclass(frozen=True, slots=True)
class Routes:
    """What the endpoint's routes answer with; each None: the route's default.

    Attributes
    ----------
    metrics : produces the ``/metrics`` body instead of rendering the server's registry (the server process: the
        pipeline's bytes).
    ready, probes : ``/readyz``'s check (default: ready) and ``/probes``' report (default: no regions); run on the
        worker pool.
    gammamap : ``/gammamap``'s handler: given the query parameters, (status, body, content type); run on the worker
        pool (default: no models).
    health : ``/healthz``'s check, run on the loop (so it must not block): 503 when false (default: always 200).
    """

    metrics: Callable[[], bytes] | None = None
    ready: ReadyCheck | None = None
    probes: JsonProvider | None = None
    gammamap: QueryHandler | None = None
    health: ReadyCheck | None = None


class _AcceptPaused(asyncio.StreamReaderProtocol):
    """A stream protocol that reads nothing until the connection handler says so: a TLS upgrade then sees the
    ClientHello, which would otherwise be read into the plain stream's buffer before the handler runs."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        assert isinstance(transport, asyncio.ReadTransport)
        transport.pause_reading()


class MetricsServer:
    """HTTP endpoint: ``/metrics``, ``/healthz`` (alive), ``/readyz`` (models loaded, partitions assigned),
    ``/probes`` (latest probe report), ``/gammamap`` (the Gamma Maps, JSON or ``?format=svg``). Binds at construction; serves from a daemon thread between ``start()`` and
    ``close()``; use as a context manager.

    Parameters
    ----------
    state : MetricsState
        What ``/metrics`` exposes; the server also counts its own requests and refusals in it.
    settings : MetricsSettings, optional
        ``metrics.*``: where to listen (port 0: a free one, read back from :attr:`port`) and the timeouts, pool sizes
        and caps (docs/OPERATIONS.md, "HTTP endpoint"); its ``web_config_file`` is not read here (``web_config``).
        Default: the settings' defaults.
    routes : Routes, optional
        What ``/metrics``, ``/readyz``, ``/probes``, ``/gammamap`` and ``/healthz`` answer with (default: each
        route's default).
    registry : CollectorRegistry, optional
        The registry rendered on ``/metrics``; the state's collector is registered in it.
    clock : callable
        Monotonic seconds for the render interval and the credential cache.
    web_config : WebConfig, optional
        TLS (its ``ssl_context``) and basic-auth users from ``metrics.web_config_file``; None: plain HTTP, no auth.
    sock : socket.socket, optional
        A listening socket to serve instead of binding ``host:port`` (the server process gets its parent's).
    """

    def __init__(
        self,
        state: MetricsState,
        *,
        settings: MetricsSettings | None = None,
        routes: Routes | None = None,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.monotonic,
        web_config: WebConfig | None = None,
        sock: socket.socket | None = None,
    ) -> None:
        self.settings = settings = settings or MetricsSettings()
        routes = routes or Routes()
        self._ssl = None if web_config is None else web_config.ssl_context
        if self._ssl is None and web_config is not None and web_config.tls is not None:
            self._ssl = web_config.tls.context(web_config.source)  # parsed but not loaded: load the files now
        self.scheme = "https" if self._ssl is not None else "http"
        self.auth = BasicAuth(web_config.users, clock=clock) if web_config is not None and web_config.users else None
        self.registry = registry or CollectorRegistry(auto_describe=False)
        self.registry.register(StateCollector(state))
        self._state = state
        self._ready: ReadyCheck = routes.ready or (lambda: (True, {}))
        self._probes: JsonProvider = routes.probes or (lambda: {"regions": []})
        self._gammamap: QueryHandler = routes.gammamap or (lambda _q: (200, _json({"models": {}}), _JSON))
        self._health = routes.health
        self.cache = RenderCache(
            routes.metrics or self._render, min_interval_seconds=settings.min_render_interval_seconds, clock=clock
        )
        self._log = RateLimitedLogger(log, interval_seconds=60.0)
        host = settings.host
        self._sock = sock or socket.create_server(
            (host, settings.port), family=socket.AF_INET6 if ":" in host else socket.AF_INET, backlog=128
        )
        self._render_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="metrics-render")
        self._pool = ThreadPoolExecutor(max_workers=self.settings.workers, thread_name_prefix="metrics-worker")
        # bcrypt on its own single thread: a flood of wrong passwords costs one core and never delays /readyz
        self._auth_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="metrics-auth")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="metrics-http", daemon=True)
        self._stopped = asyncio.Event()  # binds to the loop on first use, in the loop thread
        # owned by the loop thread only
        self._open: set[asyncio.Task[None]] = set()
        self._waiting: dict[asyncio.Task[None], None] = {}  # waiting for a request head, oldest first
        self._scrapes = 0
        self._served_render, self._served = 0, 0  # scrapes answered with render number `_served_render`
        self._pool_jobs = 0
        self._auth_jobs = 0
        self.heap = HeapTrim()

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def close(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stopped.set)
            self._thread.join(10)
        else:
            self._sock.close()
            self._loop.close()
        self._render_pool.shutdown(wait=False, cancel_futures=True)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._auth_pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> MetricsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the loop thread ----------------------------------------------------------------------------------------
    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve_forever())
        finally:
            self._loop.close()

    async def _serve_forever(self) -> None:
        # TLS is not handed to start_server: its handshake would run before ``_connection`` and so outside the
        # connection cap; ``_connection`` upgrades each connection itself (``_handshake``)
        loop = asyncio.get_running_loop()

        def protocol() -> _AcceptPaused:
            return _AcceptPaused(asyncio.StreamReader(limit=MAX_HEAD_BYTES, loop=loop), self._connection, loop=loop)

        server = await loop.create_server(protocol, sock=self._sock, backlog=128)
        trimmer = loop.create_task(self.heap.run(TRIM_INTERVAL_SECONDS))
        async with server:
            await self._stopped.wait()
            trimmer.cancel()
            server.close()
            for task in list(self._open):
                task.cancel()
            await asyncio.gather(*self._open, return_exceptions=True)

    def _reject(self, reason: RejectReason) -> None:
        tel.HTTP_REQUESTS_REJECTED_TOTAL.inc(self._state, tel.Reason(reason))
        self._log.warning(reason, f"HTTP endpoint refused a request ({reason}): {_FIX[reason]}", reason=reason)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if len(self._open) >= self.settings.max_connections:
            self._reject("too_many_connections")
            if not self._waiting:  # every connection is busy with a request: refuse the new one
                writer.transport.abort()
                self.heap.ended()
                return
            oldest = next(iter(self._waiting))  # make room: the one that has waited longest for a request
            del self._waiting[oldest]
            oldest.cancel()
        self._open.add(task)
        graceful = False
        try:
            if self._ssl is None:
                cast(asyncio.Transport, writer.transport).resume_reading()
            elif not await self._handshake(writer, task):
                return
            # drain() then waits until the whole response left our buffer, so a write timeout bounds all of it
            writer.transport.set_write_buffer_limits(high=0)
            graceful = await self._requests(reader, writer, task)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._open.discard(task)
            self._waiting.pop(task, None)
            if graceful:
                writer.close()
            else:
                writer.transport.abort()
            self.heap.ended()

    async def _handshake(self, writer: asyncio.StreamWriter, task: asyncio.Task[None]) -> bool:
        """The TLS handshake of a counted connection: it waits like a request head (evictable by a newer
        connection beyond the cap) and must finish within the read timeout; False when it did not."""
        assert self._ssl is not None
        self._waiting[task] = None
        try:
            await asyncio.wait_for(start_tls(writer, self._ssl), self.settings.read_timeout_seconds)
        except TimeoutError:
            self._reject("read_timeout")
            return False
        except (ssl.SSLError, OSError):  # plain HTTP on the TLS port, a client that rejects our certificate
            return False
        finally:
            self._waiting.pop(task, None)
        return True

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, task: asyncio.Task[None]) -> bool:  # fmt: skip
        """Serve requests on one connection until it closes; True when it may close gracefully."""
        while True:
            self._waiting[task] = None
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.settings.read_timeout_seconds)
            except TimeoutError:
                self._reject("read_timeout")
                return False
            except asyncio.IncompleteReadError:
                return True  # the client closed its side
            except asyncio.LimitOverrunError:
                self._reject("bad_request")
                await self._send(writer, 431, b"request head over 8 KiB\n", _TEXT, keep_alive=False)
                return True
            finally:
                self._waiting.pop(task, None)
            try:
                request = parse_head(head)
            except BadRequest as exc:
                self._reject("bad_request")
                await self._send(writer, exc.status, f"{exc}\n".encode(), _TEXT, keep_alive=False)
                return True
            if request.method not in ("GET", "HEAD"):
                self._reject("bad_request")
                await self._send(writer, 405, b"GET or HEAD only\n", _TEXT, keep_alive=False, allow=True)
                return True
            if not await self._respond(request, writer):
                return True

    async def _respond(self, request: Request, writer: asyncio.StreamWriter) -> bool:
        """Answer one GET or HEAD; False when the connection must close."""
        name = request.path.removeprefix("/")
        tel.HTTP_REQUESTS_TOTAL.inc(self._state, tel.Path(name if name in PATHS[:-1] else "other"))
        if self.auth is not None and name != "healthz":
            refusal = await self._authorize(request)
            if refusal is not None:
                return await self._send(writer, *refusal, request=request)
        if name == "metrics":
            if self._scrapes >= self.settings.max_concurrent_scrapes:
                self._reject("too_many_scrapes")
                return await self._send(writer, 503, b"too many concurrent scrapes; retry\n", _TEXT, request=request)
            self._scrapes += 1  # held until the response has drained: the cap bounds buffered bodies too
            try:
                body = self.cache.fresh()
                if body is not None and self._served_this_render() >= self.settings.max_concurrent_scrapes:
                    # this render's budget is spent (scraper loops): wait for the next one instead of serving
                    await asyncio.sleep(self.cache.expires_in())
                    body = None
                if body is None:
                    status, body, ctype = await self._off_loop(self._render_pool, self._metrics)
                else:
                    status, ctype = 200, CONTENT_TYPE_LATEST
                if status == 200:
                    self._served = self._served_this_render() + 1
                return await self._send(writer, status, body, ctype, request=request)
            finally:
                self._scrapes -= 1
        if name == "healthz":
            status, body, ctype = 200, b'{"status": "ok"}\n', _JSON
            if self._health is not None:  # cheap by contract: it runs on the loop
                ok, detail = self._health()
                status, body = (200 if ok else 503), _json({"status": "ok" if ok else "stalled", **detail})
        elif name in ("readyz", "probes", "gammamap"):
            if self._pool_jobs >= 2 * self.settings.workers:
                self._reject("pool_full")
                status, body, ctype = 503, b"busy: the worker pool is full; retry\n", _TEXT
            else:
                self._pool_jobs += 1
                try:
                    job = {
                        "readyz": self._readyz,
                        "probes": self._probe_report,
                        "gammamap": lambda: self._gammamap(request.params()),
                    }[name]
                    status, body, ctype = await self._off_loop(self._pool, job)
                finally:
                    self._pool_jobs -= 1
        else:
            status, body, ctype = 404, b"not found: try /metrics, /healthz, /readyz, /probes, /gammamap\n", _TEXT
        return await self._send(writer, status, body, ctype, request=request)

    async def _authorize(self, request: Request) -> _Response | None:
        """None when the request's credentials are valid, else the response that refuses it (401 or 503)."""
        assert self.auth is not None
        if self.auth.cached(request.authorization):
            return None
        if request.authorization is not None:
            if self._auth_jobs >= 2 * self.settings.workers:
                self._reject("pool_full")
                return 503, b"busy: too many password checks in flight; retry\n", _TEXT
            self._auth_jobs += 1
            try:
                if await self._loop.run_in_executor(self._auth_pool, self.auth.verify, request.authorization):
                    return None
            finally:
                self._auth_jobs -= 1
        self._reject("unauthorized")
        return 401, b"unauthorized: basic auth required\n", _TEXT

    async def _off_loop(self, pool: ThreadPoolExecutor, job: Callable[[], _Response]) -> _Response:
        """Run ``job`` on ``pool``; a 500 that says why when it raises."""
        try:
            return await self._loop.run_in_executor(pool, job)
        except Exception as exc:
            log.exception("HTTP endpoint: a handler failed")
            return 500, f"internal error: {type(exc).__name__}: {exc}\n".encode(), _TEXT

    def _metrics(self) -> _Response:
        return 200, self.cache.get(), CONTENT_TYPE_LATEST

    def _served_this_render(self) -> int:
        """Scrapes answered with the current render's bytes."""
        if self._served_render != self.cache.renders:
            self._served_render, self._served = self.cache.renders, 0
        return self._served

    def _readyz(self) -> _Response:
        ok, detail = self._ready()
        return (200 if ok else 503), _json({"ready": ok, **detail}), _JSON

    def _probe_report(self) -> _Response:
        return 200, _json(self._probes()), _JSON

    async def _send(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        body: bytes,
        ctype: str,
        *,
        request: Request | None = None,
        keep_alive: bool = True,
        allow: bool = False,
    ) -> bool:
        """Write one response and wait (bounded) until it drains; False when the connection must close."""
        keep_alive = keep_alive and (request is None or request.keep_alive)
        lines = [
            f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
            f"Content-Type: {ctype}",
            f"Content-Length: {len(body)}",
        ]
        if status == 503:
            lines.append("Retry-After: 1")
        if status == 401:
            lines.append(f"WWW-Authenticate: {unauthorized_header()}")
        if allow:
            lines.append("Allow: GET, HEAD")
        if not keep_alive:
            lines.append("Connection: close")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        if request is None or request.method != "HEAD":
            writer.write(body)
        try:
            await asyncio.wait_for(writer.drain(), self.settings.write_timeout_seconds)
        except TimeoutError:
            self._reject("write_timeout")
            raise ConnectionError("write timeout") from None
        return keep_alive

    # -- the render thread --------------------------------------------------------------------------------------
    def _render(self) -> bytes:
        started = time.perf_counter()
        body: bytes = generate_latest(self.registry)
        tel.HTTP_RENDER_DURATION_SECONDS.observe(self._state, tel.NoLabels(), [time.perf_counter() - started])
        return body


def _json(payload: Any) -> bytes:
    return json.dumps(payload, default=str).encode() + b"\n"
