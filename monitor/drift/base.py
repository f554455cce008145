"""Stage 5b: the :class:`DriftDetector` protocol, the state every detector reports, and shared helpers.

A detector is fed per-event values in arrival order (``update`` takes one value or a 1-D array of
them; :class:`~monitor.drift.features.FeatureDrift` takes rows) and exposes read-only state. Two kinds:

- sequential (CUSUM, Page–Hinkley): a statistic updated at every event; ``p_value`` is NaN;
- windowed two-sample tests (KS on γ, rate test on flicker, per-feature KS): a bounded buffer of the
  last ``window`` events tested against the reference every ``every`` events.

``drift_detected`` is the *current* state, not a latch: it clears by itself when the stream returns
to normal, so an alert built on it resolves. Detectors never read a clock.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass
from typing import Literal, Protocol, Self

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.config import DriftSettings, setting_default
from monitor.drift.calibrate import benjamini_hochberg
from monitor.errors import ConfigError, DataError

Alternative = Literal["greater", "two-sided"]


@dataclass(frozen=True, slots=True)
class DriftState:
    """A detector's state after its last update.

    Attributes
    ----------
    name : detector label, e.g. ``"gamma_cusum"``.
    drift_detected : whether it signals drift now.
    statistic : the detector's statistic (CUSUM sum, KS distance, z score …).
    threshold : the value ``statistic`` is compared with (NaN where the rule is a p-value).
    p_value : NaN for sequential detectors or before the first evaluation.
    events : events fed since the last reset.
    alarms : times drift_detected turned on since the last reset.
    first_alarm_event : event count (1-based) at the first alarm since reset, or None.
    changes : event counts (1-based) at which drift_detected last changed (on or off), oldest first, at most
        :data:`CHANGES_KEPT`: where within a batch a detector crossed
        (:meth:`~monitor.drift.slots.DetectorSlot.feed`).
    """

    name: str
    drift_detected: bool
    statistic: float
    threshold: float
    p_value: float
    events: int
    alarms: int = 0
    first_alarm_event: int | None = None
    changes: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class FeatureShift:
    """One feature that moved: its index, name, KS distance and Benjamini–Hochberg adjusted p-value."""

    index: int
    name: str
    statistic: float
    p_value: float


class DriftDetector(Protocol):
    """What the app needs from every drift detector."""

    def update(self, values: ArrayLike) -> Self:
        """Feed per-event values (a scalar or a 1-D array, oldest first)."""
        ...

    def reset(self) -> None:
        """Return to the freshly constructed state."""
        ...

    @property
    def drift_detected(self) -> bool:
        """Whether the detector signals drift after its last update."""
        ...

    @property
    def state(self) -> DriftState:
        """A snapshot of the detector's state."""
        ...


class ReferenceLike(Protocol):
    """What the detectors read from a reference (``monitor.rolling.reference.Reference`` fits it)."""

    @property
    def gamma_sample(self) -> NDArray[np.float64]:
        """(m,) γ sample."""
        ...

    @property
    def flicker_sample(self) -> NDArray[np.float64]:
        """(m,) flicker sample."""
        ...

    @property
    def flicker_mean(self) -> float:
        """Mean flicker."""
        ...

    @property
    def flicker_var(self) -> float:
        """Population variance of flicker."""
        ...

    @property
    def flicker_count(self) -> int:
        """Events behind the flicker statistics."""
        ...

    @property
    def feature_sample(self) -> NDArray[np.float64]:
        """(m, n) feature rows."""
        ...

    @property
    def feature_names(self) -> tuple[str, ...] | None:
        """Names of the n features, if known."""
        ...


#: the last changes of a detector's signal it remembers (:attr:`DriftState.changes`): more than one batch can hold
CHANGES_KEPT = 32


class AlarmCounter:
    """Counts off→on transitions of a detector's signal, remembers the first one and the event counts of its last
    :data:`CHANGES_KEPT` changes (shared helper)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Back to no alarms."""
        self.on = False
        self.alarms = 0
        self.first_event: int | None = None
        self.changes: deque[int] = deque(maxlen=CHANGES_KEPT)

    def mark(self, on: bool, event: int) -> None:
        """Record the signal ``on`` as of the 1-based ``event`` count."""
        if on and not self.on:
            self.alarms += 1
            if self.first_event is None:
                self.first_event = event
        if on != self.on:
            self.changes.append(event)
        self.on = on

    def snapshot(self, name: str, statistic: float, threshold: float, p_value: float, events: int) -> DriftState:
        """The :class:`DriftState` of a detector whose signal this counter follows (``drift_detected`` is ``on``)."""
        return DriftState(
            name, self.on, statistic, threshold, p_value, events, self.alarms, self.first_event, tuple(self.changes)
        )


