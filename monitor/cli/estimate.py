"""``harmonic-monitor estimate``: the model's accuracy on unlabelled rows, with a 90 % interval.

The estimators (:mod:`monitor.estimate`) are fitted on a labelled reference: either the fit a reference JSON stores
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

from monitor.cli.common import (
    add_header_option,
    add_model_options,
    add_scoring_options,
    build_scorer,
    load_inputs,
    load_model,
)
from monitor.errors import DataError
from monitor.estimate import (
    CALIBRATION_KINDS,
    DEFAULT_METHOD,
    METHODS,
    EstimatorFit,
    estimate,
    fit_estimators,
)
from monitor.metrics.scorer import RobustnessScorer, ScoringConfig
from monitor.model.io import load_rows
from monitor.model.onnx import OnnxModel
from monitor.model.signature import Held
from monitor.rolling.reference_file import read_held_sample, read_reference

#: the key of a reference JSON that holds a stored :class:`EstimatorFit` (``EstimatorFit.to_dict()``)
FIT_KEY = "accuracy_estimator"
#: rows per scorer call
BATCH = 4096


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "estimate",
        help="estimate the model's accuracy on unlabelled rows (AC, ATC, DoC, ours), with 90 %% intervals",
        description=(
            "Score --data against the ONNX model and estimate its accuracy there without labels, by every method "
            f"({', '.join(METHODS)}), each with a 90 %% interval; --method picks the one reported as 'accuracy'. "
            "The estimators are fitted on a labelled reference: the fit stored in --reference (a JSON reference "
            f"with '{FIT_KEY}'), or --reference-data with --reference-labels, scored and fitted here. An estimate "
            "sees covariate shift only: a change of P(y|x) alone is invisible without labels."
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
        help="confidence calibration fitted on --reference-data (default temperature: see monitor/estimate)",
    )
    p.add_argument(
        "--method", choices=METHODS, default=DEFAULT_METHOD, help=f"primary method (default {DEFAULT_METHOD})"
    )
    p.add_argument("--json", required=True, dest="json_out", help="output JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    stored = _stored_fit(args.reference) if _is_json(args.reference) else None
    if stored is None and not (args.reference_data and args.reference_labels):
        where = f"'{args.reference}' holds no '{FIT_KEY}'; " if _is_json(args.reference) else ""
        raise DataError(
            f"{where}give a labelled validation set with --reference-data and --reference-labels (or a reference "
            f"JSON built with labels) to fit the estimators on"
        )
    if bool(args.reference_data) != bool(args.reference_labels):
        raise DataError("--reference-data and --reference-labels go together")
    model, scorer = _scorer(args)
    if model.kind != "classifier":
        raise DataError(
            f"'{args.model}' is read as a {model.kind}: accuracy estimation is for classifiers (set --model-kind "
            "classifier if its outputs are class scores)"
        )
    notes: list[str] = []
    if stored is not None:
        fit = stored
        source = f"{args.reference} ({FIT_KEY})"
    else:
        ref_rows, ref_held = load_inputs(args.reference_data, model, what="--reference-data", header=args.header)
        labels = _labels(args.reference_labels, ref_rows.shape[0], args.header)
        s = _score(scorer, ref_rows, ref_held)
        correct = (s["predicted_class"] == labels) & np.isfinite(s["confidence"])
        fit = fit_estimators(
            s["confidence"], s["gamma"], s["flicker"], s["p_adj"], correct, seed=args.seed, calibration=args.calibration
        )
        source = f"{args.reference_data} with {args.reference_labels}"
        if fit.n < 200:
            notes.append(f"the labelled reference has {fit.n} rows: the fit is noisy (a few hundred or more is better)")
    rows, held = load_inputs(args.data, model, what="--data", header=args.header)
    t = _score(scorer, rows, held)
    result: dict[str, Any] = estimate(
        fit, t["confidence"], t["gamma"], t["flicker"], t["p_adj"], method=args.method, seed=args.seed
    )
    result["warnings"] = [*result["warnings"], *notes]
    result["model"] = str(args.model)
    result["data"] = str(args.data)
    result["fit"] = {"source": source, "n": fit.n, "calibration": fit.calibration.kind, **fit.diagnostics}
    out = Path(args.json_out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    acc = result["accuracy"]
    print(
        f"estimated accuracy {acc['estimate']:.3f} [{acc['lower']:.3f}, {acc['upper']:.3f}] (90 %, {acc['method']}) "
        f"on {result['n']} rows; reference accuracy {fit.accuracy:.3f} on {fit.n} rows -> {out}",
        file=sys.stderr,
    )
    for w in result["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    return 0


def _is_json(path: str | None) -> bool:
    return bool(path) and str(path).lower().endswith(".json")


def _stored_fit(path: str) -> EstimatorFit | None:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read reference JSON '{path}': {exc}", path=path) from exc
    block = doc.get(FIT_KEY) if isinstance(doc, dict) else None
    return None if block is None else EstimatorFit.from_dict(block)


def _scorer(args: argparse.Namespace) -> tuple[OnnxModel, RobustnessScorer]:
    """The scorer as ``score`` builds it; a reference JSON gives its standardizer (and held sample) instead."""
    if not _is_json(args.reference):
        if args.reference is None and args.reference_data:
            args.reference = args.reference_data  # standardize by the labelled reference, not the shifted data
        model, _, scorer = build_scorer(args)
        return model, scorer
    model = load_model(args)
    standardizer, _ = read_reference(args.reference, model.n_features)
    held_sample = read_held_sample(args.reference, model.signature)
    config = ScoringConfig(
        radius=args.radius,
        ball=args.ball,
        output=args.output,
        flicker_copies=args.flicker_copies,
        sigma=args.sigma,
        steps=args.steps,
        seed=args.seed,
        regression_tolerance=args.regression_tolerance,
    )
    return model, RobustnessScorer(model, standardizer, config, held_sample=held_sample)


def _score(scorer: RobustnessScorer, rows: NDArray[np.float64], held: Held | None) -> dict[str, NDArray[Any]]:
    parts: dict[str, list[NDArray[Any]]] = {
        k: [] for k in ("confidence", "gamma", "flicker", "p_adj", "predicted_class")
    }
    for start in range(0, rows.shape[0], BATCH):
        part = slice(start, start + BATCH)
        res = scorer.score(rows[part], None if held is None else held.take(part))
        parts["confidence"].append(np.where(res.valid, res.probability, np.nan))
        parts["gamma"].append(res.gamma)
        parts["flicker"].append(res.flicker)
        parts["p_adj"].append(res.p_adj)
        parts["predicted_class"].append(res.predicted_class)
    return {k: np.concatenate(v) if v else np.empty(0) for k, v in parts.items()}


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
