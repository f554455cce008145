"""``harmonic-monitor report``: one self-contained HTML page of a model over recorded events
(:mod:`monitor.offline.report`).

``harmonic-monitor report --model M.onnx --reference R.json --events E.jsonl --out report.html``: the verdict
timeline per segment (a replay of the log through the ``run`` pipeline, or ``--timeline`` from an earlier replay),
the signals against their reference bands, the Gamma Map, per-input drift, the label-free accuracy estimate (and the
realized accuracy with ``--labels``) and the probe profile of the flagged events. Nothing on the page is fetched.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from monitor.cli.common import count_at_least, flag_values
from monitor.cli.flags import add_setting_flag
from monitor.config import ModelSettings, ScoringSettings
from monitor.errors import DataError
from monitor.model.io import load_rows

if TYPE_CHECKING:
    from monitor.offline.report_data import ReportData


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "report",
        help="write one self-contained HTML page of a model over recorded events (timeline, signals, Gamma Map, "
        "drift, accuracy, probes)",
        description=(
            "Score recorded events against the reference, replay them through the `run` pipeline for the verdict "
            "timeline, and write one HTML page (inline SVG, nothing fetched) with a section per result: the verdict "
            "timeline per segment, the signals against their reference bands, the Gamma Map, per-input drift, the "
            "label-free accuracy estimate and the probe profile of the flagged events. Invalid event lines are "
            "counted by reason and listed on the page."
        ),
    )
    p.add_argument("--model", required=True, help="the ONNX model file")
    p.add_argument(
        "--reference",
        required=True,
        help="a reference JSON (`harmonic-monitor reference`; with --labels there for the accuracy estimate) or "
        "reference rows (.csv/.npy/.npz/.parquet)",
    )
    p.add_argument(
        "--events", required=True, help="recorded events: a .jsonl log (as `run` decodes them), or rows in event order"
    )
    p.add_argument("--out", required=True, help="the HTML file to write")
    p.add_argument("--timeline", help="a timeline JSON from `harmonic-monitor replay` (default: replay --events here)")
    p.add_argument("--config", help="YAML configuration the replay runs with (detectors, segments), as `run` reads it")
    p.add_argument(
        "--labels", help="the true class of each event, one per valid event (.csv/.npy): the realized accuracy"
    )
    p.add_argument(
        "--max-events", type=count_at_least(1), help="read only the first that many events (a long log, cut short)"
    )
    add_setting_flag(
        p,
        ModelSettings,
        "name",
        "--model-name",
        override=True,
        after=" Default: the one the log names, else the file stem.",
    )
    p.add_argument(
        "--probe-points", type=count_at_least(0), default=20, help="flagged events probed at most (default 20)"
    )
    p.add_argument(
        "--replay-batch",
        type=count_at_least(1),
        default=100,
        help="events per micro-batch of the replay (unless --config names a size): a verdict change is placed within "
        "that many events of the event that decided it; larger is faster (default 100)",
    )
    p.add_argument(
        "--candidate",
        help="a second ONNX model beside --model: the section 'Two models' compares them on the same events and "
        "reference (as `harmonic-monitor compare` does), or says why it cannot",
    )
    p.add_argument(
        "--reference-labels",
        help="the true class per reference row (.csv/.npy; reference rows only): each model's label-free accuracy "
        "estimate in the section 'Two models'",
    )
    p.add_argument("--title", help="the page's title")
    p.add_argument(
        "--feature-names",
        help="comma-separated names of the model's float input elements, in its order, for a model and reference "
        "that carry none (the page shows input[13] otherwise)",
    )
    add_setting_flag(p, ScoringSettings, "seed", "--seed", help="seed of the scoring noise and the probes")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from monitor.offline.report import build_report

    labels = None
    if args.labels is not None:
        if not Path(args.labels).is_file():
            raise DataError(
                f"--labels '{args.labels}' does not exist (expected .csv or .npy: one true class per event)"
            )
        labels = load_rows(args.labels).reshape(-1)
    options = flag_values(
        args,
        "out",
        "timeline",
        "config",
        "max_events",
        "probe_points",
        "title",
        "model_name",
        "seed",
        "replay_batch",
        "candidate",
        "reference_labels",
    )
    names = None if args.feature_names is None else [n.strip() for n in args.feature_names.split(",")]
    report = build_report(args.model, args.reference, args.events, labels=labels, feature_names=names, **options)
    d = report.data
    invalid = ", ".join(f"{k}: {v}" for k, v in sorted(d.invalid.items())) or "none"
    print(f"report: {d.n_events} events scored of {d.n_lines} lines (invalid: {invalid})", file=sys.stderr)
    for y in d.yardstick:
        print(f"  {y.describe()}", file=sys.stderr)
    for name, note in (
        ("verdicts", d.timeline_note),
        ("gammamap", d.gamma_map_note),
        ("drift", d.drift_note),
        ("accuracy", _accuracy_text(d)),
        ("periods", d.periods_note),
        ("probes", d.probe_note),
        ("models", d.comparison_note),
    ):
        if note:
            print(f"  {name}: {note}", file=sys.stderr)
    print(f"report written to {report.path}", file=sys.stderr)
    return 0


def _accuracy_text(d: ReportData) -> str:
    """The estimate with its method, the realized accuracy where labels gave it, and the section's note."""
    acc = d.accuracy
    if acc is None:
        return d.accuracy_note
    text = (
        f"estimated {acc.estimate:.3f} [{acc.lower:.3f}, {acc.upper:.3f}] ({acc.method}) against "
        f"{acc.reference_accuracy:.3f} on the reference"
    )
    if acc.realized is not None:
        text += f"; realized {acc.realized:.3f} on {acc.n_labelled} labelled events"
    return text + (f"; {d.accuracy_note}" if d.accuracy_note else "")
