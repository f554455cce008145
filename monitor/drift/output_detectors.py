"""Stage 5b: the output-side detectors as registered slots (:mod:`monitor.drift.slots`).

γ and flicker each get a CUSUM (a rise in the rate of high values) and a window test (KS on γ, a rate test on
flicker): role ``fragility`` — the predictions near the inputs grew fragile, which alone is not evidence that
performance fell (a model can be fragile and right). A classifier's confidence and margin get a CUSUM on
1 − max-probability and 1 − margin (a *fall*): role ``output``, harm evidence. Confidence gets two more, each tuned to
a fall the first is slow on: ``confidence_tail_cusum`` counts the reference's median of 1 − max-probability against
a 1.3× rise (a gradual fall of the whole distribution: chosen on river's RBF drift stream, docs/BENCHMARKS.md), and
``confidence_jump_cusum`` the 90th percentile against a 4× rise (a sudden fall: each event beyond it adds ~3× what it
adds to ``confidence_cusum``, so it crosses after fewer events). Every detector takes an even share of the stated
false-alarm rate; a window test's level per test is capped by its share (one test every ``drift.every`` events).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.alerts import Evidence, percent
from monitor.config import DriftSettings
from monitor.drift.base import ReferenceLike
from monitor.drift.calibrate import MIN_REFERENCE
from monitor.drift.cusum import Cusum
from monitor.drift.ks import KsDrift
from monitor.drift.rate import RateTest
from monitor.drift.slots import DetectorSpec, Recent, SlotContext, finite_mean, per_window_test


def confidence_fall_reference(confidence: ArrayLike) -> NDArray[np.float64] | None:
    """The reference sample the confidence detector watches, 1 − max-probability (finite values), or None when
    there are too few for a calibration (a regressor: its max-probability is NaN). The margin detector watches
    1 − margin the same way (this function on the margin sample).

    >>> confidence_fall_reference([1.0, 0.9, float("nan")] * 100)[:2].tolist()
    [0.0, 0.09999999999999998]
    >>> confidence_fall_reference([float("nan")] * 500) is None
    True
    """
    c = np.asarray(confidence, dtype=np.float64).reshape(-1)
    c = c[np.isfinite(c)]
    return None if c.size < MIN_REFERENCE else 1.0 - c


def binary(reference: ReferenceLike) -> bool:
    """True when the reference's margins are 2·max-probability − 1 throughout (a binary classifier)."""
    conf = np.asarray(getattr(reference, "confidence_sample", ()), dtype=np.float64)
    margin = np.asarray(getattr(reference, "margin_sample", ()), dtype=np.float64)
    if conf.shape != margin.shape or conf.size == 0:
        return False
    return bool(np.allclose(margin, 2.0 * conf - 1.0, rtol=0.0, atol=1e-6, equal_nan=True))


def _fall(values: ArrayLike) -> NDArray[np.float64]:
    return 1.0 - np.asarray(values, dtype=np.float64)


#: ``confidence_tail_cusum``: the reference quantile of 1 − max-probability it counts above, and the rise it is tuned to
TAIL_QUANTILE, TAIL_RATE_RATIO = 0.5, 1.3
#: ``confidence_jump_cusum``: the same for a sudden fall
JUMP_QUANTILE, JUMP_RATE_RATIO = 0.9, 4.0


def _tuned_cusum(
    quantile: float | None = None, rate_ratio: float | None = None
) -> Callable[[ArrayLike, SlotContext], Cusum]:
    """A slot's CUSUM at ``quantile`` and ``rate_ratio`` (None: ``drift.cusum_quantile``/``drift.cusum_rate_ratio``),
    its threshold calibrated to its share of the rate, or pinned by ``drift.cusum_threshold``."""

    def build(sample: ArrayLike, ctx: SlotContext) -> Cusum:
        s = ctx.settings
        return Cusum(
            sample,
            quantile=s.cusum_quantile if quantile is None else quantile,
            rate_ratio=s.cusum_rate_ratio if rate_ratio is None else rate_ratio,
            threshold=s.cusum_threshold,
            false_alarms_per_million=ctx.rate,
            name=ctx.name,
        )

    return build


_cusum = _tuned_cusum()


def _cusum_rate(ctx: SlotContext) -> float:
    return ctx.rate


#: a CUSUM's clause in plain words, from the share of the recent events above its cutoff and the reference's share
_CUSUM_PLAIN: dict[str, Callable[[str, str], str]] = {
    "gamma": lambda share, null: f"predictions more fragile: {share} of events' γ in the reference's top {null}",
    "flicker": lambda share, null: (
        f"predictions flicker more: {share} of events' flicker in the reference's top {null}"
    ),
    "confidence": lambda share, null: f"confidence fell: {share} of answers in the reference's least sure {null}",
    "margin": lambda share, null: f"margins narrowed: {share} of answers in the reference's narrowest {null}",
}


def _cusum_evidence(signal: str, label: str, fall: bool = False) -> Callable[[Cusum, Recent], Iterable[Evidence]]:
    """A CUSUM's clause: the share of the recent ``signal`` (1 − it where ``fall``) above its cutoff."""

    def evidence(det: Cusum, recent: Recent) -> Iterable[Evidence]:
        values = recent.values(signal)
        values = 1.0 - values if fall else values
        q = f"{det.quantile * 100:g}th percentile"
        share = finite_mean((values > det.cutoff).astype(np.float64))
        measure = f"share of {label} above the reference's {q}, last {values.size} events"
        plain = _CUSUM_PLAIN[signal](percent(share), percent(det.null_rate))
        yield Evidence(det.name, det.statistic, det.threshold, share, det.null_rate, measure, "CUSUM", plain)

    return evidence


