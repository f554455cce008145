"""Replaying a recorded event log through the ``run`` pipeline in event time (``harmonic-monitor replay``,
:func:`monitor.replay`).

Decode, sample, score, windows, detectors, verdicts and alerts run exactly as in ``run`` (the same
:class:`~monitor.runtime.service.Service`), with three differences that make a replay a backtest: the events come
from the file (:class:`~monitor.source.replay.ReplaySource`), alerts are recorded, never delivered; every event is
scored (no sampling, no CPU cap) and windows and alerts read the events' own time (the watermark); micro-batches are
``REPLAY_BATCH`` events unless the settings name a size; a change's ``index`` is the 0-based line of the event at
which it was decided: the event a detector crossed at, whatever the batch size (one the accuracy estimate or an
alert made: the batch's last).
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from monitor import telemetry as tel
from monitor.errors import DataError, SourceError
from monitor.offline.frames import pandas_module
from monitor.offline.results import ReferenceResult
from monitor.offline.rows import ModelLike, log_model_name, model_path

if TYPE_CHECKING:
    from monitor.config import Settings
    from monitor.runtime.watch_report import VerdictChange, WatchReport
    from monitor.signals.scorer import ScoreResult

#: events per micro-batch unless the settings name a size (a change its detectors made names the event they crossed
#: at whatever the size; one the accuracy estimate made lands within this many events)
REPLAY_BATCH = 10
#: the counters behind the summary
_INVALID = tel.EVENTS_INVALID_TOTAL.name
_INVALID_INPUT = tel.INPUT_INVALID_TOTAL.name
_SCORED = tel.EVENTS_SCORED_TOTAL.name


@dataclass(frozen=True)
class ReplayTimeline:
    """:func:`replay`'s result: the verdict changes and alert transitions of the pipeline over an event log, each
    at the 0-based line where it was decided, and the lines refused by reason."""

    events: int
    changes: tuple[Mapping[str, Any], ...]
    alerts: tuple[Mapping[str, Any], ...]
    invalid: Mapping[str, int]
    scored: int
    seconds: float = 0.0
    #: each time a detector of a segment turned on or off: ``{"index", "model", "segment", ...}``
    crossings: tuple[Mapping[str, Any], ...] = ()
    #: with ``keep_scores``: every scored event's features (N, D) and scores, in the order the pipeline scored them
    scored_rows: NDArray[np.float64] | None = field(default=None, repr=False, compare=False)
    scores: ScoreResult | None = field(default=None, repr=False, compare=False)
    #: the refused lines again by the input whose value was at fault: ``{"model/input: problem": count}``
    invalid_inputs: Mapping[str, int] = field(default_factory=dict)
    #: per model with a labelled reference, the label-free estimate per period (:meth:`over_time`)
    accuracy: tuple[Mapping[str, Any], ...] = ()

    def document(self) -> dict[str, Any]:
        """The timeline JSON ``harmonic-monitor replay --timeline`` writes."""
        return {
            "events": self.events,
            "changes": [dict(c) for c in self.changes],
            "alerts": [dict(a) for a in self.alerts],
            "crossings": [dict(c) for c in self.crossings],
            "accuracy": [_json_row(r) for r in self.accuracy],
        }

    def over_time(self) -> Any:
        """The label-free estimate per period, one row per model and period: ``model``, ``metric`` (``accuracy``;
        a regressor's ``mae``), ``period``, ``end`` (event-time seconds, or event counts for periods of events),
        ``n``, ``estimate``, ``lower``, ``upper`` (90 %), ``method``, ``realized`` and ``n_labelled`` (the labelled
        events', NaN without), ``note`` (why a period has no estimate); as
        :meth:`~monitor.offline.results.AccuracyEstimate.over_time` gives offline."""
        from monitor.accuracy.periods import PERIOD_COLUMNS

        pd = pandas_module()
        cols = ["model", "metric", *PERIOD_COLUMNS]
        return pd.DataFrame([{k: r.get(k) for k in cols} for r in self.accuracy], columns=cols).astype(
            {k: float for k in ("estimate", "lower", "upper", "realized")}
        )

    def to_frame(self) -> Any:
        """One row per verdict change."""
        pd = pandas_module()
        cols = ["index", "ts", "model", "segment", "previous", "verdict", "detectors", "features", "not_harm"]
        return pd.DataFrame([{k: c.get(k) for k in cols} for c in self.changes], columns=cols)

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> ReplayTimeline:
        """A timeline read back from its JSON (``replay --timeline``)."""
        try:
            return cls(
                int(doc["events"]),
                tuple(doc.get("changes", ())),
                tuple(doc.get("alerts", ())),
                {},
                0,
                crossings=tuple(doc.get("crossings", ())),
                accuracy=tuple(
                    {k: math.nan if v is None and k in _NAN_COLUMNS else v for k, v in r.items()}
                    for r in doc.get("accuracy", ())
                ),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"not a replay timeline (expected 'events', 'changes', 'alerts'): {exc}") from None


def replay(
    model: ModelLike | None,
    events: str | os.PathLike[str],
    reference: Any = None,
    *,
    config: str | os.PathLike[str] | None = None,
    max_events: int | None = None,
    state_dir: str | os.PathLike[str] | None = None,
    model_name: str | None = None,
    keep_scores: bool = False,
    batch_events: int | None = None,
    labels: Any = None,
    period_seconds: float | None = None,
    period_events: int | None = None,
) -> ReplayTimeline:
    """Run the ``run`` pipeline over a ``.jsonl`` event log in event time (``harmonic-monitor replay``).

    ``reference``: a reference JSON or rows file path, or :func:`reference`'s result (saved to a temporary file);
    ``config``: a YAML configuration (detectors, segments, alerts), as ``run`` reads it; ``batch_events``: events
    per micro-batch unless the configuration names a size (default 10; a change its detectors made names the event
    they crossed at whatever the size, one the accuracy estimate made lands within that many events; larger batches
    replay faster); ``keep_scores``: the timeline also holds every scored event's features and scores.

    A model whose reference holds the label-free estimators (built with labels) gets its estimate per period
    (:meth:`ReplayTimeline.over_time`): periods of ``period_seconds`` of event time, else of ``period_events``
    scored events (default ``windows.count_window_events``); ``labels``: one per event of the log (its class value,
    a regressor's true value; NaN: none) adds each period's realized accuracy (MAE).
    """
    with tempfile.TemporaryDirectory(prefix="harmonic-replay-") as tmp:
        ref_path: str | None
        if isinstance(reference, ReferenceResult):
            ref_path = str(reference.path or reference.save(Path(tmp) / "reference.json"))
        elif reference is None or isinstance(reference, (str, os.PathLike)):
            ref_path = None if reference is None else str(reference)
        else:
            raise DataError(
                "replay's reference is a file path or monitor.reference(...)'s result (the pipeline reads it as "
                "`run` does); save rows with numpy.save or DataFrame.to_csv first"
            )
        flags: dict[str, Any] = {}
        if model is not None:
            path = model_path(model)
            entry: dict[str, Any] = {"name": model_name or log_model_name(Path(events), path), "path": path}
            if ref_path is not None:
                entry["reference"] = ref_path
            flags["models"] = [entry]
        elif model_name is not None or ref_path is not None:
            raise DataError("replay: model_name and reference need a model (or put them in the config's `models:`)")
        state = Path(state_dir) if state_dir is not None else Path(tmp) / "state"
        settings = replay_settings(None if config is None else str(config), flags, state, batch_events=batch_events)
        return replay_log(
            settings,
            Path(events),
            max_events=max_events,
            keep_scores=keep_scores,
            labels=labels,
            period_seconds=period_seconds,
            period_events=period_events,
        )


def replay_settings(
    config: str | None,
    flags: Mapping[str, Any],
    state_dir: Path,
    *,
    batch_events: int | None = None,
    segment_column: str | None = None,
) -> Settings:
    """``run``'s settings (``flags`` > HARMONIC_* > the ``config`` file, as :func:`monitor.config.load_settings`
    reads them) with the replay's overrides: every event scored, the state in ``state_dir``, micro-batches of
    ``batch_events`` (default ``REPLAY_BATCH``) events unless the settings name a batch size, and no alert
    delivery. ``segment_column``: the reference CSV's column that names each row's segment
    (``segments.reference_column``)."""
    from monitor.config import load_settings

    overrides: dict[str, Any] = {"sampler": {"events_per_second": 0}, "state_dir": str(state_dir)}
    if segment_column:
        segments = load_settings(config, dict(flags)).segments.model_dump(exclude_unset=True)
        overrides["segments"] = {**segments, "reference_column": segment_column}
    settings = load_settings(config, {**flags, **overrides})
    if "max_events" not in settings.batch.model_fields_set:
        batch = {**settings.batch.model_dump(), "max_events": batch_events or REPLAY_BATCH}
        settings = load_settings(config, {**flags, **overrides, "batch": batch})
    # a backtest must not page anyone: alerts go to the timeline only
    alerts = settings.alerts.model_copy(update={"alertmanager_url": None, "webhook_url": None})
    return settings.model_copy(update={"alerts": alerts})


class Timeline:
    """Collects the verdict changes, detector crossings and alert transitions of every model from the watches'
    reports (a subscriber of the pipeline's :class:`~monitor.runtime.fanout.Fanout`)."""

    def __init__(self, line_numbers: list[int], last_read: Callable[[], int]) -> None:
        #: the file's line number of each record the source emits (its offset)
        self.line_numbers = line_numbers
        self._last_read = last_read
        self.changes: list[dict[str, Any]] = []
        self.alerts: list[dict[str, Any]] = []
        self.crossings: list[dict[str, Any]] = []
        self._verdicts: dict[tuple[str, str], str] = {}

    def receive(self, report: WatchReport) -> None:
        """Add ``report``'s changes, in the order they happened."""
        from monitor.runtime.watch_report import AlertTransition, DetectorCrossed

        model = report.model
        for change in report.changes:
            index = self._index(change.event)
            segment = change.segment
            if isinstance(change, DetectorCrossed):
                self.crossings.append(
                    {
                        "index": index,
                        "model": model,
                        "segment": segment,
                        "detector": change.crossing.detector,
                        "state": "on" if change.crossing.on else "off",
                    }
                )
            elif isinstance(change, AlertTransition):
                alert = change.alert.alert
                self.alerts.append(
                    {
                        "index": index,
                        "alertname": alert.rule.name,
                        "state": alert.state.value,
                        "ts": _seconds(change.alert.at_seconds),
                        "model": model,
                        "segment": segment,
                        "verdict": alert.verdict,
                        "severity": alert.rule.severity,
                        "summary": alert.summary,
                        "detail": alert.description,
                    }
                )
            else:
                self._verdict_change(model, change, index)

    def _verdict_change(self, model: str, change: VerdictChange, index: int) -> None:
        report, segment = change.report, change.segment
        verdict = report.verdict.value
        self.changes.append(
            {
                "index": index,
                "ts": _seconds(change.at),
                "verdict": verdict,
                "previous": self._verdicts.get((model, segment), "stable"),
                "model": model,
                "segment": segment,
                "detectors": list(report.fired),
                # the inputs named as evidence: moved (KS), held inputs' categories, values outside the range
                "features": list(
                    dict.fromkeys(name for name, _ in (*report.top_features, *report.categories, *report.out_of_range))
                ),
                # why the detectors that fired are not harm (a fall in confidence that is no harm evidence, fragility)
                "not_harm": list(report.not_harm),
            }
        )
        self._verdicts[(model, segment)] = verdict

    def _index(self, event: Any) -> int:
        origin = getattr(event, "origin", None)
        offset = origin[2] if origin is not None and 0 <= origin[2] < len(self.line_numbers) else self._last_read()
        return self.line_numbers[offset] if 0 <= offset < len(self.line_numbers) else 0

    def document(self, events: int) -> dict[str, Any]:
        return {"events": events, "changes": self.changes, "alerts": self.alerts, "crossings": self.crossings}


def read_lines(path: Path) -> tuple[list[bytes], list[int]]:
    """The non-blank lines of ``path`` and their 0-based line numbers."""
    records: list[bytes] = []
    numbers: list[int] = []
    for number, line in enumerate(path.read_bytes().split(b"\n")):
        if line.strip():
            records.append(line.rstrip(b"\r"))
            numbers.append(number)
    return records, numbers


def replay_log(
    settings: Settings,
    path: Path,
    *,
    max_events: int | None = None,
    keep_scores: bool = False,
    labels: Any = None,
    period_seconds: float | None = None,
    period_events: int | None = None,
) -> ReplayTimeline:
    """Replay the event log at ``path`` with ``settings`` (:func:`replay_settings`); the typed timeline.

    ``max_events``: only the first that many non-blank lines; ``keep_scores``: the timeline also holds every scored
    event's features and scores, in the order scored (``scored_rows``, ``scores``); ``labels``, ``period_seconds``,
    ``period_events``: the per-period estimate's (:func:`replay`).
    """
    from monitor.clock import WatermarkClock
    from monitor.offline.replay_estimate import PeriodEstimates
    from monitor.runtime.models import load_model_runtime
    from monitor.runtime.service import Service
    from monitor.source.replay import ReplaySource

    if not path.is_file():
        raise SourceError(f"--events '{path}' does not exist (expected JSON lines, one event per line)")
    started = time.perf_counter()
    records, numbers = read_lines(path)
    if max_events is not None:
        records, numbers = records[:max_events], numbers[:max_events]
    runtimes = [load_model_runtime(m, segment_column=settings.segments.reference_column) for m in settings.models]
    y = _labels(labels, len(records))
    periods = PeriodEstimates(runtimes)
    # a new stream each run: records below a position saved in a kept --state-dir would be skipped as applied
    source = ReplaySource(records, topic=f"replay-{time.time_ns()}")
    timeline = Timeline(numbers, lambda: source.emitted - 1)
    # event time alone: windows and alerts run on the events' timestamps, each bounded to the skew ahead of the
    # watermark (a stray future timestamp is placed at the watermark: it cannot stop the recording's alerts)
    clock = WatermarkClock(max_skew_seconds=settings.alerts.max_event_skew_seconds)
    with Service(settings, source, runtimes, serve_metrics=False, alert_clock=clock) as svc:
        before = _counts(svc.state.dump_counters())
        pipeline = svc.pipeline
        pipeline.fanout.subscribers.append(timeline.receive)
        kept: list[tuple[Any, Any]] = []
        if keep_scores:
            pipeline.scored_hooks.append(lambda batch: kept.append((batch.rows, batch.result)))
        if periods:
            pipeline.scored_hooks.append(periods.observe)
        while not source.exhausted:
            pipeline.step(0.0)
            pipeline.flush()  # every poll's events applied whole: batch boundaries never depend on wall time
            pipeline.tick_alerts()  # as `run` does every loop turn: alerts move on with the clock
        pipeline.close()
        after = _counts(svc.state.dump_counters())
    invalid: dict[str, int] = {}
    invalid_inputs: dict[str, int] = {}
    for (name, labels), value in after.items():
        n = int(value - before.get((name, labels), 0.0))
        if name == _INVALID and n > 0:
            invalid[labels[-1]] = invalid.get(labels[-1], 0) + n
        elif name == _INVALID_INPUT and n > 0:
            model, feature, problem = labels
            invalid_inputs[f"{model}/{feature}: {problem}"] = n
    scored = int(sum(v - before.get(k, 0.0) for k, v in after.items() if k[0] == _SCORED))
    rows, scores = _joined(kept) if kept else (None, None)
    if period_seconds is None and period_events is None:
        period_events = settings.windows.count_window_events
    accuracy = periods.rows(
        y, method=settings.accuracy.method, period_seconds=period_seconds, period_events=period_events
    )
    return ReplayTimeline(
        len(records),
        tuple(timeline.changes),
        tuple(timeline.alerts),
        invalid,
        scored,
        time.perf_counter() - started,
        crossings=tuple(timeline.crossings),
        scored_rows=rows,
        scores=scores,
        invalid_inputs=invalid_inputs,
        accuracy=tuple(accuracy),
    )


#: the per-period columns that are NaN where unknown (``null`` in the timeline JSON)
_NAN_COLUMNS = ("estimate", "lower", "upper", "realized")


def _json_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A per-period row for JSON: NaN as null."""
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in row.items()}


def _labels(labels: Any, events: int) -> NDArray[np.float64] | None:
    """The labels as one float per event of the log (NaN: none), or None."""
    if labels is None:
        return None
    from monitor.offline.rows import true_values

    y = true_values(np.asarray(labels))
    if y.shape[0] != events:
        raise DataError(
            f"labels: {y.shape[0]} values for the log's {events} events; give one per event (per non-blank line, "
            "NaN where an event has none)"
        )
    return y


def _joined(kept: list[tuple[Any, Any]]) -> tuple[Any, Any]:
    """The scored batches as one array of rows and one ScoreResult."""
    import dataclasses

    import numpy as np

    from monitor.signals.scorer import ScoreResult

    rows = np.concatenate([r for r, _ in kept])
    fields = {
        f.name: np.concatenate([getattr(res, f.name) for _, res in kept]) for f in dataclasses.fields(ScoreResult)
    }
    return rows, ScoreResult(**fields)


def _counts(rows: list[dict[str, Any]]) -> dict[tuple[str, tuple[str, ...]], float]:
    return {
        (str(r["name"]), tuple(r["labels"])): float(r["value"])
        for r in rows
        if r["name"] in (_INVALID, _INVALID_INPUT, _SCORED)
    }


def _seconds(value: float) -> float | None:
    """Epoch seconds for JSON (None where the clock knew no time yet)."""
    return float(value) if math.isfinite(value) else None
