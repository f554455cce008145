"""The report: one self-contained HTML page of a model over recorded events, from the offline engine's typed results.

:func:`build_report` reads the events (a ``.jsonl`` log decoded as ``run`` decodes Kafka messages, or any rows
:func:`~monitor.offline.rows.read_rows` takes), scores them against the reference, replays them through the ``run``
pipeline for the verdict timeline (or takes a replay's timeline; rows over a DataFrame's DatetimeIndex are replayed
as the log they stand for), and gathers the sections, each a typed result (:mod:`monitor.offline.report_data`), all
on one axis: event time (the events' timestamps, or a DataFrame's DatetimeIndex), else the events' positions:

``summary``   each segment's verdict, what moved, the estimated accuracy and what to do (drawn from the others);
``verdicts``  the verdict timeline per segment with the detectors that fired
              (:class:`~monitor.offline.replay.ReplayTimeline`);
``signals``   γ, flicker and confidence, binned, against the reference's p5–p95 band and median
              (:class:`~monitor.offline.report_data.SignalSeries`), each beside its reference value
              (:class:`~monitor.offline.results.Yardstick`);
``gammamap``  the Gamma Map of the events beside the reference's (:class:`~monitor.gammamap.GammaMap`, drawn by the
              one SVG renderer);
``drift``     per input by name, numeric and categorical: the test, its effect and the two distributions
              (:func:`~monitor.offline.report_inputs.input_drift`, :class:`~monitor.offline.report_data.InputDrift`);
``accuracy``  the label-free accuracy estimate per period and over the whole log with its 90 % interval, and the
              realized accuracy where labels were given (:class:`~monitor.offline.report_data.PeriodEstimate`,
              :class:`~monitor.offline.results.AccuracyEstimate`);
``probes``    the probe profile of the flagged events — those whose γ is above the reference's 99th percentile
              (:class:`~monitor.offline.probe.ProbeReport`).

A section with nothing to show says why (``note``). :mod:`monitor.offline.report_page` draws the page.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from monitor.accuracy.estimators import SMALL_N
from monitor.errors import DataError, MonitorError
from monitor.gammamap import GAMMA_EDGES, GammaMap, gamma_map
from monitor.offline.baseline import Baseline, load_baseline
from monitor.offline.compare import two_models
from monitor.offline.estimate import accuracy_from_scores
from monitor.offline.keywords import SEED, scoring_config
from monitor.offline.probe import ProbeReport, probe
from monitor.offline.replay import ReplayTimeline
from monitor.offline.report_data import (
    InputDrift,
    PeriodEstimate,
    Report,
    ReportData,
    SegmentDrift,
    SignalSeries,
    VerdictSpan,
)
from monitor.offline.report_inputs import DRIFT_ALPHA, input_drift, period_estimates, segment_drift
from monitor.offline.report_timeline import (
    event_times,
    page_timeline,
    verdict_spans,
)
from monitor.offline.results import AccuracyEstimate, ReferenceResult, yardsticks
from monitor.offline.rows import Rows, load_model, model_path, read_rows
from monitor.offline.scoring import live_signals, robustness_scorer, score_rows, score_table, scored_reference

if TYPE_CHECKING:
    from monitor.model.onnx import OnnxModel
    from monitor.rolling.reference import Reference
    from monitor.signals.scorer import ScoreResult

__all__ = [
    "DRIFT_ALPHA",
    "FLAG_PERCENTILE",
    "REPLAY_BATCH",
    "SIGNAL_BINS",
    "build_report",
    "event_times",
    "input_drift",
]

#: points per signal curve
SIGNAL_BINS = 60
#: events above this reference percentile of γ are flagged for the probe profile
FLAG_PERCENTILE = 99.0
#: events per replay micro-batch for the page's timeline: changes placed within 100 events, at a third of the cost
#: of the 10-event batches ``replay`` uses
REPLAY_BATCH = 100


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
    seed: int = SEED,
    replay_batch: int = REPLAY_BATCH,
    feature_names: Sequence[str] | None = None,
    candidate: Any = None,
    reference_labels: Any = None,
) -> Report:
    """One self-contained HTML page of the model over recorded events: the verdict timeline per segment, the signals
    against their reference bands, the Gamma Map, per-input drift, the accuracy estimate and the probe profile of the
    flagged events (:mod:`monitor.offline.report` says what each section holds); written to ``out`` when given.

    Parameters
    ----------
    model : the ONNX path (or a loaded model).
    reference : a reference JSON, :func:`monitor.reference`'s result, or reference rows.
    events : a ``.jsonl`` event log, or rows (DataFrame, array, file) in event order.
    timeline : a replay's timeline (its JSON path, or :func:`monitor.replay`'s result); default: replay ``events``
        here (a ``.jsonl`` log only).
    labels : the true class per event (an array), for the realized accuracy beside the estimate; NaN or None
        where an event is unlabelled (the realized accuracy then covers the labelled events, per period too).
    config : the YAML configuration the replay runs with (detectors, segments), as ``run`` reads it.
    max_events : read only the first that many events (the replay too).
    probe_points, probe_budget_rows : at most that many flagged events are probed, within that many model rows.
    replay_batch : events per micro-batch of the replay unless ``config`` names a size: a verdict change is placed
        within that many events of the event that decided it (the replay's cost falls as it grows).
    feature_names : the names the page shows the model's float input elements by (in the signature's order), where
        the model and the reference carry none (``input[13]`` otherwise).
    candidate : a second ONNX model (path or loaded) beside ``model``: the section "Two models" compares them on the
        same events and reference (:func:`monitor.compare`), or says why it cannot.
    reference_labels : the true class per reference row (reference rows only): each model's label-free accuracy
        estimate in that section.

    Returns
    -------
    Report
        ``data`` (every section's typed result, or why it is empty), ``html`` (the page) and ``path`` (``out``).
    """
    from monitor.offline.report_page import render_page

    m = load_model(model)
    is_log = isinstance(events, (str, os.PathLike)) and str(events).lower().endswith(".jsonl")
    if reference is None:  # the events standardize themselves; nothing is compared with a reference
        names = _names(feature_names, None, m)
        rows = _event_rows(events, m, names, max_events=max_events, model_name=model_name, is_log=is_log)
        base = load_baseline(None, m, rows, space="standardized") if len(rows) else _bare_baseline(m)
    else:
        base = load_baseline(reference, m, None, space="standardized")
        names = _names(feature_names, base.feature_names, m)
        rows = _event_rows(events, m, names, max_events=max_events, model_name=model_name, is_log=is_log)
    # the verdict timeline first: a replay here scores every event, and its scores serve the page (one pass)
    tl, timeline_note = page_timeline(
        timeline, (model, m), reference, base, events, rows, is_log, (config, max_events, model_name, replay_batch)
    )
    res, ref, replay_scores = _scored(m, base, rows, tl, seed)
    line = rows.lines.astype(np.float64) if rows.lines is not None else np.arange(len(rows), dtype=np.float64)
    live = live_signals(res, m.kind)
    times = event_times(rows.timestamps)
    n_lines = int(sum(rows.invalid.values()) + len(rows)) if is_log else len(rows)
    spans = verdict_spans(tl, rows.segments, n_lines, rows.lines, times) if tl is not None else ()
    data = ReportData(
        title=title or f"harmonic-monitor report: {Path(model_path(model)).name}",
        model=model_path(model),
        source=str(events) if isinstance(events, (str, os.PathLike)) else rows.source,
        n_lines=n_lines,
        n_events=len(rows),
        invalid=dict(rows.invalid),
        invalid_inputs=dict(rows.invalid_inputs),
        kind=m.kind,
        scores=score_table(m.kind, res, rows),
        timeline=tl,
        spans=spans,
        segment_drift=_segment_drift(rows, spans, ref, names, reference, m),
        timeline_note=timeline_note,
        signals=tuple(_series(name, line, values, ref, times) for name, values in live.items()) if len(rows) else (),
        yardstick=yardsticks(live, ref) if ref is not None and len(rows) else (),
        notes=(rows.source, "scores: the replay's") if replay_scores else (rows.source,),
        replay_batch=replay_batch if (timeline is None and tl is not None) else 0,
        axis="time" if times is not None else "line",
        feature_names=tuple(names),
        **two_models(
            (model, candidate), (reference, reference_labels), events, labels, seed, feature_names, max_events, base
        ),
        **_sections(m, base, rows, reference, res, ref, labels, (probe_points, probe_budget_rows), seed, names, times),
    )
    return _written(data, render_page(data), out)


def _bare_baseline(model: OnnxModel) -> Baseline:
    """No reference and no event: raw units, nothing to compare with."""
    from monitor.model.standardize import Standardizer

    return Baseline(Standardizer.identity(model.n_features), None, None, None, None, None, None, None)


def _names(given: Sequence[str] | None, theirs: Sequence[str] | None, model: OnnxModel) -> list[str]:
    """The names the page shows the float input elements by: ``feature_names`` where given, else the
    reference's (``theirs``), else the model's."""
    own = list(theirs or model.signature.features)
    if given is None:
        return own
    if len(given) != len(own):
        raise DataError(
            f"feature_names: expected {len(own)} names (one per float input element of the model), got {len(given)}; "
            "pass one name per element in the model's order"
        )
    return [str(n) for n in given]


def _event_rows(
    events: Any,
    model: OnnxModel,
    names: Sequence[str],
    *,
    max_events: int | None,
    model_name: str | None,
    is_log: bool,
) -> Rows:
    """The events as rows (the first ``max_events``), those with a value that is not finite left out; a
    DataFrame's DatetimeIndex as the events' times."""
    try:
        rows = read_rows(
            events, model, what="events", feature_names=tuple(names), max_events=max_events, model_name=model_name
        )
    except DataError as exc:
        found = re.search(r"holds no valid event for model '[^']*' \((.*)\)$", str(exc)) if is_log else None
        if found is None:
            raise
        # a log of which no line is a valid event: a page that says so, the lines counted by reason
        pairs = (part.rsplit(": ", 1) for part in found.group(1).split(", ") if ": " in part)
        invalid = {k: int(v) for k, v in pairs}
        rows = Rows(np.zeros((0, model.n_features)), None, str(exc), invalid=invalid)
    if rows.timestamps is None and getattr(getattr(rows.index, "dtype", None), "kind", "") == "M":
        idx = rows.index if rows.index.tz is None else rows.index.tz_convert("UTC").tz_localize(None)
        stamps = idx.to_numpy().astype("datetime64[ns]").astype(np.int64).astype(np.float64)[: len(rows)] / 1e9
        rows = dataclasses.replace(rows, timestamps=stamps)
    if max_events is not None and not is_log and len(rows) > max_events:
        rows = rows.take(np.arange(max_events))
    if not np.all(np.isfinite(rows.x)):
        rows = rows.take(np.all(np.isfinite(rows.x), axis=1))
    return rows


def _scored(
    model: OnnxModel, base: Baseline, rows: Rows, tl: ReplayTimeline | None, seed: int
) -> tuple[ScoreResult, Reference | None, bool]:
    """The events' scores (the replay's where it scored exactly these events, in this order: then True), and the
    reference to compare with (reference rows scored here)."""
    scorer = robustness_scorer(model, base, scoring_config({"seed": seed}, base.scales))
    kept = (None, None) if tl is None else (tl.scores, tl.scored_rows)
    if len(rows) == 0:
        res, reused = scorer.score(rows.x, None), False
    elif kept[0] is not None and kept[1] is not None and np.array_equal(kept[1], rows.x):
        res, reused = kept[0], True
    else:
        res, reused = score_rows(scorer, rows.x, rows.held), False
    ref = base.reference
    if ref is None and base.rows is not None:
        ref = scored_reference(scorer, base.rows, model.kind)
    return res, ref, reused


def _sections(
    model: OnnxModel,
    base: Baseline,
    rows: Rows,
    reference: Any,
    res: ScoreResult,
    ref: Reference | None,
    labels: Any,
    probe_budget: tuple[int, int],
    seed: int,
    names: Sequence[str],
    times: NDArray[np.float64] | None,
) -> dict[str, Any]:
    """The Gamma Map, drift, accuracy (overall and per period) and probe sections, each with its note, as
    :class:`ReportData`'s fields."""
    if len(rows) == 0:
        why = "no event could be read" if rows.invalid else "the events are empty"
        return {
            f: None
            if f in ("gamma_map", "accuracy", "probe")
            else (f"nothing to draw: {why}" if f.endswith("note") else ())
            for f in ("gamma_map", "gamma_map_note", "drift", "drift_note", "accuracy", "accuracy_note", "probe")
        } | {"probe_note": f"no probe profile: {why}", "periods_note": f"no estimate per period: {why}"}
    gmap, gmap_note = _gamma_map(model, res, ref)
    drift, drift_note = _drift(model, rows, ref, names)
    acc, acc_note, periods, periods_note = _accuracy(model, base, res, rows, labels, seed, times)
    flagged, threshold = _flagged(res, ref)
    probed, probe_note = _probe(model, rows, reference, res, ref, (flagged, threshold), *probe_budget, seed)
    return {
        "periods": periods,
        "periods_note": periods_note,
        "gamma_map": gmap,
        "gamma_map_note": gmap_note,
        # the reference's own Gamma Map, drawn beside the live one (a classifier's reference keeps it)
        "reference_gamma_map": ref.gamma_map if ref is not None and model.kind == "classifier" else None,
        # as /gammamap draws it: K from the classes the reference predicts, the P axis from 1/K
        "gamma_map_classes": max(ref.class_mix) + 1 if ref is not None and ref.class_mix else None,
        "drift": drift,
        "drift_note": drift_note,
        "accuracy": acc,
        "accuracy_note": acc_note,
        "probe": probed,
        "probe_note": probe_note,
        "n_flagged": int(flagged.size),
        "flag_threshold": threshold,
    }


