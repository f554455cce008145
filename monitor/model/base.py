"""Stage 3 boundary: what the rest of the monitor needs from a model.

Everything downstream (metrics, probes) talks to a :class:`Predictor`; :class:`monitor.model.onnx.OnnxModel`
is the production implementation and tests may pass any object with the same shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
from numpy.typing import NDArray

ModelKind = Literal["classifier", "regressor"]


@dataclass(frozen=True, slots=True)
class ModelOutput:
    """The outputs of one evaluation of B rows.

    Attributes
    ----------
    label : (B,) int64 predicted class index (classifiers), else None.
        Always an index into ``classes`` (0..C-1), never the original class value. ``OnnxModel.evaluate`` always
        sets it for classifiers; ``OnnxModel.neighbourhood`` leaves it None when ``proba`` or ``logits`` carry it
        (their row-wise argmax, ``monitor.model.onnx.argmax_rows``).
    proba : (B, C) float32 class probabilities (classifiers), else None.
    logits : (B, C) float32 raw scores when the model exposes them, else None.
    value : (B, D) float32 regression outputs (regressors), else None.
    raw_label : (B,) the model's own label output (class *values*, int or str) when it has one, else None —
        what a live server reports, so shadow agreement compares against this, not the index.
    """

    label: NDArray[np.int64] | None = None
    proba: NDArray[np.float32] | None = None
    logits: NDArray[np.float32] | None = None
    value: NDArray[np.float32] | None = None
    raw_label: NDArray[np.generic] | None = None

    def __len__(self) -> int:
        for arr in (self.label, self.proba, self.logits, self.value):
            if arr is not None:
                return int(arr.shape[0])
        return 0


class Predictor(Protocol):
    """Anything that maps a (B, n_features) float32 array in raw units to a :class:`ModelOutput`."""

    @property
    def n_features(self) -> int: ...

    @property
    def kind(self) -> ModelKind: ...

    def evaluate(self, rows: NDArray[np.float32]) -> ModelOutput: ...
