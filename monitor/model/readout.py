"""Stage 3: a session's outputs read as a :class:`~monitor.model.base.ModelOutput`, as the load-time
:class:`~monitor.model.outputs.OutputDecision` says.

:class:`OutputReader` names the outputs each ``session.run`` fetches and turns what they return into labels,
probabilities, logits or regression values; :func:`positive_output` reads the one column a wrapped binary
classifier exposes; :func:`argmax_rows` is the class of each row of a probability or logits table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, overload

import numpy as np
from numpy.typing import NDArray

from monitor.errors import ModelError
from monitor.model.base import ModelOutput
from monitor.model.outputs import OutputDecision

#: up to this many classes :func:`argmax_rows` compares columns; beyond, numpy's row-wise argmax is faster
_COLUMNWISE_ARGMAX_MAX_CLASSES = 8


@overload
def argmax_rows(
    table: NDArray[np.float32], *, narrow: Literal[False] = False, has_nan: bool | None = None
) -> NDArray[np.int64]: ...
@overload
def argmax_rows(
    table: NDArray[np.float32], *, narrow: bool, has_nan: bool | None = None
) -> NDArray[np.integer[Any] | np.bool_]: ...
def argmax_rows(
    table: NDArray[np.float32], *, narrow: bool = False, has_nan: bool | None = None
) -> NDArray[np.integer[Any] | np.bool_]:
    """``table.argmax(axis=1)``: the first index of the row maximum, or of the first NaN in the row.

    numpy's ``argmax(axis=1)`` loops over rows and costs ~10 ns per row for 2–8 columns; comparing whole columns
    gives the same indices (strict ``>`` keeps the first of tied maxima) at a fraction of that. Tables holding a
    NaN, or with more than 8 columns, go to numpy. int64 indices; with ``narrow`` the same indices in the
    narrowest type the column comparison yields (bool for 2 columns, uint8 up to 8), for callers that only
    compare them — no conversion pass. ``has_nan``: whether the table holds a NaN, when the caller has screened it
    already (None: screened here).
    """
    rows, classes = table.shape
    if has_nan is None:
        # one reduction, no temporary, screens for NaN: the maximum of a table is NaN exactly when a value is
        has_nan = bool(rows and np.isnan(table.max()))
    if classes > _COLUMNWISE_ARGMAX_MAX_CLASSES or classes < 2 or has_nan:
        by_row: NDArray[np.int64] = table.argmax(axis=1).astype(np.int64, copy=False)
        return by_row
    if classes == 2:
        above = np.greater(table[:, 1], table[:, 0])
        return above if narrow else above.astype(np.int64)
    best = table[:, 0].copy()
    label = np.zeros(rows, dtype=np.uint8)
    step = np.empty(rows, dtype=np.uint8)
    beats = np.empty(rows, dtype=np.bool_)
    for j in range(1, classes):
        column = table[:, j]
        np.greater(column, best, out=beats)
        np.multiply(beats.view(np.uint8), j, out=step)  # j where column j beats every earlier column, else 0
        np.maximum(label, step, out=label)  # the last column that beat the running maximum is the argmax
        np.maximum(best, column, out=best)
    return label if narrow else label.astype(np.int64)


@dataclass(frozen=True, slots=True)
class OutputReader:
    """Reads one model's session outputs as its :class:`~monitor.model.outputs.OutputDecision` says.

    ``model``: the model file's name, for the error message of a model that exposes string labels only.
    """

    decision: OutputDecision
    model: str

    @property
    def names(self) -> list[str]:
        """The outputs every ``session.run`` fetches: label, probabilities, logits, regression values (those set)."""
        d = self.decision
        return [n for n in (d.label, d.proba, d.logits, *d.values) if n is not None]

    def read(self, out: dict[str, NDArray[Any]], labels: bool = True) -> ModelOutput:
        """The session's outputs as a :class:`ModelOutput`. ``labels=False`` leaves ``label`` None when probabilities
        or logits carry it (their ``argmax_rows``), for callers that need the labels of a few rows only."""
        d = self.decision
        if d.kind == "regressor":
            cols = [np.asarray(out[n], dtype=np.float32).reshape(len(out[n]), -1) for n in d.values]
            return ModelOutput(value=cols[0] if len(cols) == 1 else np.hstack(cols))
        proba = logits = label = None
        if d.proba is not None:
            proba = np.asarray(out[d.proba], dtype=np.float32)
            if proba.ndim == 1 or proba.shape[1] == 1:  # binary models emitting P(class 1) only
                proba = proba.reshape(-1)
                proba = np.stack([1.0 - proba, proba], axis=1)
        if d.logits is not None:
            logits = np.asarray(out[d.logits], dtype=np.float32)
            if logits.ndim == 1 or logits.shape[1] == 1:  # the logit of class 1: softmax([0, z]) = [1 − σ(z), σ(z)]
                logits = logits.reshape(-1)
                logits = np.stack([np.zeros_like(logits), logits], axis=1)
        table = proba if proba is not None else logits
        if table is not None:  # the class is the argmax of the probabilities, else of the logits
            label = argmax_rows(table) if labels else None
        elif d.label is not None:
            raw = out[d.label]
            if raw.dtype.kind not in "iu":
                raise ModelError(
                    f"model '{self.model}' exposes only string labels ('{d.label}') and no "
                    "probabilities; export the probability output"
                )
            label = raw.astype(np.int64).reshape(-1)
        own = out.get(d.label) if d.label is not None else None
        raw_label = None if own is None else np.asarray(own).reshape(-1)
        return ModelOutput(label=label, proba=proba, logits=logits, raw_label=raw_label)


def positive_output(name: str, out: dict[str, NDArray[Any]]) -> ModelOutput:
    """A binary classifier's p [rows, 1] (the wrapped graph's output ``name``) as ``ModelOutput.positive``."""
    p = out[name]
    if p.ndim != 2 or p.shape[1] != 1 or p.dtype != np.float32:
        raise ModelError(f"expected P(class 1) as float32 [rows, 1] from tensor '{name}'; got {p.dtype} {p.shape}")
    return ModelOutput(positive=p.reshape(-1))
