"""Stage 5b: the input-side detectors as registered slots (:mod:`monitor.drift.slots`).

Per-input KS on the float features, the data-quality range test (inputs outside the reference's 0.1–99.9
percentiles), the held inputs' category frequencies and the PCA reconstruction error (how the inputs go together).
Their firing alone makes a verdict ``input-shift``, never ``harmful-shift``. An input's alert clause starts with the
input's name and names its test first; no clause holds ``; `` (the separator between clauses).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from monitor.alerts import Evidence
from monitor.config import DriftSettings
from monitor.drift.base import FeatureShift, ReferenceLike
from monitor.drift.categories import CategoryDrift
from monitor.drift.features import FeatureDrift
from monitor.drift.multivariate import MAX_INPUTS, ReconstructionDrift
from monitor.drift.quality import RangeDrift
from monitor.drift.slots import (
    DetectorSpec,
    InputValues,
    Recent,
    SlotContext,
    finite_mean,
    moved_evidence,
    per_window_test,
)


def _sample(reference: ReferenceLike) -> NDArray[np.float64]:
    return np.asarray(reference.feature_sample, dtype=np.float64)


# -- per-input KS --------------------------------------------------------------------------------------------------


def _features(reference: ReferenceLike, s: DriftSettings) -> NDArray[np.float64] | None:
    sample = _sample(reference)
    return sample if sample.ndim == 2 and sample.shape[1] > 0 else None


def _features_ks(sample: NDArray[np.float64], ctx: SlotContext) -> FeatureDrift:
    s = ctx.settings
    return FeatureDrift(
        sample,
        feature_names=ctx.reference.feature_names,
        plan=ctx.plan,
        alpha=ctx.alpha(s.feature_alpha),
        min_distance=s.feature_min_distance,
        name=ctx.name,
    )


def _features_evidence(fd: FeatureDrift, recent: Recent) -> Iterable[Evidence]:
    x = recent.rows()

    def window(m: FeatureShift) -> float:
        col = x[:, m.index] if x.ndim == 2 and x.shape[0] else np.zeros(0)
        return finite_mean(col[np.isfinite(col)])

    return moved_evidence(
        fd,
        fd.min_distance,
        "KS distance",
        lambda m: f"KS distance vs its floor, adjusted p = {m.p_value:.2g}, the input's mean",
        window,
        lambda m: float(recent.baseline.feature_mean[m.index]),
    )


FEATURES_KS: DetectorSpec[NDArray[np.float64], FeatureDrift] = DetectorSpec(
    name="features_ks",
    role="input",
    signal="features",
    watches=_features,
    build=_features_ks,
    stated_rate=per_window_test(lambda s: s.feature_alpha),
    evidence=_features_evidence,
    moved=lambda d: d.moved,
    names_in="top_features",
    gauges=lambda d: (InputValues("drift", d.feature_names, d.statistics),),
)

# -- the range test ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Ranges:
    low: NDArray[np.float64]
    high: NDArray[np.float64]
    rows: int
    names: tuple[str, ...] | None


def _ranges(reference: ReferenceLike, s: DriftSettings) -> _Ranges | None:
    """The reference's per-input range: none for a reference without ranges (or without a feature sample)."""
    sample = _sample(reference)
    n = sample.shape[1] if sample.ndim == 2 else 0
    low = np.asarray(getattr(reference, "feature_low", ()), dtype=np.float64)
    high = np.asarray(getattr(reference, "feature_high", ()), dtype=np.float64)
    rows = int(getattr(reference, "n_events", sample.shape[0] if sample.ndim == 2 else 0))
    if n == 0 or rows < 1 or not low.size == high.size == n:
        return None
    return _Ranges(low, high, rows, reference.feature_names)


def _range(r: _Ranges, ctx: SlotContext) -> RangeDrift:
    n = r.low.size
    names = tuple(f"f{j}" for j in range(n)) if r.names is None else tuple(map(str, r.names))  # as FeatureDrift's
    s = ctx.settings
    return RangeDrift(
        r.low,
        r.high,
        r.rows,
        feature_names=names,
        plan=ctx.plan,
        alpha=ctx.alpha(s.feature_alpha),
        min_share=s.range_min_share,
        name=ctx.name,
    )


