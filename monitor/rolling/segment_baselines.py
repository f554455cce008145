"""Stage 5a (rolling): a baseline per segment, from reference data that carries the segment.

Segments differ from the average by construction (a segment that is a city, and the city is also an input): judged
against the one model-wide reference, a segment whose traffic is its usual self is "drift". So each segment is judged
against its own :class:`~monitor.rolling.reference.Reference`: built here from the reference rows of that segment
(``reference --segment-column NAME``, ``replay --segment-column NAME``, ``segments.reference_column`` for ``run``), or
learned from the segment's own first events (the warm-up in :class:`~monitor.runtime.watch.ModelWatch`).

Which segments get a baseline from the reference rows (:func:`fold_segments`): the ``max_segments`` most frequent
segment values with at least :data:`MIN_SEGMENT_ROWS` rows each keep their own; every other row (rarer values and rows
labelled ``other``) forms the baseline of the folded ``other`` segment, when it has that many rows too. A segment the
reference rows do not cover warms up on its own events instead.

:func:`split_segment_column` reads the segment column out of a CSV with a header so the rest is read exactly as the
model's rows are: a segment column that is not one of the model's inputs is not fed to the model; one that is (a
city that is both the segment and an input) stays an input.
"""

from __future__ import annotations

import contextlib
import csv
import io
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Final

import numpy as np
from numpy.typing import NDArray

from monitor.config import SegmentSettings, setting_default
from monitor.errors import DataError
from monitor.model.signature import Signature
from monitor.rolling.reference import Reference
from monitor.rolling.windows import OTHER

#: a segment needs this many scored reference rows for a baseline of its own (the detectors' calibration floor)
MIN_SEGMENT_ROWS: Final = 200


def fold_segments(segments: Sequence[str] | NDArray[np.str_], max_segments: int) -> NDArray[np.str_]:
    """Each row's segment as its baseline knows it: one of the ``max_segments`` most frequent values with at least
    :data:`MIN_SEGMENT_ROWS` rows (ties: the name first in sort order), else ``"other"``.

    >>> folded = fold_segments(["a"] * 300 + ["b"] * 250 + ["c"] * 10, 1)
    >>> [str(s) for s in np.unique(folded)], int((folded == "other").sum())
    (['a', 'other'], 260)
    >>> sorted(set(fold_segments(["a"] * 300 + ["b"] * 250, 5).tolist()))
    ['a', 'b']
    """
    seg = np.asarray(segments, dtype=str)
    values, counts = np.unique(seg, return_counts=True)
    order = sorted(
        (int(-c), str(v)) for v, c in zip(values, counts, strict=True) if c >= MIN_SEGMENT_ROWS and v != OTHER
    )
    kept = {v for _, v in order[:max_segments]}
    return np.array([s if s in kept else OTHER for s in seg.tolist()], dtype=str)


def segment_references(
    segments: Sequence[str] | NDArray[np.str_],
    *,
    gamma: NDArray[np.float64],
    flicker: NDArray[np.float64],
    features: NDArray[np.float64],
    predicted_class: NDArray[np.int64] | None = None,
    confidence: NDArray[np.float64] | None = None,
    margin: NDArray[np.float64] | None = None,
    feature_names: Sequence[str] | None = None,
    max_segments: int = setting_default(SegmentSettings, "max_segments"),
    max_sample: int = 5000,
    seed: int = 0,  # not a setting: the reference sample's seed; run samples with 0 whatever scoring.seed is
    held: Mapping[str, NDArray[np.str_]] | None = None,
    gamma_edges: Sequence[float] | None = None,
) -> dict[str, Reference]:
    """One :class:`Reference` per segment (:func:`fold_segments`) from scored reference rows; a segment (``other``
    included) with fewer than :data:`MIN_SEGMENT_ROWS` rows gets none (it warms up on its own events). Their Gamma
    Maps are on ``gamma_edges`` (the model's; None: each segment's own).

    Raises
    ------
    DataError
        The segment labels are not one per row.

    >>> rng = np.random.default_rng(0)
    >>> seg = np.array(["east"] * 300 + ["west"] * 300)
    >>> x = rng.normal(size=(600, 2)) + (seg == "east")[:, None] * 3.0
    >>> refs = segment_references(seg, gamma=rng.exponential(size=600), flicker=np.zeros(600), features=x)
    >>> sorted(refs), bool(refs["east"].feature_mean[0] > 2.5), refs["west"].n_events
    (['east', 'west'], True, 300)
    """
    folded = fold_segments(segments, max_segments)
    if folded.size != features.shape[0]:
        raise DataError(f"{folded.size} segment labels for {features.shape[0]} reference rows; expected one per row")
    out: dict[str, Reference] = {}
    for name in sorted(set(folded.tolist())):
        sel = folded == name
        if int(sel.sum()) < MIN_SEGMENT_ROWS:
            continue
        out[name] = Reference.from_arrays(
            gamma=gamma[sel],
            flicker=flicker[sel],
            features=features[sel],
            predicted_class=None if predicted_class is None else predicted_class[sel],
            confidence=None if confidence is None else confidence[sel],
            margin=None if margin is None else margin[sel],
            feature_names=feature_names,
            max_sample=max_sample,
            seed=seed,
            held=None if held is None else {k: np.asarray(v)[sel] for k, v in held.items()},
            gamma_edges=gamma_edges,
        )
    return out


