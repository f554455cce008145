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

from collections.abc import Sequence
from typing import Self

import numpy as np

from monitor.errors import ConfigError, DataError
from monitor.rolling.signal_batch import OTHER, SIGNALS, Signal, SignalBatch
from monitor.rolling.sketch import BinGrid
from monitor.rolling.window_kinds import (
    DEFAULT_QUANTILES,
    OTHER_CLASS,
    CountWindow,
    PreparedBatch,
    SignalSummary,
    TimeWindow,
    WindowSnapshot,
    check_quantiles,
)

__all__ = [
    "DEFAULT_QUANTILES",
    "OTHER",
    "OTHER_CLASS",
    "SIGNALS",
    "CountWindow",
    "Signal",
    "SignalBatch",
    "SignalSummary",
    "TimeWindow",
    "WindowSet",
    "WindowSnapshot",
]


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
        prepared = PreparedBatch(batch)  # once for every time window
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
        self.quantile_levels = check_quantiles(quantiles)
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
