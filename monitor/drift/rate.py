"""Stage 5b: windowed one-sided test that mean flicker rose above the reference mean flicker.

Per-event flicker is the fraction of K noisy copies whose class flips. The K copies of one event are
strongly correlated, so a binomial test on "flips out of n·K copies" would be far too confident;
the unit here is the event. Every ``every`` events, the mean of the last ``window`` values is compared
with the reference mean in a one-sided Welch z-test,

    z = (m_w − m_ref) / √(v_w / n_w + v_ref / n_ref),   p = 1 − Φ(z),

and drift needs p < alpha **and** m_w − m_ref >= ``min_increase`` (an absolute effect size in flicker
units), so a tiny rise on a huge window does not fire.
"""

from __future__ import annotations

import math
from typing import Self

from numpy.typing import ArrayLike

from monitor.drift.base import DriftState, WindowedTest, as_values, require


class RateTest(WindowedTest):
    """Windowed one-sided mean test against a reference mean (for flicker, a rate in [0, 1]).

    Parameters
    ----------
    reference_mean : mean of the signal in the reference (finite).
    reference_var : its population variance (>= 0).
    reference_count : events behind the reference statistics (>= 1).
    window : events in the tested window (>= 10).
    every : events between tests (>= 1).
    min_events : events before the first test (default ``window``; between 10 and ``window``).
    alpha : significance level of one test (0 < alpha < 1).
    min_increase : minimum rise of the mean to call drift (>= 0, signal units).
    name : label reported in :class:`DriftState`.

    Raises
    ------
    ConfigError
        On a parameter out of range.

    Examples
    --------
    >>> import numpy as np
    >>> rate = RateTest(0.01, 0.002, 5000, window=500, every=100)
    >>> rate.update(np.zeros(1000)).drift_detected
    False
    >>> rate.update(np.tile([0.0, 0.0, 0.25], 200)).drift_detected, round(rate.statistic, 1)
    (True, 13.8)
    """

    def __init__(
        self,
        reference_mean: float,
        reference_var: float,
        reference_count: int,
        *,
        window: int = 1000,
        every: int = 100,
        min_events: int | None = None,
        alpha: float = 1e-4,
        min_increase: float = 0.01,
        name: str = "rate",
    ) -> None:
        require(math.isfinite(reference_mean), f"reference_mean must be finite; got {reference_mean!r}")
        require(
            reference_var >= 0.0 and math.isfinite(reference_var), f"reference_var must be >= 0; got {reference_var!r}"
        )
        require(reference_count >= 1, f"reference_count must be >= 1; got {reference_count!r}")
        self._init_window(window, every, min_events, alpha)
        require(min_increase >= 0.0, f"min_increase must be >= 0; got {min_increase!r}")
        self.reference_mean, self.reference_var, self.reference_count = reference_mean, reference_var, reference_count
        self.min_increase, self.name = min_increase, name
        self.reset()

    def _clear(self) -> None:
        self._z = 0.0
        self._p = float("nan")
        self._mean = float("nan")
        self._drift = False

    def update(self, values: ArrayLike) -> Self:
        """Feed per-event values (NaN = missing, skipped); tests run at every due event in the batch."""
        self._feed(as_values(values))
        return self

    def _test(self, event: int) -> None:
        w = self._buffer.values()
        self._mean = float(w.mean())
        diff = self._mean - self.reference_mean
        se = math.sqrt(float(w.var()) / w.size + self.reference_var / self.reference_count)
        if se > 0:
            self._z = diff / se
        else:  # both constant: any rise is certain, no rise is nothing
            self._z = math.inf if diff > 0 else 0.0
        self._p = 0.5 * math.erfc(self._z / math.sqrt(2.0))
        self._drift = self._p < self.alpha and diff >= self.min_increase
        self._alarm.mark(self._drift, event)

    @property
    def window_mean(self) -> float:
        """Mean of the window at the last test (NaN before the first)."""
        return self._mean

    @property
    def statistic(self) -> float:
        """z score of the last test."""
        return self._z

    @property
    def p_value(self) -> float:
        """One-sided p-value of the last test (NaN before the first)."""
        return self._p

    @property
    def drift_detected(self) -> bool:
        """True if the last test found p < alpha and a rise >= min_increase."""
        return self._drift

    @property
    def state(self) -> DriftState:
        """Snapshot of the detector's state."""
        return DriftState(
            self.name,
            self._drift,
            self._z,
            float("nan"),
            self._p,
            self._cadence.events,
            self._alarm.alarms,
            self._alarm.first_event,
        )
