"""Input tests on small baselines: every null is what a new draw from the baseline gives (seeded, fast).

The range test's null is the beta-binomial of a new draw's outside count (order statistics), the categories' a
two-sample chi-square, the PCA test's errors of held-out baseline rows: each holds its level whatever the baseline's
size, where a null taken from the baseline's own rows (in sample) pages on unchanged traffic.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom, poisson

from monitor.config import DriftSettings
from monitor.drift.categories import two_sample_p
from monitor.drift.multivariate import ReconstructionDrift
from monitor.drift.quality import outside_p_values
from monitor.drift.verdict import VerdictEngine
from monitor.rolling.reference import Reference, order_range, range_rank

WINDOW = 1000


def rejections(n_rows: int, alpha: float, draws: int = 4000) -> tuple[float, float]:
    """(new-draw null, in-sample null): the share of stationary windows whose outside count is rejected at ``alpha``
    by the range test's beta-binomial, and by a binomial at the reference's own share (floored at 0.002)."""
    rng = np.random.default_rng(n_rows)
    ref = np.sort(rng.random((draws, n_rows)), axis=1)  # uniform inputs: a new draw is outside with F's tails
    k = range_rank(n_rows)
    p_out = ref[:, k - 1] + 1.0 - ref[:, n_rows - k]
    outside = rng.binomial(WINDOW, p_out).astype(np.float64)
    new_draw = float(np.mean(outside_p_values(outside, WINDOW, n_rows) < alpha))
    in_sample = float(np.mean(binom.sf(outside - 1, WINDOW, max(2 * (k - 1) / n_rows, 0.002)) < alpha))
    return new_draw, in_sample


@pytest.mark.parametrize("n_rows", [150, 206, 500, 2000, 5000])
def test_the_range_null_holds_its_level_at_any_reference_size(n_rows: int) -> None:
    new_draw, in_sample = rejections(n_rows, 0.01)
    assert new_draw <= 0.01 * 1.5, new_draw
    if n_rows <= 500:
        assert in_sample > 0.05, in_sample  # the reference's own share: far above its level on small baselines


def test_the_range_is_the_k_th_smallest_and_largest_value() -> None:
    x = np.arange(3000.0).reshape(-1, 1)
    low, high = order_range(x)
    assert range_rank(3000) == 3 and (low[0], high[0]) == (2.0, 2997.0)
    assert range_rank(150) == 1 and order_range(x[:150])[1][0] == 149.0


@pytest.mark.parametrize("n_rows", [150, 400])
def test_the_category_null_holds_its_level_with_a_small_reference(n_rows: int) -> None:
    rng = np.random.default_rng(n_rows)
    shares = np.array([0.5, 0.3, 0.1, 0.06, 0.03, 0.01])
    p = [
        two_sample_p(rng.multinomial(n_rows, shares).astype(float), rng.multinomial(WINDOW, shares).astype(float))
        for _ in range(3000)
    ]
    assert np.mean(np.asarray(p) < 0.01) <= 0.015


def test_the_pca_null_is_out_of_sample_on_a_small_baseline() -> None:
    rng = np.random.default_rng(3)
    fired = 0
    for _ in range(40):
        z = rng.normal(size=(60, 1))
        ref = np.hstack([z, z + 0.5 * rng.normal(size=(60, 2)), rng.normal(size=(60, 2))])
        det = ReconstructionDrift(ref, alpha=0.01, min_distance=0.0)
        w = rng.normal(size=(WINDOW, 1))
        det.update(np.hstack([w, w + 0.5 * rng.normal(size=(WINDOW, 2)), rng.normal(size=(WINDOW, 2))]))
        fired += det.drift_detected
    assert fired <= 3, fired  # 40 baselines at 1 %: in-sample errors (smaller) made most windows look worse


def features(rng: np.random.Generator, n: int) -> np.ndarray:
    """Four inputs shaped like a tabular model's: normal, skewed, heavy-tailed, bounded."""
    return np.column_stack(
        [rng.normal(size=n), rng.exponential(size=n), rng.standard_t(4, size=n), rng.uniform(size=n)]
    )


@pytest.mark.parametrize("n_rows", [150, 206, 480])
def test_a_small_segment_baseline_does_not_page_on_stationary_traffic(n_rows: int) -> None:
    """The cases measured on a per-segment replay (a 206-row segment's range test, 480-row baselines' input-shift):
    stationary traffic against 12 small baselines, 16,000 events each, fires each input test no more than its stated
    rate allows (the rate holds over the baselines a segment could draw: one odd baseline may take its share)."""
    fired: dict[str, int] = {}
    rates: dict[str, float] = {}
    for seed in range(12):
        rng = np.random.default_rng(seed)
        ref = Reference.from_arrays(gamma=np.zeros(n_rows), flicker=np.zeros(n_rows), features=features(rng, n_rows))
        engine = VerdictEngine(ref, DriftSettings())
        for _ in range(16):
            engine.update(features=features(rng, 1000))
        for slot in engine.slots:
            if slot.role == "input":
                fired[slot.name] = fired.get(slot.name, 0) + slot.detector.state.alarms
                rates[slot.name] = slot.stated_rate
    assert set(fired) == {"features_ks", "inputs_range", "inputs_pca"}
    for name, alarms in fired.items():
        assert alarms <= poisson.ppf(0.999, rates[name] * 12 * 16_000 / 1e6), fired  # 1 at most; 0 for the range test
    assert fired["inputs_range"] == 0, fired
