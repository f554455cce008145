"""Stage 5b: what a baseline of N rows allows — the smallest effect its input tests can flag at the stated rate.

Every input test's null is a new draw from the baseline (:mod:`monitor.drift.quality`), so a small baseline costs
power, never false alarms. :func:`range_detectable_share` says how much: the smallest share of a window outside the
range that the range test flags at its level. :func:`baseline_notes` turns it into the lines ``reference`` and
``check-config`` print per segment, with the inputs a baseline holds constant and the segments too small for a
baseline of their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from monitor.config import DriftSettings
from monitor.drift.quality import new_draw_outside
from monitor.rolling.reference import Reference


def range_detectable_share(n_rows: int, window: int, alpha: float, min_share: float) -> float:
    """The smallest share of a ``window``-event window outside the range of ``n_rows`` baseline rows that the range
    test flags at level ``alpha`` (and at least ``min_share``, its floor).

    >>> round(range_detectable_share(200, 1000, 1.25e-5, 0.02), 3), round(range_detectable_share(5000, 1000, 1.25e-5, 0.02), 3)
    (0.074, 0.02)
    """
    from scipy.stats import betabinom  # on use: scipy.stats costs ~0.4 s at every command start

    a, b = new_draw_outside(n_rows)
    k = np.arange(window + 1)
    flagged = np.flatnonzero(betabinom.sf(k - 1, window, a, b) < alpha)
    share = float(k[flagged[0]]) / window if flagged.size else 1.0
    return max(share, min_share)


def _range_level(baseline: Reference, settings: DriftSettings) -> float | None:
    """The range test's level per test on ``baseline`` (its share of the budget), None when it has no range test."""
    from monitor.drift.verdict import VerdictEngine  # the engine imports the registry, which imports this package

    slot = next((s for s in VerdictEngine(baseline, settings).slots if s.name == "inputs_range"), None)
    return None if slot is None else float(slot.detector.alpha)


def constant_inputs(baseline: Reference) -> list[str]:
    """The inputs that hold one value in every baseline row."""
    names = baseline.feature_names or tuple(f"f{j}" for j in range(baseline.n_features))
    return [str(names[j]) for j in np.flatnonzero(baseline.feature_std == 0.0)]


def baseline_notes(
    baselines: Mapping[str, Reference], settings: DriftSettings, small: Sequence[tuple[str, int]] = ()
) -> list[str]:
    """Lines for ``reference`` and ``check-config``: per baseline, the share outside its range the range test needs
    to flag an input; the inputs it holds constant; the segments (``small``: name, rows) with too few rows for a
    baseline of their own."""
    notes = []
    allows = []
    for name, base in baselines.items():
        level = _range_level(base, settings)
        if level is not None:
            share = range_detectable_share(base.n_events, settings.window, level, settings.range_min_share)
            allows.append(f"{name} ({_rows(base.n_events)}) {share:.1%}")
        constant = constant_inputs(base)
        if constant:
            notes.append(
                f"note: baseline '{name}' holds {', '.join(constant)} constant: any other live value counts as outside "
                "its range (the range test), and its KS test sees any change"
            )
    if allows:
        notes.insert(
            0,
            f"what each baseline allows (the false-alarm rate holds at any size; power grows with rows): the range "
            f"test flags an input from this share of a {settings.window}-event window outside its range: "
            + ", ".join(allows),
        )
    if small:
        notes.append(
            "segments with too few reference rows for a baseline of their own, judged with 'other': "
            + ", ".join(f"{name} ({_rows(rows)})" for name, rows in small)
        )
    return notes


def _rows(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


def segment_row_notes(
    segments: Sequence[str] | NDArray[np.str_], max_segments: int, settings: DriftSettings, *, min_rows: int, other: str
) -> list[str]:
    """``check-config``'s lines for reference rows that carry a segment, before anything is scored: per segment
    with a baseline of its own, the share outside its range the range test needs at most (every registered detector
    taking its share of the rate: the smallest level), and the segments with fewer than ``min_rows`` rows."""
    from monitor.drift.registry import DETECTORS

    values, counts = np.unique(np.asarray(segments, dtype=str), return_counts=True)
    ranked = sorted((-int(c), str(v)) for v, c in zip(values, counts, strict=True) if c >= min_rows and v != other)
    level = min(
        settings.feature_alpha, settings.false_alarms_per_million_events / len(DETECTORS) * settings.every / 1e6
    )
    allows = [
        f"{name} ({_rows(-c)}) {range_detectable_share(-c, settings.window, level, settings.range_min_share):.1%}"
        for c, name in ranked[:max_segments]
    ]
    small = [(str(v), int(c)) for v, c in zip(values, counts, strict=True) if c < min_rows and v != other]
    notes = []
    if allows:
        notes.append(
            "what each segment's baseline allows (the false-alarm rate holds at any size; power grows with rows): "
            f"the range test flags an input from at most this share of a {settings.window}-event window outside its "
            "range: " + ", ".join(allows)
        )
    if small:
        notes.append(
            f"segments with fewer than {min_rows} reference rows, judged with '{other}' (no baseline of their own): "
            + ", ".join(f"{name} ({_rows(rows)})" for name, rows in small)
        )
    return notes
