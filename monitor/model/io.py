"""Stage 3 helper: read rows from files: plain feature rows (:mod:`monitor.model.row_files`: a CSV of numbers, an
``.npy`` array) and rows for a model of any signature.

Files for a model of any signature (several inputs, int/bool/string inputs held fixed, N-D tensors; see
:mod:`monitor.model.signature`): :func:`read_model_rows` reads a CSV whose header names the model's inputs or its
features, an ``.npy`` (one input, any rank) or an ``.npz`` (one array per input name) into the feature vectors x and
the held values; for a plain model (one 2-D float input, nothing held) it reads what :func:`read_rows` reads.
The reading of plain rows (:func:`load_rows`, :func:`read_rows`, :class:`RowsFile`, the header row's rules) lives in
:mod:`monitor.model.row_files` and is offered here too: this module is where commands read rows from.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.errors import DataError, ModelError, names_listed
from monitor.model.row_files import (
    HEADER_MODES,
    SHOWN_CELLS,
    HeaderMode,
    RowsFile,
    csv_rows,
    first_row_is_header,
    is_number,
    load_rows,
    npy_array,
    parse_numbers,
    read_rows,
    shown_cells,
    within_float32,
)
from monitor.model.signature import HELD_COLUMNS, Held, InputSpec, Signature, inputs_mismatch

__all__ = [
    "HEADER_MODES",
    "MODEL_FILE_TYPES",
    "HeaderMode",
    "ModelRowsFile",
    "RowsFile",
    "load_model_rows",
    "load_rows",
    "read_model_rows",
    "read_rows",
    "split_flat",
]

#: file extensions :func:`read_model_rows` reads
MODEL_FILE_TYPES = ".csv, .npy or .npz"


@dataclass(frozen=True, slots=True)
class ModelRowsFile:
    """Rows read for a model (:func:`read_model_rows`): the feature vectors x and the values held fixed.

    Attributes
    ----------
    path : the file read.
    rows : (N, D) float64 x in the signature's feature order (:attr:`Signature.features`); NaN and ±inf kept.
    held : the N rows' held values (:class:`~monitor.model.signature.Held`); None when the model holds nothing.
    summary : one line for the user: what was read and how the file's columns or arrays were taken.
    names : a plain model's CSV header cells when they name its columns (:attr:`RowsFile.names`), else None.
    """

    path: Path
    rows: NDArray[np.float64]
    held: Held | None
    summary: str
    names: tuple[str, ...] | None = None

    def describe(self) -> str:
        return self.summary


def load_model_rows(
    path: str | Path, signature: Signature, header: HeaderMode = "auto"
) -> tuple[NDArray[np.float64], Held | None]:
    """:func:`read_model_rows`'s x (N, D) and held values."""
    table = read_model_rows(path, signature, header)
    return table.rows, table.held


