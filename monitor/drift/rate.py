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

import numpy as np
from numpy.typing import NDArray

from monitor.drift.base import SingleWindowTest, WindowPlan, require


class RateTest(SingleWindowTest):
    """Windowed one-sided mean test against a reference mean (for flicker, a rate in [0, 1]).

    Parameters
    ----------
    reference_mean : mean of the signal in the reference (finite).
    reference_var : its population variance (>= 0).
    reference_count : events behind the reference statistics (>= 1).
    plan : the window and the test cadence (default :class:`WindowPlan`'s: the last 1000 events, every 100).
    alpha : significance level of one test (0 < alpha < 1).
    min_increase : minimum rise of the mean to call drift (>= 0, signal units).
    name : label reported in :class:`DriftState`.

    ``statistic`` is the z score of the last test, ``p_value`` its one-sided p-value (NaN before the first);
    ``drift_detected``: the last test found p < alpha and a rise >= min_increase.

    Raises
    ------
    ConfigError
        On a parameter out of range.

    Examples
    --------
    >>> import numpy as np
    >>> rate = RateTest(0.01, 0.002, 5000, plan=WindowPlan(window=500, every=100))
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
        plan: WindowPlan | None = None,
        alpha: float = 1e-4,
        min_increase: float = 0.01,
        name: str = "rate",
    ) -> None:
        require(math.isfinite(reference_mean), f"reference_mean must be finite; got {reference_mean!r}")
        require(
            reference_var >= 0.0 and math.isfinite(reference_var), f"reference_var must be >= 0; got {reference_var!r}"
        )
        require(reference_count >= 1, f"reference_count must be >= 1; got {reference_count!r}")
        self._init_window(plan, alpha)
        require(min_increase >= 0.0, f"min_increase must be >= 0; got {min_increase!r}")
        self.reference_mean, self.reference_var, self.reference_count = reference_mean, reference_var, reference_count
        self.min_increase, self.name = min_increase, name
        self.reset()

    def _evaluate(self, window: NDArray[np.float64]) -> tuple[float, float, bool]:
        self._mean = float(window.mean())
        diff = self._mean - self.reference_mean
        se = math.sqrt(float(window.var()) / window.size + self.reference_var / self.reference_count)
        # se = 0, both constant: any rise is certain, no rise is nothing
        z = diff / se if se > 0 else (math.inf if diff > 0 else 0.0)
        p = 0.5 * math.erfc(z / math.sqrt(2.0))
        return z, p, p < self.alpha and diff >= self.min_increase

    @property
    def window_mean(self) -> float:
        """Mean of the window at the last test (NaN before the first)."""
        return self._mean
