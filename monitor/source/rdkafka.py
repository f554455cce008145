"""Stage 1 on librdkafka (confluent-kafka): ``RdKafkaSource`` and ``RdKafkaSink``, chosen by ``kafka.client``.

The same contracts as the kafka-python classes in :mod:`monitor.source.kafka`:

- the consumer never commits on its own (``enable.auto.commit`` and ``enable.auto.offset.store`` off): the pipeline
  commits exactly the positions it has checkpointed, synchronously, after the state is saved (at-least-once);
- rebalance callbacks run on the thread that calls :meth:`RdKafkaSource.poll` (librdkafka serves them inside
  ``consume``): before partitions are given up the handler applies, checkpoints and commits them;
- record values stay the raw bytes (a dead letter is the record as it arrived);
- the sink is :class:`~monitor.source.kafka.KafkaSink` itself (the hold / re-send / back-pressure logic) over a
  librdkafka producer: :class:`RdProducer` adapts it to the kafka-python producer interface the sink uses.

Settings are translated by :func:`consumer_conf` / :func:`producer_conf`: ``security`` takes kafka-python's names
(``security_protocol``, ``ssl_cafile``, ``sasl_plain_username`` …) or librdkafka's own dotted names. A configured
``api_version`` below 0.10 (a broker without ApiVersion requests, e.g. Kafka 0.9) turns version probing off and names
the broker version: ``api.version.request=false``, ``broker.version.fallback=0.9.0.1``.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from monitor.errors import SourceError
from monitor.logs import RateLimitedLogger, redact_text
from monitor.source.base import Headers, Lagging, Positions, RebalanceHandler, SideReading
from monitor.source.kafka import ColumnSource, PartitionBatch
from monitor.source.kafka_config import (
    CLOSE_TIMEOUT_MS,
    FETCH_MAX_WAIT_MS,
    MAX_PARTITION_FETCH_BYTES,
    PRODUCER_LINGER_MS,
    ConsumerConfig,
)
from monitor.source.kafka_outage import BrokerOutage, ClientNoise
from monitor.source.side_read import SideReader

log = logging.getLogger(__name__)
#: where librdkafka's own log lines go (served by consume/poll on the caller's thread)
client_log = logging.getLogger(__name__ + ".librdkafka")
#: librdkafka's lines about connections, held back (it writes one per attempt: ~20 ERROR lines a second while a
#: broker refuses connections); the consumer's outage line says how many (:class:`~monitor.source.kafka.BrokerOutage`)
CLIENT_NOISE = ClientNoise(
    (
        "Connection refused",
        "Connect to ",
        "Disconnected",
        "Connection reset",
        "connection reset",
        "Failed to resolve",
        "brokers are down",
        "Receive failed",
        "Send failed",
        "Timed out",
    )
)
client_log.addFilter(CLIENT_NOISE)
#: librdkafka's errors (``error_cb``) that say the cluster is not reached: the consumer's broker is away. One
#: connection failing (``_TRANSPORT``) is not: another broker may answer; it only updates the reason of an outage
UNREACHABLE_ERRORS = frozenset({"_ALL_BROKERS_DOWN", "_RESOLVE"})
#: how often librdkafka reports its brokers' connection states (``stats_cb``): how a consumer sees its broker back
STATS_INTERVAL_MS = 1000
#: how often librdkafka refreshes topic metadata (its default: 5 minutes). A consumer joins its group only with the
#: subscribed topics' metadata; when the metadata request made for the join fails (a broker that has just started:
#: Kafka 0.9's first answers), the join waits for the next periodic refresh. At the default a consumer started while
#: its broker was away stayed out of its group for a test's 60 s (3 of 4 runs on Kafka 0.9, ``debug=cgrp``:
#: "postponing join until up-to-date metadata is available"); with this bound it joined in 7 of 7.
METADATA_REFRESH_MS = 10_000
#: how long librdkafka waits before fetching a partition again once its local queue holds ``queued.min.messages``
#: (100,000) or ``queued.max.messages.kbytes``: its default, 1,000 ms, left a consumer that decodes each record
#: (~3 µs) idle most of a drain: the queue, read in ~0.4 s, refilled only after the second had passed
FETCH_QUEUE_BACKOFF_MS = 10

#: kafka-python security setting → librdkafka property (values pass unchanged but ``ssl_check_hostname``)
SECURITY_NAMES = {
    "security_protocol": "security.protocol",
    "ssl_cafile": "ssl.ca.location",
    "ssl_certfile": "ssl.certificate.location",
    "ssl_keyfile": "ssl.key.location",
    "ssl_password": "ssl.key.password",
    "ssl_crlfile": "ssl.crl.location",
    "ssl_ciphers": "ssl.cipher.suites",
    "ssl_check_hostname": "ssl.endpoint.identification.algorithm",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_plain_username": "sasl.username",
    "sasl_plain_password": "sasl.password",
    "sasl_kerberos_service_name": "sasl.kerberos.service.name",
}
#: the broker version librdkafka assumes for a broker that cannot answer ApiVersion requests (before 0.10)
KAFKA_09_FALLBACK = "0.9.0.1"


def _version_conf(api_version: tuple[int, ...] | None) -> dict[str, Any]:
    """Broker-version properties: none when probing works (unset, or 0.10 and later).

    >>> _version_conf((0, 9))
    {'api.version.request': False, 'broker.version.fallback': '0.9.0.1'}
    >>> _version_conf((0, 8, 2))
    {'api.version.request': False, 'broker.version.fallback': '0.8.2'}
    >>> _version_conf((2, 8))
    {}
    """
    if api_version is None or api_version >= (0, 10):
        return {}
    fallback = KAFKA_09_FALLBACK if api_version[:2] == (0, 9) else ".".join(str(p) for p in api_version)
    return {"api.version.request": False, "broker.version.fallback": fallback}


def security_conf(security: Mapping[str, Any]) -> dict[str, Any]:
    """librdkafka properties for the ``kafka.security`` settings (kafka-python or librdkafka names).

    >>> security_conf({"security_protocol": "SASL_SSL", "sasl_plain_username": "u", "ssl.ca.location": "/ca.pem"})
    {'security.protocol': 'SASL_SSL', 'sasl.username': 'u', 'ssl.ca.location': '/ca.pem'}
    >>> security_conf({"ssl_check_hostname": False})
    {'ssl.endpoint.identification.algorithm': 'none'}
    """
    out: dict[str, Any] = {}
    for key, value in security.items():
        if "." in key:  # librdkafka's own name
            out[key] = value
            continue
        name = SECURITY_NAMES.get(key)
        if name is None:
            raise SourceError(
                f"kafka.security.{key} has no librdkafka equivalent here (known: {', '.join(sorted(SECURITY_NAMES))}); "
                "write the librdkafka property itself instead (a dotted name such as 'ssl.key.location'), or use "
                "kafka.client: kafka-python"
            )
        if key == "ssl_check_hostname":
            value = "https" if value else "none"
        out[name] = value
    return out


def _common(
    bootstrap_servers: str, api_version: tuple[int, ...] | None, security: Mapping[str, Any], client_id: str
) -> dict[str, Any]:
    servers = ",".join(s.strip() for s in bootstrap_servers.split(",") if s.strip())
    return {
        "bootstrap.servers": servers,
        "client.id": client_id,
        **_version_conf(api_version),
        **security_conf(security),
    }


def consumer_conf(
    bootstrap_servers: str,
    group_id: str,
    *,
    api_version: tuple[int, ...] | None = None,
    security: Mapping[str, Any] | None = None,
    auto_offset_reset: str,
    session_timeout_ms: int,
    fetch_max_wait_ms: int = FETCH_MAX_WAIT_MS,
    max_partition_fetch_bytes: int = MAX_PARTITION_FETCH_BYTES,
    client_id: str = "harmonic-monitor",
) -> dict[str, Any]:
    """The librdkafka consumer configuration for the ``kafka`` settings (commits only by the pipeline).

    >>> conf = consumer_conf(
    ...     "b1:9092, b2:9092", "g", api_version=(0, 9), auto_offset_reset="earliest", session_timeout_ms=10000
    ... )
    >>> conf["bootstrap.servers"], conf["enable.auto.commit"], conf["broker.version.fallback"]
    ('b1:9092,b2:9092', False, '0.9.0.1')
    """
    return {
        **_common(bootstrap_servers, api_version, security or {}, client_id),
        "group.id": group_id,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": auto_offset_reset,
        "session.timeout.ms": session_timeout_ms,
        "heartbeat.interval.ms": max(300, session_timeout_ms // 3),
        "topic.metadata.refresh.interval.ms": METADATA_REFRESH_MS,
        "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
        "fetch.wait.max.ms": fetch_max_wait_ms,
        "max.partition.fetch.bytes": max_partition_fetch_bytes,
    }


def producer_conf(
    bootstrap_servers: str,
    *,
    api_version: tuple[int, ...] | None = None,
    security: Mapping[str, Any] | None = None,
    client_id: str = "harmonic-monitor",
    delivery_timeout_ms: int = 120_000,
) -> dict[str, Any]:
    """The librdkafka producer configuration (acks=all, the same linger and record size as kafka-python's).

    >>> conf = producer_conf("b:9092", delivery_timeout_ms=5000)
    >>> conf["acks"], conf["message.timeout.ms"], "api.version.request" in conf
    ('all', 5000, False)
    """
    return {
        **_common(bootstrap_servers, api_version, security or {}, client_id),
        "acks": "all",
        "linger.ms": PRODUCER_LINGER_MS,
        "message.max.bytes": 4 << 20,
        "message.timeout.ms": delivery_timeout_ms,
    }


def _consumer_error(where: str, exc: BaseException) -> SourceError:
    return SourceError(
        f"cannot create a librdkafka client for Kafka at '{redact_text(where)}': {redact_text(str(exc))}"
    )


class RdKafkaSource(ColumnSource, SideReading, Lagging):
    """Consume topics in a consumer group with librdkafka.

    Parameters are :class:`~monitor.source.kafka.KafkaSource`'s (``max_poll_records`` caps one ``consume``;
    ``lean_record_parse`` does not apply).
    """

    def __init__(
        self,
        config: ConsumerConfig,
        *,
        rebalance: RebalanceHandler | None = None,
        client_id: str = "harmonic-monitor",
    ) -> None:
        from confluent_kafka import Consumer, KafkaException

        c = config
        bootstrap_servers = c.bootstrap_servers
        self._member_of(c.topics, rebalance)
        self.max_poll_records = c.max_poll_records
        self._log = RateLimitedLogger(log)
        conf = consumer_conf(
            bootstrap_servers,
            c.group_id,
            api_version=c.api_version,
            security=c.security,
            auto_offset_reset=c.auto_offset_reset,
            session_timeout_ms=c.session_timeout_ms,
            fetch_max_wait_ms=c.fetch_max_wait_ms,
            max_partition_fetch_bytes=c.max_partition_fetch_bytes,
            client_id=client_id,
        )
        conf["error_cb"] = self._on_client_error
        conf["logger"] = client_log  # librdkafka's own lines in the sidecar's log format, not raw on stderr
        conf["stats_cb"] = self._on_stats
        conf["statistics.interval.ms"] = STATS_INTERVAL_MS
        conf["on_commit"] = self._on_commit
        #: the offsets of the last commit asked for (committed synchronously at close), and whether a revoke is
        #: under way (its commits are synchronous)
        self._last_offsets: list[Any] = []
        self._revoking = False
        self.bootstrap_servers = bootstrap_servers
        self._outage = BrokerOutage(bootstrap_servers, CLIENT_NOISE)
        try:
            self._consumer = Consumer(conf)
        except (KafkaException, ValueError, TypeError) as exc:
            raise _consumer_error(bootstrap_servers, exc) from exc
        self._consumer.subscribe(
            self.topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )
        #: reads records at given offsets beside the group consumer, which is not sought
        #: (:class:`~monitor.source.side_read.SideReader`: kafka-python, in no group)
        self.side_reader = SideReader(config)

    # -- librdkafka's callbacks (served inside consume(), on the polling thread) --------------------------------
    def _on_assign(self, _consumer: Any, partitions: list[Any]) -> None:
        self._note_assigned([(tp.topic, tp.partition) for tp in partitions], log)

    def _on_revoke(self, _consumer: Any, partitions: list[Any]) -> None:
        # the handler (the pipeline) applies, checkpoints and commits these partitions before they go
        self._revoking = True
        try:
            self._note_revoked([(tp.topic, tp.partition) for tp in partitions], log)
        finally:
            self._revoking = False

    def _on_lost(self, _consumer: Any, partitions: list[Any]) -> None:
        # lost (the session expired, e.g. a broker away): another member may own them already, so nothing is
        # committed for them; the handler still applies and checkpoints what it read of them, and holds on to
        # where it got, so that a re-delivery to this member skips what it applied (as after a revoke)
        parts = [(tp.topic, tp.partition) for tp in partitions]
        self._assigned.difference_update(parts)
        log.warning(
            "partitions lost; events not committed are read again, and skipped where applied here",
            extra={"partitions": sorted(parts)},
        )
        if self._handler is not None and parts:
            self._handler.before_revoke(parts)

    def _on_client_error(self, error: Any) -> None:
        name = str(error.name())
        if name in UNREACHABLE_ERRORS or (name == "_TRANSPORT" and self._outage.since is not None):
            self._outage.away(str(error))
            return
        self._log.warning("client-" + name, "Kafka client error", error=redact_text(str(error)))

    def _on_stats(self, stats: str) -> None:
        """The broker is back once librdkafka has a connection to a real broker up (the group coordinator is a
        logical one)."""
        if self._outage.since is None:
            return
        try:
            brokers = json.loads(stats).get("brokers", {})
        except (ValueError, AttributeError):
            return
        if any(b.get("state") == "UP" for b in brokers.values() if b.get("source") != "logical"):
            self._outage.back()

    # -- Source --------------------------------------------------------------------------------------------------
    def poll_columns(self, timeout_seconds: float, max_records: int) -> list[PartitionBatch]:
        """Up to ``max_records`` messages, as one column batch per partition (in fetch order).

        librdkafka's batch ``consume`` waits until it has all ``num_messages`` or the timeout ran out, so on a topic
        slower than a poll's worth per timeout every poll would sit out the whole timeout. It first takes what is
        queued without waiting; only when nothing is, it waits for one record and then takes what came with it."""
        limit = max(1, max_records)
        messages: list[Any] = self._consumer.consume(num_messages=limit, timeout=0)
        if not messages and timeout_seconds > 0:
            messages = self._consumer.consume(num_messages=1, timeout=timeout_seconds)
            if messages and limit > 1:
                messages += self._consumer.consume(num_messages=limit - 1, timeout=0)
        if messages and self._outage.since is not None:
            self._outage.back()
        if not messages:
            return []
        errors = [m for m in messages if m.error() is not None]
        for m in errors:
            error = m.error()
            self._log.warning("consume-" + str(error.name()), "Kafka consume error", error=redact_text(str(error)))
        if errors:
            messages = [m for m in messages if m.error() is None]
        return [(topic, partition, *_columns_of(ms)) for (topic, partition), ms in _runs(messages).items()]

    def highwaters(self) -> dict[tuple[str, int], int]:
        """Log-end offsets of the assigned partitions as librdkafka's last fetches reported them (its cached
        watermarks: no request; a partition not fetched yet is missing): the consumer lag is these minus the
        positions read."""
        out: dict[tuple[str, int], int] = {}
        try:
            for tp in self._consumer.assignment():
                _low, high = self._consumer.get_watermark_offsets(tp, cached=True)
                if high is not None and high >= 0:
                    out[(tp.topic, tp.partition)] = int(high)
        except Exception:  # noqa: BLE001 - a rebalance under way: no lag this step
            return {}
        return out

    def commit(self, positions: Positions) -> None:
        """Commit exactly ``positions`` (of partitions still assigned); a refusal is logged (the events since the
        last commit are re-delivered: at-least-once).

        librdkafka's synchronous commit waits for as long as the group coordinator is away (it was seen to wait
        minutes, holding the loop). So a commit is synchronous only while partitions are being revoked (it must land
        before they go) and at :meth:`close`; otherwise it is sent asynchronously (its outcome comes with a later
        poll) and, while the broker is away, not sent: the next checkpoint commits the positions reached by then."""
        from confluent_kafka import TopicPartition

        owned = self._owned(positions)
        if not owned:
            return
        offsets = [TopicPartition(t, p, off) for (t, p), off in sorted(owned.items())]
        self._last_offsets = offsets
        if self._revoking:
            self._commit(offsets, wait=True)
        elif self._outage.since is not None:
            self._log.warning("commit-away", "offset commit not sent: the broker is away; sent at the next checkpoint")
        else:
            self._commit(offsets, wait=False)

    def _commit(self, offsets: list[Any], *, wait: bool) -> None:
        """Send the commit; with ``wait``, until librdkafka answers (its outcome logged here, else by
        :meth:`_on_commit` from a later poll)."""
        from confluent_kafka import KafkaException

        try:
            if wait:
                self._on_commit(None, self._consumer.commit(offsets=offsets, asynchronous=False) or [])
            else:
                self._consumer.commit(offsets=offsets, asynchronous=True)
        except KafkaException as exc:
            log.warning("offset commit failed; events will be re-delivered", extra={"error": redact_text(str(exc))})

    def _on_commit(self, error: Any, partitions: list[Any]) -> None:
        """An asynchronous commit's outcome (librdkafka's ``on_commit``, served inside ``consume``)."""
        failed = [f"{tp.topic}[{tp.partition}]: {tp.error}" for tp in partitions or () if tp.error is not None]
        if error is not None:
            failed.insert(0, redact_text(str(error)))
        if failed:
            log.warning("offset commit failed; events will be re-delivered", extra={"error": "; ".join(failed)})

    def close(self) -> None:
        self.side_reader.close()
        if self._last_offsets and self._outage.since is None:
            self._commit(self._last_offsets, wait=True)  # the last checkpoint's positions, durable before the close
        try:
            self._consumer.close()
        except Exception:  # noqa: BLE001 - closing must not mask the real shutdown path
            log.exception("error while closing the Kafka consumer")


# ------------------------------------------------------------------------------------------------- the producer


class _Delivery:
    """What :meth:`RdProducer.send` returns: the kafka-python future's callback interface, resolved by librdkafka's
    delivery report (on the producer's poll thread). The report may come before the callbacks are added (the poll
    thread can serve it as soon as ``produce`` returns): a callback added after the outcome runs at once, as
    kafka-python's future does."""

    __slots__ = ("_callbacks", "_errbacks", "_lock", "_outcome")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._callbacks: list[tuple[Callable[..., object], tuple[object, ...]]] = []
        self._errbacks: list[tuple[Callable[..., object], tuple[object, ...]]] = []
        #: (delivered, message or exception) once the report came
        self._outcome: tuple[bool, object] | None = None

    def add_callback(self, f: Callable[..., object], *args: object) -> object:
        return self._add(True, f, args)

    def add_errback(self, f: Callable[..., object], *args: object) -> object:
        return self._add(False, f, args)

    def _add(self, on_success: bool, f: Callable[..., object], args: tuple[object, ...]) -> object:
        with self._lock:
            outcome = self._outcome
            if outcome is None:
                (self._callbacks if on_success else self._errbacks).append((f, args))
                return self
        if outcome[0] == on_success:
            f(*args, outcome[1])
        return self

    def report(self, error: Any, message: Any) -> None:
        delivered = error is None
        value: object = message if delivered else _as_kafka_python_error(error)
        with self._lock:
            self._outcome = (delivered, value)
            due = self._callbacks if delivered else self._errbacks
            self._callbacks, self._errbacks = [], []
        for f, args in due:
            f(*args, value)