def _gamma_map(model: OnnxModel, res: ScoreResult, ref: Reference | None) -> tuple[GammaMap | None, str]:
    """The events' map on the model's γ edges (the reference's; the fixed grid without one)."""
    if model.kind != "classifier":
        return None, "no Gamma Map: it plots γ against the predicted class's probability, which a regressor has not"
    ok = res.valid & np.isfinite(res.probability) & np.isfinite(res.gamma)
    edges = GAMMA_EDGES if ref is None else ref.gamma_edges
    return gamma_map(res.probability[ok], res.gamma[ok], gamma_edges=edges), ""


def _drift(
    model: OnnxModel, rows: Rows, ref: Reference | None, names: Sequence[str]
) -> tuple[tuple[InputDrift, ...], str]:
    from monitor.drift.categories import held_columns, held_element_names

    if ref is None:
        return (), "no per-input drift: no reference to compare the inputs with"
    if ref.feature_sample.shape[0] < 10:
        return (), "no per-input drift: the reference keeps no feature sample"
    cats = {} if rows.held is None else held_columns(rows.held.values, held_element_names(model.signature))
    drift = input_drift(rows.x, ref.feature_sample, names, cats, ref.held_tables)
    missing = sorted(set(cats) - set(ref.held_tables))
    note = (
        f"no category test for {', '.join(missing)}: the reference keeps no count table of them (rebuild it with "
        "`harmonic-monitor reference`)"
        if missing
        else ""
    )
    return drift, note


