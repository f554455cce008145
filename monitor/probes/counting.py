"""The model as a probe evaluates it: :class:`CountingPredictor` counts rows and calls and enforces the probe's row
budget (:class:`BudgetExhaustedError`); :class:`BoundHeld` evaluates rows with one bound row of held values.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from monitor.errors import ConfigError, ProbeError
from monitor.model.base import ModelKind, ModelOutput, Predictor
from monitor.model.signature import Held


class BudgetExhaustedError(ProbeError):
    """The probe's model-row budget would be exceeded by the next evaluation.

    Attributes
    ----------
    budget_rows : the budget.
    used_rows : rows evaluated so far.
    requested_rows : rows of the evaluation that was refused.
    """

    def __init__(self, budget_rows: int, used_rows: int, requested_rows: int) -> None:
        super().__init__(
            f"probe budget of {budget_rows} model rows exhausted: {used_rows} used, the next evaluation needs "
            f"{requested_rows} more. Raise the budget or probe fewer points/perturbations."
        )
        self.budget_rows = budget_rows
        self.used_rows = used_rows
        self.requested_rows = requested_rows


class _Wrapper:
    """What a :class:`~monitor.model.base.Predictor` wrapper passes through from the model it wraps (``inner``)."""

    inner: Predictor

    @property
    def n_features(self) -> int:
        return self.inner.n_features

    @property
    def kind(self) -> ModelKind:
        return self.inner.kind

    @property
    def has_logits(self) -> bool:
        return bool(getattr(self.inner, "has_logits", False))

    @property
    def has_proba(self) -> bool:
        return bool(getattr(self.inner, "has_proba", self.inner.kind == "classifier"))


class BoundHeld(_Wrapper):
    """A predictor that evaluates every row with one bound row of held values (repeated for each row).

    For code that evaluates rows built from points that all share these held values, and passes none itself (the
    γ scorer inside Algorithm 2). An evaluation that passes held values uses those instead.

    Parameters
    ----------
    model : the wrapped predictor (a :class:`CountingPredictor` keeps counting).
    row : the held values of one row (``len(row) == 1``).
    """

    def __init__(self, model: Predictor, row: Held) -> None:
        if len(row) != 1:
            raise ProbeError(f"BoundHeld binds one row of held values; got {len(row)}")
        self.inner = model
        self.row = row

    def evaluate(self, rows: NDArray[np.float32], held: Held | None = None) -> ModelOutput:
        return self.inner.evaluate(rows, held if held is not None else self.row.repeat(int(rows.shape[0])))


class CountingPredictor(_Wrapper):
    """A :class:`~monitor.model.base.Predictor` wrapper that counts rows and calls, and enforces a row budget.

    Parameters
    ----------
    model : the wrapped predictor.
    budget_rows : refuse (raise :class:`BudgetExhaustedError`) any evaluation that would take the row count
        above this; None = unlimited.

    >>> from monitor.model.base import ModelOutput
    >>> class Const:
    ...     n_features, kind = 2, "regressor"
    ...     def evaluate(self, rows):
    ...         return ModelOutput(value=np.zeros((len(rows), 1), dtype=np.float32))
    >>> counter = CountingPredictor(Const())
    >>> _ = counter.evaluate(np.zeros((3, 2), dtype=np.float32))
    >>> counter.rows, counter.calls
    (3, 1)
    """

    def __init__(self, model: Predictor, *, budget_rows: int | None = None) -> None:
        if budget_rows is not None and budget_rows < 1:
            raise ConfigError(f"budget_rows must be >= 1 or None; got {budget_rows!r}")
        self.inner = model
        self.budget_rows = budget_rows
        self.rows = 0
        self.calls = 0

    def evaluate(self, rows: NDArray[np.float32], held: Held | None = None) -> ModelOutput:
        b = int(rows.shape[0])
        if self.budget_rows is not None and self.rows + b > self.budget_rows:
            raise BudgetExhaustedError(self.budget_rows, self.rows, b)
        self.rows += b
        self.calls += 1
        return self.inner.evaluate(rows) if held is None else self.inner.evaluate(rows, held)
