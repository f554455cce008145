"""``harmonic-monitor replay``: the ``run`` pipeline over a JSON-lines file of recorded events, in event time.

Decode, sample, score, windows, detectors, verdicts and alerts run exactly as in ``run`` (the same
:class:`~monitor.runtime.service.Service`), with three differences that make a replay a backtest:

* no Kafka and no HTTP server: the events come from the file (:class:`~monitor.source.replay.ReplaySource`), as
  fast as they can be scored, and alerts are recorded in the timeline, never delivered;
* every event is scored (``sampler.events_per_second: 0``: no sampling, no CPU cap; the config's ``sampler``
  section is overridden), and windows and alerts read the events' own time (the watermark), so the
  same file gives the same timeline;
* micro-batches are ``REPLAY_BATCH`` (10) events unless the config sets ``batch.max_events``: a detector that
  turns on is reported at the micro-batch that turned it on (the window tests still run every ``drift.every``
  events), naming the event it crossed at, so a change's ``index`` does not depend on the batch size.

The timeline (``--timeline``) is ``{"events": n, "changes": [...], "alerts": [...], "crossings": [...]}``:
``crossings`` lists each time a detector of a segment turned on or off (``{"index", "model", "segment",
"detector", "state": "on" | "off"}``), which the verdict's hysteresis does not hold back. ``events`` counts the
file's non-blank lines (valid or not); each change and alert carries ``index``, the 0-based line of the event at
which it was decided: where the detectors decided it, the event whose value a detector crossed at; else (the
accuracy estimate, the hysteresis, an alert) the last event of the micro-batch being applied when the watch
evaluated (an alert moved on by the clock between batches: the last line read). Invalid lines are counted by reason
on stderr and skipped.

A model whose reference was built with labels also gets ``"accuracy"``: its label-free estimate per period
(``{"model", "metric": "accuracy" | "mae", "period", "end", "n", "estimate", "lower", "upper", "method",
"realized", "n_labelled", "note"}``; null where unknown), over periods of ``--period-events`` scored events (default
``windows.count_window_events``) or ``--period-seconds`` of event time; ``--labels`` (one per event) fills
``realized``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from monitor.errors import ConfigError, SourceError
from monitor.offline.replay import REPLAY_BATCH, Timeline, read_lines

__all__ = ["REPLAY_BATCH", "Timeline", "read_lines", "register", "run"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from monitor.cli.run import add_model_flags

    p = sub.add_parser(
        "replay",
        help="backtest: run the pipeline over a JSON-lines file of events in event time; write a verdict timeline",
        description=(
            "Replay a JSON-lines file of inference events (one per line) through the same pipeline as "
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
    p.add_argument(
        "--segment-column",
        help="the --reference CSV column (named in its header) that holds each row's segment: each segment is judged "
        "against a baseline from its own rows (segments.reference_column; not fed to the model). Without it, a "
        "reference JSON's per-segment baselines are used, and segments without one learn theirs from their first "
        "events",
    )
    p.add_argument(
        "--labels",
        help="the true value of each event, one per non-blank line of --events in order (.csv/.npy; NaN: none): each "
        "period's realized accuracy (a regressor's MAE) beside the label-free estimate",
    )
    period = p.add_mutually_exclusive_group()
    period.add_argument(
        "--period-events",
        type=int,
        help="the label-free estimate per this many scored events (default: windows.count_window_events); for a "
        "model whose reference was built with labels",
    )
    period.add_argument(
        "--period-seconds", type=float, help="the label-free estimate per this many seconds of event time"
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
    from monitor.cli.demo import exit_on_sigterm

    restore = exit_on_sigterm()  # SIGTERM unwinds through the removal below
    try:
        with tempfile.TemporaryDirectory(prefix="harmonic-replay-") as tmp:
            return _replay(args, path, Path(tmp))
    finally:
        restore()


def _replay(args: argparse.Namespace, path: Path, state_dir: Path) -> int:
    from monitor.cli.run import settings_flags
    from monitor.offline.replay import replay_log, replay_settings

    settings = replay_settings(
        args.config,
        settings_flags(args),
        state_dir,
        batch_events=getattr(args, "batch_events", None),
        segment_column=getattr(args, "segment_column", None),
    )
    labels = None
    if args.labels is not None:
        from monitor.offline.rows import load_labels

        if not Path(args.labels).is_file():
            raise SourceError(f"--labels '{args.labels}' does not exist (expected .csv or .npy: one value per event)")
        labels = load_labels(args.labels, integer=False)
    result = replay_log(
        settings, path, labels=labels, period_seconds=args.period_seconds, period_events=args.period_events
    )
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
    if result.accuracy:
        shown = sum(1 for r in result.accuracy if r["estimate"] == r["estimate"])
        print(
            f"replay: label-free estimate over {len(result.accuracy)} period(s), {shown} with an estimate",
            file=sys.stderr,
        )
    if result.invalid_inputs:
        by_input = ", ".join(f"{k}: {v}" for k, v in sorted(result.invalid_inputs.items()))
        print(f"replay: invalid values by input: {by_input}", file=sys.stderr)
    if args.timeline != "-":
        print(f"timeline written to {args.timeline}", file=sys.stderr)
    return 0
