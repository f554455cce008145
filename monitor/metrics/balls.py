"""Stage 4: unit directions that approximate the sphere around a point (SPEC §2, seed 001 §3, §5).

A "ball" here is an (m, n) array of unit vectors v_i; the ball points around x are x + r·v_i (in
standardized units). Constructions:

- ``simplex``: the n+1 vertices of the regular n-simplex centred at 0 (Σ v_i = 0, v_i·v_j = −1/n).
- ``simplex+anti``: the simplex and its reflection (2(n+1) points; all odd moments vanish). Default.
- ``rotations:K``: K Haar-random rotations of simplex+anti (seeded, so γ is reproducible).
- ``hypercube:m``: m random ± one-hot directions ±e_j, always in ± pairs; default when n > 256.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from monitor.errors import ConfigError

BallKind = Literal["simplex", "simplex+anti", "rotations", "hypercube"]

#: above this many features the default ball is a sampled hypercube (a simplex would need n+1 model calls)
SIMPLEX_MAX_FEATURES = 256
DEFAULT_HYPERCUBE_POINTS = 128

_SPEC = re.compile(r"^(simplex\+anti|simplex|rotations:(\d+)|hypercube:(\d+)|auto)$")


@dataclass(frozen=True, slots=True)
class BallSpec:
    """A parsed ``ball`` setting. ``count`` is K for rotations and m for hypercube, else 0."""

    kind: BallKind | Literal["auto"]
    count: int = 0

    def __str__(self) -> str:
        return f"{self.kind}:{self.count}" if self.kind in ("rotations", "hypercube") else self.kind

    def resolve(self, n_features: int) -> BallSpec:
        """Turn ``auto`` into the concrete default for ``n_features``."""
        if self.kind != "auto":
            return self
        if n_features > SIMPLEX_MAX_FEATURES:
            return BallSpec("hypercube", DEFAULT_HYPERCUBE_POINTS)
        return BallSpec("simplex+anti")


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


def ball_directions(spec: BallSpec | str, n_features: int, *, seed: int = 0) -> NDArray[np.float64]:
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
    base = simplex_vertices(n_features)
    both = np.vstack([base, -base])
    if ball.kind == "simplex+anti":
        return both
    rng = np.random.default_rng(seed)
    if ball.kind == "rotations":
        return np.vstack([both @ haar_rotation(n_features, rng).T for _ in range(ball.count)])
    # hypercube: ± pairs of one-hot directions; all of them when m >= 2n
    pairs = ball.count // 2
    axes = np.arange(n_features) if pairs >= n_features else rng.choice(n_features, size=pairs, replace=False)
    half = np.zeros((axes.size, n_features))
    half[np.arange(axes.size), axes] = 1.0
    return np.vstack([half, -half])
