"""Stage 6 (exporters): delivering alert transitions to Alertmanager's v2 API and to generic JSON webhooks.

:class:`AlertmanagerSender` and :class:`WebhookSender` turn :class:`~monitor.alerts.Alert`
snapshots into one HTTP POST (standard library only). :class:`DeliveryWorker` owns a background
thread between the alert engine and a sender, so a slow or dead receiver never blocks the hot path:

* **bounded outbox** — ``submit()`` never blocks. Queued alerts are coalesced per fingerprint (a
  newer snapshot replaces an unsent older one); when the outbox is full the *oldest* entry is
  dropped and counted in ``dropped_total``.
* **retries** — a failed POST is retried with exponential backoff (``initial_backoff_seconds``
  doubling up to ``max_backoff_seconds``) for as long as the receiver stays unreachable or answers
  5xx/408/429; a 4xx answer means the payload itself is wrong, so that batch is dropped and
  counted in ``rejected_total`` instead of being retried forever.
* **resend** — every firing alert is re-sent each ``resend_interval_seconds``. Alertmanager expires an alert it has
  not heard about for ``resolve_timeout`` (or past its ``endsAt``), so its worker re-sends every 60 s, like
  Prometheus does; a webhook's worker re-sends at ``alerts.repeat_interval_seconds`` (4 h, Alertmanager's
  ``repeat_interval``): a receiver hears of a firing alert when it fires and then at that pace. A resolved alert is
  sent (with ``endsAt``) until delivered, then forgotten.
* **stop(timeout)** — one last best-effort flush of the outbox, then the thread exits.
* **deadline** — one POST (connect, TLS handshake, request, answer) ends within ``deadline_seconds`` (30 s): the
  socket timeout bounds each read, so a receiver or proxy that trickles bytes would otherwise hold the thread for
  good; past the deadline its sockets are shut down and the POST is a counted, retried failure.
* **bounded answers** — at most :data:`MAX_ANSWER_BYTES` of a receiver's answer body are read; the rest is
  discarded with the connection (the POST still counts as delivered by its 2xx status) and counted in the sender's
  ``oversized_answers_total``, logged rate-limited: a receiver or proxy that streams an endless body costs the
  process 64 KiB, not memory until the deadline.
* **degraded** — None while deliveries succeed; after a failure, until the next success, one line saying what
  fails and what to fix (``harmonic_degraded{reason="alert_delivery"}``). Failures are logged, rate-limited.
* **secrets** — a URL's ``user:password@`` becomes HTTP basic authentication and leaves the URL; every URL in a
  message or log line is redacted (:func:`monitor.logs.redact_text`).

The worker's logic is :meth:`DeliveryWorker.process_once`, which takes the time as an argument;
the thread only calls it in a loop, so tests drive it with a fake clock and a fake sender.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import logging
import math
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Protocol, Self

from monitor.alerts import Alert, AlertEvent, AlertState
from monitor.config_checks import http_url_problem
from monitor.errors import ConfigError, MonitorError
from monitor.logs import RateLimitedLogger, redact_text

__all__ = [
    "MAX_ANSWER_BYTES",
    "AlertmanagerSender",
    "DeliveryError",
    "DeliveryWorker",
    "Sender",
    "WebhookSender",
    "rfc3339",
]

_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_USER_AGENT = "harmonic-monitor"
#: most bytes of an answer body read from a receiver; an answer needs none (only its status counts)
MAX_ANSWER_BYTES = 64 * 1024
log = logging.getLogger(__name__)


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


class Sender(Protocol):
    """Delivers a batch of alert snapshots in one request."""

    def send(self, alerts: Sequence[Alert], now_seconds: float) -> None:
        """Deliver ``alerts``; raise :class:`DeliveryError` on failure. ``now_seconds``: Unix time."""
        ...


def rfc3339(seconds: float) -> str:
    """Unix seconds as an RFC 3339 UTC timestamp with milliseconds, as Alertmanager writes them.

    >>> rfc3339(0.0)
    '1970-01-01T00:00:00.000Z'
    >>> rfc3339(1795600000.25)
    '2026-11-25T09:46:40.250Z'
    """
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _check_url(url: str, what: str) -> str:
    problem = http_url_problem(url)  # the check the settings make at load (monitor/config_checks.py)
    if problem:
        raise ConfigError(redact_text(f"{what} URL {problem}"))
    return url


def _split_credentials(url: str) -> tuple[str, dict[str, str]]:
    """``url`` without its ``user:password@`` part, and the basic-auth header that part stands for (urllib itself
    would take ``user:password@host`` for the host name).

    >>> _split_credentials("https://am:s3cret@alertmanager:9093/prefix")
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


