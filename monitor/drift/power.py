"""Stage 5b: what a baseline of N rows allows — the smallest effect its input tests can flag at the stated rate.

Every input test's null is a new draw from the baseline (:mod:`monitor.drift.quality`), so a small baseline costs
power, never false alarms. :func:`range_detectable_share` says how much: the smallest share of a window outside the
range that the range test flags at its level. :func:`baseline_notes` turns it into the lines ``reference`` and
``check-config`` print per segment, with what each baseline is made of (own, shrunk toward the model-wide rows,
borrowed: :mod:`monitor.rolling.segment_baselines`) and the inputs it holds constant.
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


def baseline_notes(baselines: Mapping[str, Reference], settings: DriftSettings) -> list[str]:
    """Lines for ``reference`` and ``check-config``: per baseline, what it is made of (own, shrunk, borrowed) and the
    share outside its range the range test needs to flag an input; the inputs it holds constant."""
    notes = []
    allows = []
    holding: dict[tuple[str, ...], list[str]] = {}  # the inputs held constant → the baselines holding them
    for name, base in baselines.items():
        level = _range_level(base, settings)
        own = base.basis is None or base.basis.kind == "own"
        what = f"({_rows(base.n_events)})" if own or base.basis is None else base.basis.describe()
        if level is not None:
            share = range_detectable_share(base.n_events, settings.window, level, settings.range_min_share)
            allows.append(f"{name} {what} {share:.1%}")
        constant = constant_inputs(base)
        if constant:
            holding.setdefault(tuple(constant), []).append(name)
    for held, names in holding.items():
        which = f"baseline '{names[0]}' holds" if len(names) == 1 else f"baselines {_quoted(names)} hold"
        notes.append(
            f"note: {which} {', '.join(held)} constant: any other live value counts as outside its range (the "
            "range test), and its KS test sees any change"
        )
    if allows:
        notes.insert(
            0,
            f"what each baseline allows (the false-alarm rate holds at any size; power grows with rows): the range "
            f"test flags an input from this share of a {settings.window}-event window outside its range: "
            + ", ".join(allows),
        )
    return notes


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def _rows(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


def segment_row_notes(
    segments: Sequence[str] | NDArray[np.str_],
    rows: NDArray[np.float64],
    max_segments: int,
    settings: DriftSettings,
    feature_names: Sequence[str] | None = None,
) -> list[str]:
    """``check-config``'s lines for reference rows that carry a segment, before anything is scored: each segment's
    baseline (:func:`~monitor.rolling.segment_baselines.plan_segments`: own, shrunk with its weight, borrowed, or
    warming up and why) and the share outside its range the range test needs at most (every registered detector
    taking its share of the rate: the smallest level)."""
    from monitor.drift.registry import DETECTORS
    from monitor.rolling.segment_baselines import MIN_SEGMENT_ROWS, MIN_SHRUNK_ROWS, plan_segments

    finite = np.all(np.isfinite(rows), axis=1)
    plan = plan_segments(np.asarray(segments, dtype=str)[finite], rows[finite], max_segments, 0, feature_names)
    level = min(
        settings.feature_alpha, settings.false_alarms_per_million_events / len(DETECTORS) * settings.every / 1e6
    )
    said = []
    for name, p in plan.items():
        if p.rows is None:
            said.append(f"{name} {p.describe()}")
            continue
        share = range_detectable_share(p.rows.size, settings.window, level, settings.range_min_share)
        said.append(f"{name} {p.describe()}: range test from {share:.1%}")
    if not said:
        return []
    return [
        f"each segment's baseline (own from {MIN_SEGMENT_ROWS} rows; shrunk toward the model-wide rows from "
        f"{MIN_SHRUNK_ROWS}; borrowed below; warms up when its inputs differ from the other rows'), and the share of a "
        f"{settings.window}-event window outside its range the range test needs at most: "
        + "; ".join(said)
        + "; a segment absent from these rows warms up on its own first events live (models[].warmup_events)"
    ]
