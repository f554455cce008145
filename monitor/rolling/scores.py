"""Stage 5a: bounded per-event score samples per window, for the label-free accuracy estimate.

The windows of :mod:`monitor.rolling.windows` keep time windows as per-bucket aggregates, which is enough for means
and quantiles but not for an accuracy estimator: ATC counts rows above a threshold, the ``harmonic`` estimator
predicts per row from (confidence, γ, flicker, P_adj). :class:`ScoreSamples` keeps those four numbers per event,
bounded, for the same windows (same names, same segments as the caller's :class:`~monitor.rolling.windows.WindowSet`):

- a time window of span T keeps, in each of its ``buckets`` ring slots (T / buckets seconds of event time), a
  uniform sample of at most :data:`OVERSAMPLE` × ``capacity / buckets`` of the slot's events (bottom-k of a random
  key per event, so a slot's sample merges batch by batch), and how many events the slot saw; a kept row weighs
  seen / kept, so the weighted sample stands for the whole window whatever the event rate. Reading thins the live
  slots' rows to at most ``capacity`` (a uniform subset, weights scaled by the inverse of the share kept), so that
  traffic crowded into few slots (a start, a burst) still gets up to ``capacity`` rows;
- the count window keeps its last ``count_size`` events verbatim, weight 1.

Memory: segments × (spans × OVERSAMPLE × capacity + count_size) × 5 numbers. Nothing here reads a clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray

from monitor.drift.base import WindowBuffer
from monitor.errors import ConfigError

#: the per-event scores kept, in column order
FIELDS: Final = ("confidence", "gamma", "flicker", "p_adj")
_EMPTY: Final = np.iinfo(np.int64).min
#: a time slot keeps up to this many times its even share of the capacity
OVERSAMPLE: Final = 4


@dataclass(frozen=True, slots=True)
class ScoreRows:
    """The rows a window holds: ``values`` (n, 4) in :data:`FIELDS` order, ``weights`` (n,) (1 for verbatim
    rows, seen / kept for a sampled time bucket's rows)."""

    values: NDArray[np.float64]
    weights: NDArray[np.float64]

    @property
    def n(self) -> int:
        return int(self.values.shape[0])

    @property
    def events(self) -> int:
        """How many events the rows stand for (the sum of the weights, rounded)."""
        return int(round(float(self.weights.sum()))) if self.n else 0

    def column(self, name: str) -> NDArray[np.float64]:
        return self.values[:, FIELDS.index(name)]


class TimeSample:
    """A uniform sample of each ``window_seconds / buckets`` slot of event time, at most ``capacity`` rows in all."""

    def __init__(
        self,
        window_seconds: float,
        *,
        buckets: int,
        capacity: int,
        seed: int = 0,  # not a setting: the reservoir's seed; run never seeds it from scoring.seed
        width: int = len(FIELDS),
    ) -> None:
        if not window_seconds > 0 or not math.isfinite(window_seconds):
            raise ConfigError(f"window_seconds must be a finite number > 0; got {window_seconds!r}")
        if buckets < 2 or capacity < 1:
            raise ConfigError(f"a time sample needs buckets >= 2 and capacity >= 1; got {buckets}, {capacity}")
        self.window_seconds = float(window_seconds)
        self.buckets = int(buckets)
        self.bucket_seconds = self.window_seconds / self.buckets
        self.capacity = int(capacity)
        self.per_bucket = max(1, math.ceil(OVERSAMPLE * capacity / self.buckets))
        self._rng = np.random.default_rng([seed, 0x5C0E])
        self._bucket_id = np.full(self.buckets, _EMPTY, dtype=np.int64)
        self._seen = np.zeros(self.buckets, dtype=np.int64)
        self._keys = np.full((self.buckets, self.per_bucket), np.inf)
        self.width = int(width)
        self._values = np.full((self.buckets, self.per_bucket, self.width), np.nan)
        self._newest = _EMPTY

    @property
    def name(self) -> str:
        """The matching time window's name (``"60s"``)."""
        return f"{self.window_seconds:g}s"

    @property
    def nbytes(self) -> int:
        return int(self._bucket_id.nbytes + self._seen.nbytes + self._keys.nbytes + self._values.nbytes)

    def _clear(self, slot: int | NDArray[np.bool_]) -> None:
        self._seen[slot] = 0
        self._keys[slot] = np.inf
        self._values[slot] = np.nan

    def update(self, timestamps_seconds: NDArray[np.float64], values: NDArray[np.float64]) -> None:
        """Add rows (``values`` (b, 4)) at their event times; rows older than the window are dropped."""
        if timestamps_seconds.shape[0] == 0:
            return
        bid = np.floor(timestamps_seconds / self.bucket_seconds).astype(np.int64)
        newest = max(self._newest, int(bid.max()))
        if newest > self._newest:
            self._newest = newest
            stale = self._bucket_id <= newest - self.buckets
            self._clear(stale)
            self._bucket_id[stale] = _EMPTY
        keep = bid > newest - self.buckets
        for b in np.unique(bid[keep]).tolist():
            slot = b % self.buckets
            if self._bucket_id[slot] != b:
                self._clear(slot)
                self._bucket_id[slot] = b
            rows = values[bid == b]
            keys = np.concatenate([self._keys[slot], self._rng.random(rows.shape[0])])
            pool = np.concatenate([self._values[slot], rows])
            pick = np.argsort(keys, kind="stable")[: self.per_bucket]
            self._keys[slot] = keys[pick]
            self._values[slot] = pool[pick]
            self._seen[slot] += rows.shape[0]

    def rows(self, now_seconds: float) -> ScoreRows:
        """The sampled rows of the buckets within ``window_seconds`` before ``now_seconds``, weighted."""
        now_bucket = math.floor(now_seconds / self.bucket_seconds)
        live = (self._bucket_id > now_bucket - self.buckets) & (self._bucket_id != _EMPTY) & (self._seen > 0)
        parts: list[NDArray[np.float64]] = []
        weights: list[NDArray[np.float64]] = []
        for slot in np.flatnonzero(live).tolist():
            kept = np.isfinite(self._keys[slot])
            k = int(kept.sum())
            parts.append(self._values[slot][kept])
            weights.append(np.full(k, self._seen[slot] / k))
        if not parts:
            return ScoreRows(np.empty((0, self.width)), np.empty(0))
        values, w = np.concatenate(parts), np.concatenate(weights)
        if values.shape[0] > self.capacity:
            pick = np.sort(self._rng.choice(values.shape[0], self.capacity, replace=False))
            values, w = values[pick], w[pick] * (values.shape[0] / self.capacity)
        return ScoreRows(values, w)


class CountSample:
    """The last ``size`` rows verbatim."""

    def __init__(self, size: int, width: int = len(FIELDS)) -> None:
        if size < 1:
            raise ConfigError(f"a count sample needs size >= 1; got {size}")
        self.size = int(size)
        self._ring = WindowBuffer(self.size, width)

    @property
    def name(self) -> str:
        """The matching count window's name (``"last_2000"``)."""
        return f"last_{self.size}"

    @property
    def nbytes(self) -> int:
        return self._ring.nbytes

    def update(self, values: NDArray[np.float64]) -> None:
        self._ring.extend(values)

    def rows(self) -> ScoreRows:
        return ScoreRows(self._ring.values(), np.ones(self._ring.filled))


class ScoreSamples:
    """Per segment, a :class:`TimeSample` per time window span and a :class:`CountSample`.

    Parameters
    ----------
    window_seconds : the time windows' spans (the WindowSet's).
    count_size : the count window's size.
    capacity : rows each time window keeps at most.
    buckets : ring slots per time window (the WindowSet's).
    """

    def __init__(
        self,
        *,
        window_seconds: Sequence[float],
        count_size: int,
        capacity: int,
        buckets: int = 60,
        seed: int = 0,  # not a setting: as TimeSample's
        width: int = len(FIELDS),
    ) -> None:
        self.window_seconds = tuple(sorted(float(s) for s in window_seconds))
        self.count_size = int(count_size)
        self.capacity = int(capacity)
        self.buckets = int(buckets)
        self.seed = seed
        #: numbers kept per event: the four :data:`FIELDS`, or a regressor's inputs and output (``width`` columns)
        self.width = int(width)
        self._segments: dict[str, tuple[list[TimeSample], CountSample]] = {}

    @property
    def segments(self) -> tuple[str, ...]:
        return tuple(self._segments)

    @property
    def nbytes(self) -> int:
        return sum(c.nbytes + sum(t.nbytes for t in ts) for ts, c in self._segments.values())

    def update(self, segment: str, timestamps_seconds: NDArray[np.float64], values: NDArray[np.float64]) -> None:
        """Add one segment's rows (``values`` (b, 4) in :data:`FIELDS` order)."""
        entry = self._segments.get(segment)
        if entry is None:
            seed = self.seed + len(self._segments)
            entry = self._segments[segment] = (
                [
                    TimeSample(s, buckets=self.buckets, capacity=self.capacity, seed=seed + i, width=self.width)
                    for i, s in enumerate(self.window_seconds)
                ],
                CountSample(self.count_size, self.width),
            )
        times, count = entry
        for t in times:
            t.update(timestamps_seconds, values)
        count.update(values)

    def rows(self, segment: str, now_seconds: float) -> dict[str, ScoreRows]:
        """Every window's rows of one segment, by window name; empty when the segment has none."""
        entry = self._segments.get(segment)
        if entry is None:
            return {}
        times, count = entry
        out = {t.name: t.rows(now_seconds) for t in times}
        out[count.name] = count.rows()
        return out
