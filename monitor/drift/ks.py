"""Stage 5b: windowed Kolmogorov–Smirnov test of recent γ against the reference γ sample.

Every ``every`` events the last ``window`` values are compared with the reference, one-sided by
default (alarm only when the window is stochastically *larger*: γ rose). The test is repeated on
overlapping windows, so ``alpha`` is small, and a KS test on a big window finds tiny differences, so an
effect size is also required: drift needs p < alpha **and** D >= ``min_distance`` (the ECDFs differ
by at least that many probability points). γ is exactly 0 for many events; the distance is computed
on the step functions at every observed value, so ties neither create nor hide a difference.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.drift.base import Alternative, SingleWindowTest, WindowPlan, check_reference, ks_two_sample, require


class KsDrift(SingleWindowTest):
    """Windowed two-sample KS detector.

    Parameters
    ----------
    reference : (m,) reference sample (m >= 10).
    plan : the window and the test cadence (default :class:`WindowPlan`'s: the last 1000 events, every 100).
    alpha : significance level of one test (0 < alpha < 1).
    min_distance : minimum KS distance D to call drift (0 <= min_distance < 1).
    alternative : ``"greater"`` (window larger than reference; default) or ``"two-sided"``.
    name : label reported in :class:`DriftState`.

    ``statistic`` is the KS distance D (D⁺ for the one-sided test) at the last test, ``p_value`` its p-value (NaN
    before the first); ``drift_detected``: the last test found p < alpha and D >= min_distance.

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
    >>> ks = KsDrift(rng.exponential(size=5000), plan=WindowPlan(window=500, every=100))
    >>> ks.update(rng.exponential(size=2000)).drift_detected
    False
    >>> ks.update(rng.exponential(size=500) * 2).drift_detected, ks.p_value < 1e-4
    (True, True)
    """

    def __init__(
        self,
        reference: ArrayLike,
        *,
        plan: WindowPlan | None = None,
        alpha: float = 1e-4,
        min_distance: float = 0.1,
        alternative: Alternative = "greater",
        name: str = "ks",
    ) -> None:
        self._init_window(plan, alpha)
        require(0.0 <= min_distance < 1.0, f"min_distance must be in [0, 1); got {min_distance!r}")
        require(
            alternative in ("greater", "two-sided"),
            f"alternative must be 'greater' or 'two-sided'; got {alternative!r}",
        )
        self.reference = check_reference(reference, name)
        self.min_distance, self.alternative, self.name = min_distance, alternative, name
        self.reset()

    def _threshold(self) -> float:
        return self.min_distance

    def _evaluate(self, window: NDArray[np.float64]) -> tuple[float, float, bool]:
        d, p = ks_two_sample(window, self.reference, self.alternative)
        return d, p, p < self.alpha and d >= self.min_distance