def _segment_drift(
    rows: Rows, spans: Sequence[VerdictSpan], ref: Reference | None, names: Sequence[str], reference: Any, m: OnnxModel
) -> tuple[SegmentDrift, ...]:
    """The inputs each segment's verdict named, over that segment's events against its baseline (the reference
    JSON's per-segment one where it keeps it)."""
    named: dict[str, list[str]] = {}
    for s in spans:
        if s.features:
            named.setdefault(s.segment, []).extend(f for f in s.features if f not in named.get(s.segment, []))
    if not named or ref is None or ref.feature_sample.shape[0] < 10:
        return ()
    if rows.segments is None or len(set(rows.segments)) < 2:
        return ()  # one segment: its figures are the pooled ones
    own: Mapping[str, Reference] = {}
    if isinstance(reference, ReferenceResult):
        own = reference.segments or {}
    elif isinstance(reference, (str, os.PathLike)) and str(reference).lower().endswith(".json"):
        from monitor.rolling.reference_file import read_segment_references

        own = read_segment_references(str(reference), m.n_features)
    samples = {k: v.feature_sample for k, v in own.items()}
    return segment_drift(rows.x, rows.segments, named, names, ref.feature_sample, samples)


def _accuracy(
    model: OnnxModel,
    base: Baseline,
    res: ScoreResult,
    rows: Rows,
    labels: Any,
    seed: int,
    times: NDArray[np.float64] | None,
) -> tuple[AccuracyEstimate | None, str, tuple[PeriodEstimate, ...], str]:
    """The estimate over all the events and per period; labels with gaps (NaN, None) give the realized accuracy
    of the labelled events only."""
    if model.kind != "classifier":
        why = "no accuracy estimate: accuracy estimation is for classifiers"
        return None, why, (), why
    if base.fit is None:
        why = (
            "no accuracy estimate: the reference holds no fitted estimator (build it with labels: "
            "`harmonic-monitor reference --labels`, or monitor.reference(..., labels=y))"
        )
        return None, why, (), why
    y, known = _labels(labels, len(rows))
    acc = accuracy_from_scores(base.fit, res, model, rows, y if known is None else None, seed=seed)
    correct = None
    if y is not None:
        from monitor.offline.estimate import predicted_values
        from monitor.offline.rows import int_labels

        mask = np.ones(len(rows), bool) if known is None else known
        correct = np.full(len(rows), np.nan)
        if mask.any():
            correct[mask] = (predicted_values(model, rows)[mask] == int_labels(y[mask])).astype(np.float64)
        if known is not None:
            ok = np.isfinite(correct) & res.valid
            acc = dataclasses.replace(
                acc, realized=float(correct[ok].mean()) if ok.any() else None, n_labelled=int(ok.sum())
            )
    periods = period_estimates(base.fit, res, correct, times, method=acc.method, seed=seed, inputs=rows.x)
    if acc.realized is None:
        note = "no labels: realized accuracy not shown"
    elif known is not None:
        note = f"labels for {acc.n_labelled} of {len(rows)} events: the realized accuracy covers those only"
    else:
        note = ""
    unlabelled = sum(1 for p in periods if p.realized is None)
    pnote = (
        f"{unlabelled} of {len(periods)} periods have no labels: no realized accuracy there"
        if y is not None and unlabelled
        else ""
    )
    if not periods:
        pnote = (
            f"no estimate per period: each period needs at least {SMALL_N} scored events "
            f"({int(res.valid.sum())} here); an estimate of fewer is mostly noise"
        )
    return acc, note, periods, pnote


