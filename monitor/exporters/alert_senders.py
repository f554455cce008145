"""Stage 6 (exporters): alert snapshots as the one HTTP POST each receiver takes (standard library only).

:class:`AlertmanagerSender` posts to Alertmanager's v2 API, :class:`WebhookSender` to any JSON endpoint; each holds a
:class:`~monitor.exporters.json_post.JsonPoster` (deadline, bounded answers, credentials out of the URL).
:class:`~monitor.exporters.delivery.DeliveryWorker` calls them from its thread, through the :class:`Sender` protocol.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Protocol

from monitor.alerts import Alert, AlertState
from monitor.errors import ConfigError
from monitor.exporters.json_post import USER_AGENT, JsonPoster, check_url

__all__ = ["AlertmanagerSender", "Sender", "WebhookSender", "rfc3339"]

_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


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


class _JsonSender:
    """What both senders share: one :class:`JsonPoster` to their endpoint, and ``send`` = POST of ``payload``."""

    def __init__(
        self,
        endpoint: str,
        *,
        timeout_seconds: float,
        deadline_seconds: float,
        headers: Mapping[str, str] | None,
        proxy_from_environment: bool,
    ) -> None:
        self._poster = JsonPoster(
            endpoint,
            timeout_seconds=timeout_seconds,
            headers=headers,
            env_proxy=proxy_from_environment,
            deadline_seconds=deadline_seconds,
        )

    def payload(self, alerts: Sequence[Alert], now_seconds: float) -> object:
        """The JSON body for ``alerts`` at time ``now_seconds``."""
        raise NotImplementedError

    @property
    def oversized_answers_total(self) -> int:
        """2xx answers whose body ran past :data:`MAX_ANSWER_BYTES` (read that far, the rest discarded)."""
        return self._poster.oversized_answers_total

    def send(self, alerts: Sequence[Alert], now_seconds: float) -> None:
        """POST ``alerts``; raises :class:`DeliveryError` (with ``retryable``) on failure."""
        if alerts:
            self._poster.post(self.payload(alerts, now_seconds))


class AlertmanagerSender(_JsonSender):
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
        self.url = check_url(url, "Alertmanager").rstrip("/")
        if generator_url:
            check_url(generator_url, "generator")
        if firing_ttl_seconds is not None and not (math.isfinite(firing_ttl_seconds) and firing_ttl_seconds > 0):
            raise ConfigError(f"firing_ttl_seconds must be None or a finite number > 0; got {firing_ttl_seconds!r}")
        bad = [name for name in (external_labels or {}) if not _LABEL_NAME.match(name)]
        if bad:
            raise ConfigError(f"external label names must match [a-zA-Z_][a-zA-Z0-9_]*; got {bad}")
        self.generator_url = generator_url
        self.firing_ttl_seconds = firing_ttl_seconds
        self.external_labels = dict(external_labels or {})
        self.endpoint = f"{self.url}/api/v2/alerts"
        super().__init__(
            self.endpoint,
            timeout_seconds=timeout_seconds,
            deadline_seconds=deadline_seconds,
            headers=headers,
            proxy_from_environment=proxy_from_environment,
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


class WebhookSender(_JsonSender):
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
        self.url = check_url(url, "webhook")
        super().__init__(
            self.url,
            timeout_seconds=timeout_seconds,
            deadline_seconds=deadline_seconds,
            headers=headers,
            proxy_from_environment=proxy_from_environment,
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
        return {"version": "1", "sender": USER_AGENT, "sentAt": rfc3339(now_seconds), "alerts": items}
