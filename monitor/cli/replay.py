"""``harmonic-monitor replay``: the ``run`` pipeline over a JSON-lines file of recorded events, in event time.

Decode, sample, score, windows, detectors, verdicts and alerts run exactly as in ``run`` (the same
:class:`~monitor.runtime.service.Service`), with three differences that make a replay a backtest:

* no Kafka and no HTTP server: the events come from the file (:class:`~monitor.source.replay.ReplaySource`), as
  fast as they can be scored, and alerts are recorded in the timeline, never delivered;
* every event is scored (``sampler.events_per_second: 0``: no sampling, no CPU cap; the config's ``sampler``
  section is overridden), and windows and alerts read the events' own time (the watermark, DECISIONS 5), so the
  same file gives the same timeline;
* micro-batches are ``REPLAY_BATCH`` (10) events unless the config sets ``batch.max_events``: a detector that
  turns on is reported at the micro-batch that turned it on (the window tests still run every ``drift.every``
  events), so a change's ``index`` is within 10 events of the event that decided it.

The timeline (``--timeline``) is ``{"events": n, "changes": [...], "alerts": [...]}``. ``events`` counts the
file's non-blank lines (valid or not); each change and alert carries ``index``, the 0-based line of the event at
which it was decided: the last event of the micro-batch being applied when the watch evaluated (an alert moved on
by the clock between batches: the last line read). Invalid lines are counted by reason on stderr and skipped.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monitor.errors import ConfigError, SourceError

if TYPE_CHECKING:
    from monitor.api import ReplayTimeline
    from monitor.config import Settings

#: events per micro-batch unless the settings name a size: a verdict change lands within this many events
REPLAY_BATCH = 10
#: the counters behind the summary on stderr
_INVALID = "harmonic_events_invalid_total"
_SCORED = "harmonic_events_scored_total"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from monitor.cli.run import add_model_flags

    p = sub.add_parser(
        "replay",
        help="backtest: run the pipeline over a JSON-lines file of events in event time; write a verdict timeline",
        description=(
            "Replay a JSON-lines file of inference events (SPEC §1, one per line) through the same pipeline as "
            "`run` — decode, score every event, windows, drift detectors, verdicts, alerts — in event time, with "
            "no Kafka and no HTTP server, as fast as possible. Writes the timeline of verdict changes and alert "
            "transitions, each at the 0-based line of the event where it was decided. Invalid lines are counted "
            "(summary on stderr) and skipped. The same file gives the same timeline."
        ),
    )
    add_model_flags(p)
    p.add_argument("--events", required=True, help="JSON-lines file of events, one per line (blank lines skipped)")
    p.add_argument("--timeline", required=True, help="where to write the timeline JSON ('-': stdout)")
    p.add_argument(
        "--state-dir",
        help="keep the pipeline's state here (and start from the state already in it, as `run` does); "
        "default: a temporary directory, removed at exit",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    path = Path(args.events)
    if not path.is_file():
        raise SourceError(f"--events '{path}' does not exist (expected JSON lines, one event per line)")
    if args.model and not args.model_name:  # the model the log's events name, as the Python API reads it
        from monitor.api import log_model_name

        args.model_name = log_model_name(path, args.model)
    if args.state_dir:
        return _replay(args, path, Path(args.state_dir))
    from monitor.cli.demo import _exit_on_sigterm

    restore = _exit_on_sigterm()  # SIGTERM unwinds through the removal below
    try:
        with tempfile.TemporaryDirectory(prefix="harmonic-replay-") as tmp:
            return _replay(args, path, Path(tmp))
    finally:
        restore()


def replay_settings(args: argparse.Namespace, state_dir: Path) -> Settings:
    """``run``'s settings (flags > HARMONIC_* > --config) with the replay's overrides: every event scored, the
    state in ``state_dir``, micro-batches of ``REPLAY_BATCH`` events unless the settings name a batch size, and no
    alert delivery."""
    from monitor.cli.run import settings_from_args

    overrides: dict[str, Any] = {"sampler": {"events_per_second": 0}, "state_dir": str(state_dir)}
    settings = settings_from_args(args, overrides)
    if "max_events" not in settings.batch.model_fields_set:
        size = getattr(args, "batch_events", None) or REPLAY_BATCH
        batch = {**settings.batch.model_dump(), "max_events": size}
        settings = settings_from_args(args, {**overrides, "batch": batch})
    # a backtest must not page anyone: alerts go to the timeline only
    alerts = settings.alerts.model_copy(update={"alertmanager_url": None, "webhook_url": None})
    return settings.model_copy(update={"alerts": alerts})


class Timeline:
    """Collects the verdict changes and alert transitions of every model (a :class:`ModelWatch` observer each)."""

    def __init__(self, line_numbers: list[int], last_read: Callable[[], int]) -> None:
        #: the file's line number of each record the source emits (its offset)
        self.line_numbers = line_numbers
        self._last_read = last_read
        self.changes: list[dict[str, Any]] = []
        self.alerts: list[dict[str, Any]] = []
        self._verdicts: dict[tuple[str, str], str] = {}

    def observer(self, model: str) -> Callable[[str, Any, float, Any], None]:
        from monitor.exporters.alerts import AlertEvent

        def observe(segment: str, change: Any, now: float, event: Any) -> None:
            index = self._index(event)
            if isinstance(change, AlertEvent):
                alert = change.alert
                self.alerts.append(
                    {
                        "index": index,
                        "alertname": alert.rule.name,
                        "state": alert.state.value,
                        "ts": _seconds(change.at_seconds),
                        "model": model,
                        "segment": segment,
                        "verdict": alert.verdict,
                        "severity": alert.rule.severity,
                        "detail": alert.detail,
                    }
                )
                return
            verdict = change.verdict.value
            self.changes.append(
                {
                    "index": index,
                    "ts": _seconds(now),
                    "verdict": verdict,
                    "previous": self._verdicts.get((model, segment), "stable"),
                    "model": model,
                    "segment": segment,
                    "detectors": list(change.fired),
                    "features": [name for name, _ in change.top_features],
                }
            )
            self._verdicts[(model, segment)] = verdict

        return observe

    def _index(self, event: Any) -> int:
        origin = getattr(event, "origin", None)
        offset = origin[2] if origin is not None and 0 <= origin[2] < len(self.line_numbers) else self._last_read()
        return self.line_numbers[offset] if 0 <= offset < len(self.line_numbers) else 0

    def document(self, events: int) -> dict[str, Any]:
        return {"events": events, "changes": self.changes, "alerts": self.alerts}


def read_lines(path: Path) -> tuple[list[bytes], list[int]]:
    """The non-blank lines of ``path`` and their 0-based line numbers."""
    records: list[bytes] = []
    numbers: list[int] = []
    for number, line in enumerate(path.read_bytes().split(b"\n")):
        if line.strip():
            records.append(line.rstrip(b"\r"))
            numbers.append(number)
    return records, numbers


def replay_file(
    args: argparse.Namespace,
    path: Path,
    state_dir: Path,
    *,
    max_events: int | None = None,
    keep_scores: bool = False,
) -> ReplayTimeline:
    """Replay the event log at ``path`` with ``args``' settings (:func:`replay_settings`); the typed timeline.

    ``max_events``: only the first that many non-blank lines; ``keep_scores``: the timeline also holds every scored
    event's features and scores, in the order scored (``scored_rows``, ``scores``).
    """
    from monitor.api import ReplayTimeline
    from monitor.clock import WatermarkClock
    from monitor.runtime.models import load_model_runtime
    from monitor.runtime.service import Service
    from monitor.source.replay import ReplaySource

    if not path.is_file():
        raise SourceError(f"--events '{path}' does not exist (expected JSON lines, one event per line)")
    started = time.perf_counter()
    settings = replay_settings(args, state_dir)
    records, numbers = read_lines(path)
    if max_events is not None:
        records, numbers = records[:max_events], numbers[:max_events]
    runtimes = [load_model_runtime(m) for m in settings.models]
    # a new stream each run: records below a position saved in a kept --state-dir would be skipped as applied
    source = ReplaySource(records, topic=f"replay-{time.time_ns()}")
    timeline = Timeline(numbers, lambda: source.emitted - 1)
    # event time alone: windows and alerts run on the events' timestamps, each bounded to the skew ahead of the
    # watermark (a stray future timestamp is placed at the watermark: it cannot stop the recording's alerts)
    clock = WatermarkClock(max_skew_seconds=settings.alerts.max_event_skew_seconds)
    with Service(settings, source, runtimes, serve_metrics=False, alert_clock=clock) as svc:
        before = _counts(svc.state.dump_counters())
        pipeline = svc.pipeline
        watches = [rt.watch for rt in pipeline.runtimes.values() if rt.watch is not None]
        for rt in pipeline.runtimes.values():
            if rt.watch is not None:
                rt.watch.observers.append(timeline.observer(rt.name))
        kept: list[tuple[Any, Any]] = []
        if keep_scores:
            pipeline.scored_hooks.append(lambda rt, rows, result, now, held, segments: kept.append((rows, result)))
        while not source.exhausted:
            pipeline.step(0.0)
            pipeline.flush()  # every poll's events applied whole: batch boundaries never depend on wall time
            for watch in watches:  # as `run` does every loop turn: alerts move on with the clock
                watch.tick()
        pipeline.close()
        after = _counts(svc.state.dump_counters())
    invalid: dict[str, int] = {}
    for (name, labels), value in after.items():
        n = int(value - before.get((name, labels), 0.0))
        if name == _INVALID and n > 0:
            invalid[labels[-1]] = invalid.get(labels[-1], 0) + n
    scored = int(sum(v - before.get(k, 0.0) for k, v in after.items() if k[0] == _SCORED))
    rows, scores = _joined(kept) if kept else (None, None)
    return ReplayTimeline(
        len(records),
        tuple(timeline.changes),
        tuple(timeline.alerts),
        invalid,
        scored,
        time.perf_counter() - started,
        scored_rows=rows,
        scores=scores,
    )


def _joined(kept: list[tuple[Any, Any]]) -> tuple[Any, Any]:
    """The scored batches as one array of rows and one ScoreResult."""
    import dataclasses

    import numpy as np

    from monitor.metrics.scorer import ScoreResult

    rows = np.concatenate([r for r, _ in kept])
    fields = {
        f.name: np.concatenate([getattr(res, f.name) for _, res in kept]) for f in dataclasses.fields(ScoreResult)
    }
    return rows, ScoreResult(**fields)


def _replay(args: argparse.Namespace, path: Path, state_dir: Path) -> int:
    result = replay_file(args, path, state_dir)
    doc = result.document()
    text = json.dumps(doc, indent=2) + "\n"
    if args.timeline == "-":
        sys.stdout.write(text)
    else:
        try:
            Path(args.timeline).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot write --timeline '{args.timeline}': {exc.strerror or exc}") from None
    seconds = result.seconds
    invalid = result.invalid
    n = result.events
    reasons = ", ".join(f"{r}: {k}" for r, k in sorted(invalid.items())) or "none"
    print(
        f"replay: {n} events, {result.scored} scored, {sum(invalid.values())} invalid ({reasons}); "
        f"{len(doc['changes'])} verdict change(s), {len(doc['alerts'])} alert transition(s); "
        f"{seconds:.1f} s ({n / seconds if seconds > 0 else 0.0:.0f} events/s)",
        file=sys.stderr,
    )
    if args.timeline != "-":
        print(f"timeline written to {args.timeline}", file=sys.stderr)
    return 0


def _counts(rows: list[dict[str, Any]]) -> dict[tuple[str, tuple[str, ...]], float]:
    return {(str(r["name"]), tuple(r["labels"])): float(r["value"]) for r in rows if r["name"] in (_INVALID, _SCORED)}


def _seconds(value: float) -> float | None:
    """Epoch seconds for JSON (None where the clock knew no time yet)."""
    return float(value) if math.isfinite(value) else None
