"""``harmonic-monitor reference``: build a reference offline (standardizer + γ/flicker/feature distributions).

The JSON it writes can be given to ``run`` as the model's ``reference`` (instead of a CSV), so the sidecar starts
with a ready reference and does not re-score reference rows at start-up. For a model that holds values fixed (int,
bool and string inputs, ``--fixed-features``) it also keeps a seeded sample of the reference rows' held values
(:func:`monitor.rolling.reference_file.read_held_sample`); its feature names default to the model's
(``Signature.features``).

With ``--labels`` (the true class of each reference row: a labelled validation set the model did not train on) the
file also stores ``accuracy_estimator``: the label-free accuracy estimators of :mod:`monitor.accuracy` fitted on
those rows (:func:`monitor.accuracy.labelled.labelled_fit`), which ``estimate`` and ``run`` (``harmonic_estimated_accuracy``) read.

With ``--scales from-reference`` σ and r are not the fixed ``--sigma``/``--radius`` but chosen on the reference rows so
that ``--target-flicker-share`` of them flicker (:func:`monitor.metrics.scales.choose_scales`, r = σ); the reference
is scored at them and the file records them (``scales``), which ``run`` then scores at.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from monitor.accuracy import CALIBRATION_KINDS
from monitor.cli.common import (
    add_header_option,
    add_model_options,
    add_scoring_options,
    build_scorer,
    count_at_least,
    load_inputs,
)
from monitor.errors import DataError
from monitor.model.io import HeaderMode, load_rows


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "reference",
        help="build a drift reference offline from reference data (JSON usable as `run`'s reference)",
        description=(
            "Score the reference rows (a sample of at most --max-rows) against the model and write the standardizer "
            "and the γ, flicker and feature distributions drift detection compares against."
        ),
    )
    add_model_options(p)
    p.add_argument(
        "--data",
        required=True,
        help="reference rows: .csv (a header row is detected: see --header), .npy, or .npz (one array per input "
        "name); for a model of several inputs, a CSV header names its inputs or features",
    )
    add_header_option(p)
    add_scoring_options(p)
    p.add_argument(
        "--sample-rows", type=count_at_least(1), default=5000, help="rows scored (a seeded sample; default 5000)"
    )
    p.add_argument("--feature-names", help="comma-separated names of the features (alerts name moved features)")
    p.add_argument(
        "--labels",
        help="the true class of each --data row, one per row (.csv/.npy): the class values the model's integer label "
        "output gives (what delayed labels carry), or class indices 0..C−1 for a model without one. The reference "
        "then also stores the fitted label-free accuracy estimators (`estimate`; `run`'s "
        "harmonic_estimated_accuracy). Give a validation set the model did not train on",
    )
    p.add_argument(
        "--calibration",
        choices=CALIBRATION_KINDS,
        default="temperature",
        help="with --labels: the confidence calibration fitted (default temperature: see monitor/accuracy)",
    )
    p.add_argument(
        "--scales",
        choices=["fixed", "from-reference"],
        default="fixed",
        help="fixed (default): score at --radius/--sigma; from-reference: choose σ on the reference rows so that "
        "--target-flicker-share of them flicker (a seeded bisection, r = σ; --radius/--sigma are then not used), "
        "score at it and record it in the JSON (`run` scores at it)",
    )
    p.add_argument(
        "--target-flicker-share",
        type=float,
        default=0.5,
        help="with --scales from-reference: the share of reference rows with non-zero flicker at the chosen σ "
        "(default 0.5)",
    )
    p.add_argument("--out", required=True, help="output JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from monitor.api import Rows
    from monitor.api import reference as build_reference

    model, standardizer, scorer = build_scorer(args)
    rows, held = load_inputs(args.data, model, what="--data", header=args.header)
    labels = None if args.labels is None else read_labels(args.labels, rows.shape[0], header=args.header)
    names = tuple(n.strip() for n in args.feature_names.split(",")) if args.feature_names else None
    if names is not None and len(names) != model.n_features:
        raise DataError(f"--feature-names lists {len(names)} names; the model takes {model.n_features} features")
    config = scorer.config
    result = build_reference(
        model,
        Rows(rows, held, f"'{args.data}'"),
        labels=labels,
        feature_names=names,
        sample_rows=args.sample_rows,
        radius=config.radius,
        sigma=config.sigma,
        flicker_copies=config.flicker_copies,
        steps=config.steps,
        seed=args.seed,
        ball=config.ball,
        output=config.output,
        space=args.space,
        calibration=args.calibration,
        scales=args.scales,
        target_flicker_share=args.target_flicker_share,
        regression_tolerance=config.regression_tolerance,
        standardizer=standardizer,
        out=Path(args.out),
    )
    scales, ref, fit = result.scales, result.reference, result.fit
    if scales is not None:
        print(
            f"signal scales from the reference: σ = r = {scales.sigma:.4g} ({args.space} units); "
            f"{scales.flicker_share:.0%} of {scales.rows} rows flicker (target {args.target_flicker_share:.0%})",
            file=sys.stderr,
        )
    print(
        f"reference of {ref.n_events} rows written to {result.path} (γ mean {ref.gamma_mean:.3g}, flicker mean "
        f"{ref.flicker_mean:.3g})",
        file=sys.stderr,
    )
    if fit is not None:
        print(
            f"accuracy estimators fitted on {fit.n} labelled rows: reference accuracy {fit.accuracy:.3f}, "
            f"{fit.calibration.kind} calibration, ATC threshold {fit.atc_threshold:.4g}, harmonic model "
            f"{fit.diagnostics.get('harmonic_model')} (cross-fitted, {fit.diagnostics.get('folds')} folds)",
            file=sys.stderr,
        )
        if fit.n < 200:
            print(f"warning: {fit.n} labelled rows make a noisy fit (a few hundred or more is better)", file=sys.stderr)
    return 0


def read_labels(path: str, n_rows: int, *, header: HeaderMode = "auto") -> NDArray[np.int64]:
    """One integer class per data row from ``path`` (.csv/.npy, one column or one row).

    Raises
    ------
    DataError
        Another count than ``n_rows``, or a value that is not an integer.
    """
    raw = load_rows(path, header).reshape(-1)
    if raw.shape[0] != n_rows:
        raise DataError(
            f"--labels '{path}' has {raw.shape[0]} values; expected one class per --data row ({n_rows})", path=path
        )
    if not np.all(np.isfinite(raw)) or np.any(raw != np.round(raw)):
        raise DataError(f"--labels '{path}' must hold integer classes (class values or indices 0..C−1)", path=path)
    return raw.astype(np.int64)
