"""Stage 1: ``KafkaSource`` (a kafka-python consumer in a consumer group) and ``KafkaSink`` (producer).

Offsets are committed by the pipeline, only after a batch's results are applied (at-least-once); partitions
rebalance across replicas of the same ``group_id``. The sink holds every dead letter and score until the broker
acknowledges it and sends it again while the broker is away: its ``flush`` says whether all are acknowledged, which
is what lets the pipeline commit. Security settings (SSL/SASL) are passed through untouched; ``api_version`` is only
set when configured (never hard-coded), so modern brokers negotiate. Errors and log lines never show a secret.
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from monitor.errors import SourceError
from monitor.logs import RateLimitedLogger, redact_text
from monitor.source import records
from monitor.source.base import (
    Backlogging,
    Degradable,
    Headers,
    Lagging,
    PartitionOwner,
    Positions,
    ProducerCounts,
    RawRecord,
    RebalanceHandler,
    Seekable,
)
from monitor.source.kafka_client import new_consumer, timeout_kwargs
from monitor.source.producer_renewal import Renewal, fatal_error

if TYPE_CHECKING:  # monitor.config imports this module
    from monitor.config import KafkaSettings

#: fetch settings' defaults (``KafkaSettings`` documents them): the broker may hold a fetch 100 ms (kafka-python:
#: 500), 1 MiB per partition per fetch (kafka-python's)
FETCH_MAX_WAIT_MS = 100
MAX_PARTITION_FETCH_BYTES = 1 << 20
#: bound on one synchronous offset commit (ms); past it the commit is given up with a warning, and the events since
#: the last commit that landed are re-delivered (at-least-once). kafka-python's own default is request_timeout_ms
#: (30 s), or no bound at all in older releases.
COMMIT_TIMEOUT_MS = 10_000
#: bound on closing the consumer (leaving the group, closing connections), in ms
CLOSE_TIMEOUT_MS = 5_000
#: producer settings' defaults (``KafkaSettings`` documents them): bytes of unacknowledged dead letters and scores
#: held before the pipeline is paused (or records dropped), and kafka-python's bound on one delivery attempt
PRODUCER_BUFFER_BYTES = 32 << 20
PRODUCER_DELIVERY_TIMEOUT_MS = 120_000
#: how long the producer waits to fill a batch; and how long one ``send`` may block waiting for a topic's
#: metadata (kafka-python's max_block_ms, 60 s by default): past it the record waits and is handed over again later
PRODUCER_LINGER_MS = 20
PRODUCER_MAX_BLOCK_MS = 5_000
#: records held this long with no acknowledgement at all: the broker is taken to be away (``KafkaSink.degraded``)
STALL_SECONDS = 5.0
#: how long a flush that cannot deliver waits for progress before it hands the loop back (the loop's pace then)
RETRY_WAIT_SECONDS = 1.0
#: the consumer's bound on one attempt to reach the cluster (kafka-python's bootstrap_timeout_ms, 30 s by default):
#: a broker not there at start-up is waited for, attempt after attempt, with the metrics endpoint already up
BOOTSTRAP_TIMEOUT_MS = 5_000
#: how old the consumer's topic metadata may grow before it is asked again (kafka-python's metadata_max_age_ms,
#: 5 minutes by default): a topic's new partitions are seen, assigned, read and counted in the lag within about this
#: long (librdkafka's consumer: ``monitor.source.rdkafka.METADATA_REFRESH_MS``, the same)
METADATA_MAX_AGE_MS = 10_000
#: after a connection problem the client reported, the broker counts as away this long (``KafkaSource.degraded``)
AWAY_SECONDS = 10.0
#: at most one line of ours about an outage this often (kafka-python's own lines about it are held back)
OUTAGE_LOG_SECONDS = 30.0
#: a consumer whose broker answers but that has not (re-)joined its group for this long — and for
#: ``REJOIN_SESSIONS`` session timeouts — is closed and created afresh. A join legitimately waits for the other
#: members to rejoin, at most a session timeout each on Kafka 0.9 (a dead member's), so this is several times
#: that. A safety net: kafka-python 3.0.12 left a member that rejoined for changed metadata in ``<rebalancing>`` for
#: good (never ready again) until :func:`hold_rejoin`; another such cause would be met the same way.
REJOIN_MIN_SECONDS = 30.0
REJOIN_SESSIONS = 5
#: the ``topic_kind`` label values of the producer counters, and the ``reason`` values of its drops
TOPIC_KINDS = ("dead_letter", "scores")
DROP_REASONS = ("buffer_full", "too_large")
#: (topic, partition, values, headers per record or None when no record has any, offsets, timestamps in ms)
PartitionBatch = tuple[str, int, list[bytes], list[Headers] | None, list[int], list[int | None]]

#: ``RawRecord`` from a plain 7-tuple, in C: ``tuple.__new__`` with the NamedTuple class (no Python frame per record)
_new_record = functools.partial(tuple.__new__, RawRecord)


def columns_of(topic: str, partition: int, records: Sequence[Any]) -> PartitionBatch:
    """One partition's kafka-python ``ConsumerRecord``s as a column batch (what :meth:`KafkaSource.poll_columns`
    returns; absent values and header values become ``b""``, headers stay None when no record has any)."""
    values = [r.value if r.value is not None else b"" for r in records]
    headers: list[Headers] | None = None
    if any(r.headers for r in records):
        headers = [tuple((k, v if v is not None else b"") for k, v in (r.headers or ())) for r in records]
    return (topic, partition, values, headers, [r.offset for r in records], [r.timestamp for r in records])


def records_of(batch: PartitionBatch, decoded: Sequence[object] | None = None) -> Iterator[RawRecord]:
    """The records of one column batch, in order, each with its event decoded ahead (``decoded``: one per record,
    None where not) or none.

    Built by ``map``/``zip`` without a Python-level loop: 0.15–0.24 µs per record against 0.38–0.41 µs for the
    NamedTuple constructor called in a loop.
    """
    topic, partition, values, headers, offsets, timestamps = batch
    n = len(values)
    columns = zip(
        values,
        headers or itertools.repeat((), n),
        itertools.repeat(topic, n),
        itertools.repeat(partition, n),
        offsets,
        timestamps,
        decoded if decoded is not None else itertools.repeat(None, n),
        strict=True,
    )
    return map(_new_record, columns)


log = logging.getLogger(__name__)


def _common(bootstrap_servers: str, api_version: tuple[int, ...] | None, security: Mapping[str, Any]) -> dict[str, Any]:
    kw: dict[str, Any] = {"bootstrap_servers": [s.strip() for s in bootstrap_servers.split(",") if s.strip()]}
    if api_version is not None:
        kw["api_version"] = api_version
    kw.update(security)
    return kw


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    """What a Kafka consumer is told (:class:`KafkaSource`, :class:`~monitor.source.rdkafka.RdKafkaSource`, the child
    of :class:`~monitor.source.kafka_process.ProcessKafkaSource`): the ``kafka`` settings' consumer fields, built by
    :meth:`from_settings` (``KafkaSettings`` declares and documents each; plain data, so the child process needs
    no settings model).

    Attributes
    ----------
    bootstrap_servers : "host:port[,host:port]".
    topics : what to read: the events topic first, then the labels topic if any.
    group_id : the consumer group (replicas share the group and split partitions).
    api_version : e.g. (0, 9) for old brokers; None lets the client negotiate.
    security : extra client settings (security_protocol, ssl_*, sasl_*), passed through.
    auto_offset_reset, session_timeout_ms, max_poll_records : the group's start, session and records per poll.
    fetch_max_wait_ms, max_partition_fetch_bytes : the fetch settings.
    lean_record_parse : parse v2 record batches with :mod:`monitor.source.records` where the installed kafka-python
        was checked against it (else, or when False, kafka-python's own parse); librdkafka ignores it.
    """

    bootstrap_servers: str
    topics: tuple[str, ...]
    group_id: str
    api_version: tuple[int, ...] | None
    security: Mapping[str, Any]
    auto_offset_reset: str
    session_timeout_ms: int
    max_poll_records: int
    fetch_max_wait_ms: int
    max_partition_fetch_bytes: int
    lean_record_parse: bool

    @classmethod
    def from_settings(cls, k: KafkaSettings) -> ConsumerConfig:
        return cls(
            bootstrap_servers=k.bootstrap_servers,
            topics=(k.topic, k.labels_topic) if k.labels_topic else (k.topic,),
            group_id=k.group_id,
            api_version=k.api_version_tuple(),
            security=k.security,
            auto_offset_reset=k.auto_offset_reset,
            session_timeout_ms=k.session_timeout_ms,
            max_poll_records=k.max_poll_records,
            fetch_max_wait_ms=k.fetch_max_wait_ms,
            max_partition_fetch_bytes=k.max_partition_fetch_bytes,
            lean_record_parse=k.lean_record_parse,
        )


def consumer_client_settings(c: ConsumerConfig, client_id: str) -> dict[str, Any]:
    """The kafka-python ``KafkaConsumer`` settings of ``c`` that are not the group's: the cluster and how to reach it
    (bootstrap servers, ``api_version``, security), the fetch settings, the client's name; offsets never committed
    by the client itself. :class:`KafkaSource` adds the group's, the side reader
    (:class:`~monitor.source.side_read.SideReader`) reads without a group."""
    from kafka import KafkaConsumer

    kw: dict[str, Any] = dict(
        client_id=client_id,
        enable_auto_commit=False,
        max_poll_records=c.max_poll_records,
        fetch_max_wait_ms=c.fetch_max_wait_ms,
        max_partition_fetch_bytes=c.max_partition_fetch_bytes,
        metadata_max_age_ms=METADATA_MAX_AGE_MS,
        **_common(c.bootstrap_servers, c.api_version, c.security),
    )
    if "bootstrap_timeout_ms" in KafkaConsumer.DEFAULT_CONFIG:
        kw["bootstrap_timeout_ms"] = BOOTSTRAP_TIMEOUT_MS
    return kw


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    """What :class:`KafkaSink` is told: the ``kafka`` settings' producer fields, built by :meth:`from_settings`
    (``KafkaSettings`` declares and documents each).

    Attributes
    ----------
    bootstrap_servers, api_version, security : as for :class:`ConsumerConfig`.
    topic_kinds : topic → kind (``dead_letter`` or ``scores``), the ``topic_kind`` label of the counters (a topic
        not listed counts as ``dead_letter``).
    buffer_bytes : bytes held before back-pressure (or drops); one record is always taken, however large.
    drop_when_full : drop (and count) records beyond ``buffer_bytes`` rather than back-pressure the pipeline.
    delivery_timeout_ms : kafka-python's bound on one attempt of a record before it reports it failed.
    """

    bootstrap_servers: str
    api_version: tuple[int, ...] | None
    security: Mapping[str, Any]
    topic_kinds: Mapping[str, str]
    buffer_bytes: int
    drop_when_full: bool
    delivery_timeout_ms: int

    @classmethod
    def from_settings(cls, k: KafkaSettings) -> ProducerConfig:
        return cls(
            bootstrap_servers=k.bootstrap_servers,
            api_version=k.api_version_tuple(),
            security=k.security,
            topic_kinds={
                t: kind for t, kind in ((k.scores_topic, "scores"), (k.dead_letter_topic, "dead_letter")) if t
            },
            buffer_bytes=k.producer_buffer_bytes,
            drop_when_full=k.producer_drop_when_full,
            delivery_timeout_ms=k.producer_delivery_timeout_ms,
        )


class GroupMember(PartitionOwner, Degradable):
    """What the Kafka sources answer from the partitions the group assigned them (``_assigned``), and how they note
    an assignment and pick the positions they may commit."""

    _assigned: set[tuple[str, int]]
    _handler: RebalanceHandler | None
    #: whether the group ever assigned this member partitions
    _ever_assigned = False

    @property
    def ready(self) -> bool:
        """Partitions are assigned, or were until the broker went away. A member that lost them in an outage (its
        session expired: librdkafka reports them lost) is degraded (``broker``), not unready, so that the sidecar
        stays in the scrape path and shows the fault (docs/DESIGN.md, degraded, not dead). Before its first
        assignment it is not ready, broker or no broker."""
        return bool(self._assigned) or (self._ever_assigned and self.degraded is not None)

    @property
    def degraded(self) -> str | None:
        """None while the broker answers; else what is wrong and what to fix (each source says)."""
        return None

    @property
    def assigned(self) -> list[tuple[str, int]]:
        return sorted(self._assigned)

    @property
    def exhausted(self) -> bool:
        return False

    def _owned(self, positions: Positions) -> Positions:
        """The ``positions`` of partitions still assigned to this member (the others are not its to commit)."""
        return {k: v for k, v in positions.items() if k in self._assigned}

    def _note_assigned(self, parts: list[tuple[str, int]], logger: logging.Logger) -> None:
        """Partitions the group assigned: held from now on, the handler told, logged on ``logger``."""
        self._assigned.update(parts)
        self._ever_assigned = True
        if self._handler is not None:
            self._handler.after_assign(parts)
        logger.info("partitions assigned", extra={"partitions": sorted(parts)})


class ColumnSource(GroupMember):
    """A group member that consumes in this process, one column batch per partition (:meth:`poll_columns`), and
    notes when its broker is away (``_outage``, set by the client's source)."""

    bootstrap_servers: str
    _outage: BrokerOutage

    @property
    def away(self) -> tuple[float, str] | None:
        """(since when, on the monotonic clock; the last error) while the broker is away, else None."""
        return self._outage.state

    @property
    def degraded(self) -> str | None:
        """None while the broker answers; else what is wrong and what to fix."""
        return outage_message(self.bootstrap_servers, self.away)

    def _member_of(self, topic: str | Sequence[str], rebalance: RebalanceHandler | None) -> None:
        """The topics to read (``topic`` is the first) and the handler told of rebalances; nothing assigned yet."""
        self.topics = [topic] if isinstance(topic, str) else list(topic)
        self.topic = self.topics[0]
        self._handler = rebalance
        self._assigned = set()

    def poll(self, timeout_seconds: float, max_records: int) -> list[RawRecord]:
        out: list[RawRecord] = []
        for batch in self.poll_columns(timeout_seconds, max_records):
            out.extend(records_of(batch))
        return out

    def poll_columns(self, timeout_seconds: float, max_records: int) -> list[PartitionBatch]:
        raise NotImplementedError

    def _note_revoked(self, parts: list[tuple[str, int]], logger: logging.Logger, *, tell: bool = True) -> None:
        """Partitions the group takes away: the handler told first where ``tell`` (it flushes and commits them),
        then no longer held (even when that failed), logged on ``logger``."""
        try:
            if tell and self._handler is not None and parts:
                self._handler.before_revoke(parts)
        finally:
            self._assigned.difference_update(parts)
        logger.info("partitions revoked", extra={"partitions": sorted(parts)})


#: the most a poll asks kafka-python to wait for while its poll spins (:class:`SpinGuard`), ms
SPIN_POLL_MS = 10


class SpinGuard:
    """Keeps a kafka-python ``poll`` that loops instead of waiting from holding a core.

    kafka-python 3.0.12's ``poll`` does not wait while its coordinator wants a heartbeat sent and one is still in
    flight (its ``time_to_next_poll`` is 0): it loops until its timeout. On Kafka 0.9 a request left unanswered held
    the consumer's core that way for 30 s (its request timeout; 2 of 28 passes of the ingest benchmark), beside the
    pipeline and the broker on the same cores. A poll that returns nothing after spending at least half its wall time
    as this thread's CPU is taken for that: the following polls ask for at most :data:`SPIN_POLL_MS` and sleep the
    rest of the caller's timeout, until one returns records or waits as it should.
    """

    def __init__(self) -> None:
        self.spinning = False
        #: spells of spinning polls seen
        self.spells = 0

    def timeout_ms(self, timeout_ms: int) -> int:
        """What the next poll may ask kafka-python to wait for, given the caller's ``timeout_ms``."""
        return min(timeout_ms, SPIN_POLL_MS) if self.spinning else timeout_ms

    def after(self, got_records: bool, wall: float, cpu: float, timeout_seconds: float) -> None:
        """After a poll that took ``wall`` seconds and ``cpu`` seconds of this thread: note a spin, and while one
        lasts sleep the rest of ``timeout_seconds``."""
        was = self.spinning
        self.spinning = not got_records and wall >= SPIN_POLL_MS / 2000 and cpu >= 0.5 * wall
        if self.spinning and not was:
            self.spells += 1
            log.debug("kafka-python's poll loops instead of waiting; polling briefly and sleeping the rest")
        if was and not got_records:
            time.sleep(max(0.0, timeout_seconds - wall))


class KafkaSource(ColumnSource, Seekable, Lagging):
    """Consume one topic in a consumer group.

    Parameters
    ----------
    config : what to read, from where, in which group, and how to fetch (:class:`ConsumerConfig`).
    rebalance : told before partitions are revoked (flush + commit there) and after assignment.
    client_id : the client's name in the broker's logs and quotas.
    """

    def __init__(
        self,
        config: ConsumerConfig,
        *,
        rebalance: RebalanceHandler | None = None,
        client_id: str = "harmonic-monitor",
    ) -> None:
        from kafka import ConsumerRebalanceListener

        c = config
        self._member_of(c.topics, rebalance)
        self._poll_thread: int | None = None
        self.bootstrap_servers = c.bootstrap_servers
        session_timeout_ms = c.session_timeout_ms
        self._kw: dict[str, Any] = dict(
            group_id=c.group_id,
            auto_offset_reset=c.auto_offset_reset,
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=max(300, session_timeout_ms // 3),
            **consumer_client_settings(c, client_id),
        )
        self._want_lean = c.lean_record_parse
        self._spin_guard = SpinGuard()
        self.lean_record_parse = False
        self._consumer: Any = None
        #: monotonic time of the last connection problem, and since when the broker is away (None: it is there)
        self._error_at = -math.inf
        #: kafka-python's connection lines held back before this source existed are not this source's problem
        self._noise_seen = CLIENT_NOISE.last_at
        self._outage = BrokerOutage(
            self.bootstrap_servers, CLIENT_NOISE, OLD_BROKER_HINT if c.api_version is None else ""
        )
        #: since when (monotonic) the consumer is not a stable group member while its broker answers; None: it is
        self._joining_since: float | None = None
        self._rejoin_seconds = max(REJOIN_MIN_SECONDS, REJOIN_SESSIONS * session_timeout_ms / 1000)
        #: consumers closed and created afresh because they did not (re-)join in time
        self.rejoins = 0
        self._recreating = False
        install_client_noise_filter()
        source = self

        class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                parts = [(tp.topic, tp.partition) for tp in revoked]
                # a consumer closed to be created afresh revokes what it still lists; those were revoked already
                source._note_revoked(parts, log, tell=not source._recreating)

            def on_partitions_assigned(self, assigned: Any) -> None:
                source._note_assigned([(tp.topic, tp.partition) for tp in assigned], log)

        self._listener = _Listener()
        self._connect()

    def _connect(self) -> bool:
        """Create the consumer and subscribe; False (the broker noted as away) where the cluster cannot be reached.

        Raises
        ------
        SourceError
            Settings kafka-python refuses (they will not work on any later attempt either).
        """
        from kafka.errors import KafkaError

        try:
            consumer = new_consumer(self._kw)
        except _unreachable() as exc:
            self._broker_away(exc)
            return False
        except KafkaError as exc:
            where = redact_text(self.bootstrap_servers)
            raise SourceError(f"cannot connect to Kafka at '{where}': {redact_text(repr(exc))}") from exc
        except ValueError as exc:
            raise SourceError(f"invalid Kafka consumer settings: {redact_text(str(exc))}") from exc
        self._consumer = consumer
        self.lean_record_parse = self._want_lean and records.install(consumer)
        records.guard(consumer)  # a batch that cannot be decoded is skipped and dead-lettered, not raised
        hold_rejoin(consumer)
        # bounded commit and close where kafka-python takes a bound: without one, a commit retries while the
        # coordinator is unknown, and a shutdown would wait for it
        self._commit_bound = timeout_kwargs(consumer.commit, COMMIT_TIMEOUT_MS)
        self._close_bound = timeout_kwargs(consumer.close, CLOSE_TIMEOUT_MS)
        consumer.subscribe(self.topics, listener=self._listener)
        return True

    def _broker_away(self, exc: BaseException) -> None:
        self._error_at = time.monotonic()
        self._outage.away(repr(exc))

    def _note_progress(self, got_records: bool) -> None:
        """After a poll that did not fail: the broker is back once records come, or the client reported no
        connection problem for ``AWAY_SECONDS``."""
        if CLIENT_NOISE.last_at > self._noise_seen:
            self._noise_seen = self._error_at = CLIENT_NOISE.last_at
            if self._outage.since is None:
                self._broker_away(ConnectionError(CLIENT_NOISE.last_message))
        if self._outage.since is None:
            return
        connected = self._coordinator_connected()
        quiet = time.monotonic() - self._error_at
        if got_records or (connected and quiet >= 1.0) or (connected is None and quiet >= AWAY_SECONDS):
            self._outage.back()

    def _coordinator_connected(self) -> bool | None:
        """Whether the group coordinator is known and connected (None where kafka-python does not say)."""
        try:
            node = self._consumer._coordinator.coordinator_id
            return node is not None and bool(self._consumer._client.connected(node))
        except Exception:  # noqa: BLE001 - kafka-python internals: fall back to the time since the last error
            return None

    def poll_columns(self, timeout_seconds: float, max_records: int) -> list[PartitionBatch]:
        """What :meth:`poll` returns, as one column batch per partition (cheap to send to another process)."""
        self._poll_thread = threading.get_ident()
        if self._consumer is None and not self._connect():
            time.sleep(timeout_seconds)  # the wait a poll would have had: the next attempt comes with the next poll
            return []
        guard = self._spin_guard
        wall, cpu = time.monotonic(), time.thread_time()
        try:
            batches = self._consumer.poll(
                timeout_ms=guard.timeout_ms(int(timeout_seconds * 1000)), max_records=max_records
            )
        except _unreachable() as exc:
            self._broker_away(exc)
            time.sleep(timeout_seconds)
            return []
        guard.after(bool(batches), time.monotonic() - wall, time.thread_time() - cpu, timeout_seconds)
        self._note_progress(bool(batches))
        self._watch_membership()
        return [columns_of(tp.topic, tp.partition, records) for tp, records in batches.items()]

    def _joined(self) -> bool:
        """Whether the consumer is a stable member of its group (kafka-python's coordinator state; where that is not
        readable, whether partitions are assigned)."""
        state = getattr(getattr(self._consumer, "_coordinator", None), "state", None)
        if isinstance(state, str):
            return state == "<stable>"  # kafka.structs.MemberState.STABLE (kafka-python 2.x and 3.x)
        return bool(self._assigned)

    def _watch_membership(self) -> None:
        """Close and re-create a consumer that has not (re-)joined its group for ``_rejoin_seconds`` while its
        broker answers (an outage is waited out as such, not counted here)."""
        if self._consumer is None or self._outage.since is not None or self._joined():
            self._joining_since = None
            return
        now = time.monotonic()
        if self._joining_since is None:
            self._joining_since = now
            return
        waited = now - self._joining_since
        if waited < self._rejoin_seconds:
            return
        coordinator = getattr(self._consumer, "_coordinator", None)
        log.warning(
            "Kafka consumer has not joined its group in time; closing it and joining afresh",
            extra={
                "group_id": self._kw.get("group_id"),
                "waited_seconds": round(waited, 1),
                "member_state": str(getattr(coordinator, "state", "?")),
                "generation": str(getattr(coordinator, "_generation", "?")),
            },
        )
        self.rejoins += 1
        self._joining_since = None
        held = sorted(self._assigned)
        try:
            if held and self._handler is not None:  # flushed and committed as before any revoke
                self._handler.before_revoke(held)
        finally:
            self._assigned.clear()
            self._recreating = True  # closing revokes what kafka-python still lists: told above, not again
            try:
                self.close()
            finally:
                self._recreating = False
                self._consumer = None  # the next poll creates the consumer again (``_connect``) and joins

    def highwaters(self) -> dict[tuple[str, int], int]:
        """Log-end offsets of the assigned partitions as the last fetches reported them (no request; a partition not
        fetched yet is missing): the consumer lag is these minus the positions read."""
        consumer = self._consumer
        if consumer is None:
            return {}
        out: dict[tuple[str, int], int] = {}
        try:
            for tp in consumer.assignment():
                end = consumer.highwater(tp)
                if end is not None:
                    out[(tp.topic, tp.partition)] = int(end)
        except Exception:  # noqa: BLE001 - a rebalance under way: no lag this step
            return {}
        return out

    def commit(self, positions: Positions) -> None:
        from kafka.errors import KafkaError
        from kafka.structs import OffsetAndMetadata, TopicPartition

        owned = self._owned(positions)
        if not owned or self._consumer is None:
            return
        offsets = {TopicPartition(t, p): OffsetAndMetadata(off, "", -1) for (t, p), off in owned.items()}
        if self._poll_thread is not None and threading.get_ident() != self._poll_thread:
            # kafka-python >= 3 calls the rebalance listener (before_revoke -> flush -> commit) on its IO thread,
            # where a blocking commit raises RuntimeError and fails the rebalance (and poll()). Queue the commit on
            # that loop instead: it is sent before the group re-forms; if the broker refuses it, the events since
            # the last commit are re-delivered to the next owner (at-least-once).
            self._consumer.commit_async(offsets, callback=_log_failed_commit)
            return
        try:
            self._consumer.commit(offsets, **self._commit_bound)
        except KafkaError as exc:
            # a commit that fails (e.g. after a rebalance) means those events are re-delivered: at-least-once
            log.warning("offset commit failed; events will be re-delivered", extra={"error": repr(exc)})

    def seek(self, positions: Positions) -> None:
        """Read these assigned partitions from these offsets on (from the poll thread): records fetched before are
        dropped by kafka-python (their fetch offset is no longer the position); an offset out of range is reset by
        ``auto_offset_reset``. Partitions not assigned (any more) are left alone."""
        from kafka.structs import TopicPartition

        if self._consumer is None:
            return
        for (topic, partition), offset in positions.items():
            if (topic, partition) not in self._assigned:
                continue
            try:
                self._consumer.seek(TopicPartition(topic, partition), offset)
            except (ValueError, AssertionError, TypeError) as exc:  # revoked meanwhile
                log.warning("seek not done", extra={"partition": f"{topic}/{partition}", "error": repr(exc)})

    def close(self) -> None:
        if self._consumer is None:
            return
        try:
            self._consumer.close(autocommit=False, **self._close_bound)
        except Exception:  # noqa: BLE001 - closing must not mask the real shutdown path
            log.exception("error while closing the Kafka consumer")


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


def hold_rejoin(consumer: Any) -> bool:
    """Make ``consumer``'s group coordinator note a rejoin as pending as soon as it sees one is needed (as the Java
    client does since KAFKA-9815), so that it stays needed until the join completes.

    kafka-python 3.0.12's leader rejoins when the partitions it assigned differ from its metadata, or a member when
    its subscription changed, without noting the rejoin as pending. The JoinGroup and SyncGroup run as a task on its
    IO thread; only a ``poll`` that finds a rejoin needed awaits that task and completes the join (member stable,
    heartbeats on, partitions assigned). A ``poll`` that stops waiting (its time spent in the revoke handler's flush)
    leaves the task running, the task's new assignment makes the metadata match again, and no later ``poll`` finds a
    rejoin needed: the member stayed ``<rebalancing>`` with heartbeats off, its session expired and it never got its
    partitions back. False (the consumer unchanged) where it has no coordinator, or one of another shape (logged).
    """
    coordinator: Any = getattr(consumer, "_coordinator", None)
    need, pending = getattr(coordinator, "need_rejoin", None), getattr(coordinator, "request_rejoin", None)
    if coordinator is None:
        return False
    if not (callable(need) and callable(pending)):
        log.warning("a rejoin is not held until it completes: kafka-python's coordinator has another shape")
        return False

    def need_rejoin() -> bool:
        if need():
            pending()  # cleared by kafka-python once the join completes
            return True
        return False

    coordinator.need_rejoin = need_rejoin
    return True


@functools.cache
def _unreachable() -> tuple[type[BaseException], ...]:
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


def _log_failed_commit(offsets: Any, response: Any) -> None:
    if isinstance(response, Exception):
        log.warning("offset commit failed; events will be re-delivered", extra={"error": repr(response)})


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
    client_id : as for :class:`KafkaSource`.
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
    kw = _common(bootstrap_servers, api_version, security)
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
