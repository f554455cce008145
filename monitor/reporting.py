"""The report: one self-contained HTML page of a model over recorded events, from the library's typed results.

:func:`build_report` reads the events (a ``.jsonl`` log decoded as ``run`` decodes Kafka messages, or any rows
:func:`monitor.api.read_rows` takes), scores them against the reference, replays them through the ``run`` pipeline
for the verdict timeline (or takes a replay's timeline), and gathers six sections, each a typed result:

``verdicts``  the verdict timeline per segment with the detectors that fired (:class:`~monitor.api.ReplayTimeline`);
``signals``   γ, flicker and confidence over event time (the events' timestamps; rows without: over the row),
              binned, against the reference's p5–p95 band (:class:`SignalSeries`), each beside its reference value
              (:class:`~monitor.api.Yardstick`);
``gammamap``  the Gamma Map of the events beside the reference's (:class:`~monitor.gammamap.GammaMap`, drawn by the
              one SVG renderer);
``drift``     per-input drift by name: two-sided KS distance and Benjamini–Hochberg adjusted p against the
              reference's feature sample (:class:`InputDrift`);
``accuracy``  the label-free accuracy estimate with its 90 % interval, and the realized accuracy where labels were
              given (:class:`~monitor.api.AccuracyEstimate`);
``probes``    the probe profile of the flagged events — those whose γ is above the reference's 99th percentile
              (:class:`~monitor.api.ProbeReport`).

A section with nothing to show says why (``note``). :mod:`monitor.exporters.report_page` draws the page.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.api import (
    _SCORING,
    AccuracyEstimate,
    ProbeReport,
    ReferenceResult,
    ReplayTimeline,
    ScoreTable,
    Yardstick,
    _baseline,
    _model_path,
    _score_table,
    _scorer,
    _Scoring,
    accuracy_from_scores,
    live_signals,
    load_model,
    read_rows,
    score_rows,
    scored_reference,
    yardsticks,
)
from monitor.errors import DataError, MonitorError
from monitor.gammamap import GammaMap, gamma_map

#: the section ids, in page order
SECTIONS = ("verdicts", "signals", "gammamap", "drift", "accuracy", "probes")
#: points per signal curve
SIGNAL_BINS = 60
#: events above this reference percentile of γ are flagged for the probe profile
FLAG_PERCENTILE = 99.0
#: the Benjamini–Hochberg false discovery rate at which an input counts as moved
DRIFT_ALPHA = 0.01
#: events per replay micro-batch for the page's timeline: changes placed within 100 events, at a third of the cost
#: of the 10-event batches ``replay`` uses
REPLAY_BATCH = 100


@dataclass(frozen=True)
class SignalSeries:
    """One signal over the log: per bin of consecutive events, the bin's middle line and the signal's mean; the
    reference's p5, median and p95 (NaN without a reference sample). ``time``: where the events carry timestamps
    (an event log), each bin's mean event time in epoch seconds, the bins then cut in event-time order; the page
    plots over it (None: over the line)."""

    signal: str
    line: NDArray[np.float64]
    mean: NDArray[np.float64]
    ref_low: float
    ref_median: float
    ref_high: float
    time: NDArray[np.float64] | None = None


@dataclass(frozen=True)
class InputDrift:
    """One input element: its name, the KS distance D between the events and the reference sample, the
    Benjamini–Hochberg adjusted p-value, and whether it moved (adjusted p < ``DRIFT_ALPHA``)."""

    name: str
    statistic: float
    p_value: float
    moved: bool
    live_mean: float
    reference_mean: float


@dataclass(frozen=True)
class VerdictSpan:
    """A segment's verdict from line ``start`` to line ``end`` (exclusive) and the detectors that set it."""

    segment: str
    verdict: str
    start: int
    end: int
    detectors: tuple[str, ...] = ()
    features: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReportData:
    """Everything the page shows, each section a typed result or the reason it is empty (``*_note``)."""

    title: str
    model: str
    source: str
    n_lines: int
    n_events: int
    invalid: Mapping[str, int]
    kind: str
    scores: ScoreTable
    timeline: ReplayTimeline | None
    spans: tuple[VerdictSpan, ...]
    timeline_note: str
    signals: tuple[SignalSeries, ...]
    yardstick: tuple[Yardstick, ...]
    gamma_map: GammaMap | None
    gamma_map_note: str
    drift: tuple[InputDrift, ...]
    drift_note: str
    accuracy: AccuracyEstimate | None
    accuracy_note: str
    probe: ProbeReport | None
    probe_note: str
    n_flagged: int = 0
    flag_threshold: float = float("nan")
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: events per micro-batch of the replay run for the page (0: the timeline came from elsewhere)
    replay_batch: int = 0
    #: the reference's Gamma Map (a classifier's): the reference JSON's (``reference.gamma_map``), or drawn from
    #: the reference rows
    reference_gamma_map: GammaMap | None = None
    #: invalid lines refused for one input's value: ``"feature: problem"`` → lines
    invalid_inputs: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Report:
    """:func:`build_report`'s result: the data behind the page, the page, and where it was written."""

    data: ReportData
    html: str
    path: Path | None = None


