"""Stage 5b: data quality per input — the share of values outside the reference's range.

Input noise that costs accuracy can leave every per-feature KS distance under its floor (the distributions' centres
stay put) while many values land beyond anything the reference held. :class:`RangeDrift` watches, per input, the share
of the last ``window`` events outside the reference's range: its k-th smallest to its k-th largest of N rows
(:func:`~monitor.rolling.reference.order_range`, about the 0.1th and 99.9th percentiles; the minimum and maximum
below 1,999 rows).

The null is a **new draw's**, not the reference's own (in sample, no reference row lies outside its own min–max): for
a continuous input, the probability that a new draw falls outside [x₍ₖ₎, x₍ₙ₊₁₋ₖ₎] is Beta(2k, N+1−2k) over the
reference's draw (mean 2k/(N+1): 1 % at N = 200), so a window of m independent events counts K outside with the
beta-binomial law BetaBinom(m, 2k, N+1−2k) — exact at every reference size, heavier-tailed than a binomial where N is
small. An input is flagged when its share is at least ``min_share`` and its beta-binomial p-value, Benjamini–Hochberg
across inputs, is below ``alpha``. Ties (a discrete input, a value piled up at an edge) make outside rarer than the
law says (conservative); the range is also widened by :data:`RANGE_MARGIN` of its width on each side, so values at an
edge that move by a rounding or a jitter do not count as outside. Input evidence only: it supports ``input-shift``,
never ``harmful-shift`` by itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Self

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.drift.base import PerFeatureTest, WindowPlan, as_rows, require
from monitor.errors import DataError
from monitor.rolling.reference import order_range, range_rank

reference_range = order_range


def new_draw_outside(n_rows: int) -> tuple[float, float]:
    """(a, b): the Beta law of the probability that a new draw lies outside the range of ``n_rows`` reference rows
    (:func:`~monitor.rolling.reference.range_rank` k: a = 2k, b = N + 1 − 2k).

    >>> new_draw_outside(206)
    (2.0, 205.0)
    """
    k = range_rank(n_rows)
    return float(2 * k), float(max(n_rows + 1 - 2 * k, 1))


def outside_p_values(outside: NDArray[np.float64], m: int, n_rows: int) -> NDArray[np.float64]:
    """P(K >= ``outside``) per input for a window of ``m`` new draws, K ~ BetaBinom(m, a, b) (:func:`new_draw_outside`).

    >>> [round(float(p), 3) for p in outside_p_values(np.array([0.0, 10.0, 30.0]), 1000, 206)]
    [1.0, 0.415, 0.021]
    """
    from scipy.stats import betabinom  # on use: scipy.stats costs ~0.4 s at every command start

    a, b = new_draw_outside(n_rows)
    return np.asarray(betabinom.sf(np.asarray(outside) - 1, m, a, b), dtype=np.float64)


#: the reference range is widened by this share of its width on each side (see :class:`RangeDrift`)
RANGE_MARGIN: Final = 0.01


class RangeDrift(PerFeatureTest):
    """Per input, the share of the window outside the reference range [low, high], tested against ``expected``.

    Parameters
    ----------
    low, high : (n,) the reference range of each input (:func:`reference_range` of ``reference_rows`` rows).
    reference_rows : N, the rows the range was taken from (its null: :func:`outside_p_values`).
    feature_names : n names.
    plan : the window and the test cadence (default :class:`WindowPlan`'s: the last 1000 events, every 100).
    alpha : the false discovery rate across inputs.
    min_share : the smallest share outside that counts (an effect-size floor, 0 < min_share < 1).
    name : label reported in :class:`DriftState`.

    ``statistics`` (= ``shares``) and the ``statistic`` of each input in ``moved``: its share outside the range;
    ``expected``: a new draw's mean share outside, 2k/(N+1), the same for every input.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> ref = rng.normal(size=(5000, 2))
    >>> low, high = reference_range(ref)
    >>> rd = RangeDrift(low, high, 5000, feature_names=["a", "b"], plan=WindowPlan(window=500, every=100))
    >>> rd.update(rng.normal(size=(1000, 2))).drift_detected
    False
    >>> noisy = rng.normal(size=(500, 2)) * [1.0, 2.0]
    >>> [(m.name, round(m.statistic, 2)) for m in rd.update(noisy).moved]
    [('b', 0.1)]
    """

    def __init__(
        self,
        low: ArrayLike,
        high: ArrayLike,
        reference_rows: int,
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
        require(reference_rows >= 1, f"reference_rows must be >= 1; got {reference_rows!r}")
        self.reference_rows = int(reference_rows)
        n = self.low.size
        a, b = new_draw_outside(self.reference_rows)
        self.expected = np.full(n, a / (a + b))
        self.feature_names = tuple(str(s) for s in feature_names)
        if self.high.size != n or self.expected.size != n or len(self.feature_names) != n or n == 0:
            raise DataError(
                f"reference range disagrees: {n} lows, {self.high.size} highs, {len(self.feature_names)} names"
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
            p[candidates] = outside_p_values(k[candidates], m, self.reference_rows)
        self._flag(p, self.min_share, event)

    @property
    def shares(self) -> NDArray[np.float64]:
        """(n,) each input's share outside the range at the last test (a copy)."""
        return self._stat.copy()
