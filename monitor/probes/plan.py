"""Probes: what one funnel run on a region costs, in model rows, before it runs.

The service's scheduler admits a region to probing only when its row budget covers the whole run
(:class:`~monitor.probes.scheduler.ProbeScheduler`), so that a region is probed to completion or not started. The
plan is an upper bound per stage, read from the probe plan (the points, the targets and their members, the settings)
without evaluating the model:

- ``mri``: the B clean rows, B per target member (2B per ``shift`` feature), and the γ-ascent directions;
- ``sensitivity``: B per member of a stochastic τ and extra draw (every target flagged);
- ``threshold``: per target searched, its rows per P(ε) times the deepest search (every rung and the bisection of the
  widest bracket, :func:`~monitor.probes.threshold.search_depth`); a tree ensemble's exact ``shift`` steps counted
  point by point (:func:`~monitor.probes.trees.exact_shift_rows`); nothing for a feature of zero spread;
- ``consistency``: B per τ (each configuration as if none were cached);
- ``adversarial``: Algorithm 2, B·(1+m) for the start and B·m·(1+m) per step (m: the ball's size);
- ``certify``: B·(copies + 1) where the caller adds a certified radius.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from monitor.model.base import Predictor
from monitor.model.standardize import Standardizer
from monitor.probes.funnel import STAGES, FunnelConfig, ascent_config, search_targets
from monitor.probes.perturbation_types import GammaAscent, PerturbationContext
from monitor.probes.perturbations import probe_targets
from monitor.probes.profile import FeatureInfo
from monitor.probes.report import JsonObject
from monitor.probes.threshold import search_depth
from monitor.probes.trees import TreeSplits, exact_shift_rows
from monitor.signals.scorer import RobustnessScorer

#: the plan's stages: the funnel's, then the certified radius the scheduler adds
PLAN_STAGES: tuple[str, ...] = (*STAGES, "certify")


@dataclass(frozen=True, slots=True)
class ProbePlan:
    """The most model rows each stage of one region's probe can take.

    Attributes
    ----------
    points : B, the region's points.
    targets : probe targets ((τ, feature) pairs).
    rows : stage → rows (keys :data:`PLAN_STAGES`).
    """

    points: int
    targets: int
    rows: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.rows.values())

    def to_dict(self) -> JsonObject:
        rows: JsonObject = dict(self.rows)
        return {"points": self.points, "targets": self.targets, "rows": rows, "total": self.total}


def plan_probe(
    model: Predictor,
    standardizer: Standardizer,
    points: NDArray[np.floating],
    config: FunnelConfig,
    *,
    features: FeatureInfo | None = None,
    splits: TreeSplits | None = None,
    certify_copies: int = 0,
) -> ProbePlan:
    """The upper bound of :func:`~monitor.probes.funnel.run_funnel`'s rows per stage on (B, n) raw ``points`` with
    ``config`` (the same ``features`` and ``splits``; held values do not change the count), plus ``certify_copies`` noise copies per point for
    a certified radius (0: none)."""
    x = np.asarray(points, dtype=np.float64)
    b = int(x.shape[0])
    context = PerturbationContext(standardizer, model=model, radius=config.radius, ball=config.ball, seed=config.seed)
    targets = probe_targets(config.perturbations, context)
    rows = dict.fromkeys(PLAN_STAGES, 0)
    directions = sum(m.direction_rows(b) for t in targets for m in t.members if isinstance(m, GammaAscent))
    rows["mri"] = b + directions + sum(b * len(t.members) for t in targets)
    extra_draws = config.sensitivity_draws - 1
    rows["sensitivity"] = sum(b * extra_draws for t in targets for m in t.members if m.stochastic)
    depth, _ = search_depth(config.eps_start, config.eps_max, config.eta)
    for t in search_targets(targets, features):
        if splits is not None and t.name == "shift" and t.feature is not None:
            scale = float(standardizer.scale[t.feature])
            rows["threshold"] += exact_shift_rows(
                x[:, t.feature], splits.thresholds[t.feature], cap=config.eps_max * scale, equality=splits.equality
            )
        else:
            rows["threshold"] += b * len(t.members) * depth
    rows["consistency"] = b * len({t.name for t in targets})
    if config.steps > 0:
        m = RobustnessScorer(model, standardizer, ascent_config(config, model)).ball_size
        rows["adversarial"] = b * (1 + m) + config.steps * b * m * (1 + m)
    if certify_copies > 0:
        rows["certify"] = b * (certify_copies + 1)
    return ProbePlan(b, len(targets), rows)
