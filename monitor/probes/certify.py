"""Probes: a certified L2 radius from Gaussian noise copies (randomized smoothing).

Cohen, Rosenfeld and Kolter, "Certified Adversarial Robustness via Randomized Smoothing" (2019): the *smoothed*
classifier g(x) = argmax_c P(f(x + N(0, σ²I)) = c) returns the same class within the L2 ball of radius

    R = σ · Φ⁻¹(p_lower)

around x whenever p_lower > 1/2 is a lower confidence bound on the top class's probability under noise. Their
CERTIFY keeps selection and estimation apart: the class is chosen without looking at the copies that estimate its
probability (here either the deployed model's clean class — a choice that looks at no copy — or the majority of
``select`` separate copies), and p_lower is the one-sided Clopper–Pearson bound at level 1 − α from the n
estimation copies. Otherwise it abstains (no radius).

What it certifies: the smoothed classifier (the majority vote under noise), **not** the deployed model — the
deployed model can flip inside the radius. And the radius is capped by the copies: with all n copies agreeing,
p_lower = α^(1/n), so R ≤ σ·Φ⁻¹(α^(1/n)) — for n = 32 and α = 0.001, p_lower ≈ 0.806 and R ≤ 0.86 σ
(:func:`radius_cap`). Radii are in the units of σ (standardized units unless ``space: raw``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.errors import ProbeError
from monitor.model.base import Predictor
from monitor.model.signature import Held
from monitor.model.standardize import Standardizer

#: what a report says beside every radius
CAVEAT = (
    "certifies the smoothed classifier (the majority vote of the model under Gaussian noise of scale sigma), not the "
    "deployed model itself; the radius cannot exceed the cap set by the number of noise copies"
)


def clopper_pearson_lower(successes: int, trials: int, alpha: float) -> float:
    """One-sided lower (1 − α) Clopper–Pearson bound on a binomial proportion.

    >>> round(clopper_pearson_lower(32, 32, 0.001), 3), clopper_pearson_lower(0, 10, 0.05)
    (0.806, 0.0)
    """
    if trials < 1 or not 0 <= successes <= trials:
        raise ProbeError(f"Clopper–Pearson needs 0 ≤ successes ≤ trials, trials ≥ 1; got {successes}/{trials}")
    if not 0 < alpha < 1:
        raise ProbeError(f"α must be in (0, 1); got {alpha!r}")
    if successes == 0:
        return 0.0
    from scipy.stats import beta  # here: scipy.stats takes ~1 CPU-s to import

    return float(beta.ppf(alpha, successes, trials - successes + 1))


def radius_cap(sigma: float, copies: int, alpha: float) -> float:
    """The largest radius ``copies`` estimation copies can certify (all agreeing): σ·Φ⁻¹(α^(1/n)); 0 when even
    that bound is ≤ 1/2 (too few copies: see :func:`min_copies`).

    >>> round(radius_cap(1.0, 32, 0.001), 2), radius_cap(1.0, 8, 0.001)
    (0.86, 0.0)
    """
    p = alpha ** (1.0 / copies)
    from scipy.stats import norm  # here: scipy.stats takes ~1 CPU-s to import

    return float(sigma * norm.ppf(p)) if p > 0.5 else 0.0


def min_copies(alpha: float) -> int:
    """The fewest estimation copies that can certify anything at level α: α^(1/n) > 1/2.

    >>> min_copies(0.001), min_copies(0.05)
    (10, 5)
    """
    return int(math.floor(math.log(alpha) / math.log(0.5))) + 1


@dataclass(frozen=True, slots=True)
class Certificate:
    """Per point: the certified class (−1 on abstain), the estimation count, p_lower and the radius (0 on abstain).

    Attributes
    ----------
    label, count, p_lower, radius : (B,) each.
    sigma, alpha : the noise scale and the confidence level's complement.
    copies : estimation copies per point (n).
    select : selection copies per point (0: the clean class was selected).
    """

    label: NDArray[np.int64]
    count: NDArray[np.int64]
    p_lower: NDArray[np.float64]
    radius: NDArray[np.float64]
    sigma: float
    alpha: float
    copies: int
    select: int

    @property
    def abstained(self) -> NDArray[np.bool_]:
        out: NDArray[np.bool_] = self.label < 0
        return out

    @property
    def cap(self) -> float:
        return radius_cap(self.sigma, self.copies, self.alpha)


def certify(
    noisy_labels: NDArray[np.integer],
    clean_labels: NDArray[np.integer],
    *,
    sigma: float,
    alpha: float = 0.001,
    select: int = 0,
) -> Certificate:
    """Certify each point from the classes of its noise copies.

    Parameters
    ----------
    noisy_labels : (B, K) the model's class on K Gaussian copies of each point (noise N(0, σ²I)).
    clean_labels : (B,) the model's class on the points themselves.
    sigma : the noise scale σ (> 0).
    alpha : 1 − confidence of the lower bound.
    select : the first ``select`` copies choose the class (their majority) and the other K − select estimate its
        probability; 0 chooses the clean class and keeps all K copies for estimation.

    Examples
    --------
    >>> c = certify(np.zeros((2, 32), dtype=int), np.array([0, 1]), sigma=0.5)
    >>> c.label.tolist(), [round(r, 3) for r in c.radius.tolist()]
    ([0, -1], [0.431, 0.0])
    """
    labels = np.asarray(noisy_labels)
    if labels.ndim != 2:
        raise ProbeError(f"noisy labels must be (points, copies); got shape {labels.shape}")
    b, k = labels.shape
    if not (math.isfinite(sigma) and sigma > 0):
        raise ProbeError(f"σ must be a finite number > 0; got {sigma!r}")
    if not 0 <= select < k:
        raise ProbeError(f"selection copies must be in [0, {k}) so that some copies estimate; got {select}")
    clean = np.asarray(clean_labels).reshape(-1)
    if clean.shape[0] != b:
        raise ProbeError(f"{clean.shape[0]} clean labels for {b} points")
    if select:
        chosen = np.array([np.bincount(row[:select].astype(np.int64)).argmax() for row in labels], dtype=np.int64)
    else:
        chosen = clean.astype(np.int64)
    estimate = labels[:, select:]
    n = k - select
    count = np.count_nonzero(estimate == chosen[:, None], axis=1).astype(np.int64)
    p_lower = np.array([clopper_pearson_lower(int(c), n, alpha) for c in count])
    ok = p_lower > 0.5
    from scipy.stats import norm  # here: scipy.stats takes ~1 CPU-s to import

    radius = np.where(ok, sigma * norm.ppf(np.where(ok, p_lower, 0.75)), 0.0)
    return Certificate(
        label=np.where(ok, chosen, -1).astype(np.int64),
        count=count,
        p_lower=p_lower,
        radius=radius.astype(np.float64),
        sigma=float(sigma),
        alpha=float(alpha),
        copies=n,
        select=select,
    )


def noise_copies(points: NDArray[np.float64], copies: int, sigma: float, seed: int) -> NDArray[np.float64]:
    """(B·K, n) Gaussian copies of (B, n) standardized points, point-major (copy k of point i at row i·K + k)."""
    rng = np.random.default_rng([seed, 0xCE27])
    rep = np.repeat(points, copies, axis=0)
    out: NDArray[np.float64] = rep + rng.normal(0.0, sigma, size=rep.shape)
    return out


def certificate_report(cert: Certificate, rows: int) -> dict[str, Any]:
    """The probe report's ``certified`` object: settings, the cap, the region's figures and each point's."""
    ok = ~cert.abstained
    radii = cert.radius[ok]
    return {
        "method": "randomized smoothing (Cohen, Rosenfeld and Kolter 2019), one-sided Clopper-Pearson bound",
        "caveat": CAVEAT,
        "sigma": cert.sigma,
        "alpha": cert.alpha,
        "copies": cert.copies,
        "selection_copies": cert.select,
        "selection": "majority of the selection copies" if cert.select else "the model's clean class",
        "cap": cert.cap,
        "cap_over_sigma": cert.cap / cert.sigma,
        "p_lower_cap": cert.alpha ** (1.0 / cert.copies),
        "min_copies_to_certify": min_copies(cert.alpha),
        "certified_points": int(np.count_nonzero(ok)),
        "abstained_points": int(np.count_nonzero(~ok)),
        "median_radius": float(np.median(cert.radius)) if cert.radius.size else None,
        "min_radius": float(cert.radius.min()) if cert.radius.size else None,
        "points": [
            {
                "index": i,
                "class": None if cert.label[i] < 0 else int(cert.label[i]),
                "count": int(cert.count[i]),
                "p_lower": float(cert.p_lower[i]),
                "radius": float(cert.radius[i]),
                "abstain": bool(cert.label[i] < 0),
            }
            for i in range(cert.label.shape[0])
        ],
        "median_certified_radius": float(np.median(radii)) if radii.size else None,
        "rows": rows,
    }