def as_values(values: ArrayLike) -> NDArray[np.float64]:
    """Per-event values as a 1-D float64 array with NaN (missing) entries dropped.

    >>> as_values([0.1, float("nan"), 0.2]).tolist()
    [0.1, 0.2]
    """
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    return v[~np.isnan(v)]


def as_rows(values: ArrayLike, width: int, error: str) -> NDArray[np.float64]:
    """Rows of ``width`` values (one row may come as a 1-D array) as a (b, width) float64 array, the rows with NaN
    (missing) or infinite entries dropped.

    Raises
    ------
    DataError
        With ``error``, its ``{shape}`` filled with the shape given, if the rows are not ``width`` wide.

    >>> as_rows([[1.0, 2.0], [float("nan"), 0.0]], 2, "{shape}").tolist()
    [[1.0, 2.0]]
    """
    x = np.asarray(values, dtype=np.float64)
    x = x.reshape(1, -1) if x.ndim == 1 else x
    if x.ndim != 2 or x.shape[1] != width:
        raise DataError(error.format(shape=x.shape))
    return x[np.all(np.isfinite(x), axis=1)]


#: the fewest finite reference values a drift detector takes (each CUSUM, each KS test, the per-input tests)
MIN_REFERENCE_VALUES = 10


def check_reference(values: ArrayLike, name: str, min_size: int = MIN_REFERENCE_VALUES) -> NDArray[np.float64]:
    """A sorted, finite copy of a reference sample.

    Raises
    ------
    DataError
        If fewer than ``min_size`` finite values remain.
    """
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    v = np.sort(v[np.isfinite(v)])
    if v.size < min_size:
        raise DataError(f"{name} reference needs >= {min_size} finite values; got {v.size}")
    return v


def require(condition: bool, message: str) -> None:
    """Raise :class:`ConfigError` with ``message`` unless ``condition`` holds (parameter checks)."""
    if not condition:
        raise ConfigError(message)


def ks_two_sample(
    sample: NDArray[np.float64], reference_sorted: NDArray[np.float64], alternative: Alternative
) -> tuple[float, float]:
    """Kolmogorov–Smirnov distance and asymptotic p-value of ``sample`` against a sorted reference.

    ``greater``: D⁺ = max_x (G_ref(x) − F_sample(x)), large when the sample is stochastically larger
    (the one-sided test for "γ went up"); p ≈ exp(−2·n_e·D²). ``two-sided``: D = max |G − F|,
    p = Kolmogorov survival at √n_e·D. n_e = n·m/(n+m). Ties (many exact zeros) are handled by
    evaluating both step functions at every observed value; with ties the p-value is conservative.
    Same statistic as ``scipy.stats.ks_2samp`` (``alternative="less"`` for ``greater``), without its
    per-call overhead.

    >>> d, p = ks_two_sample(np.array([1.0, 2.0, 3.0]), np.array([0.0, 0.5, 1.0]), "greater")
    >>> round(d, 3), p < 0.5
    (0.667, True)
    """
    n, m = sample.size, reference_sorted.size
    if n == 0 or m == 0:
        return 0.0, 1.0
    s = np.sort(sample)
    en = n * m / (n + m)
    # G − F can only peak where G steps up (at the reference's values) and F − G where F does (at the sample's):
    # evaluated there alone — the last of tied values carries the whole step, the others fall short — these are
    # the maxima over every observed value, with sorted look-ups (a third of the time on 1,000 vs 2,500 values)
    up = np.arange(1, m + 1) / m - np.searchsorted(s, reference_sorted, side="right") / n
    d = max(float(up.max()), 0.0)
    if alternative == "greater":
        return d, min(1.0, math.exp(-2.0 * en * d * d))
    down = np.arange(1, n + 1) / n - np.searchsorted(reference_sorted, s, side="right") / m
    d = max(d, float(down.max()))
    from scipy.special import kolmogorov  # on use: scipy.special costs ~0.2 s at every command start

    return d, float(min(1.0, kolmogorov(math.sqrt(en) * d)))


