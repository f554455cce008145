"""Stage 1's way out: :class:`KafkaSink`, the dead-letter and scores topics through a kafka-python producer that
holds every record until the broker acknowledges it and sends it again while the broker is away (its ``flush`` says
whether all are acknowledged, which is what lets the pipeline commit), and replaces a producer that can never send
again. Errors and log lines never show a secret."""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from monitor.errors import SourceError
from monitor.logs import RateLimitedLogger, redact_text
from monitor.source.base import Backlogging, Degradable, ProducerCounts
from monitor.source.kafka_config import PRODUCER_LINGER_MS, PRODUCER_MAX_BLOCK_MS, ProducerConfig, client_settings
from monitor.source.kafka_outage import OLD_BROKER_HINT, install_client_noise_filter
from monitor.source.producer_renewal import Renewal, fatal_error

#: the lines of both halves of the kafka-python client keep one logger name (operators filter on it)
log = logging.getLogger("monitor.source.kafka")

#: records held this long with no acknowledgement at all: the broker is taken to be away (``KafkaSink.degraded``)
STALL_SECONDS = 5.0
#: how long a flush that cannot deliver waits for progress before it hands the loop back (the loop's pace then)
RETRY_WAIT_SECONDS = 1.0
#: the ``topic_kind`` label values of the producer counters, and the ``reason`` values of its drops
TOPIC_KINDS = ("dead_letter", "scores")
DROP_REASONS = ("buffer_full", "too_large")


class Future(Protocol):
    """What :meth:`Producer.send` returns (kafka-python's ``FutureRecordMetadata``): callbacks run on its I/O thread,
    or at once when the outcome is already known."""

    def add_callback(self, f: Callable[..., object], *args: object) -> object: ...

    def add_errback(self, f: Callable[..., object], *args: object) -> object: ...


class Producer(Protocol):
    """The part of kafka-python's ``KafkaProducer`` that :class:`KafkaSink` uses (a fake in the unit tests)."""

    @property
    def config(self) -> Mapping[str, Any]: ...

    def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> Future: ...

    def close(self, timeout: float | None = None) -> None: ...


@dataclass(frozen=True, slots=True)
class _Out:
    """One record the sink holds until the broker acknowledges it."""

    topic: str
    value: bytes
    key: bytes | None
    headers: list[tuple[str, bytes]]
    kind: str
    size: int


class _Ticket:
    """One hand-over of a held record to a producer: resolved once, by the first of its acknowledgement, its failure
    or the replacement of that producer (a later callback of the replaced producer is ignored)."""

    __slots__ = ("out",)

    def __init__(self, out: _Out) -> None:
        self.out = out


