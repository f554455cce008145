"""Rows by column name for several models: one table read once, each model's inputs picked from it by name.

Two models of the same task rarely agree on their inputs: one converter gives one ``float_input [N, 4]``, another
one input per column (``sepal_length``, ``petal_width`` …) in another order. :class:`Columns` holds the data as
named 1-D columns (a DataFrame's, a CSV header's, a parquet file's); :func:`model_rows` picks each model's inputs
from them by name (a plain model's features by the names given for it), so every model scores the same rows with
its own input layout. A model whose names the data does not have is refused with the names missing.

>>> import numpy as np
>>> cols = Columns({"a": np.arange(3.0), "b": np.ones(3)}, source="a test")
>>> len(cols), cols.names
(3, ('a', 'b'))
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from numpy.typing import NDArray

from monitor.errors import DataError
from monitor.model.onnx import OnnxModel
from monitor.model.signature import Held

#: how many names a message lists before "…"
_SHOWN = 12


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(f"'{n}'" for n in names[:_SHOWN])
    return shown + (f" … ({len(names)} in all)" if len(names) > _SHOWN else "")


@dataclass(frozen=True)
class Columns:
    """The data as named columns of equal length: float64 where every value is a number, else object (str).

    ``named``: False when the names are positions (an array, a CSV without a header): then only models of
    unnamed features of the same width map, in order."""

    columns: Mapping[str, NDArray[Any]]
    source: str
    named: bool = True

    def __post_init__(self) -> None:
        lengths = {int(v.shape[0]) for v in self.columns.values()}
        if len(lengths) > 1:
            raise DataError(f"{self.source}: columns of different lengths {sorted(lengths)}")

    def __len__(self) -> int:
        return 0 if not self.columns else int(next(iter(self.columns.values())).shape[0])

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.columns)

    def without(self, names: Sequence[str | None]) -> Columns:
        """The columns other than ``names`` (the label and segment columns)."""
        drop = {n for n in names if n is not None}
        return Columns({k: v for k, v in self.columns.items() if k not in drop}, self.source, self.named)

    def take(self, pick: NDArray[Any]) -> Columns:
        return Columns({k: v[pick] for k, v in self.columns.items()}, self.source, self.named)

    def column(self, name: str, what: str) -> NDArray[Any]:
        """The column ``name`` (``what`` names the option that asked for it in the message)."""
        if name not in self.columns:
            raise DataError(f"{what} '{name}': {self.source} has no such column; its columns: {_listed(self.names)}")
        return self.columns[name]


def _typed(values: NDArray[Any]) -> NDArray[Any]:
    """float64 when every value parses as a number (blank: NaN), else the values as str."""
    if values.dtype.kind in "biuf":
        return values.astype(np.float64)
    text = np.array(["" if v is None else str(v).strip() for v in values], dtype=object)
    try:
        return np.array([float(v) if v != "" else np.nan for v in text], dtype=np.float64)
    except ValueError:
        return text


def read_columns(data: Any, *, header: str = "auto") -> Columns:
    """``data`` as named columns: a pandas DataFrame, a mapping of 1-D arrays by name, a 2-D array (positions as
    names), or a ``.csv`` (a header names the columns), ``.parquet`` or ``.npy`` file.

    Raises
    ------
    DataError
        Another type or suffix, an unreadable file, a ragged CSV.
    """
    if type(data).__module__.startswith("pandas") and hasattr(data, "columns"):
        return Columns(
            {str(c): _typed(np.asarray(data[c].to_numpy())) for c in data.columns},
            f"a DataFrame of {len(data)} rows",
        )
    if isinstance(data, Columns):
        return data
    if isinstance(data, Mapping):
        return Columns({str(k): _typed(np.asarray(v).reshape(-1)) for k, v in data.items()}, "columns by name")
    if isinstance(data, np.ndarray):
        return _positional(data, f"an array of {data.shape[0] if data.ndim else 0} rows")
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        suffix = path.suffix.lower()
        if suffix == ".csv":
            return _csv_columns(path, header)
        if suffix == ".npy":
            try:
                arr = np.load(path, allow_pickle=False)
            except (OSError, ValueError) as exc:
                raise DataError(f"'{path}' is not a readable .npy file: {exc}", path=str(path)) from None
            return _positional(arr, f"'{path}'")
        if suffix == ".parquet":
            from monitor.offline.frames import pandas_module as _pandas

            try:
                frame = _pandas().read_parquet(path)
            except (OSError, ValueError, ImportError) as exc:
                raise DataError(f"'{path}' is not a readable parquet file: {exc}", path=str(path)) from None
            cols = read_columns(frame)
            return Columns(cols.columns, f"'{path}' ({len(cols)} rows)")
        raise DataError(
            f"'{path}': compare reads a .csv (with a header naming the columns), .parquet or .npy file or a "
            f"DataFrame (and a .jsonl event log as the data); got a '{suffix or 'suffix-less'}' file",
            path=str(path),
        )
    raise DataError(f"expected a DataFrame, a mapping of columns, an array or a file path; got {type(data).__name__}")


def _positional(arr: NDArray[Any], source: str) -> Columns:
    x = np.asarray(arr)
    if x.ndim != 2:
        raise DataError(f"{source}: expected rows (N, D); got an array of shape {list(x.shape)}")
    return Columns({str(j): _typed(x[:, j]) for j in range(x.shape[1])}, source, named=False)


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return text.strip() == ""
    return True


def _csv_columns(path: Path, header: str) -> Columns:
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            table = [row for row in csv.reader(fh) if row]
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"'{path}' cannot be read as CSV: {exc}", path=str(path)) from None
    if not table:
        raise DataError(f"'{path}' holds no rows", path=str(path))
    first = table[0]
    has_header = header == "yes" or (header == "auto" and not all(_number(c) for c in first))
    body = table[1:] if has_header else table
    width = len(first)
    ragged = [i for i, row in enumerate(body) if len(row) != width]
    if ragged:
        raise DataError(
            f"'{path}' line {ragged[0] + 1 + has_header}: {len(body[ragged[0]])} values; the first line has {width}",
            path=str(path),
        )
    grid = np.array(body, dtype=object).reshape(len(body), width)
    names = [c.strip() for c in first] if has_header else [str(j) for j in range(width)]
    cols = {name: _typed(grid[:, j]) for j, name in enumerate(names)}
    return Columns(cols, f"'{path}' ({len(body)} rows)", named=has_header)


@dataclass(frozen=True)
class ModelRows:
    """One model's rows picked from :class:`Columns`: x (N, D) in its feature order, its held values, the data
    columns it read (in its feature order for the floats) and how they were matched."""

    x: NDArray[np.float64]
    held: Held | None
    columns: tuple[str, ...]
    how: str


def wanted_names(model: OnnxModel, given: Sequence[str] | None) -> tuple[str, ...]:
    """The column names ``model`` reads: ``given`` (one per feature of a plain model), else its inputs' element
    names (``age``, ``city``; ``float_input[0]`` …)."""
    if given is not None:
        if not model.signature.plain:
            raise DataError(
                f"feature names were given for '{model.path.name}', whose inputs name themselves "
                f"({model.signature.describe()}); give names only for a model of one unnamed [N, D] input"
            )
        if len(given) != model.n_features:
            raise DataError(
                f"{len(given)} feature names given for '{model.path.name}', which reads {model.n_features} features; "
                "give one name per feature, in the model's order"
            )
        return tuple(given)
    return tuple(n for spec in model.signature.inputs for n in spec.element_names())


def model_rows(model: OnnxModel, cols: Columns, given: Sequence[str] | None, label: str) -> ModelRows:
    """``model``'s rows from ``cols`` by name (``label``: the model's name in messages).

    A plain model without ``given`` names whose element names are not columns takes the columns in order when
    there are exactly as many as it has features (said in ``how``).

    Raises
    ------
    DataError
        Names the data lacks (listed), or unnamed data for a model of several inputs.
    """
    sig = model.signature
    names = wanted_names(model, given)
    present = set(cols.names)
    if all(n in present for n in names) and cols.named:
        how = "by name"
    elif sig.plain and given is None and len(cols.names) == model.n_features:
        names, how = cols.names, "in column order (the model's features are unnamed: give names to map by name)"
    else:
        missing = [n for n in names if n not in present] if cols.named else list(names)
        raise DataError(
            f"model '{label}' reads {_listed(missing)}, which {cols.source} does not name (its columns: "
            f"{_listed(cols.names)}); rename the columns, or name a one-input model's features (feature_names / "
            f"--feature-names {label}=a,b,…)"
        )
    if sig.plain:
        x = np.column_stack([_float(cols.columns[n], n, label) for n in names]) if names else np.zeros((len(cols), 0))
        model.name_features(names, source=f"the data columns of '{label}'")
        return ModelRows(x, None, tuple(names), how)
    inputs: dict[str, NDArray[Any]] = {}
    for spec in sig.inputs:
        elems = spec.element_names()
        if spec.type_name == "string":
            block = np.column_stack([cols.columns[n].astype(str) for n in elems]).astype(object)
        else:
            block = np.column_stack([_float(cols.columns[n], n, label) for n in elems])
            block = block if spec.is_float else block.astype(spec.dtype)
        inputs[spec.name] = block.reshape(len(cols), *spec.dims)
    from monitor.errors import ModelError

    try:
        x, held = sig.split(inputs, where=f"the data for '{label}'")
    except ModelError as exc:
        raise DataError(str(exc)) from None
    float_cols = tuple(sig.features)
    return ModelRows(x, held if sig.has_held else None, float_cols, how)


def _float(values: NDArray[Any], name: str, label: str) -> NDArray[np.float64]:
    if values.dtype.kind != "f":
        raise DataError(
            f"column '{name}' holds text (e.g. {values[0]!r}); model '{label}' reads it as a number: convert it, or "
            "check the columns were not shifted"
        )
    return values


def class_values(model: OnnxModel) -> tuple[str, ...] | None:
    """The class values a classifier's graph declares (``classlabels_*`` of its classifier or ZipMap node), as
    text; None when the graph names none (then classes are the columns of its scores, 0..C−1)."""
    proto = onnx.load(str(model.path), load_external_data=False)
    for node in proto.graph.node:
        for attr in node.attribute:
            if attr.name in ("classlabels_int64s", "classlabels_ints"):
                return tuple(str(int(v)) for v in attr.ints)
            if attr.name == "classlabels_strings":
                return tuple(v.decode() for v in attr.strings)
    return None
