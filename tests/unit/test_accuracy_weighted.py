"""The importance-weighted accuracy estimates (``iw``, ``iw_atc``) and the domain classifier, on synthetic shifts
whose density ratio is known in closed form."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from monitor.accuracy import EstimatorFit, estimate, fit_estimators
from monitor.accuracy.calibration import fit_logistic, temperature_params
from monitor.accuracy.estimators import CONCEPT_CAVEAT, atc_threshold
from monitor.accuracy.weighted import CLIP, MIN_WINDOW_ROWS, domain_weights, weighted_atc_threshold

D = 5


def gaussian_shift(seed: int, mu: NDArray[np.float64], n: int = 1500) -> tuple[NDArray[np.float64], ...]:
    """Reference rows from N(0, I), window rows from N(μ, I): the ratio q/p is exp(μ·x − |μ|²/2)."""
    rng = np.random.default_rng(seed)
    ref = rng.normal(size=(n, D))
    win = rng.normal(size=(n, D)) + mu
    ratio = np.exp(ref @ mu - mu @ mu / 2)
    return ref, win, ratio / ratio.mean()


def test_the_weights_recover_a_gaussian_mean_shifts_analytic_ratio() -> None:
    mu = np.array([0.6, -0.3, 0.0, 0.0, 0.0])
    ref, win, true = gaussian_shift(0, mu)
    dw = domain_weights(ref, win, np.random.default_rng(1))
    assert np.corrcoef(np.log(dw.weights), np.log(true))[0, 1] > 0.95
    assert dw.weights.mean() == pytest.approx(1.0)
    true_ess = true.sum() ** 2 / (true * true).sum()
    # the penalized classifier flattens the ratio a little: the ESS is at or a little above the truth's
    assert true_ess * 0.9 < dw.ess < true_ess * 1.4
    assert 0.6 < dw.auc < 0.8  # the Bayes AUC of this shift is Φ(|μ|/√2) ≈ 0.68


def test_no_shift_gives_flat_weights_and_an_auc_of_a_half() -> None:
    ref, win, _ = gaussian_shift(2, np.zeros(D))
    dw = domain_weights(ref, win, np.random.default_rng(3))
    assert abs(dw.auc - 0.5) < 0.05
    assert dw.ess > 0.95 * ref.shape[0]
    assert dw.clipped == 0.0


def test_a_shift_beyond_the_reference_is_clipped() -> None:
    ref, win, _ = gaussian_shift(4, np.array([3.0, 0, 0, 0, 0]))
    dw = domain_weights(ref, win, np.random.default_rng(5))
    assert dw.clipped > 0.0 and dw.auc > 0.95
    # clipped at CLIP × the mean, then renormalized to mean 1
    assert dw.weights.max() == pytest.approx(CLIP / (1.0 - dw.clipped))
    assert dw.ess < 0.2 * ref.shape[0]


def test_weighted_fits_equal_fits_on_repeated_rows() -> None:
    rng = np.random.default_rng(6)
    conf = rng.uniform(0.5, 1.0, 300)
    ok = rng.random(300) < conf
    reps = rng.integers(1, 4, 300)
    w = reps.astype(np.float64)
    a_w, b_w = temperature_params(conf, ok, w)
    a_r, b_r = temperature_params(np.repeat(conf, reps), np.repeat(ok, reps))
    assert (a_w, b_w) == pytest.approx((a_r, b_r), rel=1e-6)
    coef, intercept = fit_logistic(conf[:, None], ok, weights=np.ones(300))
    coef1, intercept1 = fit_logistic(conf[:, None], ok)
    assert (coef[0], intercept) == pytest.approx((coef1[0], intercept1))
    acc = float(np.sum(w * ok) / np.sum(w))
    t_w, f_w = weighted_atc_threshold(conf, w, acc)
    t_r, f_r = atc_threshold(np.repeat(conf, reps), acc)
    assert (t_w, f_w) == pytest.approx((t_r, f_r))


def task(seed: int, n: int, shift: float) -> dict[str, Any]:
    """y = 1[x0 + x1 + noise > 0]; the model sees x1 alone, so its confidence misses what a shift of x0 does to
    its accuracy, which the inputs (and the weights) see."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, D))
    x[:, 0] += shift
    y = x[:, 0] + x[:, 1] + 0.3 * rng.normal(size=n) > 0
    s = 1.0 / (1.0 + np.exp(-2.0 * x[:, 1]))
    nan = np.full(n, np.nan)
    return {"x": x, "conf": np.maximum(s, 1 - s), "ok": (s > 0.5) == y, "nan": nan}


