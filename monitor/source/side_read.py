"""``SideReader``: reads a partition's records at given offsets beside the group consumer, without moving it.

A source whose group consumer cannot seek (:class:`~monitor.source.kafka_process.ProcessKafkaSource`, whose consumer
runs in a child process; :class:`~monitor.source.rdkafka.RdKafkaSource`) offers one as ``side_reader``. After a
restart the pipeline reads with it the record just before a saved position, to compare it with the fingerprint the
state saved, and — where that record is another one (a re-created topic, grown past the saved position) — the new
topic's records below the position the group consumer was handed (:mod:`monitor.runtime.saved_positions`).

It is a kafka-python ``KafkaConsumer`` in this process, in no group (nothing committed, no rebalance), with the
source's cluster, security and fetch settings (:func:`~monitor.source.kafka.consumer_client_settings`). Created on
first need, one for every partition (assigned one at a time), closed by :meth:`SideReader.close` (the source's
``close`` too); a later read creates it again.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from monitor.logs import redact_text
from monitor.source import records
from monitor.source.base import RawRecord
from monitor.source.kafka import (
    CLOSE_TIMEOUT_MS,
    ConsumerConfig,
    columns_of,
    consumer_client_settings,
    records_of,
)
from monitor.source.kafka_client import new_consumer, timeout_kwargs

log = logging.getLogger(__name__)

#: how long one read waits for the first record it asks for (the reader's first read also connects)
WAIT_SECONDS = 5.0


class SideReader:
    """Reads records of one partition at a time at given offsets, in no consumer group.

    Parameters
    ----------
    config : the source's :class:`~monitor.source.kafka.ConsumerConfig` (its group is not used).
    client_id : the client's name in the broker's logs and quotas.
    wait_seconds : how long one read waits for records (a record gone by retention is not waited for: the read
        lands on the first one kept after it).
    """

    def __init__(
        self,
        config: ConsumerConfig,
        *,
        client_id: str = "harmonic-monitor-side-read",
        wait_seconds: float = WAIT_SECONDS,
    ) -> None:
        self._kw: dict[str, Any] = {
            **consumer_client_settings(config, client_id),
            "group_id": None,
            # an offset out of range (gone by retention) lands on the first record kept
            "auto_offset_reset": "earliest",
        }
        self._bootstrap_servers = config.bootstrap_servers
        self.wait_seconds = wait_seconds
        self._consumer: Any = None
        #: (partition, offset) the consumer reads next without a seek
        self._at: tuple[tuple[str, int], int] | None = None

    @property
    def open(self) -> bool:
        """Whether the consumer exists (created by a read, dropped by :meth:`close`)."""
        return self._consumer is not None

    def read(self, key: tuple[str, int], start: int, end: int, max_records: int) -> list[RawRecord]:
        """Up to ``max_records`` records of partition ``key`` with ``start`` <= offset < ``end``, in offset order;
        the records from ``start`` on that arrive within ``wait_seconds`` ([] when none did: gone, or the cluster not
        reached, logged)."""
        if start >= end or max_records <= 0:
            return []
        consumer = self._connect()
        if consumer is None:
            return []
        from kafka.structs import TopicPartition

        tp = TopicPartition(key[0], key[1])
        out: list[RawRecord] = []
        try:
            if set(consumer.assignment()) != {tp}:
                consumer.assign([tp])
                self._at = None
            if self._at != (key, start):
                consumer.seek(tp, start)
            deadline = time.monotonic() + self.wait_seconds
            done = False
            while not done and len(out) < max_records:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                batches = consumer.poll(timeout_ms=max(1, int(left * 1000)), max_records=max_records - len(out))
                got = batches.get(tp, [])
                for record in records_of(columns_of(key[0], key[1], got)):
                    if record.offset < start:
                        continue
                    if record.offset >= end:
                        done = True
                        break
                    out.append(record)
                if out and out[-1].offset == end - 1:
                    done = True
            self._at = (key, consumer.position(tp))
        except Exception as exc:  # noqa: BLE001 - a side read that fails is a record not found; the reader is renewed
            log.warning("side read failed", extra={"partition": f"{key[0]}/{key[1]}", "error": redact_text(repr(exc))})
            self.close()
        return out

    def read_at(self, key: tuple[str, int], offset: int) -> RawRecord | None:
        """The record of partition ``key`` at ``offset``; None when it is not there (gone by retention, not reached
        within ``wait_seconds``)."""
        found = self.read(key, offset, offset + 1, 1)
        return found[0] if found else None

    def close(self) -> None:
        """Close the consumer (a later read creates it again)."""
        consumer, self._consumer, self._at = self._consumer, None, None
        if consumer is not None:
            with contextlib.suppress(Exception):
                consumer.close(autocommit=False, **timeout_kwargs(consumer.close, CLOSE_TIMEOUT_MS))

    def _connect(self) -> Any:
        if self._consumer is None:
            try:
                self._consumer = new_consumer(self._kw)
            except Exception as exc:  # noqa: BLE001 - not reached (or refused): nothing read, logged
                log.warning(
                    "side reader not connected",
                    extra={
                        "bootstrap_servers": redact_text(self._bootstrap_servers),
                        "error": redact_text(repr(exc)),
                    },
                )
                return None
            records.guard(self._consumer)  # a batch that cannot be decoded comes as one record, as in the source
        return self._consumer


def read_below(
    read: Callable[[tuple[str, int], int, int, int], list[RawRecord]], key: tuple[str, int], end: int, max_records: int
) -> Iterator[list[RawRecord]]:
    """The records of partition ``key`` below offset ``end``, from its start, in chunks of at most ``max_records``
    (in offset order), read with ``read`` (:meth:`SideReader.read`); stops at ``end`` or where nothing more arrives.
    Logs how many were read."""
    start, count, limit = 0, 0, max(1, max_records)
    while start < end:
        chunk = read(key, start, end, limit)
        if not chunk:
            break
        yield chunk
        count += len(chunk)
        start = chunk[-1].offset + 1
    log.info(
        "records of the new incarnation below the position handed out read with a side read",
        extra={"partition": f"{key[0]}/{key[1]}", "records": count, "below": end},
    )
