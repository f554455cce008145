"""bench/verdict.py: the met / not met / undecided rule the benchmarks judge their ratio targets by."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from verdict import median_ci, verdict  # noqa: E402  (bench/ is not a package)


def test_median_ci_brackets_the_median_and_is_reproducible() -> None:
    ratios = np.random.default_rng(3).normal(0.86, 0.04, size=15)
    lo, hi = median_ci(ratios)
    assert lo <= float(np.median(ratios)) <= hi
    assert median_ci(ratios) == (lo, hi)  # seeded: the same pairs give the same interval
    assert median_ci(ratios, seed=1) != (lo, hi)


def test_median_ci_narrows_with_more_pairs() -> None:
    rng = np.random.default_rng(0)
    few, many = rng.normal(0.9, 0.05, size=6), rng.normal(0.9, 0.05, size=200)
    (lo_few, hi_few), (lo_many, hi_many) = median_ci(few), median_ci(many)
    assert hi_many - lo_many < (hi_few - lo_few) / 2


def test_a_clear_margin_is_met_or_not_met() -> None:
    above = verdict([0.90, 0.92, 0.95, 0.91, 0.93, 0.94, 0.90, 0.96], 0.85)
    assert above.word == "met"
    assert above.at_target == 8
    assert above.low >= 0.85
    below = verdict([0.70, 0.72, 0.69, 0.71, 0.74, 0.70, 0.73, 0.68], 0.85)
    assert below.word == "not met"
    assert below.at_target == 0
    assert below.high < 0.85


def test_pairs_straddling_the_target_are_undecided_whatever_their_median() -> None:
    # median 0.865, above the target, but the pairs spread across it: one run's median could fall either side
    straddle = verdict([0.78, 0.95, 0.84, 0.89, 0.80, 0.93, 0.86, 0.87], 0.85)
    assert straddle.median > 0.85
    assert straddle.low < 0.85 <= straddle.high
    assert straddle.word == "undecided"
    assert str(straddle) == (f"0.86 [{straddle.low:.2f}, {straddle.high:.2f}], 5/8 ≥ 0.85: undecided")


def test_the_interval_end_on_the_target_counts_as_met() -> None:
    assert verdict([0.85, 0.85, 0.85], 0.85).word == "met"


@pytest.mark.parametrize("values", [[0.9], [], [0.9, float("nan")], [0.9, float("inf")]])
def test_median_ci_refuses_too_few_or_non_finite_values(values: list[float]) -> None:
    with pytest.raises(ValueError, match="at least 2 finite values"):
        median_ci(values)


def test_median_ci_refuses_a_level_outside_0_1() -> None:
    with pytest.raises(ValueError, match="level must be in"):
        median_ci([0.9, 0.8], level=1.0)