def _as_kafka_python_error(error: Any) -> BaseException:
    """A librdkafka ``KafkaError`` as the kafka-python exception the sink tells apart (too large: dropped; else
    kept and re-sent)."""
    from confluent_kafka import KafkaError
    from kafka import errors

    text = f"{error.name()}: {error.str()}"
    cls: type[BaseException] = errors.KafkaError
    if error.code() == KafkaError.MSG_SIZE_TOO_LARGE:
        cls = errors.MessageSizeTooLargeError
    return cls(text)


class RdProducer:
    """A librdkafka producer behind the kafka-python producer interface :class:`~monitor.source.kafka.KafkaSink`
    uses (``config``, ``send`` → future with callbacks, ``close``). A thread serves delivery reports.

    ``fatal_error`` is librdkafka's fatal error once it reported one (an idempotent producer's unrecoverable state;
    none otherwise): the producer sends nothing more, and the sink replaces it.
    """

    def __init__(self, conf: Mapping[str, Any], api_version: tuple[int, ...] | None) -> None:
        from confluent_kafka import KafkaException, Producer

        self.config: dict[str, Any] = {"api_version": api_version}
        self.fatal_error: BaseException | None = None
        self._log = RateLimitedLogger(log)
        try:
            self._producer = Producer({**conf, "error_cb": self._on_client_error, "logger": client_log})
        except (KafkaException, ValueError, TypeError) as exc:
            raise SourceError(
                f"cannot create a librdkafka producer for '{redact_text(str(conf.get('bootstrap.servers')))}': "
                f"{redact_text(str(exc))}"
            ) from exc
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="rdkafka-producer", daemon=True)
        self._thread.start()

    def _on_client_error(self, error: Any) -> None:
        if error.fatal():
            self.fatal_error = _as_kafka_python_error(error)
        self._log.warning("producer-" + str(error.name()), "Kafka producer error", error=redact_text(str(error)))

    def _serve(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(0.1)

    def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> _Delivery:
        from confluent_kafka import KafkaError, KafkaException
        from kafka import errors

        delivery = _Delivery()
        try:
            self._producer.produce(
                topic, value=value, key=key, headers=list(headers or ()) or None, on_delivery=delivery.report
            )
        except BufferError as exc:  # librdkafka's queue is full: the sink keeps the record and hands it over later
            raise errors.KafkaTimeoutError(f"librdkafka queue full: {exc}") from exc
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError.MSG_SIZE_TOO_LARGE:
                raise errors.MessageSizeTooLargeError(str(error)) from exc
            raise errors.KafkaError(str(exc)) from exc
        return delivery

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is queued within ``timeout`` seconds (0: purge it at once), then stop."""
        wait = CLOSE_TIMEOUT_MS / 1000 if timeout is None else timeout
        if wait > 0:
            self._producer.flush(wait)
        if len(self._producer):
            self._producer.purge()
            self._producer.flush(0)
        self._stop.set()
        self._thread.join(wait + 1.0)


def new_rd_producer(
    bootstrap_servers: str,
    api_version: tuple[int, ...] | None,
    security: Mapping[str, Any],
    client_id: str,
    delivery_timeout_ms: int,
) -> RdProducer:
    conf = producer_conf(
        bootstrap_servers,
        api_version=api_version,
        security=security,
        client_id=client_id,
        delivery_timeout_ms=delivery_timeout_ms,
    )
    return RdProducer(conf, api_version)


__all__ = ["RdKafkaSource", "RdProducer", "consumer_conf", "new_rd_producer", "producer_conf"]


def _runs(messages: list[Any]) -> dict[tuple[str, int], list[Any]]:
    """(topic, partition) → its messages, in fetch order. librdkafka hands them over in runs per partition: with one
    topic the runs are found where the partition number changes, over an array (no Python step per message); none
    for no messages (a poll of errors only)."""
    if not messages:
        return {}
    cls = type(messages[0])
    topics: list[str] = list(map(cls.topic, messages))
    partitions: list[int] = list(map(cls.partition, messages))
    runs: dict[tuple[str, int], list[Any]] = {}
    if topics.count(topics[0]) != len(topics):
        for key, run in itertools.groupby(zip(topics, partitions, messages, strict=True), lambda m: m[:2]):
            runs.setdefault(key, []).extend(m[2] for m in run)
        return runs
    numbers = np.fromiter(partitions, np.int64, len(partitions))
    cuts = [0, *(np.flatnonzero(numbers[1:] != numbers[:-1]) + 1).tolist(), len(messages)]
    for start, end in itertools.pairwise(cuts):
        runs.setdefault((topics[0], partitions[start]), []).extend(messages[start:end])
    return runs


def _columns_of(messages: list[Any]) -> tuple[list[bytes], list[Headers] | None, list[int], list[int | None]]:
    """One partition's messages as a :data:`~monitor.source.kafka.PartitionBatch`'s values, headers (None when no
    record has any), offsets and timestamps (None where the broker has none: before 0.10): the message class's
    methods mapped over the messages, a column at a time, rather than a loop of appends per message."""
    cls = type(messages[0])
    values = list(map(cls.value, messages))
    if None in values:
        values = [b"" if v is None else v for v in values]
    raw_headers = list(map(cls.headers, messages))
    headers: list[Headers] | None = None
    if any(raw_headers):
        headers = [tuple((k, b"" if v is None else v) for k, v in h) if h else () for h in raw_headers]
    stamps = [ts if kind != 0 else None for kind, ts in map(cls.timestamp, messages)]  # 0: not available
    return values, headers, list(map(cls.offset, messages)), stamps
