"""Stage 6 (exporters): one JSON POST to an alert receiver, bounded in time and in what it reads back.

:class:`JsonPoster` POSTs with urllib and never follows redirects (urllib would turn a POST into a bodiless GET).
A POST (connect, TLS handshake, request, answer) ends within ``deadline_seconds``: the socket timeout bounds each
read, so a receiver or proxy that trickles bytes would otherwise hold the caller for good; past the deadline a
watchdog shuts the POST's sockets down and the POST is a retryable :class:`DeliveryError`. At most
:data:`MAX_ANSWER_BYTES` of an answer body are read. A URL's ``user:password@`` becomes HTTP basic authentication
and leaves the URL; every URL in a message is redacted (:func:`monitor.logs.redact_text`). The senders of
:mod:`monitor.exporters.alert_senders` each hold one.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import logging
import math
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from monitor.config_checks import http_url_problem
from monitor.errors import ConfigError, MonitorError
from monitor.logs import RateLimitedLogger, redact_text

__all__ = ["MAX_ANSWER_BYTES", "USER_AGENT", "DeliveryError", "JsonPoster", "check_url"]

USER_AGENT = "harmonic-monitor"
#: most bytes of an answer body read from a receiver; an answer needs none (only its status counts)
MAX_ANSWER_BYTES = 64 * 1024
#: the alert-delivery logger, shared with :mod:`monitor.exporters.delivery` (operators filter on its name)
log = logging.getLogger("monitor.exporters.delivery")


class DeliveryError(MonitorError):
    """One POST of alerts failed.

    ``retryable`` is True for a connection failure, a timeout or an HTTP 5xx/408/429 answer (the
    receiver may recover) and False for other 4xx answers (the payload or URL is wrong).
    """

    def __init__(self, message: str, *, url: str, status: int | None, retryable: bool) -> None:
        super().__init__(message)
        self.url = url
        self.status = status
        self.retryable = retryable


def check_url(url: str, what: str) -> str:
    """``url`` when it is an absolute http(s) URL, else :class:`ConfigError` naming ``what`` URL it is."""
    problem = http_url_problem(url)  # the check the settings make at load (monitor/config_checks.py)
    if problem:
        raise ConfigError(redact_text(f"{what} URL {problem}"))
    return url


def split_credentials(url: str) -> tuple[str, dict[str, str]]:
    """``url`` without its ``user:password@`` part, and the basic-auth header that part stands for (urllib itself
    would take ``user:password@host`` for the host name).

    >>> split_credentials("https://am:s3cret@alertmanager:9093/prefix")
    ('https://alertmanager:9093/prefix', {'Authorization': 'Basic YW06czNjcmV0'})
    """
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, {}
    host = parts.netloc.rpartition("@")[2]
    user = urllib.parse.unquote(parts.username or "")
    password = urllib.parse.unquote(parts.password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return urllib.parse.urlunsplit(parts._replace(netloc=host)), {"Authorization": f"Basic {token}"}


def check_timeout(timeout_seconds: float, name: str = "timeout_seconds") -> float:
    if not math.isfinite(timeout_seconds) or timeout_seconds <= 0:
        raise ConfigError(f"{name} must be a finite number > 0; got {timeout_seconds!r}")
    return timeout_seconds


class _Watchdog:
    """Shuts down the sockets of one POST at its deadline: a receiver (or proxy) that trickles bytes, each within the
    socket timeout, cannot hold the delivery thread longer than the deadline."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.expired = False

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if not self.expired:
                return
        self._shut(sock)

    def expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):  # already closed, or detached into its TLS wrapper
            sock.shutdown(socket.SHUT_RDWR)


def _watched(base: type[http.client.HTTPConnection], poster: JsonPoster) -> type[http.client.HTTPConnection]:
    """``base`` whose sockets (the TCP one, then its TLS wrapper) are handed to the poster's current watchdog."""

    class Watched(base):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            create: Callable[..., socket.socket] = getattr(self, "_create_connection")  # noqa: B009 - set in base

            def tracked(*a: Any, **kw: Any) -> socket.socket:
                sock: socket.socket = create(*a, **kw)
                poster.watchdog().add(sock)
                return sock

            self._create_connection = tracked

        def connect(self) -> None:
            super().connect()
            poster.watchdog().add(self.sock)

    return Watched


