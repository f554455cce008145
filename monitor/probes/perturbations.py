"""Probes: the perturbation types τ and the session that evaluates perturbed copies of a region.

The types themselves are :mod:`monitor.probes.perturbation_types`; this module holds their registry, the probe
targets and the session.

Every perturbation maps ``(points, ε, rng)`` to perturbed points, both ``(B, n)`` float64 in *standardized units*
(x̃ = (x − μ)/s of the :class:`~monitor.model.standardize.Standardizer`; with ``space: raw`` the standardizer is the
identity, so standardized units are raw units). The registry :data:`PERTURBATIONS` maps a name to a factory:

============== =================================================================================================
``noise``      x̃ + ε·z, z ~ N(0, I): Gaussian noise with σ = ε.
``shift``      x̃ ± ε·e_j: one feature j moved by ε (a family: one member per feature j and sign). With no
               feature given, every point gets its own random feature and sign (used as one configuration in
               output consistency).
``dropout``    each feature is replaced by the reference mean (0 in standardized units, or the ``fill`` values
               of the context) independently with probability ε (ε clipped to [0, 1]).
``scale``      x ↦ x·(1 ± ε) in *raw* units, an independent random sign per feature and point: a relative
               (gain / calibration) error of size ε. Meaningful for ratio-scale features (amounts, counts,
               durations); for a feature whose raw zero is arbitrary (°C, already-centred data) it is noise
               proportional to |x|, and a feature that is 0 in raw units never moves.
``quantize``   x̃ ↦ ε·round(x̃/ε): rounding to a grid of step ε (standardized units, i.e. ε·s_j in raw units;
               the grid is anchored at the reference mean). ε = 0 is the identity. P(ε) need not be monotone.
``gamma_ascent`` x̃ + ε·v*(x): v*(x) is the unit ball direction (radius r, the γ ball) whose ball
               point has the largest γ — one step of seed 001 Algorithm 2, stretched to length ε. Needs the
               model; the direction is computed once per point set (B·m·(1+m) model rows) and cached.
============== =================================================================================================

Randomness: a perturbation draws the *same amount* of randomness from ``rng`` whatever ε is, so calling it with a
freshly seeded generator at two intensities gives coupled perturbations (the same noise direction, nested dropout
masks, the same signs). :class:`ProbeSession` seeds one generator per (perturbation, draw), which makes P(ε)
a deterministic, and for noise/shift/dropout/gamma_ascent per point monotone-friendly, function of ε — what the
bisection of :mod:`monitor.probes.threshold` needs.

A :class:`ProbeTarget` is what a threshold is searched for: one τ, or for ``shift`` one feature j with both signs
as members (a point counts as consistent only when it is consistent under +ε *and* −ε). Above
:data:`SHIFT_GROUP_ABOVE` features (images) ``shift`` targets are **groups** of features moved together
(:func:`feature_groups`: square pixel patches when n is a square, else runs of consecutive features), at most
:data:`SHIFT_GROUPS` of them; a group's target is keyed by its first feature and lists its members.

:class:`ProbeSession` holds the model (wrapped in a :class:`~monitor.probes.counting.CountingPredictor`), the
region's points and their clean outputs, and evaluates perturbed copies with a cache, so that stages that need the
same rows (MRI, sensitivity, consistency) pay for them once. Model evaluations are counted in *rows* (one row = one input
vector through the model).

Models with values held fixed (int, bool and string inputs, ``fixed_features``: :mod:`monitor.model.signature`):
perturbations act on the feature vector x only; each point keeps its *own* held values in every row built from it.
The session takes the points' held values (``held``, one row per point) and passes them with every evaluation (the
perturbed rows of a point keep its row position); ``gamma_ascent`` repeats them for each point's ball candidates
(the :class:`~monitor.probes.perturbation_types.PerturbationContext`'s ``held``).
:class:`~monitor.probes.counting.BoundHeld` binds one held row to a predictor for code that evaluates rows without
held values (Algorithm 2 in :mod:`monitor.probes.funnel`, run per group of points that share their held values).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np
from numpy.typing import NDArray

from monitor.errors import ConfigError, ProbeError
from monitor.model.base import ModelOutput, Predictor
from monitor.model.signature import Held
from monitor.model.standardize import Standardizer
from monitor.probes.counting import BudgetExhaustedError as BudgetExhaustedError  # what a session's evaluations raise
from monitor.probes.counting import CountingPredictor
from monitor.probes.perturbation_types import (
    FUNNEL_SEED,
    FeatureDropout,
    FeatureShift,
    FloatArray,
    GammaAscent,
    GaussianNoise,
    Perturbation,
    PerturbationContext,
    Quantize,
    RawScale,
)

#: the registry order; also the column order of MRI vectors and sensitivity matrices
PERTURBATION_NAMES: tuple[str, ...] = ("noise", "shift", "dropout", "scale", "quantize", "gamma_ascent")


#: a factory builds one perturbation from a context; ``feature``/``sign`` matter for ``shift`` only
PerturbationFactory = Callable[[PerturbationContext, int | None, int], Perturbation]


def _noise(context: PerturbationContext, feature: int | None, sign: int) -> Perturbation:
    return GaussianNoise()


def _shift(context: PerturbationContext, feature: int | None, sign: int) -> Perturbation:
    return FeatureShift(feature=feature, sign=sign)


def _dropout(context: PerturbationContext, feature: int | None, sign: int) -> Perturbation:
    return FeatureDropout(fill=context.fill_standardized)


def _scale(context: PerturbationContext, feature: int | None, sign: int) -> Perturbation:
    return RawScale(standardizer=context.standardizer)


def _quantize(context: PerturbationContext, feature: int | None, sign: int) -> Perturbation:
    return Quantize()


def _gamma_ascent(context: PerturbationContext, feature: int | None, sign: int) -> Perturbation:
    if context.model is None:
        raise ConfigError("perturbation 'gamma_ascent' needs the model; build the PerturbationContext with model=")
    return GammaAscent(
        context.model,
        context.standardizer,
        radius=context.radius,
        ball=context.ball,
        seed=context.seed,
        held=context.held,
    )


#: name -> factory, in :data:`PERTURBATION_NAMES` order
PERTURBATIONS: Mapping[str, PerturbationFactory] = MappingProxyType(
    {
        "noise": _noise,
        "shift": _shift,
        "dropout": _dropout,
        "scale": _scale,
        "quantize": _quantize,
        "gamma_ascent": _gamma_ascent,
    }
)


def check_names(names: Sequence[str]) -> tuple[str, ...]:
    """Validate perturbation names (order kept, duplicates removed).

    >>> check_names(["noise", "shift", "noise"])
    ('noise', 'shift')
    >>> check_names(["blur"])
    Traceback (most recent call last):
    ...
    monitor.errors.ConfigError: perturbation 'blur' is not one of noise, shift, dropout, scale, quantize, gamma_ascent
    """
    out: list[str] = []
    for name in names:
        if name not in PERTURBATIONS:
            raise ConfigError(f"perturbation '{name}' is not one of {', '.join(PERTURBATION_NAMES)}")
        if name not in out:
            out.append(name)
    if not out:
        raise ConfigError(f"no perturbation types given; expected some of {', '.join(PERTURBATION_NAMES)}")
    return tuple(out)


def make_perturbation(
    name: str, context: PerturbationContext, *, feature: int | None = None, sign: int = 1
) -> Perturbation:
    """Build the perturbation registered as ``name``.

    Parameters
    ----------
    name : one of :data:`PERTURBATION_NAMES`.
    context : standardizer, model (gamma_ascent), dropout fill, γ ball.
    feature, sign : for ``shift``: the feature index (None = a random one per point) and +1/−1.

    Raises
    ------
    ConfigError
        Unknown name, or ``gamma_ascent`` without a model.
    """
    check_names([name])
    return PERTURBATIONS[name](context, feature, sign)


@dataclass(frozen=True, slots=True)
class ProbeTarget:
    """A unit of threshold search: one τ, or one feature of ``shift`` with both signs.

    A point is consistent under the target when it is consistent under every member (both signs for a shift).
    """

    name: str
    feature: int | None
    members: tuple[Perturbation, ...] = field(compare=False)
    #: for a grouped ``shift`` (above :data:`SHIFT_GROUP_ABOVE` features): every feature the group moves
    group: tuple[int, ...] = ()

    @property
    def key(self) -> str:
        return self.name if self.feature is None else f"{self.name}[{self.feature}]"


#: above this many features, ``shift`` probes groups of features instead of each one (4,096 pixels would cost
#: 8,192 single-pixel targets, each evaluated on every point)
SHIFT_GROUP_ABOVE = 256
#: at most this many shift groups
SHIFT_GROUPS = 256


def feature_groups(n_features: int, groups: int = SHIFT_GROUPS) -> tuple[tuple[int, ...], ...]:
    """Disjoint groups covering every feature, at most ``groups`` of them: k×k pixel patches in row-major order when
    n is a perfect square (an image, flattened row by row), else runs of ⌈n / groups⌉ consecutive features.

    >>> [len(g) for g in feature_groups(4096)][:3], len(feature_groups(4096)), feature_groups(16, 4)[1]
    ([16, 16, 16], 256, (2, 3, 6, 7))
    >>> feature_groups(10, 4)
    ((0, 1, 2), (3, 4, 5), (6, 7, 8), (9,))
    """
    side = math.isqrt(n_features)
    if side * side == n_features:
        k = math.ceil(side / math.isqrt(groups)) if groups >= 1 else side
        out = []
        for top in range(0, side, k):
            for left in range(0, side, k):
                rows = range(top, min(top + k, side))
                cols = range(left, min(left + k, side))
                out.append(tuple(r * side + c for r in rows for c in cols))
        return tuple(out)
    size = math.ceil(n_features / groups)
    return tuple(tuple(range(lo, min(lo + size, n_features))) for lo in range(0, n_features, size))


def probe_targets(names: Sequence[str], context: PerturbationContext) -> tuple[ProbeTarget, ...]:
    """One target per τ, except ``shift``: one target per feature j with members +ε·e_j and −ε·e_j (per group of
    features above :data:`SHIFT_GROUP_ABOVE` features: :func:`feature_groups`).

    Returns
    -------
    Targets in registry order of ``names``; shift features in index order.
    """
    targets: list[ProbeTarget] = []
    for name in check_names(names):
        if name == "shift" and context.n_features > SHIFT_GROUP_ABOVE:
            for group in feature_groups(context.n_features):
                plus = FeatureShift(feature=group[0], sign=1, group=group)
                minus = FeatureShift(feature=group[0], sign=-1, group=group)
                targets.append(ProbeTarget(name, group[0], (plus, minus), group))
        elif name == "shift":
            for j in range(context.n_features):
                members = (
                    make_perturbation(name, context, feature=j, sign=1),
                    make_perturbation(name, context, feature=j, sign=-1),
                )
                targets.append(ProbeTarget(name, j, members))
        else:
            targets.append(ProbeTarget(name, None, (make_perturbation(name, context),)))
    return tuple(targets)


class ProbeSession:
    """A region's points and their clean outputs; evaluates perturbed copies with caching and row counting.

    Parameters
    ----------
    model : the predictor. It is wrapped in a :class:`CountingPredictor` unless it already is one (then the
        counts continue on it, which lets a caller share one counter between a session and its perturbations).
    standardizer : defines standardized units.
    points : (B, n) raw units, finite.
    seed : seeds every perturbation draw: draw d of perturbation k uses ``default_rng([seed, crc32(k), d])``.
    output_scale : (D,) the regressor output scale for consistency 1 − |Δ|/scale; None = the std of the clean
        outputs over the points (a constant output gets 1). Ignored for classifiers.
    budget_rows : the row budget of a new counter (ignored when ``model`` is already a counter).
    held : the points' held values (one row per point) for a model that holds values fixed; every evaluation of
        perturbed points passes them (the rows keep the points' order).

    Raises
    ------
    ProbeError
        Points of the wrong shape or with NaN/inf values, or held values for another number of points.
    """

    def __init__(
        self,
        model: Predictor,
        standardizer: Standardizer,
        points: NDArray[np.floating],
        *,
        seed: int = FUNNEL_SEED,
        output_scale: NDArray[np.floating] | None = None,
        budget_rows: int | None = None,
        held: Held | None = None,
    ) -> None:
        self.model = (
            model if isinstance(model, CountingPredictor) else CountingPredictor(model, budget_rows=budget_rows)
        )
        n = self.model.n_features
        x = np.asarray(points, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != n or x.shape[0] == 0:
            raise ProbeError(f"probe points must be a non-empty (B, {n}) array for this model; got shape {x.shape}")
        if not np.all(np.isfinite(x)):
            bad = int(np.count_nonzero(~np.all(np.isfinite(x), axis=1)))
            raise ProbeError(f"{bad} of {x.shape[0]} probe points contain NaN or infinite values; drop them first")
        if standardizer.n_features != n:
            raise ProbeError(
                f"the standardizer has {standardizer.n_features} features; the model expects {n}. "
                "Was the reference built for another model?"
            )
        if held is not None and len(held) != x.shape[0]:
            raise ProbeError(f"probe points number {x.shape[0]}; their held values have {len(held)} rows")
        self.standardizer = standardizer
        self.seed = seed
        #: the points' held values (None: the model holds nothing)
        self.held = held
        self.raw_points = x
        #: (B, n) standardized units
        self.points = standardizer.to_standardized(x)
        self._label_width: int | None = None
        self.clean = self.model.evaluate(x.astype(np.float32), held)
        self.clean_scores = self.scores(self.clean)
        if self.model.kind == "classifier":
            self.output_scale = np.ones(self.clean_scores.shape[1])
        elif output_scale is not None:
            scale = np.asarray(output_scale, dtype=np.float64).reshape(-1)
            if scale.shape != (self.clean_scores.shape[1],) or not np.all(scale > 0):
                raise ProbeError(
                    f"output_scale must hold {self.clean_scores.shape[1]} positive values (one per model output); "
                    f"got {scale.tolist()}"
                )
            self.output_scale = scale
        else:
            std = self.clean_scores.std(axis=0)
            self.output_scale = np.where(std > 1e-12, std, 1.0)
        self._cache: dict[tuple[str, float, int], ModelOutput] = {}

    # -- sizes ---------------------------------------------------------------------------------------------
    @property
    def n_points(self) -> int:
        return int(self.points.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.points.shape[1])

    @property
    def n_outputs(self) -> int:
        """D: classes for classifiers, output columns for regressors."""
        return int(self.clean_scores.shape[1])

    @property
    def evaluations(self) -> int:
        """Model rows evaluated so far (the clean points included)."""
        return self.model.rows

    # -- evaluation ----------------------------------------------------------------------------------------
    def rng(self, perturbation: Perturbation, draw: int = 0) -> np.random.Generator:
        """The generator for draw ``draw`` of ``perturbation``: the same at every ε (coupled perturbations)."""
        return np.random.default_rng([self.seed, zlib.crc32(perturbation.key.encode()), draw])

    def perturbed_points(self, perturbation: Perturbation, eps: float, draw: int = 0) -> FloatArray:
        """(B, n) standardized perturbed points for draw ``draw`` at intensity ε."""
        return perturbation.apply(self.points, eps, self.rng(perturbation, draw))

    def outputs(self, perturbation: Perturbation, eps: float, draw: int = 0) -> ModelOutput:
        """Model outputs on the perturbed points (cached by key, ε and draw; ε = 0 is the clean output)."""
        if eps == 0.0:
            return self.clean
        cache_key = (perturbation.key, float(eps), draw if perturbation.stochastic else 0)
        hit = self._cache.get(cache_key)
        if hit is not None:
            return hit
        z = self.perturbed_points(perturbation, eps, cache_key[2])
        out = self.model.evaluate(self.standardizer.to_raw(z).astype(np.float32), self.held)
        self._cache[cache_key] = out
        return out

    def is_cached(self, perturbation: Perturbation, eps: float, draw: int = 0) -> bool:
        return eps == 0.0 or (perturbation.key, float(eps), draw if perturbation.stochastic else 0) in self._cache

    def scores(self, out: ModelOutput) -> FloatArray:
        """f per row, (B, D): probabilities, regression values, or for label-only classifiers one-hot labels.

        The one-hot width is fixed by the clean points (at least 2); a perturbed label outside it is an all-zero
        row, so |Δ| still shows the clean class's column dropping to 0.
        """
        if out.proba is not None:
            return out.proba.astype(np.float64)
        if out.value is not None:
            return out.value.astype(np.float64)
        if out.label is None:
            raise ProbeError("the model returned neither probabilities, labels nor values")
        if self._label_width is None:
            self._label_width = max(2, int(out.label.max()) + 1)
        width = self._label_width
        eye = np.vstack([np.eye(width), np.zeros((1, width))])
        onehot: FloatArray = eye[np.where(out.label < width, out.label, width)]
        return onehot

    def consistency(self, out: ModelOutput) -> FloatArray:
        """C(f(x), f(τ(x))) per point, (B,) in [0, 1].

        Classifiers: 1 when the predicted class is unchanged, else 0. Regressors: the mean over outputs of
        clip(1 − |Δ_i| / scale_i, 0, 1).
        """
        if self.model.kind == "classifier":
            assert out.label is not None and self.clean.label is not None
            same: FloatArray = (out.label == self.clean.label).astype(np.float64)
            return same
        delta = np.abs(self.scores(out) - self.clean_scores) / self.output_scale
        per_point: FloatArray = np.clip(1.0 - delta, 0.0, 1.0).mean(axis=1)
        return per_point

    def target_consistency(self, target: ProbeTarget, eps: float, draw: int = 0) -> FloatArray:
        """(B,) the minimum consistency over the target's members (both signs for a shift)."""
        per_member = [self.consistency(self.outputs(p, eps, draw)) for p in target.members]
        out: FloatArray = np.min(np.vstack(per_member), axis=0)
        return out

    def agreement(self, target: ProbeTarget, eps: float, draw: int = 0) -> float:
        """P(ε) for the target: mean consistency over the points (class agreement rate for classifiers)."""
        return float(self.target_consistency(target, eps, draw).mean())

    def curve(self, target: ProbeTarget) -> Callable[[float], float]:
        """P(ε) as a callable for :func:`monitor.probes.threshold.bisect_threshold` (coupled draws, cached)."""

        def p_of(eps: float) -> float:
            return self.agreement(target, eps)

        return p_of

    def rows_per_evaluation(self, target: ProbeTarget) -> int:
        """Model rows one P(ε) evaluation of ``target`` costs (B per member)."""
        return self.n_points * len(target.members)
