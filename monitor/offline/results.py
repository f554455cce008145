"""The typed results of the offline engine: a table of scores with its yardstick, a reference, an accuracy estimate.

Each is a frozen dataclass; tables among them have ``to_frame()`` (pandas, the ``frame`` extra).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from monitor.offline.frames import pandas_module

if TYPE_CHECKING:
    from monitor.accuracy import EstimatorFit
    from monitor.accuracy.regression import LossFit
    from monitor.model.signature import Held
    from monitor.model.standardize import Standardizer
    from monitor.rolling.reference import Reference
    from monitor.signals.scales import SignalScales
    from monitor.signals.scorer import ScoreResult


@dataclass(frozen=True, eq=False)  # identity: pandas compares a frame's attrs, and arrays have no single truth value
class Table:
    """Named columns of equal length (N,), in order; ``to_frame()`` is the pandas view of them."""

    columns: Mapping[str, NDArray[Any]]

    def __len__(self) -> int:
        return 0 if not self.columns else int(next(iter(self.columns.values())).shape[0])

    def to_frame(self) -> Any:
        """The columns as a ``pandas.DataFrame`` (raises :class:`MissingExtraError` naming the extra without pandas)."""
        pd = pandas_module()
        return pd.DataFrame({k: np.asarray(v) for k, v in self.columns.items()})


@dataclass(frozen=True)
class Yardstick:
    """One signal beside its reference: the live mean, the reference mean, their ratio, and where the live median
    falls in the reference distribution (percentile 0..100; 50 = as usual)."""

    signal: str
    live: float
    reference: float
    ratio: float
    percentile: float

    def describe(self) -> str:
        """``γ 1.54e-05 (1.4× reference 1.10e-05; median at reference p93)``."""
        ratio = f"{self.ratio:.2g}× reference" if np.isfinite(self.ratio) else "reference"
        return (
            f"{self.signal} {self.live:.3g} ({ratio} {self.reference:.3g}; median at reference p{self.percentile:.0f})"
        )


def yardsticks(live: Mapping[str, NDArray[np.float64]], reference: Reference) -> tuple[Yardstick, ...]:
    """Each live signal (``gamma``, ``flicker``, ``confidence``) beside the reference's.

    >>> import numpy as np
    >>> from monitor.rolling.reference import Reference
    >>> ref = Reference.from_arrays(gamma=np.linspace(0, 1, 101), flicker=np.zeros(101),
    ...                             features=np.zeros((101, 1)))
    >>> y = yardsticks({"gamma": np.full(10, 0.9)}, ref)[0]
    >>> round(y.ratio, 2), round(y.percentile)
    (1.8, 90)
    """
    out: list[Yardstick] = []
    samples = {
        "gamma": (reference.gamma_sample, reference.gamma_mean),
        "flicker": (reference.flicker_sample, reference.flicker_mean),
        "confidence": (reference.confidence_sample, float("nan")),
    }
    for name, values in live.items():
        if name not in samples:
            continue
        sample, mean = samples[name]
        v = np.asarray(values, dtype=np.float64)
        v = v[np.isfinite(v)]
        if v.size == 0 or sample.size == 0:
            continue
        ref_mean = float(np.mean(sample)) if not np.isfinite(mean) else float(mean)
        live_mean = float(np.mean(v))
        ratio = live_mean / ref_mean if ref_mean != 0 else float("nan")
        # mid-rank: a signal that is mostly 0 (flicker) at a live median of 0 sits at the middle of the zeros
        ordered, med = np.sort(sample), float(np.median(v))
        below = np.searchsorted(ordered, med, side="left") + np.searchsorted(ordered, med, side="right")
        pct = 50.0 * float(below) / sample.size
        out.append(Yardstick(name, live_mean, ref_mean, ratio, pct))
    return tuple(out)


@dataclass(frozen=True, eq=False)
class ScoreTable(Table):
    """:func:`score`'s result: per input row ``gamma``, ``flicker``, ``p_adj`` and, for a classifier, ``class``,
    ``probability`` and ``margin`` (NaN scores and class −1 on rows with NaN or infinite values: ``valid`` False).

    ``yardstick``: each signal beside the reference's (empty when the data is its own reference);
    ``invalid``: the event-log lines refused, by reason; ``kind``: classifier or regressor."""

    kind: str = "classifier"
    n_invalid_rows: int = 0
    yardstick: tuple[Yardstick, ...] = ()
    invalid: Mapping[str, int] = field(default_factory=dict)
    index: Any = None
    #: the scorer's own result, row for row (``valid``, ``predicted_class`` of a regressor …)
    result: ScoreResult | None = field(default=None, repr=False)
    #: what was read: ``data`` (and ``reference`` when rows were read for it) → its description
    sources: Mapping[str, str] = field(default_factory=dict)

    def to_frame(self) -> Any:
        frame = super().to_frame()
        if self.index is not None:
            frame.index = self.index
        return frame

    def summary(self) -> str:
        """One line per signal with its yardstick, and the rows left out."""
        n = len(self)
        lines = [f"scored {n - self.n_invalid_rows} of {n} rows ({self.kind})"]
        lines += [f"  {y.describe()}" for y in self.yardstick]
        if not self.yardstick:
            g = self.columns["gamma"]
            lines.append(
                f"  gamma mean {float(np.nanmean(g)) if np.isfinite(g).any() else float('nan'):.3g} (no separate reference to compare with)"
            )
        if self.invalid:
            lines.append("  invalid lines: " + ", ".join(f"{k}: {v}" for k, v in sorted(self.invalid.items())))
        return "\n".join(lines)


@dataclass(frozen=True)
class ReferenceResult:
    """:func:`reference`'s result: what ``run``'s reference JSON holds. ``save(path)`` writes that JSON."""

    standardizer: Standardizer
    reference: Reference
    space: str
    model_path: str
    held_sample: Held | None = None
    fit: EstimatorFit | None = None
    scales: SignalScales | None = None
    path: Path | None = None
    #: one baseline per segment of ``segment_column`` (empty without one)
    segments: Mapping[str, Reference] = field(default_factory=dict)
    segment_column: str | None = None
    #: what was read and chosen, one line each (``harmonic-monitor reference`` prints them)
    notes: tuple[str, ...] = ()
    #: a regressor's loss estimator fitted on labelled rows (``labels``)
    loss_fit: LossFit | None = None

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the reference JSON (``run``, ``replay``, ``estimate`` and ``report`` read it); returns the path."""
        from monitor.rolling.reference_file import write_reference

        return write_reference(
            Path(path),
            self.standardizer,
            self.reference,
            model=self.model_path,
            space=self.space,
            held_sample=self.held_sample,
            accuracy_estimator=None if self.fit is None else self.fit.to_dict(),
            loss_estimator=None if self.loss_fit is None else self.loss_fit.to_dict(),
            scales=self.scales,
            segments=self.segments,
            segment_column=self.segment_column,
        )