def _check_timeout(timeout_seconds: float, name: str = "timeout_seconds") -> float:
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


def _watched(base: type[http.client.HTTPConnection], poster: _JsonPoster) -> type[http.client.HTTPConnection]:
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


class _JsonPoster:
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
        self.url, auth = _split_credentials(url)
        self.timeout_seconds = _check_timeout(timeout_seconds)
        self.deadline_seconds = _check_timeout(deadline_seconds, "deadline_seconds")
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

        self.headers = {"Content-Type": "application/json", "User-Agent": _USER_AGENT, **auth, **(headers or {})}
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


class AlertmanagerSender:
    """Posts alerts to Alertmanager's v2 API, ``POST {url}/api/v2/alerts``.

    Each alert becomes ``{labels, annotations, startsAt, endsAt, generatorURL}``. A resolved alert
    carries ``endsAt`` = its resolve time. A firing alert carries ``endsAt`` = now +
    ``firing_ttl_seconds`` when that is set (keep it several resend intervals long), and no ``endsAt``
    otherwise, in which case Alertmanager applies its own ``resolve_timeout`` (default 5 min).

    Parameters
    ----------
    url : str
        Alertmanager's base URL, e.g. ``"http://alertmanager:9093"`` (a path prefix is kept).
    timeout_seconds : float
        Socket timeout of one read or write of a POST.
    deadline_seconds : float
        Bound on one whole POST (connect, TLS, request, answer): a receiver that trickles bytes is a failure then.
    generator_url : str
        Link back to the monitor (``generatorURL``); omitted when empty.
    firing_ttl_seconds : float or None
        See above.
    external_labels : mapping of str to str
        Extra labels on every alert (e.g. ``{"cluster": "prod-eu"}``); an alert's own labels win.
    headers : mapping of str to str
        Extra HTTP headers, e.g. ``{"Authorization": "Bearer ..."}``.
    proxy_from_environment : bool
        Use ``http_proxy``/``https_proxy``/``no_proxy`` from the environment (off by default).

    Raises
    ------
    ConfigError
        For a URL that is not absolute http(s), a bad timeout or TTL, or an invalid label name.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout_seconds: float = 10.0,
        deadline_seconds: float = 30.0,
        generator_url: str = "",
        firing_ttl_seconds: float | None = None,
        external_labels: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        proxy_from_environment: bool = False,
    ) -> None:
        self.url = _check_url(url, "Alertmanager").rstrip("/")
        if generator_url:
            _check_url(generator_url, "generator")
        if firing_ttl_seconds is not None and not (math.isfinite(firing_ttl_seconds) and firing_ttl_seconds > 0):
            raise ConfigError(f"firing_ttl_seconds must be None or a finite number > 0; got {firing_ttl_seconds!r}")
        bad = [name for name in (external_labels or {}) if not _LABEL_NAME.match(name)]
        if bad:
            raise ConfigError(f"external label names must match [a-zA-Z_][a-zA-Z0-9_]*; got {bad}")
        self.generator_url = generator_url
        self.firing_ttl_seconds = firing_ttl_seconds
        self.external_labels = dict(external_labels or {})
        self.endpoint = f"{self.url}/api/v2/alerts"
        self._poster = _JsonPoster(
            self.endpoint,
            timeout_seconds=timeout_seconds,
            headers=headers,
            env_proxy=proxy_from_environment,
            deadline_seconds=deadline_seconds,
        )

    def payload(self, alerts: Sequence[Alert], now_seconds: float) -> list[dict[str, object]]:
        """The JSON body (a list of postable alerts) for ``alerts`` at time ``now_seconds``."""
        body: list[dict[str, object]] = []
        for alert in alerts:
            item: dict[str, object] = {
                "labels": {**self.external_labels, **alert.labels},
                "annotations": alert.annotations,
                "startsAt": rfc3339(alert.starts_at_seconds),
            }
            if alert.state is AlertState.RESOLVED and alert.ends_at_seconds is not None:
                item["endsAt"] = rfc3339(alert.ends_at_seconds)
            elif self.firing_ttl_seconds is not None:
                item["endsAt"] = rfc3339(now_seconds + self.firing_ttl_seconds)
            if self.generator_url:
                item["generatorURL"] = self.generator_url
            body.append(item)
        return body

    @property
    def oversized_answers_total(self) -> int:
        """2xx answers whose body ran past :data:`MAX_ANSWER_BYTES` (read that far, the rest discarded)."""
        return self._poster.oversized_answers_total

    def send(self, alerts: Sequence[Alert], now_seconds: float) -> None:
        """POST ``alerts``; raises :class:`DeliveryError` (with ``retryable``) on failure."""
        if alerts:
            self._poster.post(self.payload(alerts, now_seconds))


class WebhookSender:
    """Posts alerts as JSON to any HTTP endpoint (Slack relays, incident tools, a queue gateway).

    The body is ``{"version": "1", "sender": "harmonic-monitor", "sentAt": ..., "alerts": [...]}``
    where each alert is ``{status, fingerprint, labels, annotations, startsAt, firedAt, endsAt, evidence}``
    (``status`` is ``"firing"`` or ``"resolved"``; ``endsAt`` is null while firing) — close to
    Alertmanager's own webhook format, so receivers written for it need few changes.

    Parameters
    ----------
    url : str
        The endpoint.
    timeout_seconds : float
        Socket timeout of one read or write of a POST.
    deadline_seconds : float
        Bound on one whole POST (connect, TLS, request, answer): a receiver that trickles bytes is a failure then.
    headers : mapping of str to str
        Extra HTTP headers (authentication).
    proxy_from_environment : bool
        Use proxy settings from the environment (off by default).

    Raises
    ------
    ConfigError
        For a URL that is not absolute http(s) or a bad timeout.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout_seconds: float = 10.0,
        deadline_seconds: float = 30.0,
        headers: Mapping[str, str] | None = None,
        proxy_from_environment: bool = False,
    ) -> None:
        self.url = _check_url(url, "webhook")
        self._poster = _JsonPoster(
            self.url,
            timeout_seconds=timeout_seconds,
            headers=headers,
            env_proxy=proxy_from_environment,
            deadline_seconds=deadline_seconds,
        )

    def payload(self, alerts: Sequence[Alert], now_seconds: float) -> dict[str, object]:
        """The JSON body for ``alerts`` at time ``now_seconds``."""
        items: list[dict[str, object]] = []
        for alert in alerts:
            items.append(
                {
                    "status": str(alert.state),
                    "fingerprint": alert.fingerprint,
                    "labels": alert.labels,
                    "annotations": alert.annotations,
                    "startsAt": rfc3339(alert.starts_at_seconds),
                    "firedAt": None if alert.fired_at_seconds is None else rfc3339(alert.fired_at_seconds),
                    "endsAt": None if alert.ends_at_seconds is None else rfc3339(alert.ends_at_seconds),
                    "evidence": [e.to_dict() for e in alert.evidence],
                }
            )
        return {"version": "1", "sender": _USER_AGENT, "sentAt": rfc3339(now_seconds), "alerts": items}

    @property
    def oversized_answers_total(self) -> int:
        """2xx answers whose body ran past :data:`MAX_ANSWER_BYTES` (read that far, the rest discarded)."""
        return self._poster.oversized_answers_total

    def send(self, alerts: Sequence[Alert], now_seconds: float) -> None:
        """POST ``alerts``; raises :class:`DeliveryError` (with ``retryable``) on failure."""
        if alerts:
            self._poster.post(self.payload(alerts, now_seconds))