class JsonPoster:
    """POSTs JSON with urllib; never follows redirects (urllib would turn a POST into a bodiless GET). Each POST ends
    within ``deadline_seconds`` (the socket timeout bounds one read or write, not the whole request)."""

    def __init__(
        self,
        url: str,
        *,
        timeout_seconds: float,
        headers: Mapping[str, str] | None,
        env_proxy: bool,
        deadline_seconds: float = 30.0,
    ) -> None:
        #: what messages show: no userinfo, no query values
        self.shown_url = redact_text(url)
        self.url, auth = split_credentials(url)
        self.timeout_seconds = check_timeout(timeout_seconds)
        self.deadline_seconds = check_timeout(deadline_seconds, "deadline_seconds")
        #: 2xx answers whose body ran past MAX_ANSWER_BYTES (the rest was discarded with the connection)
        self.oversized_answers_total = 0
        self._log = RateLimitedLogger(log, interval_seconds=60.0)
        self._local = threading.local()
        poster = self

        class _Http(urllib.request.HTTPHandler):
            def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
                return self.do_open(_watched(http.client.HTTPConnection, poster), req)

        class _Https(urllib.request.HTTPSHandler):
            def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
                context = getattr(self, "_context", None)
                return self.do_open(_watched(http.client.HTTPSConnection, poster), req, context=context)

        self.headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT, **auth, **(headers or {})}
        self._opener = urllib.request.OpenerDirector()
        # Alerting should not silently go through a corporate proxy taken from the environment
        # (Prometheus' default too); `env_proxy=True` opts in.
        handlers: tuple[urllib.request.BaseHandler, ...] = (
            urllib.request.ProxyHandler(None if env_proxy else {}),
            _Http(),
            _Https(),
            urllib.request.HTTPDefaultErrorHandler(),
            urllib.request.HTTPErrorProcessor(),
        )
        for handler in handlers:
            self._opener.add_handler(handler)

    def watchdog(self) -> _Watchdog:
        """The watchdog of the POST in progress on this thread."""
        current: _Watchdog | None = getattr(self._local, "watchdog", None)
        if current is None:
            current = self._local.watchdog = _Watchdog()
        return current

    def post(self, body: object) -> None:
        data = json.dumps(body, separators=(",", ":")).encode("utf-8")
        request = urllib.request.Request(self.url, data=data, method="POST", headers=self.headers)
        watchdog = self._local.watchdog = _Watchdog()
        timer = threading.Timer(self.deadline_seconds, watchdog.expire)
        timer.daemon = True
        timer.start()
        try:
            self._post(request)
            if watchdog.expired:  # the answer came, but not whole within the deadline: not taken as delivered
                raise self._late()
        except DeliveryError:
            raise
        except (OSError, http.client.HTTPException) as err:
            if watchdog.expired:
                raise self._late() from err
            raise
        finally:
            timer.cancel()
            self._local.watchdog = None

    def _oversized(self, status: int) -> None:
        self.oversized_answers_total += 1
        self._log.warning(
            "oversized_answer",
            f"POST {self.shown_url} answered HTTP {status} with a body over {MAX_ANSWER_BYTES // 1024} KiB: read "
            f"{MAX_ANSWER_BYTES // 1024} KiB and closed the connection (delivered; a receiver's answer needs no body, "
            "check the receiver or the proxy in front of it)",
            url=self.shown_url,
            oversized_answers_total=self.oversized_answers_total,
        )

    def _late(self) -> DeliveryError:
        return DeliveryError(
            f"POST {self.shown_url} did not complete within its deadline of {self.deadline_seconds:g} s (the receiver "
            "or a proxy answers too slowly); will retry",
            url=self.shown_url,
            status=None,
            retryable=True,
        )

    def _post(self, request: urllib.request.Request) -> None:
        try:
            with self._opener.open(request, timeout=self.timeout_seconds) as response:
                # bounded: closing the response discards whatever else the receiver sends
                if len(response.read(MAX_ANSWER_BYTES + 1)) > MAX_ANSWER_BYTES:
                    self._oversized(response.status)
        except urllib.error.HTTPError as err:
            with err:
                answer = err.read(500).decode("utf-8", "replace").strip()
            retryable = err.code >= 500 or err.code in (408, 429)
            hint = "will retry" if retryable else "not retried: check the URL and the payload"
            raise DeliveryError(
                redact_text(f"POST {self.shown_url} answered HTTP {err.code} ({answer or err.reason}); {hint}"),
                url=self.shown_url,
                status=err.code,
                retryable=retryable,
            ) from None
        except (OSError, http.client.HTTPException) as err:
            if self._local.watchdog is not None and self._local.watchdog.expired:
                raise  # post() names the deadline
            reason = redact_text(str(err.reason if isinstance(err, urllib.error.URLError) else err))
            raise DeliveryError(
                f"POST {self.shown_url} failed: {reason}. Is the receiver running and reachable from here?",
                url=self.shown_url,
                status=None,
                retryable=True,
            ) from err