def _labels(labels: Any, n: int) -> tuple[NDArray[Any] | None, NDArray[np.bool_] | None]:
    """The labels, and where some are missing (NaN, None) the mask of the known ones (None: all known)."""
    if labels is None:
        return None, None
    y = np.asarray(labels).reshape(-1)
    if y.shape[0] != n:
        raise DataError(f"labels: {y.shape[0]} values for {n} events; give one class per event (NaN: unlabelled)")
    if y.dtype.kind == "f":
        known = np.isfinite(y)
    elif y.dtype.kind == "O":
        known = np.array([v is not None and not (isinstance(v, float) and v != v) for v in y.tolist()], bool)
    else:
        return y, None
    if known.all():
        return (y.astype(np.int64) if y.dtype.kind == "f" else y), None
    filled = np.where(known, y, 0)
    return (filled.astype(np.int64) if y.dtype.kind == "f" else filled), known


def _flagged(res: ScoreResult, ref: Reference | None) -> tuple[NDArray[np.intp], float]:
    """The events whose γ is above the reference's ``FLAG_PERCENTILE``, and that threshold (NaN without one)."""
    threshold = float(np.percentile(ref.gamma_sample, FLAG_PERCENTILE)) if ref is not None else float("nan")
    flagged = np.flatnonzero(res.valid & (res.gamma > threshold)) if np.isfinite(threshold) else np.zeros(0, int)
    return flagged, threshold