@pytest.fixture(scope="module")
def fit() -> EstimatorFit:
    r = task(10, 1000, 0.0)
    return fit_estimators(r["conf"], r["nan"], r["nan"], r["nan"], r["ok"], inputs=r["x"], seed=0)


def run(fit: EstimatorFit, w: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return estimate(fit, w["conf"], w["nan"], w["nan"], w["nan"], **kw)


def test_the_weighted_estimates_follow_a_shift_the_confidence_cannot_see(fit: EstimatorFit) -> None:
    w = task(11, 1000, 1.0)
    realized = float(np.mean(w["ok"]))
    res = run(fit, w, inputs=w["x"])
    assert res["accuracy"]["method"] == "iw"
    ac, iw, iw_atc = (res["methods"][m] for m in ("ac", "iw", "iw_atc"))
    assert fit.accuracy - realized > 0.04  # the shift costs accuracy ...
    assert abs(ac["estimate"] - fit.accuracy) < 0.02  # ... the confidence does not move ...
    for m in (iw, iw_atc):  # ... and the weighted estimates move more than half the way (the penalized domain
        # classifier flattens the ratios: it under-corrects a strong shift, trading bias for variance)
        assert abs(m["estimate"] - realized) < 0.5 * abs(ac["estimate"] - realized)
        assert m["lower"] <= realized <= m["upper"]
    assert res["domain"]["auc"] > 0.7 and res["domain"]["inputs"] is True
    assert res["caveats"] == [CONCEPT_CAVEAT]


def test_no_input_shift_says_that_labels_which_disagree_are_right(fit: EstimatorFit) -> None:
    res = run(fit, task(12, 800, 0.0), inputs=task(12, 800, 0.0)["x"])
    assert res["domain"]["auc"] < 0.55
    assert len(res["caveats"]) == 2 and "the labels are right" in res["caveats"][1]


def test_without_inputs_the_domain_classifier_reads_the_outputs(fit: EstimatorFit) -> None:
    w = task(13, 600, 1.5)
    res = run(fit, w)
    assert res["domain"]["inputs"] is False and res["domain"]["features"] == 1.0  # logit confidence alone
    assert res["accuracy"]["method"] == "atc"  # auto: scores alone, as in `run`
    wide = run(fit, w, inputs=np.hstack([w["x"], w["x"]]))
    assert wide["domain"]["inputs"] is False
    assert any("input columns" in m for m in wide["warnings"])


def test_a_window_too_small_for_the_domain_classifier_weighs_every_row_alike(fit: EstimatorFit) -> None:
    w = {k: v[: MIN_WINDOW_ROWS - 1] for k, v in task(14, 200, 1.5).items()}
    res = run(fit, w, inputs=w["x"])
    assert res["methods"]["iw"]["estimate"] == pytest.approx(res["methods"]["ac"]["estimate"], abs=1e-6)
    assert any("too few for the domain classifier" in m for m in res["warnings"])


def test_the_fit_round_trips_and_a_version_1_fit_falls_back_to_atc(fit: EstimatorFit) -> None:
    w = task(15, 500, 1.0)
    again = EstimatorFit.from_dict(fit.to_dict())
    assert run(again, w, inputs=w["x"]) == run(fit, w, inputs=w["x"])
    old = fit.to_dict()
    old["version"] = 1
    del old["weighting"]
    res = run(EstimatorFit.from_dict(old), w, inputs=w["x"])
    assert res["accuracy"]["method"] == "atc" and "iw" not in res["methods"] and "domain" not in res  # auto
    named = run(EstimatorFit.from_dict(old), w, inputs=w["x"], method="iw")
    assert named["accuracy"]["method"] == "atc" and any("atc stands in" in m for m in named["warnings"])
