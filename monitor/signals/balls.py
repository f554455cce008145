"""Stage 4: unit directions that approximate the sphere around a point (*Harmonic Machine Learning Models are Robust*, §3 and §5).

A "ball" here is an (m, n) array of unit vectors v_i; the ball points around x are x + r·v_i (in
standardized units). Constructions:

- ``simplex``: the n+1 vertices of the regular n-simplex centred at 0 (Σ v_i = 0, v_i·v_j = −1/n).
- ``simplex+anti``: the simplex and its reflection (2(n+1) points; all odd moments vanish). Default.
- ``rotations:K``: K Haar-random rotations of simplex+anti (seeded, so γ is reproducible).
- ``hypercube:m``: m random ± one-hot directions ±e_j, always in ± pairs; default when n > 256. Above 256 features
  the scorer draws the m/2 axes **per event** (:func:`hypercube_axes`), reproducibly from the seed and the event's
  own values (:func:`event_keys`), never building an n×n matrix: the "random 0.1 % sampling" of "Harmonic Machine Learning Models are Robust" of the 2n
  points of a 10,000-pixel image's hypercube. ``hypercube`` alone (or ``auto`` above 256 features) takes
  :func:`default_hypercube_points`: 0.1 % of the 2n points, at least 16.

Sampled hypercube: cost and variance against the full ball. Per event the model evaluates m ball rows instead of 2n
(n = 10,000: 20 instead of 20,000). For a model whose input feeds an affine layer the graph takes each event's
m/2 moved rows of that layer's weights (``monitor.model.neighbourhood``); otherwise the scorer writes the m·n row
values plus m index updates. Memory is that of the rows, never n². The γ of the sample is |f(x) − ḡ_S| where ḡ_S averages g_a = (f(x + r·e_a) + f(x − r·e_a)) / 2
over the m/2 sampled axes S (drawn without replacement); the full ball's is |f(x) − ḡ| over all n axes. ḡ_S is
unbiased for ḡ with variance Var(g_a) / (m/2) · (1 − (m/2) / n) (finite-population correction), so the spread of
γ around the full ball's value shrinks as 1/√m; docs/HIGH-DIMENSION.md measures it on an image model.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from monitor.config import ScoringSettings, setting_default
from monitor.errors import ConfigError

BallKind = Literal["simplex", "simplex+anti", "rotations", "hypercube"]

#: above this many features the default ball is a sampled hypercube (a simplex would need n+1 model calls)
SIMPLEX_MAX_FEATURES = 256
#: the default hypercube sample: this share of the 2n signed axes (0.1 %, as in "Harmonic Machine Learning Models are Robust") ...
DEFAULT_HYPERCUBE_SHARE = 0.001
#: ... and at least this many points
MIN_HYPERCUBE_POINTS = 16

#: the seed of a ball's rotations and hypercube samples unless told: the ``scoring.seed`` setting's default
_SEED: int = setting_default(ScoringSettings, "seed")

_SPEC = re.compile(r"^(simplex\+anti|simplex|rotations:(\d+)|hypercube:(\d+)|hypercube|auto)$")


def default_hypercube_points(n_features: int) -> int:
    """Points of the default sampled hypercube: 0.1 % of the 2n signed axes rounded up to an even count, at least
    16 and at most 2n (every axis).

    >>> default_hypercube_points(10_000), default_hypercube_points(4096), default_hypercube_points(5)
    (20, 16, 10)
    """
    share = 2 * math.ceil(DEFAULT_HYPERCUBE_SHARE * 2 * n_features / 2)
    return min(2 * n_features, max(MIN_HYPERCUBE_POINTS, share))


@dataclass(frozen=True, slots=True)
class BallSpec:
    """A parsed ``ball`` setting. ``count`` is K for rotations and m for hypercube, else 0."""

    kind: BallKind | Literal["auto"]
    count: int = 0

    def __str__(self) -> str:
        return f"{self.kind}:{self.count}" if self.kind in ("rotations", "hypercube") else self.kind

    def resolve(self, n_features: int) -> BallSpec:
        """Turn ``auto`` into the concrete default for ``n_features``."""
        if self.kind == "hypercube" and self.count == 0:
            return BallSpec("hypercube", default_hypercube_points(n_features))
        if self.kind != "auto":
            return self
        if n_features > SIMPLEX_MAX_FEATURES:
            return BallSpec("hypercube", default_hypercube_points(n_features))
        return BallSpec("simplex+anti")

    def per_event(self, n_features: int) -> bool:
        """True when this (resolved) ball is a hypercube sample drawn per event: fewer than all 2n signed axes, above
        :data:`SIMPLEX_MAX_FEATURES` features. Below that a ``hypercube:m`` is one fixed sample (seeded), which the
        in-graph row builder takes as an initializer."""
        return self.kind == "hypercube" and 0 < self.count < 2 * n_features and n_features > SIMPLEX_MAX_FEATURES


def parse_ball(spec: str) -> BallSpec:
    """Parse a ball setting string.

    >>> parse_ball("rotations:4")
    BallSpec(kind='rotations', count=4)
    >>> parse_ball("cube")
    Traceback (most recent call last):
    ...
    monitor.errors.ConfigError: ball 'cube' is not one of simplex, simplex+anti, rotations:K, hypercube:m, auto
    """
    m = _SPEC.match(spec.strip())
    if m is None:
        raise ConfigError(f"ball '{spec}' is not one of simplex, simplex+anti, rotations:K, hypercube:m, auto")
    text = m.group(1)
    if text.startswith("rotations:"):
        k = int(m.group(2))
        if k < 1:
            raise ConfigError(f"ball '{spec}': rotations:K needs K >= 1")
        return BallSpec("rotations", k)
    if text.startswith("hypercube:"):
        count = int(m.group(3))
        if count < 2 or count % 2:
            raise ConfigError(f"ball '{spec}': hypercube:m needs an even m >= 2 (directions come in ± pairs)")
        return BallSpec("hypercube", count)
    if text == "auto":
        return BallSpec("auto")
    if text == "hypercube":
        return BallSpec("hypercube")  # m from default_hypercube_points at resolve()
    return BallSpec("simplex+anti" if text == "simplex+anti" else "simplex")


def simplex_vertices(n: int) -> NDArray[np.float64]:
    """The n+1 unit vertices of a regular n-simplex centred at the origin, shape (n+1, n).

    >>> v = simplex_vertices(3)
    >>> bool(np.allclose(v.sum(axis=0), 0)), bool(np.allclose(v @ v.T, np.where(np.eye(4) > 0, 1, -1 / 3)))
    (True, True)
    """
    if n < 1:
        raise ConfigError(f"a simplex needs n >= 1 features; got {n}")
    if n == 1:
        return np.array([[1.0], [-1.0]])
    # e_1..e_n and a·(1,…,1) with a = (1 − √(n+1))/n form a regular simplex of edge √2; centre and normalise.
    a = (1.0 - np.sqrt(n + 1.0)) / n
    pts = np.vstack([np.eye(n), np.full((1, n), a)])
    pts -= pts.mean(axis=0)
    pts /= np.linalg.norm(pts, axis=1, keepdims=True)
    return pts


def haar_rotation(n: int, rng: np.random.Generator) -> NDArray[np.float64]:
    """A Haar-random orthogonal n×n matrix (QR of a Gaussian matrix with the sign fix)."""
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return q * np.sign(np.diag(r))


def ball_directions(spec: BallSpec | str, n_features: int, *, seed: int = _SEED) -> NDArray[np.float64]:
    """Unit directions for a ball in ``n_features`` dimensions.

    Parameters
    ----------
    spec : the ball setting (parsed or string).
    n_features : dimension n.
    seed : seeds the rotations / hypercube sample, so the same seed gives the same ball.

    Returns
    -------
    (m, n) float64, every row of unit norm.

    >>> ball_directions("simplex+anti", 2).shape
    (6, 2)
    >>> ball_directions("hypercube:4", 1000, seed=1).shape
    (4, 1000)
    """
    ball = (parse_ball(spec) if isinstance(spec, str) else spec).resolve(n_features)
    if ball.kind == "simplex":
        return simplex_vertices(n_features)
    rng = np.random.default_rng(seed)
    if ball.kind == "hypercube":
        return _hypercube(ball.count, n_features, rng)
    base = simplex_vertices(n_features)
    both = np.vstack([base, -base])
    if ball.kind == "simplex+anti":
        return both
    return np.vstack([both @ haar_rotation(n_features, rng).T for _ in range(ball.count)])


def _hypercube(count: int, n_features: int, rng: np.random.Generator) -> NDArray[np.float64]:
    """One fixed sample of ± pairs of one-hot directions (all of them when m >= 2n): (m, n), nothing n×n built."""
    pairs = count // 2
    axes = np.arange(n_features) if pairs >= n_features else rng.choice(n_features, size=pairs, replace=False)
    half = np.zeros((axes.size, n_features))
    half[np.arange(axes.size), axes] = 1.0
    return np.vstack([half, -half])


# -- the per-event sampled hypercube ------------------------------------------------------------------------------
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _mix(z: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """splitmix64's finaliser, element-wise (uint64 arithmetic wraps, as the hash wants)."""
    z = z + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    out: NDArray[np.uint64] = z ^ (z >> np.uint64(31))
    return out


