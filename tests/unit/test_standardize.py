"""Standardizer (stage 3): per-feature location/scale, constant features, round trips and persisted form."""

from __future__ import annotations

import re

import numpy as np
import pytest

from monitor.errors import DataError
from monitor.model.standardize import Standardizer

REFERENCE = np.random.default_rng(0).normal(loc=[1.0, -5.0, 20.0], scale=[0.5, 2.0, 10.0], size=(500, 3))


def test_standardizer_fit_uses_the_reference_mean_and_std() -> None:
    std = Standardizer.fit(REFERENCE)
    np.testing.assert_allclose(std.mean, REFERENCE.mean(axis=0))
    np.testing.assert_allclose(std.scale, REFERENCE.std(axis=0))


def test_standardizer_makes_the_reference_zero_mean_unit_variance() -> None:
    z = Standardizer.fit(REFERENCE).to_standardized(REFERENCE)
    np.testing.assert_allclose(z.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(z.std(axis=0), 1.0, rtol=1e-12)


def test_standardizer_gives_a_constant_feature_scale_one() -> None:
    ref = np.column_stack([REFERENCE[:, 0], np.full(500, 7.0)])
    std = Standardizer.fit(ref)
    assert std.scale[1] == 1.0 and std.mean[1] == 7.0


def test_standardizer_round_trips_raw_and_standardized_units() -> None:
    std = Standardizer.fit(REFERENCE)
    x = np.random.default_rng(1).normal(size=(4, 3))
    np.testing.assert_allclose(std.to_raw(std.to_standardized(x)), x, rtol=1e-12, atol=1e-12)


def test_standardizer_identity_leaves_rows_unchanged() -> None:
    std = Standardizer.identity(3)
    assert std.n_features == 3
    np.testing.assert_array_equal(std.to_standardized(REFERENCE), REFERENCE)


def test_standardizer_round_trips_through_its_dict() -> None:
    std = Standardizer.fit(REFERENCE)
    back = Standardizer.from_dict(std.to_dict())
    np.testing.assert_array_equal(back.mean, std.mean)
    np.testing.assert_array_equal(back.scale, std.scale)


@pytest.mark.parametrize("reference", [np.zeros((0, 3)), np.zeros(3), np.zeros((2, 3, 1))])
def test_standardizer_fit_rejects_reference_that_is_not_a_non_empty_table(reference: np.ndarray) -> None:
    shape = re.escape(str(reference.shape))
    with pytest.raises(DataError, match=f"reference data must be a non-empty 2-D array .*got shape {shape}"):
        Standardizer.fit(reference)


def test_standardizer_fit_rejects_non_finite_reference_rows() -> None:
    ref = REFERENCE.copy()
    ref[3, 1], ref[7, 0], ref[7, 2] = np.nan, np.inf, np.nan
    with pytest.raises(DataError, match=r"reference data has 2 row\(s\) with NaN or infinite values; clean them first"):
        Standardizer.fit(ref)


@pytest.mark.parametrize(
    "data",
    [
        {"mean": [0.0, 1.0], "scale": [1.0]},
        {"mean": [0.0], "scale": [0.0]},
        {"mean": [0.0], "scale": [-2.0]},
        {"mean": [0.0], "scale": [float("nan")]},
        {"mean": [float("inf")], "scale": [1.0]},
        {"mean": [[0.0]], "scale": [[1.0]]},
    ],
)
def test_standardizer_from_dict_rejects_an_inconsistent_record(data: dict[str, list[float]]) -> None:
    with pytest.raises(DataError, match="stored standardizer is inconsistent"):
        Standardizer.from_dict(data)