class WindowBuffer:
    """A ring buffer of the last ``size`` per-event values (1-D) or rows (2-D) (shared helper)."""

    def __init__(self, size: int, width: int | None = None) -> None:
        self.size = size
        self.width = width
        self.reset()

    def reset(self) -> None:
        """Empty the buffer."""
        shape = (self.size,) if self.width is None else (self.size, self.width)
        self._data = np.zeros(shape)
        self._pos = 0
        self.filled = 0

    def extend(self, values: NDArray[np.float64]) -> None:
        """Append values (or rows), keeping only the last ``size``."""
        tail = values[-self.size :]
        idx = (self._pos + np.arange(tail.shape[0])) % self.size
        self._data[idx] = tail
        self._pos = (self._pos + tail.shape[0]) % self.size
        self.filled = min(self.size, self.filled + tail.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes the ring array holds (constant)."""
        return int(self._data.nbytes)

    def values(self) -> NDArray[np.float64]:
        """The held values (or rows), oldest first (a copy)."""
        if self.filled < self.size:
            return self._data[: self.filled].copy()
        return np.roll(self._data, -self._pos, axis=0)


@dataclass(frozen=True, slots=True)
class WindowPlan:
    """What a windowed test compares with its reference, and when (checked by the test that takes it).

    Attributes
    ----------
    window : events in the tested window (>= 10): the last ``window`` events (or rows).
    every : events between tests (>= 1).
    min_events : events before the first test (None: ``window``; else between 10 and ``window``).
    """

    window: int = setting_default(DriftSettings, "window")
    every: int = setting_default(DriftSettings, "every")
    min_events: int | None = None


class Cadence:
    """Fires every ``every`` events once ``min_events`` have been seen (windowed tests' schedule)."""

    def __init__(self, every: int, min_events: int) -> None:
        self.every = every
        self.min_events = min_events
        self.reset()

    def reset(self) -> None:
        """Back to zero events."""
        self.events = 0
        self._next = self.min_events

    def advance(self, n: int) -> list[int]:
        """Count ``n`` more events; return the 1-based event counts at which a test is due."""
        self.events += n
        due: list[int] = []
        while self._next <= self.events:
            due.append(self._next)
            self._next += self.every
        return due


class WindowedTest(ABC):
    """Shared machinery of the window-vs-reference tests (KS on γ, rate test on flicker, per-feature KS): checks of
    the window settings, the bounded window, the test cadence and the alarm counter, ``reset``, the feed loop,
    ``drift_detected`` and the state snapshot.

    A subclass calls :meth:`_init_window` in ``__init__`` (then ``self.reset()``), clears its result state in
    :meth:`_clear`, runs its test on ``self._buffer.values()`` in :meth:`_test` (marking ``self._alarm`` with the
    result) and reports its statistic's floor in :meth:`_threshold`.
    """

    name: str
    window: int
    every: int
    min_events: int
    alpha: float

    def _init_window(self, plan: WindowPlan | None, alpha: float, width: int | None = None) -> None:
        plan = plan or WindowPlan()
        window, every, min_events = plan.window, plan.every, plan.min_events
        require(window >= 10, f"window must be >= 10 events; got {window!r}")
        require(every >= 1, f"every must be >= 1 event; got {every!r}")
        first = window if min_events is None else min_events
        require(10 <= first <= window, f"min_events must be between 10 and window={window}; got {min_events!r}")
        require(0.0 < alpha < 1.0, f"alpha must be in (0, 1); got {alpha!r}")
        self.window, self.every, self.min_events, self.alpha = window, every, first, alpha
        self._buffer = WindowBuffer(window, width)
        self._cadence = Cadence(every, first)
        self._alarm = AlarmCounter()

    def reset(self) -> None:
        """Empty the window; no test result."""
        self._buffer.reset()
        self._cadence.reset()
        self._alarm.reset()
        self._clear()

    def _feed(self, values: NDArray[np.float64]) -> None:
        """Append values (or rows) in order, running the test at every event where one is due."""
        start, pos = self._cadence.events, 0
        for due in self._cadence.advance(values.shape[0]):
            cut = due - start
            self._buffer.extend(values[pos:cut])
            pos = cut
            self._test(due)
        self._buffer.extend(values[pos:])

    @property
    def drift_detected(self) -> bool:
        """True if the last test found drift: significant at ``alpha`` and past the detector's effect-size floor
        (for a per-feature test: at least one feature moved)."""
        return self._alarm.on

    def _snapshot(self, statistic: float, p_value: float) -> DriftState:
        """The detector's :class:`DriftState` with this ``statistic`` and ``p_value``."""
        return self._alarm.snapshot(self.name, statistic, self._threshold(), p_value, self._cadence.events)

    def _threshold(self) -> float:
        """The value reported as ``DriftState.threshold``: NaN where the rule is a p-value alone."""
        return float("nan")

    @abstractmethod
    def _clear(self) -> None:
        """Forget the last test result."""

    @abstractmethod
    def _test(self, event: int) -> None:
        """Test the current window; ``event`` is the 1-based count of events seen."""


class SingleWindowTest(WindowedTest):
    """A window test of per-event values with one statistic and p-value (KS on γ, the rate test on flicker, the
    reconstruction-error KS): ``update``, the test step, ``statistic``, ``p_value`` and ``state``.

    A subclass computes (statistic, p-value, drift) from the window in :meth:`_evaluate`; one that reports the
    window's mean keeps it in ``self._mean`` there (the KS test has no use for it, so the base does not take it).
    """

    def _clear(self) -> None:
        self._stat = 0.0
        self._p = float("nan")
        self._mean = float("nan")

    def update(self, values: ArrayLike) -> Self:
        """Feed per-event values (NaN = missing, skipped); tests run at every due event in the batch."""
        self._feed(as_values(values))
        return self

    def _test(self, event: int) -> None:
        self._stat, self._p, drift = self._evaluate(self._buffer.values())
        self._alarm.mark(drift, event)

    @abstractmethod
    def _evaluate(self, window: NDArray[np.float64]) -> tuple[float, float, bool]:
        """(statistic, p-value, drift) of the window's values."""

    @property
    def statistic(self) -> float:
        """The test statistic at the last test (0.0 before the first; the class says which statistic)."""
        return self._stat

    @property
    def p_value(self) -> float:
        """p-value of the last test (NaN before the first)."""
        return self._p

    @property
    def state(self) -> DriftState:
        """Snapshot of the detector's state."""
        return self._snapshot(self._stat, self._p)


class PerFeatureTest(WindowedTest):
    """A window test of rows, one test per feature (per-feature KS, the range test, held inputs' categories): at
    every test each feature gets a statistic and a p-value, the p-values are adjusted by Benjamini–Hochberg across
    features, and the features whose adjusted p < ``alpha`` and statistic reaches a floor are reported as moved,
    largest statistic first.

    A subclass sets ``feature_names`` before :meth:`_init_window`, fills ``self._stat`` and calls :meth:`_flag` with
    the raw p-values in :meth:`_test`.
    """

    feature_names: tuple[str, ...]

    @property
    def n_features(self) -> int:
        """Feature count n."""
        return len(self.feature_names)

    def _clear(self) -> None:
        self._stat: NDArray[np.float64] = np.zeros(self.n_features)
        self._p: NDArray[np.float64] = np.full(self.n_features, np.nan)
        self._moved: tuple[FeatureShift, ...] = ()

    def _flag(self, p_values: NDArray[np.float64], floor: float, event: int) -> None:
        """Adjust ``p_values`` across features, rank the features with adjusted p < alpha and statistic >= ``floor``
        into ``moved`` and mark the alarm at ``event``."""
        self._p = benjamini_hochberg(p_values)
        hit = np.flatnonzero((self._p < self.alpha) & (self._stat >= floor))
        order = hit[np.argsort(-self._stat[hit], kind="stable")]
        self._moved = tuple(
            FeatureShift(int(j), self.feature_names[j], float(self._stat[j]), float(self._p[j])) for j in order
        )
        self._alarm.mark(bool(self._moved), event)

    @property
    def moved(self) -> tuple[FeatureShift, ...]:
        """Features that moved at the last test (``statistic``: the class's per-feature statistic), largest first."""
        return self._moved

    @property
    def statistics(self) -> NDArray[np.float64]:
        """(n,) the per-feature statistic at the last test (a copy)."""
        return self._stat.copy()

    @property
    def state(self) -> DriftState:
        """Snapshot: the largest per-feature statistic, against the floor, and the smallest adjusted p-value."""
        return self._snapshot(
            float(self._stat.max()) if self._stat.size else 0.0,
            float(np.nanmin(self._p)) if np.any(np.isfinite(self._p)) else float("nan"),
        )


class SequentialDetector(ABC):
    """Shared part of the sequential detectors (CUSUM, Page–Hinkley): a statistic updated at every event, an alarm
    with hysteresis followed by ``self._alarm``, no p-value. A subclass keeps its event count in ``self._events``."""

    name: str
    threshold: float
    _alarm: AlarmCounter
    _events: int

    @staticmethod
    def _check_threshold(threshold: float | None, false_alarms_per_million: float) -> None:
        """Check the threshold's two settings: pinned (> 0), or None and calibrated for a false-alarm rate per 10⁶
        events (0 < rate < 10⁵)."""
        require(threshold is None or threshold > 0.0, f"threshold must be > 0; got {threshold!r}")
        require(
            0.0 < false_alarms_per_million < 1e5,
            f"false_alarms_per_million must be in (0, 1e5); got {false_alarms_per_million!r}",
        )

    @property
    @abstractmethod
    def statistic(self) -> float:
        """The detector's statistic S."""

    @property
    def p_value(self) -> float:
        """NaN: a sequential detector has no p-value."""
        return float("nan")

    @property
    def drift_detected(self) -> bool:
        """True from S > threshold (after any burn-in) until S < clear_ratio·threshold."""
        return self._alarm.on

    @property
    def state(self) -> DriftState:
        """Snapshot of the detector's state."""
        return self._alarm.snapshot(self.name, self.statistic, self.threshold, float("nan"), self._events)
