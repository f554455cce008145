"""The positions a restarted pipeline holds from its saved state, and what it does with the records below them.

The state saves, per partition, the position whose effects it holds, the position last committed and the
fingerprint of the record just before the saved position. :class:`SavedPositions` keeps those for the partitions
no record has been seen of since, and decides per record (:meth:`SavedPositions.decide`):

- ``SKIP``: a record below the saved position that the broker delivers again (its commit did not land: a crash
  between save and commit, a failed commit at a rebalance) — applied before, in the state already;
- ``APPLY``: the partition is released, the broker's records from here on are new — at or past the saved
  position, or below the position last committed (the offsets went back: an operator's reset, a re-created topic,
  another cluster at the same address; logged and counted);
- ``SEEK``: the source was asked to re-read from elsewhere, and the rest of this poll's records of the partition are
  stale — to re-read the record before the saved position once (compared with its fingerprint), or from offset 0
  when that record is another one (a new incarnation of the topic, grown past the saved position).

A source that cannot seek its group consumer (the consumer in its child process, librdkafka's) reads that record on
the side instead (:meth:`SavedPositions.check_by_side_read`, before a poll's records are processed); the pipeline
then reads a new incarnation's records below the position handed out the same way, and processes them first.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from monitor import telemetry as tel
from monitor.exporters.prometheus import MetricsState
from monitor.source.base import Positions, RawRecord

log = logging.getLogger("monitor.runtime.pipeline")

#: a record's fingerprint: (offset, timestamp in ms or None, CRC-32 of the value)
Tail = tuple[int, int | None, int]
SKIP, APPLY, SEEK = "skip", "apply", "seek"


def tail_of(record: RawRecord) -> Tail:
    """The fingerprint of ``record``: a timestamp below 0 (none kept, message format v0) is None."""
    ts = record.timestamp_ms
    return (record.offset, ts if ts is not None and ts >= 0 else None, zlib.crc32(record.value))


def _same(saved: Tail, found: Tail) -> bool:
    """The same record: the same value, and the same timestamp where both have one."""
    return saved[2] == found[2] and (saved[1] is None or found[1] is None or saved[1] == found[1])


class SavedPositions:
    """Per partition still held from the saved state: the saved position, the last commit, the saved fingerprint."""

    def __init__(self, state: MetricsState) -> None:
        self.state = state
        #: per partition, the position whose effects the state already holds: a record below it that the broker
        #: delivers is skipped, not applied twice. From the saved state at start, and from a partition given up at a
        #: rebalance; dropped for a partition once a record at or past it arrives.
        self.held: Positions = {}
        #: per partition given up at a rebalance, the position up to which this process had processed it (scored,
        #: applied, its dead letters and scores handed to the sink) when that is past ``held``: the sink may not have
        #: delivered them yet (a broker away), so the state and the commit stay at ``held``, but a re-delivery to this
        #: process skips them (the sink still holds their output). In memory only: after a restart they are processed
        #: again, as the output the sink held is gone with the process. Dropped once a record at or past it arrives.
        self.unsent: Positions = {}
        #: per partition, the position the previous process had last committed when it saved its state (only for
        #: partitions still held from that state): a first record below it means the offsets went back
        self.committed: Positions = {}
        #: the saved fingerprints of partitions still held from the saved state, not yet compared
        self.tails: dict[tuple[str, int], Tail] = {}
        #: partitions the source was asked to re-read from one record before the saved position (once per start)
        self._checking: set[tuple[str, int]] = set()
        #: partitions the source was asked to seek in this step: the rest of this poll's records of them are stale
        self.sought: set[tuple[str, int]] = set()

    def restore(self, data: Mapping[str, Any]) -> None:
        """The saved ``positions``, ``committed`` and ``tails`` rows of a state file (malformed rows are ignored)."""
        self.held = {(str(t), int(p)): int(o) for t, p, o in data.get("positions", [])}
        self.committed = {
            (row[0], row[1]): row[2]
            for row in data.get("committed", [])
            if isinstance(row, list)
            and len(row) == 3
            and isinstance(row[0], str)
            and all(isinstance(x, int) and not isinstance(x, bool) for x in row[1:])
            and (row[0], row[1]) in self.held
        }
        self.tails = {
            (row[0], row[1]): (row[2], row[3], row[4])
            for row in data.get("tails", [])
            if isinstance(row, list)
            and len(row) == 5
            and isinstance(row[0], str)
            and all(isinstance(x, int) and not isinstance(x, bool) for x in (row[1], row[2], row[4]))
            and (row[3] is None or (isinstance(row[3], int) and not isinstance(row[3], bool)))
            and self.held.get((row[0], row[1])) == row[2] + 1
        }

    def rows(self, applied: Positions, committed: Positions, tails: Mapping[tuple[str, int], Tail]) -> dict[str, Any]:
        """The state file's ``positions``, ``committed`` and ``tails`` rows: this process's ``applied`` positions,
        last ``committed`` positions and ``tails`` (the fingerprint of the last record processed per partition),
        over what is still held from the saved state (partitions no record has been seen of since)."""
        held = {**self.held, **applied}
        # what was last committed (before this save's commit): a restart that is handed records below it sees
        # offsets that went back, not a commit that did not land
        last_committed = {**self.committed, **committed}
        # the fingerprint of the record just before each saved position, where this process (or the saved state) has it
        fingerprints = {**self.tails, **tails}
        return {
            "positions": [[topic, partition, offset] for (topic, partition), offset in sorted(held.items())],
            "committed": [[t, p, o] for (t, p), o in sorted(last_committed.items())],
            "tails": [
                [t, p, *tail] for (t, p), tail in sorted(fingerprints.items()) if held.get((t, p)) == tail[0] + 1
            ],
        }

    def hand_back(self, key: tuple[str, int], applied: int | None, processed: int | None = None) -> None:
        """``key`` was given up at a rebalance: held from this process at ``applied`` (if the checkpoint's commit did
        not land, the next delivery skips what the state holds); its commit may not have landed, so no saved commit
        or fingerprint speaks for it any more.

        With nothing applied from ``key`` by this process (``applied`` None: revoked before its first record, as in
        the second join a group often makes at start-up), nothing was committed for it either: the saved position,
        commit and fingerprint still speak for it, and a fingerprint check under way starts again with the next
        delivery. Dropping them there would let a re-created topic's first records be skipped as already applied.

        ``processed`` past ``applied`` (records processed whose output the sink has not delivered) is kept in
        :attr:`unsent`."""
        if processed is not None and (applied is None or processed > applied):
            self.unsent[key] = processed
        else:
            self.unsent.pop(key, None)
        if applied is None:
            self._checking.discard(key)
            return
        self.held[key] = applied
        self.committed.pop(key, None)
        self.tails.pop(key, None)
        self._checking.discard(key)

    def decide(
        self, key: tuple[str, int], record: RawRecord, seek: Callable[[Positions], None] | None
    ) -> tuple[str, bool]:
        """(``SKIP`` | ``APPLY`` | ``SEEK``, whether the topic is a new incarnation) for ``record`` of a held
        partition ``key``; ``seek`` is the source's, None where it cannot.

        Besides the offsets that went back below the last commit, the record just before the saved position is
        compared with the fingerprint saved for it: a restart that is handed the saved position itself first asks the
        source to re-read that one record; a record there that differs (another value, or another timestamp where
        the broker keeps them) is a new incarnation of the topic, read from its start."""
        held = self.held[key]
        tail = self.tails.get(key)
        if record.offset < held:
            if tail is not None and record.offset == tail[0]:  # the record applied last before the saved position?
                del self.tails[key]
                if _same(tail, tail_of(record)):
                    return SKIP, False
                self._new_incarnation(key, record, tail, read_from=record.offset if seek is None else 0)
                if seek is None:  # nothing to re-read with: this record and the rest are new
                    return APPLY, True
                seek({key: 0})
                self.sought.add(key)
                return SEEK, True
            if self._went_back(key, record.offset):
                self.release(key)
                return APPLY, False
            return SKIP, False
        if tail is not None and record.offset == held and seek is not None and key not in self._checking:
            self._checking.add(key)  # once: if that record is gone (retention), the saved position is read as is
            seek({key: tail[0]})
            self.sought.add(key)
            return SEEK, False
        self.release(key)
        return APPLY, False

    def check_by_side_read(
        self,
        records: Sequence[RawRecord],
        read_at: Callable[[tuple[str, int], int], RawRecord | None],
        assigned: Collection[tuple[str, int]] | None = None,
    ) -> dict[tuple[str, int], int]:
        """For a source that cannot seek its group consumer but reads records on the side (``read_at``: the record
        of a partition at an offset, None when it is not there): each partition with a saved fingerprint (of those
        ``assigned``, where given; once per start) whose first record in ``records`` is at or below the saved
        position has the record just before that position compared — the first record itself where it is that one,
        else read on the side (logged).

        - Another one: a new incarnation of the topic (logged, counted, released): its records below the first one
          polled were never handed out (the broker kept the group's old offset), and are still to be read, first.
        - The same one: at the saved position, the partition is released and read on from there; below it, a
          redelivery, skipped up to the saved position (:meth:`decide`).
        - None (gone by retention, or not read): at the saved position, released; below it, compared as it passes.

        Returns the new incarnations' partitions, each with the offset of its first record in ``records``."""
        keys = self.tails.keys() - self._checking
        if assigned is not None:
            keys &= set(assigned)
        if not keys:
            return {}
        firsts: dict[tuple[str, int], RawRecord] = {}
        for record in records:
            key = (record.topic, record.partition)
            if key in keys and key not in firsts:
                firsts[key] = record
                if len(firsts) == len(keys):
                    break
        new: dict[tuple[str, int], int] = {}
        for key, record in firsts.items():
            tail, held = self.tails[key], self.held[key]
            if record.offset > held:
                continue  # past it: released by ``decide``
            self._checking.add(key)
            if record.offset == tail[0]:
                found: RawRecord | None = record
            else:
                log.info(
                    "checking the record before the saved position with a side read",
                    extra={"partition": f"{key[0]}/{key[1]}", "offset": tail[0], "first_polled": record.offset},
                )
                found = read_at(key, tail[0])
            if found is None or found.offset != tail[0] or _same(tail, tail_of(found)):
                if record.offset == held:
                    self.release(key)
                continue
            self._new_incarnation(key, found, tail, read_from=0)
            new[key] = record.offset
        return new

    def release(self, key: tuple[str, int]) -> None:
        """The saved state no longer speaks for this partition: the broker's records are read as they come."""
        self.held.pop(key, None)
        self.committed.pop(key, None)
        self.tails.pop(key, None)
        self._checking.discard(key)

    def _count_went_back(self, key: tuple[str, int], message: str, extra: dict[str, object]) -> None:
        """Count offsets that went back on ``key`` and log ``message`` with the partition and ``extra``."""
        tel.OFFSETS_WENT_BACK_TOTAL.inc(self.state, tel.NoLabels())
        log.warning(message, extra={"partition": f"{key[0]}/{key[1]}", **extra})

    def _new_incarnation(self, key: tuple[str, int], record: RawRecord, tail: Tail, *, read_from: int) -> None:
        """The record at the offset applied last before the saved position is another one: the topic was re-created
        (or the address is another cluster's) and has grown past the saved position. Logged, counted, released; the
        caller reads the partition from ``read_from``."""
        self.release(key)
        self._count_went_back(
            key,
            "offsets went back: the record at the last applied offset is not the one applied there (a re-created "
            "topic, or another cluster at the same address); reading the partition from its start",
            {
                "offset": record.offset,
                "saved": {"timestamp_ms": tail[1], "value_crc32": tail[2]},
                "found": {"timestamp_ms": record.timestamp_ms, "value_crc32": zlib.crc32(record.value)},
                "read_from": read_from,
            },
        )

    def _went_back(self, key: tuple[str, int], offset: int) -> bool:
        """The first record of a partition held from the saved state lies below the position last committed: the
        offsets went back (an operator's reset for reprocessing, a re-created topic, another cluster at the same
        address). The broker's position wins; logged and counted. At or above it, it is a redelivery of what was
        applied but not committed (a crash between save and commit), skipped."""
        committed = self.committed.get(key)
        if committed is None or offset >= committed:
            return False
        self._count_went_back(
            key,
            "offsets went back: the broker hands out records below the position last committed; reading from there "
            "(an operator's reset, a re-created topic, or another cluster at the same address)",
            {
                "first_offset": offset,
                "last_committed": committed,
                "saved_position": self.held[key],
            },
        )
        return True
