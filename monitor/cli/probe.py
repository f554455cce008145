"""``harmonic-monitor probe``: run the probe funnel on a file of points (one region) and write the JSON report.

``harmonic-monitor probe --model M.onnx --data POINTS.(csv|npy) [--reference R.csv] [--space standardized|raw]
[--delta 0.2] [--eps-max 1.0] [--eta 0.01] --json OUT.json``; see ``--help`` and ``docs/PROBES.md``.
Errors (missing or malformed files, wrong widths, bad settings) print one line on stderr and exit with 2.

A model that holds values fixed (int, bool and string inputs, ``--fixed-features``): ``--data`` gives each point's
held values too (a CSV whose header names the inputs, or an ``.npz``), and every row the funnel builds from a point
carries that point's own held values (see :mod:`monitor.probes.funnel`); only the feature vector is perturbed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from monitor.cli.common import add_header_option, add_model_options, build_standardizer, load_inputs, load_model
from monitor.errors import MonitorError, ProbeError
from monitor.model.io import HeaderMode, load_rows
from monitor.model.onnx import OnnxModel
from monitor.model.signature import Held
from monitor.probes.funnel import FunnelConfig, run_funnel
from monitor.probes.perturbations import PERTURBATION_NAMES
from monitor.probes.report import build_report, write_report

EXIT_OK = 0
EXIT_ERROR = 2


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
    p.add_argument(
        "--space",
        choices=["standardized", "raw"],
        default="standardized",
        help="units of every ε: standardized by the reference (default) or raw feature units",
    )
    p.add_argument("--json", required=True, dest="json_path", metavar="OUT.json", help="where to write the report")
    p.add_argument("--delta", type=float, default=0.2, help="threshold search: tolerated drop δ of P(ε) (default 0.2)")
    p.add_argument("--eps-max", type=float, default=1.0, help="threshold search range [0, ε_max] (default 1.0)")
    p.add_argument("--eta", type=float, default=0.01, help="threshold search resolution η (default 0.01)")
    p.add_argument("--eps", type=float, default=0.1, help="moderate intensity of the MRI/sensitivity (default 0.1)")
    p.add_argument("--mri-cut", type=float, default=0.9, help="targets with MRI r below this are examined (0.9)")
    p.add_argument(
        "--sensitivity-cut",
        type=float,
        default=0.01,
        help="a (target, output) pair is fragile when S/scale reaches this (default 0.01)",
    )
    p.add_argument("--draws", type=int, default=4, help="sensitivity draws per stochastic perturbation (default 4)")
    p.add_argument(
        "--perturbations",
        default=",".join(PERTURBATION_NAMES),
        help=f"comma-separated perturbation types (default {','.join(PERTURBATION_NAMES)})",
    )
    p.add_argument("--steps", type=int, default=10, help="Algorithm 2 steps N per point; 0 skips it (default 10)")
    p.add_argument("--radius", type=float, default=0.05, help="γ ball radius r for gamma_ascent/Algorithm 2 (0.05)")
    p.add_argument("--ball", default="auto", help="γ ball: simplex | simplex+anti | rotations:K | hypercube:m | auto")
    p.add_argument("--seed", type=int, default=0, help="seed of every random draw (default 0)")
    p.add_argument("--labels", help="optional true class indices, one per point (.csv/.npy): accuracy and PDR")
    p.add_argument("--budget", type=int, help="model-row budget; stages stop when it runs out (default: none)")
    p.add_argument(
        "--exhaustive",
        action="store_true",
        help="threshold search on every target, not only the fragile ones (the full threshold profile)",
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


def _reference_scale(
    model: OnnxModel, reference: NDArray[np.float64], held: Held | None = None
) -> tuple[NDArray[np.float64], int]:
    """(D,) the std of a regressor's outputs on the reference rows (constant outputs get 1), and the rows used."""
    ok = np.all(np.isfinite(reference), axis=1)
    finite = reference[ok]
    out = model.evaluate(finite.astype(np.float32), None if held is None else held.take(ok))
    assert out.value is not None
    std = out.value.astype(np.float64).std(axis=0)
    return np.where(std > 1e-12, std, 1.0), int(finite.shape[0])


def _run(args: argparse.Namespace) -> int:
    names = tuple(n.strip() for n in str(args.perturbations).split(",") if n.strip())
    config = FunnelConfig(
        perturbations=names,
        eps=args.eps,
        mri_cut=args.mri_cut,
        sensitivity_cut=args.sensitivity_cut,
        sensitivity_draws=args.draws,
        delta=args.delta,
        eps_max=args.eps_max,
        eta=args.eta,
        radius=args.radius,
        ball=args.ball,
        steps=args.steps,
        seed=args.seed,
        search_all=args.exhaustive,
    )
    if args.budget is not None and args.budget < 1:
        raise ProbeError(f"--budget must be a positive number of model rows; got {args.budget}")
    model = load_model(args)
    notes: list[str] = []  # what was read, printed with the result: an error is one line
    points, held = load_inputs(args.data, model, what="--data", header=args.header, notes=notes)
    bad = int(np.count_nonzero(~np.all(np.isfinite(points), axis=1)))
    if bad:
        raise ProbeError(f"--data '{args.data}' has {bad} row(s) with NaN or infinite values; remove them to probe")
    standardizer = build_standardizer(args, model.n_features, args.data, notes, model=model)
    ref_json = bool(args.reference) and str(args.reference).lower().endswith(".json")
    reference, reference_held = (
        # noted by build_standardizer unless --space raw left it unread
        load_inputs(
            args.reference,
            model,
            what="--reference",
            header=args.header,
            announce=False,
            notes=notes if args.space == "raw" else None,
        )
        if args.reference and not ref_json
        else (None, None)
    )
    fill = None
    if args.space == "raw":  # dropout still writes the reference (or data) mean, in raw units
        if ref_json:
            from monitor.rolling.reference_file import read_reference

            fill = read_reference(args.reference, model.n_features)[1].feature_mean
        else:
            base = reference if reference is not None else points
            fill = base[np.all(np.isfinite(base), axis=1)].mean(axis=0)
    extra: dict[str, int] = {}
    output_scale = None
    if reference is not None and model.kind == "regressor":
        output_scale, extra["reference"] = _reference_scale(model, reference, reference_held)
    labels = _load_labels(args.labels, points.shape[0], args.header) if args.labels else None
    result = run_funnel(
        model,
        standardizer,
        points,
        config,
        budget_rows=args.budget,
        fill=fill,
        output_scale=output_scale,
        labels=labels,
        held=held,
    )
    report = build_report(
        result,
        space=args.space,
        model_path=args.model,
        data_path=args.data,
        reference_path=args.reference,
        extra_evaluations=extra,
    )
    out = write_report(report, args.json_path)
    for note in notes:
        print(note, file=sys.stderr)
    mri = ", ".join(f"{k} {v:.3f}" for k, v in (result.mri.vector.items() if result.mri else ()))
    print(
        f"probed {result.n_points} points: MRI [{mri}]; {len(result.thresholds)} threshold search(es); "
        f"{result.total_rows} model rows (funnel {result.funnel_rows} vs exhaustive {result.exhaustive_rows})"
        + ("" if result.complete else f"; budget exhausted in stage '{result.stopped_at}'")
        + f" -> {out}",
        file=sys.stderr,
    )
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``probe`` on its own (``python -m monitor.cli.probe ...``), without the other sub-commands."""
    parser = argparse.ArgumentParser(prog="harmonic-monitor")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["probe", *(sys.argv[1:] if argv is None else argv)])
    code: int = args.func(args)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
