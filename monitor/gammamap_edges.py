"""The Gamma Map's bin edges and their Prometheus label values: the fixed grid, and a model's own γ edges.

- ``P_EDGES``: 10 equal bins on [0, 1]; a bin is ``[lo, hi)`` except the last, which includes P = 1.
- ``GAMMA_EDGES`` (the fixed γ grid, the fallback): 18 bins: ``[0, 1e-7)``, then half-decade bins from 1e-7 to 10
  (``[1e-7, 3.16e-7)``, ..., ``[3.16, 10)``), then ``[10, +inf)``. γ's scale depends on the model, the output and
  the radius (on a small tabular model's probabilities it sits near 1e-5; on an image model's logits at pixel radius
  100 it reaches 1 and beyond), so the fixed range is wide and a map of one model fills a few adjacent columns.
- **A model's own γ edges** (:func:`model_gamma_edges`): the deciles of its reference's γ and the reference's
  largest γ, so the reference fills about a tenth of the events into each of 10 bins and an 11th bin,
  ``[reference max, +inf)``, holds the live events beyond the reference's range. They are fixed when the reference
  is built and stored with its map (``gamma_map.gamma_edges`` in the reference JSON), so every map of that model
  (windows, segments, processes that load the same reference) adds up cell by cell. Degenerate cases:

  - fewer than :data:`MIN_EDGE_EVENTS` reference events with P and γ: the fixed grid (deciles of a few events
    would move with every rebuild);
  - γ = 0 on every reference event (a constant region, e.g. a tree ensemble's leaves): no quantile separates
    anything, so the map has one γ bin, ``[0, +inf)``;
  - γ values below :data:`GAMMA_FLOOR` count as 0 (numerical noise): no edge is placed below it.

Label values (``p_bin``, ``gamma_bin``) are bounded, one per bin, and sort as strings in bin order (the order
Prometheus returns series in, so the order Grafana stacks a heatmap's rows in): the fixed grid's γ labels are the
positional ranges (``0.00001-0.0000316``, the last ``>=10``); a model's own are its bin's two-digit index and range
(``00:0-0.0000123`` … ``10:>=0.000871``), at most ``MODEL_GAMMA_BINS + 1`` of them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

import numpy as np
from numpy.typing import ArrayLike

#: predicted-class probability edges: 10 equal bins on [0, 1], the last closed on the right
P_EDGES: tuple[float, ...] = tuple(round(i / 10, 10) for i in range(11))
#: the fixed γ edges: 0, half-decades from 1e-7 to 10 (3 significant digits), +inf (18 bins)
GAMMA_EDGES: tuple[float, ...] = (0.0, *(float(f"{10.0 ** (-7 + k / 2):.3g}") for k in range(17)), math.inf)
#: a model's own γ edges: this many quantile bins of its reference's γ, plus one above the reference's largest γ
MODEL_GAMMA_BINS: Final = 10
#: the fewest reference events (with P and γ) a model's own γ edges are taken from; below, the fixed grid
MIN_EDGE_EVENTS: Final = 200
#: γ below this counts as 0 when placing a model's edges
GAMMA_FLOOR: Final = 1e-12


def label(lo: float, hi: float) -> str:
    """A bin's range as a label: ``lo-hi``, or ``>=lo`` for the open last bin (``>`` sorts after every digit)."""
    return f">={fmt(lo)}" if math.isinf(hi) else f"{fmt(lo)}-{fmt(hi)}"


def fmt(x: float) -> str:
    """Positional, 3 significant digits (``0.000000316``, not ``3.16e-07``): bin labels then sort as strings."""
    if math.isinf(x):
        return "inf"
    return str(np.format_float_positional(float(f"{x:.3g}"), trim="-"))


#: bounded Prometheus label values, one per bin (``p_bin``); they sort as strings in bin order
P_BIN_LABELS: tuple[str, ...] = tuple(label(P_EDGES[i], P_EDGES[i + 1]) for i in range(len(P_EDGES) - 1))
#: the fixed grid's ``gamma_bin`` label values, one per bin; they sort as strings in bin order
GAMMA_BIN_LABELS: tuple[str, ...] = tuple(
    label(GAMMA_EDGES[i], GAMMA_EDGES[i + 1]) for i in range(len(GAMMA_EDGES) - 1)
)


