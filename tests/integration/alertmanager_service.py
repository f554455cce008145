"""Test tooling: a real Prometheus Alertmanager on loopback, plus a webhook receiver it notifies.

:class:`AlertmanagerService` starts the Debian ``prometheus-alertmanager`` binary on a free
127.0.0.1 port with a minimal configuration in a temporary directory (clustering off, storage in
the temp dir), waits for ``/-/ready``, and stops it again. Its routing tree sends every alert to a
``webhook`` receiver served by :class:`NotificationReceiver` (a local ``http.server``), so tests can
see both what Alertmanager *holds* (``GET /api/v2/alerts``) and what it *notifies* (firing and
resolved). Alerts matching nothing else fall through to a ``null`` receiver.

The binary comes from ``bash scripts/install-alertmanager.sh``; without it the service raises a
clear error — these tests are never skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Self

DEFAULT_BINARY = "/usr/bin/prometheus-alertmanager"

CONFIG_TEMPLATE = """\
route:
  receiver: "null"
  group_by: ["alertname", "model", "segment"]
  group_wait: 100ms
  group_interval: 1s
  repeat_interval: 1h
  routes:
    - receiver: webhook
      matchers: ['alertname=~".+"']
receivers:
  - name: "null"
  - name: webhook
    webhook_configs:
      - url: "{webhook_url}"
        send_resolved: true
"""


class AlertmanagerNotInstalledError(RuntimeError):
    """The Alertmanager binary is missing; the message says how to install it."""


def stop_process(process: subprocess.Popen[Any] | None) -> None:
    """SIGTERM a still-running child and wait up to 10 s; then SIGKILL it and wait up to 5 s more."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)


def start_logged(argv: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    """Start ``argv`` with its stdout and stderr written to ``log_path`` and no stdin."""
    with log_path.open("wb") as log:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def log_tail(path: Path | None) -> str:
    """The last 4,000 characters of a service's log file ("" before it exists), for failure messages."""
    if path is None or not path.exists():
        return ""
    return path.read_text(encoding="utf-8", errors="replace")[-4000:]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _no_proxy_opener() -> urllib.request.OpenerDirector:
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


class NotificationReceiver:
    """A local HTTP server that records Alertmanager's webhook notifications (one JSON body each)."""

    def __init__(self) -> None:
        self.notifications: list[dict[str, Any]] = []
        self._arrived = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with receiver._arrived:
                    receiver.notifications.append(body)
                    receiver._arrived.notify_all()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/notify"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def alerts(self) -> list[dict[str, Any]]:
        """Every alert of every notification so far (each has status, labels, annotations, endsAt)."""
        with self._arrived:
            return [alert for note in self.notifications for alert in note["alerts"]]

    def wait_for_alert(self, predicate: Callable[[dict[str, Any]], bool], timeout_seconds: float) -> dict[str, Any]:
        """The first notified alert matching ``predicate``; AssertionError after ``timeout_seconds``."""
        found: list[dict[str, Any]] = []

        def match() -> bool:
            found[:] = [a for note in self.notifications for a in note["alerts"] if predicate(a)]
            return bool(found)

        with self._arrived:
            if not self._arrived.wait_for(match, timeout_seconds):
                raise AssertionError(
                    f"no matching webhook notification within {timeout_seconds} s; got {self.notifications}"
                )
        return found[0]


class AlertmanagerService:
    """Runs ``prometheus-alertmanager`` on 127.0.0.1 for the duration of a ``with`` block.

    Parameters
    ----------
    port : int, optional
        Listen port; a free one when omitted (give one to start Alertmanager *after* a client
        already points at it).
    binary : str
        Path of the Alertmanager executable.
    ready_timeout_seconds : float
        How long to wait for ``/-/ready``.

    Raises
    ------
    AlertmanagerNotInstalledError
        If the binary is missing.
    RuntimeError
        If Alertmanager exits early or is not ready in time (its log is in the message).
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        binary: str = DEFAULT_BINARY,
        ready_timeout_seconds: float = 20.0,
        inhibit_rules: str = "",
    ) -> None:
        self.binary = binary
        #: an ``inhibit_rules:`` section (YAML) added to the configuration; none when empty
        self.inhibit_rules = inhibit_rules
        self.port = free_port() if port is None else port
        self.url = f"http://127.0.0.1:{self.port}"
        self.ready_timeout_seconds = ready_timeout_seconds
        self.webhook = NotificationReceiver()
        self._opener = _no_proxy_opener()
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_path: Path | None = None

    def __enter__(self) -> Self:
        if not (os.path.isfile(self.binary) and os.access(self.binary, os.X_OK)):
            on_path = shutil.which("prometheus-alertmanager")
            raise AlertmanagerNotInstalledError(
                f"Alertmanager binary not found at {self.binary}"
                + (f" (there is one at {on_path}; pass binary=...)" if on_path else "")
                + ". Install it with `bash scripts/install-alertmanager.sh` (Debian package "
                "prometheus-alertmanager), then re-run the integration tests."
            )
        self._tmp = tempfile.TemporaryDirectory(prefix="alertmanager-test-")
        tmp = Path(self._tmp.name)
        self.webhook.start()
        config = tmp / "alertmanager.yml"
        config.write_text(CONFIG_TEMPLATE.format(webhook_url=self.webhook.url) + self.inhibit_rules, encoding="utf-8")
        self._log_path = tmp / "alertmanager.log"
        self._process = start_logged(
            [
                self.binary,
                f"--config.file={config}",
                f"--storage.path={tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--cluster.listen-address=",  # empty: no gossip cluster, no port 9094
                "--log.level=debug",
            ],
            self._log_path,
        )
        try:
            self._wait_ready()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout_seconds
        assert self._process is not None
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"Alertmanager exited with {self._process.returncode}:\n{self.log()}")
            try:
                with self._opener.open(f"{self.url}/-/ready", timeout=1) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.05)  # polling a starting process; bounded by the deadline
        raise RuntimeError(f"Alertmanager not ready within {self.ready_timeout_seconds} s:\n{self.log()}")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stop_process(self._process)
        self._process = None
        self.webhook.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def log(self) -> str:
        """Alertmanager's own log so far (for failure messages)."""
        return log_tail(self._log_path)

    def alerts(self, **filters: str) -> list[dict[str, Any]]:
        """``GET /api/v2/alerts``; ``filters`` become ``filter=name="value"`` label matchers."""
        query = urllib.parse.urlencode([("filter", f'{name}="{value}"') for name, value in filters.items()])
        with self._opener.open(f"{self.url}/api/v2/alerts?{query}", timeout=5) as response:
            data: list[dict[str, Any]] = json.load(response)
        return data

    def wait_for_alerts(
        self,
        predicate: Callable[[list[dict[str, Any]]], bool],
        timeout_seconds: float = 10.0,
        **filters: str,
    ) -> list[dict[str, Any]]:
        """Poll :meth:`alerts` until ``predicate`` holds; AssertionError with the last answer otherwise."""
        deadline = time.monotonic() + timeout_seconds
        while True:
            alerts = self.alerts(**filters)
            if predicate(alerts):
                return alerts
            if time.monotonic() >= deadline:
                raise AssertionError(f"Alertmanager alerts never matched within {timeout_seconds} s: {alerts}")
            time.sleep(0.05)  # bounded polling of an external process