class DeliveryWorker:
    """A background thread that delivers :class:`AlertEvent` objects through one :class:`Sender`.

    Parameters
    ----------
    sender : Sender
        Where alerts go (:class:`AlertmanagerSender`, :class:`WebhookSender`, or a fake in tests).
    queue_size : int
        Outbox capacity in alerts; when full the oldest queued alert is dropped (``dropped_total``).
    batch_size : int
        Most alerts per POST.
    resend_interval_seconds : float
        How often a firing alert is re-sent: well under Alertmanager's ``resolve_timeout`` for Alertmanager (60 s);
        a webhook's repeat interval (``alerts.repeat_interval_seconds``) for a webhook.
    initial_backoff_seconds, max_backoff_seconds : float
        Retry delay after the first failure, doubled per consecutive failure up to the maximum.
    clock : callable returning float
        Unix time in seconds (``time.time``); injected for tests.
    name : str
        Thread name, shown in thread dumps.

    Raises
    ------
    ConfigError
        If a size is < 1 or a duration is not a finite positive number, or the backoffs are inverted.

    Notes
    -----
    Counters (plain attributes, read without locking): ``sent_total`` alerts delivered,
    ``failed_total`` failed POST attempts, ``dropped_total`` alerts dropped from a full outbox,
    ``rejected_total`` alerts dropped because the receiver refused them (4xx), ``resent_total``
    firing alerts queued again by the resend timer. ``last_error`` holds the latest failure message, and
    :attr:`degraded` says what fails until a delivery succeeds again (failures are also logged, rate-limited).
    """

    def __init__(
        self,
        sender: Sender,
        *,
        queue_size: int = 1000,
        batch_size: int = 64,
        resend_interval_seconds: float = 60.0,
        initial_backoff_seconds: float = 1.0,
        max_backoff_seconds: float = 60.0,
        clock: Callable[[], float] = time.time,
        name: str = "alert-delivery",
    ) -> None:
        for attr, count in (("queue_size", queue_size), ("batch_size", batch_size)):
            if count < 1:
                raise ConfigError(f"DeliveryWorker {attr} must be >= 1; got {count!r}")
        durations = {
            "resend_interval_seconds": resend_interval_seconds,
            "initial_backoff_seconds": initial_backoff_seconds,
            "max_backoff_seconds": max_backoff_seconds,
        }
        for attr, seconds in durations.items():
            if not math.isfinite(seconds) or seconds <= 0:
                raise ConfigError(f"DeliveryWorker {attr} must be a finite number > 0; got {seconds!r}")
        if max_backoff_seconds < initial_backoff_seconds:
            raise ConfigError(
                f"max_backoff_seconds ({max_backoff_seconds}) must be >= initial_backoff_seconds "
                f"({initial_backoff_seconds})"
            )
        self.sender = sender
        self.queue_size = queue_size
        self.batch_size = batch_size
        self.resend_interval_seconds = resend_interval_seconds
        self.initial_backoff_seconds = initial_backoff_seconds
        self.max_backoff_seconds = max_backoff_seconds
        self.name = name
        self._clock = clock
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._wakeup = False
        self._stop_deadline = math.inf
        self._log = RateLimitedLogger(log)
        self.reset()

    def reset(self) -> None:
        """Empty the outbox, forget firing alerts, zero the counters (not while the thread runs)."""
        if self.running:
            raise RuntimeError("DeliveryWorker.reset() while its thread runs; call stop() first")
        self._outbox: OrderedDict[str, Alert] = OrderedDict()
        self._firing: dict[str, Alert] = {}
        self._last_sent: dict[str, float] = {}
        self._consecutive_failures = 0
        self._next_attempt_at = -math.inf
        self.sent_total = 0
        self.failed_total = 0
        self.dropped_total = 0
        self.rejected_total = 0
        self.resent_total = 0
        self.last_error: str | None = None
        self._failures_since_success = 0

    # ----------------------------------------------------------------- producer side (any thread)

    def submit(self, event: AlertEvent) -> None:
        """Queue a fired or resolved alert for delivery; never blocks, never raises on a full outbox."""
        alert = event.alert
        with self._cond:
            if alert.state is AlertState.FIRING:
                self._firing[alert.fingerprint] = alert
            else:
                self._firing.pop(alert.fingerprint, None)
                self._last_sent.pop(alert.fingerprint, None)
            self._enqueue(alert, evict=True)
            self._wakeup = True
            self._cond.notify()

    @property
    def queue_depth(self) -> int:
        """Alerts waiting in the outbox."""
        return len(self._outbox)

    @property
    def firing_count(self) -> int:
        """Firing alerts this worker keeps re-sending."""
        return len(self._firing)

    @property
    def running(self) -> bool:
        """Whether the background thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def degraded(self) -> str | None:
        """None while deliveries succeed; after a failed POST, until the next success: what fails and what to fix."""
        with self._cond:
            failures, error, waiting = self._failures_since_success, self.last_error, len(self._outbox)
        if not failures:
            return None
        return (
            f"alert delivery to {self.name} failing ({failures} failed POSTs since the last success; {waiting} alerts "
            f"waiting, the oldest dropped past {self.queue_size}): {error}"
        )

    def _enqueue(self, alert: Alert, *, evict: bool) -> bool:
        fp = alert.fingerprint
        if fp in self._outbox:
            self._outbox[fp] = alert  # coalesce: the newest snapshot wins
            self._outbox.move_to_end(fp)
            return True
        if len(self._outbox) >= self.queue_size:
            if not evict:
                return False
            self._outbox.popitem(last=False)
            self.dropped_total += 1
        self._outbox[fp] = alert
        return True

    # ----------------------------------------------------------------- delivery logic (one thread)

    def process_once(self, now_seconds: float | None = None) -> float:
        """Queue due resends, then make at most one delivery attempt if one is due.

        Parameters
        ----------
        now_seconds : float, optional
            The current Unix time; the injected clock when omitted.

        Returns
        -------
        float
            Seconds until the next piece of work is due: 0 when more is queued and may be sent
            now, ``math.inf`` when nothing is queued or firing.
        """
        now = self._clock() if now_seconds is None else now_seconds
        with self._cond:
            self._queue_resends(now)
            if not self._outbox:
                return self._until_next_resend(now)
            if now < self._next_attempt_at:
                return self._next_attempt_at - now
            batch = list(self._outbox.items())[: self.batch_size]
        self._attempt(batch, now)
        with self._cond:
            if not self._outbox:
                return self._until_next_resend(now)
            return max(0.0, self._next_attempt_at - now)

    def _queue_resends(self, now: float) -> None:
        for fp, alert in self._firing.items():
            due = now - self._last_sent.get(fp, -math.inf) >= self.resend_interval_seconds
            # A resend never evicts a fresher transition; a full outbox just delays it.
            if due and fp not in self._outbox and self._enqueue(alert, evict=False):
                self.resent_total += 1

    def _until_next_resend(self, now: float) -> float:
        if not self._firing:
            return math.inf
        due = min(self._last_sent.get(fp, -math.inf) for fp in self._firing) + self.resend_interval_seconds
        return max(0.0, due - now)

    def _attempt(self, batch: list[tuple[str, Alert]], now: float) -> bool:
        error: DeliveryError | None = None
        try:
            self.sender.send([alert for _, alert in batch], now)
        except DeliveryError as err:
            error = err
        except Exception as err:  # a buggy custom sender must not kill the delivery thread
            error = DeliveryError(f"{type(err).__name__}: {err}", url="", status=None, retryable=True)
        with self._cond:
            failures = self._failures_since_success
            if error is None:
                self._failures_since_success = 0
            else:
                self.failed_total += 1
                self._failures_since_success += 1
                self.last_error = redact_text(str(error))
            queued = len(self._outbox)
        if error is not None:
            self._log.warning(
                self.name,
                "alert delivery failed; will retry" if error.retryable else "alert delivery refused; not retried",
                receiver=self.name,
                error=self.last_error,
                queued=queued,
            )
        elif failures:
            log.info("alert delivery works again", extra={"receiver": self.name, "failed_before": failures})
        with self._cond:
            if error is not None and error.retryable:
                self._consecutive_failures += 1
                exponent = min(self._consecutive_failures - 1, 62)
                delay = min(self.initial_backoff_seconds * 2.0**exponent, self.max_backoff_seconds)
                self._next_attempt_at = now + delay
                return False
            for fp, alert in batch:
                if self._outbox.get(fp) is alert:  # not superseded while the POST was in flight
                    del self._outbox[fp]
                if fp in self._firing:
                    # Also after a rejection, so a refused alert is retried at the resend pace.
                    self._last_sent[fp] = now
            if error is None:
                self.sent_total += len(batch)
                self._consecutive_failures = 0
                self._next_attempt_at = -math.inf
                return True
            self.rejected_total += len(batch)
            return False

    # ----------------------------------------------------------------- thread life cycle

    def start(self) -> Self:
        """Start the delivery thread (no-op when it already runs)."""
        with self._cond:
            if self.running:
                return self
            self._stopping = False
            self._stop_deadline = math.inf
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout_seconds: float = 5.0) -> bool:
        """Flush what is queued (one best-effort pass, no backoff) and stop the thread.

        Parameters
        ----------
        timeout_seconds : float
            The most time to spend flushing and joining.

        Returns
        -------
        bool
            True when the thread has exited; False when it was still busy (e.g. a POST hanging
            up to the sender's timeout) at the deadline. It is a daemon thread either way.
        """
        thread = self._thread
        if thread is None:
            return True
        with self._cond:
            self._stopping = True
            self._stop_deadline = time.monotonic() + timeout_seconds
            self._cond.notify()
        thread.join(timeout_seconds)
        return not thread.is_alive()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        # A clock that jumps back must not park the thread for hours (a webhook's repeat interval is 4 h): never wait
        # longer than this.
        longest_wait = max(min(self.resend_interval_seconds, 60.0), self.max_backoff_seconds)
        while True:
            with self._cond:
                if self._stopping:
                    break
                self._wakeup = False
            wait = self.process_once(self._clock())
            with self._cond:
                if self._stopping:
                    break
                if wait > 0 and not self._wakeup:
                    self._cond.wait(timeout=min(wait, longest_wait))
        self._flush()

    def _flush(self) -> None:
        """Last pass on stop: send queued alerts batch by batch until empty, a failure, or the deadline."""
        while time.monotonic() < self._stop_deadline:
            with self._cond:
                batch = list(self._outbox.items())[: self.batch_size]
            if not batch or not self._attempt(batch, self._clock()):
                return