def gamma_bin_labels(edges: Sequence[float]) -> tuple[str, ...]:
    """The ``gamma_bin`` label values of γ ``edges``: :data:`GAMMA_BIN_LABELS` for the fixed grid, otherwise each
    bin's two-digit index and range, so they sort as strings in bin order whatever the numbers.

    >>> gamma_bin_labels((0.0, 0.002, 0.05, math.inf))
    ('00:0-0.002', '01:0.002-0.05', '02:>=0.05')
    >>> gamma_bin_labels((0.0, math.inf))
    ('00:>=0',)
    """
    edges = tuple(float(e) for e in edges)
    if edges == GAMMA_EDGES:
        return GAMMA_BIN_LABELS
    return tuple(f"{i:02d}:{label(edges[i], edges[i + 1])}" for i in range(len(edges) - 1))


def _sig3(x: float) -> float:
    return float(f"{x:.3g}")


def _above(x: float) -> float:
    """The smallest number of 3 significant digits strictly above ``x`` > 0.

    >>> _above(0.000123), _above(0.0001234), _above(9.99)
    (0.000124, 0.000124, 10.0)
    """
    step = 10.0 ** (math.floor(math.log10(x)) - 2)
    up = _sig3(math.floor(x / step + 1e-9) * step + step)
    return up if up > x else _sig3(up + step)


def model_gamma_edges(gamma: ArrayLike) -> tuple[float, ...]:
    """A model's own γ edges from its reference's per-event γ (see the module's docstring): 0, the deciles (3
    significant digits, duplicates and those below :data:`GAMMA_FLOOR` dropped), just above the largest γ, +inf.
    The fixed :data:`GAMMA_EDGES` with fewer than :data:`MIN_EDGE_EVENTS` finite values; ``(0, +inf)`` (one bin)
    when γ is 0 everywhere.

    >>> model_gamma_edges(np.linspace(0.0, 1.0, 1001))
    (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.01, inf)
    >>> model_gamma_edges(np.zeros(500))
    (0.0, inf)
    >>> model_gamma_edges(np.ones(50)) == GAMMA_EDGES
    True
    """
    g = np.asarray(gamma, dtype=np.float64).reshape(-1)
    g = g[np.isfinite(g)]
    if g.size < MIN_EDGE_EVENTS:
        return GAMMA_EDGES
    g = np.where(g < GAMMA_FLOOR, 0.0, g)
    top = float(g.max())
    if top <= 0.0:
        return (0.0, math.inf)
    quantiles = np.quantile(g, np.arange(1, MODEL_GAMMA_BINS) / MODEL_GAMMA_BINS)
    inner = sorted({_sig3(float(q)) for q in quantiles if q >= GAMMA_FLOOR} | {_above(top)})
    return (0.0, *inner, math.inf)


def edges_note(edges: Sequence[float] | None, events: int | None = None) -> str:
    """One line saying which γ edges a model's map is on and why (``events``: the reference map's events).

    >>> edges_note((0.0, math.inf))
    'one γ bin: γ is 0 on every reference event (a constant region), so its quantiles give no edges'
    """
    if edges is None:
        return (
            "the fixed γ edges: the model's reference holds no Gamma Map (none yet, a regressor, or a reference "
            "written before maps were kept)"
        )
    edges = tuple(float(e) for e in edges)
    if edges == (0.0, math.inf):
        return "one γ bin: γ is 0 on every reference event (a constant region), so its quantiles give no edges"
    if edges != GAMMA_EDGES:
        return f"the model's own γ edges: deciles of its reference's γ and its largest ({len(edges) - 1} bins)"
    if events is not None and events < MIN_EDGE_EVENTS:
        return (
            f"the fixed γ edges: the reference holds {events} events with P and γ, fewer than the "
            f"{MIN_EDGE_EVENTS} its own edges are taken from"
        )
    return "the fixed γ edges: the reference was written before maps kept a model's own edges; rebuild it for them"
