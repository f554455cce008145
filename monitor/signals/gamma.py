"""Stage 4: anharmonicity γ (eq. 3 of *Harmonic Machine Learning Models are Robust*) from
already-evaluated model outputs.

γ(x) = | f(x) − (1/m) Σ_i f(x + r·v_i) |; for vector outputs the L2 norm of that difference.
These are pure functions over arrays; :mod:`monitor.signals.scorer` arranges the single model call.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import NDArray

from monitor.errors import ConfigError
from monitor.model.base import ModelKind

OutputKind = Literal["proba", "logit", "label", "value"]
OUTPUT_KINDS: tuple[OutputKind, ...] = ("proba", "logit", "label", "value")

#: floor for probabilities before taking logs (P_adj on models without logits)
LOG_FLOOR = 1e-7


def default_output(kind: ModelKind) -> OutputKind:
    return "proba" if kind == "classifier" else "value"


def check_output(output: str, kind: ModelKind, *, has_logits: bool, has_proba: bool) -> OutputKind:
    """Validate an ``output`` setting against what the model exposes."""
    if output not in OUTPUT_KINDS:
        raise ConfigError(f"output '{output}' is not one of {', '.join(OUTPUT_KINDS)}")
    if kind == "regressor" and output != "value":
        raise ConfigError(f"output '{output}' needs a classifier; this model is a regressor (use output 'value')")
    if kind == "classifier" and output == "value":
        raise ConfigError("output 'value' needs a regressor; this model is a classifier (use proba, logit or label)")
    if output == "logit" and not has_logits:
        raise ConfigError("output 'logit' needs a model output carrying logits (an output named '*logit*'); use proba")
    if output == "proba" and not has_proba:
        raise ConfigError("output 'proba' needs a probability output; this model exposes labels only (use label)")
    return output


def gamma_from_values(centre: NDArray[np.floating], ball: NDArray[np.floating]) -> NDArray[np.float64]:
    """γ per event.

    Parameters
    ----------
    centre : (B, D) f at the events, or (B,) for a scalar f.
    ball : (B, m, D) f at the ball points, or (B, m) for a scalar f.

    Returns
    -------
    (B,) float64 — |f(x) − mean f(ball)|, L2 norm over D; the mean accumulated in float64 and a float32 centre
    promoted exactly. The scalar form is the scorer's hot path: three numpy calls, no copy of the centre.

    >>> gamma_from_values(np.array([[1.0]]), np.array([[[0.0], [1.0]]])).tolist()
    [0.5]
    >>> gamma_from_values(np.array([1.0]), np.array([[0.0, 1.0]])).tolist()
    [0.5]
    """
    if centre.ndim == 1:
        scalar: NDArray[np.float64] = np.abs(centre - ball.mean(axis=1, dtype=np.float64))
        return scalar
    diff = centre.astype(np.float64) - ball.mean(axis=1, dtype=np.float64)
    out: NDArray[np.float64] = np.abs(diff[:, 0]) if diff.shape[1] == 1 else np.sqrt(np.einsum("bd,bd->b", diff, diff))
    return out
