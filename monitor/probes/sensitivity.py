"""Probes: the sensitivity matrix (*The Robustness Surface*, §10.3) — which output dimensions move under which τ.

S_ij = E|f_i(x) − f_i(τ_j(x))| over the region's points (and over ``draws`` independent draws of a stochastic τ),
with f = class probabilities for classifiers (one-hot labels for label-only models) and the output values for
regressors (output units). Rows are output dimensions, columns are probe targets; for the ``shift`` family the
per-feature column averages the +ε and −ε members, and :meth:`SensitivityResult.by_type` averages features into
one ``shift`` column.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from monitor.errors import ProbeError
from monitor.model.base import Predictor
from monitor.model.standardize import Standardizer
from monitor.probes.mri import FUNNEL_EPS, check_eps, open_session
from monitor.probes.perturbation_types import FUNNEL_RADIUS, FUNNEL_SEED
from monitor.probes.perturbations import PERTURBATION_NAMES, ProbeSession, ProbeTarget

FloatArray = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class SensitivityResult:
    """A sensitivity matrix.

    Attributes
    ----------
    eps : the intensity (standardized units).
    draws : draws per stochastic τ (deterministic τ use one).
    columns : target keys (``noise``, ``shift[3]``), one per column.
    matrix : (D, k) S_ij, D outputs × k targets; probabilities or output units.
    rows : model rows this computation evaluated (rows cached by an earlier stage are free).
    """

    eps: float
    draws: int
    columns: tuple[str, ...]
    matrix: FloatArray
    rows: int

    def column(self, key: str) -> FloatArray:
        """(D,) the column of target ``key``."""
        try:
            j = self.columns.index(key)
        except ValueError:
            raise ProbeError(f"no sensitivity column '{key}'; have {', '.join(self.columns)}") from None
        col: FloatArray = self.matrix[:, j]
        return col

    def by_type(self) -> tuple[tuple[str, ...], FloatArray]:
        """(τ names, (D, k_types) matrix) with the ``shift[j]`` columns averaged into one ``shift`` column."""
        names: list[str] = []
        cols: list[FloatArray] = []
        for name in PERTURBATION_NAMES:
            idx = [j for j, key in enumerate(self.columns) if key == name or key.startswith(f"{name}[")]
            if idx:
                names.append(name)
                cols.append(self.matrix[:, idx].mean(axis=1))
        extra = [j for j, key in enumerate(self.columns) if key.split("[")[0] not in PERTURBATION_NAMES]
        for j in extra:
            names.append(self.columns[j])
            cols.append(self.matrix[:, j])
        d = self.matrix.shape[0]
        return tuple(names), (np.column_stack(cols) if cols else np.zeros((d, 0)))

    def shift_by_feature(self) -> FloatArray | None:
        """(D, n_shifted) the ``shift[j]`` columns in feature order, or None when none were computed."""
        idx = [j for j, key in enumerate(self.columns) if key.startswith("shift[")]
        if not idx:
            return None
        out: FloatArray = self.matrix[:, idx]
        return out


def sensitivity_matrix(
    session: ProbeSession, targets: Sequence[ProbeTarget], eps: float, *, draws: int = 1
) -> SensitivityResult:
    """S for ``targets`` at intensity ``eps``.

    Parameters
    ----------
    session : the region's points and model.
    targets : the columns.
    eps : intensity, standardized units (the MRI's, so its rows are reused from the session cache).
    draws : independent draws averaged for each stochastic τ (noise, dropout, scale); draw 0 is the MRI's.

    Returns
    -------
    SensitivityResult with a (D, len(targets)) matrix. Cost: B rows per member and draw not already cached.
    """
    eps = check_eps(eps)
    if draws < 1:
        raise ProbeError(f"sensitivity draws must be >= 1; got {draws!r}")
    before = session.evaluations
    cols: list[FloatArray] = []
    for target in targets:
        parts: list[FloatArray] = []
        for member in target.members:
            for draw in range(draws if member.stochastic else 1):
                f = session.scores(session.outputs(member, eps, draw))
                parts.append(np.abs(f - session.clean_scores).mean(axis=0))
        cols.append(np.mean(np.vstack(parts), axis=0))
    matrix = np.column_stack(cols) if cols else np.zeros((session.n_outputs, 0))
    return SensitivityResult(eps, draws, tuple(t.key for t in targets), matrix, session.evaluations - before)


def sensitivity(
    model: Predictor,
    standardizer: Standardizer,
    points: NDArray[np.floating],
    *,
    eps: float = FUNNEL_EPS,
    perturbations: Sequence[str] = PERTURBATION_NAMES,
    draws: int = 1,
    seed: int = FUNNEL_SEED,
    radius: float = FUNNEL_RADIUS,
) -> SensitivityResult:
    """S (output dimension × target) of (B, n) raw-unit ``points``; a convenience over :func:`sensitivity_matrix`."""
    session, targets = open_session(model, standardizer, points, perturbations=perturbations, seed=seed, radius=radius)
    return sensitivity_matrix(session, targets, eps, draws=draws)
