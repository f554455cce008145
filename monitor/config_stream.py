"""How events arrive and are taken in: the ``kafka``, ``sampler`` and ``batch`` sections."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from monitor.config_checks import TOPIC_INPUTS, TOPIC_OUTPUTS, bootstrap_problem, topic_loop_problem
from monitor.config_fields import StrictSettings
from monitor.cpus import available_cpus
from monitor.errors import ConfigError
from monitor.source.kafka_config import (
    FETCH_MAX_WAIT_MS,
    MAX_PARTITION_FETCH_BYTES,
    PRODUCER_BUFFER_BYTES,
    PRODUCER_DELIVERY_TIMEOUT_MS,
)


class KafkaSettings(StrictSettings):
    bootstrap_servers: str = Field("127.0.0.1:9092", description="Comma-separated host:port list.")
    topic: str = Field("inference-events", min_length=1, description="Topic with inference events.")
    group_id: str = Field("harmonic-monitor", min_length=1, description="Consumer group (replicas share it).")
    api_version: str | None = Field(None, description="Broker API version, e.g. '0.9' or '2.8'; default: probe.")
    auto_offset_reset: Literal["earliest", "latest"] = Field(
        "earliest", description="Where a new consumer group starts reading."
    )
    session_timeout_ms: int = Field(10000, ge=1000, description="Consumer-group session timeout.")
    max_poll_records: int = Field(2000, ge=1, description="Records per poll.")
    fetch_max_wait_ms: int = Field(
        FETCH_MAX_WAIT_MS,
        ge=0,
        description="How long the broker may hold a fetch that has no new data yet. Some brokers (Tansu) hold it for "
        "the whole wait even when records arrive meanwhile: at kafka-python's default 500 ms records reached the "
        "sidecar ~160 ms later at the median (docs/BENCHMARKS.md, latency).",
    )
    max_partition_fetch_bytes: int = Field(
        MAX_PARTITION_FETCH_BYTES,
        ge=1024,
        description="Most bytes fetched per partition per request (kafka-python's default, 1 MiB).",
    )
    lean_record_parse: bool = Field(
        True,
        description="Parse fetched v2 record batches with the consumer's own lean loop (monitor/source/records.py: "
        "the same records, positions and errors as kafka-python's parse, at less CPU per record); it is used only "
        "with a kafka-python release it was checked against, and false keeps kafka-python's own parse.",
    )
    dead_letter_topic: str | None = Field(None, description="Invalid events go here with the reason in a header.")
    scores_topic: str | None = Field(None, description="Optional: per-event scores are published here.")
    labels_topic: str | None = Field(None, description="Optional: delayed labels {id,label,ts}.")
    producer_buffer_bytes: int = Field(
        PRODUCER_BUFFER_BYTES,
        ge=1 << 16,
        description="Bytes of dead letters and scores kept until the broker acknowledges them. While the broker is "
        "away they wait here and are re-sent; when it is full the pipeline stops reading (back-pressure) until they "
        "are delivered, unless producer_drop_when_full.",
    )
    producer_drop_when_full: bool = Field(
        False,
        description="true: dead letters and scores beyond producer_buffer_bytes are dropped and counted "
        "(harmonic_producer_dropped_total) and the pipeline keeps reading; false: it pauses until they are delivered.",
    )
    producer_delivery_timeout_ms: int = Field(
        PRODUCER_DELIVERY_TIMEOUT_MS,
        ge=1000,
        description="kafka-python's delivery_timeout_ms: how long it tries one record before reporting it failed "
        "(harmonic_producer_failures_total); the sidecar then sends it again: nothing is given up while the broker "
        "is away.",
    )
    security: dict[str, str | int | bool] = Field(
        default_factory=dict,
        description="Passed through to kafka-python: security_protocol, ssl_cafile, sasl_mechanism, ..., e.g. "
        "{security_protocol: SASL_SSL, sasl_mechanism: SCRAM-SHA-512, sasl_plain_username: harmonic}; give the password "
        "in HARMONIC_KAFKA__SECURITY__SASL_PLAIN_PASSWORD rather than in the file.",
    )
    consumer_process: bool | None = Field(
        None,
        description="Run the consumer, either client, in a child process that fetches and decodes a share of each "
        "poll's events as columns, so that reading and the pipeline use two cores (monitor/source/kafka_process.py); default: when 2 or more CPUs are "
        "available (CPU affinity, capped by the container's cgroup CPU quota).",
    )

    client: Literal["kafka-python", "librdkafka"] = Field(
        "kafka-python",
        description="Kafka client library: kafka-python (pure Python) or librdkafka (confluent-kafka: fetching, "
        "parsing and producing in C threads; no lean_record_parse). The same delivery "
        "contract either way: offsets committed only after the state is saved; security takes kafka-python's names "
        "or librdkafka's dotted ones.",
    )

    def use_consumer_process(self) -> bool:
        if self.consumer_process is not None:
            return self.consumer_process
        return available_cpus() >= 2  # the container's CPU quota counts, not only the node's cores

    @field_validator("api_version", mode="before")
    @classmethod
    def _api_version_is_dotted(cls, v: object) -> object:
        # validated at load so that check-config catches it, not the first Kafka connection; a YAML number is refused
        # because YAML reads 2.10 as 2.1
        if isinstance(v, int | float) and not isinstance(v, bool):
            raise ValueError(f"write the version as a quoted string, e.g. api_version: '{v}' (YAML reads 2.10 as 2.1)")
        if isinstance(v, str) and not _API_VERSION.fullmatch(v):
            raise ValueError(f"{v!r} is not a version like '0.9' or '2.8.1'")  # repr: v may hold a surrogate
        return v

    @field_validator("bootstrap_servers")
    @classmethod
    def _brokers_are_addresses(cls, v: str) -> str:
        problem = bootstrap_problem(v)  # run would otherwise fail inside the client, after the models load
        if problem:
            raise ValueError(problem)
        return v

    @model_validator(mode="after")
    def _no_feedback_loop(self) -> KafkaSettings:
        problem = topic_loop_problem({name: getattr(self, name) for name in (*TOPIC_OUTPUTS, *TOPIC_INPUTS)})
        if problem:
            raise ValueError(problem)
        return self

    def api_version_tuple(self) -> tuple[int, ...] | None:
        return None if self.api_version is None else _parse_api_version(self.api_version)


_API_VERSION = re.compile(r"[0-9]+(\.[0-9]+)*")


def _parse_api_version(text: str) -> tuple[int, ...]:
    """``"0.9"`` → ``(0, 9)``; raises :class:`ConfigError` for anything else.

    >>> _parse_api_version("2.8.1")
    (2, 8, 1)
    """
    if not _API_VERSION.fullmatch(text):
        raise ConfigError(f"kafka.api_version '{text}' is not like '0.9' or '2.8.1'")
    return tuple(int(p) for p in text.split("."))


class SamplerSettings(StrictSettings):
    events_per_second: float | None = Field(
        None,
        ge=0,
        description="Optional cap on scored events/s, one budget shared by all models, an equal share each under "
        "overload (max-min fairness: what a model does not use goes to the others); unset (the default) = no cap, "
        "the CPU share alone decides; 0 = score every event (no sampling, no CPU limit).",
    )
    cpu_share: float = Field(
        0.8,
        gt=0,
        le=1,
        description="Share of the available CPUs (affinity capped by the cgroup CPU quota) that scoring may take, at "
        "most: ingest first, the budget is cut to what ingest leaves while the consumer lags (a backlog is read at "
        "nearly the scoring-off rate, 20 events/s scored for each model) and climbs back to this cap once caught "
        "up. Every event is scored while the measured scoring cost fits in the budget; above, events are sampled "
        "uniformly, one budget shared by all models (an equal share of CPU time each under overload).",
    )
    burst_seconds: float = Field(
        2.0,
        gt=0,
        description="Bucket depth in seconds of budget (CPU share and cap): a burst this size is scored whole.",
    )
    stratify: bool = Field(True, description="Class-stratified acceptance on the live predicted class.")


class BatchSettings(StrictSettings):
    max_events: int = Field(256, ge=1, description="Micro-batch size B.")
    max_wait_ms: int = Field(200, ge=1, description="Flush a partial batch after this long.")
