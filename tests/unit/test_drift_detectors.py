"""Drift detectors: shared contracts (reset, seeds, batching, bad parameters) and per-detector behaviour."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats

from monitor.drift import (
    Cusum,
    CusumBounds,
    DriftDetector,
    FeatureDrift,
    KsDrift,
    PageHinkley,
    RateTest,
    WindowPlan,
    ks_two_sample,
)
from monitor.errors import ConfigError, DataError

REF = np.random.default_rng(99).exponential(size=5000)

FACTORIES: dict[str, Callable[[], DriftDetector]] = {
    "cusum": lambda: Cusum(REF),
    "page_hinkley": lambda: PageHinkley(threshold=20.0, tolerance=0.5),
    "ks": lambda: KsDrift(REF, plan=WindowPlan(window=300, every=50)),
    "rate": lambda: RateTest(1.0, 1.0, 5000, min_increase=0.1, plan=WindowPlan(window=300, every=50)),
    "features": lambda: FeatureDrift(REF.reshape(-1, 2), plan=WindowPlan(window=300, every=50)),
}


def stream(name: str, seed: int, n: int = 3000, shift_at: int = 1500) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if name == "features":
        x = rng.exponential(size=(n, 2))
        x[shift_at:, 1] += 1.0
        return x
    x = rng.exponential(size=n)
    x[shift_at:] *= 3.0
    return x


def fingerprint(det: DriftDetector) -> tuple[object, ...]:
    s = det.state
    return (s.drift_detected, round(s.statistic, 12), s.events, s.alarms, s.first_alarm_event, np.isnan(s.p_value))


@pytest.mark.parametrize("name", FACTORIES)
def test_detector_detects_the_shift_and_not_before(name: str) -> None:
    det = FACTORIES[name]()
    det.update(stream(name, 0)[:1500])
    assert not det.drift_detected and det.state.alarms == 0
    det.update(stream(name, 0)[1500:])
    assert det.drift_detected


@pytest.mark.parametrize("name", FACTORIES)
def test_detector_reset_restores_fresh_behaviour(name: str) -> None:
    used = FACTORIES[name]()
    used.update(stream(name, 1))
    used.reset()
    fresh = FACTORIES[name]()
    assert fingerprint(used) == fingerprint(fresh)
    assert fingerprint(used.update(stream(name, 2))) == fingerprint(fresh.update(stream(name, 2)))


@pytest.mark.parametrize("name", FACTORIES)
def test_detector_same_seed_same_output(name: str) -> None:
    a, b = FACTORIES[name](), FACTORIES[name]()
    assert fingerprint(a.update(stream(name, 5))) == fingerprint(b.update(stream(name, 5)))


@pytest.mark.parametrize("name", FACTORIES)
def test_detector_result_does_not_depend_on_batching(name: str) -> None:
    whole, pieces = FACTORIES[name](), FACTORIES[name]()
    x = stream(name, 3)
    whole.update(x)
    for chunk in np.array_split(x, 37):
        pieces.update(chunk)
    assert fingerprint(whole) == fingerprint(pieces)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: Cusum(REF, quantile=1.0), r"quantile must be in \(0, 1\); got 1.0"),
        (lambda: Cusum(REF, rate_ratio=1.0), "rate_ratio must be > 1"),
        (lambda: Cusum(REF, threshold=0.0), "threshold must be > 0; got 0.0"),
        (lambda: Cusum(REF, bounds=CusumBounds(min_rate=0.7)), r"min_rate must be in \(0, 0.5\)"),
        (lambda: Cusum(REF, bounds=CusumBounds(cap_ratio=0.5)), "cap_ratio must be >= 1"),
        (lambda: Cusum(REF, bounds=CusumBounds(clear_ratio=1.5)), r"clear_ratio must be in \[0, 1\]"),
        (lambda: PageHinkley(clear_ratio=-0.5), r"clear_ratio must be in \[0, 1\]"),
        (lambda: PageHinkley(threshold=-1.0), "threshold must be > 0; got -1.0"),
        (lambda: PageHinkley(tolerance=-0.1), "tolerance must be >= 0"),
        (lambda: PageHinkley(min_events=0), "min_events must be >= 1"),
        (lambda: KsDrift(REF, plan=WindowPlan(window=5)), "window must be >= 10 events; got 5"),
        (lambda: KsDrift(REF, plan=WindowPlan(every=0)), "every must be >= 1"),
        (
            lambda: KsDrift(REF, plan=WindowPlan(window=100, min_events=200)),
            "min_events must be between 10 and window=100",
        ),
        (lambda: KsDrift(REF, alpha=0.0), r"alpha must be in \(0, 1\)"),
        (lambda: KsDrift(REF, min_distance=1.0), r"min_distance must be in \[0, 1\)"),
        (lambda: KsDrift(REF, alternative="less"), "alternative must be 'greater' or 'two-sided'"),  # type: ignore[arg-type]
        (lambda: RateTest(float("nan"), 0.0, 10), "reference_mean must be finite"),
        (lambda: RateTest(0.0, -1.0, 10), "reference_var must be >= 0"),
        (lambda: RateTest(0.0, 0.0, 0), "reference_count must be >= 1"),
        (lambda: RateTest(0.0, 0.0, 10, min_increase=-0.1), "min_increase must be >= 0"),
        (lambda: FeatureDrift(REF.reshape(-1, 2), alpha=2.0), r"alpha must be in \(0, 1\)"),
    ],
)
def test_detector_rejects_bad_parameters(make: Callable[[], object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        make()


def test_detectors_reject_unusable_references() -> None:
    with pytest.raises(DataError, match="cusum reference needs >= 10 finite values; got 3"):
        Cusum([0.0, 1.0, np.nan, 2.0])
    with pytest.raises(DataError, match=r"2-D array with >= 10 rows"):
        FeatureDrift(np.zeros(50))
    with pytest.raises(DataError, match="3 feature names given for 2 reference features"):
        FeatureDrift(np.zeros((50, 2)), feature_names=["a", "b", "c"])


@pytest.mark.parametrize("seed", range(5))
def test_ks_two_sample_matches_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = np.round(rng.exponential(size=700), 1)  # rounding makes ties, as γ = 0 does
    ref = np.sort(np.round(rng.exponential(size=3000) * 1.1, 1))
    d, p = ks_two_sample(x, ref, "greater")
    want = stats.ks_2samp(x, ref, alternative="less", method="asymp")
    assert d == pytest.approx(want.statistic) and p == pytest.approx(want.pvalue, rel=0.2, abs=1e-12)
    d2, p2 = ks_two_sample(x, ref, "two-sided")
    want2 = stats.ks_2samp(x, ref, method="asymp")
    assert d2 == pytest.approx(want2.statistic) and p2 == pytest.approx(want2.pvalue, rel=0.1, abs=1e-12)


@pytest.mark.parametrize(
    ("x", "ref"),
    [
        ([5.0], [1.0]),  # one value each, the sample above
        ([1.0], [5.0, 6.0]),  # the sample below every reference value
        ([0.0, 0.0, 0.0], [0.0, 0.0]),  # nothing but ties
        ([2.0, 2.0, 3.0, 9.0], [1.0, 2.0, 2.0, 2.0, 3.0, 4.0]),  # ties across the two
    ],
)
def test_ks_two_sample_statistic_is_scipy_s_at_the_edges(x: list[float], ref: list[float]) -> None:
    """The statistic is taken at each sample's own values only (G − F steps up at the reference's, F − G at the
    sample's): the same value as scipy's on every observed value, ties and disjoint ranges included."""
    a, b = np.array(x), np.sort(np.array(ref))
    assert ks_two_sample(a, b, "greater")[0] == pytest.approx(stats.ks_2samp(a, b, alternative="less").statistic)
    assert ks_two_sample(a, b, "two-sided")[0] == pytest.approx(stats.ks_2samp(a, b).statistic)


def test_ks_is_silent_on_identical_streams_full_of_zeros() -> None:
    rng = np.random.default_rng(4)

    def gamma(n: int) -> np.ndarray:
        return np.where(rng.random(n) < 0.8, 0.0, rng.exponential(size=n))

    ks = KsDrift(gamma(5000), plan=WindowPlan(window=500, every=50))
    ks.update(gamma(20_000))
    assert ks.state.alarms == 0


def test_ks_ignores_a_downward_shift_by_default() -> None:
    ks = KsDrift(REF, plan=WindowPlan(window=300, every=50))
    assert not ks.update(np.random.default_rng(0).exponential(size=1000) * 0.3).drift_detected
    two = KsDrift(REF, alternative="two-sided", plan=WindowPlan(window=300, every=50))
    assert two.update(np.random.default_rng(0).exponential(size=1000) * 0.3).drift_detected


def test_ks_needs_the_effect_size_as_well_as_the_p_value() -> None:
    rng = np.random.default_rng(2)
    ks = KsDrift(REF, alpha=0.05, min_distance=0.1, plan=WindowPlan(window=5000, every=5000))
    ks.update(rng.exponential(size=5000) * 1.15)
    assert ks.p_value < 1e-3 and ks.statistic < 0.1 and not ks.drift_detected


def test_cusum_handles_a_reference_that_is_mostly_zeros() -> None:
    ref = np.zeros(5000)
    ref[:250] = 0.1  # 5 % non-zero: the q90 cutoff is 0, the null rate is the non-zero share
    c = Cusum(ref)
    assert c.cutoff == 0.0 and c.null_rate == pytest.approx(0.05)
    rng = np.random.default_rng(0)
    assert c.update(np.where(rng.random(20_000) < 0.05, 0.2, 0.0)).state.alarms == 0
    assert c.update(np.where(rng.random(500) < 0.2, 0.2, 0.0)).drift_detected


def test_cusum_with_an_all_zero_reference_uses_the_rate_floor() -> None:
    c = Cusum(np.zeros(100), bounds=CusumBounds(min_rate=0.01))
    assert c.null_rate == 0.01
    assert not c.update(np.zeros(10_000)).drift_detected
    assert c.update(np.full(30, 0.5)).drift_detected


def test_cusum_alarm_clears_within_bounded_events_after_the_shift_ends() -> None:
    c = Cusum(REF)
    rng = np.random.default_rng(1)
    c.update(rng.exponential(size=10_000) * 5)  # a long harmful episode
    assert c.drift_detected and 1.9 * c.threshold < c.statistic <= 2 * c.threshold  # capped at 2h
    bound = int(np.ceil(1.5 * c.threshold / -np.log((1 - c.alt_rate) / (1 - c.design_rate))))
    c.update(np.zeros(bound - 10))
    assert c.drift_detected  # hysteresis: still on below h, until S < h / 2
    c.update(np.zeros(11))
    assert not c.drift_detected and c.state.alarms == 1


def test_page_hinkley_waits_for_the_burn_in() -> None:
    ph = PageHinkley(threshold=1.0, tolerance=0.0, min_events=50)
    ph.update(np.r_[np.zeros(10), np.full(20, 10.0)])
    assert not ph.drift_detected
    ph.update(np.full(30, 10.0))
    assert ph.drift_detected and ph.state.first_alarm_event == 50


def test_page_hinkley_skips_infinite_values_and_still_alarms_after_them() -> None:
    ph = PageHinkley(threshold=1.0, tolerance=0.0, min_events=5)
    ph.update([0.0, 0.0, np.inf, 0.0, -np.inf, np.nan, 0.0, 0.0])
    assert not ph.drift_detected and ph.state.events == 5 and ph.statistic == 0.0
    ph.update(np.full(5, 10.0))
    assert ph.drift_detected


def test_rate_test_needs_the_minimum_increase() -> None:
    rate = RateTest(0.010, 0.001, 1_000_000, min_increase=0.01, plan=WindowPlan(window=100_000, every=100_000))
    rate.update(np.full(100_000, 0.012))
    assert rate.p_value < 1e-9 and not rate.drift_detected
    rate.update(np.full(100_000, 0.025))
    assert rate.drift_detected and rate.window_mean == pytest.approx(0.025)


def test_rate_test_is_certain_when_both_sides_are_constant() -> None:
    rate = RateTest(0.0, 0.0, 100, min_increase=0.0, plan=WindowPlan(window=10, every=10))
    assert not rate.update(np.zeros(10)).drift_detected
    assert rate.update(np.full(10, 0.5)).drift_detected and rate.p_value == 0.0


def test_feature_drift_ranks_moved_features_and_corrects_for_many_tests() -> None:
    rng = np.random.default_rng(0)
    ref = rng.normal(size=(2000, 20))
    fd = FeatureDrift(ref, plan=WindowPlan(window=1000, every=1000))
    x = rng.normal(size=(1000, 20))
    x[:, 7] += 0.8
    x[:, 3] += 0.3
    fd.update(x)
    assert [m.index for m in fd.moved] == [7, 3]
    assert fd.moved[0].statistic > fd.moved[1].statistic
    raw = stats.ks_2samp(x[:, 3], ref[:, 3], method="asymp").pvalue
    # Benjamini–Hochberg (was Bonferroni, p·20): feature 3 has the 2nd smallest of 20 p-values, so q = p·20/2
    assert fd.p_values[3] == pytest.approx(min(1.0, 20 * raw / 2), rel=0.2)


def test_feature_drift_alarm_holds_while_the_distance_stays_above_half_the_floor() -> None:
    rng = np.random.default_rng(4)
    ref = rng.normal(size=(5000, 1))

    def window(shift: float) -> np.ndarray:
        return rng.normal(size=(1000, 1)) + shift

    strict = FeatureDrift(ref, min_distance=0.1, clear_ratio=1.0, plan=WindowPlan(window=1000, every=1000))
    held = FeatureDrift(ref, min_distance=0.1, plan=WindowPlan(window=1000, every=1000))
    for fd in (strict, held):
        assert fd.update(window(0.5)).drift_detected  # D ≈ 0.2: moved
    # the shift shrinks to D ≈ 0.07, below the 0.1 floor but still significant: only the hysteresis keeps it
    small = window(0.15)
    d = stats.ks_2samp(small[:, 0], ref[:, 0]).statistic
    assert 0.05 < d < 0.1, d
    assert not strict.update(small).drift_detected
    assert held.update(small).drift_detected and held.moved[0].statistic == pytest.approx(d, abs=1e-9)
    assert not held.update(window(0.0)).drift_detected  # back to the reference: clears
    assert not held.update(small).drift_detected  # and a D below the floor does not turn it on again


def test_feature_drift_rejects_rows_of_the_wrong_width() -> None:
    fd = FeatureDrift(np.zeros((20, 3)))
    with pytest.raises(DataError, match=r"expects rows of 3 features; got shape \(2, 4\)"):
        fd.update(np.zeros((2, 4)))


def test_feature_drift_is_silent_on_discrete_features() -> None:
    rng = np.random.default_rng(3)
    ref = rng.integers(0, 4, size=(2000, 5)).astype(float)
    fd = FeatureDrift(ref, plan=WindowPlan(window=500, every=50))
    fd.update(rng.integers(0, 4, size=(20_000, 5)).astype(float))
    assert fd.state.alarms == 0