def event_keys(rows: NDArray[np.floating], seed: int = _SEED) -> NDArray[np.uint64]:
    """(B,) a 64-bit key per row from its float32 values and the seed: the same event gets the same key in any
    batch, at any position, so its sampled hypercube is reproducible by seed and event.

    >>> x = np.arange(12, dtype=np.float32).reshape(3, 4)
    >>> bool(event_keys(x, 1)[1] == event_keys(x[1:2], 1)[0]), bool(event_keys(x, 1)[0] != event_keys(x, 2)[0])
    (True, True)
    """
    bits = np.ascontiguousarray(rows, dtype=np.float32).view(np.uint32)
    n = bits.shape[1]
    # a multilinear hash: Σ_j bits_j · w_j mod 2^64 with random odd 64-bit weights, then one mix. One multiply-add
    # per value (the rows are hashed once per batch; mixing every value cost half as much as the model's own run)
    weights = _mix(np.arange(n, dtype=np.uint64) ^ _mix(np.full(1, seed, dtype=np.uint64))) | np.uint64(1)
    return _mix(bits @ weights)


def hypercube_axes(keys: NDArray[np.uint64], n_features: int, pairs: int) -> NDArray[np.intp]:
    """(B, pairs) distinct axes per event, drawn from each event's key (:func:`event_keys`); every axis in order
    when ``pairs >= n_features``. Costs O(B·pairs) per batch, whatever n.

    >>> a = hypercube_axes(np.arange(4, dtype=np.uint64), 10_000, 10)
    >>> a.shape, all(len(set(row)) == 10 for row in a.tolist())
    ((4, 10), True)
    """
    b = keys.shape[0]
    if pairs >= n_features:
        return np.broadcast_to(np.arange(n_features, dtype=np.intp), (b, n_features)).copy()
    n = np.uint64(n_features)
    k = keys.astype(np.uint64)[:, None]
    axes = (_mix(k ^ _mix(np.arange(pairs, dtype=np.uint64))[None, :]) % n).astype(np.intp)
    counter = pairs
    while True:  # redraw the later copy of any axis drawn twice in a row (rare: ~pairs² / 2n per event)
        order = np.argsort(axes, axis=1, kind="stable")
        ranked = np.take_along_axis(axes, order, axis=1)
        dup_ranked = np.zeros(axes.shape, dtype=bool)
        dup_ranked[:, 1:] = ranked[:, 1:] == ranked[:, :-1]
        if not dup_ranked.any():
            return axes
        dup = np.zeros(axes.shape, dtype=bool)
        np.put_along_axis(dup, order, dup_ranked, axis=1)
        rows, cols = np.nonzero(dup)
        fresh = _mix(
            keys.astype(np.uint64)[rows] ^ _mix(np.full(rows.size, counter, dtype=np.uint64) + cols.astype(np.uint64))
        )
        axes[rows, cols] = (fresh % n).astype(np.intp)
        counter += pairs


def add_hypercube_offsets(
    ball: NDArray[np.float32], axes: NDArray[np.intp], step: NDArray[np.float32]
) -> NDArray[np.float32]:
    """Turn ``ball`` (B, m, n), holding each event's centre m times, into its ball points: point i < m/2 moves
    ``+step[a]`` along axis a = ``axes[e, i]``, point m/2 + i moves ``−step[a]`` (the ± pair). In place.

    ``step`` (n,) is r·s in raw units (s: the standardizer's scale), so the point is ``centre + float32(r·s_a)``
    exactly as a fixed ball's ``centre + offset`` row.
    """
    b, m, _ = ball.shape
    half = m // 2
    rows = np.repeat(np.arange(b), half)
    flat = axes.reshape(-1)
    delta = step[flat]
    cols = np.tile(np.arange(half), b)
    ball[rows, cols, flat] += delta
    ball[rows, cols + half, flat] -= delta
    return ball
