"""Stage 4 (probe helper): γ-gradient adversarial search, seed 001 Algorithm 2.

From x, repeatedly move to the ball point with the largest γ, N steps; report the step at which the predicted
class first changes ("stable" when it never does). Each step costs one model call over B·m·(1+m) rows (every ball
point's own ball), through :class:`RobustnessScorer` with flicker disabled.

At high dimension (a sampled hypercube drawn per event, above 256 features: ``monitor.signals.balls``) each step
is the paper's pseudo-code on images: the ball of the current point is its own sample of m signed axes, each
candidate moves one feature by ±r·s (±r in raw units with ``Standardizer.identity``, e.g. ±100 grey levels), and
each candidate's γ is computed on the candidate's own sampled ball. After N steps a point differs from x in at most
N features.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from monitor.errors import ConfigError
from monitor.model.base import Predictor
from monitor.model.standardize import Standardizer
from monitor.signals.scorer import RobustnessScorer, ScoringConfig


@dataclass(frozen=True, slots=True)
class AdversarialResult:
    """Per point, shapes (B,) unless noted.

    Attributes
    ----------
    flip_step : first step (1..N) at which the predicted class differs from the class at x; −1 when stable.
    start_class, end_class : predicted class at x and at the final point (−1 for regressors).
    final_points : (B, n) raw units.
    gamma_path : (B, N) γ of the point chosen at each step.
    evaluations : model rows evaluated in total.
    start_gamma, start_probability : γ at x and the probability of its predicted class (NaN for regressors): where
        each point sits on the Gamma Map. Empty when a caller assembled the result from parts without them.
    """

    flip_step: NDArray[np.int64]
    start_class: NDArray[np.int64]
    end_class: NDArray[np.int64]
    final_points: NDArray[np.float64]
    gamma_path: NDArray[np.float64]
    evaluations: int
    start_gamma: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    start_probability: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))

    @property
    def stable(self) -> NDArray[np.bool_]:
        out: NDArray[np.bool_] = self.flip_step < 0
        return out


def gamma_ascent_search(
    model: Predictor,
    standardizer: Standardizer,
    points: NDArray[np.floating],
    *,
    steps: int,
    config: ScoringConfig | None = None,
) -> AdversarialResult:
    """Run Algorithm 2 from each of (B, n) raw-unit ``points``.

    Parameters
    ----------
    model, standardizer : as for :class:`RobustnessScorer` (radius in standardized units).
    points : (B, n) starting points, raw units, finite.
    steps : N, the number of ascent steps (the probe funnel's ``steps`` setting; not ``scoring.steps``).
    config : radius / ball / output; flicker is ignored.

    Raises
    ------
    ConfigError
        ``steps`` < 1 or non-finite points.
    """
    if steps < 1:
        raise ConfigError(f"steps must be >= 1; got {steps}")
    x = np.asarray(points, dtype=np.float64)
    if x.ndim != 2 or not np.all(np.isfinite(x)):
        raise ConfigError(f"points must be a finite (B, n) array; got shape {x.shape}")
    scorer = RobustnessScorer(model, standardizer, replace(config or ScoringConfig(), flicker_copies=0))
    b, n = x.shape
    m = scorer.ball_size
    offsets = scorer.offsets.astype(np.float64)
    step_raw = scorer.feature_step.astype(np.float64)  # r·s per feature, for the per-event sampled hypercube
    start = scorer.score(x)
    start_class = start.predicted_class
    current = x.copy()
    current_class = start_class.copy()
    flip_step = np.full(b, -1, dtype=np.int64)
    gamma_path = np.zeros((b, steps))
    evaluations = b * scorer.rows_per_event()
    for step in range(1, steps + 1):
        if scorer.per_event_ball:
            candidates = _hypercube_candidates(current, scorer.event_axes(current), step_raw).reshape(b * m, n)
        else:
            candidates = (current[:, None, :] + offsets[None, :, :]).reshape(b * m, n)
        scored = scorer.score(candidates)
        evaluations += b * m * scorer.rows_per_event()
        g = scored.gamma.reshape(b, m)
        best = np.nanargmax(np.nan_to_num(g, nan=-1.0), axis=1)
        current = candidates.reshape(b, m, n)[np.arange(b), best]
        current_class = scored.predicted_class.reshape(b, m)[np.arange(b), best]
        gamma_path[:, step - 1] = g[np.arange(b), best]
        newly = (flip_step < 0) & (current_class != start_class)
        flip_step[newly] = step
    return AdversarialResult(
        flip_step=flip_step,
        start_class=start_class,
        end_class=current_class,
        final_points=current,
        gamma_path=gamma_path,
        evaluations=int(evaluations),
        start_gamma=start.gamma,
        start_probability=start.probability,
    )


def _hypercube_candidates(
    current: NDArray[np.float64], axes: NDArray[np.intp], step: NDArray[np.float64]
) -> NDArray[np.float64]:
    """(B, m, n) the sampled hypercube around each current point: candidate i < m/2 moves feature ``axes[e, i]`` by
    +step, candidate m/2 + i by −step (the same points :meth:`RobustnessScorer.build_rows` evaluates)."""
    b, half = axes.shape
    out = np.repeat(current[:, None, :], 2 * half, axis=1)
    rows = np.repeat(np.arange(b), half)
    cols = np.tile(np.arange(half), b)
    flat = axes.reshape(-1)
    out[rows, cols, flat] += step[flat]
    out[rows, cols + half, flat] -= step[flat]
    return out
