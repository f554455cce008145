"""Stage 5a: rolling time and count windows of the per-event signals, per model and segment.

Every scored event carries γ, flicker, P_adj, shadow disagreement (0/1), the model's confidence and margin
(classifiers), the predicted class and its input features. A :class:`WindowSet` keeps, for each (model, segment) key,

- one :class:`TimeWindow` per span (default 60 s, 300 s, 3600 s): a ring of ``buckets`` per-bucket
  aggregates (counts, sums, sums of squares, fixed-bin histograms, class counts, per-feature sums), so
  memory is O(buckets × bins + buckets × features) whatever the event rate;
- one :class:`CountWindow`: the last ``count_size`` events verbatim (exact quantiles, KS samples).

Time comes only from the events' timestamps (``SignalBatch.timestamps_seconds``) and the ``now_seconds``
passed to :meth:`WindowSet.snapshot`; nothing here reads a clock. Missing signals are NaN (no live
prediction → no shadow value) and a predicted class of -1 means "none". The number of keys is capped:
segments beyond ``max_segments`` per model (and models beyond ``max_models``) fold into ``"other"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Self

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.errors import ConfigError, DataError
from monitor.rolling.sketch import BinGrid

Signal = Literal["gamma", "flicker", "p_adj", "shadow_disagreement", "confidence", "margin"]
SIGNALS: Final[tuple[Signal, ...]] = ("gamma", "flicker", "p_adj", "shadow_disagreement", "confidence", "margin")
OTHER: Final = "other"
#: class-mix key for predicted classes >= max_classes (time windows only)
OTHER_CLASS: Final = -1
DEFAULT_QUANTILES: Final = (0.5, 0.9, 0.95, 0.99)
_EMPTY_BUCKET: Final = np.iinfo(np.int64).min


def _signal_array(name: str, values: ArrayLike | None, size: int) -> NDArray[np.float64]:
    if values is None:
        return np.full(size, np.nan)
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    if arr.size != size:
        raise DataError(f"signal '{name}' has {arr.size} values but the batch has {size} events")
    return arr


@dataclass(frozen=True, slots=True)
class SignalBatch:
    """The per-event signals of one micro-batch of one model; row i of every array is event i.

    Build it with :meth:`of`, which checks shapes. Attributes: ``timestamps_seconds`` (b,);
    ``gamma``, ``flicker``, ``p_adj``, ``shadow_disagreement``, ``confidence`` (the model's max-probability; NaN
    for a regressor), ``margin`` (top-1 minus top-2 class probability; NaN for a regressor) (b,) float64,
    NaN = missing;
    ``predicted_class`` (b,) int64, -1 = missing; ``features`` (b, n) float64 raw units;
    ``segments`` (b,) str.
    """

    timestamps_seconds: NDArray[np.float64]
    gamma: NDArray[np.float64]
    flicker: NDArray[np.float64]
    p_adj: NDArray[np.float64]
    shadow_disagreement: NDArray[np.float64]
    predicted_class: NDArray[np.int64]
    features: NDArray[np.float64]
    segments: NDArray[np.str_]
    confidence: NDArray[np.float64]
    margin: NDArray[np.float64]

    @classmethod
    def of(
        cls,
        *,
        features: ArrayLike,
        timestamps_seconds: float | ArrayLike,
        gamma: ArrayLike | None = None,
        flicker: ArrayLike | None = None,
        p_adj: ArrayLike | None = None,
        shadow_disagreement: ArrayLike | None = None,
        predicted_class: ArrayLike | None = None,
        segment: str | Sequence[str] = OTHER,
        confidence: ArrayLike | None = None,
        margin: ArrayLike | None = None,
    ) -> SignalBatch:
        """Validate and pack one batch.

        Parameters
        ----------
        features : (b, n) raw feature values; b sets the batch size.
        timestamps_seconds : one event time for the whole batch, or (b,) per-event times (epoch seconds).
        gamma, flicker, p_adj, shadow_disagreement : (b,) or None (all missing).
        predicted_class : (b,) ints or None.
        segment : one segment for the batch or (b,) per-event segments.
        confidence : (b,) max-probability or None (all missing).
        margin : (b,) top-1 minus top-2 class probability or None (all missing).

        Raises
        ------
        DataError
            If a shape disagrees with ``features`` or a timestamp is not finite.

        >>> b = SignalBatch.of(features=np.zeros((2, 3)), timestamps_seconds=10.0, gamma=[0.0, 0.1])
        >>> b.size, b.flicker.tolist(), b.segments.tolist()
        (2, [nan, nan], ['other', 'other'])
        """
        x = np.asarray(features, dtype=np.float64)
        if x.ndim != 2:
            raise DataError(f"features must be a 2-D array (events × features); got shape {x.shape}")
        size = x.shape[0]
        ts = np.asarray(timestamps_seconds, dtype=np.float64).reshape(-1)
        if ts.size == 1:
            ts = np.full(size, ts[0])
        if ts.size != size:
            raise DataError(f"timestamps_seconds has {ts.size} values but the batch has {size} events")
        if not np.all(np.isfinite(ts)):
            raise DataError("timestamps_seconds has NaN or infinite values; events need a valid time")
        pc = (
            np.full(size, -1, dtype=np.int64)
            if predicted_class is None
            else np.asarray(predicted_class, dtype=np.int64).reshape(-1)
        )
        if pc.size != size:
            raise DataError(f"predicted_class has {pc.size} values but the batch has {size} events")
        seg = np.full(size, segment) if isinstance(segment, str) else np.asarray(segment, dtype=np.str_)
        if seg.shape != (size,):
            raise DataError(f"segment has {seg.size} values but the batch has {size} events")
        return cls(
            timestamps_seconds=ts,
            gamma=_signal_array("gamma", gamma, size),
            flicker=_signal_array("flicker", flicker, size),
            p_adj=_signal_array("p_adj", p_adj, size),
            shadow_disagreement=_signal_array("shadow_disagreement", shadow_disagreement, size),
            predicted_class=pc,
            features=x,
            segments=seg.astype(np.str_),
            confidence=_signal_array("confidence", confidence, size),
            margin=_signal_array("margin", margin, size),
        )

    @property
    def size(self) -> int:
        """Number of events b."""
        return int(self.timestamps_seconds.size)

    @property
    def n_features(self) -> int:
        """Number of input features n."""
        return int(self.features.shape[1])

    def signal(self, name: Signal) -> NDArray[np.float64]:
        """The (b,) array of one signal."""
        arr: NDArray[np.float64] = getattr(self, name)
        return arr

    def take(self, rows: NDArray[np.intp] | NDArray[np.bool_]) -> SignalBatch:
        """The sub-batch of the given rows (an index array or a boolean mask)."""
        return SignalBatch(
            timestamps_seconds=self.timestamps_seconds[rows],
            gamma=self.gamma[rows],
            flicker=self.flicker[rows],
            p_adj=self.p_adj[rows],
            shadow_disagreement=self.shadow_disagreement[rows],
            predicted_class=self.predicted_class[rows],
            features=self.features[rows],
            segments=self.segments[rows],
            confidence=self.confidence[rows],
            margin=self.margin[rows],
        )


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


def _check_quantiles(quantiles: Sequence[float]) -> tuple[float, ...]:
    qs = tuple(float(q) for q in quantiles)
    if not all(0.0 <= q <= 1.0 for q in qs):
        raise ConfigError(f"quantiles must lie in [0, 1]; got {quantiles!r}")
    return qs


def _feature_count(n_features: int) -> int:
    """``n_features`` as an int, refused (ConfigError) below 0."""
    if n_features < 0:
        raise ConfigError(f"n_features must be >= 0; got {n_features!r}")
    return int(n_features)


class _Prepared:
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

    def update(self, batch: SignalBatch, prepared: _Prepared | None = None) -> Self:
        """Add a batch (how each window keeps it: its ``_take``; ``prepared``: the batch's :class:`_Prepared`, shared
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

    def _take(self, batch: SignalBatch, prepared: _Prepared | None = None) -> None:
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
        self.quantile_levels = _check_quantiles(quantiles)
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
        # per bucket: events, then per signal the count of values, their sum and sum of squares (_Prepared.stats'
        # columns; counts as floats, exact to 2**53), and the views that name them
        self._stats = np.zeros((b, 1 + 3 * s))
        self._events = self._stats[:, 0]
        self._n = self._stats[:, 1 : 1 + s]
        self._sum = self._stats[:, 1 + s : 1 + 2 * s]
        self._sumsq = self._stats[:, 1 + 2 * s :]
        # every histogram's bins side by side (_Prepared.columns), and a view per signal
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

    def _take(self, batch: SignalBatch, prepared: _Prepared | None = None) -> None:
        """Add a batch; events older than the window (relative to the newest event seen) are dropped.

        Whatever buckets the batch spans, each aggregate takes one vectorized update (a bincount or a product with
        the events' one-hot bucket matrix), not one per bucket and signal. ``prepared`` is the batch's
        :class:`_Prepared` when the caller shares it between windows (the time windows of one key).
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
        prep = prepared if prepared is not None else _Prepared(batch)
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
        self.quantile_levels = _check_quantiles(quantiles)
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

    def _take(self, batch: SignalBatch, prepared: _Prepared | None = None) -> None:
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


class _KeyWindows:
    """The time windows and the count window of one (model, segment) key."""

    def __init__(self, owner: WindowSet, n_features: int) -> None:
        self.time = [
            TimeWindow(
                s,
                n_features=n_features,
                buckets=owner.buckets,
                max_classes=owner.max_classes,
                quantiles=owner.quantile_levels,
                gamma_grid=owner.gamma_grid,
                unit_grid=owner.unit_grid,
            )
            for s in owner.window_seconds
        ]
        self.count = CountWindow(owner.count_size, n_features=n_features, quantiles=owner.quantile_levels)
        self.n_features = n_features

    def update(self, batch: SignalBatch) -> None:
        prepared = _Prepared(batch)  # once for every time window
        for w in self.time:
            w.update(batch, prepared)
        self.count.update(batch)


class WindowSet:
    """Rolling windows for every (model, segment) key, with a bounded number of keys.

    Parameters
    ----------
    window_seconds : spans of the time windows (each > 0).
    buckets : ring slots per time window.
    count_size : events kept by each key's count window.
    max_models : distinct models kept apart; later models fold into model ``"other"``.
    max_segments : distinct segments per model kept apart (``"other"`` not counted); later ones fold
        into ``"other"``.
    max_classes : predicted classes counted apart in time windows.
    quantiles : quantile levels reported by snapshots.
    gamma_grid : histogram bins for γ in time windows.

    Raises
    ------
    ConfigError
        On an empty or non-positive ``window_seconds`` or a cap below 1 (and via the windows' own checks).

    Examples
    --------
    >>> ws = WindowSet(window_seconds=(60.0,), count_size=100, max_segments=1)
    >>> batch = SignalBatch.of(features=np.zeros((3, 2)), timestamps_seconds=100.0,
    ...                        gamma=[0.0, 0.0, 0.3], segment=["eu", "us", "eu"])
    >>> sorted(ws.update("credit", batch).keys)
    [('credit', 'eu'), ('credit', 'other')]
    >>> snap = ws.snapshot("credit", "eu", now_seconds=120.0)
    >>> sorted(snap), snap["60s"].events, ws.folded_events
    (['60s', 'last_100'], 2, 1)
    """

    def __init__(
        self,
        *,
        window_seconds: Sequence[float] = (60.0, 300.0, 3600.0),
        buckets: int = 60,
        count_size: int = 2000,
        max_models: int = 16,
        max_segments: int = 16,
        max_classes: int = 64,
        quantiles: Sequence[float] = DEFAULT_QUANTILES,
        gamma_grid: BinGrid | None = None,
    ) -> None:
        spans = tuple(float(s) for s in window_seconds)
        if not spans or not all(s > 0 and np.isfinite(s) for s in spans):
            raise ConfigError(f"window_seconds must be one or more finite spans > 0; got {window_seconds!r}")
        if len(set(spans)) != len(spans):
            raise ConfigError(f"window_seconds has a repeated span: {window_seconds!r}")
        if max_models < 1 or max_segments < 1:
            raise ConfigError(f"max_models and max_segments must be >= 1; got {max_models!r}, {max_segments!r}")
        self.window_seconds = tuple(sorted(spans))
        self.buckets = int(buckets)
        self.count_size = int(count_size)
        self.max_models = int(max_models)
        self.max_segments = int(max_segments)
        self.max_classes = int(max_classes)
        self.quantile_levels = _check_quantiles(quantiles)
        self.gamma_grid = gamma_grid or BinGrid.log_spaced()
        self.unit_grid = BinGrid.unit()  # one grid object for every time window: a batch is binned on it once
        _KeyWindows(self, 0)  # validates buckets / count_size / max_classes now, not at the first event
        self.reset()

    def reset(self) -> None:
        """Forget every key and event."""
        self._keys: dict[tuple[str, str], _KeyWindows] = {}
        self._segments: dict[str, set[str]] = {}
        self._folded = 0

    @property
    def keys(self) -> tuple[tuple[str, str], ...]:
        """The (model, segment) keys seen so far, in creation order."""
        return tuple(self._keys)

    @property
    def folded_events(self) -> int:
        """Events whose model or segment was over the cap and was counted under ``"other"``."""
        return self._folded

    @property
    def late_events(self) -> int:
        """Events older than the longest time window when they arrived (dropped from time windows)."""
        return sum(k.time[-1].late_events for k in self._keys.values())

    @property
    def nbytes(self) -> int:
        """Bytes held by all ring arrays; grows only with the (capped) number of keys."""
        return sum(k.count.nbytes + sum(w.nbytes for w in k.time) for k in self._keys.values())

    def _model(self, model: str) -> str:
        if model in self._segments or len(self._segments) < self.max_models:
            self._segments.setdefault(model, set())
            return model
        self._segments.setdefault(OTHER, set())
        return OTHER

    def _segment(self, model: str, segment: str) -> str:
        known = self._segments[model]
        if segment == OTHER or segment in known:
            return segment
        if len(known) < self.max_segments:
            known.add(segment)
            return segment
        return OTHER

    def update(self, model: str, batch: SignalBatch) -> Self:
        """Add a batch of one model's events (segments may differ per event).

        Raises
        ------
        DataError
            If a key's feature count differs from the batch's (the windows were built for another n).
        """
        kept_model = self._model(model)
        folded_model = kept_model != model
        segments, inverse = np.unique(batch.segments, return_inverse=True)
        for i, seg in enumerate(segments.tolist()):
            rows = np.flatnonzero(inverse == i)
            key = (kept_model, self._segment(kept_model, str(seg)))
            if folded_model or key[1] != seg:
                self._folded += rows.size
            windows = self._keys.get(key)
            if windows is None:
                windows = self._keys[key] = _KeyWindows(self, batch.n_features)
            windows.update(batch if rows.size == batch.size else batch.take(rows))
        return self

    def _get(self, model: str, segment: str) -> _KeyWindows:
        try:
            return self._keys[(model, segment)]
        except KeyError:
            raise DataError(
                f"no windows for model '{model}', segment '{segment}'; known keys: {sorted(self._keys)}"
            ) from None

    def snapshot(self, model: str, segment: str, now_seconds: float) -> dict[str, WindowSnapshot]:
        """Every window of one key, by name (``"60s"``, …, ``"last_2000"``), as of ``now_seconds``.

        Raises
        ------
        DataError
            If the key has not been seen.
        """
        k = self._get(model, segment)
        out = {w.name: w.snapshot(now_seconds) for w in k.time}
        out[k.count.name] = k.count.snapshot()
        return out

    def count_window(self, model: str, segment: str) -> CountWindow:
        """The count window of one key (read its ``values``/``features`` for two-sample tests)."""
        return self._get(model, segment).count
