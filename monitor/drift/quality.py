"""Stage 5b: data quality per input — the share of values outside the reference's range.

Input noise that costs accuracy can leave every per-feature KS distance under its floor (the distributions' centres
stay put) while many values land beyond anything the reference held. :class:`RangeDrift` watches, per input, the share
of the last ``window`` events outside the reference's [0.1th, 99.9th] percentiles (:data:`RANGE_QUANTILES`): about
0.2 % on the reference itself. An input is flagged when its share is at least ``min_share`` and significantly above
the reference's own share (one-sided binomial test, Benjamini–Hochberg across inputs at ``alpha``). The range is
widened by :data:`RANGE_MARGIN` of its width on each side, so that values piled up at an edge (zeros, a cap) that move
by a rounding or a small jitter do not count as outside. Input evidence
only: it supports ``input-shift``, never ``harmful-shift`` by itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Self

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.drift.base import PerFeatureTest, WindowPlan, as_rows, require
from monitor.errors import DataError
from monitor.rolling.reference import RANGE_QUANTILES


def reference_range(x: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per-column (low, high): the :data:`RANGE_QUANTILES` of reference rows ``x`` (N, n).

    >>> low, high = reference_range(np.arange(1001.0).reshape(-1, 1))
    >>> float(low[0]), float(high[0])
    (1.0, 999.0)
    """
    q = np.quantile(np.asarray(x, dtype=np.float64), RANGE_QUANTILES, axis=0)
    return q[0], q[1]


#: the reference range is widened by this share of its width on each side (see :class:`RangeDrift`)
RANGE_MARGIN: Final = 0.01


class RangeDrift(PerFeatureTest):
    """Per input, the share of the window outside the reference range [low, high], tested against ``expected``.

    Parameters
    ----------
    low, high : (n,) the reference range of each input.
    expected : (n,) each input's share outside the range on the reference (a floor of 0.002 applies).
    feature_names : n names.
    plan : the window and the test cadence (default :class:`WindowPlan`'s: the last 1000 events, every 100).
    alpha : the false discovery rate across inputs.
    min_share : the smallest share outside that counts (an effect-size floor, 0 < min_share < 1).
    name : label reported in :class:`DriftState`.

    ``statistics`` (= ``shares``) and the ``statistic`` of each input in ``moved``: its share outside the range.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> ref = rng.normal(size=(5000, 2))
    >>> low, high = reference_range(ref)
    >>> rd = RangeDrift(low, high, np.full(2, 0.002), feature_names=["a", "b"], plan=WindowPlan(window=500, every=100))
    >>> rd.update(rng.normal(size=(1000, 2))).drift_detected
    False
    >>> noisy = rng.normal(size=(500, 2)) * [1.0, 2.0]
    >>> [(m.name, round(m.statistic, 2)) for m in rd.update(noisy).moved]
    [('b', 0.12)]
    """

    def __init__(
        self,
        low: ArrayLike,
        high: ArrayLike,
        expected: ArrayLike,
        *,
        feature_names: Sequence[str],
        plan: WindowPlan | None = None,
        alpha: float = 0.01,
        min_share: float = 0.02,
        name: str = "inputs_range",
    ) -> None:
        require(0.0 < min_share < 1.0, f"min_share must be in (0, 1); got {min_share!r}")
        lo = np.asarray(low, dtype=np.float64).reshape(-1)
        hi = np.asarray(high, dtype=np.float64).reshape(-1)
        if lo.size != hi.size:
            raise DataError(f"reference range disagrees: {lo.size} lows, {hi.size} highs")
        # widened by RANGE_MARGIN of its width on each side: values that pile up at an edge (zeros, a cap) and move
        # by a rounding or a jitter stay inside
        pad = RANGE_MARGIN * (hi - lo)
        self.low, self.high = lo - pad, hi + pad
        self.expected = np.maximum(np.asarray(expected, dtype=np.float64).reshape(-1), 0.002)
        n = self.low.size
        self.feature_names = tuple(str(s) for s in feature_names)
        if self.high.size != n or self.expected.size != n or len(self.feature_names) != n or n == 0:
            raise DataError(
                f"reference range disagrees: {n} lows, {self.high.size} highs, {self.expected.size} expected shares, "
                f"{len(self.feature_names)} names"
            )
        self._init_window(plan, alpha, width=n)
        self.min_share, self.name = min_share, name
        self.reset()

    def _threshold(self) -> float:
        return self.min_share

    def update(self, values: ArrayLike) -> Self:
        """Feed feature rows (b, n); rows with NaN are skipped."""
        x = as_rows(
            values, self.n_features, f"range test expects rows of {self.n_features} inputs; got shape {{shape}}"
        )
        self._feed(((x < self.low) | (x > self.high)).astype(np.float64))
        return self

    def _test(self, event: int) -> None:
        w = self._buffer.values()
        k = w.sum(axis=0)
        m = w.shape[0]
        self._stat = k / m
        # only an input at or above the floor can be flagged: the others keep p = 1 (conservative under
        # Benjamini–Hochberg), and on a quiet stream no binomial tail is computed at all
        p = np.ones(self.n_features)
        candidates = self._stat >= self.min_share
        if candidates.any():
            from scipy.stats import binom  # on use: scipy.stats costs ~0.4 s at every command start

            p[candidates] = binom.sf(k[candidates] - 1, m, self.expected[candidates])
        self._flag(p, self.min_share, event)

    @property
    def shares(self) -> NDArray[np.float64]:
        """(n,) each input's share outside the range at the last test (a copy)."""
        return self._stat.copy()
