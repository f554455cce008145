"""Stage 5b: Page–Hinkley test for an upward change in the mean of a stream (classic, generic).

    mean_t = running mean since reset,  S_t = max(0, S_{t-1} + x_t − mean_t − tolerance).

The alarm turns on when S > threshold (after ``min_events`` events) and off when S falls below
``clear_ratio``·threshold (hysteresis, so an alert does not flap around the threshold).

No reference is needed, but ``threshold`` and ``tolerance`` are in the stream's units, so they must be
set for the signal's scale: S is a reflected random walk whose steps have the stream's spread, so the
defaults (λ = 50, δ = 0.005) suit a per-event standard deviation of about 0.1 or less; on a
unit-variance stream they false-alarm within a few thousand events. For γ and flicker the app uses the
scale-free :class:`~monitor.drift.cusum.Cusum`; Page–Hinkley is the alternative when no reference
exists yet or for signals on a known scale.
"""

from __future__ import annotations

from typing import Self

import numpy as np
from numpy.typing import ArrayLike

from monitor.drift.base import AlarmCounter, DriftState, as_values, require


class PageHinkley:
    """One-sided (upward) Page–Hinkley change detector.

    Parameters
    ----------
    threshold : alarm level λ on the cumulative excess (> 0), in the stream's units.
    tolerance : δ, the per-event drift allowed before it counts (>= 0), in the stream's units.
    min_events : burn-in: no alarm before this many events (>= 1).
    clear_ratio : the alarm clears when S < clear_ratio·threshold (0 <= clear_ratio <= 1).
    name : label reported in :class:`DriftState`.

    Raises
    ------
    ConfigError
        On a parameter out of range.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> ph = PageHinkley(threshold=5.0, tolerance=0.05)
    >>> ph.update(rng.normal(scale=0.1, size=3000)).drift_detected
    False
    >>> ph.update(rng.normal(scale=0.1, size=100) + 0.5).drift_detected
    True
    """

    def __init__(
        self,
        threshold: float = 50.0,
        tolerance: float = 0.005,
        *,
        min_events: int = 30,
        clear_ratio: float = 0.5,
        name: str = "page_hinkley",
    ) -> None:
        require(threshold > 0.0, f"threshold must be > 0; got {threshold!r}")
        require(tolerance >= 0.0, f"tolerance must be >= 0; got {tolerance!r}")
        require(min_events >= 1, f"min_events must be >= 1; got {min_events!r}")
        require(0.0 <= clear_ratio <= 1.0, f"clear_ratio must be in [0, 1]; got {clear_ratio!r}")
        self.threshold, self.tolerance, self.min_events = threshold, tolerance, min_events
        self.clear_ratio, self.name = clear_ratio, name
        self._alarm = AlarmCounter()
        self.reset()

    def reset(self) -> None:
        """Back to no events."""
        self._count = 0
        self._mean = 0.0
        self._excess = 0.0
        self._drift = False
        self._alarm.reset()

    def update(self, values: ArrayLike) -> Self:
        """Feed per-event values. NaN (missing) and ±inf are skipped: one inf would make the running mean inf, and
        every later excess ``x − mean`` −inf or NaN, so the test would never alarm again."""
        count, mean, excess, drift = self._count, self._mean, self._excess, self._drift
        v = as_values(values)
        for x in v[np.isfinite(v)].tolist():
            count += 1
            mean += (x - mean) / count
            excess = max(0.0, excess + x - mean - self.tolerance)
            if drift:
                drift = excess >= self.clear_ratio * self.threshold
            else:
                drift = count >= self.min_events and excess > self.threshold
            if drift != self._alarm.on:
                self._alarm.mark(drift, count)
        self._count, self._mean, self._excess, self._drift = count, mean, excess, drift
        return self

    @property
    def statistic(self) -> float:
        """The cumulative excess S."""
        return self._excess

    @property
    def p_value(self) -> float:
        """NaN: a sequential detector has no p-value."""
        return float("nan")

    @property
    def drift_detected(self) -> bool:
        """True from S > threshold (after the burn-in) until S < clear_ratio·threshold."""
        return self._drift

    @property
    def state(self) -> DriftState:
        """Snapshot of the detector's state."""
        return DriftState(
            self.name,
            self._drift,
            self._excess,
            self.threshold,
            float("nan"),
            self._count,
            self._alarm.alarms,
            self._alarm.first_event,
        )
