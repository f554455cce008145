"""Stage 1: where raw events come from (Kafka with either client, a replay file), how they are decoded and validated, what a source or sink may do (``base``), and the label stream.

``__all__``: what other packages import from here, each loaded from its module on first use (:mod:`monitor.lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from monitor.lazy import lazy_names

if TYPE_CHECKING:
    from monitor.source.base import (
        Backlogging,
        DecodesAhead,
        Degradable,
        Lagging,
        PartitionOwner,
        Positions,
        ProducerCounts,
        RawRecord,
        RebalanceHandler,
        Seekable,
        SideReading,
        Sink,
        Source,
        partition_spans,
    )
    from monitor.source.decode import EventDecoder
    from monitor.source.decode_ahead import DecodeAhead, event_of
    from monitor.source.kafka import KafkaSource
    from monitor.source.kafka_config import (
        FETCH_MAX_WAIT_MS,
        MAX_PARTITION_FETCH_BYTES,
        PRODUCER_BUFFER_BYTES,
        PRODUCER_DELIVERY_TIMEOUT_MS,
        ConsumerConfig,
        ProducerConfig,
    )
    from monitor.source.kafka_process import ProcessKafkaSource, dump_consumer_stacks
    from monitor.source.kafka_sink import KafkaSink, Producer
    from monitor.source.kserve_join import KServeJoiner
    from monitor.source.labels import JoinedLabel, LabelDecoder, LabelJoiner, ScoredPrediction
    from monitor.source.rdkafka import RdKafkaSource, new_rd_producer
    from monitor.source.records import UNDECODABLE_HEADER
    from monitor.source.replay import MemorySource, ReplaySource
    from monitor.source.side_read import SideReader, read_below
    from monitor.source.validate import INVALID_REASONS, PROCESSING_REASONS, ModelSchema, fast_loads

#: each public name → the module that defines it
_HOMES = {
    "Backlogging": "base",
    "ConsumerConfig": "kafka_config",
    "DecodeAhead": "decode_ahead",
    "DecodesAhead": "base",
    "Degradable": "base",
    "dump_consumer_stacks": "kafka_process",
    "event_of": "decode_ahead",
    "EventDecoder": "decode",
    "fast_loads": "validate",
    "FETCH_MAX_WAIT_MS": "kafka_config",
    "INVALID_REASONS": "validate",
    "JoinedLabel": "labels",
    "KafkaSink": "kafka_sink",
    "KafkaSource": "kafka",
    "KServeJoiner": "kserve_join",
    "LabelDecoder": "labels",
    "LabelJoiner": "labels",
    "Lagging": "base",
    "MAX_PARTITION_FETCH_BYTES": "kafka_config",
    "MemorySource": "replay",
    "ModelSchema": "validate",
    "new_rd_producer": "rdkafka",
    "partition_spans": "base",
    "PartitionOwner": "base",
    "Positions": "base",
    "PROCESSING_REASONS": "validate",
    "ProcessKafkaSource": "kafka_process",
    "Producer": "kafka_sink",
    "PRODUCER_BUFFER_BYTES": "kafka_config",
    "PRODUCER_DELIVERY_TIMEOUT_MS": "kafka_config",
    "ProducerConfig": "kafka_config",
    "ProducerCounts": "base",
    "RawRecord": "base",
    "RdKafkaSource": "rdkafka",
    "read_below": "side_read",
    "RebalanceHandler": "base",
    "ReplaySource": "replay",
    "ScoredPrediction": "labels",
    "Seekable": "base",
    "SideReader": "side_read",
    "SideReading": "base",
    "Sink": "base",
    "Source": "base",
    "UNDECODABLE_HEADER": "records",
}

__all__ = [
    "Backlogging",
    "ConsumerConfig",
    "DecodeAhead",
    "DecodesAhead",
    "Degradable",
    "EventDecoder",
    "FETCH_MAX_WAIT_MS",
    "INVALID_REASONS",
    "JoinedLabel",
    "KServeJoiner",
    "KafkaSink",
    "KafkaSource",
    "LabelDecoder",
    "LabelJoiner",
    "Lagging",
    "MAX_PARTITION_FETCH_BYTES",
    "MemorySource",
    "ModelSchema",
    "PROCESSING_REASONS",
    "PRODUCER_BUFFER_BYTES",
    "PRODUCER_DELIVERY_TIMEOUT_MS",
    "PartitionOwner",
    "Positions",
    "ProcessKafkaSource",
    "Producer",
    "ProducerConfig",
    "ProducerCounts",
    "RawRecord",
    "RdKafkaSource",
    "RebalanceHandler",
    "ReplaySource",
    "ScoredPrediction",
    "Seekable",
    "SideReader",
    "SideReading",
    "Sink",
    "Source",
    "UNDECODABLE_HEADER",
    "dump_consumer_stacks",
    "event_of",
    "fast_loads",
    "new_rd_producer",
    "partition_spans",
    "read_below",
]

__getattr__, __dir__ = lazy_names(__name__, _HOMES, globals())
