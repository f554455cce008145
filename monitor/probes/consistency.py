"""Probes: output consistency across configurations (*Robustness as an Emergent Property of Task
Performance*, §2 and App. B).

The configurations V of a point are the clean input plus one perturbed copy per perturbation type at a fixed ε
(for ``shift``: one random feature and sign per point). Then

- c(x) = 1 when every configuration predicts the same class (regressors: every output within ``tolerance``·scale
  of the clean output); OC = mean c over the points;
- random baseline p^|V|, with p the clean accuracy when labels are given, else the agreement rate (the mean,
  over the perturbed configurations, of the fraction of points whose class matches the clean one);
- per-example STD of the score across V: the correctness (0/1) when labels are given, else the probability of
  the class predicted on the clean input (regressors: the output over its scale, averaged over outputs);
- PDR (labels only): mean over perturbed configurations v of 1 − acc_v / acc_clean (Zhu et al., 2024, at
  dataset level; that paper's per-example ratio is undefined for 0/1 scores).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from monitor.errors import ProbeError
from monitor.model.base import ModelOutput
from monitor.probes.mri import check_eps
from monitor.probes.perturbation_types import Perturbation
from monitor.probes.perturbations import ProbeSession

FloatArray = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class ConsistencyResult:
    """Output consistency of a region.

    Attributes
    ----------
    eps : intensity of the perturbed configurations (standardized units).
    configurations : ``clean`` then the perturbation keys; |V| = len(configurations).
    per_point : (B,) bool, c(x).
    output_consistency : OC = mean c.
    agreement : mean over perturbed configurations of the class agreement rate with the clean input.
    accuracy : clean accuracy when labels were given, else None.
    baseline : p^|V| with p = ``accuracy`` when labels were given, else ``agreement``.
    score_std : (B,) per-example STD of the score across V.
    pdr : performance drop rate when labels were given, else None (also None when the clean accuracy is 0).
    rows : model rows evaluated for this (rows cached by earlier stages are free).
    """

    eps: float
    configurations: tuple[str, ...]
    per_point: NDArray[np.bool_]
    output_consistency: float
    agreement: float
    accuracy: float | None
    baseline: float
    score_std: FloatArray
    pdr: float | None
    rows: int

    @property
    def mean_score_std(self) -> float:
        return float(self.score_std.mean())


def output_consistency(
    session: ProbeSession,
    configurations: Sequence[Perturbation],
    eps: float,
    *,
    labels: NDArray[np.integer] | None = None,
    tolerance: float = 0.1,
) -> ConsistencyResult:
    """Output consistency of the session's points over the clean input plus ``configurations`` at ``eps``.

    Parameters
    ----------
    session : the region's points and model.
    configurations : one perturbation per configuration (draw 0 each, so MRI rows are reused).
    eps : intensity, standardized units.
    labels : (B,) true class indices (0..C−1), optional; classifiers only.
    tolerance : regressors: an output counts as unchanged when |Δ_i| ≤ tolerance·scale_i.

    Raises
    ------
    ProbeError
        No configurations, bad tolerance, or labels of the wrong shape/range or on a regressor.
    """
    eps = check_eps(eps)
    if not configurations:
        raise ProbeError("output consistency needs at least one perturbed configuration; got none")
    if not tolerance > 0:
        raise ProbeError(f"consistency tolerance must be > 0; got {tolerance!r}")
    classifier = session.model.kind == "classifier"
    b = session.n_points
    y: NDArray[np.int64] | None = None
    if labels is not None:
        if not classifier:
            raise ProbeError("labels were given but the model is a regressor; accuracy and PDR need class labels")
        y = np.asarray(labels).astype(np.int64).reshape(-1)
        if y.shape != (b,):
            raise ProbeError(f"labels must hold one class index per point ({b}); got {y.shape[0]}")
        if y.min() < 0 or y.max() >= session.n_outputs:
            raise ProbeError(
                f"labels must be class indices in 0..{session.n_outputs - 1}; got values {int(y.min())}..{int(y.max())}"
            )
    before = session.evaluations
    outs: list[ModelOutput] = [session.clean] + [session.outputs(p, eps) for p in configurations]
    clean = session.clean
    if classifier:
        assert clean.label is not None
        labels_v = np.vstack([o.label for o in outs if o.label is not None])  # (|V|, B)
        same = labels_v == clean.label[None, :]
        per_point = same.all(axis=0)
        agreement = float(same[1:].mean())
        klass = clean.label
        if y is None:
            scores = np.vstack([session.scores(o)[np.arange(b), klass] for o in outs])
        else:
            scores = (labels_v == y[None, :]).astype(np.float64)
    else:
        rel = np.stack([np.abs(session.scores(o) - session.clean_scores) / session.output_scale for o in outs])
        per_point = (rel <= tolerance).all(axis=(0, 2))
        agreement = float((rel[1:] <= tolerance).all(axis=2).mean())
        scores = np.stack([(session.scores(o) / session.output_scale).mean(axis=1) for o in outs])
    accuracy = pdr = None
    if y is not None:
        acc_v = scores.mean(axis=1)  # (|V|,) accuracy per configuration
        accuracy = float(acc_v[0])
        pdr = float(np.mean(1.0 - acc_v[1:] / accuracy)) if accuracy > 0 else None
    p = accuracy if accuracy is not None else agreement
    n_configs = len(outs)
    return ConsistencyResult(
        eps=eps,
        configurations=("clean", *(c.key for c in configurations)),
        per_point=per_point,
        output_consistency=float(per_point.mean()),
        agreement=agreement,
        accuracy=accuracy,
        baseline=float(p**n_configs),
        score_std=scores.std(axis=0),
        pdr=pdr,
        rows=session.evaluations - before,
    )
