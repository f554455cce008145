"""Stage 5a (rolling): a baseline per segment, from reference data that carries the segment.

Segments differ from the average by construction (a segment that is a city, and the city is also an input): judged
against the one model-wide reference, a segment whose traffic is its usual self is "drift". So each segment is judged
against its own :class:`~monitor.rolling.reference.Reference`: built here from the reference rows of that segment
(``reference --segment-column NAME``, ``replay --segment-column NAME``, ``segments.reference_column`` for ``run``), or
learned from the segment's own first events (the warm-up in :class:`~monitor.runtime.watch.ModelWatch`).

Which segments get a baseline from the reference rows (:func:`fold_segments`, :func:`plan_segments`): the
``max_segments`` most frequent segment values keep their name; every other row (rarer values and rows labelled
``other``) belongs to the folded ``other`` segment. Each of them, with N rows:

- N ≥ :data:`MIN_SEGMENT_ROWS`: its **own** baseline, from its rows;
- :data:`MIN_SHRUNK_ROWS` ≤ N < :data:`MIN_SEGMENT_ROWS`: **shrunk** toward the model-wide baseline — its N rows and
  MIN_SEGMENT_ROWS − N rows drawn from the other segments' rows, so its own rows weigh w = N / MIN_SEGMENT_ROWS in a
  baseline of MIN_SEGMENT_ROWS rows, where every test holds its rate;
- 1 ≤ N < :data:`MIN_SHRUNK_ROWS`: **borrowed**, the model-wide baseline (all rows);
- shrunk only when that baseline stays like the segment: on every input, (1 − w) × (D − 0.87·√(1/N + 1/M)) is under
  half the per-input KS floor (``drift.feature_min_distance``'s default: 0.05), D the two-sample KS distance between
  the segment's N rows and M of the others' (at most 5,000), 0.87·√(…) its mean where both share one distribution;
  borrowed only when no input's two-sample KS test tells the segment's rows from the others' at
  :data:`BORROW_LEVEL` (Bonferroni over the inputs: so few rows show only a clear difference). Otherwise (or with too
  few other rows to mix in) the segment gets no baseline from the reference rows: it warms up on its own events,
  never judged against another population's baseline.

A segment the reference rows do not cover warms up on its own events too.

:func:`split_segment_column` reads the segment column out of a CSV with a header so the rest is read exactly as the
model's rows are: a segment column that is not one of the model's inputs is not fed to the model; one that is (a
city that is both the segment and an input) stays an input.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import math
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
from numpy.typing import NDArray

from monitor.config import DriftSettings, SegmentSettings, setting_default
from monitor.errors import DataError
from monitor.model.signature import Signature
from monitor.rolling.reference import Basis, Reference
from monitor.rolling.windows import OTHER

#: a segment needs this many scored reference rows for a baseline of its own (the detectors' calibration floor)
MIN_SEGMENT_ROWS: Final = 200
#: from this many rows, a segment consistent with the rest is shrunk toward the model-wide baseline (below: borrowed)
MIN_SHRUNK_ROWS: Final = 50
#: a segment of fewer than MIN_SHRUNK_ROWS rows borrows unless a two-sample KS test tells it apart at this level
BORROW_LEVEL: Final = 0.01
#: the mean of the Kolmogorov distribution: a two-sample KS distance's mean where both samples share one distribution
#: is about this times √(1/N + 1/M)
_KS_MEAN: Final = 0.8687
_MIN_DISTANCE: Final = setting_default(DriftSettings, "feature_min_distance")
#: at most this many of the rest's rows are compared with a small segment's
_REST_SAMPLE: Final = 5000


def fold_segments(segments: Sequence[str] | NDArray[np.str_], max_segments: int) -> NDArray[np.str_]:
    """Each row's segment as its baseline knows it: one of the ``max_segments`` most frequent values (ties: the name
    first in sort order), else ``"other"``.

    >>> folded = fold_segments(["a"] * 300 + ["b"] * 250 + ["c"] * 10, 1)
    >>> [str(s) for s in np.unique(folded)], int((folded == "other").sum())
    (['a', 'other'], 260)
    >>> sorted(set(fold_segments(["a"] * 300 + ["b"] * 250 + ["c"] * 10, 5).tolist()))
    ['a', 'b', 'c']
    """
    seg = np.asarray(segments, dtype=str)
    values, counts = np.unique(seg, return_counts=True)
    order = sorted((int(-c), str(v)) for v, c in zip(values, counts, strict=True) if v != OTHER)
    kept = {v for _, v in order[:max_segments]}
    return np.array([s if s in kept else OTHER for s in seg.tolist()], dtype=str)


@dataclass(frozen=True, slots=True)
class SegmentPlan:
    """One segment's baseline from the reference rows: its :class:`Basis` and the rows it is built from (indices);
    ``rows`` None: none from the reference rows — it warms up on its own events, ``reason`` says why."""

    basis: Basis
    rows: NDArray[np.intp] | None
    reason: str = ""

    def describe(self) -> str:
        """``own (600 rows)``, ``shrunk (80 rows, weight 0.40)``, ``borrowed (1 row)``, ``warms up (…)``."""
        if self.rows is None:
            rows = "1 row" if self.basis.rows == 1 else f"{self.basis.rows} rows"
            return f"warms up ({rows}; {self.reason})"
        return self.basis.describe()


def plan_segments(
    segments: Sequence[str] | NDArray[np.str_],
    features: NDArray[np.float64],
    max_segments: int,
    seed: int = 0,  # not a setting: the draw of the other segments' rows that fill a shrunk baseline
    feature_names: Sequence[str] | None = None,
) -> dict[str, SegmentPlan]:
    """Each folded segment's baseline (:func:`fold_segments`; the rule in the module's description) from reference
    rows ``features`` (one row per segment label; NaN cells are left out of the consistency check).

    >>> rng = np.random.default_rng(0)
    >>> seg = np.array(["big"] * 2000 + ["mid"] * 80 + ["tiny"] * 3 + ["odd"] * 60)
    >>> x = rng.normal(size=(seg.size, 2)) + (seg == "odd")[:, None] * 3.0
    >>> {k: p.describe() for k, p in plan_segments(seg, x, 10).items()}["mid"]
    'shrunk (80 rows, weight 0.40)'
    >>> [plan_segments(seg, x, 10)[k].describe()[:20] for k in ("big", "tiny", "odd")]
    ['own (2000 rows)', 'borrowed (3 rows)', 'warms up (60 rows; i']
    """
    folded = fold_segments(segments, max_segments)
    x = np.asarray(features, dtype=np.float64).reshape(folded.size, -1)
    rng = np.random.default_rng(seed)
    out: dict[str, SegmentPlan] = {}
    for name in sorted(set(folded.tolist())):
        own = np.flatnonzero(folded == name)
        n = int(own.size)
        if n >= MIN_SEGMENT_ROWS:
            out[name] = SegmentPlan(Basis("own", n, 1.0), own)
            continue
        rest = np.flatnonzero(folded != name)
        if rest.size < MIN_SEGMENT_ROWS - n:
            reason = f"only {rest.size} rows elsewhere to mix in"
            out[name] = SegmentPlan(Basis("own", n, 1.0), None, reason)
            continue
        compared = rest if rest.size <= _REST_SAMPLE else rng.choice(rest, _REST_SAMPLE, replace=False)
        weight = n / MIN_SEGMENT_ROWS if n >= MIN_SHRUNK_ROWS else 0.0  # borrowed: the model-wide rows alone
        differs = _differs(x[own], x[compared], weight, feature_names)
        if differs is not None:
            out[name] = SegmentPlan(Basis("own", n, 1.0), None, f"its inputs differ from the other rows': {differs}")
        elif n >= MIN_SHRUNK_ROWS:
            mixed = np.sort(np.concatenate([own, rng.choice(rest, MIN_SEGMENT_ROWS - n, replace=False)]))
            out[name] = SegmentPlan(Basis("shrunk", n, weight), mixed)
        else:
            out[name] = SegmentPlan(Basis("borrowed", n, 0.0), np.arange(folded.size))
    return out


def _differs(
    own: NDArray[np.float64], rest: NDArray[np.float64], weight: float, names: Sequence[str] | None
) -> str | None:
    """The input on which a baseline of ``own`` at ``weight`` and ``rest`` at 1 − ``weight`` would stand apart from
    ``own`` (the rule in the module's description), with its KS distance; None when none would."""
    from scipy.stats import ks_2samp  # on use: scipy.stats costs ~0.4 s at every command start

    for j in range(own.shape[1]):
        a, b = own[:, j], rest[:, j]
        a, b = a[np.isfinite(a)], b[np.isfinite(b)]
        if a.size == 0 or b.size == 0:
            continue
        test = ks_2samp(a, b)
        distance = float(test.statistic)
        if weight > 0.0:
            apart = (1.0 - weight) * (distance - _KS_MEAN * math.sqrt(1.0 / a.size + 1.0 / b.size)) >= _MIN_DISTANCE / 2
        else:
            apart = float(test.pvalue) * own.shape[1] < BORROW_LEVEL
        if apart:
            label = str(names[j]) if names is not None else f"f{j}"
            return f"{label} KS distance {distance:.2f}"
    return None


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
    plan: Mapping[str, SegmentPlan] | None = None,
    gamma_edges: Sequence[float] | None = None,
) -> dict[str, Reference]:
    """One :class:`Reference` per segment from scored reference rows, as :func:`plan_segments` (or ``plan``, its
    result for these rows) says: own, shrunk toward the model-wide rows, or borrowed (the basis on the reference); a
    segment planned to warm up gets none. Their Gamma Maps are on ``gamma_edges`` (the model's; None: each segment's
    own).

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
    labels = np.asarray(segments, dtype=str)
    if labels.size != features.shape[0]:
        raise DataError(f"{labels.size} segment labels for {features.shape[0]} reference rows; expected one per row")
    if plan is None:
        plan = plan_segments(labels, features, max_segments, seed, feature_names)
    out: dict[str, Reference] = {}
    for name, p in plan.items():
        if p.rows is None:
            continue
        sel = p.rows
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
        out[name] = dataclasses.replace(out[name], basis=p.basis)
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