def build_report(
    model: Any,
    reference: Any,
    events: Any,
    *,
    out: str | os.PathLike[str] | None = None,
    timeline: ReplayTimeline | str | os.PathLike[str] | None = None,
    labels: Any = None,
    config: str | os.PathLike[str] | None = None,
    max_events: int | None = None,
    probe_points: int = 20,
    probe_budget_rows: int = 20000,
    title: str | None = None,
    model_name: str | None = None,
    seed: int = _SCORING.seed,
    replay_batch: int = REPLAY_BATCH,
) -> Report:
    """Gather the six sections and draw the page (written to ``out`` when given).

    Parameters
    ----------
    model : the ONNX path (or a loaded model).
    reference : a reference JSON, :func:`monitor.reference`'s result, or reference rows.
    events : a ``.jsonl`` event log, or rows (DataFrame, array, file) in event order.
    timeline : a replay's timeline (its JSON path, or :func:`monitor.replay`'s result); default: replay ``events``
        here (a ``.jsonl`` log only).
    labels : the true class per event (an array), for the realized accuracy beside the estimate.
    config : the YAML configuration the replay runs with (detectors, segments), as ``run`` reads it.
    max_events : read only the first that many events (the replay too).
    probe_points, probe_budget_rows : at most that many flagged events are probed, within that many model rows.
    replay_batch : events per micro-batch of the replay unless ``config`` names a size: a verdict change is placed
        within that many events of the event that decided it (the replay's cost falls as it grows).
    """
    from monitor.api import probe as run_probe
    from monitor.exporters.report_page import render_page

    m = load_model(model)
    base = _baseline(reference, m, None, space="standardized")
    is_log = isinstance(events, (str, os.PathLike)) and str(events).lower().endswith(".jsonl")
    rows = read_rows(
        events, m, what="events", feature_names=base.feature_names, max_events=max_events, model_name=model_name
    )
    if max_events is not None and not is_log and len(rows) > max_events:
        rows = rows.take(np.arange(max_events))
    if not np.all(np.isfinite(rows.x)):
        rows = rows.take(np.all(np.isfinite(rows.x), axis=1))
    notes: list[str] = [rows.source]
    # the verdict timeline first: a replay here scores every event, and its scores serve the page (one pass)
    tl: ReplayTimeline | None = None
    timeline_note = ""
    if isinstance(timeline, ReplayTimeline):
        tl = timeline
    elif timeline is not None:
        try:
            tl = ReplayTimeline.from_document(json.loads(Path(timeline).read_text(encoding="utf-8")))
        except (OSError, json.JSONDecodeError) as exc:
            raise DataError(f"cannot read the timeline '{timeline}': {exc}", path=str(timeline)) from None
    elif not is_log:
        timeline_note = "no verdict timeline: the events are rows, not an event log (replay needs a .jsonl log)"
    else:
        tl, timeline_note = _replay(model, reference, base.path, events, config, max_events, model_name, replay_batch)
    s = _SCORING
    scorer = _scorer(
        m, base, _Scoring(s.radius, s.sigma, s.flicker_copies, s.steps, seed, s.ball, s.output, s.regression_tolerance)
    )
    if (
        tl is not None
        and tl.scores is not None
        and tl.scored_rows is not None
        and np.array_equal(tl.scored_rows, rows.x)
    ):
        res = tl.scores  # the pipeline scored exactly these events, in this order
        notes.append("scores: the replay's")
    else:
        res = score_rows(scorer, rows.x, rows.held)
    table = _score_table(m.kind, res, rows)
    ref = base.reference
    if ref is None and base.rows is not None:
        ref = scored_reference(scorer, base.rows, m.kind)
    # the reference's own Gamma Map, drawn beside the live one (a classifier's reference keeps it)
    ref_map = ref.gamma_map if ref is not None and m.kind == "classifier" else None
    line = rows.lines.astype(np.float64) if rows.lines is not None else np.arange(len(rows), dtype=np.float64)
    live = live_signals(res, m.kind)
    ystick = yardsticks(live, ref) if ref is not None else ()
    times = event_times(rows.timestamps)
    signals = tuple(_series(name, line, values, ref, times) for name, values in live.items())

    n_lines = int(sum(rows.invalid.values()) + len(rows)) if is_log else len(rows)
    spans = _spans(tl, rows.segments, n_lines) if tl is not None else ()

    # Gamma Map
    gmap: GammaMap | None = None
    gmap_note = ""
    if m.kind != "classifier":
        gmap_note = "no Gamma Map: it plots γ against the predicted class's probability, which a regressor has not"
    else:
        ok = res.valid & np.isfinite(res.probability) & np.isfinite(res.gamma)
        gmap = gamma_map(res.probability[ok], res.gamma[ok])

    # per-input drift
    drift: tuple[InputDrift, ...] = ()
    drift_note = ""
    if ref is None or ref.feature_sample.shape[0] < 10:
        drift_note = "no per-input drift: the reference keeps no feature sample"
    else:
        names = ref.feature_names or m.signature.features
        drift = input_drift(rows.x, ref.feature_sample, names)

    # accuracy
    acc: AccuracyEstimate | None = None
    acc_note = ""
    if m.kind != "classifier":
        acc_note = "no accuracy estimate: accuracy estimation is for classifiers"
    elif base.fit is None:
        acc_note = (
            "no accuracy estimate: the reference holds no fitted estimator (build it with labels: "
            "`harmonic-monitor reference --labels`, or monitor.reference(..., labels=y))"
        )
    else:
        y = None if labels is None else np.asarray(labels).reshape(-1)
        acc = accuracy_from_scores(base.fit, res, m, rows, y, seed=seed)
        if acc.realized is None:
            acc_note = "no labels: realized accuracy not shown"

    # probes on the flagged events
    probe: ProbeReport | None = None
    probe_note = ""
    threshold = float(np.percentile(ref.gamma_sample, FLAG_PERCENTILE)) if ref is not None else float("nan")
    flagged = np.flatnonzero(res.valid & (res.gamma > threshold)) if np.isfinite(threshold) else np.zeros(0, int)
    if ref is None:
        probe_note = "no probe profile: no reference γ to flag events against"
    elif flagged.size == 0:
        probe_note = f"no probe profile: no event's γ is above the reference's p{FLAG_PERCENTILE:.0f} ({threshold:.3g})"
    else:
        top = flagged[np.argsort(-res.gamma[flagged], kind="stable")[:probe_points]]
        try:
            probe = run_probe(
                m,
                rows.take(np.sort(top)),
                reference,
                budget_rows=probe_budget_rows,
                steps=5,
                seed=seed,
            )
        except MonitorError as exc:
            probe_note = f"no probe profile: {exc}"

    data = ReportData(
        title=title or f"harmonic-monitor report: {Path(_model_path(model)).name}",
        model=_model_path(model),
        source=str(events) if isinstance(events, (str, os.PathLike)) else rows.source,
        n_lines=n_lines,
        n_events=len(rows),
        invalid=dict(rows.invalid),
        invalid_inputs=dict(rows.invalid_inputs),
        kind=m.kind,
        scores=table,
        timeline=tl,
        spans=spans,
        timeline_note=timeline_note,
        signals=signals,
        yardstick=ystick,
        gamma_map=gmap,
        gamma_map_note=gmap_note,
        drift=drift,
        drift_note=drift_note,
        accuracy=acc,
        accuracy_note=acc_note,
        probe=probe,
        probe_note=probe_note,
        n_flagged=int(flagged.size),
        flag_threshold=threshold,
        notes=tuple(notes),
        reference_gamma_map=ref_map,
        replay_batch=replay_batch if (is_log and timeline is None and tl is not None) else 0,
    )
    page = render_page(data)
    path = None
    if out is not None:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page, encoding="utf-8")
    return Report(data, page, path)


