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
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.cli.common import add_header_option, add_model_options, build_standardizer, load_inputs, load_model
from monitor.errors import MonitorError, ProbeError
from monitor.model.io import HeaderMode, load_rows, read_rows
from monitor.model.onnx import OnnxModel
from monitor.model.signature import Held
from monitor.model.standardize import Standardizer
from monitor.probes.boundary import minimal_l2
from monitor.probes.certify import certificate_report, certify_points
from monitor.probes.funnel import FunnelConfig, run_funnel
from monitor.probes.perturbations import PERTURBATION_NAMES
from monitor.probes.profile import FeatureInfo, ProfileEntry, held_names
from monitor.probes.report import JsonValue, build_report, write_report
from monitor.probes.trees import tree_splits

#: reference rows the L2 boundary search may bisect towards (nearest of another class)
ANCHORS = 200

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
    p.add_argument(
        "--scale",
        choices=["per_feature", "global", "per_channel"],
        default="per_feature",
        help="standardized units: each feature its own mean and scale (default), one for all features (images), or "
        "one per image channel (--channel-axis)",
    )
    p.add_argument(
        "--channel-axis", type=int, default=1, help="with --scale per_channel: 1 for NCHW (default), -1 for NHWC"
    )
    p.add_argument("--json", required=True, dest="json_path", metavar="OUT.json", help="where to write the report")
    p.add_argument("--delta", type=float, default=0.2, help="threshold search: tolerated drop δ of P(ε) (default 0.2)")
    p.add_argument(
        "--eps-max",
        type=float,
        default=8.0,
        help="threshold search cap: the range grows up to [0, ε_max] (default 8.0)",
    )
    p.add_argument(
        "--eps-start",
        type=float,
        default=1.0,
        help="threshold search range starts at [0, ε_start] and doubles until P(ε) crosses or ε_max is reached; "
        "set it to ε_max or above for one fixed range (default 1.0)",
    )
    p.add_argument("--eta", type=float, default=0.01, help="threshold search resolution η (default 0.01)")
    p.add_argument(
        "--certify-copies",
        type=int,
        default=32,
        help="certified radius (randomized smoothing): Gaussian copies per point for a classifier, B·K model rows; "
        "0 skips it (default 32)",
    )
    p.add_argument(
        "--certify-sigma", type=float, default=0.05, help="noise scale σ of the certified radius (default 0.05)"
    )
    p.add_argument("--certify-alpha", type=float, default=0.001, help="1 − confidence of p_lower (default 0.001)")
    p.add_argument(
        "--certify-select",
        type=int,
        default=0,
        help="copies that select the class (their majority), apart from those that estimate it; 0 selects the "
        "clean class (default 0)",
    )
    p.add_argument(
        "--l2-boundary",
        action="store_true",
        help="also search each point's nearest class boundary in L2 (black box, ~(n+1)·8 model rows per point for "
        "n features), reported beside the single-feature ε*",
    )
    p.add_argument(
        "--bisect-trees",
        action="store_true",
        help="bisect single-feature shifts of a tree ensemble too, instead of reading ε* exactly from its splits",
    )
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
        eps_start=args.eps_start,
        radius=args.radius,
        ball=args.ball,
        steps=args.steps,
        seed=args.seed,
        search_all=not args.screen,
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
    if model.signature.plain and args.data.lower().endswith(".csv"):
        header_names = read_rows(args.data, args.header).names
        if header_names is not None:
            model.name_features(header_names, source=f"--data '{args.data}' header")
    splits = None if args.bisect_trees else tree_splits(args.model, model.n_features, plain=model.signature.plain)
    base = reference if reference is not None else points
    features = FeatureInfo.build(
        model.feature_names,
        standardizer,
        reference=base,
        held=held_names(model.signature),
        mark_zero_spread=args.space != "raw",
    )
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
        features=features,
        splits=splits,
    )
    report = build_report(
        result,
        space=args.space,
        model_path=args.model,
        data_path=args.data,
        reference_path=args.reference,
        extra_evaluations=extra,
        points=points,
    )
    report["trees"] = None if splits is None else {"nodes": list(splits.nodes), "exact_shift": True}
    left = None if args.budget is None else args.budget - result.total_rows
    if args.l2_boundary:
        report["boundary_l2"] = _boundary(model, standardizer, points, held, report, base)
        section = report["boundary_l2"]
        if isinstance(section, dict) and isinstance(section.get("rows"), int):
            left = None if left is None else left - section["rows"]
            evaluations = report.get("evaluations")
            if isinstance(evaluations, dict):
                evaluations["boundary_l2"] = section["rows"]
    report["certified"] = _certified(args, model, standardizer, points, held, left)
    evaluations = report.get("evaluations")
    certified = report["certified"]
    if isinstance(evaluations, dict) and isinstance(certified, dict) and isinstance(certified.get("rows"), int):
        evaluations["certify"] = certified["rows"]
    out = write_report(report, args.json_path)
    for note in notes:
        print(note, file=sys.stderr)
    mri = ", ".join(f"{k} {v:.3f}" for k, v in (result.mri.vector.items() if result.mri else ()))
    print(
        f"probed {result.n_points} points: MRI [{mri}]; {len(result.thresholds)} threshold search(es), "
        f"{_crossed(result.profile)} of {len(result.profile)} targets crossed; "
        f"{result.total_rows} model rows (funnel {result.funnel_rows} vs exhaustive {result.exhaustive_rows})"
        + ("" if result.complete else f"; budget exhausted in stage '{result.stopped_at}'")
        + f" -> {out}",
        file=sys.stderr,
    )
    return EXIT_OK


