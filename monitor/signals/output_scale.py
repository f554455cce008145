"""Stage 4: a regressor's output scale — each output's spread over the reference, the scale its flicker tolerance
(``regression_tolerance``) is a fraction of (see :func:`output_scale`)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from monitor.config import ScoringSettings, setting_default
from monitor.errors import ModelError
from monitor.model.base import Predictor
from monitor.model.signature import Held, default_held
from monitor.model.standardize import Standardizer

#: rows :func:`output_scale` evaluates: the IQR of 2,048 normal draws is within ~4 % of the true IQR (one standard
#: error), and for a regressor it costs one model call of 2,048 rows when its scorer is built
OUTPUT_SCALE_ROWS = 2048


def output_scale(
    model: Predictor,
    standardizer: Standardizer,
    *,
    seed: int = setting_default(ScoringSettings, "seed"),
    rows: int = OUTPUT_SCALE_ROWS,
    held_sample: Held | None = None,
) -> NDArray[np.float64]:
    """(D,) each regression output's spread over the reference: its interquartile range on ``rows`` seeded rows
    ``μ + s⊙z``, z ~ N(0, I) — the standardizer's location and scale, features independent.

    This is the scale a regressor's flicker tolerance is a fraction of (docs/SPEC-NOTES.md). It is drawn
    from the standardizer, not from reference rows, so that every path that scores — the ``score`` and
    ``reference`` commands, ``run`` with a reference file, a warm-up window or a restored state — computes the
    same number from what they all share. For an exactly linear model f(x) = w·x it is 1.349·‖w⊙s‖, exactly the
    spread the flicker noise σ·s⊙ε moves the output by, over σ: its flicker is 2Φ(−1.349·τ/σ) whatever w is
    (0.007 at τ = 0.1, σ = 0.05). An output whose IQR is 0 or not finite (a model constant over most of the box)
    falls back to its range over the rows, then to 1. A model with values held fixed gets, per row, the held values
    of a seeded draw from ``held_sample`` (the reference's or the warm-up's), or their defaults (0, False, the empty
    string) when there is none.

    Raises
    ------
    ModelError
        The model returned no regression values.
    """
    n = model.n_features
    rng = np.random.default_rng([seed, 0x5CA1E])  # its own stream: the flicker bank's draws stay as they were
    signature = getattr(model, "signature", None)
    if held_sample is None and signature is not None and signature.has_held:
        held_sample = default_held(signature, 1)
    held_rng = np.random.default_rng([seed, 0x4E1D])
    block = max(1, min(rows, 2**22 // max(n, 1)))  # at most ~16 MB of float32 rows at a time (image models)
    parts: list[NDArray[np.float32]] = []
    for start in range(0, rows, block):
        z = rng.standard_normal((min(block, rows - start), n))
        held = None
        if held_sample is not None and len(held_sample):
            pick = np.asarray(held_rng.integers(0, len(held_sample), size=z.shape[0]), dtype=np.int64)
            held = held_sample.take(pick)
        raw = standardizer.to_raw(z).astype(np.float32)
        value = (model.evaluate(raw) if held is None else model.evaluate(raw, held)).value
        if value is None:
            raise ModelError("a regressor's evaluation returned no values")
        parts.append(value.reshape(value.shape[0], -1))
    values = np.concatenate(parts).astype(np.float64)
    finite = np.where(np.isfinite(values), values, np.nan)
    finite[:, np.isnan(finite).all(axis=0)] = 0.0  # an output never finite: scale 1 below (and no all-NaN warning)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):  # a NaN column is expected
        low, high = np.nanpercentile(finite, [25.0, 75.0], axis=0)
        scale = high - low
        spread = np.nanmax(finite, axis=0) - np.nanmin(finite, axis=0)
    scale = np.where(np.isfinite(scale) & (scale > 0), scale, spread)
    result: NDArray[np.float64] = np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)
    return result
