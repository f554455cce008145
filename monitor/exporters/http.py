"""Stage 6: the HTTP endpoint — ``/metrics`` (rendered from :class:`~monitor.exporters.prometheus.MetricsState`),
``/healthz``, ``/readyz`` and ``/probes``."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from monitor.exporters.prometheus import MetricsState, StateCollector

ReadyCheck = Callable[[], tuple[bool, dict[str, Any]]]
JsonProvider = Callable[[], Any]


class MetricsServer:
    """HTTP endpoint: ``/metrics``, ``/healthz`` (alive), ``/readyz`` (models loaded, partitions assigned),
    ``/probes`` (latest probe report). Runs in a daemon thread; use as a context manager."""

    def __init__(
        self,
        state: MetricsState,
        *,
        host: str = "0.0.0.0",
        port: int = 9108,
        ready: ReadyCheck | None = None,
        probes: JsonProvider | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=False)
        self.registry.register(StateCollector(state))
        ready_fn: ReadyCheck = ready or (lambda: (True, {}))
        probes_fn: JsonProvider = probes or (lambda: {"regions": []})
        registry_ref = self.registry

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, generate_latest(registry_ref), CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    self._send(200, b'{"status": "ok"}\n', "application/json")
                elif path == "/readyz":
                    ok, detail = ready_fn()
                    body = json.dumps({"ready": ok, **detail}, default=str).encode() + b"\n"
                    self._send(200 if ok else 503, body, "application/json")
                elif path == "/probes":
                    self._send(200, json.dumps(probes_fn(), default=str).encode() + b"\n", "application/json")
                else:
                    self._send(404, b"not found: try /metrics, /healthz, /readyz, /probes\n", "text/plain")

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
                return None

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics-http", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> MetricsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