@dataclass(frozen=True)
class AccuracyEstimate:
    """:func:`estimate`'s result: the label-free accuracy estimate with its interval (``level``, 0.9), every
    method's, the reference accuracy, and the realized accuracy where labels were given."""

    estimate: float
    lower: float
    upper: float
    method: str
    level: float
    n: int
    reference_accuracy: float
    methods: Mapping[str, Mapping[str, float]]
    warnings: tuple[str, ...] = ()
    realized: float | None = None
    n_labelled: int = 0
    #: the estimator's whole answer (what ``harmonic-monitor estimate --json`` writes) and the fit it came from
    document: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    fit: EstimatorFit | None = field(default=None, repr=False, compare=False)
    #: what the estimate cannot claim, in words (``monitor.accuracy.estimators.caveats``)
    caveats: tuple[str, ...] = ()
    #: one estimate per period (``monitor.accuracy.periods.PERIOD_COLUMNS``): see :meth:`over_time`
    periods: tuple[Mapping[str, Any], ...] = ()
    #: per segment, where the rows carry theirs: see :meth:`by_segment`
    segments: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def by_segment(self) -> Any:
        """A DataFrame with one row per segment (where the rows carry theirs): n, estimate, lower, upper, method,
        reference_accuracy (the segment's own where the labelled reference carries it: own_reference), reference_n,
        below_reference (the interval wholly below it), realized and n_labelled (with labels), note (too few rows)."""
        return _segment_frame(self.segments)

    def over_time(self) -> Any:
        """A DataFrame with one row per period: period (start: event time in seconds, or the first row's number),
        end, n, estimate, lower, upper, method, realized (NaN where no labels), n_labelled, note; NaN estimates
        where a period had too few rows (the note says so)."""
        from monitor.accuracy.periods import PERIOD_COLUMNS

        pd = pandas_module()
        return pd.DataFrame(list(self.periods), columns=list(PERIOD_COLUMNS)).set_index("period")

    def to_frame(self) -> Any:
        """One row per method: estimate, lower, upper."""
        pd = pandas_module()
        return pd.DataFrame(
            [
                {"method": k, "estimate": v["estimate"], "lower": v["lower"], "upper": v["upper"]}
                for k, v in self.methods.items()
            ]
        ).set_index("method")


@dataclass(frozen=True)
class LossEstimate:
    """:func:`estimate`'s result for a regressor: its mean absolute and root mean squared error on the rows,
    estimated without labels, each ``{"estimate", "lower", "upper", "sd"}`` (90 % interval) by ``method``; every
    method's in ``methods``; the reference's own; the realized values where labels were given."""

    mae: Mapping[str, float]
    rmse: Mapping[str, float]
    method: str
    level: float
    n: int
    reference_mae: float
    reference_rmse: float
    methods: Mapping[str, Mapping[str, Mapping[str, float]]]
    warnings: tuple[str, ...] = ()
    realized_mae: float | None = None
    realized_rmse: float | None = None
    n_labelled: int = 0
    #: the estimator's whole answer (what ``harmonic-monitor estimate --json`` writes)
    document: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    caveats: tuple[str, ...] = ()
    #: per segment, where the rows carry theirs: see :meth:`by_segment`
    segments: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def by_segment(self) -> Any:
        """A DataFrame with one row per segment: n, the MAE's estimate, lower, upper, method, reference_mae and
        reference_rmse (the segment's own where the labelled reference carries it: own_reference), above_reference
        (the interval wholly above it), realized (MAE) and n_labelled with labels, note (too few rows)."""
        return _segment_frame(self.segments)

    def to_frame(self) -> Any:
        """One row per method and metric: estimate, lower, upper."""
        pd = pandas_module()
        return pd.DataFrame(
            [
                {"method": k, "metric": m, "estimate": b["estimate"], "lower": b["lower"], "upper": b["upper"]}
                for k, v in self.methods.items()
                for m, b in v.items()
            ]
        ).set_index(["method", "metric"])


def _segment_frame(segments: Mapping[str, Mapping[str, Any]]) -> Any:
    pd = pandas_module()
    frame = pd.DataFrame([{"segment": k, **v} for k, v in segments.items()])
    return frame.set_index("segment") if len(frame) else frame