def read_model_rows(
    path: str | Path, signature: Signature, header: HeaderMode = "auto", *, flag: str = "--header"
) -> ModelRowsFile:
    """Rows for a model of any signature (:mod:`monitor.model.signature`): x (N, D) and the held values.

    Accepted files:

    - a **plain** model (one 2-D float input, nothing held): exactly what :func:`read_rows` reads (a CSV of numbers,
      header detected; an ``.npy`` [N, n]), and an ``.npz`` holding the input by name;
    - **CSV with a header naming the model's inputs** (one column per one-element input: ``age,city,id``; string
      columns for string inputs, whole numbers for int inputs, true/false or 1/0 for bool inputs) or its features'
      element names (``x[0],x[1],x[2]``, ``image[0,0,0]`` … as :meth:`InputSpec.element_names` names them; an int
      input of several elements likewise). Columns may come in any order. ``header`` ``"auto"``: the first row is a
      header when it holds one of these names; a model with int, bool or string inputs needs one;
    - **CSV without a header** (or with a header of other names, which is skipped and said so), for a model without
      int, bool or string inputs: every float element in the graph's input order, row-major within each input;
    - **.npy**, one array: for a model of one input, ``[N, *dims]`` as the input takes it (``[N, 1, 28, 28]``) or
      ``[N, size]`` (its elements row-major); for a model of several float inputs, ``[N, total]`` in graph order;
    - **.npz**, one array per input name (``np.savez(f, x=…, id=…, city=np.array(["paris", …]))``), each ``[N, *dims]``
      (``[N]`` for a one-element input); strings as numpy string arrays (object arrays need pickle: refused).

    Raises
    ------
    DataError
        A missing or unreadable file, an unknown extension, no rows, a column or array name the model does not
        take or one it lacks, a value of the wrong type, an array of the wrong shape or type, or a finite float beyond
        float32's range; the message names the input, what was expected and what arrived.
    """
    if header not in HEADER_MODES:
        raise ValueError(f"header must be 'auto', 'yes' or 'no'; got {header!r}")
    p = Path(path)
    suffix = p.suffix.lower()
    if signature.plain and suffix != ".npz":
        table = read_rows(p, header, flag=flag)
        return ModelRowsFile(p, table.rows, None, table.describe(), table.names)
    try:
        is_file = p.is_file()
    except (ValueError, OSError):
        is_file = False
    if not is_file:
        raise DataError(f"data file '{p}' does not exist (expected a {MODEL_FILE_TYPES} file of rows)", path=str(p))
    if suffix == ".npz":
        inputs, how = _npz_inputs(p, signature), "arrays by input name"
    elif suffix == ".npy":
        inputs, how = _npy_inputs(p, signature)
    elif suffix in (".csv", ".txt"):
        inputs, how = _csv_inputs(p, signature, header, flag)
    else:
        raise DataError(f"'{p}' has extension '{p.suffix}'; expected {MODEL_FILE_TYPES}", path=str(p))
    try:
        x, held = signature.split(inputs, where=f"'{p}'")
    except ModelError as exc:
        raise DataError(str(exc), path=str(p)) from exc
    if x.shape[0] == 0:
        raise DataError(f"'{p}' contains no data rows", path=str(p))
    within_float32(x, p, signature.features)
    if held is not None and HELD_COLUMNS in held.values:
        within_float32(held.values[HELD_COLUMNS].astype(np.float64), p, signature.held_features)
    kept = held if signature.has_held else None
    return ModelRowsFile(p, x, kept, f"read {x.shape[0]} rows from '{p}' ({how}; inputs {signature.describe()})")


def _check_array(p: Path, spec: InputSpec, arr: NDArray[Any], what: str) -> None:
    """Refuse an array whose type cannot carry ``spec``'s values (numbers for a string input, text for a number)."""
    kind = arr.dtype.kind
    if spec.type_name == "string":
        ok = kind in "USO"
        expected = "strings (a numpy str array)"
    elif spec.is_float:
        ok = kind in "biuf"
        expected = "real numbers"
    elif spec.type_name == "bool":
        ok = kind in "biu"
        expected = "booleans (or 0/1)"
    else:
        ok = kind in "biuf"
        expected = f"whole numbers ({spec.type_name})"
    if not ok:
        raise DataError(
            f"'{p}': input {spec.describe()} takes {expected}; {what} holds {arr.dtype} values", path=str(p)
        )


def _npz_inputs(p: Path, signature: Signature) -> dict[str, NDArray[Any]]:
    """The arrays of an ``.npz`` file by name, checked against the model's inputs."""
    import zipfile

    try:
        with np.load(p, allow_pickle=False) as archive:
            if not isinstance(archive, np.lib.npyio.NpzFile):
                raise DataError(f"'{p}' is not an .npz archive of named arrays (save it with numpy.savez)", path=str(p))
            names = list(archive.files)
            expected = [s.name for s in signature.inputs]
            wrong = inputs_mismatch(expected, names)
            if wrong:
                raise DataError(
                    f"'{p}' must hold one array per model input {_names(expected)}{wrong}"
                    + f" (the model takes {signature.describe()}; save with numpy.savez(file, name=array, …))",
                    path=str(p),
                )
            arrays = {name: archive[name] for name in expected}
    except DataError:
        raise
    except ValueError as exc:
        if "allow_pickle" in str(exc):
            raise DataError(
                f"'{p}' holds an object array, which needs pickle to load (refused); save strings as a numpy str "
                "array: numpy.array(values, dtype=str)",
                path=str(p),
            ) from exc
        raise DataError(f"cannot read '{p}' as a NumPy .npz archive: {exc}", path=str(p)) from exc
    except (OSError, EOFError, zipfile.BadZipFile, KeyError, MemoryError) as exc:
        raise DataError(f"cannot read '{p}' as a NumPy .npz archive: {exc}", path=str(p)) from exc
    for spec in signature.inputs:
        _check_array(p, spec, arrays[spec.name], f"array '{spec.name}'")
    return arrays


