"""Stage 1 (the sink's producer): telling a producer that will never send again, and when to replace it.

kafka-python's idempotent producer keeps a producer id the broker gave it. A broker that comes back without it (a
cluster re-created behind the same address, a broker restarted on memory storage) answers the producer's sequence
numbers with ``OutOfOrderSequenceNumber`` or ``UnknownProducerId``; the producer then asks for its epoch to be bumped,
and a broker that refuses (``InitProducerIdResponse: UnknownError``) leaves it in a fatal state in which it fails
every record it is given, for good. librdkafka has fatal errors of its own (``error_cb`` with ``fatal()``). Only a
new producer gets out of either: :func:`fatal_error` tells the state, :class:`Renewal` paces the replacements.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

#: the first wait between two replacements of a producer, doubled after each up to the second
RENEW_BACKOFF_SECONDS = 1.0
RENEW_BACKOFF_MAX_SECONDS = 30.0


def fatal_error(producer: object) -> BaseException | None:
    """The error that left ``producer`` unable to send anything again, else None.

    A producer may say so itself (``fatal_error``, as :class:`~monitor.source.rdkafka.RdProducer` does); for
    kafka-python's ``KafkaProducer`` it is its transaction manager's fatal state (an idempotent producer's; a producer
    without idempotence has no manager and no such state).

    >>> class P:
    ...     fatal_error = RuntimeError("fenced")
    >>> fatal_error(P()), fatal_error(object())
    (RuntimeError('fenced'), None)
    """
    own = getattr(producer, "fatal_error", None)
    if isinstance(own, BaseException):
        return own
    manager = getattr(producer, "_transaction_manager", None)  # kafka-python: None without idempotence
    if manager is not None and manager.has_fatal_error():
        error = manager.last_error
        return error if isinstance(error, BaseException) else RuntimeError(f"fatal producer state: {error!r}")
    return None


class Renewal:
    """When a producer in a fatal state may be replaced: at once the first time, then after a backoff that doubles
    with each replacement (or failed attempt) up to ``max_seconds``, and starts over once a replacement delivers.

    Parameters
    ----------
    first_seconds, max_seconds : the backoff's first and largest wait.
    clock : monotonic seconds.

    >>> now = [0.0]
    >>> r = Renewal(1.0, 4.0, clock=lambda: now[0])
    >>> r.due(), r.renewed(), r.due()
    (True, None, False)
    >>> now[0] = 1.0; r.due(), r.renewed(), r.wait_seconds, r.backoff_seconds
    (True, None, 2.0, 4.0)
    >>> r.delivered(); r.backoff_seconds
    1.0
    """

    def __init__(
        self,
        first_seconds: float = RENEW_BACKOFF_SECONDS,
        max_seconds: float = RENEW_BACKOFF_MAX_SECONDS,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0 < first_seconds <= max_seconds:
            raise ValueError(f"need 0 < first_seconds <= max_seconds; got {first_seconds!r}, {max_seconds!r}")
        self.first_seconds, self.max_seconds = first_seconds, max_seconds
        self._clock = clock
        self.backoff_seconds = first_seconds
        self._next_at = -math.inf
        #: replacements made (monotone)
        self.total = 0

    def due(self) -> bool:
        """Whether a replacement may be tried now."""
        return self._clock() >= self._next_at

    @property
    def wait_seconds(self) -> float:
        """How long until the next replacement may be tried (0 when it may now)."""
        return max(0.0, self._next_at - self._clock())

    def renewed(self) -> None:
        """A replacement was made: the next one waits the backoff, which doubles."""
        self.total += 1
        self.attempted()

    def attempted(self) -> None:
        """A replacement was tried (and failed, or was made): wait the backoff before the next, and double it."""
        self._next_at = self._clock() + self.backoff_seconds
        self.backoff_seconds = min(self.max_seconds, self.backoff_seconds * 2)

    def delivered(self) -> None:
        """The producer delivered: the backoff starts over."""
        self.backoff_seconds = self.first_seconds
