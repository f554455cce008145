"""The report page's verdict timeline: the one given, or a replay of the events (a ``.jsonl`` log, or rows over a
DatetimeIndex written as the log they stand for), and each segment's verdicts as spans over the log's lines."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from monitor.errors import DataError
from monitor.offline.replay import ReplayTimeline, replay
from monitor.offline.report_data import VerdictSpan
from monitor.offline.results import ReferenceResult
from monitor.offline.rows import Rows

if TYPE_CHECKING:
    from monitor.model.onnx import OnnxModel
    from monitor.offline.baseline import Baseline

#: the verdicts section's note for events that are rows without event times
NOT_A_LOG = (
    "no verdict timeline: the events are rows without event times (replay needs a .jsonl log, or a DataFrame over "
    "a DatetimeIndex)"
)


def page_timeline(
    timeline: ReplayTimeline | str | os.PathLike[str] | None,
    models: tuple[Any, OnnxModel],
    reference: Any,
    base: Baseline,
    events: Any,
    rows: Rows,
    is_log: bool,
    replay: tuple[str | os.PathLike[str] | None, int | None, str | None, int],
) -> tuple[ReplayTimeline | None, str]:
    """The page's verdict timeline and, where there is none, why: the one given, else a replay of the log (or of
    rows over a DatetimeIndex, as the log they stand for); ``replay`` is (config, max_events, model_name, batch)."""
    model, m = models
    config, max_events, model_name, replay_batch = replay
    if timeline is not None:
        return read_timeline(timeline), ""
    if reference is None:
        return None, "no verdict timeline: no reference to judge the events against (pass reference=)"
    if is_log and len(rows):
        return replay_for_page(model, reference, base.path, events, config, max_events, model_name, replay_batch)
    if is_log:
        return None, "no verdict timeline: no line of the log is a valid event"
    if rows.timestamps is not None and rows.held is None and len(rows):
        with tempfile.TemporaryDirectory(prefix="harmonic-report-") as tmp:
            log = as_log(rows, Path(tmp) / "events.jsonl", m)
            return replay_for_page(model, reference, base.path, log, config, None, "report", replay_batch)
    return None, NOT_A_LOG


def as_log(rows: Rows, path: Path, model: OnnxModel) -> Path:
    """Rows with event times written as a ``.jsonl`` event log (one line per row, in the rows' order; features as
    a list for a model of one float input, else by input name)."""
    assert rows.timestamps is not None
    names = list(model.signature.features)
    with path.open("w", encoding="utf-8") as fh:
        for i, (x, ts) in enumerate(zip(rows.x.tolist(), rows.timestamps.tolist(), strict=True)):
            features: Any = x if model.signature.plain else dict(zip(names, x, strict=True))
            line = {"id": f"row-{i}", "model": "report", "ts": int(round(ts * 1000)), "features": features}
            fh.write(json.dumps(line))
            fh.write("\n")
    return path


def read_timeline(timeline: ReplayTimeline | str | os.PathLike[str]) -> ReplayTimeline:
    if isinstance(timeline, ReplayTimeline):
        return timeline
    try:
        return ReplayTimeline.from_document(json.loads(Path(timeline).read_text(encoding="utf-8")))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read the timeline '{timeline}': {exc}", path=str(timeline)) from None


def replay_for_page(
    model: Any,
    reference: Any,
    ref_path: Path | None,
    events: Any,
    config: Any,
    max_events: int | None,
    model_name: str | None,
    batch_events: int,
) -> tuple[ReplayTimeline | None, str]:
    if ref_path is None and not isinstance(reference, (ReferenceResult, str, os.PathLike)):
        return None, "no verdict timeline: the replay reads its reference from a file; pass a reference JSON or path"
    tl = replay(
        model,
        events,
        reference,
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


def verdict_spans(
    tl: ReplayTimeline,
    segments: Sequence[str] | None,
    n_lines: int,
    lines: NDArray[np.int64] | None = None,
    times: NDArray[np.float64] | None = None,
) -> tuple[VerdictSpan, ...]:
    """Each segment's verdicts as consecutive spans over the log's lines (stable until its first change), with
    each span's event times where the events carry them (the time of the first event at or after its line)."""
    segs = sorted({str(c.get("segment", "other")) for c in tl.changes} | set(segments or ())) or ["other"]
    out: list[VerdictSpan] = []
    end_line = max(n_lines, tl.events)

    def at_time(line: int) -> float:
        if times is None:
            return float("nan")
        pos = np.arange(times.size) if lines is None else lines
        k = min(int(np.searchsorted(pos, line)), times.size - 1)
        return float(times[k])

    for seg in segs:
        start, verdict = 0, "stable"
        fired: tuple[str, ...] = ()
        feats: tuple[str, ...] = ()
        why: tuple[str, ...] = ()
        for c in sorted(
            (c for c in tl.changes if str(c.get("segment", "other")) == seg), key=lambda c: int(c["index"])
        ):
            at = int(c["index"])
            out.append(VerdictSpan(seg, verdict, start, at, fired, feats, at_time(start), at_time(at), why))
            start, verdict = at, str(c["verdict"])
            fired, feats = tuple(c.get("detectors", ())), tuple(c.get("features", ()))
            why = tuple(c.get("not_harm", ()))
        last = float(times.max()) if times is not None else float("nan")
        out.append(VerdictSpan(seg, verdict, start, end_line, fired, feats, at_time(start), last, why))
    return tuple(s for s in out if s.end > s.start or s.end == s.start == end_line == 0)
