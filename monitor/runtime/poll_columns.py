"""One model's events of one poll as columns: the events decoded one by one, then those decoded as columns.

:class:`PollColumns` is what :class:`~monitor.runtime.scoring.Scoring` shadow-checks and samples without an object per
event: the live labels, and the feature rows of the events it asks for. An event becomes an
:class:`~monitor.events.InferenceEvent` only when asked for (:meth:`PollColumns.event`: the sampler keeps or holds it),
once: the same object each time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.events import InferenceEvent, feature_rows
from monitor.source.base import RawRecord
from monitor.source.columns import EventColumns


class PollColumns:
    """``items`` (events with their records) followed by the rows of ``columns`` (each with the poll's records)."""

    def __init__(
        self,
        items: Sequence[tuple[InferenceEvent, RawRecord | None]],
        columns: Sequence[tuple[EventColumns, Sequence[RawRecord]]],
    ) -> None:
        self.items = items
        self.columns = columns
        #: where each part starts: items at 0, then each columns block
        self.starts = np.cumsum([len(items), *(len(c) for c, _ in columns)])
        self._events: dict[int, InferenceEvent] = {}

    def __len__(self) -> int:
        return int(self.starts[-1])

    def _part(self, i: int) -> tuple[int, int]:
        """(block, row in it) of event ``i`` (block -1: the items)."""
        if i < len(self.items):
            return -1, i
        b = int(np.searchsorted(self.starts, i, side="right")) - 1
        return b, i - int(self.starts[b])

    def event(self, i: int) -> InferenceEvent:
        """Event ``i``, made on first call."""
        event = self._events.get(i)
        if event is None:
            b, j = self._part(i)
            if b < 0:
                event = self.items[j][0]
            else:
                cols, records = self.columns[b]
                event = cols.event(j, records[int(cols.rows[j])].origin)
            self._events[i] = event
        return event

    def made(self) -> list[tuple[int, InferenceEvent]]:
        """The events made so far, by position."""
        return list(self._events.items())

    def record(self, i: int) -> RawRecord | None:
        b, j = self._part(i)
        if b < 0:
            return self.items[j][1]
        cols, records = self.columns[b]
        return records[int(cols.rows[j])]

    def labels(self) -> tuple[list[int | None], NDArray[np.bool_]]:
        """Each event's live label (None: none), and whether it has one."""
        out: list[int | None] = [None if ev.prediction is None else ev.prediction.label for ev, _ in self.items]
        has = [np.array([x is not None for x in out], dtype=np.bool_)]
        for cols, _ in self.columns:
            labels: list[Any] = cols.labels.tolist()
            if not cols.has_label.all():
                labels = [x if h else None for x, h in zip(labels, cols.has_label.tolist(), strict=True)]
            out.extend(labels)
            has.append(cols.has_label)
        return out, np.concatenate(has) if len(has) > 1 else has[0]

    def label_array(self) -> tuple[NDArray[np.int64], NDArray[np.bool_]] | None:
        """Each event's live label as one int64 array (0 where none) and whether it has one, when every event is in
        the columns (None when events decoded one by one come first: their labels may be of any type)."""
        if self.items or not self.columns:
            return None
        if len(self.columns) == 1:
            cols = self.columns[0][0]
            return cols.labels, cols.has_label
        return (
            np.concatenate([c.labels for c, _ in self.columns]),
            np.concatenate([c.has_label for c, _ in self.columns]),
        )

    def rows(self, idx: NDArray[np.intp], dtype: type[np.floating[Any]]) -> NDArray[Any]:
        """The feature rows of events ``idx`` (ascending), as one array of ``dtype``."""
        n_items = len(self.items)
        parts: list[NDArray[Any]] = []
        head = idx[idx < n_items].tolist()
        if head:
            parts.append(feature_rows([self.items[i][0] for i in head], dtype))
        for b, (cols, _) in enumerate(self.columns):
            lo, hi = int(self.starts[b]), int(self.starts[b + 1])
            mine = idx[(idx >= lo) & (idx < hi)] - lo
            if mine.size:
                parts.append(cols.features[mine].astype(dtype))
        return parts[0] if len(parts) == 1 else np.concatenate(parts)
