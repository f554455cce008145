"""Stage 3 helper: read feature rows from CSV or ``.npy`` files (a CSV header row is detected and skipped).

Whatever a file holds, :func:`load_rows` returns rows or raises :class:`~monitor.errors.DataError` saying what is
wrong with the file; finite values beyond float32's range (±3.4e38), which the model computes in, are refused
like malformed files (NaN and ±inf are kept: callers drop such rows).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from tokenize import TokenError

import numpy as np
from numpy.typing import NDArray

from monitor.errors import DataError

#: the largest float32 (monitor.source.validate.FLOAT32_MAX; repeated here: a stage imports no sibling stage)
_FLOAT32_MAX = 3.4028234663852886e38


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def load_rows(path: str | Path) -> NDArray[np.float64]:
    """Load a 2-D float array from ``.npy`` or ``.csv``.

    Returns
    -------
    (N, n) float64 with N, n >= 1. NaN/inf values are kept: callers decide (the scorer reports such rows).

    Raises
    ------
    DataError
        Missing file, unknown extension, ragged or non-numeric CSV, a .npy file that is not a whole array of real
        numbers, non-2-D array, no rows, or a finite value beyond float32's range.
    """
    p = Path(path)
    try:
        is_file = p.is_file()
    except (ValueError, OSError):  # a NUL in the name, a name too long for the file system
        is_file = False
    if not is_file:
        raise DataError(f"data file '{p}' does not exist (expected a .csv or .npy file of feature rows)", path=str(p))
    suffix = p.suffix.lower()
    if suffix == ".npy":
        return _in_range(_npy_rows(p), p)
    if suffix not in (".csv", ".txt"):
        raise DataError(f"'{p}' has extension '{p.suffix}'; expected .csv or .npy", path=str(p))
    rows: list[list[float]] = []
    width: int | None = None
    # utf-8-sig: spreadsheet exports start with a byte-order mark, which would otherwise turn the first data row
    # into a non-numeric "header" and drop it silently
    try:
        with p.open(newline="", encoding="utf-8-sig") as fh:
            for lineno, record in enumerate(csv.reader(fh), start=1):
                if not record or all(not c.strip() for c in record):
                    continue
                cells = [c.strip() for c in record]
                if not rows and width is None and not all(_is_number(c) for c in cells):
                    width = len(cells)  # header row: remember its width, skip it
                    continue
                if width is not None and len(cells) != width:
                    raise DataError(
                        f"'{p}' line {lineno} has {len(cells)} columns; expected {width} like the rows before it",
                        path=str(p),
                    )
                width = len(cells)
                try:
                    rows.append([float(c) for c in cells])
                except ValueError as exc:
                    raise DataError(f"'{p}' line {lineno} has a non-numeric value: {exc}", path=str(p)) from exc
    except UnicodeDecodeError as exc:
        raise DataError(f"'{p}' is not UTF-8 text ({exc.reason}); save it as UTF-8 CSV", path=str(p)) from exc
    except csv.Error as exc:
        raise DataError(f"'{p}' is not a readable CSV file: {exc}", path=str(p)) from exc
    if not rows:
        raise DataError(f"'{p}' contains no data rows", path=str(p))
    return _in_range(np.asarray(rows, dtype=np.float64), p)


def _npy_rows(p: Path) -> NDArray[np.float64]:
    try:
        # the header first: a file whose header claims more data than follows is refused before np.load allocates
        # what it claims (a 40-byte file asked for 5.85 EiB)
        with p.open("rb") as fh:
            version = np.lib.format.read_magic(fh)
            read_header = (
                np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            )
            shape, _, dtype = read_header(fh)
            available = p.stat().st_size - fh.tell()
        claimed = math.prod(shape) * dtype.itemsize
        if not dtype.hasobject and claimed > available:
            raise DataError(
                f"'{p}' is truncated: its header claims an array of shape {shape} and dtype {dtype} ({claimed} bytes) "
                f"but {available} bytes follow; write it again with numpy.save",
                path=str(p),
            )
        arr = np.load(p, allow_pickle=False)
    # EOFError: an empty or truncated file; SyntaxError, TokenError: a header that is not the Python literal the
    # format requires; OverflowError, MemoryError: a shape beyond the address space
    except (ValueError, OSError, EOFError, SyntaxError, TokenError, OverflowError, MemoryError) as exc:
        raise DataError(f"cannot read '{p}' as a NumPy .npy array: {exc}", path=str(p)) from exc
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    if arr.ndim != 2:
        raise DataError(f"'{p}' holds an array of shape {arr.shape}; expected 2-D (rows × features)", path=str(p))
    if arr.dtype.kind not in "biuf":  # strings, complex (whose imaginary part a cast would drop), dates
        raise DataError(f"'{p}' holds dtype {arr.dtype}; expected real numbers", path=str(p))
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise DataError(f"'{p}' holds an array of shape {arr.shape}; expected at least one row and column", path=str(p))
    with np.errstate(over="ignore"):  # long double beyond float64 becomes inf, then refused or kept like inf
        out: NDArray[np.float64] = np.array(arr, dtype=np.float64)
    return out


def _in_range(rows: NDArray[np.float64], p: Path) -> NDArray[np.float64]:
    """``rows`` unless a finite value lies beyond float32's range (NaN and ±inf pass: callers drop those rows)."""
    with np.errstate(invalid="ignore"):
        beyond = np.isfinite(rows) & (np.abs(rows) > _FLOAT32_MAX)
    if beyond.any():
        row, column = (int(i) for i in np.argwhere(beyond)[0])
        raise DataError(
            f"'{p}' row {row + 1} column {column + 1} holds {rows[row, column]:g}, beyond float32's range (±3.4e38) "
            "in which the model computes; convert the data to the model's units or drop the row",
            path=str(p),
        )
    return rows
