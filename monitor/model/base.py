"""Stage 3 boundary: what the rest of the monitor needs from a model.

Everything downstream (metrics, probes) talks to a :class:`Predictor`; :class:`monitor.model.onnx.OnnxModel`
is the production implementation and tests may pass any object with the same shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from monitor.model.signature import Held

ModelKind = Literal["classifier", "regressor"]


@dataclass(frozen=True, slots=True)
class ModelOutput:
    """The outputs of one evaluation of B rows.

    Attributes
    ----------
    label : (B,) int64 predicted class index (classifiers), else None.
        Always an index into ``classes`` (0..C-1), never the original class value. ``OnnxModel.evaluate`` always
        sets it for classifiers; ``OnnxModel.neighbourhood`` leaves it None when ``proba`` or ``logits`` carry it
        (their row-wise argmax, ``monitor.model.readout.argmax_rows``).
    proba : (B, C) float32 class probabilities (classifiers), else None.
    logits : (B, C) float32 raw scores when the model exposes them, else None.
    value : (B, D) float32 regression outputs (regressors), else None.
    raw_label : (B,) the model's own label output (class *values*, int or str) when it has one, else None —
        what a live server reports, so shadow agreement compares against this, not the index.
    positive : (B,) float32 P(class 1) of a binary classifier whose probability table is ``[1 − p, p]`` (the
        ``1 − p`` in float32), set *instead of* ``proba`` by ``OnnxModel.neighbourhood`` for such a model (see
        ``monitor.model.neighbourhood.binary_positive``); :meth:`with_table` builds the table from it.
    """

    label: NDArray[np.int64] | None = None
    proba: NDArray[np.float32] | None = None
    logits: NDArray[np.float32] | None = None
    value: NDArray[np.float32] | None = None
    raw_label: NDArray[np.generic] | None = None
    positive: NDArray[np.float32] | None = None

    def __len__(self) -> int:
        for arr in (self.label, self.proba, self.logits, self.value, self.positive):
            if arr is not None:
                return int(arr.shape[0])
        return 0

    def with_table(self) -> ModelOutput:
        """This output with ``proba`` the (B, 2) table ``[1 − p, p]`` when only ``positive`` carries it (else itself)."""
        if self.positive is None or self.proba is not None:
            return self
        p = self.positive
        table = np.empty((p.shape[0], 2), dtype=np.float32)
        np.subtract(np.float32(1), p, out=table[:, 0])
        table[:, 1] = p
        return ModelOutput(label=self.label, proba=table, logits=self.logits, raw_label=self.raw_label)


class Predictor(Protocol):
    """Anything that maps a (B, n_features) float32 array in raw units — and, for a model with inputs held fixed,
    their held values (:class:`monitor.model.signature.Held`) — to a :class:`ModelOutput`."""

    @property
    def n_features(self) -> int: ...

    @property
    def kind(self) -> ModelKind: ...

    def evaluate(self, rows: NDArray[np.float32], held: Held | None = None) -> ModelOutput: ...
