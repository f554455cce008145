"""Rows in: a model (an ONNX path or a loaded one) and data (a DataFrame, an array, a mapping of arrays by input
name, a ``.csv``/``.npy``/``.npz``/``.parquet`` file or a ``.jsonl`` event log) read as :class:`Rows` for it, and
labels read as integer classes."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
from numpy.typing import NDArray

from monitor.config import ModelSettings, setting_default
from monitor.errors import DataError, InvalidEventError
from monitor.offline.frames import FRAME_EXTRA, MissingExtraError, is_frame, pandas_module

if TYPE_CHECKING:
    from monitor.model.onnx import OnnxModel
    from monitor.model.signature import Held, Signature

#: the model kind the functions read a model as unless told (the setting's default)
MODEL_KIND: str = setting_default(ModelSettings, "model_kind")
_FIXED_FEATURES: tuple[str, ...] = tuple(setting_default(ModelSettings, "fixed_features"))

#: an ONNX path or a loaded model
ModelLike: TypeAlias = "str | os.PathLike[str] | OnnxModel"
#: a DataFrame, an array, a mapping of arrays by input name, a file path, or :class:`Rows` (pandas is optional, so
#: the frame type cannot be named here)
DataLike: TypeAlias = Any


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
    #: the names the data gave its columns, in feature order (a CSV header, a frame's columns), where it named them
    names: tuple[str, ...] | None = None

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


def load_model(
    model: ModelLike, *, model_kind: str = MODEL_KIND, fixed_features: Sequence[str] = _FIXED_FEATURES
) -> OnnxModel:
    """The ONNX model at ``model`` (a loaded one passes through), run on every core
    (:func:`~monitor.model.session.offline_options`)."""
    from monitor.model.onnx import OnnxModel
    from monitor.model.session import offline_options

    if isinstance(model, OnnxModel):
        return model
    return OnnxModel(
        str(model),
        offline_options(),
        model_kind=model_kind,  # type: ignore[arg-type]
        fixed_features=tuple(fixed_features),
    )


def model_path(model: ModelLike) -> str:
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
    other_columns: Sequence[str] = (),
) -> Rows:
    """``data`` as rows for ``model`` (see the module docstring for what is accepted). A frame's ``label_column``
    and ``other_columns`` (a segment column) are not features: a plain model reads its other columns in order.

    Raises
    ------
    DataError
        A frame or mapping lacking inputs (named), an array of the wrong width, an unreadable file, or an event log
        with no valid event for the model.
    """
    if isinstance(data, Rows):
        return data
    if is_frame(data):
        return _frame_rows(
            data, model, what=what, feature_names=feature_names, label_column=label_column, others=other_columns
        )
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
            pd = pandas_module()
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
        from monitor.model.row_files import width_refusal

        table = read_model_rows(path, model.signature, header)  # type: ignore[arg-type]
        if table.rows.shape[1] != model.n_features:
            raise DataError(
                width_refusal(what, path, table.rows.shape[1], model.n_features, table.names), path=str(path)
            )
        return Rows(table.rows, table.held, table.describe(), names=table.names)
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
        from monitor.model.io import split_flat

        rows = _mapping_rows(split_flat(np.asarray(arr, dtype=np.float64), sig.inputs), sig, what)
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
    others: Sequence[str] = (),
) -> Rows:
    sig = model.signature
    columns = [str(c) for c in frame.columns]
    not_features = {label_column, *others}
    kept = [j for j, c in enumerate(columns) if c not in not_features]  # the label and segment columns are no input
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
            x,
            None,
            f"{len(x)} rows from a DataFrame (the reference's feature names)",
            labels=labels,
            index=frame.index,
            names=tuple(str(n) for n in feature_names),
        )
    missing = [n for n in every if n not in present]
    if sig.plain and len(kept) == model.n_features and not feature_names:
        x = _numeric(frame.iloc[:, kept], what)
        return Rows(
            x,
            None,
            f"{len(x)} rows from a DataFrame (columns in order as the model's features)",
            labels=labels,
            index=frame.index,
            names=tuple(columns[j] for j in kept) if all(isinstance(c, str) for c in frame.columns) else None,
        )
    shown = ", ".join(f"'{m}'" for m in missing[:10]) + (" …" if len(missing) > 10 else "")
    raise DataError(
        f"{what} lacks columns {shown}; the model takes {sig.describe()} (one column per input, or per element "
        f"named like '{every[0]}'); the frame has {', '.join(repr(c) for c in columns[:10])}"
        + (" …" if len(columns) > 10 else "")
        + (
            "; name the columns that are its features, in order: feature_names=[…] (--feature-names)"
            if sig.plain
            else ""
        )
    )


def _numeric(block: Any, what: str) -> NDArray[np.float64]:
    try:
        return np.asarray(block.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64)
    except (TypeError, ValueError) as exc:
        bad = [str(c) for c in block.columns if block[c].dtype.kind not in "biuf"]
        raise DataError(
            f"{what}: columns {', '.join(bad) or '?'} must be numbers for the model's float inputs: {exc}"
        ) from None


def load_labels(
    path: str | os.PathLike[str], *, header: str = "auto", integer: bool = True
) -> NDArray[np.int64] | NDArray[np.float64]:
    """One integer class per row from a ``.csv``/``.npy`` file (one column or one row); ``integer=False``: one true
    value per row, a regressor's (NaN: none).

    Raises
    ------
    DataError
        An unreadable file, or a value that is not an integer.
    """
    from monitor.model.io import load_rows

    raw = load_rows(path, header).reshape(-1)  # type: ignore[arg-type]
    if not integer:
        return np.asarray(raw, dtype=np.float64)
    if not np.all(np.isfinite(raw)) or np.any(raw != np.round(raw)):
        raise DataError(f"labels '{path}' must hold integer classes (class values or indices 0..C−1)", path=str(path))
    return raw.astype(np.int64)


def true_values(y: NDArray[Any]) -> NDArray[np.float64]:
    """A regressor's true values as floats (NaN or None: a row without one)."""
    v = np.asarray(y)
    try:
        return np.array([np.nan if x is None else float(x) for x in v.reshape(-1)], dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise DataError(f"labels of a regressor must be numbers (its true values; NaN for none): {exc}") from exc


def int_labels(y: NDArray[Any]) -> NDArray[np.int64]:
    v = np.asarray(y)
    if v.dtype.kind not in "iub":
        f = v.astype(np.float64)
        if not np.all(np.isfinite(f)) or np.any(f != np.round(f)):
            raise DataError("labels must be integer classes (the class values the model's label output gives)")
    return v.astype(np.int64)


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
    name = model_name or log_model_name(p, model_path(model))
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
