"""Stage 3 helper: feature rows from CSV or ``.npy`` files (a CSV header row is detected and skipped), and the file
readers :mod:`monitor.model.io` shares when it reads rows for a model of any signature.

Whatever a file holds, :func:`load_rows` returns rows or raises :class:`~monitor.errors.DataError` saying what is
wrong with the file; finite values beyond float32's range (±3.4e38), which the model computes in, are refused
like malformed files (NaN and ±inf are kept: callers drop such rows). :func:`read_rows` also says what the first
row of a CSV file was taken for, so that commands can print it.

The header row (``header="auto"``): a first row that is not the same kind as the rows below it is a header. Judged
per column, a cell of text above numbers is a header cell; a first row of column numbers (0, 1, …, n−1 or 1, 2, …,
n, n ≥ 2, as pandas writes a frame without names) is a header when no row below is all whole numbers too (then the
row could be data, and it is read as data, saying so). ``"yes"`` always skips the first row, ``"no"`` never does.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from tokenize import TokenError
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from monitor.errors import DataError

__all__ = [
    "HEADER_MODES",
    "SHOWN_CELLS",
    "HeaderMode",
    "RowsFile",
    "csv_rows",
    "first_row_is_header",
    "is_number",
    "load_rows",
    "npy_array",
    "parse_numbers",
    "read_rows",
    "shown_cells",
    "within_float32",
]

#: the largest float32 (monitor.source.validate.FLOAT32_MAX; repeated here: a stage imports no sibling stage)
_FLOAT32_MAX = 3.4028234663852886e38


#: how the first row of a CSV file is read: judged against the rows below it, always a header, never one
HeaderMode = Literal["auto", "yes", "no"]
HEADER_MODES: tuple[HeaderMode, ...] = ("auto", "yes", "no")
#: header cells shown in messages before the rest are elided (a 30-feature header would fill the terminal)
SHOWN_CELLS = 8


@dataclass(frozen=True, slots=True)
class RowsFile:
    """Rows read from a file, and what its first row was taken for.

    Attributes
    ----------
    path : the file read.
    rows : (N, n) float64, N, n >= 1; NaN and ±inf kept.
    header : the header row's cells when the first row was skipped as a header, else None.
    note : the decision about the first row worth telling the user ("header row detected: 1,2,3 (use --header no
        to read it as data)"), or "" when there was nothing to decide (an .npy file, a CSV file of numbers only).
    """

    path: Path
    rows: NDArray[np.float64]
    header: tuple[str, ...] | None = None
    note: str = ""

    @property
    def names(self) -> tuple[str, ...] | None:
        """The columns' names: the header's cells when none of them is a number (column numbers name nothing)."""
        if self.header is None or any(is_number(c) for c in self.header):
            return None
        return self.header

    def describe(self) -> str:
        """One line for the user: what was read, and what the first row was taken for."""
        n, width = self.rows.shape
        line = f"read {n} rows × {width} columns from '{self.path}'"
        if self.note:
            return f"{line}; {self.note}"
        return line if self.path.suffix.lower() == ".npy" else f"{line}; no header row"


def is_number(text: str) -> bool:
    """Whether a CSV cell reads as a number; an empty cell is a missing number (NaN), as pandas writes one."""
    if not text.strip():
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True


def shown_cells(cells: Sequence[str]) -> str:
    """``cells`` joined as they stood in the file, elided after a few."""
    head = ",".join(cells[:SHOWN_CELLS])
    return head if len(cells) <= SHOWN_CELLS else f"{head},… ({len(cells)} columns)"


def load_rows(path: str | Path, header: HeaderMode = "auto") -> NDArray[np.float64]:
    """Load a 2-D float array from ``.npy`` or ``.csv``.

    Parameters
    ----------
    path : a ``.csv``/``.txt`` file of comma-separated numbers, or an ``.npy`` array.
    header : how a CSV file's first row is read: ``"auto"`` (a header when it is not the same kind as the rows
        below it: see the module docstring), ``"yes"`` (always skipped) or ``"no"`` (always data).

    Returns
    -------
    (N, n) float64 with N, n >= 1. NaN/inf values are kept: callers decide (the scorer reports such rows).

    Raises
    ------
    DataError
        Missing file, unknown extension, ragged or non-numeric CSV, a .npy file that is not a whole array of real
        numbers, non-2-D array, no rows, or a finite value beyond float32's range.
    """
    return read_rows(path, header).rows


def read_rows(path: str | Path, header: HeaderMode = "auto", *, flag: str = "--header") -> RowsFile:
    """:func:`load_rows`, with what the first row of a CSV file was taken for (:class:`RowsFile`).

    ``flag`` is how the caller's user chooses ``header`` (``--reference-header`` for ``check-config``): the notes
    and messages name it.
    """
    if header not in HEADER_MODES:
        raise ValueError(f"header must be 'auto', 'yes' or 'no'; got {header!r}")
    p = Path(path)
    try:
        is_file = p.is_file()
    except (ValueError, OSError):  # a NUL in the name, a name too long for the file system
        is_file = False
    if not is_file:
        raise DataError(f"data file '{p}' does not exist (expected a .csv or .npy file of feature rows)", path=str(p))
    suffix = p.suffix.lower()
    if suffix == ".npy":
        return RowsFile(p, _in_range(_npy_rows(p), p))
    if suffix not in (".csv", ".txt"):
        raise DataError(f"'{p}' has extension '{p.suffix}'; expected .csv or .npy", path=str(p))
    first, first_line, rows = _csv_records(p)
    if first is None:
        raise DataError(f"'{p}' contains no data rows", path=str(p))
    skip, note = first_row_is_header(first, rows, header, flag)
    if not skip:
        rows.insert(0, parse_numbers(first, first_line, p, header, flag))
    if not rows:
        raise DataError(f"'{p}' contains no data rows", path=str(p))
    table = _in_range(np.asarray(rows, dtype=np.float64), p)
    return RowsFile(p, table, first if skip else None, note)


def _csv_records(p: Path) -> tuple[tuple[str, ...] | None, int, list[list[float]]]:
    """The first non-blank record's cells and line, and the rows below it as numbers (all of equal width)."""
    first: tuple[str, ...] | None = None
    first_line = 0
    rows: list[list[float]] = []
    for lineno, cells in csv_rows(p):
        if first is None:
            first, first_line = tuple(cells), lineno
            continue
        rows.append(parse_numbers(cells, lineno, p, names=first))
    return first, first_line, rows