def _confidence(reference: ReferenceLike, s: DriftSettings) -> NDArray[np.float64] | None:
    """1 − max-probability of the reference: none for a regressor or a reference without a confidence sample (one
    written before confidence was kept)."""
    if not s.confidence_detector:
        return None
    return confidence_fall_reference(getattr(reference, "confidence_sample", ()))


def _margin(reference: ReferenceLike, s: DriftSettings) -> NDArray[np.float64] | None:
    """1 − margin of the reference: none for a regressor, a reference written before margin was kept, or a binary
    classifier with the confidence detector on (its 1 − margin is 2·(1 − max-probability): the same exceedances as
    the confidence CUSUM, which would spend a share of the false-alarm budget twice)."""
    narrow = confidence_fall_reference(getattr(reference, "margin_sample", ())) if s.margin_detector else None
    if narrow is not None and _confidence(reference, s) is not None and binary(reference):
        return None
    return narrow


def _gamma_ks(sample: NDArray[np.float64], ctx: SlotContext) -> KsDrift:
    s = ctx.settings
    return KsDrift(sample, plan=ctx.plan, alpha=ctx.alpha(s.ks_alpha), min_distance=s.ks_min_distance, name=ctx.name)


def _gamma_ks_evidence(det: KsDrift, recent: Recent) -> Iterable[Evidence]:
    ks, g = det.state, recent.values("gamma")
    measure = f"γ mean (KS distance vs its floor, p = {ks.p_value:.2g}), last {g.size} events"
    mean, ref = finite_mean(g), recent.baseline.gamma_mean
    plain = f"predictions more fragile: γ's distribution moved (mean {mean:.3g}, reference {ref:.3g})"
    yield Evidence(ks.name, ks.statistic, ks.threshold, mean, ref, measure, "KS distance", plain)


def _flicker_rate(ref: ReferenceLike, ctx: SlotContext) -> RateTest:
    s = ctx.settings
    return RateTest(
        ref.flicker_mean,
        ref.flicker_var,
        ref.flicker_count,
        plan=ctx.plan,
        alpha=ctx.alpha(s.rate_alpha),
        min_increase=s.rate_min_increase,
        name=ctx.name,
    )


def _flicker_rate_evidence(rate: RateTest, recent: Recent) -> Iterable[Evidence]:
    f = recent.values("flicker")
    measure = (
        f"flicker mean (z test, p = {rate.p_value:.2g} < {rate.alpha:g}, rise >= {rate.min_increase:g}), "
        f"last {f.size} events"
    )
    mean, ref = finite_mean(f), recent.baseline.flicker_mean
    plain = f"predictions flicker more: mean flicker {mean:.3g}, reference {ref:.3g}"
    yield Evidence(rate.name, rate.statistic, float("nan"), mean, ref, measure, "z", plain)


def _whole(reference: ReferenceLike, s: DriftSettings) -> Any:
    return reference


GAMMA_CUSUM: DetectorSpec[NDArray[np.float64], Cusum] = DetectorSpec(
    name="gamma_cusum",
    role="fragility",
    signal="gamma",
    watches=lambda r, s: r.gamma_sample,
    build=_cusum,
    shares_rate=True,
    stated_rate=_cusum_rate,
    evidence=_cusum_evidence("gamma", "γ"),
)
GAMMA_KS: DetectorSpec[NDArray[np.float64], KsDrift] = DetectorSpec(
    name="gamma_ks",
    role="fragility",
    signal="gamma",
    watches=lambda r, s: r.gamma_sample,
    build=_gamma_ks,
    stated_rate=per_window_test(lambda s: s.ks_alpha),
    evidence=_gamma_ks_evidence,
    clause_rank=1,
)
FLICKER_CUSUM: DetectorSpec[NDArray[np.float64], Cusum] = DetectorSpec(
    name="flicker_cusum",
    role="fragility",
    signal="flicker",
    watches=lambda r, s: r.flicker_sample,
    build=_cusum,
    shares_rate=True,
    stated_rate=_cusum_rate,
    evidence=_cusum_evidence("flicker", "flicker"),
)
FLICKER_RATE: DetectorSpec[ReferenceLike, RateTest] = DetectorSpec(
    name="flicker_rate",
    role="fragility",
    signal="flicker",
    watches=_whole,
    build=_flicker_rate,
    stated_rate=per_window_test(lambda s: s.rate_alpha),
    evidence=_flicker_rate_evidence,
    clause_rank=1,
)


def _fall_cusum(
    name: str,
    signal: Literal["confidence", "margin"],
    build: Callable[[ArrayLike, SlotContext], Cusum] = _cusum,
) -> DetectorSpec[NDArray[np.float64], Cusum]:
    """A CUSUM slot on 1 − max-probability (``confidence``) or 1 − margin (``margin``): harm evidence, at its share of
    the rate."""
    confidence = signal == "confidence"
    return DetectorSpec(
        name=name,
        role="output",
        signal=signal,
        transform=_fall,
        watches=_confidence if confidence else _margin,
        build=build,
        shares_rate=True,
        stated_rate=_cusum_rate,
        evidence=_cusum_evidence(signal, "1 − max-probability" if confidence else "1 − margin", fall=True),
    )


CONFIDENCE_CUSUM = _fall_cusum("confidence_cusum", "confidence")
CONFIDENCE_TAIL_CUSUM = _fall_cusum("confidence_tail_cusum", "confidence", _tuned_cusum(TAIL_QUANTILE, TAIL_RATE_RATIO))
CONFIDENCE_JUMP_CUSUM = _fall_cusum("confidence_jump_cusum", "confidence", _tuned_cusum(JUMP_QUANTILE, JUMP_RATE_RATIO))
MARGIN_CUSUM = _fall_cusum("margin_cusum", "margin")