def _replay(
    model: Any,
    reference: Any,
    ref_path: Path | None,
    events: Any,
    config: Any,
    max_events: int | None,
    model_name: str | None,
    batch_events: int,
) -> tuple[ReplayTimeline | None, str]:
    from monitor.api import replay

    ref: Any = reference
    if ref_path is None and not isinstance(reference, (ReferenceResult, str, os.PathLike)):
        return None, "no verdict timeline: the replay reads its reference from a file; pass a reference JSON or path"
    tl = replay(
        model,
        events,
        ref,
        config=config,
        max_events=max_events,
        model_name=model_name,
        keep_scores=True,
        batch_events=batch_events,
    )
    return tl, ""


def event_times(timestamps: NDArray[np.float64] | None) -> NDArray[np.float64] | None:
    """The events' times to plot over: None where there are none, any is not finite, or all are equal.

    >>> event_times(np.array([1.0, 1.0])) is None, event_times(np.array([2.0, 1.0])).tolist()
    (True, [2.0, 1.0])
    """
    if timestamps is None or timestamps.size < 2 or not np.all(np.isfinite(timestamps)):
        return None
    return None if float(np.ptp(timestamps)) == 0.0 else np.asarray(timestamps, dtype=np.float64)


def _series(
    name: str,
    line: NDArray[np.float64],
    values: NDArray[np.float64],
    ref: Any,
    times: NDArray[np.float64] | None = None,
) -> SignalSeries:
    sample = {"gamma": "gamma_sample", "flicker": "flicker_sample", "confidence": "confidence_sample"}[name]
    ref_values = np.zeros(0) if ref is None else np.asarray(getattr(ref, sample))
    if ref_values.size:
        lo, med, hi = (float(v) for v in np.percentile(ref_values, [5, 50, 95]))
    else:
        lo = med = hi = float("nan")
    # bins of consecutive events: in event-time order where the events carry times, else in the log's order
    order = np.arange(values.size) if times is None else np.argsort(times, kind="stable")
    bins = np.array_split(order, min(SIGNAL_BINS, max(values.size, 1)))
    xs, ts, ys = [], [], []
    for b in bins:
        v = values[b]
        v = v[np.isfinite(v)]
        if b.size == 0 or v.size == 0:
            continue
        xs.append(float(np.mean(line[b])))
        if times is not None:
            ts.append(float(np.mean(times[b])))
        ys.append(float(np.mean(v)))
    time = None if times is None else np.asarray(ts)
    return SignalSeries(name, np.asarray(xs), np.asarray(ys), lo, med, hi, time)


