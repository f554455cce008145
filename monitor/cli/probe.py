"""``harmonic-monitor probe``: run the probe funnel on a file of points (one region) and write the JSON report.

``harmonic-monitor probe --model M.onnx --data POINTS.(csv|npy) [--reference R.csv] [--space standardized|raw]
[--delta 0.2] [--eps-start 1.0] [--eps-max 8.0] [--eta 0.01] --json OUT.json``; see ``--help`` and ``docs/PROBES.md``.

Every feature has one name: the model's (``input[13]``), or the ``--data`` CSV header's for a plain model. The
report's ``thresholds`` list every (perturbation, feature) pair with its status, its name and ε in raw units beside
standardized ones (``docs/PROBES.md``).
Errors (missing or malformed files, wrong widths, bad settings) print one line on stderr and exit with 2.

A model that holds values fixed (int, bool and string inputs, ``--fixed-features``): ``--data`` gives each point's
held values too (a CSV whose header names the inputs, or an ``.npz``), and every row the funnel builds from a point
carries that point's own held values (see :mod:`monitor.probes.funnel`); only the feature vector is perturbed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from monitor.cli.common import (
    add_header_option,
    add_model_options,
    add_space_options,
    flag_values,
    load_inputs,
    load_model,
)
from monitor.cli.flags import add_setting_flag
from monitor.cli.parsing import CommandParser
from monitor.config import FunnelSettings, ProbeRunSettings
from monitor.errors import MonitorError, ProbeError
from monitor.model.io import HeaderMode, load_rows
from monitor.probes.funnel import FunnelConfig
from monitor.probes.offline import ProbeOptions
from monitor.probes.perturbations import PERTURBATION_NAMES
from monitor.probes.profile import ProfileEntry
from monitor.probes.report import write_report

if TYPE_CHECKING:
    from monitor.probes.funnel import FunnelResult

EXIT_OK = 0
EXIT_ERROR = 2
#: the flags that set the :class:`FunnelConfig` fields of their own names
_FUNNEL_FLAGS = (
    "eps",
    "mri_cut",
    "sensitivity_cut",
    "delta",
    "eps_max",
    "eta",
    "eps_start",
    "radius",
    "ball",
    "steps",
    "seed",
)
#: the flags that set the :class:`ProbeOptions` fields of their own names
_OPTION_FLAGS = ("certify_copies", "certify_sigma", "certify_alpha", "certify_select", "l2_boundary", "bisect_trees")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``probe`` sub-command (``func=run_probe_command``)."""
    p = subparsers.add_parser(
        "probe",
        help="probe a set of points: MRI, sensitivity, threshold search (funnel), Algorithm 2, consistency",
        description=(
            "Treat the rows of --data as one region and run the probe funnel on it: the MRI vector over the "
            "perturbation types, the sensitivity matrix, threshold search for ε* on the fragile (perturbation, "
            "feature) targets, γ-ascent adversarial search (seed 001 Algorithm 2) per point and output "
            "consistency. Writes a JSON report (schema: docs/PROBES.md). Every ε is in standardized units, "
            "or raw feature units with --space raw."
        ),
    )
    add_model_options(p)
    p.add_argument(
        "--data",
        required=True,
        help="points to probe: .csv (a header row is detected: see --header), .npy, or .npz (one array per input "
        "name); for a model of several inputs, a CSV header names its inputs or features",
    )
    add_header_option(p)
    p.add_argument(
        "--reference",
        help="a reference JSON (`harmonic-monitor reference`) or reference rows (.csv/.npy/.npz/.parquet/.jsonl): "
        "standardization and dropout means; default: --data itself",
    )
    add_space_options(p, "every ε")
    p.add_argument("--json", required=True, dest="json_path", metavar="OUT.json", help="where to write the report")
    funnel = {"delta": "--delta", "eps_max": "--eps-max", "eps_start": "--eps-start", "eta": "--eta"}
    for name, flag in funnel.items():
        add_setting_flag(p, FunnelSettings, name, flag)
    for name in _OPTION_FLAGS:
        add_setting_flag(p, ProbeRunSettings, name, "--" + name.replace("_", "-"))
    add_setting_flag(p, FunnelSettings, "eps", "--eps")
    add_setting_flag(p, FunnelSettings, "mri_cut", "--mri-cut")
    add_setting_flag(p, FunnelSettings, "sensitivity_cut", "--sensitivity-cut")
    add_setting_flag(p, FunnelSettings, "sensitivity_draws", "--draws")
    p.add_argument(
        "--perturbations",
        default=",".join(PERTURBATION_NAMES),
        help=f"comma-separated perturbation types (default {','.join(PERTURBATION_NAMES)})",
    )
    for name in ("steps", "radius", "ball", "seed"):
        add_setting_flag(p, FunnelSettings, name, "--" + name)
    p.add_argument("--labels", help="optional true class indices, one per point (.csv/.npy): accuracy and PDR")
    p.add_argument("--budget", type=int, help="model-row budget; stages stop when it runs out (default: none)")
    search = p.add_mutually_exclusive_group()
    search.add_argument(
        "--exhaustive",
        action="store_true",
        help="threshold search on every target, the full threshold profile (the default; kept for scripts)",
    )
    search.add_argument(
        "--screen",
        action="store_true",
        help="cheap screen: threshold search only on targets fragile at --eps; the others are reported "
        "not_searched (robust_at_eps) even where they would cross below --eps-max",
    )
    p.set_defaults(func=run_probe_command)