def is_input_column(signature: Signature, column: str) -> bool:
    """Whether a CSV column named ``column`` is one of the model's inputs (an input's name, or an element's name as
    :meth:`~monitor.model.signature.InputSpec.element_names` gives it): a segment column that is one stays an input."""
    return any(column in spec.element_names() for spec in signature.inputs)


@contextlib.contextmanager
def split_segment_column(
    path: str | Path, column: str, *, flag: str = "--segment-column", keep: bool = False
) -> Iterator[tuple[Path, NDArray[np.str_]]]:
    """A CSV with a header, and its ``column``: yields (a file of the rows without the column, the column's values
    per row). That file is a temporary copy, removed on exit; with ``keep`` (the column is also one of the model's
    inputs, so it stays an input) it is ``path`` itself. A :class:`DataError` raised while the copy is read names
    ``path``, not the copy.

    Raises
    ------
    DataError
        The file is not a CSV, cannot be read, has no header naming ``column``, or a row is shorter than the header.
    """
    p = Path(path)
    rows = _header_rows(p, column, flag)
    at = [h.strip() for h in rows[0]].index(column)
    segments = np.array([r[at].strip() or OTHER for r in rows[1:]], dtype=str)
    if keep:
        yield p, segments
        return
    with tempfile.TemporaryDirectory(prefix="harmonic-segments-") as tmp:
        out = Path(tmp) / p.name
        with out.open("w", encoding="utf-8", newline="") as fh:
            writer = csv.writer(fh)
            for r in rows:
                writer.writerow(r[:at] + r[at + 1 :])
        try:
            yield out, segments
        except DataError as exc:
            text = str(exc).replace(str(out), str(p))
            raise DataError(f"{text} (without its segment column '{column}')", path=str(p)) from None


def _header_rows(p: Path, column: str, flag: str) -> list[list[str]]:
    """The non-blank records of the CSV ``p``, its header naming ``column`` and every row having that cell."""
    if p.suffix.lower() != ".csv":
        raise DataError(
            f"{flag} '{column}' needs a CSV with a header row naming its columns; '{p}' is a {p.suffix or 'file'} "
            "(write the reference rows as CSV with the segment as one more column)",
            path=str(p),
        )
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read '{p}': {exc}", path=str(p)) from exc
    rows = [r for r in csv.reader(io.StringIO(text)) if r and any(cell.strip() for cell in r)]
    header = [h.strip() for h in rows[0]] if rows else []
    if column not in header:
        raise DataError(
            f"{flag} '{column}': the first row of '{p}' names no such column (it names {header[:12]}); the segment "
            "column must be named in a header row",
            path=str(p),
        )
    at = header.index(column)
    short = next((i + 1 for i, r in enumerate(rows) if len(r) <= at), None)
    if short is not None:
        raise DataError(f"'{p}' line {short} has no '{column}' cell; every row needs one", path=str(p))
    return rows


def references_to_json(refs: Mapping[str, Reference]) -> dict[str, object]:
    """``{segment: Reference.to_dict()}``, what a reference file and the state file keep."""
    return {name: ref.to_dict() for name, ref in sorted(refs.items())}


def references_from_json(data: object) -> dict[str, Reference]:
    """The inverse of :func:`references_to_json`.

    Raises
    ------
    DataError
        ``data`` is not an object of reference dicts.
    """
    if not isinstance(data, Mapping):
        raise DataError(f"per-segment baselines must be a JSON object of references; got {type(data).__name__}")
    out: dict[str, Reference] = {}
    for name, ref in data.items():
        if not isinstance(ref, Mapping):
            raise DataError(f"the baseline of segment '{name}' is not a JSON object; rebuild the reference")
        out[str(name)] = Reference.from_dict(ref)
    return out