def _probe(
    model: OnnxModel,
    rows: Rows,
    reference: Any,
    res: ScoreResult,
    ref: Reference | None,
    flags: tuple[NDArray[np.intp], float],
    probe_points: int,
    probe_budget_rows: int,
    seed: int,
) -> tuple[ProbeReport | None, str]:
    """The probe profile of the (at most ``probe_points``) flagged events of the highest γ."""
    flagged, threshold = flags
    if ref is None:
        return None, "no probe profile: no reference γ to flag events against"
    if probe_points <= 0:
        return None, f"no probe profile: probe points {probe_points} (none asked for)"
    if flagged.size == 0:
        return None, f"no probe profile: no event's γ is above the reference's p{FLAG_PERCENTILE:.0f} ({threshold:.3g})"
    top = flagged[np.argsort(-res.gamma[flagged], kind="stable")[:probe_points]]
    try:
        return probe(model, rows.take(np.sort(top)), reference, budget_rows=probe_budget_rows, steps=5, seed=seed), ""
    except MonitorError as exc:
        return None, f"no probe profile: {exc}"


def _written(data: ReportData, page: str, out: str | os.PathLike[str] | None) -> Report:
    """The report, its page written to ``out`` where given."""
    path = None
    if out is not None:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page, encoding="utf-8")
    return Report(data, page, path)


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
