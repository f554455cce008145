"""The report's per-input and per-period results: each input's test against the reference with the two
distributions side by side (:func:`input_drift`), and the performance estimate per period of the events
(:func:`period_estimates`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from monitor.offline.report_data import InputDrift, PeriodEstimate, SegmentDrift

if TYPE_CHECKING:
    from monitor.accuracy import EstimatorFit
    from monitor.signals.scorer import ScoreResult

#: the Benjamini–Hochberg false discovery rate at which an input counts as moved
DRIFT_ALPHA = 0.01
#: bins of a number's histogram
HIST_BINS = 20
#: categories a category's bars show (the most frequent in the reference or the events; the rest as ``other``)
MAX_CATEGORIES = 12
#: periods the performance estimate is cut into, and the fewest events a period holds
PERIODS = 10
MIN_PERIOD_EVENTS = 50
#: the name a category's bars give the rest (the reference's rarer ones and those it never saw)
OTHER = "other"


def input_drift(
    x: NDArray[np.float64],
    reference_sample: NDArray[np.float64],
    names: Sequence[str],
    categories: Mapping[str, NDArray[Any]] | None = None,
    tables: Mapping[str, Mapping[str, int]] | None = None,
) -> tuple[InputDrift, ...]:
    """Per input element, the events against the reference, with Benjamini–Hochberg adjusted p-values across all
    of them: a number (``x`` (N, D) against the reference sample (m, D)) by the two-sided KS test, a category
    (``categories``: ``{element: (N,) values}`` against ``tables``: the reference's count tables) by chi-square
    with the total variation distance as its effect.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> d = input_drift(rng.normal(size=(500, 2)) + [0.0, 1.0], rng.normal(size=(500, 2)), ["a", "b"])
    >>> [(v.name, v.moved) for v in d]
    [('a', False), ('b', True)]
    >>> c = input_drift(np.zeros((4, 0)), np.zeros((9, 0)), [], {"city": np.array(["oslo"] * 4)}, {"city": {"oslo": 5, "rome": 5}})
    >>> [(v.name, v.kind, v.bins, v.live_share) for v in c]
    [('city', 'categorical', ('oslo', 'rome'), (1.0, 0.0))]
    """
    from monitor.drift.calibrate import benjamini_hochberg

    rows: list[tuple[dict[str, Any], float]] = []
    for j in range(x.shape[1]):
        name = str(names[j]) if j < len(names) else f"x[{j}]"
        rows.append(_numeric(name, x[:, j], reference_sample[:, j]))
    for name, col in (categories or {}).items():
        table = (tables or {}).get(name)
        if table:
            rows.append(_categorical(name, np.asarray(col).astype(str), table))
    adjusted = benjamini_hochberg(np.asarray([p for _, p in rows], dtype=np.float64)) if rows else np.zeros(0)
    return tuple(
        InputDrift(p_value=float(q), moved=bool(q < DRIFT_ALPHA), **fields)
        for (fields, _), q in zip(rows, adjusted, strict=True)
    )


def _numeric(name: str, live: NDArray[np.float64], ref: NDArray[np.float64]) -> tuple[dict[str, Any], float]:
    from monitor.drift.base import ks_two_sample

    live, ref = live[np.isfinite(live)], ref[np.isfinite(ref)]
    if live.size == 0 or ref.size == 0:
        d, p = float("nan"), 1.0
    else:
        d, p = ks_two_sample(live, np.sort(ref), "two-sided")
    both = np.concatenate([live, ref])
    lo, hi = (float(both.min()), float(both.max())) if both.size else (0.0, 1.0)
    edges = np.linspace(lo, hi if hi > lo else lo + 1.0, HIST_BINS + 1)
    fields = {
        "name": name,
        "statistic": float(d),
        "live_mean": float(np.mean(live)) if live.size else float("nan"),
        "reference_mean": float(np.mean(ref)) if ref.size else float("nan"),
        "live_median": float(np.median(live)) if live.size else float("nan"),
        "reference_median": float(np.median(ref)) if ref.size else float("nan"),
        "kind": "numeric",
        "test": "KS",
        "bins": tuple(float(e) for e in edges),
        "reference_share": _shares(np.histogram(ref, edges)[0]),
        "live_share": _shares(np.histogram(live, edges)[0]),
    }
    return fields, float(p)


def _shares(counts: NDArray[Any]) -> tuple[float, ...]:
    total = float(np.sum(counts))
    return tuple(float(c) / total if total else 0.0 for c in counts)


def _categorical(name: str, live: NDArray[np.str_], table: Mapping[str, int]) -> tuple[dict[str, Any], float]:
    """Chi-square of the events' categories against the reference's count table (reference shares with a floor of
    half an event, as the ``held_inputs`` detector tests), the TV distance as the effect, and the bars."""
    from scipy.stats import chi2

    from monitor.drift.categories import OTHER_KEY

    known = [c for c in table if c != OTHER_KEY]
    ref_counts = np.array([table[c] for c in known] + [table.get(OTHER_KEY, 0)], dtype=np.float64)
    seen = Counter(live.tolist())
    live_counts = np.array([seen.get(c, 0) for c in known] + [live.size - sum(seen.get(c, 0) for c in known)], float)
    expected = ref_counts / max(ref_counts.sum(), 1.0)
    share = live_counts / max(live_counts.sum(), 1.0)
    tv = 0.5 * float(np.abs(share - expected).sum()) if live.size else float("nan")
    p = 1.0
    if live.size:
        exp = np.maximum(expected, 0.5 / max(ref_counts.sum(), 1.0))
        exp = exp / exp.sum() * live.size
        p = float(chi2.sf(float(((live_counts - exp) ** 2 / exp).sum()), max(len(known), 1)))
    # the bars: the categories most frequent in either, the rest (and the unseen) as "other"
    order = np.argsort(-(expected[:-1] + share[:-1]), kind="stable")[:MAX_CATEGORIES]
    cats = [known[i] for i in order]
    ref_bars = [float(expected[i]) for i in order]
    live_bars = [float(share[i]) for i in order]
    rest_ref, rest_live = 1.0 - sum(ref_bars), 1.0 - sum(live_bars)
    if rest_ref > 1e-12 or rest_live > 1e-12:
        cats.append(OTHER)
        ref_bars.append(max(rest_ref, 0.0))
        live_bars.append(max(rest_live, 0.0))
    top_ref = known[int(np.argmax(expected[:-1]))] if known else ""
    fields = {
        "name": name,
        "statistic": tv,
        # a category's "mean" is its most frequent value's share (shown as such on the page)
        "live_mean": float(share[known.index(top_ref)]) if known else float("nan"),
        "reference_mean": float(expected[known.index(top_ref)]) if known else float("nan"),
        "kind": "categorical",
        "test": "chi-square",
        "bins": tuple(cats),
        "reference_share": tuple(ref_bars),
        "live_share": tuple(live_bars),
    }
    return fields, p


def period_estimates(
    fit: EstimatorFit,
    res: ScoreResult,
    correct: NDArray[np.float64] | None,
    times: NDArray[np.float64] | None,
    *,
    method: str | None,
    seed: int,
    inputs: NDArray[np.float64] | None = None,
) -> tuple[PeriodEstimate, ...]:
    """The label-free estimate per period (consecutive chunks of at least ``MIN_PERIOD_EVENTS`` events in event-time order, at most ``PERIODS``)
    with its interval, by :func:`monitor.accuracy.periods.estimate_over_time` (the API's ``over_time`` rows), and the
    realized accuracy of the period's labelled events (``correct``: 1/0 per event, NaN where unlabelled). A period
    too small to estimate is left out."""
    from monitor.accuracy.periods import estimate_over_time

    n = int(res.valid.size)
    order = np.arange(n) if times is None else np.argsort(times, kind="stable")
    chunk = int(np.ceil(n / max(1, min(PERIODS, n // MIN_PERIOD_EVENTS)))) if n else 1
    rows = estimate_over_time(
        fit,
        np.where(res.valid, res.probability, np.nan)[order],
        res.gamma[order],
        res.flicker[order],
        res.p_adj[order],
        inputs=None if inputs is None else inputs[order],
        correct=None if correct is None else correct[order],
        period_events=chunk,
        method=method,
        seed=seed,
    )
    where = order.astype(np.float64) if times is None else times[order]
    out = []
    for row in rows:
        idx = np.arange(int(row["period"]), int(row["end"]))
        if not np.isfinite(row["estimate"]):
            continue
        out.append(
            PeriodEstimate(
                float(where[idx].min()),
                float(where[idx].max()),
                int(idx.size),
                float(row["estimate"]),
                float(row["lower"]),
                float(row["upper"]),
                None if row["n_labelled"] == 0 else float(row["realized"]),
                int(row["n_labelled"]),
            )
        )
    return tuple(out)


def segment_drift(
    x: NDArray[np.float64],
    segments: Sequence[str] | None,
    named: Mapping[str, Sequence[str]],
    names: Sequence[str],
    model_wide: NDArray[np.float64],
    baselines: Mapping[str, NDArray[np.float64]],
) -> tuple[SegmentDrift, ...]:
    """Per segment of ``named`` (segment → the inputs its verdict named): those of ``names`` over the segment's
    events (``segments``, one per row of ``x``) against its baseline's feature sample (``baselines``, else
    ``model_wide``), adjusted across the segment's inputs."""
    if segments is None or not named:
        return ()
    seg = np.asarray(segments, dtype=object)
    out = []
    for segment, inputs in named.items():
        cols = [j for j, n in enumerate(names) if n in set(inputs) and j < x.shape[1]]
        mask = seg == segment
        if not cols or not mask.any():
            continue
        own = baselines.get(segment)
        sample = own if own is not None and own.shape[0] >= 10 else model_wide
        drift = input_drift(x[mask][:, cols], sample[:, cols], [names[j] for j in cols])
        out.append(SegmentDrift(segment, int(mask.sum()), "its own" if sample is own else "model-wide", drift))
    return tuple(out)