def certify_points(
    model: Predictor,
    standardizer: Standardizer,
    points: NDArray[np.float64],
    *,
    held: Held | None = None,
    copies: int = 32,
    sigma: float,
    alpha: float = 0.001,
    select: int = 0,
    seed: int,
) -> tuple[Certificate, int]:
    """Score ``copies`` Gaussian copies (σ in standardized units) of each (B, n) raw point and :func:`certify` them;
    returns the certificate and the model rows used (B·(copies + 1)). ``sigma`` and ``seed`` are the caller's
    setting (the offline probe: ``certify_sigma`` and the funnel's seed; the service's prober: ``scoring.sigma`` and
    ``scoring.seed``), so they have no default here.

    Raises
    ------
    ProbeError
        A regressor, or a classifier that gives no class.
    """
    if model.kind != "classifier":
        raise ProbeError("a certified radius is for classifiers; this is a regressor")
    b = points.shape[0]
    noisy_std = noise_copies(standardizer.to_standardized(points), copies, sigma, seed)
    rows_held = None if held is None else held.take(np.repeat(np.arange(b), copies))
    noisy = model.evaluate(standardizer.to_raw(noisy_std).astype(np.float32), rows_held).label
    clean = model.evaluate(points.astype(np.float32), held).label
    if noisy is None or clean is None:
        raise ProbeError("the model gives no class label: a certified radius needs one")
    cert = certify(noisy.reshape(b, copies), clean, sigma=sigma, alpha=alpha, select=select)
    return cert, b * (copies + 1)
