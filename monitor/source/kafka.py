"""Stage 1: ``KafkaSource``, a kafka-python consumer in a consumer group, and what both clients' sources share as
group members (:class:`GroupMember`, :class:`ColumnSource`) and as column batches (:func:`columns_of`,
:func:`records_of`).

Offsets are committed by the pipeline, only after a batch's results are applied (at-least-once); partitions
rebalance across replicas of the same ``group_id``. The settings are :mod:`monitor.source.kafka_config`'s, a broker
outage is :mod:`monitor.source.kafka_outage`'s, the producer is :class:`~monitor.source.kafka_sink.KafkaSink`.
Errors and log lines never show a secret.
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from monitor.errors import SourceError
from monitor.logs import redact_text
from monitor.source import records
from monitor.source.base import (
    Degradable,
    Headers,
    Lagging,
    PartitionOwner,
    Positions,
    RawRecord,
    RebalanceHandler,
    Seekable,
)
from monitor.source.kafka_client import new_consumer, timeout_kwargs
from monitor.source.kafka_config import CLOSE_TIMEOUT_MS, COMMIT_TIMEOUT_MS, ConsumerConfig, consumer_client_settings
from monitor.source.kafka_outage import (
    CLIENT_NOISE,
    OLD_BROKER_HINT,
    BrokerOutage,
    install_client_noise_filter,
    outage_message,
    unreachable_errors,
)

#: after a connection problem the client reported, the broker counts as away this long (``KafkaSource.degraded``)
AWAY_SECONDS = 10.0
#: a consumer whose broker answers but that has not (re-)joined its group for this long — and for
#: ``REJOIN_SESSIONS`` session timeouts — is closed and created afresh. A join legitimately waits for the other
#: members to rejoin, at most a session timeout each on Kafka 0.9 (a dead member's), so this is several times
#: that. A safety net: kafka-python 3.0.12 left a member that rejoined for changed metadata in ``<rebalancing>`` for
#: good (never ready again) until :func:`hold_rejoin`; another such cause would be met the same way.
REJOIN_MIN_SECONDS = 30.0
REJOIN_SESSIONS = 5
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
        except unreachable_errors() as exc:
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
        except unreachable_errors() as exc:
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


def _log_failed_commit(offsets: Any, response: Any) -> None:
    if isinstance(response, Exception):
        log.warning("offset commit failed; events will be re-delivered", extra={"error": repr(response)})
