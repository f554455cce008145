"""Recovery after an unclean exit: which records are re-processed one at a time, and which are poison.

Before it processes a poll, the pipeline writes an in-flight marker (:class:`~monitor.runtime.state.InFlight`)
naming the offsets it holds; a clean flush removes it. A marker found at start-up means the previous process died
with those records in flight: each partition that had records in flight is re-read one record at a time (careful
mode) up to the last offset then in flight, so that a record that kills the process again is seen alone. A record
in flight alone at :data:`CRASHES_ALONE` consecutive crashes, and in flight at the crash before them too, is poison:
it is dead-lettered as ``crashed_processing`` without processing. One crash with a record alone in flight is not
enough: a kill from outside (a rollout, a crash-looping pod's liveness probe) can land on any record, while a
record that crashes the process does it every time it is processed. Careful mode ends per partition when its records have been read again,
or when the partition is revoked (its next owner has no marker of ours).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from monitor.runtime.state import InFlight
from monitor.source.base import RawRecord

#: each partition's first and last record in a poll: :func:`monitor.source.base.partition_spans`
Spans = dict[tuple[str, int], tuple[RawRecord, RawRecord]]

log = logging.getLogger("monitor.runtime.pipeline")

Partition = tuple[str, int]
#: (topic, partition, offset)
Record = tuple[str, int, int]

#: consecutive crashes with a record alone in flight that make it poison
CRASHES_ALONE = 2


class CrashRecovery:
    """The in-flight marker of this process, and the re-processing plan left by the previous one."""

    def __init__(self, state_dir: Path) -> None:
        self.inflight = InFlight(state_dir)
        #: [first, last] offsets per partition of the records polled but not yet applied (what the marker names)
        self.unapplied: dict[Partition, list[int]] = {}
        #: after an unclean exit: per partition, the last offset that was in flight (processed one at a time)
        self.careful_until: dict[Partition, int] = {}
        #: per partition, the [first, last] offsets in flight at that unclean exit: a record processed alone that is
        #: in flight at the next crash too is poison only when it lies in these (it was in flight at both)
        self.suspects: dict[Partition, tuple[int, int]] = {}
        #: per record in flight at the first crash: the consecutive crashes since with it alone in flight
        self.strikes: dict[Record, int] = {}
        #: records alone in flight at CRASHES_ALONE consecutive crashes: dead-lettered without processing
        self.poison: set[Record] = set()
        self._plan(self.inflight.load())

    def _plan(self, marker: dict[str, Any] | None) -> None:
        """Plan the re-processing of what the previous process had in flight when it died."""
        if marker is None:
            return
        ranges = _ranges(marker.get("ranges", {}))
        careful = _ranges(marker.get("careful_until", {}))
        if marker.get("careful"):
            # it died again while one record was processed alone: that record crashed it twice, if it was in flight
            # at the crash before too (a marker without suspects: every record it processed alone was)
            suspects = (
                _ranges(marker["suspects"])
                if "suspects" in marker
                else {k: (0, last) for k, (_, last) in careful.items()}
            )
            earlier = _strikes(marker.get("strikes", {}))
            self.strikes = {
                (t, p, first): earlier.get((t, p, first), 0) + 1
                for (t, p), (first, last) in ranges.items()
                if first == last and (t, p) in suspects and suspects[(t, p)][0] <= first <= suspects[(t, p)][1]
            }
            self.poison = {record for record, crashes in self.strikes.items() if crashes >= CRASHES_ALONE}
            self.careful_until = {key: last for key, (_, last) in careful.items()}
            self.suspects = {key: suspects[key] for key in self.careful_until if key in suspects}
        else:
            self.careful_until = {key: last for key, (_, last) in ranges.items()}
            self.suspects = dict(ranges)
        log.warning(
            "the previous process stopped while processing records; re-processing them one at a time",
            extra={
                "in_flight": {f"{t}/{p}": list(r) for (t, p), r in ranges.items()},
                "dead_lettered": [f"{t}/{p}/{o}" for t, p, o in sorted(self.poison)],
                "crashes_alone": {f"{t}/{p}/{o}": n for (t, p, o), n in sorted(self.strikes.items())},
            },
        )

    def split(self, records: list[RawRecord]) -> tuple[list[RawRecord], list[RawRecord]]:
        """``records`` as (those of partitions in careful mode, the rest), each in poll order."""
        if not self.careful_until:
            return [], records
        careful = [r for r in records if (r.topic, r.partition) in self.careful_until]
        if not careful:
            return [], records
        return careful, [r for r in records if (r.topic, r.partition) not in self.careful_until]

    def is_poison(self, record: RawRecord) -> bool:
        return bool(self.poison) and (record.topic, record.partition, record.offset) in self.poison

    def begin(self, records: Sequence[RawRecord], spans: Spans, careful: bool) -> None:
        """Write the marker before ``records`` are processed (one record alone when ``careful``); ``spans``: their
        :func:`~monitor.source.base.partition_spans`."""
        unapplied = self.unapplied
        for key, (first, last) in spans.items():
            span = unapplied.get(key)
            if span is None:
                unapplied[key] = [first.offset, last.offset]
            else:
                span[1] = last.offset
        if careful:  # one record alone: the marker names it, and keeps the rest of the range still to re-process
            ranges = {f"{r.topic}/{r.partition}": [r.offset, r.offset] for r in records}
            marker: dict[str, Any] = {"ranges": ranges, "careful": True}
            marker["careful_until"] = {f"{t}/{p}": [o, o] for (t, p), o in self.careful_until.items()}
            marker["suspects"] = {f"{t}/{p}": list(span) for (t, p), span in self.suspects.items()}
            if self.strikes:
                marker["strikes"] = {f"{t}/{p}/{o}": n for (t, p, o), n in self.strikes.items()}
        else:
            marker = {"ranges": {f"{t}/{p}": list(span) for (t, p), span in self.unapplied.items()}, "careful": False}
        self.inflight.write(marker)

    def processed(self, record: RawRecord) -> None:
        """``record`` went through: its partition leaves careful mode once the last offset then in flight has."""
        key = (record.topic, record.partition)
        if key in self.careful_until and record.offset >= self.careful_until[key]:
            self.end([key], "its records in flight at the unclean exit are re-processed")

    def applied(self) -> None:
        """Everything polled is applied: no record is in flight any more."""
        self.unapplied.clear()
        self.inflight.clear()

    def end(self, keys: Sequence[Partition], why: str) -> None:
        """These partitions go back to whole batches (logged; ``harmonic_degraded{reason="recovery"}`` follows)."""
        for key in keys:
            until = self.careful_until.pop(key, None)
            self.suspects.pop(key, None)
            if until is not None:
                log.info(
                    "recovery mode ended for a partition: its records are processed in batches again",
                    extra={"partition": f"{key[0]}/{key[1]}", "until_offset": until, "why": why},
                )

    def degraded(self) -> str | None:
        """What readiness says while partitions are in careful mode (None when none is)."""
        if not self.careful_until:
            return None
        parts = ", ".join(f"{t}/{p} up to offset {o}" for (t, p), o in sorted(self.careful_until.items()))
        return (
            f"after an unclean exit, the records then in flight are re-processed one at a time ({parts}); it "
            "ends by itself when they are read again or the partitions are revoked"
        )


def _ranges(raw: object) -> dict[Partition, tuple[int, int]]:
    """Marker ranges {"topic/partition": [first, last]} as {(topic, partition): (first, last)}; bad rows dropped."""
    out: dict[Partition, tuple[int, int]] = {}
    if not isinstance(raw, dict):
        return out
    for key, value in raw.items():
        topic, _, partition = str(key).rpartition("/")
        if (
            topic
            and partition.isdigit()
            and isinstance(value, list)
            and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        ):
            out[(topic, int(partition))] = (value[0], value[1])
    return out


def _strikes(raw: object) -> dict[Record, int]:
    """Marker strikes {"topic/partition/offset": crashes} as {(topic, partition, offset): crashes}; bad rows dropped."""
    out: dict[Record, int] = {}
    if not isinstance(raw, dict):
        return out
    for key, value in raw.items():
        topic, _, rest = str(key).rpartition("/")
        topic, _, partition = topic.rpartition("/")
        if topic and partition.isdigit() and rest.isdigit() and isinstance(value, int) and not isinstance(value, bool):
            out[(topic, int(partition), int(rest))] = value
    return out
