"""``harmonic-monitor estimate``: the model's accuracy on unlabelled rows, with a 90 % interval.

The estimators (:mod:`monitor.accuracy`) are fitted on a labelled reference: either the fit a reference JSON stores
under ``accuracy_estimator`` (``reference --labels``), or a labelled validation set given here with
``--reference-data`` and ``--reference-labels``, which this command scores and fits itself.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.accuracy import (
    CALIBRATION_KINDS,
    METHODS,
    PRIMARY_CHOICES,
    EstimatorFit,
)
from monitor.cli.common import (
    add_header_option,
    add_model_options,
    add_scoring_options,
    load_inputs,
    load_model,
)
from monitor.cli.flags import add_setting_flag
from monitor.config import AccuracySettings
from monitor.errors import DataError
from monitor.model.io import load_rows
from monitor.offline.results import AccuracyEstimate

#: the key of a reference JSON that holds a stored :class:`EstimatorFit` (``EstimatorFit.to_dict()``)
FIT_KEY = "accuracy_estimator"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "estimate",
        help="estimate the model's accuracy on unlabelled rows (AC, ATC, DoC, ours), with 90 %% intervals",
        description=(
            "Score --data against the ONNX model and estimate its accuracy there without labels, by every method "
            f"({', '.join(METHODS)}), each with a 90 %% interval; --method picks the one reported as 'accuracy'. "
            "The estimators are fitted on a labelled reference: the fit stored in --reference (a JSON reference "
            f"with '{FIT_KEY}'), or --reference-data with --reference-labels, scored and fitted here. An estimate "
            "sees covariate shift only: a change of P(y|x) alone is invisible without labels (the JSON's "
            "'caveats' say so in words; 'domain' holds the domain classifier's AUC and effective sample size)."
        ),
    )
    add_model_options(p)
    p.add_argument("--data", required=True, help="unlabelled rows to estimate on: .csv, .npy or .npz")
    add_header_option(p)
    add_scoring_options(p)
    for action in p._actions:  # the shared option, read here as a reference JSON as well
        if action.dest == "reference":
            action.help = (
                "a reference JSON from `harmonic-monitor reference` (its standardizer; its stored accuracy "
                f"estimator '{FIT_KEY}' when it has one), or reference rows (.csv/.npy) for standardization; "
                "default: --reference-data, else --data"
            )
    p.add_argument(
        "--reference-data", help="a labelled validation set (.csv/.npy/.npz): rows the model did not train on"
    )
    p.add_argument(
        "--reference-labels",
        help="the true class index (0..C−1) of each --reference-data row, one per row (.csv/.npy)",
    )
    p.add_argument(
        "--calibration",
        choices=CALIBRATION_KINDS,
        default="temperature",
        help="confidence calibration fitted on --reference-data (default temperature: see monitor/accuracy)",
    )
    add_setting_flag(
        p,
        AccuracySettings,
        "method",
        "--method",
        choices=(*PRIMARY_CHOICES, "dle", "dr", "gbdt"),
        help="primary method (auto: iw here; a regressor takes iw, dle, dr or gbdt)",
    )
    p.add_argument(
        "--segment-column",
        help="the --data CSV column (named in its header) that names each row's segment: the JSON's 'segments' then "
        "holds each segment's estimate beside its own reference accuracy (MAE) where the labelled reference carries "
        "the segment (else the model-wide one). A .jsonl event log's 'segment' is read without it",
    )
    p.add_argument("--json", required=True, dest="json_out", help="output JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """:func:`monitor.api.estimate` with the flags' values (a labelled reference fitted first by
    :func:`monitor.api.reference`); the JSON and a summary on stderr."""
    from monitor.api import estimate as estimate_accuracy

    model = load_model(args)
    if model.kind == "regressor":
        return _regressor(args, model)
    # a reference JSON's standardizer is its own whatever --space says (as `run` reads it)
    space = "standardized" if _is_json(args.reference) else args.space
    scoring: dict[str, Any] = {
        "radius": args.radius,
        "sigma": args.sigma,
        "flicker_copies": args.flicker_copies,
        "steps": args.steps,
        "seed": args.seed,
        "ball": args.ball,
        "output": args.output,
        "space": space,
        "regression_tolerance": args.regression_tolerance,
    }
    std = {"header": args.header, "scale": args.scale, "channel_axis": args.channel_axis}
    reference, source, notes = _labelled_reference(args, model, scoring, std)
    est = estimate_accuracy(
        model, args.data, reference, method=args.method, segment_column=args.segment_column, **scoring, **std
    )
    if not isinstance(est, AccuracyEstimate):  # pragma: no cover - a classifier's estimate
        raise TypeError("a classifier's estimate is an AccuracyEstimate")
    fit = est.fit
    if fit is None:  # pragma: no cover - estimate refuses a reference without a fit
        raise DataError("the reference holds no fitted accuracy estimator")
    result: dict[str, Any] = dict(est.document)
    result["warnings"] = [*result["warnings"], *notes]
    result["model"] = str(args.model)
    result["data"] = str(args.data)
    result["fit"] = {"source": source, "n": fit.n, "calibration": fit.calibration.kind, **fit.diagnostics}
    out = Path(args.json_out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    _print_accuracy(result, fit, out)
    return 0


def _labelled_reference(
    args: argparse.Namespace, model: Any, scoring: dict[str, Any], std: dict[str, Any]
) -> tuple[Any, str, list[str]]:
    """What the estimators come from: the fit --reference stores, or --reference-data with --reference-labels
    fitted here (:func:`monitor.api.reference`); (the reference, where it came from, notes)."""
    from monitor.api import Rows, standardizer_of
    from monitor.api import reference as build_reference

    stored = _stored_fit(args.reference) if _is_json(args.reference) else None
    if stored is None and not (args.reference_data and args.reference_labels):
        where = f"'{args.reference}' holds no '{FIT_KEY}'; " if _is_json(args.reference) else ""
        raise DataError(
            f"{where}give a labelled validation set with --reference-data and --reference-labels (or a reference "
            f"JSON built with labels) to fit the estimators on"
        )
    if bool(args.reference_data) != bool(args.reference_labels):
        raise DataError("--reference-data and --reference-labels go together")
    if stored is not None:
        return args.reference, f"{args.reference} ({FIT_KEY})", []
    ref_rows, ref_held = load_inputs(args.reference_data, model, what="--reference-data", header=args.header)
    labels = _labels(args.reference_labels, ref_rows.shape[0], args.header)
    # standardize by --reference when given, else by the labelled reference (not the shifted data)
    standardizer = standardizer_of(args.reference or args.reference_data, model, space=scoring["space"], **std)
    reference = build_reference(
        model,
        Rows(ref_rows, ref_held, f"'{args.reference_data}'"),
        labels=labels,
        sample_rows=max(1, ref_rows.shape[0]),
        calibration=args.calibration,
        standardizer=standardizer,
        label_kind="indices",
        **scoring,
    )
    notes = []
    fitted = reference.fit
    if fitted is not None and fitted.n < 200:
        notes.append(f"the labelled reference has {fitted.n} rows: the fit is noisy (a few hundred or more is better)")
    return reference, f"{args.reference_data} with {args.reference_labels}", notes


def _print_accuracy(result: dict[str, Any], fit: EstimatorFit, out: Path) -> None:
    """The estimate's summary on stderr: the primary method's, the domain classifier's, per segment, warnings and
    caveats."""
    acc = result["accuracy"]
    print(
        f"estimated accuracy {acc['estimate']:.3f} [{acc['lower']:.3f}, {acc['upper']:.3f}] (90 %, {acc['method']}) "
        f"on {result['n']} rows; reference accuracy {fit.accuracy:.3f} on {fit.n} rows -> {out}",
        file=sys.stderr,
    )
    domain = result.get("domain")
    if domain is not None:
        print(
            f"domain classifier (reference vs these rows): AUC {domain['auc']:.2f}, effective sample size "
            f"{domain['ess']:.0f}, weight clipped {100 * domain['clipped_share']:.1f} %",
            file=sys.stderr,
        )
    _print_segments(result.get("segments", {}), "accuracy")
    for w in result["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    for c in result.get("caveats", []):
        print(f"caveat: {c}", file=sys.stderr)


def _regressor(args: argparse.Namespace, model: Any) -> int:
    """A regressor's MAE and RMSE from the loss estimator a reference JSON stores (``reference --labels``)."""
    from monitor.api import estimate as estimate_loss

    if not _is_json(args.reference) or args.reference_data or args.reference_labels:
        raise DataError(
            f"'{args.model}' is a regressor: give --reference a reference JSON built with its true values "
            "(`harmonic-monitor reference --labels`); --reference-data/--reference-labels are for classifiers"
        )
    std = {"header": args.header}
    est = estimate_loss(model, args.data, args.reference, method=args.method, segment_column=args.segment_column, **std)
    if isinstance(est, AccuracyEstimate):  # pragma: no cover - a regressor's estimate
        raise TypeError("a regressor's estimate is a LossEstimate")
    result: dict[str, Any] = {**est.document, "model": str(args.model), "data": str(args.data)}
    out = Path(args.json_out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    for key in ("mae", "rmse"):
        b = result[key]
        print(
            f"estimated {key.upper()} {b['estimate']:.4g} [{b['lower']:.4g}, {b['upper']:.4g}] (90 %, "
            f"{result['method']}) on {result['n']} rows; reference {result['reference'][key]:.4g}",
            file=sys.stderr,
        )
    _print_segments(result.get("segments", {}), "mae")
    dom = result["domain"]
    print(
        f"domain classifier (reference vs these rows): AUC {dom['auc']:.2f}, effective sample size {dom['ess']:.0f}",
        file=sys.stderr,
    )
    for c in result.get("caveats", []):
        print(f"caveat: {c}", file=sys.stderr)
    print(f"-> {out}", file=sys.stderr)
    return 0


def _print_segments(segments: dict[str, Any], what: str) -> None:
    """One stderr line per segment: its estimate against the reference value it compares with."""
    for name, row in segments.items():
        ref = row[f"reference_{what}"]
        whose = "its own" if row["own_reference"] else "the model's"
        if "estimate" not in row:
            print(f"segment {name}: {row['note']}", file=sys.stderr)
            continue
        print(
            f"segment {name}: {what} {row['estimate']:.4g} [{row['lower']:.4g}, {row['upper']:.4g}] on {row['n']} "
            f"rows; {whose} reference {ref:.4g}",
            file=sys.stderr,
        )


def _is_json(path: str | None) -> bool:
    return bool(path) and str(path).lower().endswith(".json")


def _stored_fit(path: str) -> EstimatorFit | None:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read reference JSON '{path}': {exc}", path=path) from exc
    block = doc.get(FIT_KEY) if isinstance(doc, dict) else None
    return None if block is None else EstimatorFit.from_dict(block)


def _labels(path: str, n_rows: int, header: Any) -> NDArray[np.int64]:
    raw = load_rows(path, header).reshape(-1)
    if raw.shape[0] != n_rows:
        raise DataError(
            f"--reference-labels '{path}' has {raw.shape[0]} values; expected one class index per --reference-data "
            f"row ({n_rows})",
            path=path,
        )
    if not np.all(np.isfinite(raw)) or np.any(raw != np.round(raw)):
        raise DataError(f"--reference-labels '{path}' must hold integer class indices (0..C−1)", path=path)
    return raw.astype(np.int64)
