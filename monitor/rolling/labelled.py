"""Stage 5a: label-based quality over the last N joined labels (*Model Robustness Metrics*, §2 B–C).

Accuracy; Resilience = min(accuracy under σ = 0.1 noise / clean accuracy, 1); ECE with M equal-width confidence
bins and Reliability = 1 − ECE; and the composite 0.4·Stability + 0.3·Resilience + 0.3·Reliability, which is
always reported beside its three parts (never alone).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Self

import numpy as np
from numpy.typing import NDArray

from monitor.errors import ConfigError

COMPOSITE_WEIGHTS = (0.4, 0.3, 0.3)  # stability, resilience, reliability (*Model Robustness Metrics*, §3)


def expected_calibration_error(confidence: NDArray[np.floating], correct: NDArray[np.bool_], bins: int = 10) -> float:
    """ECE = Σ_m |B_m|/N · |acc(B_m) − conf(B_m)| over ``bins`` equal-width bins of (0, 1].

    >>> round(expected_calibration_error(np.array([0.9, 0.9, 0.6, 0.6]), np.array([True, True, True, False])), 3)
    0.1
    """
    conf = np.asarray(confidence, dtype=np.float64)
    ok = np.asarray(correct, dtype=bool)
    if conf.size == 0:
        return float("nan")
    # bin m holds confidences in ((m−1)/M, m/M]; a confidence of exactly 0 goes to the first bin
    idx = np.clip(np.ceil(conf * bins).astype(np.int64) - 1, 0, bins - 1)
    n = np.bincount(idx, minlength=bins)
    acc = np.bincount(idx, weights=ok.astype(np.float64), minlength=bins)
    cf = np.bincount(idx, weights=conf, minlength=bins)
    filled = n > 0
    return float(np.sum(np.abs(acc[filled] - cf[filled])) / conf.size)


@dataclass(frozen=True, slots=True)
class LabelQuality:
    """One reading. NaN where undefined (no labels, no confidences, or clean accuracy 0)."""

    events: int
    accuracy: float
    noisy_accuracy: float
    resilience: float
    ece: float
    reliability: float

    def composite(self, stability: float) -> float:
        """0.4·stability + 0.3·resilience + 0.3·reliability (NaN if any part is NaN)."""
        ws, wr, wl = COMPOSITE_WEIGHTS
        return ws * stability + wr * self.resilience + wl * self.reliability


class LabelledWindow:
    """The last ``size`` joined labels of one model: (correct, noisy copy correct, confidence).

    >>> w = LabelledWindow(size=4).update([True, True, False, True], [True, False, False, True], [0.9, 0.8, 0.7, 0.9])
    >>> q = w.get()
    >>> q.accuracy, q.noisy_accuracy, round(q.resilience, 3)
    (0.75, 0.5, 0.667)
    """

    def __init__(self, size: int = 2000, bins: int = 10) -> None:
        if size < 1 or bins < 1:
            raise ConfigError(f"size and bins must be >= 1; got {size}, {bins}")
        self.size, self.bins = size, bins
        self.reset()

    def reset(self) -> None:
        self._correct: deque[bool] = deque(maxlen=self.size)
        self._noisy: deque[float] = deque(maxlen=self.size)  # NaN when no noisy copy was evaluated
        self._conf: deque[float] = deque(maxlen=self.size)  # NaN when the model has no probabilities

    def update(self, correct: list[bool], noisy_correct: list[bool | None], confidence: list[float | None]) -> Self:
        if not len(correct) == len(noisy_correct) == len(confidence):
            raise ConfigError("correct, noisy_correct and confidence must have the same length")
        self._correct.extend(correct)
        self._noisy.extend(float("nan") if v is None else float(v) for v in noisy_correct)
        self._conf.extend(float("nan") if v is None else float(v) for v in confidence)
        return self

    def get(self) -> LabelQuality:
        c = np.fromiter(self._correct, dtype=bool, count=len(self._correct))
        if c.size == 0:
            nan = float("nan")
            return LabelQuality(0, nan, nan, nan, nan, nan)
        acc = float(c.mean())
        noisy = np.fromiter(self._noisy, dtype=np.float64, count=len(self._noisy))
        have = np.isfinite(noisy)
        noisy_acc = float(noisy[have].mean()) if have.any() else float("nan")
        resilience = min(noisy_acc / acc, 1.0) if acc > 0 and np.isfinite(noisy_acc) else float("nan")
        conf = np.fromiter(self._conf, dtype=np.float64, count=len(self._conf))
        known = np.isfinite(conf)
        ece = expected_calibration_error(conf[known], c[known], self.bins) if known.any() else float("nan")
        return LabelQuality(int(c.size), acc, noisy_acc, resilience, ece, 1.0 - ece)
