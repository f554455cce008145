"""Signal scales chosen per model from the reference: the σ (and r) at which flicker carries information.

Why: at the default fixed r = σ = 0.05 standardized units, γ is ≈ 1e-5 on logistic and MLP models and only
0–15 % of events ever flicker, so flicker is zero for most events and says little about them. Here σ is
chosen so that a stated share of the reference events (``target_share``, 0.5 by default) has non-zero flicker.

How: a bisection over log σ on at most ``max_rows`` reference rows (a seeded sample), each step one scoring of those
rows with a fresh, seeded scorer — the same flicker noise directions at every step (common random numbers), so the
share of flickering rows grows with σ almost surely monotonically and the search is deterministic. Cost: at most
``iterations + 2`` scorings of ``max_rows`` rows with a 2-point ball (``hypercube:2``) and the configured K copies.

r is tied to σ (r = σ): the ball and the noise then probe the same neighbourhood, in the same per-feature
standardized units, as the fixed defaults do (r = σ = 0.05). γ's curvature term grows as r², so a σ at which
the class changes for half the events is also a radius at which γ leaves its ≈ 1e-5 floor.

Regressors are handled alike: their flicker counts copies whose output moves by more than ``regression_tolerance``
of the output's reference IQR (:class:`~monitor.signals.scorer.ScoringConfig`), which also grows with σ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.errors import ConfigError, DataError
from monitor.model.base import Predictor
from monitor.model.signature import Held
from monitor.model.standardize import Standardizer
from monitor.signals.scorer import RobustnessScorer, ScoringConfig

#: how the scales were chosen: fixed (r = σ = 0.05), or the bisection on the share of flickering reference rows
SCALE_METHODS = ("fixed", "target-flicker-share")
#: the σ range searched, in the standardizer's units
SIGMA_LOW, SIGMA_HIGH = 1e-3, 10.0


@dataclass(frozen=True, slots=True)
class SignalScales:
    """The σ and r a reference was scored at, how they were chosen, and the share of its rows that flicker there."""

    sigma: float
    radius: float
    method: str
    flicker_share: float
    target: float | None = None
    rows: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "sigma": self.sigma,
            "radius": self.radius,
            "method": self.method,
            "flicker_share": self.flicker_share,
            "target": self.target,
            "rows": self.rows,
        }

    @classmethod
    def from_dict(cls, doc: Any) -> SignalScales:
        """Raises DataError on a damaged block (missing keys, scales not > 0, an unknown method)."""
        try:
            sigma, radius = float(doc["sigma"]), float(doc["radius"])
            method = str(doc["method"])
            share = float(doc["flicker_share"])
            target = None if doc.get("target") is None else float(doc["target"])
            rows = int(doc.get("rows", 0))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DataError(f"'scales' is damaged ({type(exc).__name__}: {exc})") from exc
        if not (sigma > 0 and radius > 0 and math.isfinite(sigma) and math.isfinite(radius)):
            raise DataError(f"'scales' holds sigma {sigma!r} and radius {radius!r}; both must be finite and > 0")
        if method not in SCALE_METHODS:
            raise DataError(f"'scales' method {method!r} is not one of {', '.join(SCALE_METHODS)}")
        return cls(sigma=sigma, radius=radius, method=method, flicker_share=share, target=target, rows=rows)


def flicker_share(
    model: Predictor,
    standardizer: Standardizer,
    rows: NDArray[np.floating],
    held: Held | None,
    config: ScoringConfig,
    sigma: float,
    *,
    held_sample: Held | None = None,
) -> float:
    """Share of the valid ``rows`` with non-zero flicker at noise scale ``sigma`` (a fresh scorer seeded by
    ``config.seed``; a 2-point ball, since only flicker is read)."""
    cfg = replace(config, sigma=sigma, radius=sigma, ball="hypercube:2")
    result = RobustnessScorer(model, standardizer, cfg, held_sample=held_sample).score(rows, held)
    ok = result.valid & np.isfinite(result.flicker)
    if not ok.any():
        raise DataError("no reference row could be scored (all invalid); cannot choose signal scales")
    return float(np.mean(result.flicker[ok] > 0))


def choose_scales(
    model: Predictor,
    standardizer: Standardizer,
    rows: NDArray[np.floating],
    held: Held | None,
    config: ScoringConfig,
    *,
    target_share: float = 0.5,
    max_rows: int = 1000,
    iterations: int = 16,
    held_sample: Held | None = None,
) -> SignalScales:
    """σ (and r = σ) at which ``target_share`` of the reference rows flicker; see the module docstring.

    When even σ = :data:`SIGMA_HIGH` gives less than the target (a model almost constant around the data), or
    σ = :data:`SIGMA_LOW` already more (a model that flickers on its own), the bound is returned: the recorded
    ``flicker_share`` says what it reached.

    Raises
    ------
    ConfigError
        ``target_share`` not in (0, 1), or no flicker copies (``flicker_copies`` 0).
    """
    if not 0.0 < target_share < 1.0:
        raise ConfigError(f"target flicker share must be in (0, 1); got {target_share!r}")
    if config.flicker_copies < 1:
        raise ConfigError("choosing σ from the reference needs flicker copies (flicker_copies >= 1)")
    n = rows.shape[0]
    if n > max_rows:
        pick = np.sort(np.random.default_rng([config.seed, 0x5CA1E]).choice(n, max_rows, replace=False))
        rows = rows[pick]
        held = None if held is None else held.take(pick)

    def share(sigma: float) -> float:
        return flicker_share(model, standardizer, rows, held, config, sigma, held_sample=held_sample)

    lo, hi = math.log(SIGMA_LOW), math.log(SIGMA_HIGH)
    share_lo, share_hi = share(SIGMA_LOW), share(SIGMA_HIGH)
    if share_hi < target_share:
        best, best_share = SIGMA_HIGH, share_hi
    elif share_lo >= target_share:
        best, best_share = SIGMA_LOW, share_lo
    else:
        best, best_share = SIGMA_HIGH, share_hi
        for _ in range(iterations):
            mid = 0.5 * (lo + hi)
            s = share(math.exp(mid))
            if s >= target_share:
                hi, best, best_share = mid, math.exp(mid), s
            else:
                lo = mid
    sigma = float(f"{best:.6g}")
    return SignalScales(
        sigma=sigma,
        radius=sigma,
        method="target-flicker-share",
        flicker_share=best_share,
        target=target_share,
        rows=int(rows.shape[0]),
    )