def _range_evidence(rd: RangeDrift, recent: Recent) -> Iterable[Evidence]:
    def measure(m: FeatureShift) -> str:
        lo, hi = float(rd.low[m.index]), float(rd.high[m.index])
        return f"adjusted p = {m.p_value:.2g}, share outside the reference's 0.1–99.9 percentiles [{lo:.3g}, {hi:.3g}]"

    return moved_evidence(
        rd, rd.min_share, "share out of range", measure, lambda m: m.statistic, lambda m: float(rd.expected[m.index])
    )


INPUTS_RANGE: DetectorSpec[_Ranges, RangeDrift] = DetectorSpec(
    name="inputs_range",
    role="input",
    signal="features",
    watches=_ranges,
    build=_range,
    stated_rate=per_window_test(lambda s: s.feature_alpha),
    evidence=_range_evidence,
    moved=lambda d: d.moved,
    names_in="out_of_range",
    gauges=lambda d: (InputValues("out_of_range", d.feature_names, d.shares),),
)

# -- held inputs' categories ---------------------------------------------------------------------------------------


def _tables(reference: ReferenceLike, s: DriftSettings) -> Mapping[str, Mapping[str, int]] | None:
    """The held inputs' count tables: none when the model holds nothing."""
    return getattr(reference, "held_tables", None) or None


def _held(tables: Mapping[str, Mapping[str, int]], ctx: SlotContext) -> CategoryDrift:
    s = ctx.settings
    # a window test every `every` events, like γ's KS
    return CategoryDrift(
        tables, plan=ctx.plan, alpha=ctx.alpha(s.ks_alpha), min_distance=s.feature_min_distance, name=ctx.name
    )


def _held_evidence(hd: CategoryDrift, recent: Recent) -> Iterable[Evidence]:
    unseen = hd.unseen_shares
    return moved_evidence(
        hd,
        hd.min_distance,
        "TV distance",
        lambda m: (
            f"category frequencies by total variation distance, adjusted p = {m.p_value:.2g}, share of "
            "categories outside the reference's table"
        ),
        lambda m: float(unseen[m.index]),
        lambda m: float(hd.other_shares[m.index]),
    )


def _held_gauges(hd: CategoryDrift) -> Iterable[InputValues]:
    """Each held input's category distance, and its unseen share as "out of range"."""
    return (
        InputValues("drift", hd.feature_names, hd.statistics),
        InputValues("out_of_range", hd.feature_names, hd.unseen_shares),
    )


HELD_INPUTS: DetectorSpec[Mapping[str, Mapping[str, int]], CategoryDrift] = DetectorSpec(
    name="held_inputs",
    role="input",
    signal="held",
    watches=_tables,
    build=_held,
    stated_rate=per_window_test(lambda s: s.ks_alpha),
    evidence=_held_evidence,
    moved=lambda d: d.moved,
    names_in="categories",
    gauges=_held_gauges,
    clause_rank=1,
)

# -- how the inputs go together ------------------------------------------------------------------------------------


def _together(reference: ReferenceLike, s: DriftSettings) -> NDArray[np.float64] | None:
    """The feature sample, when the multivariate test is on and there are 2..MAX_INPUTS inputs and >= 10 rows."""
    sample = _sample(reference)
    n = sample.shape[1] if sample.ndim == 2 else 0
    ok = s.multivariate_detector and sample.ndim == 2 and sample.shape[0] >= 10 and 2 <= n <= MAX_INPUTS
    return sample if ok else None


def _pca(sample: NDArray[np.float64], ctx: SlotContext) -> ReconstructionDrift:
    s = ctx.settings
    return ReconstructionDrift(
        sample, plan=ctx.plan, alpha=ctx.alpha(s.ks_alpha), min_distance=s.ks_min_distance, name=ctx.name
    )


def _pca_evidence(pca: ReconstructionDrift, recent: Recent) -> Iterable[Evidence]:
    st = pca.state
    yield Evidence(
        st.name,
        st.statistic,
        st.threshold,
        pca.window_mean_error,
        pca.reference_mean_error,
        f"how the inputs go together: KS distance vs its floor, p = {st.p_value:.2g}, mean PCA "
        f"reconstruction error ({pca.components} of {pca.mean.size} components)",
        "KS distance",
        f"inputs go together differently (PCA reconstruction error {pca.window_mean_error:.3g}, reference "
        f"{pca.reference_mean_error:.3g})",
    )


INPUTS_PCA: DetectorSpec[NDArray[np.float64], ReconstructionDrift] = DetectorSpec(
    name="inputs_pca",
    role="input",
    signal="features",
    watches=_together,
    build=_pca,
    stated_rate=per_window_test(lambda s: s.ks_alpha),
    evidence=_pca_evidence,
)
