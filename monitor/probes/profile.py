"""Probes: the complete threshold profile, and the features it is told in.

Threshold search runs on every target by default (offline and in the service's periodic prober); with the cheap
screen (``search_all`` off) only on the fragile ones, so a report that listed only the searched ones could not tell
"robust" from "not looked at". :func:`complete_profile` gives *every* probe target (each τ;
each feature of ``shift``) one :class:`ProfileEntry` with a status:

- ``crossed``: searched, and P(ε) fell below P(0) − δ at ε* within the range searched;
- ``not_crossed``: searched up to the cap ε_max without crossing (ε* > ε_max);
- ``not_searched``: with a reason — ``robust_at_eps`` (the MRI or the sensitivity screen found it robust at the
  funnel's moderate ε), ``budget`` (the row budget ran out first), ``zero_spread`` (a feature whose reference values
  do not vary: one standardized unit means nothing there, so no ε is searched), ``held`` (an element the model
  holds fixed: int, bool and string inputs, ``fixed_features``; it is never perturbed).

:class:`FeatureInfo` carries what turns standardized numbers into the user's: one name per element (decided at load,
:attr:`monitor.model.onnx.OnnxModel.feature_names`), the raw units of one standardized unit (the reference's
standard deviation), the reference range (points outside it are counted per feature) and the features of zero
spread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from monitor.errors import ProbeError
from monitor.model.signature import Signature
from monitor.model.standardize import Standardizer
from monitor.probes.threshold import TargetThreshold

Status = Literal["crossed", "not_crossed", "not_searched"]
Reason = Literal["robust_at_eps", "budget", "zero_spread", "held"]

#: what each ``not_searched`` reason means, as reports and docs state it
REASONS: Mapping[str, str] = {
    "robust_at_eps": "robust at the funnel's moderate ε (MRI or sensitivity screen, search_all off): not searched",
    "budget": "the model-row budget ran out before this target's search",
    "zero_spread": "the feature does not vary in the reference: a standardized unit means nothing there",
    "held": "an element the model holds fixed (int, bool or string input, fixed_features): never perturbed",
}

#: reference standard deviations at or below this are "zero spread" (as :meth:`Standardizer.fit` treats them)
MIN_SPREAD = 1e-12


@dataclass(frozen=True, slots=True)
class FeatureInfo:
    """The features as the user knows them.

    Attributes
    ----------
    names : (n,) one name per element of x.
    mean, scale : (n,) raw = mean + scale·standardized (the standardizer's; identity for ``space: raw``).
    low, high : (n,) the reference's range in raw units; None when unknown.
    zero_spread : (n,) features whose reference standard deviation is 0.
    held : names of the elements the model holds fixed.
    """

    names: tuple[str, ...]
    mean: NDArray[np.float64]
    scale: NDArray[np.float64]
    low: NDArray[np.float64] | None
    high: NDArray[np.float64] | None
    zero_spread: NDArray[np.bool_]
    held: tuple[str, ...] = ()

    @classmethod
    def build(
        cls,
        names: Sequence[str],
        standardizer: Standardizer,
        *,
        reference: NDArray[np.floating] | None = None,
        std: NDArray[np.floating] | None = None,
        held: Sequence[str] = (),
        mark_zero_spread: bool = True,
    ) -> FeatureInfo:
        """From the names, the standardizer and the reference rows (range and spread), or the reference's
        per-feature ``std`` (it overrides the rows' spread). Non-finite reference rows are ignored.

        A feature has zero spread when its reference standard deviation is 0 and the standardizer left its scale at
        the fallback 1 (a feature sharing a group's scale — ``--scale global`` — keeps a meaningful unit);
        ``mark_zero_spread=False`` marks none (``space: raw``, where ε is in the feature's own units).

        >>> s = Standardizer.fit(np.array([[0.0, 5.0], [2.0, 5.0]]))
        >>> info = FeatureInfo.build(["a", "b"], s, reference=np.array([[0.0, 5.0], [2.0, 5.0]]))
        >>> info.zero_spread.tolist(), info.low.tolist(), info.high.tolist()
        ([False, True], [0.0, 5.0], [2.0, 5.0])
        """
        n = standardizer.mean.shape[0]
        if len(names) != n:
            raise ProbeError(f"{len(names)} feature names for {n} features; give one name per feature")
        low = high = None
        spread = np.full(n, np.inf)
        if reference is not None:
            ref = np.asarray(reference, dtype=np.float64)
            ref = ref[np.all(np.isfinite(ref), axis=1)] if ref.ndim == 2 else ref
            if ref.ndim != 2 or ref.shape[1] != n:
                raise ProbeError(f"reference rows of shape {ref.shape}; expected (N, {n})")
            if ref.shape[0]:
                low, high = ref.min(axis=0), ref.max(axis=0)
                spread = ref.std(axis=0)
        if std is not None:
            spread = np.asarray(std, dtype=np.float64).reshape(n)
        return cls(
            names=tuple(str(v) for v in names),
            mean=np.asarray(standardizer.mean, dtype=np.float64),
            scale=np.asarray(standardizer.scale, dtype=np.float64),
            low=low,
            high=high,
            zero_spread=np.asarray(
                (spread <= MIN_SPREAD) & (np.asarray(standardizer.scale) == 1.0) & mark_zero_spread, dtype=np.bool_
            ),
            held=tuple(held),
        )

    @property
    def n_features(self) -> int:
        return len(self.names)

    def outside(self, points: NDArray[np.floating]) -> NDArray[np.int64]:
        """(n,) how many of the (B, n) raw ``points`` lie outside the reference range, per feature (0 when the
        range is unknown)."""
        if self.low is None or self.high is None:
            return np.zeros(self.n_features, dtype=np.int64)
        p = np.asarray(points, dtype=np.float64)
        counts: NDArray[np.int64] = np.count_nonzero((p < self.low) | (p > self.high), axis=0).astype(np.int64)
        return counts

    def to_raw(self, centre: NDArray[np.floating]) -> NDArray[np.float64]:
        """A standardized point in raw units."""
        return self.mean + self.scale * np.asarray(centre, dtype=np.float64)


def held_names(signature: Signature) -> tuple[str, ...]:
    """The names of what a model holds fixed: its non-float inputs, then the float features of ``fixed_features``."""
    return (*(s.name for s in signature.held_inputs), *signature.held_features)


@dataclass(frozen=True, slots=True)
class ProfileEntry:
    """One (τ, feature) pair of the complete profile.

    Attributes
    ----------
    perturbation, feature : the target (feature index for ``shift``, else None).
    status : ``crossed`` | ``not_crossed`` | ``not_searched``.
    threshold : the search's outcome; None when not searched.
    reason : why not searched (a key of :data:`REASONS`); None when searched.
    detail : the numbers behind the reason (e.g. ``MRI r = 0.97 ≥ mri_cut 0.9 at ε = 0.1``).
    """

    perturbation: str
    feature: int | None
    status: Status
    threshold: TargetThreshold | None = None
    reason: Reason | None = None
    detail: str | None = None

    @property
    def key(self) -> str:
        return self.perturbation if self.feature is None else f"{self.perturbation}[{self.feature}]"


def complete_profile(
    targets: Sequence[tuple[str, int | None]],
    searched: Sequence[TargetThreshold],
    *,
    mri: Mapping[str, float] | None,
    flagged: Sequence[str],
    fragile: Sequence[str],
    zero_spread: Sequence[str],
    stopped_at: str | None,
    eps: float,
    mri_cut: float,
    sensitivity_cut: float,
) -> tuple[ProfileEntry, ...]:
    """One entry per target (``(name, feature)`` pairs, in order): searched ones with their outcome, the others
    with the reason they were not searched.

    >>> entries = complete_profile(
    ...     [("noise", None), ("blur", None)], [], mri={"noise": 0.99}, flagged=[], fragile=[], zero_spread=[],
    ...     stopped_at="mri", eps=0.1, mri_cut=0.9, sensitivity_cut=0.01)
    >>> [(e.key, e.status, e.reason) for e in entries]
    [('noise', 'not_searched', 'robust_at_eps'), ('blur', 'not_searched', 'budget')]
    """
    by_key = {t.key: t for t in searched}
    flagged_set, fragile_set, zero_set = set(flagged), set(fragile), set(zero_spread)
    r_of = mri or {}
    out: list[ProfileEntry] = []
    for name, feature in targets:
        key = name if feature is None else f"{name}[{feature}]"
        found = by_key.get(key)
        if found is not None:
            status: Status = "crossed" if found.result.crossed else "not_crossed"
            out.append(ProfileEntry(name, feature, status, threshold=found))
            continue
        r = r_of.get(key)
        reason: Reason
        detail: str | None
        if key in zero_set:
            reason, detail = "zero_spread", "reference standard deviation 0"
        elif r is not None and r >= mri_cut:
            reason, detail = "robust_at_eps", f"MRI r = {r:.4g} ≥ mri_cut {mri_cut:g} at ε = {eps:g}"
        elif key in flagged_set and key not in fragile_set and stopped_at not in ("mri", "sensitivity"):
            reason = "robust_at_eps"
            detail = f"MRI r = {r:.4g} < mri_cut, but every output's sensitivity < {sensitivity_cut:g} at ε = {eps:g}"
        else:
            reason, detail = "budget", f"the budget ran out in stage '{stopped_at}'" if stopped_at else None
        out.append(ProfileEntry(name, feature, "not_searched", reason=reason, detail=detail))
    return tuple(out)