def _npy_inputs(p: Path, signature: Signature) -> tuple[dict[str, NDArray[Any]], str]:
    """The one array of an ``.npy`` file as the model's inputs (see :func:`read_model_rows`)."""
    arr = npy_array(p)
    inputs = signature.inputs
    if signature.held_inputs:
        raise DataError(
            f"'{p}' holds one array; the model takes {signature.describe()}, whose "
            f"{_names([s.name for s in signature.held_inputs])} an array of numbers cannot carry beside the others: "
            "give an .npz with one array per input name, or a CSV whose header names the inputs",
            path=str(p),
        )
    if arr.dtype.kind not in "biuf":
        raise DataError(f"'{p}' holds dtype {arr.dtype}; expected real numbers", path=str(p))
    if len(inputs) == 1:
        spec = inputs[0]
        shown = ", ".join(["N", *map(str, spec.dims)])
        if arr.ndim == len(spec.dims) + 1 and tuple(arr.shape[1:]) == spec.dims:
            return {spec.name: arr}, f"an array [{shown}] for input '{spec.name}'"
        if spec.size == 1 and arr.ndim == 1:
            return {spec.name: arr}, f"an array [N] for input '{spec.name}'"
        if arr.ndim == 2 and arr.shape[1] == spec.size:
            return {spec.name: arr.reshape(-1, *spec.dims)}, f"rows of {spec.size} elements of input '{spec.name}'"
        if arr.ndim == 1 and arr.size == spec.size:
            return {spec.name: arr.reshape(1, *spec.dims)}, f"one row of input '{spec.name}'"
        raise DataError(
            f"'{p}' holds an array of shape {list(arr.shape)}; model input {spec.describe()} takes [{shown}] "
            f"(or [N, {spec.size}]: each row's elements in row-major order)",
            path=str(p),
        )
    total = sum(s.size for s in inputs)
    if arr.ndim == 1 and arr.size == total:
        arr = arr.reshape(1, -1)
    if arr.ndim != 2 or arr.shape[1] != total:
        raise DataError(
            f"'{p}' holds an array of shape {list(arr.shape)}; the model takes {signature.describe()}: an .npy for it "
            f"holds [N, {total}] (every input's elements, in graph order), or give an .npz with one array per input",
            path=str(p),
        )
    return split_flat(arr, inputs), f"rows of {total} values in the inputs' order"


def split_flat(flat: NDArray[Any], specs: Sequence[InputSpec]) -> dict[str, NDArray[Any]]:
    """[N, total] columns in graph order → each input's [N, *dims]."""
    out: dict[str, NDArray[Any]] = {}
    start = 0
    for spec in specs:
        out[spec.name] = flat[:, start : start + spec.size].reshape(-1, *spec.dims)
        start += spec.size
    return out


def _names(names: Sequence[str]) -> str:
    return names_listed(names, SHOWN_CELLS)


def _csv_cells(p: Path) -> list[tuple[int, list[str]]]:
    """The non-blank records of a CSV file as (line, stripped cells), all of the first record's width."""
    return list(csv_rows(p))


def _column_names(signature: Signature) -> dict[str, tuple[int, int]]:
    """{column name: (input index, element index)}: one-element inputs by their name, others by element name."""
    names: dict[str, tuple[int, int]] = {}
    for i, spec in enumerate(signature.inputs):
        for j, name in enumerate(spec.element_names()):
            names[name] = (i, j)
    return names


def _csv_inputs(p: Path, signature: Signature, header: HeaderMode, flag: str) -> tuple[dict[str, NDArray[Any]], str]:
    """A CSV file as the model's inputs (see :func:`read_model_rows`)."""
    records = _csv_cells(p)
    if not records:
        raise DataError(f"'{p}' contains no data rows", path=str(p))
    known = _column_names(signature)
    first = records[0][1]
    named = header != "no" and any(c in known for c in first)
    if not named and header != "no" and signature.held_inputs and (header == "yes" or not any(map(is_number, first))):
        named = True  # a header of other names: refused below, naming them
    if named:
        return _named_columns(p, signature, known, first, records[1:]), "columns by name"
    if signature.held_inputs:
        raise DataError(
            f"'{p}' has no header row naming the model's inputs (first row: {shown_cells(first)}); the model takes "
            f"{signature.describe()}: name each column in a header row ({_names(list(known))}: an input's name for "
            "a one-element input, element names for the others)"
            + (f" ({flag} no reads the first row as data)" if header == "no" else ""),
            path=str(p),
        )
    rows = records[1:]
    skip, note = first_row_is_header(
        tuple(first), [parse_numbers(c, ln, p, names=first) for ln, c in rows], header, flag
    )
    data = rows if skip else records
    if not data:
        raise DataError(f"'{p}' contains no data rows", path=str(p))
    table = np.asarray([parse_numbers(cells, line, p, header, flag, first) for line, cells in data], dtype=np.float64)
    total = sum(s.size for s in signature.inputs)
    if table.shape[1] != total:
        raise DataError(
            f"'{p}' has {table.shape[1]} columns; the model takes {total} float values per row ({signature.describe()}"
            f", in that order). Name the columns in a header row ({_names(list(known))}) or give one column per value",
            path=str(p),
        )
    how = "columns in the inputs' order" + (f"; {note}" if note else "; no header row")
    return split_flat(table, signature.inputs), how


