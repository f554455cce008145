"""The Python API: score, reference, estimate, replay, probe and report from a notebook.

Every function takes the model (an ONNX path, or a loaded :class:`~monitor.model.onnx.OnnxModel`) and data as

* a **pandas DataFrame**, columns named by the model's inputs or feature names (``age``, ``city``; ``x[0]``,
  ``x[1]`` …), strings (or a categorical dtype) for held string inputs; other columns are ignored, missing ones are
  named in the error;
* a **numpy array** (N, D) for a model of float inputs only (their values in the graph's input order), or a mapping
  of arrays by input name;
* a **file path**: ``.csv``, ``.npy``, ``.npz`` (as the CLI reads them), ``.parquet`` (needs the ``frame`` extra) or a
  ``.jsonl`` event log decoded exactly as ``run`` decodes Kafka messages (invalid lines counted by reason in
  ``invalid``, never raised).

A reference is any of those rows, a reference JSON written by ``harmonic-monitor reference`` (or
:meth:`ReferenceResult.save`), or the :class:`ReferenceResult` that :func:`reference` returns.

Results are typed (frozen dataclasses); tables among them have ``to_frame()``, which needs pandas
(``pip install -e '.[frame]'`` in the clone) and says so when it is missing; :func:`score` of a DataFrame returns a
DataFrame. The commands ``score``, ``reference``, ``estimate``, ``replay``, ``probe`` and ``report`` are wrappers
over these functions (the same options give the same numbers). ``import monitor`` stays cheap: this module is
imported on first use of one of them.

Examples
--------
>>> import numpy as np, monitor
>>> from monitor.examples import linear_classifier
>>> path = linear_classifier()                 # inputs age, income, debt; 3 classes
>>> rows = np.random.default_rng(0).normal(size=(40, 3))
>>> scores = monitor.score(path, rows, flicker_copies=8)
>>> scores.columns["gamma"].shape, sorted(scores.columns)[:3]
((40,), ['class', 'flicker', 'gamma'])
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
from numpy.typing import NDArray

from monitor.config import ModelSettings, ScoringSettings, SegmentSettings, setting_default
from monitor.errors import ConfigError, DataError, InvalidEventError, MonitorError

if TYPE_CHECKING:
    from monitor.accuracy import EstimatorFit
    from monitor.model.onnx import OnnxModel
    from monitor.model.signature import Held, Signature
    from monitor.model.standardize import Standardizer
    from monitor.probes.funnel import FunnelResult
    from monitor.probes.offline import ProbeOptions
    from monitor.reporting import Report
    from monitor.rolling.reference import Reference
    from monitor.rolling.reference_build import ReferenceRows
    from monitor.signals.scales import SignalScales
    from monitor.signals.scorer import RobustnessScorer, ScoreResult, ScoringConfig

#: the keyword defaults of the scoring functions below: the settings' (monitor/config.py declares them once)
_SCORING = ScoringSettings()
_MODEL_KIND: str = setting_default(ModelSettings, "model_kind")
_FIXED_FEATURES: tuple[str, ...] = tuple(setting_default(ModelSettings, "fixed_features"))
_MAX_SEGMENTS: int = setting_default(SegmentSettings, "max_segments")

#: what to install for ``to_frame()`` and parquet files
FRAME_EXTRA = "in the clone, pip install -e '.[frame]' (the `frame` extra: pandas, pyarrow)"
#: rows per scorer call (flicker noise is drawn per call: keep it fixed to reproduce a run)
BATCH_ROWS = 1024

#: an ONNX path or a loaded model
ModelLike: TypeAlias = "str | os.PathLike[str] | OnnxModel"
#: a DataFrame, an array, a mapping of arrays by input name, a file path, or :class:`Rows` (pandas is optional, so
#: the frame type cannot be named here)
DataLike: TypeAlias = Any


class MissingExtraError(MonitorError, ImportError):
    """An optional dependency is not installed; the message names the extra that brings it."""


def _pandas() -> Any:
    try:
        pd = importlib.import_module("pandas")
    except ImportError:
        raise MissingExtraError(f"this needs pandas, which is not installed: {FRAME_EXTRA}") from None
    return pd


def _is_frame(data: object) -> bool:
    return type(data).__module__.startswith("pandas") and hasattr(data, "columns") and hasattr(data, "iloc")


# ---------------------------------------------------------------------------------------------------- typed results


@dataclass(frozen=True, eq=False)  # identity: pandas compares a frame's attrs, and arrays have no single truth value
class Table:
    """Named columns of equal length (N,), in order; ``to_frame()`` is the pandas view of them."""

    columns: Mapping[str, NDArray[Any]]

    def __len__(self) -> int:
        return 0 if not self.columns else int(next(iter(self.columns.values())).shape[0])

    def to_frame(self) -> Any:
        """The columns as a ``pandas.DataFrame`` (raises :class:`MissingExtraError` naming the extra without pandas)."""
        pd = _pandas()
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


@dataclass(frozen=True)
class Rows:
    """Data read for a model: x (N, D) float64 in the signature's feature order, held values, and where they came
    from. For a ``.jsonl`` event log also each event's time, segment and 0-based line, and the lines refused by
    reason (``invalid``) as ``run`` counts them."""

    x: NDArray[np.float64]
    held: Held | None
    source: str
    invalid: Mapping[str, int] = field(default_factory=dict)
    #: of those lines, the ones refused for one input's value: ``"feature: problem"`` → lines (as
    #: ``harmonic_input_invalid_total`` counts them)
    invalid_inputs: Mapping[str, int] = field(default_factory=dict)
    timestamps: NDArray[np.float64] | None = None
    segments: tuple[str, ...] | None = None
    lines: NDArray[np.int64] | None = None
    labels: NDArray[Any] | None = None
    index: Any = None

    def __len__(self) -> int:
        return int(self.x.shape[0])

    def take(self, pick: NDArray[Any]) -> Rows:
        """The rows at ``pick`` (indices or a mask)."""
        segs = None if self.segments is None else tuple(np.asarray(self.segments, dtype=object)[pick].tolist())
        return dataclasses.replace(
            self,
            x=self.x[pick],
            held=None if self.held is None else self.held.take(pick),
            timestamps=None if self.timestamps is None else self.timestamps[pick],
            segments=segs,
            lines=None if self.lines is None else self.lines[pick],
            labels=None if self.labels is None else self.labels[pick],
            index=None,
        )


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

    def to_frame(self) -> Any:
        """One row per method: estimate, lower, upper."""
        pd = _pandas()
        return pd.DataFrame(
            [
                {"method": k, "estimate": v["estimate"], "lower": v["lower"], "upper": v["upper"]}
                for k, v in self.methods.items()
            ]
        ).set_index("method")


@dataclass(frozen=True)
class ReplayTimeline:
    """:func:`replay`'s result: the verdict changes and alert transitions of the pipeline over an event log, each
    at the 0-based line where it was decided, and the lines refused by reason."""

    events: int
    changes: tuple[Mapping[str, Any], ...]
    alerts: tuple[Mapping[str, Any], ...]
    invalid: Mapping[str, int]
    scored: int
    seconds: float = 0.0
    #: each time a detector of a segment turned on or off: ``{"index", "model", "segment", ...}``
    crossings: tuple[Mapping[str, Any], ...] = ()
    #: with ``keep_scores``: every scored event's features (N, D) and scores, in the order the pipeline scored them
    scored_rows: NDArray[np.float64] | None = field(default=None, repr=False, compare=False)
    scores: ScoreResult | None = field(default=None, repr=False, compare=False)
    #: the refused lines again by the input whose value was at fault: ``{"model/input: problem": count}``
    invalid_inputs: Mapping[str, int] = field(default_factory=dict)

    def document(self) -> dict[str, Any]:
        """The timeline JSON ``harmonic-monitor replay --timeline`` writes."""
        return {
            "events": self.events,
            "changes": [dict(c) for c in self.changes],
            "alerts": [dict(a) for a in self.alerts],
            "crossings": [dict(c) for c in self.crossings],
        }

    def to_frame(self) -> Any:
        """One row per verdict change."""
        pd = _pandas()
        cols = ["index", "ts", "model", "segment", "previous", "verdict", "detectors", "features"]
        return pd.DataFrame([{k: c.get(k) for k in cols} for c in self.changes], columns=cols)

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> ReplayTimeline:
        """A timeline read back from its JSON (``replay --timeline``)."""
        try:
            return cls(
                int(doc["events"]),
                tuple(doc.get("changes", ())),
                tuple(doc.get("alerts", ())),
                {},
                0,
                crossings=tuple(doc.get("crossings", ())),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"not a replay timeline (expected 'events', 'changes', 'alerts'): {exc}") from None


@dataclass(frozen=True)
class ProbeReport:
    """:func:`probe`'s result: the funnel's typed result and the JSON report ``harmonic-monitor probe`` writes."""

    result: FunnelResult
    report: Mapping[str, Any]

    @property
    def mri(self) -> dict[str, float]:
        """Perturbation type → MRI r (the share of outputs unchanged at the moderate intensity)."""
        return {} if self.result.mri is None else dict(self.result.mri.vector)

    def to_frame(self) -> Any:
        """One row per threshold search: perturbation, feature, ε*."""
        pd = _pandas()
        return pd.DataFrame(
            [
                {"perturbation": t.perturbation, "feature": t.feature, "eps_star": t.result.eps_star}
                for t in self.result.thresholds
            ],
            columns=["perturbation", "feature", "eps_star"],
        )


# ---------------------------------------------------------------------------------------------------- reading


def load_model(
    model: ModelLike, *, model_kind: str = _MODEL_KIND, fixed_features: Sequence[str] = _FIXED_FEATURES
) -> OnnxModel:
    """The ONNX model at ``model`` (a loaded one passes through)."""
    from monitor.model.onnx import OnnxModel

    if isinstance(model, OnnxModel):
        return model
    return OnnxModel(str(model), model_kind=model_kind, fixed_features=tuple(fixed_features))  # type: ignore[arg-type]


def _model_path(model: ModelLike) -> str:
    return str(getattr(model, "path", model))


def read_rows(
    data: DataLike,
    model: OnnxModel,
    *,
    what: str = "data",
    header: str = "auto",
    feature_names: Sequence[str] | None = None,
    model_name: str | None = None,
    max_events: int | None = None,
    label_column: str | None = None,
) -> Rows:
    """``data`` as rows for ``model`` (see the module docstring for what is accepted).

    Raises
    ------
    DataError
        A frame or mapping lacking inputs (named), an array of the wrong width, an unreadable file, or an event log
        with no valid event for the model.
    """
    if isinstance(data, Rows):
        return data
    if _is_frame(data):
        return _frame_rows(data, model, what=what, feature_names=feature_names, label_column=label_column)
    if isinstance(data, Mapping):
        return _mapping_rows(data, model.signature, what)
    if isinstance(data, np.ndarray):
        return _array_rows(data, model, what)
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        suffix = path.suffix.lower()
        if suffix == ".jsonl":
            return read_events(path, model, feature_names=feature_names, model_name=model_name, max_events=max_events)
        if suffix == ".parquet":
            pd = _pandas()
            try:
                frame = pd.read_parquet(path)
            except ImportError:
                raise MissingExtraError(f"reading parquet needs pyarrow: {FRAME_EXTRA}") from None
            except (OSError, ValueError) as exc:
                raise DataError(f"{what} '{path}' is not a readable parquet file: {exc}", path=str(path)) from None
            rows = _frame_rows(
                frame, model, what=f"{what} '{path}'", feature_names=feature_names, label_column=label_column
            )
            return dataclasses.replace(rows, source=f"read {len(rows)} rows from '{path}' (parquet)", index=None)
        if suffix == ".json":
            raise DataError(
                f"{what} '{path}' is a JSON file; rows are .csv, .npy, .npz, .parquet or a .jsonl event log (a "
                "reference JSON is taken as a reference, not as data)",
                path=str(path),
            )
        from monitor.model.io import read_model_rows

        table = read_model_rows(path, model.signature, header)  # type: ignore[arg-type]
        if table.rows.shape[1] != model.n_features:
            raise DataError(
                f"{what} '{path}' has {table.rows.shape[1]} columns; the model expects {model.n_features} features. "
                "Was the file written for another model?",
                path=str(path),
            )
        return Rows(table.rows, table.held, table.describe())
    raise DataError(
        f"{what}: expected a pandas DataFrame, a numpy array, a mapping of arrays by input name or a file path; got "
        f"{type(data).__name__}"
    )


def _array_rows(arr: NDArray[Any], model: OnnxModel, what: str) -> Rows:
    sig = model.signature
    if not sig.plain:
        if len(sig.inputs) == 1:
            return _mapping_rows({sig.inputs[0].name: arr}, sig, what)
        total = sum(s.size for s in sig.inputs)
        if sig.held_inputs or arr.ndim != 2 or arr.shape[1] != total:
            _refuse_array(sig, what)
        from monitor.model.io import _split_flat

        rows = _mapping_rows(_split_flat(np.asarray(arr, dtype=np.float64), sig.inputs), sig, what)
        return dataclasses.replace(rows, source=f"{arr.shape[0]} rows from an array (the inputs in graph order)")
    x = np.asarray(arr, dtype=np.float64)
    if x.ndim == 1:
        x = x.reshape(1, -1)
    if x.ndim != 2 or x.shape[1] != model.n_features:
        raise DataError(
            f"{what}: an array of shape {arr.shape}; the model takes (N, {model.n_features}) rows of its features "
            f"({', '.join(sig.features[:5])}{' …' if model.n_features > 5 else ''})"
        )
    return Rows(x, None, f"{x.shape[0]} rows from an array")


def _refuse_array(sig: Signature, what: str) -> None:
    raise DataError(
        f"{what}: an array cannot carry the model's inputs ({sig.describe()}) unless it is (N, total float values) "
        "of a model without int, bool or string inputs; pass a DataFrame with columns named by them or a mapping of "
        "arrays by input name"
    )


def _mapping_rows(inputs: Mapping[str, Any], sig: Signature, what: str) -> Rows:
    from monitor.errors import ModelError

    try:
        x, held = sig.split({k: np.asarray(v) for k, v in inputs.items()}, where=what)
    except ModelError as exc:
        raise DataError(str(exc)) from None
    return Rows(x, held if sig.has_held else None, f"{x.shape[0]} rows from arrays by input name")


def _frame_rows(
    frame: Any,
    model: OnnxModel,
    *,
    what: str,
    feature_names: Sequence[str] | None,
    label_column: str | None,
) -> Rows:
    sig = model.signature
    columns = [str(c) for c in frame.columns]
    present = set(columns)
    labels = None
    if label_column is not None:
        if label_column not in present:
            raise DataError(f"{what} has no label column '{label_column}'; its columns: {', '.join(columns[:20])}")
        labels = frame[label_column].to_numpy()
    wanted = {spec.name: spec.element_names() for spec in sig.inputs}
    every = [n for names in wanted.values() for n in names]
    if all(n in present for n in every):
        inputs: dict[str, NDArray[Any]] = {}
        n = len(frame)
        for spec in sig.inputs:
            block = frame[wanted[spec.name]]
            if spec.type_name == "string":
                values = np.asarray(block.astype(str).to_numpy(), dtype=object)
            elif spec.is_float:
                values = _numeric(block, what)
            else:
                values = _numeric(block, what).astype(spec.dtype)
            inputs[spec.name] = values.reshape(n, *spec.dims)
        rows = _mapping_rows(inputs, sig, what)
        return dataclasses.replace(
            rows, source=f"{n} rows from a DataFrame (columns by name)", labels=labels, index=frame.index
        )
    if sig.plain and feature_names and all(n in present for n in feature_names):
        x = _numeric(frame[list(feature_names)], what)
        return Rows(
            x, None, f"{len(x)} rows from a DataFrame (the reference's feature names)", labels=labels, index=frame.index
        )
    missing = [n for n in every if n not in present]
    if sig.plain and len(columns) == model.n_features and not feature_names:
        x = _numeric(frame, what)
        return Rows(
            x,
            None,
            f"{len(x)} rows from a DataFrame (columns in order as the model's features)",
            labels=labels,
            index=frame.index,
        )
    shown = ", ".join(f"'{m}'" for m in missing[:10]) + (" …" if len(missing) > 10 else "")
    raise DataError(
        f"{what} lacks columns {shown}; the model takes {sig.describe()} (one column per input, or per element "
        f"named like '{every[0]}'); the frame has {', '.join(repr(c) for c in columns[:10])}"
        + (" …" if len(columns) > 10 else "")
    )


def _numeric(block: Any, what: str) -> NDArray[np.float64]:
    try:
        return np.asarray(block.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64)
    except (TypeError, ValueError) as exc:
        bad = [str(c) for c in block.columns if block[c].dtype.kind not in "biuf"]
        raise DataError(
            f"{what}: columns {', '.join(bad) or '?'} must be numbers for the model's float inputs: {exc}"
        ) from None


def read_events(
    path: str | os.PathLike[str],
    model: OnnxModel,
    *,
    feature_names: Sequence[str] | None = None,
    model_name: str | None = None,
    max_events: int | None = None,
) -> Rows:
    """The events of a ``.jsonl`` log for ``model``, decoded as ``run`` decodes Kafka messages.

    Lines that do not decode are counted by reason (``invalid_json``, ``missing_field``, ``unknown_model`` …) and
    skipped; events name the model in ``model`` or default to ``model_name`` (the ONNX file's stem by default).
    ``max_events``: read only the first that many non-blank lines.
    """
    from monitor.events import feature_rows, held_rows
    from monitor.source.decode import EventDecoder
    from monitor.source.validate import ModelSchema

    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise DataError(
            f"event log '{p}' cannot be read: {exc.strerror or exc} (expected JSON lines)", path=str(p)
        ) from None
    name = model_name or log_model_name(p, _model_path(model))
    names = (
        tuple(feature_names)
        if feature_names and model.signature.plain and len(feature_names) == model.n_features
        else None
    )
    schema = ModelSchema(model.n_features, names, signature=model.signature)
    decoder = EventDecoder({name: schema}, default_model=name)
    events = []
    lines: list[int] = []
    invalid: dict[str, int] = {}
    invalid_inputs: dict[str, int] = {}
    seen = 0
    for number, line in enumerate(raw.split(b"\n")):
        if not line.strip():
            continue
        if max_events is not None and seen >= max_events:
            break
        seen += 1
        try:
            decoded = decoder.decode_many(line.rstrip(b"\r"), origin=(str(p), 0, number), now=0.0)
        except InvalidEventError as exc:
            invalid[exc.reason] = invalid.get(exc.reason, 0) + 1
            for feature, problem in exc.inputs:
                key = f"{feature}: {problem}"
                invalid_inputs[key] = invalid_inputs.get(key, 0) + 1
            continue
        for ev in decoded:
            events.append(ev)
            lines.append(number)
    if not events:
        reasons = ", ".join(f"{k}: {v}" for k, v in sorted(invalid.items())) or "no lines"
        raise DataError(f"event log '{p}' holds no valid event for model '{name}' ({reasons})", path=str(p))
    x = feature_rows(events)
    held = held_rows(events) if model.signature.has_held else None
    return Rows(
        x,
        held,
        f"{len(events)} events from '{p}'" + (f"; {sum(invalid.values())} invalid lines" if invalid else ""),
        invalid=invalid,
        invalid_inputs=invalid_inputs,
        timestamps=np.array([ev.timestamp_seconds for ev in events], dtype=np.float64),
        segments=tuple(ev.segment for ev in events),
        lines=np.asarray(lines, dtype=np.int64),
    )


def log_model_name(path: Path, model_path: str, *, lines: int = 200) -> str:
    """The model an event log's events name (the most common ``model`` among its first ``lines`` lines), else the
    ONNX file's stem (what ``run`` calls a model given by ``--model``)."""
    counts: dict[str, int] = {}
    try:
        with path.open("rb") as fh:
            for k, line in enumerate(fh):
                if k >= lines:
                    break
                try:
                    doc = json.loads(line)
                except ValueError:
                    continue
                name = doc.get("model") if isinstance(doc, dict) else None
                if isinstance(name, str):
                    counts[name] = counts.get(name, 0) + 1
    except OSError:
        pass
    return max(counts, key=lambda n: counts[n]) if counts else Path(model_path).stem


# ---------------------------------------------------------------------------------------------------- baseline


@dataclass(frozen=True)
class _Baseline:
    standardizer: Standardizer
    held_sample: Held | None
    reference: Reference | None
    fit: EstimatorFit | None
    scales: SignalScales | None
    path: Path | None
    feature_names: tuple[str, ...] | None
    rows: Rows | None


def _baseline(
    reference: Any,
    model: OnnxModel,
    data: Rows | None,
    *,
    space: str,
    header: str = "auto",
    scale: str = _SCORING.scale,
    channel_axis: int = _SCORING.channel_axis,
) -> _Baseline:
    """The standardizer (identity in ``raw`` space), held sample, reference distributions, fitted estimators and
    scales of ``reference`` (default: of ``data``); ``scale``/``channel_axis``: standardize per feature, globally or
    per image channel (:func:`monitor.model.signature.scale_groups`)."""
    from monitor.model.standardize import Standardizer

    if space not in ("standardized", "raw"):
        raise DataError(f"space must be 'standardized' or 'raw'; got {space!r}")

    if isinstance(reference, ReferenceResult):
        return _Baseline(
            reference.standardizer,
            reference.held_sample,
            reference.reference,
            reference.fit,
            reference.scales,
            reference.path,
            reference.reference.feature_names,
            None,
        )
    if isinstance(reference, (str, os.PathLike)) and str(reference).lower().endswith(".json"):
        base = _json_baseline(Path(reference), model)
        if space == "raw":  # radius and σ in the features' own units
            base = dataclasses.replace(base, standardizer=Standardizer.identity(model.n_features))
        return base
    rows = data if reference is None else read_rows(reference, model, what="reference", header=header)
    if rows is None:
        raise DataError("a reference is needed: rows, a reference JSON or monitor.reference(...)'s result")
    finite = np.all(np.isfinite(rows.x), axis=1)
    if not finite.any():
        raise DataError(f"the reference ({rows.source}) has no finite rows to standardize with")
    if space == "raw":
        std = Standardizer.identity(model.n_features)
    else:
        groups = None
        if scale != "per_feature":
            from monitor.errors import ModelError
            from monitor.model.signature import scale_groups

            try:
                groups = scale_groups(model.signature, scale, channel_axis)
            except ModelError as exc:
                raise ConfigError(str(exc)) from None
        std = Standardizer.fit(rows.x[finite], groups=groups)
    held = None if rows.held is None else rows.held.take(finite)
    return _Baseline(std, held, None, None, None, None, None, rows.take(finite) if reference is not None else None)


def standardizer_of(
    reference: Any,
    model: OnnxModel,
    *,
    space: str = _SCORING.space,
    header: str = "auto",
    scale: str = _SCORING.scale,
    channel_axis: int = _SCORING.channel_axis,
) -> Standardizer:
    """The standardizer a reference gives (rows, a reference JSON or :func:`reference`'s result), as :func:`score`
    standardizes by it (identity in ``raw`` space)."""
    base = _baseline(reference, model, None, space=space, header=header, scale=scale, channel_axis=channel_axis)
    return base.standardizer


def _json_baseline(path: Path, model: OnnxModel) -> _Baseline:
    from monitor.accuracy import EstimatorFit
    from monitor.rolling.reference_file import read_accuracy_estimator, read_held_sample, read_reference, read_scales

    standardizer, ref = read_reference(path, model.n_features)
    block = read_accuracy_estimator(path)
    return _Baseline(
        standardizer,
        read_held_sample(path, model.signature),
        ref,
        None if block is None else EstimatorFit.from_dict(block),
        read_scales(path),
        path,
        ref.feature_names,
        None,
    )


@dataclass(frozen=True)
class _Scoring:
    """The scoring keywords :func:`score`, :func:`reference` and :func:`estimate` share (``harmonic-monitor
    score``'s options), gathered once per call; the names are :class:`~monitor.signals.scorer.ScoringConfig`'s."""

    radius: float
    sigma: float
    flicker_copies: int
    steps: int
    seed: int
    ball: str
    output: str
    regression_tolerance: float

    def config(self, scales: SignalScales | None = None) -> ScoringConfig:
        """The scorer's configuration; ``scales`` (a reference's own choice) replace radius and σ, as ``run``
        scores at them."""
        from monitor.signals.scorer import ScoringConfig

        chosen = self if scales is None else dataclasses.replace(self, radius=scales.radius, sigma=scales.sigma)
        return ScoringConfig(**dataclasses.asdict(chosen))


def _scorer(model: OnnxModel, base: _Baseline, scoring: _Scoring) -> RobustnessScorer:
    """The scorer of ``base``'s standardizer and held sample, at the reference's own scales where it chose them."""
    from monitor.signals.control import control_for
    from monitor.signals.scorer import RobustnessScorer

    held = base.held_sample if model.signature.has_held else None
    cfg, rows = scoring.config(base.scales), None if base.reference is None else base.reference.feature_sample
    control = control_for(model, base.standardizer, cfg.radius, cfg.ball, rows)  # γ_logit at high dimension
    return RobustnessScorer(model, base.standardizer, cfg, held_sample=held, control=control)


def score_rows(
    scorer: RobustnessScorer, x: NDArray[np.float64], held: Held | None, batch_rows: int = BATCH_ROWS
) -> ScoreResult:
    """Score ``x`` in calls of ``batch_rows`` rows; one :class:`ScoreResult` for all."""
    from monitor.rolling.reference_build import score_in_batches

    return score_in_batches(scorer, x, held, batch_rows)


# ---------------------------------------------------------------------------------------------------- the API


def score(
    model: ModelLike,
    data: DataLike,
    reference: Any = None,
    *,
    radius: float = _SCORING.radius,
    sigma: float = _SCORING.sigma,
    flicker_copies: int = _SCORING.flicker_copies,
    steps: int = _SCORING.steps,
    seed: int = _SCORING.seed,
    ball: str = _SCORING.ball,
    output: str = _SCORING.output,
    space: str = _SCORING.space,
    batch_rows: int = BATCH_ROWS,
    model_kind: str = _MODEL_KIND,
    header: str = "auto",
    max_events: int | None = None,
    as_frame: bool | None = None,
    scale: str = _SCORING.scale,
    channel_axis: int = _SCORING.channel_axis,
    regression_tolerance: float = _SCORING.regression_tolerance,
) -> Any:
    """γ, flicker and P_adj for every row of ``data`` (and the class with its probability for a classifier).

    Parameters
    ----------
    model : an ONNX path or a loaded model.
    data : a DataFrame, array, mapping or file (``.csv``/``.npy``/``.npz``/``.parquet``/``.jsonl``).
    reference : what standardizes the radius and σ (rows, a reference JSON or :func:`reference`'s result); default
        the data itself. A reference JSON or :class:`ReferenceResult` also gives ``yardstick``.
    radius, sigma, flicker_copies, steps, seed, ball, output, space, scale, channel_axis, regression_tolerance :
        as ``harmonic-monitor score``'s options (a reference JSON that chose its own scales is scored at them, as
        ``run`` does, not at ``radius`` and ``sigma``).
    as_frame : return a DataFrame (True), the typed :class:`ScoreTable` (False), or a DataFrame exactly when ``data``
        is one (None, the default).

    Returns
    -------
    pandas.DataFrame or ScoreTable
        One row per input row (per valid event of a log), in order: ``gamma``, ``flicker``, ``p_adj`` (and ``class``,
        ``probability``, ``margin`` for a classifier). A DataFrame keeps the input frame's index, and its ``attrs``
        hold ``"score"``: the :class:`ScoreTable` (``yardstick``, ``invalid``, ``summary()``).

    Examples
    --------
    >>> import numpy as np, monitor
    >>> from monitor.examples import linear_classifier
    >>> rows = np.random.default_rng(1).normal(size=(30, 3))
    >>> t = monitor.score(linear_classifier(), rows, reference=rows, flicker_copies=4)
    >>> len(t), t.kind, bool((t.columns["gamma"] >= 0).all())
    (30, 'classifier', True)
    """
    scoring = _Scoring(radius, sigma, flicker_copies, steps, seed, ball, output, regression_tolerance)
    m = load_model(model, model_kind=model_kind)
    if batch_rows < 1:
        raise DataError(f"batch size must be >= 1; got {batch_rows}")
    ref_is_data = reference is data
    std_args: dict[str, Any] = {"space": space, "header": header, "scale": scale, "channel_axis": channel_axis}
    base0 = None
    if reference is not None and not ref_is_data:
        base0 = _baseline(reference, m, None, **std_args)
    names = None if base0 is None else base0.feature_names
    rows = read_rows(data, m, header=header, feature_names=names, max_events=max_events)
    base = base0 if base0 is not None else _baseline(None, m, rows, **std_args)
    scorer = _scorer(m, base, scoring)
    res = score_rows(scorer, rows.x, rows.held, batch_rows)
    sources = {"data": rows.source}
    if base.rows is not None:
        sources["reference"] = base.rows.source
    table = dataclasses.replace(_score_table(m.kind, res, rows), result=res, sources=sources)
    ref = base.reference
    if ref is None and base.rows is not None:  # reference rows: score a sample of them for the yardstick
        sample = base.rows.take(np.random.default_rng(seed).permutation(len(base.rows))[:2000])
        ref = scored_reference(scorer, sample, m.kind, batch_rows, min_valid=10)
    if ref is not None:
        table = dataclasses.replace(table, yardstick=yardsticks(live_signals(res, m.kind), ref))
    if as_frame or (as_frame is None and _is_frame(data)):
        frame = table.to_frame()
        frame.attrs["score"] = table
        return frame
    return table


def live_signals(res: ScoreResult, kind: str) -> dict[str, NDArray[np.float64]]:
    """The signals a yardstick sets beside the reference: γ and flicker, and a classifier's confidence."""
    live = {"gamma": res.gamma, "flicker": res.flicker}
    if kind == "classifier":
        live["confidence"] = res.probability
    return live


def scored_reference(
    scorer: RobustnessScorer, rows: Rows, kind: str, batch_rows: int = BATCH_ROWS, *, min_valid: int = 0
) -> Reference | None:
    """The reference distributions of reference rows (γ, flicker, features, a classifier's confidence), scored by
    ``scorer``: what a yardstick compares with when the reference is rows, not a reference JSON. None where fewer
    than ``min_valid`` rows score."""
    from monitor.rolling.reference import Reference

    res = score_rows(scorer, rows.x, rows.held, batch_rows)
    ok = res.valid
    if int(ok.sum()) < min_valid:
        return None
    return Reference.from_arrays(
        gamma=res.gamma[ok],
        flicker=res.flicker[ok],
        features=rows.x[ok],
        confidence=res.probability[ok] if kind == "classifier" else None,
    )


def _score_table(kind: str, res: ScoreResult, rows: Rows) -> ScoreTable:
    cols: dict[str, NDArray[Any]] = {"gamma": res.gamma, "flicker": res.flicker, "p_adj": res.p_adj}
    if kind == "classifier":
        cols["class"] = np.where(res.valid, res.predicted_class, -1)
        cols["probability"] = res.probability
        cols["margin"] = res.margin
    cols.update({} if res.gamma_se is None else {"gamma_se": res.gamma_se})  # γ's error against the full ball
    return ScoreTable(
        cols, kind=kind, n_invalid_rows=int((~res.valid).sum()), invalid=dict(rows.invalid), index=rows.index
    )


def reference(
    model: ModelLike,
    data: DataLike,
    *,
    labels: Any = None,
    feature_names: Sequence[str] | None = None,
    sample_rows: int = 5000,
    radius: float = _SCORING.radius,
    sigma: float = _SCORING.sigma,
    flicker_copies: int = _SCORING.flicker_copies,
    steps: int = _SCORING.steps,
    seed: int = _SCORING.seed,
    ball: str = _SCORING.ball,
    output: str = _SCORING.output,
    space: str = _SCORING.space,
    calibration: str = "temperature",
    model_kind: str = _MODEL_KIND,
    out: str | os.PathLike[str] | None = None,
    scales: str = "fixed",
    target_flicker_share: float = 0.5,
    regression_tolerance: float = _SCORING.regression_tolerance,
    standardizer: Standardizer | None = None,
    label_kind: str = "values",
    segment_column: str | None = None,
    max_segments: int = _MAX_SEGMENTS,
    reference: Any = None,
    header: str = "auto",
    scale: str = _SCORING.scale,
    channel_axis: int = _SCORING.channel_axis,
) -> ReferenceResult:
    """Build a reference from reference rows: what ``harmonic-monitor reference`` writes for the same rows and
    options, built by the same function (:func:`monitor.rolling.reference_build.build_reference`): the count tables
    of held (string, int, bool) inputs over every row, the scored sample, per-segment baselines, scales and fit.

    ``labels``: the true class of each row (an array, a column name of a DataFrame ``data``, or a ``.csv``/``.npy``
    file) to fit the label-free accuracy estimators; ``out``: also write the JSON there. ``segment_column``: the
    DataFrame's (or the CSV's) column naming each row's segment; the reference then keeps a baseline per segment
    (each of the ``max_segments`` most frequent with at least 200 rows, the rest as ``other``), each from a sample of
    at most ``sample_rows`` of its rows. A segment column that is also a model input stays an input. ``scales``:
    ``fixed`` scores at ``radius`` and ``sigma``; ``from-reference`` chooses σ (= r) so that
    ``target_flicker_share`` of the rows flicker and records it (``ReferenceResult.scales``; ``run`` then scores at
    it). ``reference``: rows or a reference JSON to standardize by instead of ``data`` (``harmonic-monitor reference
    --reference``); ``standardizer``: this standardizer instead. ``label_kind``: ``values`` (labels are the class
    values the model's integer label output gives, else class indices) or ``indices`` (class indices 0..C−1).

    Examples
    --------
    >>> import numpy as np, monitor
    >>> from monitor.examples import linear_classifier
    >>> ref = monitor.reference(linear_classifier(), np.random.default_rng(2).normal(size=(50, 3)),
    ...                         flicker_copies=4)
    >>> ref.reference.n_events, ref.fit is None
    (50, True)
    """
    from monitor.rolling.reference_build import build_reference

    scoring = _Scoring(radius, sigma, flicker_copies, steps, seed, ball, output, regression_tolerance)
    m = load_model(model, model_kind=model_kind)
    rows, source = _reference_rows(
        data, m, labels=labels, header=header, segment_column=segment_column, feature_names=feature_names
    )
    held_sample = None  # the rows' own, unless the standardizing reference brings its own
    if standardizer is None:
        from monitor.model.standardize import Standardizer

        standardizer = Standardizer.identity(m.n_features)  # rows without a finite one are refused below
        if reference is not None or np.all(np.isfinite(rows.x), axis=1).any():
            own = Rows(rows.x, rows.held, source)
            base = _baseline(reference, m, own, space=space, header=header, scale=scale, channel_axis=channel_axis)
            standardizer, held_sample = base.standardizer, base.held_sample if reference is not None else None
    built = build_reference(
        m,
        rows,
        standardizer,
        scoring.config(),
        held_sample=held_sample,
        sample_rows=sample_rows,
        scales=scales,
        target_flicker_share=target_flicker_share,
        feature_names=feature_names,
        max_segments=max_segments,
        calibration=calibration,
        label_kind=label_kind,
    )
    result = ReferenceResult(
        standardizer,
        built.reference,
        space,
        _model_path(model),
        built.held_sample,
        built.fit,
        built.scales,
        segments=built.segments,
        segment_column=segment_column if built.segments else None,
        notes=(f"data: {source}", *built.notes),
    )
    if out is not None:
        result = dataclasses.replace(result, path=result.save(out))
    return result


def _reference_rows(
    data: DataLike,
    model: OnnxModel,
    *,
    labels: Any,
    header: str,
    segment_column: str | None,
    feature_names: Sequence[str] | None,
) -> tuple[ReferenceRows, str]:
    """``data`` as reference rows with their segments (``segment_column``) and labels, and what was read (a frame's
    columns named by ``feature_names`` are a plain model's features)."""
    from monitor.rolling.reference_build import ReferenceRows

    label_column = labels if isinstance(labels, str) and _is_frame(data) else None
    read: dict[str, Any] = {"header": header, "label_column": label_column, "feature_names": feature_names}
    if segment_column is None:
        rows = read_rows(data, model, **read)
        segments = None
    elif _is_frame(data):
        rows = read_rows(data, model, **read)
        segments = _frame_segments(data, segment_column)
    elif isinstance(data, (str, os.PathLike)):
        rows, segments = _csv_segments(Path(data), model, segment_column, header)
    else:
        raise DataError(
            f"segment_column '{segment_column}' names a column of a DataFrame or of a CSV with a header; the data is "
            f"{type(data).__name__}: pass a DataFrame or a CSV path"
        )
    if segments is not None and segments.size != len(rows):
        raise DataError(
            f"segment column '{segment_column}': {segments.size} values for {len(rows)} rows of {rows.source}; "
            "every row needs one"
        )
    if label_column is not None:
        y = rows.labels
    elif isinstance(labels, (str, os.PathLike)):
        y = load_labels(labels, header=header)
        if y.shape[0] != len(rows):
            raise DataError(
                f"labels '{labels}' has {y.shape[0]} values; expected one class per data row ({len(rows)})",
                path=str(labels),
            )
    else:
        y = None if labels is None else np.asarray(labels).reshape(-1)
    if y is not None and y.shape[0] != len(rows):
        raise DataError(f"labels: {y.shape[0]} values for {len(rows)} rows; give one class per row")
    name = f"'{data}'" if isinstance(data, (str, os.PathLike)) else f"the reference data ({rows.source})"
    y_int = None if y is None else _int_labels(y)
    return ReferenceRows(rows.x, rows.held, name, segments, y_int), rows.source


def _frame_segments(frame: Any, column: str) -> NDArray[np.str_]:
    """The frame's ``column`` as each row's segment (a missing or blank value: ``other``)."""
    from monitor.rolling.windows import OTHER

    if column not in frame.columns:
        shown = ", ".join(repr(str(c)) for c in list(frame.columns)[:12])
        raise DataError(f"segment_column '{column}': the DataFrame has no such column (it has {shown})")
    missing = np.asarray(frame[column].isna().to_numpy(), dtype=bool)
    text = np.array([str(v).strip() for v in frame[column].to_numpy(dtype=object)], dtype=str)
    return np.where(missing | (text == ""), OTHER, text)


def _csv_segments(path: Path, model: OnnxModel, column: str, header: str) -> tuple[Rows, NDArray[np.str_]]:
    """The rows of the CSV ``path`` and its ``column`` as each row's segment; the column is read as the model's
    input too when it names one (:func:`~monitor.rolling.segment_baselines.split_segment_column`)."""
    from monitor.rolling.segment_baselines import is_input_column, split_segment_column

    keep = is_input_column(model.signature, column)
    with split_segment_column(path, column, flag="segment column", keep=keep) as (copy, segments):
        rows = read_rows(copy, model, header=header)
    return dataclasses.replace(rows, source=rows.source.replace(str(copy), str(path))), segments


def load_labels(path: str | os.PathLike[str], *, header: str = "auto") -> NDArray[np.int64]:
    """One integer class per row from a ``.csv``/``.npy`` file (one column or one row).

    Raises
    ------
    DataError
        An unreadable file, or a value that is not an integer.
    """
    from monitor.model.io import load_rows

    raw = load_rows(path, header).reshape(-1)  # type: ignore[arg-type]
    if not np.all(np.isfinite(raw)) or np.any(raw != np.round(raw)):
        raise DataError(f"labels '{path}' must hold integer classes (class values or indices 0..C−1)", path=str(path))
    return raw.astype(np.int64)


def _int_labels(y: NDArray[Any]) -> NDArray[np.int64]:
    v = np.asarray(y)
    if v.dtype.kind not in "iub":
        f = v.astype(np.float64)
        if not np.all(np.isfinite(f)) or np.any(f != np.round(f)):
            raise DataError("labels must be integer classes (the class values the model's label output gives)")
    return v.astype(np.int64)


def estimate(
    model: ModelLike,
    data: DataLike,
    reference: Any,
    *,
    labels: Any = None,
    method: str | None = None,
    flicker_copies: int = _SCORING.flicker_copies,
    seed: int = _SCORING.seed,
    model_kind: str = _MODEL_KIND,
    max_events: int | None = None,
    radius: float = _SCORING.radius,
    sigma: float = _SCORING.sigma,
    steps: int = _SCORING.steps,
    ball: str = _SCORING.ball,
    output: str = _SCORING.output,
    space: str = _SCORING.space,
    scale: str = _SCORING.scale,
    channel_axis: int = _SCORING.channel_axis,
    regression_tolerance: float = _SCORING.regression_tolerance,
    header: str = "auto",
) -> AccuracyEstimate:
    """The model's accuracy on unlabelled ``data``, with a 90 % interval, from the estimators the reference holds
    (a reference JSON written with labels, or :func:`reference` called with ``labels``); ``labels`` here (an array or
    a DataFrame column name) adds the realized accuracy beside the estimate. The scoring options are
    :func:`score`'s (``harmonic-monitor estimate``'s flags).

    Raises
    ------
    DataError
        A reference without fitted estimators (the message says how to build one), or a regressor.
    """
    scoring = _Scoring(radius, sigma, flicker_copies, steps, seed, ball, output, regression_tolerance)
    m = load_model(model, model_kind=model_kind)
    if m.kind != "classifier":
        raise DataError(f"'{_model_path(model)}' is read as a {m.kind}: accuracy estimation is for classifiers")
    base = _baseline(reference, m, None, space=space, header=header, scale=scale, channel_axis=channel_axis)
    if base.fit is None:
        raise DataError(
            "the reference holds no fitted accuracy estimator; build it with labels: "
            "monitor.reference(model, rows, labels=y) or `harmonic-monitor reference --labels`"
        )
    label_column = labels if isinstance(labels, str) and _is_frame(data) else None
    rows = read_rows(
        data, m, header=header, feature_names=base.feature_names, label_column=label_column, max_events=max_events
    )
    scorer = _scorer(m, base, scoring)
    res = score_rows(scorer, rows.x, rows.held)
    y = rows.labels if label_column is not None else (None if labels is None else np.asarray(labels).reshape(-1))
    return accuracy_from_scores(base.fit, res, m, rows, y, method=method, seed=seed)


def accuracy_from_scores(
    fit: EstimatorFit,
    res: ScoreResult,
    model: OnnxModel,
    rows: Rows,
    labels: NDArray[Any] | None,
    *,
    method: str | None = None,
    seed: int = _SCORING.seed,
) -> AccuracyEstimate:
    """The estimate over scored rows (and the realized accuracy where ``labels``, one per row, are given)."""
    from monitor.accuracy import estimate as run_estimate

    doc = run_estimate(
        fit, np.where(res.valid, res.probability, np.nan), res.gamma, res.flicker, res.p_adj, method=method, seed=seed
    )
    realized, n_labelled = None, 0
    if labels is not None:
        if labels.shape[0] != len(rows):
            raise DataError(f"labels: {labels.shape[0]} values for {len(rows)} rows; give one class per row")
        predicted = predicted_values(model, rows)
        ok = res.valid
        n_labelled = int(ok.sum())
        realized = float(np.mean(predicted[ok] == _int_labels(labels)[ok])) if n_labelled else None
    acc = doc["accuracy"]
    return AccuracyEstimate(
        float(acc["estimate"]),
        float(acc["lower"]),
        float(acc["upper"]),
        str(acc["method"]),
        float(doc["level"]),
        int(doc["n"]),
        float(doc["reference_accuracy"]),
        {k: {kk: float(vv) for kk, vv in v.items() if isinstance(vv, (int, float))} for k, v in doc["methods"].items()},
        tuple(doc["warnings"]),
        realized,
        n_labelled,
        doc,
        fit,
    )


def predicted_values(model: OnnxModel, rows: Rows) -> NDArray[np.int64]:
    """What a label is compared with: the model's own class value when its label output is an integer, else the
    predicted class index (as ``run``'s label join compares)."""
    out = model.evaluate(np.nan_to_num(rows.x).astype(np.float32), rows.held)
    raw = out.raw_label
    values = raw if raw is not None and raw.dtype.kind in "iu" else out.label
    if values is None:
        raise DataError("the model gives no predicted class; labels are for classifiers")
    return np.asarray(values).astype(np.int64).reshape(-1)


def probe(
    model: ModelLike,
    data: DataLike,
    reference: Any = None,
    *,
    options: ProbeOptions | None = None,
    budget_rows: int | None = None,
    steps: int | None = None,
    eps: float | None = None,
    seed: int | None = None,
    labels: Any = None,
    space: str = _SCORING.space,
    model_kind: str = _MODEL_KIND,
    header: str = "auto",
    scale: str = _SCORING.scale,
    channel_axis: int = _SCORING.channel_axis,
    data_path: str | None = None,
    reference_path: str | None = None,
) -> ProbeReport:
    """Run the probe funnel on the rows of ``data`` as one region (``harmonic-monitor probe``, the same report).

    ``options``: :class:`monitor.probes.offline.ProbeOptions` (the command's defaults: certified radius with 32
    copies, no L2 boundary search …); ``budget_rows``, ``steps``, ``eps`` and ``seed`` override its values.
    ``reference``: what standardizes ε (rows, a reference JSON or :func:`reference`'s result; default the data);
    ``labels``: true class indices, one per row. ``data_path``/``reference_path``: the names the report records
    (default: the paths given, if paths).

    Examples
    --------
    >>> import numpy as np, monitor
    >>> from monitor.examples import linear_classifier
    >>> r = monitor.probe(linear_classifier(), np.random.default_rng(3).normal(size=(5, 3)), steps=0)
    >>> sorted(r.mri)[:2], r.result.n_points
    (['dropout', 'gamma_ascent'], 5)
    """
    from monitor.probes.offline import ProbeOptions, probe_region

    opts = options if options is not None else ProbeOptions()
    funnel = opts.funnel
    funnel = funnel if steps is None else dataclasses.replace(funnel, steps=steps)
    funnel = funnel if eps is None else dataclasses.replace(funnel, eps=eps)
    funnel = funnel if seed is None else dataclasses.replace(funnel, seed=seed)
    opts = dataclasses.replace(opts, funnel=funnel)
    if budget_rows is not None:
        opts = dataclasses.replace(opts, budget_rows=budget_rows)
    m = load_model(model, model_kind=model_kind)
    rows = read_rows(data, m, header=header)
    if not np.all(np.isfinite(rows.x)):
        raise DataError(f"{rows.source}: rows with NaN or infinite values cannot be probed; remove them")
    if data_path is None and isinstance(data, (str, os.PathLike)):
        data_path = str(data)
    if reference_path is None and isinstance(reference, (str, os.PathLike)):
        reference_path = str(reference)
    if m.signature.plain and data_path is not None and data_path.lower().endswith(".csv"):
        from monitor.model.io import read_rows as read_csv_rows

        names = read_csv_rows(data_path, header).names  # type: ignore[arg-type]
        if names is not None:
            m.name_features(names, source=f"--data '{data_path}' header")
    base = _baseline(reference, m, rows, space=space, header=header, scale=scale, channel_axis=channel_axis)
    ref_rows = base.rows
    fill = None
    if space == "raw":  # dropout still writes the reference (or data) mean, in raw units
        if base.reference is not None:
            fill = base.reference.feature_mean
        else:
            fill = (ref_rows.x if ref_rows is not None else rows.x).mean(axis=0)
    y = None if labels is None else _int_labels(np.asarray(labels).reshape(-1))
    if y is not None and y.shape[0] != len(rows):
        raise DataError(f"labels: {y.shape[0]} values for {len(rows)} rows; expected one class index per row")
    result, doc = probe_region(
        m,
        base.standardizer,
        rows.x,
        rows.held,
        opts,
        space=space,
        model_path=_model_path(model),
        reference=None if ref_rows is None else ref_rows.x,
        reference_held=None if ref_rows is None else ref_rows.held,
        fill=fill,
        labels=y,
        data_path=data_path,
        reference_path=reference_path,
    )
    return ProbeReport(result, doc)


def replay(
    model: ModelLike | None,
    events: str | os.PathLike[str],
    reference: Any = None,
    *,
    config: str | os.PathLike[str] | None = None,
    max_events: int | None = None,
    state_dir: str | os.PathLike[str] | None = None,
    model_name: str | None = None,
    keep_scores: bool = False,
    batch_events: int | None = None,
) -> ReplayTimeline:
    """Run the ``run`` pipeline over a ``.jsonl`` event log in event time (``harmonic-monitor replay``).

    ``reference``: a reference JSON or rows file path, or :func:`reference`'s result (saved to a temporary file);
    ``config``: a YAML configuration (detectors, segments, alerts), as ``run`` reads it; ``batch_events``: events
    per micro-batch unless the configuration names a size (default 10: a verdict change lands within that many
    events of the event that decided it; larger batches replay faster); ``keep_scores``: the timeline also holds
    every scored event's features and scores.
    """
    from monitor.runtime.replay import replay_log, replay_settings

    with tempfile.TemporaryDirectory(prefix="harmonic-replay-") as tmp:
        ref_path: str | None
        if isinstance(reference, ReferenceResult):
            ref_path = str(reference.path or reference.save(Path(tmp) / "reference.json"))
        elif reference is None or isinstance(reference, (str, os.PathLike)):
            ref_path = None if reference is None else str(reference)
        else:
            raise DataError(
                "replay's reference is a file path or monitor.reference(...)'s result (the pipeline reads it as "
                "`run` does); save rows with numpy.save or DataFrame.to_csv first"
            )
        flags: dict[str, Any] = {}
        if model is not None:
            path = _model_path(model)
            entry: dict[str, Any] = {"name": model_name or log_model_name(Path(events), path), "path": path}
            if ref_path is not None:
                entry["reference"] = ref_path
            flags["models"] = [entry]
        elif model_name is not None or ref_path is not None:
            raise DataError("replay: model_name and reference need a model (or put them in the config's `models:`)")
        state = Path(state_dir) if state_dir is not None else Path(tmp) / "state"
        settings = replay_settings(None if config is None else str(config), flags, state, batch_events=batch_events)
        return replay_log(settings, Path(events), max_events=max_events, keep_scores=keep_scores)


def report(
    model: ModelLike,
    reference: Any,
    events: DataLike,
    *,
    out: str | os.PathLike[str] | None = None,
    timeline: ReplayTimeline | str | os.PathLike[str] | None = None,
    labels: Any = None,
    config: str | os.PathLike[str] | None = None,
    max_events: int | None = None,
    probe_points: int = 20,
    probe_budget_rows: int = 20000,
    title: str | None = None,
    model_name: str | None = None,
    seed: int = _SCORING.seed,
    replay_batch: int = 100,
) -> Report:
    """One self-contained HTML page of the model over recorded events: the verdict timeline per segment, the signals
    against their reference bands, the Gamma Map, per-input drift, the accuracy estimate and the probe profile of the
    flagged events (:func:`monitor.reporting.build_report` says what each section holds).

    Returns
    -------
    monitor.reporting.Report
        ``data`` (every section's typed result, or why it is empty), ``html`` (the page) and ``path`` (``out``).
    """
    from monitor.reporting import build_report

    return build_report(
        model,
        reference,
        events,
        out=out,
        timeline=timeline,
        labels=labels,
        config=config,
        max_events=max_events,
        probe_points=probe_points,
        probe_budget_rows=probe_budget_rows,
        title=title,
        model_name=model_name,
        seed=seed,
        replay_batch=replay_batch,
    )