def _certified(
    args: argparse.Namespace,
    model: OnnxModel,
    standardizer: Standardizer,
    points: NDArray[np.float64],
    held: Held | None,
    budget_left: int | None,
) -> JsonValue:
    """The report's ``certified`` object (None when skipped; a status and reason where it does not apply)."""
    k = int(args.certify_copies)
    if k == 0:
        return None
    if k < 1:
        raise ProbeError(f"--certify-copies must be >= 0 (0 skips the certified radius); got {k}")
    if model.kind != "classifier":
        return {"status": "not_applicable", "reason": "a certified radius is for classifiers; this is a regressor"}
    needed = points.shape[0] * (k + 1)
    if budget_left is not None and needed > budget_left:
        return {
            "status": "not_computed",
            "reason": f"budget: {needed} model rows needed, {max(budget_left, 0)} left of --budget",
        }
    cert, rows = certify_points(
        model,
        standardizer,
        points,
        held=held,
        copies=k,
        sigma=float(args.certify_sigma),
        alpha=float(args.certify_alpha),
        select=int(args.certify_select),
        seed=int(args.seed),
    )
    out: dict[str, Any] = {"status": "certified", **certificate_report(cert, rows=rows)}
    return out


def _boundary(
    model: OnnxModel,
    standardizer: Standardizer,
    points: NDArray[np.float64],
    held: Held | None,
    report: dict[str, Any],
    reference: NDArray[np.float64],
) -> dict[str, Any]:
    """The report's ``boundary_l2`` object: each point's nearest boundary in L2 beside the single-feature ε*; up to
    :data:`ANCHORS` reference rows (or data rows) serve as anchors (:func:`minimal_l2`)."""
    if model.kind != "classifier" or not model.has_proba:
        return {"status": "not_applicable", "reason": "the L2 boundary search needs a classifier with probabilities"}
    finite = reference[np.all(np.isfinite(reference), axis=1)]
    pick = np.random.default_rng(0).choice(finite.shape[0], min(ANCHORS, finite.shape[0]), replace=False)
    found = minimal_l2(model, standardizer, points, held=held, anchors=finite[pick])
    shifts = [t for t in report.get("thresholds", []) if t.get("perturbation") == "shift" and t.get("crossed")]
    best = min(shifts, key=lambda t: t["eps_star"], default=None)
    ok = np.isfinite(found.distance)
    return {
        "status": "searched",
        "method": "black-box DeepFool steps on finite-difference gradients of the log-odds margin, then bisection",
        "units": "standardized L2" if report.get("space") == "standardized" else "raw L2",
        "found_points": int(np.count_nonzero(ok)),
        "median_distance": float(np.median(found.distance[ok])) if ok.any() else None,
        "min_distance": float(found.distance[ok].min()) if ok.any() else None,
        "single_feature_min_eps_star": None if best is None else best["eps_star"],
        "single_feature_min_name": None if best is None else best.get("name"),
        "rows_per_point": float(found.rows.mean()),
        "points": [
            {
                "index": i,
                "status": found.status[i],
                "distance": float(found.distance[i]) if ok[i] else None,
                "reason": found.reason[i],
                "rows": int(found.rows[i]),
            }
            for i in range(points.shape[0])
        ],
        "anchors": int(pick.size),
        "rows": int(found.rows.sum()) + int(pick.size),
    }


def _crossed(profile: Sequence[ProfileEntry]) -> int:
    return sum(1 for e in profile if e.status == "crossed")


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``probe`` on its own (``python -m monitor.cli.probe ...``), without the other sub-commands."""
    parser = argparse.ArgumentParser(prog="harmonic-monitor")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["probe", *(sys.argv[1:] if argv is None else argv)])
    code: int = args.func(args)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
