"""Stage 5b: windowed Kolmogorov–Smirnov test of recent γ against the reference γ sample.

Every ``every`` events the last ``window`` values are compared with the reference, one-sided by
default (alarm only when the window is stochastically *larger*: γ rose). The test is repeated on
overlapping windows, so ``alpha`` is small, and a KS test on a big window finds tiny differences, so an
effect size is also required: drift needs p < alpha **and** D >= ``min_distance`` (the ECDFs differ
by at least that many probability points). γ is exactly 0 for many events; the distance is computed
on the step functions at every observed value, so ties neither create nor hide a difference.
"""

from __future__ import annotations

from typing import Self

from numpy.typing import ArrayLike

from monitor.drift.base import (
    Alternative,
    DriftState,
    WindowedTest,
    as_values,
    check_reference,
    ks_two_sample,
    require,
)


class KsDrift(WindowedTest):
    """Windowed two-sample KS detector.

    Parameters
    ----------
    reference : (m,) reference sample (m >= 10).
    window : events in the tested window (>= 10).
    every : events between tests (>= 1).
    min_events : events before the first test (default ``window``; between 10 and ``window``).
    alpha : significance level of one test (0 < alpha < 1).
    min_distance : minimum KS distance D to call drift (0 <= min_distance < 1).
    alternative : ``"greater"`` (window larger than reference; default) or ``"two-sided"``.
    name : label reported in :class:`DriftState`.

    Raises
    ------
    ConfigError
        On a parameter out of range.
    DataError
        If the reference has fewer than 10 finite values.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> ks = KsDrift(rng.exponential(size=5000), window=500, every=100)
    >>> ks.update(rng.exponential(size=2000)).drift_detected
    False
    >>> ks.update(rng.exponential(size=500) * 2).drift_detected, ks.p_value < 1e-4
    (True, True)
    """

    def __init__(
        self,
        reference: ArrayLike,
        *,
        window: int = 1000,
        every: int = 100,
        min_events: int | None = None,
        alpha: float = 1e-4,
        min_distance: float = 0.1,
        alternative: Alternative = "greater",
        name: str = "ks",
    ) -> None:
        self._init_window(window, every, min_events, alpha)
        require(0.0 <= min_distance < 1.0, f"min_distance must be in [0, 1); got {min_distance!r}")
        require(
            alternative in ("greater", "two-sided"),
            f"alternative must be 'greater' or 'two-sided'; got {alternative!r}",
        )
        self.reference = check_reference(reference, name)
        self.min_distance, self.alternative, self.name = min_distance, alternative, name
        self.reset()

    def _clear(self) -> None:
        self._d = 0.0
        self._p = float("nan")
        self._drift = False

    def update(self, values: ArrayLike) -> Self:
        """Feed per-event values (NaN = missing, skipped); tests run at every due event in the batch."""
        self._feed(as_values(values))
        return self

    def _test(self, event: int) -> None:
        self._d, self._p = ks_two_sample(self._buffer.values(), self.reference, self.alternative)
        self._drift = self._p < self.alpha and self._d >= self.min_distance
        self._alarm.mark(self._drift, event)

    @property
    def statistic(self) -> float:
        """KS distance D (D⁺ for the one-sided test) at the last test."""
        return self._d

    @property
    def p_value(self) -> float:
        """p-value of the last test (NaN before the first)."""
        return self._p

    @property
    def drift_detected(self) -> bool:
        """True if the last test found p < alpha and D >= min_distance."""
        return self._drift

    @property
    def state(self) -> DriftState:
        """Snapshot of the detector's state."""
        return DriftState(
            self.name,
            self._drift,
            self._d,
            self.min_distance,
            self._p,
            self._cadence.events,
            self._alarm.alarms,
            self._alarm.first_event,
        )
