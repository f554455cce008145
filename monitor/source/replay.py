"""Stage 1: ``ReplaySource`` — events from a JSON-lines file (or an in-memory list), for demos and tests.

Each line is one raw event. Optional ``rate`` (events/s, paced against an injected clock) and ``loop``.
Positions are line numbers (partition 0), so the at-least-once machinery is exercised the same way as Kafka.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path

from monitor.errors import SourceError
from monitor.source.base import Positions, RawRecord


class MemorySource:
    """What a source with no broker behind it shares: ``commit`` keeps the positions in ``committed``, it is
    ready from the start, and there is nothing to close. A subclass gives ``poll`` and ``exhausted``."""

    def __init__(self) -> None:
        self.committed: Positions = {}

    def commit(self, positions: Positions) -> None:
        self.committed.update(positions)

    @property
    def ready(self) -> bool:
        return True

    def close(self) -> None:
        return None


class ReplaySource(MemorySource):
    """Replay raw events.

    Parameters
    ----------
    lines : a JSON-lines file path, or an iterable of raw event bytes (kept in memory).
    rate : events per second (None = as fast as possible).
    loop : start again at the end (never exhausted).
    clock : monotonic seconds (injected for tests).
    topic : the name reported in record positions.
    """

    def __init__(
        self,
        lines: str | Path | Iterable[bytes],
        *,
        rate: float | None = None,
        loop: bool = False,
        clock: Callable[[], float] = time.monotonic,
        topic: str = "replay",
    ) -> None:
        super().__init__()
        if rate is not None and rate <= 0:
            raise SourceError(f"replay rate must be > 0 events/s; got {rate}")
        if isinstance(lines, str | Path):
            path = Path(lines)
            if not path.is_file():
                raise SourceError(f"replay file '{path}' does not exist (expected JSON lines, one event per line)")
            self._records = [ln for ln in path.read_bytes().splitlines() if ln.strip()]
        else:
            self._records = list(lines)
        self._rate = rate
        self._loop = loop
        self._clock = clock
        self._topic = topic
        self._next = 0
        self._emitted = 0
        self._started: float | None = None

    def poll(self, timeout_seconds: float, max_records: int) -> list[RawRecord]:
        if self.exhausted or not self._records:
            return []
        if self._started is None:
            self._started = self._clock()
        budget = max_records
        if self._rate is not None:
            allowed = int((self._clock() - self._started) * self._rate) + 1 - self._emitted
            if allowed <= 0:
                wait = (self._emitted - (self._clock() - self._started) * self._rate) / self._rate
                time.sleep(min(max(wait, 0.0), timeout_seconds))
                allowed = int((self._clock() - self._started) * self._rate) + 1 - self._emitted
            budget = max(0, min(budget, allowed))
        out: list[RawRecord] = []
        while len(out) < budget:
            if self._next >= len(self._records):
                if not self._loop:
                    break
                self._next = 0
            out.append(RawRecord(value=self._records[self._next], topic=self._topic, partition=0, offset=self._emitted))
            self._next += 1
            self._emitted += 1
        return out

    @property
    def exhausted(self) -> bool:
        return not self._loop and self._next >= len(self._records)

    @property
    def emitted(self) -> int:
        return self._emitted
