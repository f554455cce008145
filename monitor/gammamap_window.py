"""The live Gamma Map of a stream: a ring of the last events' cells, with the running total since a reset.

Binned like :func:`monitor.gammamap.gamma_map` on ``P_EDGES`` × the model's γ edges; :meth:`GammaMapWindow.set_edges`
moves it to other edges (a reference that brings the model's own) by re-binning the events it holds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from monitor.errors import DataError
from monitor.gammamap import GAMMA_EDGES, P_EDGES, GammaMap, bin_indices, checked_edges


class GammaMapWindow:
    """The Gamma Map of the last ``capacity`` events fed, plus the running total since :meth:`reset`.

    Holds each held event's cell and its (P, γ), so memory is ``capacity`` × 20 bytes whatever the traffic, and
    :meth:`set_edges` re-bins the held events exactly. Not thread-safe: the owner locks.

    >>> w = GammaMapWindow(capacity=2).update(np.array([0.9, 0.9, 0.2]), np.array([0.001, 0.001, 2.0]))
    >>> w.window().total, w.cumulative().total, w.window().counts[9][9]
    (2, 3, 1)
    """

    def __init__(self, capacity: int = 2000, gamma_edges: Sequence[float] = GAMMA_EDGES) -> None:
        if capacity < 1:
            raise DataError(f"a Gamma Map window needs capacity ≥ 1 event; got {capacity}")
        self.capacity = int(capacity)
        self.gamma_edges = checked_edges(gamma_edges)
        self._rows, self._cols = len(P_EDGES) - 1, len(self.gamma_edges) - 1
        self.reset()

    def reset(self) -> None:
        self._ring = np.full(self.capacity, -1, dtype=np.int32)
        self._p = np.zeros(self.capacity, dtype=np.float64)
        self._g = np.zeros(self.capacity, dtype=np.float64)
        self._pos = 0
        self._window = np.zeros(self._rows * self._cols, dtype=np.int64)
        self._total = np.zeros(self._rows * self._cols, dtype=np.int64)
        self._skipped = 0
        #: the cells' counts the last :meth:`update` added (flat, row-major)
        self.last_added = np.zeros(self._rows * self._cols, dtype=np.int64)

    def set_edges(self, gamma_edges: Sequence[float]) -> None:
        """Move to other γ edges: the held events are re-binned (the window's map is exact on the new edges); the
        running total restarts from them, since counts on the old edges cannot be split."""
        edges = checked_edges(gamma_edges)
        if edges == self.gamma_edges:
            return
        self.gamma_edges, self._cols = edges, len(edges) - 1
        held = self._ring >= 0
        pi, gi = bin_indices(self._p[held], self._g[held], edges)
        self._ring[held] = (pi * self._cols + gi).astype(np.int32)
        self._window = np.bincount(self._ring[held], minlength=self._rows * self._cols).astype(np.int64)
        self._total = self._window.copy()
        self.last_added = np.zeros(self._rows * self._cols, dtype=np.int64)

    def update(self, p: NDArray[np.floating], gamma: NDArray[np.floating]) -> GammaMapWindow:
        """Add events (same rules as :func:`gamma_map`: non-finite pairs are skipped); :attr:`last_added` then holds
        the new events' cell counts for whoever exports them."""
        p = np.asarray(p, dtype=np.float64).reshape(-1)
        gamma = np.asarray(gamma, dtype=np.float64).reshape(-1)
        if p.shape != gamma.shape:
            raise DataError(f"Gamma Map window needs one P per γ; got {p.size} P values and {gamma.size} γ values")
        finite = np.isfinite(p) & np.isfinite(gamma)
        self._skipped += int(np.count_nonzero(~finite))
        pf, gf = p[finite], gamma[finite]
        if np.any((pf < 0) | (pf > 1)) or np.any(gf < 0):
            raise DataError("Gamma Map window needs P in [0, 1] and γ ≥ 0; pass the predicted class's probability")
        pi, gi = bin_indices(pf, gf, self.gamma_edges)
        cells = (pi * self._cols + gi).astype(np.int32)
        added = np.bincount(cells, minlength=self._rows * self._cols)
        self._total += added
        self.last_added = added
        k = cells.size
        if k >= self.capacity:
            self._ring[:], self._p[:], self._g[:] = cells[-self.capacity :], pf[-self.capacity :], gf[-self.capacity :]
            self._pos = 0
            self._window = np.bincount(self._ring, minlength=self._rows * self._cols).astype(np.int64)
            return self
        idx = (self._pos + np.arange(k)) % self.capacity
        old = self._ring[idx]
        old = old[old >= 0]
        self._window -= np.bincount(old, minlength=self._rows * self._cols)
        self._window += added
        self._ring[idx], self._p[idx], self._g[idx] = cells, pf, gf
        self._pos = int((self._pos + k) % self.capacity)
        return self

    def _map(self, flat: NDArray[np.int64]) -> GammaMap:
        return GammaMap(P_EDGES, self.gamma_edges, flat.reshape(self._rows, self._cols).tolist(), skipped=self._skipped)

    def window(self) -> GammaMap:
        """The map of the last ``capacity`` events."""
        return self._map(self._window)

    def cumulative(self) -> GammaMap:
        """The map of every event since :meth:`reset`."""
        return self._map(self._total)
