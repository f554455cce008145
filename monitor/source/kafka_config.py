"""The Kafka clients' settings: what a consumer and a producer are told (:class:`ConsumerConfig`,
:class:`ProducerConfig`, built from the ``kafka`` settings), the defaults ``KafkaSettings`` documents, and the
kafka-python settings shared by the consumer, the side reader and the producer (:func:`client_settings`). Security
settings (SSL/SASL) are passed through untouched; ``api_version`` is only set when configured (never hard-coded), so
modern brokers negotiate."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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
#: the consumer's bound on one attempt to reach the cluster (kafka-python's bootstrap_timeout_ms, 30 s by default):
#: a broker not there at start-up is waited for, attempt after attempt, with the metrics endpoint already up
BOOTSTRAP_TIMEOUT_MS = 5_000
#: how old the consumer's topic metadata may grow before it is asked again (kafka-python's metadata_max_age_ms,
#: 5 minutes by default): a topic's new partitions are seen, assigned, read and counted in the lag within about this
#: long (librdkafka's consumer: ``monitor.source.rdkafka.METADATA_REFRESH_MS``, the same)
METADATA_MAX_AGE_MS = 10_000


def client_settings(
    bootstrap_servers: str, api_version: tuple[int, ...] | None, security: Mapping[str, Any]
) -> dict[str, Any]:
    """kafka-python's settings for reaching the cluster: the bootstrap servers, ``api_version`` where stated, the
    security settings as given."""
    kw: dict[str, Any] = {"bootstrap_servers": [s.strip() for s in bootstrap_servers.split(",") if s.strip()]}
    if api_version is not None:
        kw["api_version"] = api_version
    kw.update(security)
    return kw


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    """What a Kafka consumer is told (:class:`~monitor.source.kafka.KafkaSource`, :class:`~monitor.source.rdkafka.RdKafkaSource`, the child
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
    by the client itself. :class:`~monitor.source.kafka.KafkaSource` adds the group's, the side reader
    (:class:`~monitor.source.side_read.SideReader`) reads without a group."""
    from kafka import KafkaConsumer

    kw: dict[str, Any] = dict(
        client_id=client_id,
        enable_auto_commit=False,
        max_poll_records=c.max_poll_records,
        fetch_max_wait_ms=c.fetch_max_wait_ms,
        max_partition_fetch_bytes=c.max_partition_fetch_bytes,
        metadata_max_age_ms=METADATA_MAX_AGE_MS,
        **client_settings(c.bootstrap_servers, c.api_version, c.security),
    )
    if "bootstrap_timeout_ms" in KafkaConsumer.DEFAULT_CONFIG:
        kw["bootstrap_timeout_ms"] = BOOTSTRAP_TIMEOUT_MS
    return kw


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    """What :class:`~monitor.source.kafka_sink.KafkaSink` is told: the ``kafka`` settings' producer fields, built by :meth:`from_settings`
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