def input_drift(
    x: NDArray[np.float64], reference_sample: NDArray[np.float64], names: Sequence[str]
) -> tuple[InputDrift, ...]:
    """Per input element, the two-sided KS distance between ``x`` (N, D) and the reference sample (m, D), with
    Benjamini–Hochberg adjusted p-values (as the per-feature drift detector tests a window).

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> d = input_drift(rng.normal(size=(500, 2)) + [0.0, 1.0], rng.normal(size=(500, 2)), ["a", "b"])
    >>> [(v.name, v.moved) for v in d]
    [('a', False), ('b', True)]
    """
    from monitor.drift.base import ks_two_sample
    from monitor.drift.calibrate import benjamini_hochberg

    stats, ps = [], []
    for j in range(x.shape[1]):
        col = x[:, j][np.isfinite(x[:, j])]
        d, p = ks_two_sample(col, np.sort(reference_sample[:, j]), "two-sided")
        stats.append(d)
        ps.append(p)
    adjusted = benjamini_hochberg(np.asarray(ps, dtype=np.float64)) if ps else np.zeros(0)
    return tuple(
        InputDrift(
            str(names[j]) if j < len(names) else f"x[{j}]",
            float(stats[j]),
            float(adjusted[j]),
            bool(adjusted[j] < DRIFT_ALPHA),
            float(np.nanmean(x[:, j])),
            float(np.mean(reference_sample[:, j])),
        )
        for j in range(x.shape[1])
    )


def _spans(tl: ReplayTimeline, segments: Sequence[str] | None, n_lines: int) -> tuple[VerdictSpan, ...]:
    """Each segment's verdicts as consecutive spans over the log's lines (stable until its first change)."""
    segs = sorted({str(c.get("segment", "other")) for c in tl.changes} | set(segments or ()))
    out: list[VerdictSpan] = []
    end_line = max(n_lines, tl.events)
    for seg in segs:
        start, verdict, fired, feats = 0, "stable", (), ()
        for c in sorted(
            (c for c in tl.changes if str(c.get("segment", "other")) == seg), key=lambda c: int(c["index"])
        ):
            at = int(c["index"])
            out.append(VerdictSpan(seg, verdict, start, at, tuple(fired), tuple(feats)))
            start, verdict = at, str(c["verdict"])
            fired, feats = tuple(c.get("detectors", ())), tuple(c.get("features", ()))
        out.append(VerdictSpan(seg, verdict, start, end_line, tuple(fired), tuple(feats)))
    return tuple(s for s in out if s.end > s.start or s.end == s.start == end_line == 0)