def width_refusal(what: str, path: object, width: int, n_features: int, names: Sequence[str] | None) -> str:
    """The refusal of a file of ``width`` columns (named by its header ``names``, if any) for ``n_features``."""
    named = f" ({', '.join(names[:12])}{' …' if len(names) > 12 else ''})" if names else ""
    return (
        f"{what} '{path}' has {width} columns{named}; the model expects {n_features} features. Was the file written "
        "for another model? Else drop the columns it does not read (labels: --labels NAME, segments: --segment-column "
        "NAME, where the command takes them)"
    )


def parse_numbers(
    cells: Sequence[str],
    lineno: int,
    p: Path,
    header: HeaderMode = "auto",
    flag: str = "--header",
    names: Sequence[str] = (),
) -> list[float]:
    """The record's cells as numbers; ``names`` (the file's first record) name the column of a text cell."""
    try:
        return [float(c) if c.strip() else math.nan for c in cells]
    except ValueError as exc:
        fix = (
            f"; {flag} no reads the first row as data: use {flag} auto (or yes) if it is a header row"
            if header == "no"
            else "; expected numbers in every column (only the first row may be a header; a column of text cannot "
            f"be scored): {_text_column(cells, names)}"
        )
        raise DataError(f"'{p}' line {lineno} has a non-numeric value: {exc}{fix}", path=str(p)) from exc


def _text_column(cells: Sequence[str], names: Sequence[str]) -> str:
    """Which column holds the first text cell of ``cells`` (by its header name where ``names`` give one), and the fix."""
    at = next(i for i, c in enumerate(cells) if not is_number(c))
    named = f" ('{names[at].strip()}')" if at < len(names) and not is_number(names[at]) else ""
    return (
        f"column {at + 1}{named} holds text; remove it from the file (a column naming each row's segment is taken by "
        "`reference`, `replay` and `compare` as --segment-column)"
    )


