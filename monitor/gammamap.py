"""The Gamma Map: a 2-D histogram of (P of the predicted class, γ) over scored classifier events.

After "Harmonic Machine Learning Models are Robust" (§5, Fig. 5): images found unstable by the γ-gradient
search (Algorithm 2) dominate the high-γ / low-P corner, so the density of events over a fixed P × γ grid shows at a
glance how much of the traffic sits where predictions are fragile. This module holds the pure value type, its
builder from arrays, and the one SVG renderer shared by ``/gammamap``, the docs and the report page.

Edges (``monitor/gammamap_edges.py``) are fixed per model so its maps from different windows, segments, processes
and the reference add up cell by cell: P in 10 equal bins (``P_EDGES``); γ on the model's own edges, the deciles of
its reference's γ (``model_gamma_edges``, stored with the reference's map), or the fixed half-decade grid
``GAMMA_EDGES`` where the model has none (no reference yet, a reference too small or written before).

Events with a non-finite P or γ are not counted (``skipped`` says how many); P outside [0, 1] or γ < 0 is an error.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.errors import DataError
from monitor.gammamap_edges import (
    GAMMA_BIN_LABELS,
    GAMMA_EDGES,
    MIN_EDGE_EVENTS,
    P_BIN_LABELS,
    P_EDGES,
    edges_note,
    gamma_bin_labels,
    model_gamma_edges,
)
from monitor.gammamap_edges import fmt as _fmt
from monitor.gammamap_edges import label as _label

__all__ = [
    "GAMMA_BIN_LABELS",
    "GAMMA_EDGES",
    "MIN_EDGE_EVENTS",
    "P_BIN_LABELS",
    "P_EDGES",
    "GammaMap",
    "bin_indices",
    "edges_note",
    "empty_map",
    "gamma_bin_labels",
    "gamma_map",
    "model_gamma_edges",
    "readable",
    "render_svg",
]


def _edge_json(x: float) -> float | str:
    return "+Inf" if math.isinf(x) else x


def _edge_from_json(x: object) -> float:
    if x == "+Inf":
        return math.inf
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return float(x)
    raise DataError(f"a Gamma Map edge must be a number or '+Inf'; got {x!r}. Was the JSON written by to_json()?")


@dataclass(frozen=True)
class GammaMap:
    """Counts of events per (P bin, γ bin); rows follow ``p_edges``, columns ``gamma_edges``.

    ``unstable`` is the share of probed events found unstable per cell (None where no event of the cell was probed),
    or None for the whole map when Algorithm 2 ran on none. ``probed`` and ``unstable_counts`` carry the numerators
    and denominators so maps merge exactly. ``skipped`` counts events with a non-finite P or γ.

    >>> m = gamma_map(np.array([0.95, 0.4]), np.array([0.002, 0.3]))
    >>> m.total, m.counts[9][9], m.counts[4][13]
    (2, 1, 1)
    """

    p_edges: tuple[float, ...]
    gamma_edges: tuple[float, ...]
    counts: list[list[int]]
    unstable: list[list[float | None]] | None = None
    probed: list[list[int]] | None = None
    unstable_counts: list[list[int]] | None = None
    skipped: int = 0

    def __post_init__(self) -> None:
        rows, cols = len(self.p_edges) - 1, len(self.gamma_edges) - 1
        if rows < 1 or cols < 1:
            raise DataError(
                f"a Gamma Map needs at least 2 edges per axis; got {len(self.p_edges)} P edges and "
                f"{len(self.gamma_edges)} γ edges"
            )
        for name, grid in (
            ("counts", self.counts),
            ("probed", self.probed),
            ("unstable_counts", self.unstable_counts),
            ("unstable", self.unstable),
        ):
            if grid is None:
                continue
            if len(grid) != rows or any(len(row) != cols for row in grid):
                got = f"{len(grid)} rows of lengths {sorted({len(r) for r in grid})}"
                raise DataError(
                    f"Gamma Map {name} must have {rows} rows of {cols} cells (one per P bin × γ bin); got {got}"
                )

    @property
    def total(self) -> int:
        """Events counted in the map."""
        return sum(sum(row) for row in self.counts)

    def centroid(self) -> tuple[float, float]:
        """Where the map's mass sits: (mean P over the P bins' centres, mean γ bin index, 0-based); NaN when empty.
        Mass moving toward high γ / low P shows as the first falling and the second rising.

        >>> gamma_map(np.array([0.95, 0.55]), np.array([1e-7, 1e-6])).centroid()
        (0.75, 2.0)
        """
        c = np.asarray(self.counts, dtype=np.float64)
        total = c.sum()
        if total == 0:
            return math.nan, math.nan
        p_mid = (np.asarray(self.p_edges[:-1]) + np.asarray(self.p_edges[1:])) / 2
        p = float((c.sum(axis=1) * p_mid).sum() / total)
        g = float((c.sum(axis=0) * np.arange(c.shape[1])).sum() / total)
        return round(p, 12), round(g, 12)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict; the infinite last γ edge is written as the string ``"+Inf"``.

        >>> gamma_map(np.array([0.5]), np.array([0.01])).to_json()["gamma_edges"][-1]
        '+Inf'
        """
        return {
            "p_edges": [_edge_json(x) for x in self.p_edges],
            "gamma_edges": [_edge_json(x) for x in self.gamma_edges],
            "p_bins": list(P_BIN_LABELS) if self.p_edges == P_EDGES else None,
            "gamma_bins": list(gamma_bin_labels(self.gamma_edges)),
            "counts": [list(row) for row in self.counts],
            "total": self.total,
            "skipped": self.skipped,
            "unstable": None if self.unstable is None else [list(row) for row in self.unstable],
            "probed": None if self.probed is None else [list(row) for row in self.probed],
            "unstable_counts": None if self.unstable_counts is None else [list(r) for r in self.unstable_counts],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GammaMap:
        """Read back what :meth:`to_json` wrote (e.g. a reference file's map)."""
        try:
            probed, unstable_counts = data.get("probed"), data.get("unstable_counts")
            return cls(
                p_edges=tuple(_edge_from_json(x) for x in data["p_edges"]),
                gamma_edges=tuple(_edge_from_json(x) for x in data["gamma_edges"]),
                counts=[[int(c) for c in row] for row in data["counts"]],
                unstable=_shares(probed, unstable_counts)
                if probed is not None and unstable_counts is not None
                else None,
                probed=None if probed is None else [[int(c) for c in row] for row in probed],
                unstable_counts=None if unstable_counts is None else [[int(c) for c in r] for r in unstable_counts],
                skipped=int(data.get("skipped", 0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(
                f"not a Gamma Map: expected keys p_edges, gamma_edges, counts as written by to_json(); "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    def merged(self, other: GammaMap) -> GammaMap:
        """Cell-wise sum of two maps with the same edges (instability shares recomputed from the counts).

        >>> a = gamma_map(np.array([0.9]), np.array([0.5]), np.array([True]))
        >>> b = gamma_map(np.array([0.9]), np.array([0.5]), np.array([False]))
        >>> m = a.merged(b)
        >>> m.counts[9][14], m.unstable[9][14]
        (2, 0.5)
        """
        if self.p_edges != other.p_edges or self.gamma_edges != other.gamma_edges:
            raise DataError(
                f"Gamma Maps with different edges cannot be merged: γ edges {_edges_text(self.gamma_edges)} and "
                f"{_edges_text(other.gamma_edges)}; build both with gamma_map(..., gamma_edges=) on one model's edges"
            )
        counts = _add(self.counts, other.counts)
        probed = _add_opt(self.probed, other.probed)
        unstable_counts = _add_opt(self.unstable_counts, other.unstable_counts)
        unstable = _shares(probed, unstable_counts) if probed is not None and unstable_counts is not None else None
        return GammaMap(
            self.p_edges, self.gamma_edges, counts, unstable, probed, unstable_counts, self.skipped + other.skipped
        )


def _edges_text(edges: tuple[float, ...]) -> str:
    return "the fixed grid" if edges == GAMMA_EDGES else "(" + ", ".join(_fmt(e) for e in edges) + ")"


def _add(a: list[list[int]], b: list[list[int]]) -> list[list[int]]:
    return [[x + y for x, y in zip(ra, rb, strict=True)] for ra, rb in zip(a, b, strict=True)]


def _add_opt(a: list[list[int]] | None, b: list[list[int]] | None) -> list[list[int]] | None:
    if a is None:
        return None if b is None else [list(r) for r in b]
    if b is None:
        return [list(r) for r in a]
    return _add(a, b)


def _shares(probed: list[list[int]], unstable: list[list[int]]) -> list[list[float | None]] | None:
    if not any(any(row) for row in probed):
        return None
    return [
        [(u / p if p else None) for p, u in zip(rp, ru, strict=True)] for rp, ru in zip(probed, unstable, strict=True)
    ]


def empty_map(gamma_edges: tuple[float, ...] = GAMMA_EDGES) -> GammaMap:
    """A map with no events on ``P_EDGES`` × ``gamma_edges``."""
    rows, cols = len(P_EDGES) - 1, len(gamma_edges) - 1
    return GammaMap(P_EDGES, gamma_edges, [[0] * cols for _ in range(rows)])


def checked_edges(gamma_edges: Sequence[float]) -> tuple[float, ...]:
    """``gamma_edges`` as floats, refused unless they rise strictly from 0 to +inf."""
    edges = tuple(float(e) for e in gamma_edges)
    if len(edges) < 2 or edges[0] != 0.0 or not math.isinf(edges[-1]) or any(a >= b for a, b in pairwise(edges)):
        raise DataError(
            f"γ edges must rise strictly from 0 to +inf; got {edges}. Take them from model_gamma_edges() or a "
            "reference's map"
        )
    return edges


def bin_indices(
    p: NDArray[np.floating], gamma: NDArray[np.floating], gamma_edges: Sequence[float] = GAMMA_EDGES
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """(P bin, γ bin) of each event under ``P_EDGES`` and ``gamma_edges``; inputs must be finite, P in [0, 1], γ ≥ 0.

    >>> bin_indices(np.array([0.0, 1.0]), np.array([0.0, 1e9]))
    (array([0, 9]), array([ 0, 17]))
    """
    g_edges = np.asarray(gamma_edges, dtype=np.float64)
    pi = np.clip(np.searchsorted(np.asarray(P_EDGES), p, side="right") - 1, 0, len(P_EDGES) - 2)
    gi = np.clip(np.searchsorted(g_edges, gamma, side="right") - 1, 0, g_edges.size - 2)
    return pi.astype(np.intp), gi.astype(np.intp)


def gamma_map(
    p: NDArray[np.floating],
    gamma: NDArray[np.floating],
    unstable: NDArray[np.bool_] | None = None,
    *,
    probed: NDArray[np.bool_] | None = None,
    gamma_edges: Sequence[float] = GAMMA_EDGES,
) -> GammaMap:
    """Build a Gamma Map from per-event predicted-class probability and γ.

    Parameters
    ----------
    p : (B,) probability of the predicted class, in [0, 1].
    gamma : (B,) γ of each event, ≥ 0.
    unstable : (B,) whether Algorithm 2 flipped the event's class, or None where it ran on none.
    probed : (B,) which events Algorithm 2 ran on; default every event when ``unstable`` is given. Entries of
        ``unstable`` outside ``probed`` are ignored.
    gamma_edges : the γ edges: the model's own (its reference map's, :func:`model_gamma_edges`); default the fixed
        grid ``GAMMA_EDGES``.

    Returns
    -------
    GammaMap on ``P_EDGES`` × ``gamma_edges``.

    Raises
    ------
    DataError
        If the arrays differ in length, P lies outside [0, 1], γ is negative or the edges do not rise from 0 to +inf.
    """
    edges = checked_edges(gamma_edges)
    p = np.asarray(p, dtype=np.float64).reshape(-1)
    gamma = np.asarray(gamma, dtype=np.float64).reshape(-1)
    if p.shape != gamma.shape:
        raise DataError(f"gamma_map needs one P per γ; got {p.size} P values and {gamma.size} γ values")
    finite = np.isfinite(p) & np.isfinite(gamma)
    if np.any((p[finite] < 0) | (p[finite] > 1)):
        bad = float(p[finite][(p[finite] < 0) | (p[finite] > 1)][0])
        raise DataError(
            f"P must be a probability in [0, 1]; got {bad}. Pass the predicted class's probability, not a logit"
        )
    if np.any(gamma[finite] < 0):
        raise DataError(f"γ must be ≥ 0; got {float(gamma[finite][gamma[finite] < 0][0])}")
    rows, cols = len(P_EDGES) - 1, len(edges) - 1
    pi, gi = bin_indices(p[finite], gamma[finite], edges)
    counts = np.zeros((rows, cols), dtype=np.int64)
    np.add.at(counts, (pi, gi), 1)
    probed_grid: list[list[int]] | None = None
    unstable_grid: list[list[int]] | None = None
    shares: list[list[float | None]] | None = None
    if unstable is not None or probed is not None:
        uns = np.zeros(p.shape, dtype=bool) if unstable is None else np.asarray(unstable, dtype=bool).reshape(-1)
        ran = np.ones(p.shape, dtype=bool) if probed is None else np.asarray(probed, dtype=bool).reshape(-1)
        if uns.shape != p.shape or ran.shape != p.shape:
            raise DataError(
                f"gamma_map needs one unstable/probed flag per event; got {uns.size} and {ran.size} "
                f"flags for {p.size} events"
            )
        ran_f, uns_f = ran[finite], uns[finite] & ran[finite]
        pc = np.zeros((rows, cols), dtype=np.int64)
        uc = np.zeros((rows, cols), dtype=np.int64)
        np.add.at(pc, (pi[ran_f], gi[ran_f]), 1)
        np.add.at(uc, (pi[uns_f], gi[uns_f]), 1)
        probed_grid, unstable_grid = pc.tolist(), uc.tolist()
        shares = _shares(probed_grid, unstable_grid)
    return GammaMap(P_EDGES, edges, counts.tolist(), shares, probed_grid, unstable_grid, int(np.count_nonzero(~finite)))


# --- the drawn view: the model's own columns and rows --------------------------------------------------------------

#: the drawn γ columns hold the reference's central mass between these shares, plus one column each side
_VIEW_SHARES = (0.005, 0.995)


def readable(
    live: GammaMap, reference: GammaMap | None = None, *, classes: int | None = None
) -> tuple[GammaMap, GammaMap | None]:
    """Both maps on the columns and rows the model uses, cells merged exactly (counts add up; unstable shares are
    recomputed from the merged counts).

    γ: the columns holding the reference's central 99 % of events (the live map's where there is no reference),
    one more each side; every column below is merged into the first drawn, every column above into the last, so
    the first drawn bin starts at 0 and the last runs to +∞. P: with ``classes`` = K, the rows below 1/K (where the
    predicted class's probability cannot lie) are left out and the first drawn row starts at 1/K; if either map has
    events there (a label output, a model whose probabilities do not sum to 1), they are merged into it instead and
    it starts at 0. Maps with other edges than each other are returned unchanged.

    >>> live = gamma_map(np.array([0.95, 0.7]), np.array([0.002, 0.004]))
    >>> view, _ = readable(live, classes=2)
    >>> view.p_edges[0], len(view.p_edges) - 1, len(view.gamma_edges) - 1, view.total
    (0.5, 5, 4, 2)
    """
    if reference is not None and (reference.p_edges != live.p_edges or reference.gamma_edges != live.gamma_edges):
        return live, reference
    basis = reference if reference is not None and reference.total else live
    col_groups = _column_groups(basis)
    row_groups, first = _row_groups(live, reference, classes)
    p_edges = (first, *(live.p_edges[g[0]] for g in row_groups[1:]), live.p_edges[-1])
    gamma_edges = (live.gamma_edges[0], *(live.gamma_edges[g[0]] for g in col_groups[1:]), live.gamma_edges[-1])
    view = _merge(live, row_groups, col_groups, p_edges, gamma_edges)
    return view, None if reference is None else _merge(reference, row_groups, col_groups, p_edges, gamma_edges)


def _column_groups(m: GammaMap) -> list[list[int]]:
    cols = len(m.gamma_edges) - 1
    mass = np.asarray(m.counts, dtype=np.float64).sum(axis=0)
    if mass.sum() == 0 or cols < 3:
        return [[j] for j in range(cols)]
    share = np.cumsum(mass) / mass.sum()
    lo = max(int(np.searchsorted(share, _VIEW_SHARES[0], side="right")) - 1, 0)
    hi = min(int(np.searchsorted(share, _VIEW_SHARES[1], side="left")) + 1, cols - 1)
    hi = max(hi, lo + 1)
    return [list(range(lo + 1)), *([j] for j in range(lo + 1, hi)), list(range(hi, cols))]


def _row_groups(live: GammaMap, reference: GammaMap | None, classes: int | None) -> tuple[list[list[int]], float]:
    rows = len(live.p_edges) - 1
    floor = 1.0 / classes if classes is not None and classes >= 2 else 0.0
    below = [i for i in range(rows) if live.p_edges[i + 1] <= floor + 1e-12]
    if not below or len(below) >= rows:
        return [[i] for i in range(rows)], live.p_edges[0]
    empty = all(
        m.counts[i][j] == 0 for m in (live, reference) if m is not None for i in below for j in range(len(m.counts[i]))
    )
    rest = [[i] for i in range(len(below) + 1, rows)]
    if empty:
        return [[len(below)], *rest], floor
    return [[*below, len(below)], *rest], live.p_edges[0]


def _merge(
    m: GammaMap,
    rows: list[list[int]],
    cols: list[list[int]],
    p_edges: tuple[float, ...],
    gamma_edges: tuple[float, ...],
) -> GammaMap:
    def grid(values: list[list[int]]) -> list[list[int]]:
        return [[sum(values[i][j] for i in rg for j in cg) for cg in cols] for rg in rows]

    probed = None if m.probed is None else grid(m.probed)
    unstable_counts = None if m.unstable_counts is None else grid(m.unstable_counts)
    unstable = None if probed is None or unstable_counts is None else _shares(probed, unstable_counts)
    return GammaMap(p_edges, gamma_edges, grid(m.counts), unstable, probed, unstable_counts, m.skipped)


# --- the one renderer ---------------------------------------------------------------------------------------------

_CELL_W, _CELL_H = 34, 22
_LEFT, _TOP, _BOTTOM, _GAP = 56, 40, 80, 36
#: the smallest text drawn (axis labels, the legend), px
LABEL_PX = 11
#: the legend's shares of the fullest cell, lightest to darkest
_LEGEND_STEPS = (0.0, 0.05, 0.25, 0.5, 1.0)
_LEGEND_H = 44


def _colour(share: float, top: float) -> str:
    """White → dark blue by the cell's share of the map's events relative to the map's fullest cell (``top``);
    sqrt so sparse cells stay visible."""
    t = math.sqrt(max(0.0, min(1.0, share / top))) if top > 0 else 0.0
    r, g, b = (round(255 - t * (255 - c)) for c in (8, 48, 107))
    return f"#{r:02x}{g:02x}{b:02x}"


def _panel(m: GammaMap, x0: int, heading: str, out: list[str]) -> None:
    rows, cols = len(m.p_edges) - 1, len(m.gamma_edges) - 1
    total = m.total
    top = max((max(row) for row in m.counts), default=0) / total if total else 0.0
    out.append(
        f'<text x="{x0 + cols * _CELL_W / 2:.0f}" y="{_TOP - 10}" text-anchor="middle" '
        f'font-weight="bold">{html.escape(heading)} (n={total})</text>'
    )
    for i in range(rows):
        y = _TOP + (rows - 1 - i) * _CELL_H  # high P at the top
        for j in range(cols):
            x = x0 + j * _CELL_W
            c = m.counts[i][j]
            share = c / total if total else 0.0
            tip = (
                f"P {_label(m.p_edges[i], m.p_edges[i + 1])}, γ {_label(m.gamma_edges[j], m.gamma_edges[j + 1])}: "
                f"{c} events ({share:.1%})"
            )
            u = None if m.unstable is None else m.unstable[i][j]
            if u is not None:
                tip += f", {u:.0%} of probed unstable"
            out.append(
                f'<rect x="{x}" y="{y}" width="{_CELL_W}" height="{_CELL_H}" fill="{_colour(share, top)}" '
                f'stroke="#ccc" stroke-width="0.5"><title>{html.escape(tip)}</title></rect>'
            )
            if u is not None and u > 0:
                rad = 2 + 7 * math.sqrt(u)
                out.append(
                    f'<circle cx="{x + _CELL_W / 2}" cy="{y + _CELL_H / 2}" r="{rad:.1f}" fill="none" '
                    f'stroke="#d62728" stroke-width="1.5"/>'
                )
    for i in range(rows + 1):  # P axis labels at the edges
        y = _TOP + (rows - i) * _CELL_H
        out.append(
            f'<text x="{x0 - 4}" y="{y + 4}" text-anchor="end" font-size="{LABEL_PX}">{_fmt(m.p_edges[i])}</text>'
        )
    base = _TOP + rows * _CELL_H
    for j in range(cols + 1):
        x = x0 + j * _CELL_W
        out.append(
            f'<text x="{x}" y="{base + 12}" text-anchor="end" font-size="{LABEL_PX}" '
            f'transform="rotate(-45 {x} {base + 12})">{_fmt(m.gamma_edges[j])}</text>'
        )
    out.append(f'<text x="{x0 + cols * _CELL_W / 2:.0f}" y="{base + _BOTTOM - 10}" text-anchor="middle">γ</text>')
    out.append(
        f'<text x="{x0 - 42}" y="{_TOP + rows * _CELL_H / 2:.0f}" text-anchor="middle" '
        f'transform="rotate(-90 {x0 - 42} {_TOP + rows * _CELL_H / 2:.0f})">P of predicted class</text>'
    )


def _legend(y0: int, out: list[str]) -> None:
    """The colour key (a cell's events as a share of its map's fullest cell) and the red ring's meaning."""
    x = _LEFT
    out.append(f'<text x="{x}" y="{y0 + 12}" font-size="{LABEL_PX}">cell events / fullest cell:</text>')
    x += 150
    for share in _LEGEND_STEPS:
        out.append(
            f'<rect x="{x}" y="{y0 + 1}" width="{_CELL_W}" height="14" fill="{_colour(share, 1.0)}" '
            f'stroke="#ccc" stroke-width="0.5"/>'
        )
        out.append(
            f'<text x="{x + _CELL_W / 2}" y="{y0 + 28}" text-anchor="middle" font-size="{LABEL_PX}">{share:.0%}</text>'
        )
        x += _CELL_W + 4
    x += 20
    out.append(f'<circle cx="{x}" cy="{y0 + 8}" r="6" fill="none" stroke="#d62728" stroke-width="1.5"/>')
    out.append(
        f'<text x="{x + 12}" y="{y0 + 12}" font-size="{LABEL_PX}">ring: share of probed events unstable '
        f"(Algorithm 2)</text>"
    )


def render_svg(
    live: GammaMap,
    reference: GammaMap | None = None,
    *,
    title: str = "",
    labels: tuple[str, str] = ("live", "reference"),
    classes: int | None = None,
    note: str = "",
) -> str:
    """Draw the map (and the reference's beside it, on the left) as one self-contained SVG document.

    Both panels are drawn on the model's own columns and rows (:func:`readable`; ``classes`` = K starts the P axis
    at 1/K). ``labels`` names the two panels (live first). Text is at least :data:`LABEL_PX` px; a legend under the panels
    keys the shades and the rings; ``note`` (e.g. which γ edges the map is on) is written under it. Each cell's shade is its share of its own map's events (darkest: that map's fullest cell), so maps of different
    sizes compare; a red ring's size
    shows the share of probed events found unstable in that cell. Hovering a cell gives its counts.

    >>> svg = render_svg(gamma_map(np.array([0.9]), np.array([0.01])), title="m <a>")
    >>> svg.startswith("<svg") and "m &lt;a&gt;" in svg and svg.endswith("</svg>")
    True
    """
    live, reference = readable(live, reference, classes=classes)
    panels: list[tuple[GammaMap, str]] = []
    if reference is not None:
        panels.append((reference, labels[1]))
    panels.append((live, labels[0]))
    # maps on different edges (a baseline built before the model's) are drawn each on its own cells
    cols = max(len(m.gamma_edges) - 1 for m, _ in panels)
    rows = max(len(m.p_edges) - 1 for m, _ in panels)
    panel_w = _LEFT + cols * _CELL_W + _GAP
    width = panel_w * len(panels) + 10
    width = max(width, 720)  # room for the legend
    height = _TOP + rows * _CELL_H + _BOTTOM + _LEGEND_H + (18 if title else 0) + (18 if note else 0)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">'
    ]
    out.append(f"<title>{html.escape(title or 'Gamma Map')}</title>")
    out.append(f'<rect width="{width}" height="{height}" fill="white"/>')
    shift = 18 if title else 0
    if title:
        out.append(f'<text x="{width / 2:.0f}" y="14" text-anchor="middle" font-size="13">{html.escape(title)}</text>')
    out.append(f'<g transform="translate(0 {shift})">')
    for k, (m, heading) in enumerate(panels):
        _panel(m, _LEFT + k * panel_w, heading, out)
    _legend(_TOP + rows * _CELL_H + _BOTTOM, out)
    if note:
        y = _TOP + rows * _CELL_H + _BOTTOM + _LEGEND_H + 4
        out.append(f'<text x="{_LEFT}" y="{y}" font-size="{LABEL_PX}">{html.escape(note)}</text>')
    out.append("</g></svg>")
    return "\n".join(out)
