"""Probes: the Model Robustness Index (*The Robustness Surface*, §10.2) — a vector, never one number.

r_τ = mean over the region's points of C(f(x), f(τ(x))) at one fixed, moderate ε, with C = class agreement for
classifiers and clip(1 − |Δ|/scale, 0, 1) (averaged over outputs) for regressors; scale = the output std of the
reference (or of the points), or a given scale. For the single-feature ``shift`` family r_shift[j] is the
agreement under +ε·e_j *and* −ε·e_j (a point counts only when neither sign changes it), and the vector's
``shift`` entry is the mean of r_shift[j] over features; the per-feature values are kept beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from monitor.config import FunnelSettings, setting_default
from monitor.errors import ProbeError
from monitor.model.base import Predictor
from monitor.model.signature import Held
from monitor.model.standardize import Standardizer
from monitor.probes.counting import BudgetExhaustedError, CountingPredictor
from monitor.probes.perturbation_types import FUNNEL_BALL, FUNNEL_RADIUS, FUNNEL_SEED, PerturbationContext
from monitor.probes.perturbations import PERTURBATION_NAMES, ProbeSession, ProbeTarget, probe_targets

#: the MRI's intensity unless told: the probe funnel's ``eps`` setting's default
FUNNEL_EPS: float = setting_default(FunnelSettings, "eps")


@dataclass(frozen=True, slots=True)
class MriResult:
    """One MRI scan.

    Attributes
    ----------
    eps : the intensity (standardized units).
    vector : τ name -> r_τ in [0, 1], registry order. Never reduce it to one number.
    by_target : target key (``noise``, ``shift[3]``) -> r.
    shift_by_feature : r_shift[j] per scanned feature j, or None when ``shift`` was not scanned.
    rows : model rows this scan evaluated (cached rows already paid for are not counted again).
    missing : target keys left unscanned because the row budget ran out (``partial=True`` only); the vector then
        covers the scanned targets only.
    """

    eps: float
    vector: dict[str, float]
    by_target: dict[str, float]
    shift_by_feature: tuple[float, ...] | None
    rows: int
    missing: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return not self.missing


def check_eps(eps: float, what: str = "ε") -> float:
    if not (np.isfinite(eps) and eps > 0):
        raise ProbeError(f"{what} must be a finite number > 0; got {eps!r}")
    return float(eps)


def scan_mri(session: ProbeSession, targets: Sequence[ProbeTarget], eps: float, *, partial: bool = False) -> MriResult:
    """The MRI of ``targets`` at intensity ``eps`` (one draw per stochastic τ).

    Parameters
    ----------
    session : the region's points and model.
    targets : from :func:`~monitor.probes.perturbations.probe_targets`.
    eps : the moderate intensity, standardized units (e.g. 0.1).
    partial : when the session's row budget refuses a target, skip it (listed in ``missing``) and go on with
        the others instead of raising :class:`~monitor.probes.counting.BudgetExhaustedError`.

    Returns
    -------
    MriResult. Cost: B rows per target member (2B per shift feature), plus B·m·(1+m) for the γ-ascent
    directions the first time ``gamma_ascent`` is evaluated on these points.
    """
    eps = check_eps(eps)
    before = session.evaluations
    by_target: dict[str, float] = {}
    missing: list[str] = []
    for t in targets:
        try:
            by_target[t.key] = session.agreement(t, eps)
        except BudgetExhaustedError:
            if not partial:
                raise
            missing.append(t.key)
    vector: dict[str, float] = {}
    shift: list[float] = []
    for t in targets:
        if t.key not in by_target:
            continue
        if t.name == "shift":
            shift.append(by_target[t.key])
        else:
            vector[t.name] = by_target[t.key]
    if shift:
        vector["shift"] = float(np.mean(shift))
    order = {name: i for i, name in enumerate(PERTURBATION_NAMES)}
    vector = dict(sorted(vector.items(), key=lambda kv: order.get(kv[0], len(order))))
    by_target = {t.key: by_target[t.key] for t in targets if t.key in by_target}  # target order
    rows = session.evaluations - before
    return MriResult(eps, vector, by_target, tuple(shift) if shift else None, rows, tuple(missing))


def open_session(
    model: Predictor,
    standardizer: Standardizer,
    points: NDArray[np.floating],
    *,
    perturbations: Sequence[str] = PERTURBATION_NAMES,
    seed: int = FUNNEL_SEED,
    radius: float = FUNNEL_RADIUS,
    ball: str = FUNNEL_BALL,
    fill: NDArray[np.float64] | None = None,
    output_scale: NDArray[np.floating] | None = None,
    budget_rows: int | None = None,
    held: Held | None = None,
) -> tuple[ProbeSession, tuple[ProbeTarget, ...]]:
    """A session on ``points`` (raw units) and its probe targets, sharing one row counter.

    ``radius``/``ball`` configure ``gamma_ascent``; ``fill`` (raw units) is what ``dropout`` writes (default the
    standardizer's mean); ``output_scale`` is the regressor scale for C. The clean points cost B rows at once.
    ``held``: the points' held values, one row per point, for a model that holds values fixed (every row built from
    a point carries its held values: see :mod:`monitor.probes.perturbations`).
    """
    counter = CountingPredictor(model, budget_rows=budget_rows)
    context = PerturbationContext(
        standardizer, model=counter, fill=fill, radius=radius, ball=ball, seed=seed, held=held
    )
    targets = probe_targets(perturbations, context)
    session = ProbeSession(counter, standardizer, points, seed=seed, output_scale=output_scale, held=held)
    return session, targets


def mri_vector(
    model: Predictor,
    standardizer: Standardizer,
    points: NDArray[np.floating],
    *,
    eps: float = FUNNEL_EPS,
    perturbations: Sequence[str] = PERTURBATION_NAMES,
    seed: int = FUNNEL_SEED,
    radius: float = FUNNEL_RADIUS,
    output_scale: NDArray[np.floating] | None = None,
    held: Held | None = None,
) -> dict[str, float]:
    """The MRI vector {τ name: r} of (B, n) raw-unit ``points`` at intensity ``eps`` (standardized units).

    A convenience over :func:`open_session` + :func:`scan_mri`.
    """
    session, targets = open_session(
        model,
        standardizer,
        points,
        perturbations=perturbations,
        seed=seed,
        radius=radius,
        output_scale=output_scale,
        held=held,
    )
    return scan_mri(session, targets, eps).vector
