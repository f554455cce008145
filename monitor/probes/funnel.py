"""Probes: the three-stage funnel on one region (*The Robustness Surface*, §10.5), plus Algorithm 2 and consistency.

1. **MRI** — every probe target (each τ; each feature of ``shift``) at the moderate intensity ``eps``.
   A target is *flagged* when its r is below ``mri_cut``.
2. **Sensitivity** — the sensitivity columns of the flagged targets, averaged over ``sensitivity_draws`` draws
   of stochastic τ (draw 0 reuses the MRI rows). A (target, output i) pair is *fragile* when
   S_i / scale_i ≥ ``sensitivity_cut`` (scale = 1 for probabilities, the output scale for regressors).
3. **Threshold search** — bisection for ε* on every target by default (``search_all``), most fragile (lowest r)
   first so that a budget goes to the worst; with ``search_all=False`` (the cheap screen) only on targets with at
   least one fragile output. The MRI value P(eps) is a free first probe: when it is
   already below P(0) − δ the bracket starts as [0, eps] instead of [0, ε_max]. The range grows geometrically from
   ``eps_start`` (1 standardized unit) up to the cap ``eps_max`` (8) until P crosses
   (:func:`~monitor.probes.threshold.growth_ladder`).

Every target then gets a status in :attr:`FunnelResult.profile` (:mod:`monitor.probes.profile`): crossed, not
crossed within the cap, or not searched with the reason (robust at ``eps``, the budget, a feature of zero reference
spread — never searched, since a standardized unit means nothing there).

Then output consistency over {clean, each τ at ``eps``} (mostly cached rows) and seed 001 Algorithm 2
(:func:`~monitor.signals.adversarial.gamma_ascent_search`) from every point, ``steps`` steps.

Models with values held fixed (int, bool and string inputs, ``fixed_features``): ``held`` gives each point's held
values; every row built from a point — perturbed copies, γ-ascent candidates, Algorithm 2's steps — is evaluated
with that point's own held values (only x is perturbed). The MRI, sensitivity, threshold and consistency stages
keep the points' order, so the session passes ``held`` with each evaluation; Algorithm 2 runs once per group of
points sharing their held values, through :class:`~monitor.probes.counting.BoundHeld` (the same rows and
results as one run: each point's ascent depends on its own ball only).

Evaluation counts are model *rows* per stage. ``exhaustive`` is what threshold search on every target would
cost at full depth — B clean rows, the γ-ascent directions, and every rung of the growing range plus the bisection of
its widest bracket for every target (the seed's O(k·d·log(1/η)); :func:`~monitor.probes.threshold.search_depth`);
``exhaustive_min`` its cost when no target crosses (clean, directions and every rung per target). The threshold stage
costs at most ``exhaustive`` less the clean and direction rows; ``funnel`` = mri + sensitivity + threshold adds the
rows that order and screen the searches, so it undercuts ``exhaustive`` when the screen leaves targets out
(``search_all=False``) and can exceed it when every target is searched.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from monitor.config import FunnelSettings, setting_default
from monitor.errors import ConfigError, ProbeError
from monitor.model.base import ModelKind, Predictor
from monitor.model.signature import Held
from monitor.model.standardize import Standardizer
from monitor.probes.consistency import ConsistencyResult, output_consistency
from monitor.probes.counting import BoundHeld, BudgetExhaustedError
from monitor.probes.mri import MriResult, open_session, scan_mri
from monitor.probes.perturbation_types import FeatureShift, GammaAscent, Perturbation
from monitor.probes.perturbations import PERTURBATION_NAMES, ProbeSession, ProbeTarget, check_names
from monitor.probes.profile import FeatureInfo, ProfileEntry, complete_profile
from monitor.probes.sensitivity import SensitivityResult, sensitivity_matrix
from monitor.probes.threshold import TargetThreshold, check_search, search_depth, search_target
from monitor.probes.trees import TreeSplits, exact_shift_threshold
from monitor.signals.adversarial import AdversarialResult, gamma_ascent_search
from monitor.signals.scorer import ScoringConfig

STAGES: tuple[str, ...] = ("mri", "sensitivity", "threshold", "consistency", "adversarial")


class _BudgetStop(Exception):
    """Internal: a stage finished partially because the row budget ran out; stop the funnel there."""


@dataclass(frozen=True, slots=True)
class FunnelConfig:
    """Settings of one funnel run. Intensities are in the standardizer's units (raw for ``space: raw``).

    The defaults and meaning of every field but ``perturbations`` (all registered τ) are declared once, in
    :class:`monitor.config.FunnelSettings`; the attributes below say what the funnel does with them.

    Attributes
    ----------
    perturbations : τ names to probe (registry order is kept in reports).
    eps : the moderate MRI / sensitivity / consistency intensity.
    mri_cut : a target with r < mri_cut goes on to the sensitivity stage (seed: r > 0.9 can be deprioritized).
    sensitivity_cut : a (target, output) pair is fragile when S_i/scale_i ≥ this.
    sensitivity_draws : draws per stochastic τ in the sensitivity stage.
    delta, eps_max, eta : threshold search: tolerance δ on the agreement rate, range [0, ε_max] (the cap),
        resolution η.
    eps_start : the range grows geometrically from here (ε_start, 2·ε_start, … up to ε_max) until P crosses;
        None (or ≥ ε_max) searches [0, ε_max] at once.
    radius, ball : the γ ball for ``gamma_ascent`` and Algorithm 2 (standardized units).
    steps : Algorithm 2 steps N per point; 0 skips it.
    seed : seeds every random draw and the ball.
    consistency_tolerance : regressors: |Δ| ≤ tolerance·scale counts as the same output.
    search_all : threshold search on every target (default): the MRI and sensitivity stages still run and order
        the search (lowest r first, so a budget goes to the worst), but do not screen targets out of it — a target
        robust at the small ``eps`` may still cross well inside the cap. False: the cheap screen, threshold search
        on the fragile targets only; the others are reported not searched (``robust_at_eps``). The service's
        periodic prober searches every target too (it admits a region only when its budget covers the whole run).
    """

    perturbations: tuple[str, ...] = PERTURBATION_NAMES
    eps: float = setting_default(FunnelSettings, "eps")
    mri_cut: float = setting_default(FunnelSettings, "mri_cut")
    sensitivity_cut: float = setting_default(FunnelSettings, "sensitivity_cut")
    sensitivity_draws: int = setting_default(FunnelSettings, "sensitivity_draws")
    delta: float = setting_default(FunnelSettings, "delta")
    eps_max: float = setting_default(FunnelSettings, "eps_max")
    eta: float = setting_default(FunnelSettings, "eta")
    eps_start: float | None = setting_default(FunnelSettings, "eps_start")
    radius: float = setting_default(FunnelSettings, "radius")
    ball: str = setting_default(FunnelSettings, "ball")
    steps: int = setting_default(FunnelSettings, "steps")
    seed: int = setting_default(FunnelSettings, "seed")
    consistency_tolerance: float = setting_default(FunnelSettings, "consistency_tolerance")
    search_all: bool = setting_default(FunnelSettings, "search_all")

    def __post_init__(self) -> None:
        object.__setattr__(self, "perturbations", check_names(self.perturbations))
        try:
            check_search(self.delta, self.eps_max, self.eta)
        except ProbeError as exc:
            raise ConfigError(str(exc)) from None
        if self.eps_start is not None and not (np.isfinite(self.eps_start) and self.eps_start > 0):
            raise ConfigError(f"eps_start (where the range starts growing) must be > 0; got {self.eps_start!r}")
        if not (np.isfinite(self.eps) and self.eps > 0):
            raise ConfigError(f"eps (MRI intensity) must be a finite number > 0; got {self.eps!r}")
        if not 0 < self.mri_cut <= 1:
            raise ConfigError(f"mri_cut must be in (0, 1]; got {self.mri_cut!r}")
        if not self.sensitivity_cut >= 0:
            raise ConfigError(f"sensitivity_cut must be >= 0; got {self.sensitivity_cut!r}")
        if self.sensitivity_draws < 1:
            raise ConfigError(f"sensitivity_draws must be >= 1; got {self.sensitivity_draws!r}")
        if not (np.isfinite(self.radius) and self.radius > 0):
            raise ConfigError(f"radius must be a finite number > 0; got {self.radius!r}")
        if self.steps < 0:
            raise ConfigError(f"steps (Algorithm 2) must be >= 0; got {self.steps!r}")
        if not self.consistency_tolerance > 0:
            raise ConfigError(f"consistency_tolerance must be > 0; got {self.consistency_tolerance!r}")


@dataclass(frozen=True, slots=True)
class FragileTarget:
    """A target that passed both screens.

    Attributes
    ----------
    perturbation, feature : the target (feature index for ``shift``, else None).
    r : its MRI agreement at ``eps``.
    outputs : output dimensions i with S_i/scale_i ≥ sensitivity_cut (the fragile (target, output) pairs).
    sensitivity : (D,) its sensitivity column.
    """

    perturbation: str
    feature: int | None
    r: float
    outputs: tuple[int, ...]
    sensitivity: tuple[float, ...]

    @property
    def key(self) -> str:
        return self.perturbation if self.feature is None else f"{self.perturbation}[{self.feature}]"


@dataclass(frozen=True, slots=True)
class FunnelResult:
    """Everything one funnel run produced; :func:`monitor.probes.report.build_report` turns it into JSON.

    Stage results are None when the stage did not run (budget exhausted before it, or ``steps`` = 0).
    ``sensitivity_all`` is the full matrix over every target from the MRI's own rows (one draw, no extra model
    rows); ``sensitivity`` is the stage-2 matrix of the flagged targets (``sensitivity_draws`` draws).
    ``evaluations`` holds the model rows each stage *used* (keys :data:`STAGES`; they add up to
    :attr:`total_rows`, so summing the dict is the run's cost). ``exhaustive_rows`` / ``exhaustive_min_rows`` are
    what threshold search on every target would have cost (not spent; see the module docstring).
    ``stopped_at`` names the stage where the budget ran out (None when complete). ``profile`` has one entry per
    target (every (τ, feature) pair) with its status; ``thresholds`` holds the searches alone, as before.
    """

    config: FunnelConfig
    kind: ModelKind
    n_points: int
    n_features: int
    n_outputs: int
    output_scale: tuple[float, ...]
    targets: tuple[str, ...]
    mri: MriResult | None
    sensitivity_all: SensitivityResult | None
    sensitivity: SensitivityResult | None
    flagged: tuple[str, ...]
    fragile: tuple[FragileTarget, ...]
    thresholds: tuple[TargetThreshold, ...]
    consistency: ConsistencyResult | None
    adversarial: AdversarialResult | None
    evaluations: dict[str, int] = field(default_factory=dict)
    exhaustive_rows: int = 0
    exhaustive_min_rows: int = 0
    stopped_at: str | None = None
    profile: tuple[ProfileEntry, ...] = ()
    features: FeatureInfo | None = None

    @property
    def total_rows(self) -> int:
        """Model rows the run evaluated, all stages."""
        return sum(self.evaluations.values())

    @property
    def funnel_rows(self) -> int:
        """Rows of the three funnel stages (mri + sensitivity + threshold): compare with ``exhaustive_rows``."""
        return (
            self.evaluations.get("mri", 0)
            + self.evaluations.get("sensitivity", 0)
            + self.evaluations.get("threshold", 0)
        )

    @property
    def complete(self) -> bool:
        return self.stopped_at is None


def exhaustive_rows(
    session: ProbeSession, targets: tuple[ProbeTarget, ...], eps_max: float, eta: float, eps_start: float | None = None
) -> tuple[int, int]:
    """(full-depth, floor) model rows of threshold search on every target without the funnel.

    Both include the B clean rows and the γ-ascent directions (when ``gamma_ascent`` is a target). Full depth
    charges every target every rung of the range and the bisection of its widest bracket; the floor every rung.
    """
    b = session.n_points
    fixed = b
    for t in targets:
        for member in t.members:
            if isinstance(member, GammaAscent):
                fixed += member.direction_rows(b)
    per_eval = sum(session.rows_per_evaluation(t) for t in targets)
    depth, rungs = search_depth(eps_start, eps_max, eta)
    return fixed + per_eval * depth, fixed + per_eval * rungs


def search_targets(targets: tuple[ProbeTarget, ...], features: FeatureInfo | None) -> tuple[ProbeTarget, ...]:
    """The targets a threshold search may run on: all but the features of zero reference spread (never searched)."""
    if features is None:
        return targets
    return tuple(t for t in targets if t.feature is None or not bool(features.zero_spread[t.feature]))


def ascent_config(cfg: FunnelConfig, model: Predictor) -> ScoringConfig:
    """The scoring settings of Algorithm 2 in a funnel run: ``cfg``'s ball, no flicker copies, labels for a
    classifier without probabilities."""
    output = "label" if model.kind == "classifier" and not getattr(model, "has_proba", True) else "auto"
    return ScoringConfig(radius=cfg.radius, ball=cfg.ball, output=output, flicker_copies=0, seed=cfg.seed)


def _consistency_configurations(targets: tuple[ProbeTarget, ...]) -> list[Perturbation]:
    """One configuration per τ: the target's perturbation, and for ``shift`` a random feature and sign per point."""
    configs: list[Perturbation] = []
    seen: set[str] = set()
    for t in targets:
        if t.name in seen:
            continue
        seen.add(t.name)
        configs.append(FeatureShift(feature=None) if t.name == "shift" else t.members[0])
    return configs


def held_groups(held: Held) -> list[NDArray[np.intp]]:
    """The row indices of each distinct row of held values, in order of first appearance."""
    groups: dict[tuple[object, ...], list[int]] = {}
    keys = sorted(held.values)
    for i in range(len(held)):
        key = tuple(
            tuple(held.values[k][i].reshape(-1).tolist())
            if held.values[k].dtype.kind == "O"
            else held.values[k][i].tobytes()
            for k in keys
        )
        groups.setdefault(key, []).append(i)
    return [np.asarray(idx, dtype=np.intp) for idx in groups.values()]


def _ascent_search(
    model: Predictor,
    standardizer: Standardizer,
    points: NDArray[np.float64],
    held: Held | None,
    steps: int,
    config: ScoringConfig,
) -> AdversarialResult:
    """:func:`gamma_ascent_search` from every point, each evaluated with its own held values (see the module
    docstring): one run per group of points that share them."""
    if held is None or not held.values:
        return gamma_ascent_search(model, standardizer, points, steps=steps, config=config)
    groups = held_groups(held)
    parts = [
        (
            idx,
            gamma_ascent_search(
                BoundHeld(model, held.take(idx[:1])), standardizer, points[idx], steps=steps, config=config
            ),
        )
        for idx in groups
    ]
    if len(parts) == 1:
        return parts[0][1]
    b = points.shape[0]
    first = parts[0][1]
    flip_step = np.empty(b, dtype=first.flip_step.dtype)
    start_class = np.empty(b, dtype=first.start_class.dtype)
    end_class = np.empty(b, dtype=first.end_class.dtype)
    final_points = np.empty_like(points, dtype=first.final_points.dtype)
    gamma_path = np.empty((b, first.gamma_path.shape[1]), dtype=first.gamma_path.dtype)
    for idx, part in parts:
        flip_step[idx] = part.flip_step
        start_class[idx] = part.start_class
        end_class[idx] = part.end_class
        final_points[idx] = part.final_points
        gamma_path[idx] = part.gamma_path
    return AdversarialResult(
        flip_step=flip_step,
        start_class=start_class,
        end_class=end_class,
        final_points=final_points,
        gamma_path=gamma_path,
        evaluations=sum(part.evaluations for _, part in parts),
    )


def run_funnel(
    model: Predictor,
    standardizer: Standardizer,
    points: NDArray[np.floating],
    config: FunnelConfig | None = None,
    *,
    budget_rows: int | None = None,
    fill: NDArray[np.float64] | None = None,
    output_scale: NDArray[np.floating] | None = None,
    labels: NDArray[np.integer] | None = None,
    held: Held | None = None,
    features: FeatureInfo | None = None,
    splits: TreeSplits | None = None,
) -> FunnelResult:
    """Run the funnel on (B, n) raw-unit ``points`` treated as one region.

    Parameters
    ----------
    model : the predictor (ONNX copy).
    standardizer : defines the units of every ε (identity for ``space: raw``).
    points : (B, n) raw units, finite.
    config : stages' settings; defaults to :class:`FunnelConfig`.
    budget_rows : model-row budget for the whole run (clean rows included); stages stop when it runs out and
        ``stopped_at`` says where. It must at least cover the B clean rows.
    fill : (n,) raw values that ``dropout`` writes; default the standardizer's mean (the reference mean).
    output_scale : (D,) regressor output scale for C = 1 − |Δ|/scale; default the std over the points.
    labels : (B,) class indices, optional: consistency then reports accuracy, PDR and an accuracy baseline.
    held : the points' held values (B rows) for a model that holds values fixed; None for one that holds nothing.
    features : names, raw units, reference range and zero-spread features (:class:`FeatureInfo`); features of zero
        spread are not searched. None: no feature is known to have zero spread.
    splits : a tree ensemble's split thresholds (:func:`monitor.probes.trees.tree_splits`): single-feature shifts
        then get their exact ε* from the steps (method ``exact_tree``) instead of bisection.

    Returns
    -------
    FunnelResult.

    Raises
    ------
    ConfigError
        Invalid settings.
    ProbeError
        Points of the wrong shape or non-finite, bad labels/scale, or a budget smaller than B rows.
    """
    cfg = config or FunnelConfig()
    session, targets = open_session(
        model,
        standardizer,
        points,
        perturbations=cfg.perturbations,
        seed=cfg.seed,
        radius=cfg.radius,
        ball=cfg.ball,
        fill=fill,
        output_scale=output_scale,
        budget_rows=budget_rows,
        held=held,
    )
    zero_keys: set[str] = set()
    if features is not None:
        if features.n_features != session.n_features:
            raise ProbeError(f"feature info names {features.n_features} features; the points have {session.n_features}")
        zero_keys = {t.key for t in targets} - {t.key for t in search_targets(targets, features)}
    run = _Stages(session, targets, cfg)
    run.run(zero_keys, labels=labels, splits=splits, standardizer=standardizer, held=held)
    return run.result(zero_keys, features)


class _Stages:
    """One funnel run's stages in order (MRI, sensitivity, threshold, consistency, adversarial), what each found,
    and the model rows each used; a stage the budget interrupts keeps what it found and ``stage`` names it."""

    def __init__(self, session: ProbeSession, targets: tuple[ProbeTarget, ...], cfg: FunnelConfig) -> None:
        self.session, self.targets, self.cfg = session, targets, cfg
        self.counts = dict.fromkeys(STAGES, 0)
        self.mri: MriResult | None = None
        self.sens_all: SensitivityResult | None = None
        self.sens: SensitivityResult | None = None
        self.flagged: list[ProbeTarget] = []
        self.fragile: list[FragileTarget] = []
        self.thresholds: list[TargetThreshold] = []
        self.consistency: ConsistencyResult | None = None
        self.adversarial: AdversarialResult | None = None
        #: the stage running, or where the budget stopped the run; None once all ran
        self.stage: str | None = "mri"
        self._mark_at = 0  # the B clean rows, evaluated when the session opened, count towards the MRI stage

    def mark(self, name: str) -> None:
        """The rows evaluated since the last mark belong to stage ``name``."""
        self.counts[name] += self.session.evaluations - self._mark_at
        self._mark_at = self.session.evaluations

    def run(
        self,
        zero_keys: set[str],
        *,
        labels: NDArray[np.integer] | None,
        splits: TreeSplits | None,
        standardizer: Standardizer,
        held: Held | None,
    ) -> None:
        session, targets, cfg = self.session, self.targets, self.cfg
        try:
            # cheap targets first, the γ-ascent directions (B·m·(1+m) rows) last, so a budget keeps the most
            cheap_first = sorted(targets, key=lambda t: any(isinstance(m, GammaAscent) for m in t.members))
            mri = self.mri = scan_mri(session, cheap_first, cfg.eps, partial=True)
            scanned = [t for t in targets if t.key in mri.by_target]
            self.sens_all = sensitivity_matrix(session, scanned, cfg.eps, draws=1)  # the MRI's rows: free
            self.mark("mri")
            if not mri.complete:
                raise _BudgetStop

            self.stage = "sensitivity"
            self.flagged = [t for t in scanned if mri.by_target[t.key] < cfg.mri_cut]
            self.sens = sensitivity_matrix(session, self.flagged, cfg.eps, draws=cfg.sensitivity_draws)
            self.mark("sensitivity")
            self._find_fragile(mri, self.sens)

            self.stage = "threshold"
            self._search_thresholds(mri, zero_keys, splits)
            self.mark("threshold")

            self.stage = "consistency"
            self.consistency = output_consistency(
                session,
                _consistency_configurations(targets),
                cfg.eps,
                labels=labels,
                tolerance=cfg.consistency_tolerance,
            )
            self.mark("consistency")

            self.stage = "adversarial"
            if cfg.steps > 0:
                scoring = ascent_config(cfg, session.model)
                self.adversarial = _ascent_search(
                    session.model, standardizer, session.raw_points, held, cfg.steps, scoring
                )
            self.mark("adversarial")
            self.stage = None
        except (BudgetExhaustedError, _BudgetStop):
            assert self.stage is not None
            self.mark(self.stage)  # the rows the interrupted stage used before the refusal
        assert sum(self.counts.values()) == session.evaluations, "every evaluated row belongs to one stage"

    def result(self, zero_keys: set[str], features: FeatureInfo | None) -> FunnelResult:
        """What the run found, with every target's place in the profile and the rows an exhaustive search takes."""
        session, targets, cfg = self.session, self.targets, self.cfg
        full, floor = exhaustive_rows(session, targets, cfg.eps_max, cfg.eta, cfg.eps_start)
        mri = self.mri
        profile = complete_profile(
            [(t.name, t.feature) for t in targets],
            self.thresholds,
            mri=None if mri is None else mri.by_target,
            flagged=[t.key for t in self.flagged],
            fragile=[f.key for f in self.fragile],
            zero_spread=sorted(zero_keys),
            stopped_at=self.stage,
            eps=cfg.eps,
            mri_cut=cfg.mri_cut,
            sensitivity_cut=cfg.sensitivity_cut,
        )
        order_of = {key: i for i, key in enumerate(t.key for t in targets)}
        return FunnelResult(
            config=cfg,
            kind=session.model.kind,
            n_points=session.n_points,
            n_features=session.n_features,
            n_outputs=session.n_outputs,
            output_scale=tuple(float(v) for v in session.output_scale),
            targets=tuple(t.key for t in targets),
            mri=mri,
            sensitivity_all=self.sens_all,
            sensitivity=self.sens,
            flagged=tuple(t.key for t in self.flagged),
            fragile=tuple(self.fragile),
            thresholds=tuple(sorted(self.thresholds, key=lambda th: order_of[th.key])),
            consistency=self.consistency,
            adversarial=self.adversarial,
            evaluations=self.counts,
            exhaustive_rows=full,
            exhaustive_min_rows=floor,
            stopped_at=self.stage,
            profile=profile,
            features=features,
        )

    def _find_fragile(self, mri: MriResult, sens: SensitivityResult) -> None:
        """The flagged targets whose sensitivity reaches the cut on some output."""
        for t in self.flagged:
            col = sens.column(t.key)
            outs = tuple(int(i) for i in np.flatnonzero(col / self.session.output_scale >= self.cfg.sensitivity_cut))
            if outs:
                self.fragile.append(
                    FragileTarget(t.name, t.feature, mri.by_target[t.key], outs, tuple(float(v) for v in col))
                )

    def _search_thresholds(self, mri: MriResult, zero_keys: set[str], splits: TreeSplits | None) -> None:
        """ε* of every target (``search_all``) or of the fragile ones, lowest MRI first; each kept as it is found."""
        session, targets, cfg = self.session, self.targets, self.cfg
        r_of = mri.by_target
        by_key = {t.key: t for t in targets}
        order = (
            sorted(targets, key=lambda t: r_of[t.key])
            if cfg.search_all
            else [by_key[f.key] for f in sorted(self.fragile, key=lambda f: f.r)]
        )
        hints = {key: (cfg.eps, r) for key, r in r_of.items()} if cfg.eps <= cfg.eps_max else None
        for t in order:
            if t.key in zero_keys:
                continue
            if splits is not None and t.name == "shift" and t.feature is not None:
                self.thresholds.append(exact_shift_threshold(session, t, splits, delta=cfg.delta, eps_max=cfg.eps_max))
                continue
            self.thresholds.append(
                search_target(
                    session, t, delta=cfg.delta, eps_max=cfg.eps_max, eta=cfg.eta, hints=hints, eps_start=cfg.eps_start
                )
            )
