"""The loss estimate of a regressor (MAE, RMSE without labels: importance-weighted, DLE, doubly robust) on a shift
whose effect is known."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy.spatial.distance import cdist

from monitor.accuracy.regression import LossFit, estimate_loss, fit_loss, neighbour_distance
from monitor.errors import DataError


def rows(seed: int, n: int, shift: float) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Inputs, the model's prediction and the target: noise grows with |x2|, so moving x2 moves the error while
    the target given the inputs stays."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 5))
    x[:, 2] += shift
    pred = x[:, 0] + 0.5 * x[:, 1]
    y = pred + rng.normal(size=n) * (0.2 + np.abs(x[:, 2]))
    return x, pred, y


@pytest.fixture(scope="module")
def fit() -> LossFit:
    x, p, y = rows(0, 1500, 0.0)
    return fit_loss(x, p, y, seed=0)


@pytest.mark.parametrize("method", ["iw", "dle", "dr", "gbdt"])
@pytest.mark.parametrize("shift", [0.0, 1.0])
def test_the_estimate_follows_the_error_and_the_interval_covers_it(fit: LossFit, shift: float, method: str) -> None:
    x, p, y = rows(1 + int(shift), 1000, shift)
    res = estimate_loss(fit, x, p, method=method)
    assert res["method"] == method and res["mae"] == res["methods"][method]["mae"]
    mae, rmse = float(np.mean(np.abs(y - p))), float(np.sqrt(np.mean((y - p) ** 2)))
    for key, realized, reference in (("mae", mae, fit.mae), ("rmse", rmse, fit.rmse)):
        band = res[key]
        assert band["lower"] <= realized <= band["upper"], (key, band, realized)
        if shift:  # closer than "no change" (the reference's error)
            assert abs(band["estimate"] - realized) < 0.5 * abs(reference - realized)
    assert "cannot see a change of the target" in res["caveats"][0]


def test_the_weights_are_the_known_density_ratio(fit: LossFit) -> None:
    """A window of N(1, 1) in x2 against the reference's N(0, 1): the ratio is exp(x2 − ½), so the weighted
    reference error is the window's; with no shift the weights stay near 1 and the AUC near ½."""
    x, p, _ = rows(7, 1000, 1.0)
    res = estimate_loss(fit, x, p, method="iw")
    ref_x, ref_p, ref_y = rows(0, 1500, 0.0)
    ratio = np.exp(ref_x[:, 2] - 0.5)
    known = float(np.sum(ratio * np.abs(ref_y - ref_p)) / np.sum(ratio))
    assert abs(res["mae"]["estimate"] - known) < 0.1 * known, (res["mae"], known)
    assert res["domain"]["auc"] > 0.65 and res["domain"]["ess"] < 0.9 * fit.rows.shape[0]
    same = estimate_loss(fit, *rows(8, 1000, 0.0)[:2], method="iw")
    assert same["domain"]["auc"] < 0.58 and abs(same["mae"]["estimate"] - fit.mae) < 0.05 * fit.mae


def test_the_neighbour_distance_is_the_brute_force_one() -> None:
    """A window's rows (more than one block of them) against all reference rows; the reference's own rows leave
    themselves out."""
    rng = np.random.default_rng(3)
    ref, window = rng.normal(size=(60, 3)), rng.normal(size=(700, 3)) * 2.0
    brute = np.sort(cdist(window, ref), axis=1)[:, :20].mean(axis=1)
    assert np.allclose(neighbour_distance(ref, window), brute)
    own = cdist(ref, ref)
    np.fill_diagonal(own, np.inf)
    assert np.allclose(neighbour_distance(ref), np.sort(own, axis=1)[:, :20].mean(axis=1))
    assert np.allclose(neighbour_distance(ref[:5], window[:3]), np.sort(cdist(window[:3], ref[:5]), axis=1).mean(1))


def radial(seed: int, n: int, spread: float) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Eight inputs whose noise grows with the squared distance from the centre: a window spread wider than the
    reference reaches where the reference is sparse in every direction at once."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 8)) * spread
    pred = x[:, 0] + 0.5 * x[:, 1]
    return x, pred, pred + rng.normal(size=n) * (0.1 + 0.3 * np.sum(x**2, axis=1))


def test_gbdt_follows_an_error_that_grows_where_the_reference_is_sparse() -> None:
    """The trees read each row's distance from the reference: a window 1.5 times as spread has about twice the
    reference's error, and ``gbdt`` finds it within a tenth (on the inputs alone the trees stop at the reference's
    edge: about a quarter short)."""
    fit = fit_loss(*radial(0, 1000, 1.0), seed=0)
    x, p, y = radial(1, 1000, 1.5)
    realized = float(np.mean(np.abs(y - p)))
    band = estimate_loss(fit, x, p, method="gbdt")["mae"]
    assert realized > 2.0 * fit.mae
    assert abs(band["estimate"] - realized) < 0.1 * realized, (band, realized)
    assert band["lower"] <= realized <= band["upper"]


def test_the_fit_round_trips_and_bad_input_is_refused(fit: LossFit) -> None:
    x, p, y = rows(5, 300, 1.0)
    assert estimate_loss(LossFit.from_dict(fit.to_dict()), x, p) == estimate_loss(fit, x, p)
    y_missing = y.copy()
    y_missing[:290] = np.nan  # rows without a label are left out: 10 remain
    with pytest.raises(DataError, match="at least 30"):
        fit_loss(x, p, y_missing)
    with pytest.raises(DataError, match="one output"):
        fit_loss(x, np.column_stack([p, p]), y)
    with pytest.raises(DataError, match="input columns"):
        estimate_loss(fit, x[:, :3], p)
    with pytest.raises(DataError, match="at least 50"):  # too small to estimate: nothing rather than noise
        estimate_loss(fit, x[:49], p[:49])
    with pytest.raises(DataError, match="unknown loss-estimate method"):
        estimate_loss(fit, x, p, method="cbpe")


def test_a_prediction_beyond_float32s_range_is_left_out_like_a_nan(fit: LossFit) -> None:
    x, p, _ = rows(3, 400, 0.0)
    wild, nan = p.copy(), p.copy()
    wild[:5], nan[:5] = 1e300, np.nan  # an absurd prediction from the Python API: no ONNX model outputs it
    a, b = estimate_loss(fit, x, wild), estimate_loss(fit, x, nan)
    assert a["n"] == b["n"] == 395 and a["mae"] == b["mae"]