class KafkaSink(Backlogging, Degradable, ProducerCounts):
    """The dead-letter and scores topics: a kafka-python producer (acks=all) that rides out a broker outage.

    Every record is held, counted in bytes, until the broker acknowledges it; a record that fails (the broker is away
    past kafka-python's ``delivery_timeout_ms``, a topic without metadata past ``max_block_ms``, a refused request) is
    kept and handed to kafka-python again at the next :meth:`flush`, so nothing is given up while the broker is away.
    The contract with the pipeline:

    - :meth:`flush` returns True only when every record sent so far is acknowledged: only then may the offsets of
      the events they came from be committed (at-least-once). False keeps them; it never raises for an absent broker;
    - :attr:`backlogged` is True while the held records fill ``buffer_bytes``: the pipeline then reads nothing more
      and calls :meth:`flush` until it clears (back-pressure). With ``drop_when_full`` it stays False and records
      beyond the buffer are dropped instead, counted in ``dropped_total[(kind, "buffer_full")]``;
    - :attr:`degraded` says what is wrong and what to fix while records cannot be delivered (else None);
    - ``failed_total[kind]`` (failed attempts, each re-sent) and ``dropped_total[(kind, reason)]`` are monotone counts
      for ``harmonic_producer_failures_total`` / ``harmonic_producer_dropped_total``;
    - a producer that can never send again (:func:`~monitor.source.producer_renewal.fatal_error`: kafka-python's
      idempotent producer after its broker came back without its producer id) is replaced by a new one from
      ``new_producer`` at the next :meth:`flush` (then with a doubling backoff, :class:`Renewal`), and every record it
      had not acknowledged is re-sent through the new one: none is lost, and one the broker took just before may come
      twice (at-least-once).

    Parameters
    ----------
    config : the broker, the topics' kinds, the buffer and the delivery bound (:class:`ProducerConfig`).
    client_id : as for :class:`~monitor.source.kafka.KafkaSource`.
    stall_seconds : records waiting this long with no acknowledgement at all: the broker is taken to be away.
    producer : a ready producer instead of a new one from ``new_producer`` (tests).
    new_producer : makes the producer, and each replacement of one in a fatal state (default: kafka-python's
        ``KafkaProducer`` from ``config``; none when only ``producer`` is given: it is then never replaced).
    clock : monotonic seconds (``time.monotonic``).

    Raises
    ------
    SourceError
        The producer could not be created (no broker answered at start-up, invalid settings).
    """

    def __init__(
        self,
        config: ProducerConfig,
        *,
        client_id: str = "harmonic-monitor",
        stall_seconds: float = STALL_SECONDS,
        producer: Producer | None = None,
        new_producer: Callable[[], Producer] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        c = config
        buffer_bytes, topic_kinds = c.buffer_bytes, c.topic_kinds
        if buffer_bytes < 1:
            raise ValueError(f"buffer_bytes must be >= 1; got {buffer_bytes!r}")
        if stall_seconds <= 0:
            raise ValueError(f"stall_seconds must be > 0; got {stall_seconds!r}")
        unknown = sorted(set(topic_kinds.values()) - set(TOPIC_KINDS))
        if unknown:
            raise ValueError(f"topic kinds must be among {TOPIC_KINDS}; got {unknown}")
        self.bootstrap_servers = redact_text(c.bootstrap_servers)
        self.topic_kinds = dict(topic_kinds)
        self.buffer_bytes = buffer_bytes
        self.drop_when_full = c.drop_when_full
        self.stall_seconds = stall_seconds
        self._clock = clock
        if new_producer is None and producer is None:
            new_producer = functools.partial(
                _new_producer, c.bootstrap_servers, c.api_version, c.security, client_id, c.delivery_timeout_ms
            )
        self._new_producer = new_producer
        if producer is None:
            assert new_producer is not None
            producer = new_producer()
        self._producer: Producer = producer
        self.renewal = Renewal(clock=clock)
        # record headers arrived with Kafka 0.11 (message format v2); kafka-python asserts on them before that
        version = tuple(self._producer.config.get("api_version") or (0, 11))
        self.headers_supported = version >= (0, 11)
        self._headers_warned = False
        self._log = RateLimitedLogger(log)
        self._cond = threading.Condition()
        #: topic → held records not in kafka-python now: queued behind a failed hand-over to that topic, or failed
        #: and due to be re-sent. Per topic: one topic without metadata (deleted, not yet created, not writable) must
        #: not hold back another topic's records, and order only matters within a topic.
        self._waiting: dict[str, deque[_Out]] = {}
        #: handed to the producer, outcome not known yet (a dict: in the order handed over)
        self._pending: dict[_Ticket, None] = {}
        self._held = 0  # waiting + in flight
        self._held_bytes = 0
        #: last acknowledgement, or when the sink last went from holding nothing to holding something
        self._progress_at = clock()
        #: kind → the latest failure, until a record of that kind is acknowledged again
        self._failing: dict[str, str] = {}
        self._reported = False  # a degraded state was logged: log the recovery too
        self._closing = False
        self.acknowledged_total = 0
        self.failed_total: dict[str, int] = dict.fromkeys(TOPIC_KINDS, 0)
        self.dropped_total: dict[tuple[str, str], int] = {(k, r): 0 for k in TOPIC_KINDS for r in DROP_REASONS}

    # -- what the pipeline calls -----------------------------------------------------------------------------
    def send(
        self, topic: str, value: bytes, headers: Sequence[tuple[str, bytes]] = (), key: bytes | None = None
    ) -> None:
        """Queue one record; never blocks on an absent broker beyond one ``max_block_ms`` and never raises for it."""
        if headers and not self.headers_supported:
            if not self._headers_warned:
                self._headers_warned = True
                log.warning(
                    "the broker predates Kafka 0.11 and cannot store record headers; they are dropped",
                    extra={"topic": topic, "headers": [k for k, _ in headers]},
                )
            headers = ()
        size = len(value) + len(key or b"") + sum(len(k) + len(v) for k, v in headers)
        out = _Out(topic, value, key, list(headers), self.topic_kinds.get(topic, TOPIC_KINDS[0]), size)
        full = queued = False
        with self._cond:
            if self.drop_when_full and self._held and self._held_bytes + size > self.buffer_bytes:
                self.dropped_total[(out.kind, "buffer_full")] += 1
                full = True
            else:
                self._hold(out)
                behind = self._waiting.get(topic)
                queued = bool(behind)
                if behind:  # behind this topic's records that could not be handed over: keep the order, do not block
                    behind.append(out)
        if full:
            self._log.warning(
                "dropped-" + out.kind,
                "producer buffer full; record dropped (kafka.producer_drop_when_full is true)",
                topic_kind=out.kind,
                buffer_bytes=self.buffer_bytes,
            )
        elif not queued and not self._hand_over(out):
            with self._cond:
                self._waiting.setdefault(topic, deque()).append(out)

    def flush(self, timeout_seconds: float) -> bool:
        """Re-send what failed, then wait (at most ``timeout_seconds``) until every record sent so far is acknowledged.

        Returns
        -------
        bool
            True when everything is acknowledged (the pipeline may commit). False otherwise: the records are kept
            and re-sent at the next flush. While the broker does not acknowledge anything (``stall_seconds``), a flush
            gives up after about ``RETRY_WAIT_SECONDS`` rather than the whole timeout, so the loop keeps turning.
        """
        start = self._clock()
        deadline = start + timeout_seconds
        self._renew_if_fatal()
        self._resend()
        with self._cond:
            while self._held:
                now = self._clock()
                if now >= deadline:
                    break
                stalled = not self._pending or now - self._progress_at >= self.stall_seconds
                if stalled and now - start >= RETRY_WAIT_SECONDS:
                    break
                # wake when the answer may change: an outcome (notify), the stall, the retry wait, the deadline
                until = start + RETRY_WAIT_SECONDS if stalled else self._progress_at + self.stall_seconds
                self._cond.wait(max(0.0, min(until, deadline) - now))
            delivered = self._held == 0
        if not delivered:
            problem = self.degraded
            if problem is not None:
                self._reported = True
                self._log.warning("degraded", "producer cannot deliver; records kept for re-sending", problem=problem)
        return delivered

    @property
    def backlogged(self) -> bool:
        """True while held records fill the buffer: read nothing more until :meth:`flush` has delivered them."""
        with self._cond:
            return not self.drop_when_full and self._held_bytes >= self.buffer_bytes

    @property
    def held(self) -> int:
        """Records not acknowledged yet (in kafka-python or waiting to be re-sent)."""
        return self._held

    @property
    def degraded(self) -> str | None:
        """None while records are delivered; else one line: what is wrong and what to fix."""
        with self._cond:
            now = self._clock()
            problems = [f"{kind} records fail ({error})" for kind, error in sorted(self._failing.items())]
            silent = now - self._progress_at
            if self._held and silent >= self.stall_seconds:
                problems.append(f"no acknowledgement for {silent:.0f} s")
            if not problems:
                return None
            held, held_bytes, paused = self._held, self._held_bytes, self._held_bytes >= self.buffer_bytes
        if paused:
            effect = "dropping new ones" if self.drop_when_full else "reading paused until they are delivered"
        else:
            effect = f"{self.buffer_bytes - held_bytes} bytes of buffer left"
        topics = ", ".join(sorted(self.topic_kinds)) or "the output topics"
        return (
            f"Kafka producer at '{self.bootstrap_servers}': {'; '.join(problems)}; {held} records kept for re-sending "
            f"({effect}). Check that the brokers are up and that the topics ({topics}) exist and accept writes from "
            "this client."
        )

    def close(self, timeout_seconds: float = 5.0) -> None:
        """Close the producer: bounded, and at once when records are still unacknowledged (the broker is away)."""
        self._closing = True
        held = self._held
        if held:
            log.warning(
                "closing the producer with records not acknowledged; the events they came from were not committed "
                "and are read again at the next start",
                extra={"records": held},
            )
        _close_producer(self._producer, 0.0 if held else timeout_seconds)

    # -- internals -------------------------------------------------------------------------------------------
    def _hold(self, out: _Out) -> None:
        if not self._held:
            self._progress_at = self._clock()
        self._held += 1
        self._held_bytes += out.size

    def _release(self, out: _Out) -> None:
        self._held -= 1
        self._held_bytes -= out.size

    def _renew_if_fatal(self) -> None:
        """Replace a producer that can never send again (:func:`fatal_error`) when :attr:`renewal` allows; the
        records it had not acknowledged wait to be re-sent through the new one."""
        error = fatal_error(self._producer)
        if error is None or self._new_producer is None or not self.renewal.due():
            return
        message = _error_text(error)
        try:
            fresh = self._new_producer()
        except SourceError as exc:
            self.renewal.attempted()
            log.warning(
                "Kafka producer in a fatal state; a new one could not be made, tried again later",
                extra={"error": message, "cause": str(exc), "retry_in_seconds": round(self.renewal.wait_seconds, 1)},
            )
            return
        with self._cond:
            old, self._producer = self._producer, fresh
            stale, self._pending = self._pending, {}
            for ticket in reversed(stale):  # ahead of the topic's waiting records: they were handed over first
                self._waiting.setdefault(ticket.out.topic, deque()).appendleft(ticket.out)
            self._cond.notify_all()
        self.renewal.renewed()
        log.warning(
            "Kafka producer replaced: it was in a fatal state and could send nothing more; the records it had not "
            "acknowledged are sent again through the new one (one may arrive twice)",
            extra={"error": message, "resent": len(stale), "held": self._held, "replacements": self.renewal.total},
        )
        _close_producer(old, 0.0)

    def _hand_over(self, out: _Out) -> bool:
        """Give ``out`` to the producer; False (counted, logged) when it cannot take it now."""
        from kafka.errors import KafkaError

        with self._cond:
            ticket = _Ticket(out)
            self._pending[ticket] = None  # before the callbacks: they may run at once
            producer = self._producer
        try:
            future = producer.send(out.topic, value=out.value, key=out.key, headers=out.headers)
        except KafkaError as exc:  # e.g. no metadata for the topic within max_block_ms: the broker is away
            with self._cond:
                if ticket not in self._pending:  # its producer was replaced meanwhile: already waiting again
                    return True
                del self._pending[ticket]
                if _too_large(exc):
                    self._release(out)
                    self.dropped_total[(out.kind, "too_large")] += 1
            if _too_large(exc):
                self._log_drop(out, exc)
                return True
            self._failed(out, exc)
            return False
        future.add_callback(self._on_ack, ticket)
        future.add_errback(self._on_error, ticket)
        return True

    def _resend(self) -> None:
        """Hand each topic's waiting records over in order, up to the first that kafka-python cannot take now."""
        with self._cond:
            topics = list(self._waiting)
        for topic in topics:
            while True:
                with self._cond:
                    waiting = self._waiting.get(topic)
                    if not waiting:
                        self._waiting.pop(topic, None)
                        break
                    out = waiting.popleft()
                if not self._hand_over(out):
                    with self._cond:
                        self._waiting.setdefault(topic, deque()).appendleft(out)
                    break

    def _on_ack(self, ticket: _Ticket, _metadata: object) -> None:
        """The producer's I/O thread: the broker acknowledged ``ticket``'s record."""
        out = ticket.out
        with self._cond:
            if ticket not in self._pending:  # its producer was replaced: the record was handed over again
                return
            del self._pending[ticket]
            self._release(out)
            self.acknowledged_total += 1
            self._progress_at = self._clock()
            self._failing.pop(out.kind, None)
            recovered = self._reported and not self._failing and not self._closing
            if recovered:
                self._reported = False
            self._cond.notify_all()
        self.renewal.delivered()
        if recovered:
            log.info("Kafka producer delivering again", extra={"held": self._held})

    def _on_error(self, ticket: _Ticket, error: BaseException) -> None:
        """The producer's I/O thread: ``ticket``'s record failed (retries and delivery timeout spent, a refusal)."""
        out = ticket.out
        with self._cond:
            if ticket not in self._pending:  # its producer was replaced: the record was handed over again
                return
            del self._pending[ticket]
            if _too_large(error):
                self._release(out)
                self.dropped_total[(out.kind, "too_large")] += 1
            elif self._closing:  # aborted by close(): its event was not committed and is read again
                self._release(out)
            else:
                self._waiting.setdefault(out.topic, deque()).append(out)
            self._cond.notify_all()
        if self._closing:
            return
        if _too_large(error):
            self._log_drop(out, error)
        else:
            self._failed(out, error)

    def _failed(self, out: _Out, error: BaseException) -> None:
        message = _error_text(error)
        with self._cond:
            self.failed_total[out.kind] += 1
            self._failing[out.kind] = message
            self._reported = True
            held = self._held
        self._log.warning(
            "failed-" + out.kind,
            "producer could not deliver a record; it is kept and re-sent",
            topic_kind=out.kind,
            topic=out.topic,
            error=message,
            held=held,
        )

    def _log_drop(self, out: _Out, error: BaseException) -> None:
        self._log.warning(
            "too-large-" + out.kind,
            "record too large for the broker or max_request_size; dropped",
            topic_kind=out.kind,
            topic=out.topic,
            bytes=out.size,
            error=redact_text(str(error)),
        )


def _error_text(error: BaseException) -> str:
    """``error`` in a log line: its class name first (kafka-python's errors start with it; others may not)."""
    text = str(error)
    return redact_text(text if text.startswith(type(error).__name__) else f"{type(error).__name__}: {text}")


def _close_producer(producer: Producer, timeout_seconds: float) -> None:
    """Close ``producer`` within about ``timeout_seconds`` (0: abort what it holds at once); never raises."""
    from kafka.errors import KafkaTimeoutError

    try:
        try:
            producer.close(timeout=timeout_seconds)
        except KafkaTimeoutError:
            # kafka-python's close flushes first and raises while batches are incomplete (and would again at
            # exit): abort them through its sender thread, then close for real
            sender = getattr(producer, "_sender", None)
            if sender is not None:
                sender.force_close()
                sender.join(timeout_seconds)
            producer.close(timeout=0.0)
    except Exception:  # noqa: BLE001 - closing must not mask the real shutdown path
        log.exception("error while closing the Kafka producer")


def _too_large(error: BaseException) -> bool:
    """A record the broker (or ``max_request_size``) will never take: re-sending it would stall the sink forever."""
    from kafka.errors import MessageSizeTooLargeError, RecordListTooLargeError

    return isinstance(error, MessageSizeTooLargeError | RecordListTooLargeError)


def _new_producer(
    bootstrap_servers: str,
    api_version: tuple[int, ...] | None,
    security: Mapping[str, Any],
    client_id: str,
    delivery_timeout_ms: int,
) -> Producer:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    # its connection lines are held back as the consumer's are: the sink's own lines say what fails (degraded)
    install_client_noise_filter()
    kw = client_settings(bootstrap_servers, api_version, security)
    try:
        producer: Producer = KafkaProducer(
            client_id=client_id,
            acks="all",
            linger_ms=PRODUCER_LINGER_MS,
            max_request_size=4 << 20,
            max_block_ms=PRODUCER_MAX_BLOCK_MS,
            delivery_timeout_ms=delivery_timeout_ms,
            # kafka-python refuses delivery_timeout_ms < linger_ms + request_timeout_ms
            request_timeout_ms=min(30_000, delivery_timeout_ms - PRODUCER_LINGER_MS),
            **kw,
        )
    except KafkaError as exc:
        where = redact_text(bootstrap_servers)
        hint = "" if api_version is not None else f"; {OLD_BROKER_HINT}"
        raise SourceError(f"cannot connect a producer to Kafka at '{where}': {redact_text(repr(exc))}{hint}") from exc
    except ValueError as exc:
        raise SourceError(f"invalid Kafka producer settings: {redact_text(str(exc))}") from exc
    return producer
