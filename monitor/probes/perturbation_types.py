"""Probes: the perturbation types τ (the table of :mod:`monitor.probes.perturbations`), each a small frozen object
that maps ``(points, ε, rng)`` to perturbed points in standardized units, and the :class:`PerturbationContext` their
factories read.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from monitor.config import FunnelSettings, setting_default
from monitor.errors import ConfigError, ProbeError
from monitor.model.base import Predictor
from monitor.model.signature import Held
from monitor.model.standardize import Standardizer
from monitor.signals.balls import ball_directions
from monitor.signals.scorer import RobustnessScorer, ScoringConfig

FloatArray = NDArray[np.float64]

#: the γ ball of ``gamma_ascent`` and the seed of every draw unless told: the probe funnel's settings' defaults
FUNNEL_RADIUS: float = setting_default(FunnelSettings, "radius")
FUNNEL_BALL: str = setting_default(FunnelSettings, "ball")
FUNNEL_SEED: int = setting_default(FunnelSettings, "seed")


@dataclass(frozen=True, slots=True)
class PerturbationContext:
    """What perturbation factories may need beyond (points, ε, rng).

    Attributes
    ----------
    standardizer : defines standardized units (identity for ``space: raw``).
    model : needed by ``gamma_ascent`` only; pass the session's :class:`CountingPredictor` so its rows are counted.
    fill : (n,) raw-unit values that ``dropout`` writes; None = ``standardizer.mean`` (the reference mean).
    radius : γ ball radius for ``gamma_ascent``, standardized units.
    ball : γ ball construction for ``gamma_ascent`` (see :mod:`monitor.signals.balls`).
    seed : seeds the ball construction.
    held : the probed points' held values, one row per point, for a model that holds values fixed: ``gamma_ascent``
        evaluates each point's ball candidates with its row.
    """

    standardizer: Standardizer
    model: Predictor | None = None
    fill: FloatArray | None = None
    radius: float = FUNNEL_RADIUS
    ball: str = FUNNEL_BALL
    seed: int = FUNNEL_SEED
    held: Held | None = None

    def __post_init__(self) -> None:
        if not self.radius > 0:
            raise ConfigError(f"gamma_ascent radius must be > 0; got {self.radius!r}")
        n = self.standardizer.n_features
        if self.fill is not None and np.shape(self.fill) != (n,):
            raise ConfigError(f"dropout fill values must have shape ({n},); got {np.shape(self.fill)}")
        if self.model is not None and self.model.n_features != n:
            raise ConfigError(
                f"the standardizer has {n} features; the model expects {self.model.n_features}. "
                "Was the reference built for another model?"
            )

    @property
    def n_features(self) -> int:
        return self.standardizer.n_features

    @property
    def fill_standardized(self) -> FloatArray:
        """(n,) the dropout fill in standardized units (zeros when it is the reference mean)."""
        if self.fill is None:
            return np.zeros(self.n_features)
        row: FloatArray = self.standardizer.to_standardized(np.asarray(self.fill, dtype=np.float64)[None, :])[0]
        return row


class Perturbation(Protocol):
    """One perturbation τ_ε.

    Attributes
    ----------
    name : the registry name (``shift`` for every member of the shift family).
    key : unique within a probe: ``name`` or ``shift[j]+`` / ``shift[j]-`` / ``shift[random]``.
    feature : the feature index of a single-feature shift, else None.
    stochastic : True when the result depends on ``rng``.
    """

    @property
    def name(self) -> str: ...

    @property
    def key(self) -> str: ...

    @property
    def feature(self) -> int | None: ...

    @property
    def stochastic(self) -> bool: ...

    def apply(self, points: FloatArray, eps: float, rng: np.random.Generator) -> FloatArray:
        """Perturb (B, n) standardized points at intensity ε ≥ 0; returns a new (B, n) array."""
        ...


def _check_eps(eps: float) -> float:
    if not (np.isfinite(eps) and eps >= 0):
        raise ProbeError(f"perturbation intensity ε must be a finite number >= 0; got {eps!r}")
    return float(eps)


@dataclass(frozen=True, slots=True)
class GaussianNoise:
    """x̃ + ε·z with z ~ N(0, I) in standardized units (σ = ε).

    >>> GaussianNoise().apply(np.zeros((1, 3)), 0.0, np.random.default_rng(0)).tolist()
    [[0.0, 0.0, 0.0]]
    """

    name: str = "noise"
    key: str = "noise"
    feature: int | None = None
    stochastic: bool = True

    def apply(self, points: FloatArray, eps: float, rng: np.random.Generator) -> FloatArray:
        eps = _check_eps(eps)
        out: FloatArray = points + eps * rng.standard_normal(points.shape)
        return out


@dataclass(frozen=True, slots=True)
class FeatureShift:
    """x̃ + sign·ε·e_j; with ``feature`` None, a random feature and sign per point (drawn from ``rng``).

    >>> FeatureShift(feature=1, sign=-1).apply(np.zeros((1, 3)), 0.5, np.random.default_rng(0)).tolist()
    [[0.0, -0.5, 0.0]]
    """

    feature: int | None = None
    sign: int = 1
    name: str = "shift"
    #: the features moved together (a pixel patch) when this shift is a group's, keyed by ``feature`` (its first)
    group: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.sign not in (1, -1):
            raise ConfigError(f"shift sign must be +1 or -1; got {self.sign!r}")
        if self.feature is not None and self.feature < 0:
            raise ConfigError(f"shift feature index must be >= 0; got {self.feature!r}")

    @property
    def key(self) -> str:
        if self.feature is None:
            return "shift[random]"
        return f"shift[{self.feature}]{'+' if self.sign > 0 else '-'}"

    @property
    def stochastic(self) -> bool:
        return self.feature is None

    def apply(self, points: FloatArray, eps: float, rng: np.random.Generator) -> FloatArray:
        eps = _check_eps(eps)
        out = points.copy()
        b, n = points.shape
        if self.feature is None:
            cols = rng.integers(0, n, size=b)
            signs = rng.choice(np.array([-1.0, 1.0]), size=b)
            out[np.arange(b), cols] += signs * eps
            return out
        if self.feature >= n or (self.group and max(self.group) >= n):
            raise ProbeError(f"shift feature index {self.feature} is out of range for points with {n} features")
        if self.group:
            out[:, list(self.group)] += self.sign * eps
            return out
        out[:, self.feature] += self.sign * eps
        return out


@dataclass(frozen=True, slots=True)
class FeatureDropout:
    """Each feature replaced by ``fill`` (standardized; 0 = reference mean) with probability min(ε, 1).

    Masks are nested across ε for one generator seed: a feature dropped at ε is dropped at every ε' > ε.

    >>> FeatureDropout(fill=np.zeros(2)).apply(np.ones((1, 2)), 1.0, np.random.default_rng(0)).tolist()
    [[0.0, 0.0]]
    """

    fill: FloatArray
    name: str = "dropout"
    key: str = "dropout"
    feature: int | None = None
    stochastic: bool = True

    def apply(self, points: FloatArray, eps: float, rng: np.random.Generator) -> FloatArray:
        eps = min(_check_eps(eps), 1.0)
        u = rng.random(points.shape)
        out: FloatArray = np.where(u < eps, self.fill[None, :], points)
        return out


@dataclass(frozen=True, slots=True)
class RawScale:
    """x ↦ x·(1 ± ε) in raw units, an independent random sign per feature and point.

    >>> s = Standardizer(mean=np.array([10.0]), scale=np.array([2.0]))
    >>> z = s.to_standardized(np.array([[20.0]]))
    >>> out = RawScale(standardizer=s).apply(z, 0.5, np.random.default_rng(0))
    >>> float(s.to_raw(out)[0, 0]) in (10.0, 30.0)
    True
    """

    standardizer: Standardizer
    name: str = "scale"
    key: str = "scale"
    feature: int | None = None
    stochastic: bool = True

    def apply(self, points: FloatArray, eps: float, rng: np.random.Generator) -> FloatArray:
        eps = _check_eps(eps)
        signs = rng.choice(np.array([-1.0, 1.0]), size=points.shape)
        raw = self.standardizer.to_raw(points) * (1.0 + signs * eps)
        return self.standardizer.to_standardized(raw)


@dataclass(frozen=True, slots=True)
class Quantize:
    """x̃ ↦ ε·round(x̃/ε) (standardized units; the identity at ε = 0).

    >>> Quantize().apply(np.array([[0.26, -0.74]]), 0.5, np.random.default_rng(0)).tolist()
    [[0.5, -0.5]]
    """

    name: str = "quantize"
    key: str = "quantize"
    feature: int | None = None
    stochastic: bool = False

    def apply(self, points: FloatArray, eps: float, rng: np.random.Generator) -> FloatArray:
        eps = _check_eps(eps)
        if eps == 0.0:
            return points.copy()
        out: FloatArray = eps * np.round(points / eps)
        return out


class GammaAscent:
    """x̃ + ε·v*(x), v* the unit ball direction whose ball point has the largest γ (seed 001 Algorithm 2, one step).

    The directions are computed with :class:`~monitor.signals.scorer.RobustnessScorer` (flicker off) over the
    B·m ball points, costing B·m·(1+m) model rows, once per distinct point set (cached by content).

    Parameters
    ----------
    model : the predictor (pass a :class:`CountingPredictor` to have the rows counted).
    standardizer : defines standardized units.
    radius, ball, seed : the γ ball (standardized units).
    held : the points' held values (one row per point) for a model that holds values fixed; each point's m
        candidates are evaluated with its row. :meth:`direction` then takes that many points.
    """

    name = "gamma_ascent"
    key = "gamma_ascent"
    feature: int | None = None
    stochastic = False

    def __init__(
        self,
        model: Predictor,
        standardizer: Standardizer,
        *,
        radius: float = FUNNEL_RADIUS,
        ball: str = FUNNEL_BALL,
        seed: int = FUNNEL_SEED,
        held: Held | None = None,
    ) -> None:
        self._held = held
        output = "label" if model.kind == "classifier" and not getattr(model, "has_proba", True) else "auto"
        self._scorer = RobustnessScorer(
            model, standardizer, ScoringConfig(radius=radius, ball=ball, output=output, flicker_copies=0, seed=seed)
        )
        self._standardizer = standardizer
        #: (m, n) unit directions, standardized units, in the scorer's ball order
        self.directions = ball_directions(self._scorer.ball, model.n_features, seed=seed)
        self._cache: dict[bytes, FloatArray] = {}

    def direction_rows(self, n_points: int) -> int:
        """Model rows :meth:`direction` costs for ``n_points`` new points: B·m·(1+m)."""
        m = int(self.directions.shape[0])
        return n_points * m * self._scorer.rows_per_event()

    def direction(self, points: FloatArray) -> FloatArray:
        """(B, n) unit γ-ascent directions for (B, n) standardized points."""
        digest = hashlib.sha1(np.ascontiguousarray(points, dtype=np.float64).tobytes()).digest()
        cached = self._cache.get(digest)
        if cached is not None:
            return cached
        b, n = points.shape
        m = self.directions.shape[0]
        raw = self._standardizer.to_raw(points)
        candidates = (raw[:, None, :] + self._scorer.offsets.astype(np.float64)[None, :, :]).reshape(b * m, n)
        if self._held is None:
            gamma = self._scorer.score(candidates).gamma.reshape(b, m)
        else:
            if len(self._held) != b:
                raise ProbeError(f"gamma_ascent holds the held values of {len(self._held)} points; got {b} points")
            gamma = self._scorer.score(candidates, self._held.repeat(int(m))).gamma.reshape(b, m)
        best = np.argmax(np.nan_to_num(gamma, nan=-1.0), axis=1)
        found: FloatArray = self.directions[best]
        self._cache[digest] = found
        return found

    def apply(self, points: FloatArray, eps: float, rng: np.random.Generator) -> FloatArray:
        eps = _check_eps(eps)
        out: FloatArray = points + eps * self.direction(points)
        return out