def run_probe_command(args: argparse.Namespace) -> int:
    """Run ``probe``; returns the exit code (0, or 2 after printing the error on stderr)."""
    try:
        return _run(args)
    except MonitorError as exc:
        print(f"harmonic-monitor probe: error: {exc}", file=sys.stderr)
        return EXIT_ERROR


def _load_labels(path: str, n_points: int, header: HeaderMode) -> NDArray[np.int64]:
    raw = load_rows(path, header).reshape(-1)
    if raw.shape[0] != n_points:
        raise ProbeError(
            f"--labels '{path}' has {raw.shape[0]} values; expected one class index per point ({n_points})"
        )
    if not np.all(np.isfinite(raw)) or np.any(raw != np.round(raw)):
        raise ProbeError(f"--labels '{path}' must hold integer class indices (0..C−1); found non-integer values")
    return raw.astype(np.int64)


def _run(args: argparse.Namespace) -> int:
    from monitor.api import Rows
    from monitor.api import probe as probe_rows

    names = tuple(n.strip() for n in str(args.perturbations).split(",") if n.strip())
    config = FunnelConfig(
        perturbations=names,
        sensitivity_draws=args.draws,
        search_all=not args.screen,
        **flag_values(args, *_FUNNEL_FLAGS),
    )
    if args.budget is not None and args.budget < 1:
        raise ProbeError(f"--budget must be a positive number of model rows; got {args.budget}")
    if args.certify_copies < 0:
        raise ProbeError(f"--certify-copies must be >= 0 (0 skips the certified radius); got {args.certify_copies}")
    options = ProbeOptions(
        funnel=config,
        budget_rows=args.budget,
        **flag_values(args, *_OPTION_FLAGS),
    )
    model = load_model(args)
    notes: list[str] = []  # what was read, printed with the result: an error is one line
    points, held = load_inputs(args.data, model, what="--data", header=args.header, notes=notes)
    bad = int(np.count_nonzero(~np.all(np.isfinite(points), axis=1)))
    if bad:
        raise ProbeError(f"--data '{args.data}' has {bad} row(s) with NaN or infinite values; remove them to probe")
    reference: Any = None
    if args.reference and str(args.reference).lower().endswith(".json"):
        reference = args.reference
        if args.space != "raw":
            notes.append(f"--reference: the standardizer of reference JSON '{args.reference}'")
    elif args.reference:
        ref_rows, ref_held = load_inputs(args.reference, model, what="--reference", header=args.header, notes=notes)
        reference = Rows(ref_rows, ref_held, f"'{args.reference}'")
    labels = _load_labels(args.labels, points.shape[0], args.header) if args.labels else None
    done = probe_rows(
        model,
        Rows(points, held, f"--data '{args.data}'"),
        reference,
        options=options,
        labels=labels,
        data_path=args.data,
        reference_path=args.reference,
        **flag_values(args, "space", "header", "scale", "channel_axis"),
    )
    result = done.result
    out = write_report(dict(done.report), args.json_path)
    for note in notes:
        print(note, file=sys.stderr)
    mri = ", ".join(f"{k} {v:.3f}" for k, v in (result.mri.vector.items() if result.mri else ()))
    print(
        f"probed {result.n_points} points: MRI [{mri}]; {len(result.thresholds)} threshold search(es), "
        f"{_crossed(result.profile)} of {len(result.profile)} targets crossed; "
        f"{result.total_rows} model rows ({_funnel_text(result)})"
        + ("" if result.complete else f"; budget exhausted in stage '{result.stopped_at}'")
        + f" -> {out}",
        file=sys.stderr,
    )
    return EXIT_OK


def _crossed(profile: Sequence[ProfileEntry]) -> int:
    return sum(1 for e in profile if e.status == "crossed")


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``probe`` on its own (``python -m monitor.cli.probe ...``), without the other sub-commands."""
    parser = argparse.ArgumentParser(prog="harmonic-monitor")
    register(parser.add_subparsers(dest="command", required=True, parser_class=CommandParser))
    args = parser.parse_args(["probe", *(sys.argv[1:] if argv is None else argv)])
    code: int = args.func(args)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


def _funnel_text(result: FunnelResult) -> str:
    """The funnel's rows by stage beside what threshold search on every target alone would cost."""
    ev = result.evaluations
    return (
        f"funnel {result.funnel_rows} = mri {ev.get('mri', 0)} + sensitivity {ev.get('sensitivity', 0)} + threshold "
        f"{ev.get('threshold', 0)}; threshold search on every target alone: {result.exhaustive_rows}, "
        f"{result.exhaustive_min_rows} if none crossed"
    )
