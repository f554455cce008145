"""The two kinds of rolling window of :mod:`monitor.rolling.windows`: :class:`TimeWindow` (per-bucket aggregates
of the last span of event time) and :class:`CountWindow` (the last events verbatim), and their read-only summaries
(:class:`WindowSnapshot`, :class:`SignalSummary`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Self

import numpy as np
from numpy.typing import NDArray

from monitor.errors import ConfigError, DataError
from monitor.rolling.signal_batch import SIGNALS, Signal, SignalBatch
from monitor.rolling.sketch import BinGrid

#: class-mix key for predicted classes >= max_classes (time windows only)
OTHER_CLASS: Final = -1
DEFAULT_QUANTILES: Final = (0.5, 0.9, 0.95, 0.99)
_EMPTY_BUCKET: Final = np.iinfo(np.int64).min


@dataclass(frozen=True, slots=True)
class SignalSummary:
    """One signal over one window. ``mean``/``std`` are NaN when ``count`` is 0.

    ``quantiles`` maps q → value: exact for count windows, read from the fixed-bin histogram (accurate
    to one bin) for time windows; empty for ``shadow_disagreement``, a 0/1 rate.
    """

    count: int
    mean: float
    std: float
    quantiles: Mapping[float, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WindowSnapshot:
    """A read-only summary of one window.

    Attributes
    ----------
    name : ``"60s"`` for a time window, ``"last_2000"`` for a count window.
    events : events in the window.
    signals : summary per signal name (``SIGNALS``).
    class_mix : predicted class → fraction of events with a class (-1 collects classes >= max_classes).
    feature_mean, feature_std : (n,) per-feature mean and population std; NaN when the window is empty.
    """

    name: str
    events: int
    signals: Mapping[str, SignalSummary]
    class_mix: Mapping[int, float]
    feature_mean: NDArray[np.float64]
    feature_std: NDArray[np.float64]


def _summary(n: int, s: float, sq: float, quantiles: Mapping[float, float]) -> SignalSummary:
    if n == 0:
        return SignalSummary(0, float("nan"), float("nan"), quantiles)
    mean = s / n
    return SignalSummary(n, mean, float(np.sqrt(max(sq / n - mean * mean, 0.0))), quantiles)


def _class_mix(counts: Mapping[int, int]) -> dict[int, float]:
    total = sum(counts.values())
    return {c: k / total for c, k in sorted(counts.items()) if k > 0} if total else {}


def check_quantiles(quantiles: Sequence[float]) -> tuple[float, ...]:
    """Quantile levels as floats, refused (ConfigError) outside [0, 1]."""
    qs = tuple(float(q) for q in quantiles)
    if not all(0.0 <= q <= 1.0 for q in qs):
        raise ConfigError(f"quantiles must lie in [0, 1]; got {quantiles!r}")
    return qs


def _feature_count(n_features: int) -> int:
    """``n_features`` as an int, refused (ConfigError) below 0."""
    if n_features < 0:
        raise ConfigError(f"n_features must be >= 0; got {n_features!r}")
    return int(n_features)


class PreparedBatch:
    """One batch's signals as the time windows add them, computed once for every time window of a key.

    ``stats`` has one row per event: 1 (the event), then per signal whether it is present, its value (0 when
    missing) and its square, the columns of :class:`TimeWindow`'s per-bucket aggregates, so a window adds them to
    its buckets in one matrix product. :meth:`columns` gives each event's histogram column per signal.
    """

    __slots__ = ("_columns", "_finite", "_values", "stats")

    def __init__(self, batch: SignalBatch) -> None:
        v = np.stack([batch.signal(name) for name in SIGNALS], axis=1)
        finite = np.isfinite(v)
        values = np.where(finite, v, 0.0)
        ones = np.ones((batch.size, 1))
        self.stats = np.concatenate([ones, finite, values, values * values], axis=1)
        self._finite, self._values = finite, values
        self._columns: dict[tuple[int, ...], NDArray[np.intp]] = {}

    def columns(self, grids: Mapping[Signal, BinGrid]) -> NDArray[np.intp]:
        """(events, len(grids)): each event's column in a histogram laid out as ``grids``' bins side by side (the
        first grid's bins first); -1 where the value is missing."""
        key = tuple(id(g) for g in grids.values())
        out = self._columns.get(key)
        if out is None:
            out = np.empty((self._values.shape[0], len(grids)), dtype=np.intp)
            offset = 0
            for j, (name, grid) in enumerate(grids.items()):
                i = SIGNALS.index(name)
                out[:, j] = np.where(self._finite[:, i], grid.index(self._values[:, i]) + offset, -1)
                offset += grid.n_bins
            self._columns[key] = out
        return out


class _Window:
    """What both windows share: :meth:`update` refuses a batch of another feature count, then the window takes it
    (``_take``)."""

    _kind: str
    n_features: int

    def update(self, batch: SignalBatch, prepared: PreparedBatch | None = None) -> Self:
        """Add a batch (how each window keeps it: its ``_take``; ``prepared``: the batch's :class:`PreparedBatch`, shared
        by the caller between time windows).

        Raises
        ------
        DataError
            If the batch's feature count differs from ``n_features``.
        """
        if batch.n_features != self.n_features:
            raise DataError(
                f"{self._kind} window was built for {self.n_features} features; the batch has {batch.n_features}. "
                "Was the feature list changed?"
            )
        self._take(batch, prepared)
        return self

    def _take(self, batch: SignalBatch, prepared: PreparedBatch | None = None) -> None:
        raise NotImplementedError


class TimeWindow(_Window):
    """Aggregates of the last ``window_seconds`` of event time, in ``buckets`` ring slots.

    Parameters
    ----------
    window_seconds : span of the window (> 0).
    n_features : feature count n of the events (>= 0).
    buckets : ring slots; each covers ``window_seconds / buckets`` seconds (the expiry granularity).
    max_classes : predicted classes 0 … max_classes-1 are counted apart; others fold into -1.
    quantiles : which quantiles snapshots report.
    gamma_grid, unit_grid : histogram bins for γ (default log-spaced 1e-6…1e3, 16/decade) and for
        flicker, P_adj, confidence and margin (default 100 bins on [0, 1]).

    Raises
    ------
    ConfigError
        On a non-positive span, too few buckets, negative ``n_features`` or ``max_classes < 1``.

    Examples
    --------
    >>> w = TimeWindow(60.0, n_features=1, buckets=6)
    >>> _ = w.update(SignalBatch.of(features=[[1.0], [3.0]], timestamps_seconds=[0.0, 5.0], gamma=[0.0, 0.2]))
    >>> s = w.snapshot(now_seconds=30.0)
    >>> s.events, s.signals["gamma"].mean, s.feature_mean.tolist()
    (2, 0.1, [2.0])
    >>> w.snapshot(now_seconds=75.0).events  # the 0-10 s bucket has left the 60 s window
    0
    """

    def __init__(
        self,
        window_seconds: float,
        *,
        n_features: int,
        buckets: int = 60,
        max_classes: int = 64,
        quantiles: Sequence[float] = DEFAULT_QUANTILES,
        gamma_grid: BinGrid | None = None,
        unit_grid: BinGrid | None = None,
    ) -> None:
        if not window_seconds > 0 or not np.isfinite(window_seconds):
            raise ConfigError(f"window_seconds must be a finite number > 0; got {window_seconds!r}")
        if buckets < 2:
            raise ConfigError(f"a time window needs buckets >= 2; got {buckets!r}")
        self.n_features = _feature_count(n_features)
        if max_classes < 1:
            raise ConfigError(f"max_classes must be >= 1; got {max_classes!r}")
        self.window_seconds = float(window_seconds)
        self.buckets = int(buckets)
        self.bucket_seconds = self.window_seconds / self.buckets
        self.max_classes = int(max_classes)
        self.quantile_levels = check_quantiles(quantiles)
        unit = unit_grid or BinGrid.unit()
        self.grids: dict[Signal, BinGrid] = {
            "gamma": gamma_grid or BinGrid.log_spaced(),
            "flicker": unit,
            "p_adj": unit,
            "confidence": unit,
            "margin": unit,
        }
        self.reset()

    @property
    def name(self) -> str:
        """``"60s"``-style label."""
        return f"{self.window_seconds:g}s"

    def reset(self) -> None:
        """Forget every event."""
        b, s = self.buckets, len(SIGNALS)
        self._bucket_id = np.full(b, _EMPTY_BUCKET, dtype=np.int64)
        self._newest = _EMPTY_BUCKET
        self._late = 0
        # per bucket: events, then per signal the count of values, their sum and sum of squares (PreparedBatch.stats'
        # columns; counts as floats, exact to 2**53), and the views that name them
        self._stats = np.zeros((b, 1 + 3 * s))
        self._events = self._stats[:, 0]
        self._n = self._stats[:, 1 : 1 + s]
        self._sum = self._stats[:, 1 + s : 1 + 2 * s]
        self._sumsq = self._stats[:, 1 + 2 * s :]
        # every histogram's bins side by side (PreparedBatch.columns), and a view per signal
        widths = [g.n_bins for g in self.grids.values()]
        self._hists = np.zeros((b, sum(widths)), dtype=np.int64)
        edges = np.cumsum([0, *widths]).tolist()
        self._hist = {name: self._hists[:, edges[j] : edges[j + 1]] for j, name in enumerate(self.grids)}
        self._classes = np.zeros((b, self.max_classes + 1), dtype=np.int64)
        # features are summed relative to a shift (the first batch's mean) so sums of squares keep precision
        self._shift: NDArray[np.float64] | None = None
        n = self.n_features
        self._features = np.zeros((b, 2 * n))  # sums, then sums of squares
        self._fsum = self._features[:, :n]
        self._fsq = self._features[:, n:]

    @property
    def late_events(self) -> int:
        """Events dropped because they were older than the window when they arrived."""
        return self._late

    @property
    def nbytes(self) -> int:
        """Bytes held by the ring arrays (constant after construction)."""
        arrays = [self._bucket_id, self._stats, self._hists, self._classes, self._features]
        return int(sum(a.nbytes for a in arrays))

    def _clear(self, slot: NDArray[np.bool_] | int) -> None:
        self._stats[slot] = 0.0
        self._hists[slot] = 0
        self._classes[slot] = 0
        self._features[slot] = 0.0

    _kind = "time"

    def _take(self, batch: SignalBatch, prepared: PreparedBatch | None = None) -> None:
        """Add a batch; events older than the window (relative to the newest event seen) are dropped.

        Whatever buckets the batch spans, each aggregate takes one vectorized update (a bincount or a product with
        the events' one-hot bucket matrix), not one per bucket and signal. ``prepared`` is the batch's
        :class:`PreparedBatch` when the caller shares it between windows (the time windows of one key).
        """
        if batch.size == 0:
            return
        bid = np.floor(batch.timestamps_seconds / self.bucket_seconds).astype(np.int64)
        newest = max(self._newest, int(bid.max()))
        if newest > self._newest:
            self._newest = newest
            self._clear(self._bucket_id <= newest - self.buckets)
        keep = bid > newest - self.buckets
        kept = int(np.count_nonzero(keep))
        self._late += batch.size - kept
        if self._shift is None and self.n_features:
            self._shift = batch.features.mean(axis=0)
        if kept == 0:
            return
        rows: NDArray[np.bool_] | slice = slice(None) if kept == batch.size else keep
        bid = bid[rows]
        first = int(bid.min())
        for b in np.unique(bid).tolist():
            slot = b % self.buckets
            if self._bucket_id[slot] != b:
                self._clear(slot)
                self._bucket_id[slot] = b
        # the span of buckets the batch covers (fewer than ``buckets``: older events were dropped), as at most two
        # runs of ring slots: a bucket in between without events gets zeros
        group = bid - first
        k = int(group.max()) + 1
        prep = prepared if prepared is not None else PreparedBatch(batch)
        onehot = (group[None, :] == np.arange(k)[:, None]).astype(np.float64)  # (k buckets, kept events)
        self._add(first, self._stats, onehot @ prep.stats[rows])
        columns = prep.columns(self.grids)[rows]
        width = self._hists.shape[1]
        flat = (group[:, None] * width + columns)[columns >= 0]
        self._add(first, self._hists, np.bincount(flat, minlength=k * width).reshape(k, width))
        c = batch.predicted_class[rows]
        has = c >= 0
        width = self.max_classes + 1
        flat = group[has] * width + np.minimum(c[has], self.max_classes)
        self._add(first, self._classes, np.bincount(flat, minlength=k * width).reshape(k, width))
        if self.n_features and self._shift is not None:
            x = batch.features[rows] - self._shift
            self._add(first, self._features, onehot @ np.concatenate([x, x * x], axis=1))

    def _add(self, first: int, ring: NDArray[Any], per_bucket: NDArray[Any]) -> None:
        """Add ``per_bucket`` (row j: bucket ``first + j``) to the ring's slots, as one or two slices (where the
        span wraps around the ring): slices, not an index array, which would copy the ring's rows out and back."""
        start = first % self.buckets
        head = min(per_bucket.shape[0], self.buckets - start)
        ring[start : start + head] += per_bucket[:head]
        if head < per_bucket.shape[0]:
            ring[: per_bucket.shape[0] - head] += per_bucket[head:]

    def snapshot(self, now_seconds: float) -> WindowSnapshot:
        """Summary of the buckets within ``window_seconds`` before ``now_seconds`` (a passed-in clock)."""
        now_bucket = int(np.floor(now_seconds / self.bucket_seconds))
        live = (self._bucket_id > now_bucket - self.buckets) & (self._bucket_id != _EMPTY_BUCKET)
        n = self._n[live].sum(axis=0)
        s = self._sum[live].sum(axis=0)
        sq = self._sumsq[live].sum(axis=0)
        signals: dict[str, SignalSummary] = {}
        for i, name in enumerate(SIGNALS):
            qs: dict[float, float] = {}
            if name in self._hist and n[i] > 0:
                values = self.grids[name].quantiles(self._hist[name][live].sum(axis=0), self.quantile_levels)
                qs = dict(zip(self.quantile_levels, values.tolist(), strict=True))
            signals[name] = _summary(int(n[i]), float(s[i]), float(sq[i]), qs)
        classes = self._classes[live].sum(axis=0)
        mix = {c: int(k) for c, k in enumerate(classes[: self.max_classes].tolist())}
        mix[OTHER_CLASS] = int(classes[self.max_classes])
        events = int(self._events[live].sum())
        if events and self._shift is not None:
            fm = self._fsum[live].sum(axis=0) / events
            fv = np.maximum(self._fsq[live].sum(axis=0) / events - fm * fm, 0.0)
            mean, std = self._shift + fm, np.sqrt(fv)
        else:
            mean = std = np.full(self.n_features, np.nan)
        return WindowSnapshot(self.name, events, signals, _class_mix(mix), mean, std)


class CountWindow(_Window):
    """The last ``size`` events verbatim, in arrival order (bounded: size × (n + 7) numbers).

    Parameters
    ----------
    size : events kept (>= 2).
    n_features : feature count n (>= 0).
    quantiles : which quantiles snapshots report (exact, from the kept values).

    Examples
    --------
    >>> w = CountWindow(3, n_features=1)
    >>> _ = w.update(SignalBatch.of(features=[[0.0]] * 4, timestamps_seconds=0.0, gamma=[1, 2, 3, 4]))
    >>> w.values("gamma").tolist(), w.snapshot().events
    ([2.0, 3.0, 4.0], 3)
    """

    def __init__(self, size: int = 2000, *, n_features: int, quantiles: Sequence[float] = DEFAULT_QUANTILES) -> None:
        if size < 2:
            raise ConfigError(f"a count window needs size >= 2; got {size!r}")
        self.n_features = _feature_count(n_features)
        self.size = int(size)
        self.quantile_levels = check_quantiles(quantiles)
        self.reset()

    @property
    def name(self) -> str:
        """``"last_2000"``-style label."""
        return f"last_{self.size}"

    def reset(self) -> None:
        """Forget every event."""
        self._pos = 0
        self._filled = 0
        self._signals = np.full((len(SIGNALS), self.size), np.nan)
        self._classes = np.full(self.size, -1, dtype=np.int64)
        self._features = np.zeros((self.size, self.n_features))

    @property
    def events(self) -> int:
        """Events currently held (<= size)."""
        return self._filled

    @property
    def nbytes(self) -> int:
        """Bytes held by the ring arrays (constant after construction)."""
        return int(self._signals.nbytes + self._classes.nbytes + self._features.nbytes)

    _kind = "count"

    def _take(self, batch: SignalBatch, prepared: PreparedBatch | None = None) -> None:
        """Append a batch (only its last ``size`` events matter)."""
        tail = batch.take(np.arange(max(0, batch.size - self.size), batch.size))
        idx = (self._pos + np.arange(tail.size)) % self.size
        for i, name in enumerate(SIGNALS):
            self._signals[i, idx] = tail.signal(name)
        self._classes[idx] = tail.predicted_class
        self._features[idx] = tail.features
        self._pos = (self._pos + tail.size) % self.size
        self._filled = min(self.size, self._filled + tail.size)

    def _order(self) -> NDArray[np.intp]:
        if self._filled < self.size:
            return np.arange(self._filled)
        return (self._pos + np.arange(self.size)) % self.size

    def values(self, signal: Signal) -> NDArray[np.float64]:
        """The kept values of one signal, oldest first, missing (NaN) ones left out: a KS sample."""
        v = np.asarray(self._signals[SIGNALS.index(signal)][self._order()], dtype=np.float64)
        return v[np.isfinite(v)]

    def features(self) -> NDArray[np.float64]:
        """The kept feature rows, oldest first, shape (events, n): per-feature KS samples."""
        return self._features[self._order()].copy()

    def predicted_classes(self) -> NDArray[np.int64]:
        """The kept predicted classes, oldest first (-1 = none)."""
        return self._classes[self._order()].copy()

    def snapshot(self) -> WindowSnapshot:
        """Summary of the kept events (exact quantiles)."""
        signals: dict[str, SignalSummary] = {}
        for name in SIGNALS:
            v = self.values(name)
            qs: dict[float, float] = {}
            if v.size and name != "shadow_disagreement":
                qs = dict(zip(self.quantile_levels, np.quantile(v, self.quantile_levels).tolist(), strict=True))
            signals[name] = _summary(int(v.size), float(v.sum()), float(np.dot(v, v)), qs)
        classes, counts = np.unique(self.predicted_classes(), return_counts=True)
        mix = {int(c): int(k) for c, k in zip(classes, counts, strict=True) if c >= 0}
        x = self.features()
        if self._filled:
            mean, std = x.mean(axis=0), x.std(axis=0)
        else:
            mean = std = np.full(self.n_features, np.nan)
        return WindowSnapshot(self.name, self._filled, signals, _class_mix(mix), mean, std)