def first_row_is_header(
    first: tuple[str, ...], rows: list[list[float]], header: HeaderMode, flag: str
) -> tuple[bool, str]:
    """Whether ``first`` is a header row, and what to tell the user about the decision (see the module docstring).

    ``rows`` are the rows below it, all numbers; so a column whose first cell is text is text above numbers.
    """
    shown = shown_cells(first)
    if header == "yes":
        return True, f"first row skipped as a header: {shown} ({flag} yes)"
    if header == "no":
        return False, ""
    if not all(is_number(c) for c in first):
        return True, f"header row: {shown}"
    values = [float(c) if c.strip() else math.nan for c in first]
    numbered = len(values) >= 2 and any(values == list(range(s, s + len(values))) for s in (0, 1))
    if not numbered or not rows:
        return False, ""
    below = np.asarray(rows, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        whole = np.all(np.isfinite(below) & (below == np.round(below)), axis=1)
    if whole.any():
        return (
            False,
            f"first row {shown} read as data: rows of whole numbers like it follow (use {flag} yes if it is a header)",
        )
    return True, f"header row detected: {shown} (use {flag} no to read it as data)"


def _npy_rows(p: Path) -> NDArray[np.float64]:
    arr = npy_array(p)
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


def npy_array(p: Path) -> NDArray[Any]:
    """The array of an ``.npy`` file as it is (any rank and dtype; no pickled objects)."""
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
    out: NDArray[Any] = arr
    return out


def _in_range(rows: NDArray[np.float64], p: Path) -> NDArray[np.float64]:
    """``rows`` unless a finite value lies beyond float32's range (NaN and ±inf pass: callers drop those rows)."""
    within_float32(rows, p)
    return rows


def within_float32(x: NDArray[np.float64], p: Path, names: Sequence[str] | None = None) -> None:
    """Refuse (DataError) the first finite value of ``x`` beyond float32's range, in which the model computes (NaN
    and ±inf pass); the message names the column by its number, or by its feature name where ``names`` are given."""
    with np.errstate(invalid="ignore"):
        beyond = np.isfinite(x) & (np.abs(x) > _FLOAT32_MAX)
    if beyond.any():
        row, column = (int(i) for i in np.argwhere(beyond)[0])
        where = f"column {column + 1}" if names is None else f"feature '{names[column]}'"
        raise DataError(
            f"'{p}' row {row + 1} {where} holds {x[row, column]:g}, beyond float32's range (±3.4e38) "
            "in which the model computes; convert the data to the model's units or drop the row",
            path=str(p),
        )


def csv_rows(p: Path) -> Iterator[tuple[int, list[str]]]:
    """The non-blank records of a CSV file as (line, stripped cells), one at a time (so a caller's own error on a
    record comes before any found further down); each must be as wide as the first.

    Raises
    ------
    DataError
        A record of another width, text that is not UTF-8, or a file the csv module cannot read.
    """
    width: int | None = None
    # utf-8-sig: spreadsheet exports start with a byte-order mark, which would otherwise turn the first data row
    # into a non-numeric "header" and drop it silently
    try:
        with p.open(newline="", encoding="utf-8-sig") as fh:
            for lineno, record in enumerate(csv.reader(fh), start=1):
                if not record or all(not c.strip() for c in record):
                    continue
                cells = [c.strip() for c in record]
                if width is None:
                    width = len(cells)
                elif len(cells) != width:
                    raise DataError(
                        f"'{p}' line {lineno} has {len(cells)} columns; expected {width} like the rows before it",
                        path=str(p),
                    )
                yield lineno, cells
    except UnicodeDecodeError as exc:
        raise DataError(f"'{p}' is not UTF-8 text ({exc.reason}); save it as UTF-8 CSV", path=str(p)) from exc
    except csv.Error as exc:
        raise DataError(f"'{p}' is not a readable CSV file: {exc}", path=str(p)) from exc
