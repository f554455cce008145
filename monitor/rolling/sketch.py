"""Stage 5a: fixed-bin histograms, the bounded-memory sketch behind the time windows.

A :class:`BinGrid` maps values to a fixed set of bins, so a window keeps one count vector per time bucket
whatever the event rate. Bin 0 holds values <= 0 (γ and flicker are exactly 0 for many events, and a
quantile that falls there must read 0, not half a bin), bins 1 … len(edges)-1 are the right-closed
intervals (edges[i-1], edges[i]], and the last bin holds everything above the top edge.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.errors import ConfigError


@dataclass(frozen=True, slots=True)
class BinGrid:
    """Fixed histogram bins with quantile read-back.

    Parameters
    ----------
    edges : (k,) float64, strictly increasing, ``edges[0] == 0``.
    log : interpolate geometrically inside a bin (for log-spaced grids) instead of linearly.

    Examples
    --------
    >>> grid = BinGrid.unit(bins=4)
    >>> grid.n_bins, grid.index(np.array([0.0, 0.1, 0.25, 1.0, 2.0])).tolist()
    (6, [0, 1, 1, 4, 5])
    >>> counts = grid.counts(np.array([0.0, 0.0, 0.6, 0.7]))
    >>> [round(v, 3) for v in grid.quantiles(counts, [0.25, 0.75]).tolist()]
    [0.0, 0.625]
    """

    edges: NDArray[np.float64]
    log: bool = False

    def __post_init__(self) -> None:
        e = np.asarray(self.edges, dtype=np.float64)
        if e.ndim != 1 or e.size < 2 or e[0] != 0.0 or not np.all(np.diff(e) > 0):
            raise ConfigError(
                f"histogram edges must be a strictly increasing 1-D array starting at 0; got {self.edges!r}"
            )
        object.__setattr__(self, "edges", e)

    @classmethod
    def log_spaced(cls, low: float = 1e-6, high: float = 1e3, bins_per_decade: int = 16) -> BinGrid:
        """Edges 0, low, …, high with ``bins_per_decade`` geometric bins per factor of 10 (for γ).

        >>> g = BinGrid.log_spaced(1e-2, 1.0, 2)
        >>> [round(v, 4) for v in g.edges.tolist()]
        [0.0, 0.01, 0.0316, 0.1, 0.3162, 1.0]
        """
        if not 0 < low < high:
            raise ConfigError(f"log grid needs 0 < low < high; got low={low!r}, high={high!r}")
        if bins_per_decade < 1:
            raise ConfigError(f"log grid needs bins_per_decade >= 1; got {bins_per_decade!r}")
        decades = np.log10(high / low)
        steps = max(1, round(decades * bins_per_decade))
        return cls(np.concatenate([[0.0], np.geomspace(low, high, steps + 1)]), log=True)

    @classmethod
    def unit(cls, bins: int = 100) -> BinGrid:
        """``bins`` equal bins on (0, 1] plus the zero bin (for flicker, P_adj)."""
        if bins < 1:
            raise ConfigError(f"unit grid needs bins >= 1; got {bins!r}")
        return cls(np.linspace(0.0, 1.0, bins + 1), log=False)

    @property
    def n_bins(self) -> int:
        """Number of count slots: the zero bin, the interior bins and the overflow bin."""
        return int(self.edges.size + 1)

    @property
    def resolution(self) -> float:
        """Widest interior bin: a ratio (hi/lo) for log grids, a width for linear ones."""
        inner = self.edges[1:]
        if self.log:
            return float(np.max(inner[1:] / inner[:-1])) if inner.size > 1 else 1.0
        return float(np.max(np.diff(self.edges)))

    def index(self, values: NDArray[np.float64]) -> NDArray[np.intp]:
        """Bin index of each value, shape like ``values``; NaN must be removed by the caller."""
        return np.searchsorted(self.edges, values, side="left")

    def counts(self, values: NDArray[np.float64]) -> NDArray[np.int64]:
        """Histogram of finite ``values``, shape (n_bins,)."""
        v = values[np.isfinite(values)]
        return np.bincount(self.index(v), minlength=self.n_bins).astype(np.int64)

    def quantiles(self, counts: NDArray[np.int64], qs: ArrayLike) -> NDArray[np.float64]:
        """Quantiles read back from a count vector, interpolated inside the bin (NaN when empty).

        Accurate to one bin: the true sample quantile and the estimate share a bin (or sit on its
        edge), so the error is below :attr:`resolution`.
        """
        q = np.atleast_1d(np.asarray(qs, dtype=np.float64))
        total = float(counts.sum())
        if total <= 0:
            return np.full(q.shape, np.nan)
        cum = np.cumsum(counts, dtype=np.float64)
        target = np.clip(q, 0.0, 1.0) * total
        target = np.maximum(target, 1e-9)  # q = 0 reads the first non-empty bin, not the empty zero bin
        b = np.minimum(np.searchsorted(cum, target, side="left"), counts.size - 1)
        before = np.where(b > 0, cum[np.maximum(b - 1, 0)], 0.0)
        frac = np.clip((target - before) / np.maximum(counts[b], 1), 0.0, 1.0)
        out = np.empty(q.shape)
        for i, (bi, fi) in enumerate(zip(b.tolist(), frac.tolist(), strict=True)):
            if bi == 0:
                out[i] = 0.0
            elif bi >= self.edges.size:
                out[i] = self.edges[-1]  # overflow: the top edge is the best bounded answer
            else:
                lo, hi = self.edges[bi - 1], self.edges[bi]
                out[i] = lo * (hi / lo) ** fi if self.log and lo > 0 else lo + (hi - lo) * fi
        return out
