"""A Kafka consumer's broker outage (both clients' sources): since when the broker is away and our lines about it
(:class:`BrokerOutage`, :func:`outage_message`), what kafka-python raises while the cluster cannot be reached
(:func:`unreachable_errors`), and the client's own connection lines held back (:class:`ClientNoise`)."""

from __future__ import annotations

import functools
import logging
import math
import time

from monitor.logs import RateLimitedLogger, redact_text

#: the lines of both halves of the kafka-python client keep one logger name (operators filter on it)
log = logging.getLogger("monitor.source.kafka")

#: at most one line of ours about an outage this often (kafka-python's own lines about it are held back)
OUTAGE_LOG_SECONDS = 30.0


#: what to try when a broker that answers other clients cannot be reached without a stated API version
OLD_BROKER_HINT = (
    "if the broker is up and older than 0.10 (e.g. Kafka 0.9, whose version cannot be probed), "
    "set its version: --api-version 0.9 (kafka.api_version)"
)


class BrokerOutage:
    """Since when a consumer's broker is away (both clients' sources), and our lines about it: one when it goes
    away, then at most one every ``OUTAGE_LOG_SECONDS`` with how many of the client's own lines were held back,
    and one when it is back."""

    def __init__(self, bootstrap_servers: str, noise: ClientNoise, hint: str = "") -> None:
        self.bootstrap_servers = bootstrap_servers
        self.noise = noise
        #: a fix to name in the lines (the old-broker hint where no API version is set)
        self.hint = hint
        #: monotonic time since when the broker is away (None: it is there), and the last error
        self.since: float | None = None
        self.error = ""
        self._log = RateLimitedLogger(log, OUTAGE_LOG_SECONDS)

    def away(self, error: str) -> None:
        """The client reported the cluster unreachable (``error``): away from now, if it was not already."""
        now = time.monotonic()
        if self.since is None:
            self.since = now
        self.error = redact_text(error)
        self._log.warning(
            "away",
            "Kafka broker not reachable; waiting for it (consumption resumes when it is back)",
            bootstrap_servers=redact_text(self.bootstrap_servers),
            error=self.error,
            away_seconds=round(now - self.since, 1),
            client_lines_held_back=self.noise.held,
            **({"fix": self.hint} if self.hint else {}),
        )

    def back(self) -> None:
        """The broker answers again (no-op when it was not away)."""
        if self.since is None:
            return
        log.info(
            "Kafka broker reachable again; consuming",
            extra={"away_seconds": round(time.monotonic() - self.since, 1)},
        )
        self.since = None

    @property
    def state(self) -> tuple[float, str] | None:
        """(since when, on the monotonic clock; the last error) while the broker is away, else None."""
        return None if self.since is None else (self.since, self.error)


def outage_message(bootstrap_servers: str, away: tuple[float, str] | None) -> str | None:
    """The ``degraded`` line of a consumer whose broker is away (``away``: since when, monotonic; the error)."""
    if away is None:
        return None
    since, error = away
    return (
        f"Kafka broker at '{redact_text(bootstrap_servers)}' not reachable for {time.monotonic() - since:.0f} s "
        f"({error}); consumption resumes when it is back: check the broker and the network"
    )


@functools.cache
def unreachable_errors() -> tuple[type[BaseException], ...]:
    """What kafka-python raises while the cluster cannot be reached (kafka-python imported on first use)."""
    from kafka import errors

    names = (  # NoBrokersAvailable: kafka-python 2.x
        "KafkaConnectionError", "KafkaTimeoutError", "NoBrokersAvailable", "NodeNotReadyError", "RequestTimedOutError",
        "CoordinatorNotAvailableError",
    )  # fmt: skip
    found = tuple(getattr(errors, name) for name in names if hasattr(errors, name))
    return (*found, ConnectionError, TimeoutError)


class ClientNoise(logging.Filter):
    """Holds back a client's own WARNING and ERROR lines about connections (during an outage kafka-python writes
    several a second, librdkafka one per attempt, ~20 a second on a refused connection): :class:`BrokerOutage` says
    it once, in its own line, rate-limited, with how many were held back. Only lines that name a connection problem
    (``signs``; kafka-python's by default) are held back; every other line of the client passes."""

    SIGNS = (
        "ECONNREFUSED",
        "Connection failed",
        "Connection lost",
        "Connection reset",
        "KafkaConnectionError",
        "Bootstrap",
        "bootstrap",
        "not ready",
        "NodeNotReady",
        "Unable to connect",
        "No node available",
        "socket disconnected",
        "ConnectionRefused",
        "Broken pipe",
        "Error receiving network data",  # a connection reset mid-read (a broker killed, a proxy or LB cutting it)
        "Error sending request data",
        "Failed to build connection",  # a reconnect attempt refused while the broker is away
        "failed Cancelled",  # "Metadata refresh: failed Cancelled": its request cancelled as the connection closed
    )

    def __init__(self, signs: tuple[str, ...] | None = None) -> None:
        super().__init__()
        self.signs = self.SIGNS if signs is None else signs
        self.held = 0
        self.last_at = -math.inf
        self.last_message = ""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or record.levelno > logging.ERROR:
            return True
        message = record.getMessage()
        if not any(sign in message for sign in self.signs):
            return True
        self.held += 1
        self.last_at = time.monotonic()
        self.last_message = message[:300]
        return False


#: one per process: kafka-python's connection lines held back (KafkaSource reports them)
CLIENT_NOISE = ClientNoise()
#: the kafka-python loggers that report connection problems (3.0.12; older releases' names too)
CLIENT_LOGGERS = (
    "kafka.net.manager",
    "kafka.net.connection",
    "kafka.net.transport",
    "kafka.net.selector",
    "kafka.conn",
    "kafka.client_async",
    "kafka.cluster",
    "kafka.coordinator",
    "kafka.coordinator.base",
    "kafka.coordinator.consumer",
    "kafka.coordinator.heartbeat",
    "kafka.consumer.fetcher",
    "kafka.consumer.group",
    "kafka.consumer.subscription_state",
)


def install_client_noise_filter() -> None:
    """Put :data:`CLIENT_NOISE` on kafka-python's connection loggers (idempotent)."""
    for name in CLIENT_LOGGERS:
        logger = logging.getLogger(name)
        if CLIENT_NOISE not in logger.filters:
            logger.addFilter(CLIENT_NOISE)
