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

The senders live in :mod:`monitor.exporters.alert_senders`, the bounded POST in :mod:`monitor.exporters.json_post`;
this module offers them beside the worker.

The worker's logic is :meth:`DeliveryWorker.process_once`, which takes the time as an argument;
the thread only calls it in a loop, so tests drive it with a fake clock and a fake sender.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Self

from monitor.alerts import Alert, AlertEvent, AlertState
from monitor.errors import ConfigError
from monitor.exporters.alert_senders import AlertmanagerSender, Sender, WebhookSender, rfc3339
from monitor.exporters.json_post import MAX_ANSWER_BYTES, DeliveryError
from monitor.logs import RateLimitedLogger, redact_text

#: the delivery API in one place: the worker here, the senders and the POST's error beside it
__all__ = [
    "MAX_ANSWER_BYTES",
    "AlertmanagerSender",
    "DeliveryError",
    "DeliveryWorker",
    "Sender",
    "WebhookSender",
    "rfc3339",
]

log = logging.getLogger(__name__)


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

    def __exit__(self, *exc: object) -> None:
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
