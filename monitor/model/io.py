"""Stage 3 helper: read feature rows from CSV or ``.npy`` files (a CSV header row is detected and skipped)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from monitor.errors import DataError


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
    (N, n) float64. NaN/inf values are kept: callers decide (the scorer reports such rows).

    Raises
    ------
    DataError
        Missing file, unknown extension, ragged or non-numeric CSV, non-2-D array.
    """
    p = Path(path)
    if not p.is_file():
        raise DataError(f"data file '{p}' does not exist (expected a .csv or .npy file of feature rows)", path=str(p))
    suffix = p.suffix.lower()
    if suffix == ".npy":
        try:
            arr = np.load(p, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:  # EOFError: an empty or truncated file
            raise DataError(f"cannot read '{p}' as a NumPy .npy array: {exc}", path=str(p)) from exc
        if arr.ndim == 1:
            arr = arr.reshape(1, -1)
        if arr.ndim != 2:
            raise DataError(f"'{p}' holds an array of shape {arr.shape}; expected 2-D (rows × features)", path=str(p))
        if arr.dtype.kind not in "biuf":  # strings, complex (whose imaginary part a cast would drop), dates
            raise DataError(f"'{p}' holds dtype {arr.dtype}; expected real numbers", path=str(p))
        out: NDArray[np.float64] = arr.astype(np.float64)
        return out
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
    return np.asarray(rows, dtype=np.float64)