_TRUE = {"true", "1", "yes", "t", "y"}
_FALSE = {"false", "0", "no", "f", "n"}


def _named_columns(
    p: Path,
    signature: Signature,
    known: dict[str, tuple[int, int]],
    header_cells: Sequence[str],
    rows: Sequence[tuple[int, list[str]]],
) -> dict[str, NDArray[Any]]:
    specs = signature.inputs
    seen: dict[str, int] = {}
    unknown: list[str] = []
    for col, cell in enumerate(header_cells):
        if cell in seen:
            raise DataError(
                f"'{p}' header names column '{cell}' twice (columns {seen[cell] + 1} and {col + 1})", path=str(p)
            )
        seen[cell] = col
        if cell not in known:
            unknown.append(cell)
    if unknown:
        whole = [c for c in unknown if any(s.name == c and s.size > 1 for s in specs)]
        hint = (
            f"; input '{whole[0]}' has several elements: name its columns {_names(next(s for s in specs if s.name == whole[0]).element_names()[:3])} …"
            if whole
            else ""
        )
        raise DataError(
            f"'{p}' header names {_names(unknown)}, which the model does not take; it takes {signature.describe()} "
            f"(columns: {_names(list(known))}){hint}",
            path=str(p),
        )
    missing = [name for name in known if name not in seen]
    if missing:
        raise DataError(f"'{p}' lacks columns {_names(missing)}; the model takes {signature.describe()}", path=str(p))
    if not rows:
        raise DataError(f"'{p}' contains no data rows (only its header)", path=str(p))
    inputs: dict[str, NDArray[Any]] = {}
    n = len(rows)
    for spec in specs:
        names = spec.element_names()
        columns = [seen[name] for name in names]
        cells = [[cells[c] for c in columns] for _, cells in rows]
        if spec.type_name == "string":
            values: NDArray[Any] = np.array(cells, dtype=object)
        else:
            values = np.array(
                [
                    [_cell(p, spec, names[k], line, cell) for k, cell in enumerate(row)]
                    for (line, _), row in zip(rows, cells, strict=True)
                ],
                dtype=np.float64 if spec.is_float else spec.dtype,
            )
        inputs[spec.name] = values.reshape(n, *spec.dims)
    return inputs


def _cell(p: Path, spec: InputSpec, column: str, line: int, cell: str) -> float | int | bool:
    """One CSV cell as ``spec``'s type; a message naming the line, column and input otherwise."""
    if spec.is_float:
        try:
            return float(cell)
        except ValueError:
            expected = "a number"
    elif spec.type_name == "bool":
        low = cell.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        expected = "true/false or 1/0"
    else:
        try:
            value = int(cell)
        except ValueError:
            try:
                as_float = float(cell)
            except ValueError:
                as_float = math.nan
            if not as_float.is_integer():
                raise DataError(
                    f"'{p}' line {line} column '{column}': input {spec.describe()} takes whole numbers; got {cell!r}",
                    path=str(p),
                ) from None
            value = int(as_float)
        info = np.iinfo(spec.dtype)
        if not info.min <= value <= info.max:
            raise DataError(
                f"'{p}' line {line} column '{column}': input {spec.describe()} takes whole numbers in "
                f"[{info.min}, {info.max}]; got {cell!r}",
                path=str(p),
            )
        return value
    raise DataError(
        f"'{p}' line {line} column '{column}': input {spec.describe()} takes {expected}; got {cell!r}", path=str(p)
    )
