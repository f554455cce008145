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
that ``--target-flicker-share`` of them flicker (:func:`monitor.signals.scales.choose_scales`, r = σ); the reference
is scored at them and the file records them (``scales``), which ``run`` then scores at.

With ``--segment-column NAME`` the CSV's column ``NAME`` names each row's segment (it is not fed to the model): the
file also stores one baseline per segment (:mod:`monitor.rolling.segment_baselines`), each built from a sample of at
most ``--sample-rows`` of that segment's rows, so that ``run`` and ``replay`` judge every segment against its own.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import typing
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from monitor.accuracy import CALIBRATION_KINDS
from monitor.accuracy.labelled import labelled_fit
from monitor.cli.common import (
    add_header_option,
    add_model_options,
    add_scoring_options,
    build_scorer,
    count_at_least,
    load_inputs,
)
from monitor.cli.flags import add_setting_flag
from monitor.config import ScoringSettings, SegmentSettings
from monitor.drift.base import MIN_REFERENCE_VALUES
from monitor.drift.categories import count_tables, held_columns, held_element_names
from monitor.errors import DataError
from monitor.model.io import HeaderMode, load_rows
from monitor.rolling.reference import Reference
from monitor.rolling.reference_file import write_reference
from monitor.rolling.segment_baselines import fold_segments, segment_references, split_segment_column
from monitor.signals.scales import choose_scales
from monitor.signals.scorer import RobustnessScorer


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
    add_setting_flag(
        p,
        ScoringSettings,
        "scales",
        "--scales",
        choices=[c.replace("_", "-") for c in typing.get_args(ScoringSettings.model_fields["scales"].annotation)],
        default="fixed",
        why="a reference chooses its own scales only when asked; `run` then scores at them (scoring.scales: "
        "from_reference)",
        help="fixed: score at --radius/--sigma; from-reference: choose σ on the reference rows so that "
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
    p.add_argument(
        "--segment-column",
        help="the --data CSV column (named in its header) that holds each row's segment, as events carry it in "
        "`segment`; not fed to the model. The file then also stores a baseline per segment (each of the "
        "--max-segments most frequent with at least 200 rows; the rest together as 'other'), and every segment is "
        "judged against its own",
    )
    add_setting_flag(
        p,
        SegmentSettings,
        "max_segments",
        "--max-segments",
        type=count_at_least(1),
        before="with --segment-column: segments with a baseline of their own, as segments.max_segments: ",
    )
    p.add_argument("--out", required=True, help="output JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    segments = None
    if args.segment_column is None:
        model, standardizer, scorer = build_scorer(args)
        rows, held = load_inputs(args.data, model, what="--data", header=args.header)
    else:
        with split_segment_column(args.data, args.segment_column) as (path, segments):
            model, standardizer, scorer = build_scorer(argparse.Namespace(**{**vars(args), "data": str(path)}))
            rows, held = load_inputs(str(path), model, what="--data", header=args.header)
        if segments.size != rows.shape[0]:
            raise DataError(
                f"--segment-column '{args.segment_column}': {segments.size} values for {rows.shape[0]} rows of "
                f"'{args.data}'; every row needs one",
                path=args.data,
            )
    labels = None if args.labels is None else read_labels(args.labels, rows.shape[0], header=args.header)
    if labels is not None and model.kind != "classifier":
        raise DataError(
            f"'{args.model}' is read as a {model.kind}: --labels fits accuracy estimators, which are for classifiers "
            "(set --model-kind classifier if its outputs are class scores)"
        )
    finite = np.all(np.isfinite(rows), axis=1)
    if not finite.all():
        print(
            f"warning: {int(finite.size - finite.sum())} of {finite.size} rows of '{args.data}' hold NaN or infinite "
            f"values and are left out; the reference is built from the other {int(finite.sum())}",
            file=sys.stderr,
        )
    rows = rows[finite]
    held = None if held is None else held.take(finite)
    labels = None if labels is None else labels[finite]
    segments = None if segments is None else segments[finite]
    if rows.shape[0] < MIN_REFERENCE_VALUES:
        raise DataError(
            f"'{args.data}' has {rows.shape[0]} finite rows; a reference needs at least {MIN_REFERENCE_VALUES}, the "
            "drift detectors' minimum (200 or more calibrate their thresholds)",
            path=args.data,
        )
    # count tables of the held inputs from every reference row (before sampling): a rare category stays known
    names_of_held = held_element_names(model.signature)
    all_held = None if held is None else held_columns(held.values, names_of_held)
    all_segments = segments
    rng = np.random.default_rng(args.seed)
    if segments is not None:  # at most --sample-rows rows of each segment
        pick = np.sort(
            np.concatenate(
                [
                    idx if idx.size <= args.sample_rows else rng.choice(idx, args.sample_rows, replace=False)
                    for name in np.unique(segments).tolist()
                    for idx in [np.flatnonzero(segments == name)]
                ]
            )
        )
        rows, segments = rows[pick], segments[pick]
        held = None if held is None else held.take(pick)
        labels = None if labels is None else labels[pick]
    elif rows.shape[0] > args.sample_rows:
        pick = rng.choice(rows.shape[0], args.sample_rows, replace=False)
        rows = rows[pick]
        held = None if held is None else held.take(pick)
        labels = None if labels is None else labels[pick]
    names = tuple(n.strip() for n in args.feature_names.split(",")) if args.feature_names else None
    if names is None and not model.signature.plain:
        names = model.signature.features
    if names is not None and len(names) != model.n_features:
        raise DataError(f"--feature-names lists {len(names)} names; the model takes {model.n_features} features")
    scales = None
    if args.scales == "from-reference":
        scales = choose_scales(
            model,
            standardizer,
            rows,
            held,
            scorer.config,
            target_share=args.target_flicker_share,
            held_sample=held,
        )
        config = dataclasses.replace(scorer.config, sigma=scales.sigma, radius=scales.radius)
        scorer = RobustnessScorer(model, standardizer, config, held_sample=held)
        print(
            f"signal scales from the reference: σ = r = {scales.sigma:.4g} ({args.space} units); "
            f"{scales.flicker_share:.0%} of {scales.rows} rows flicker (target {args.target_flicker_share:.0%})",
            file=sys.stderr,
        )
    result = scorer.score(rows, held)
    ok = result.valid
    ref = Reference.from_arrays(
        gamma=result.gamma[ok],
        flicker=result.flicker[ok],
        features=rows[ok],
        predicted_class=result.predicted_class[ok],
        feature_names=names,
        seed=args.seed,
        confidence=result.probability[ok] if model.kind == "classifier" else None,
        margin=result.margin[ok] if model.kind == "classifier" else None,
    )
    baselines = None
    if segments is not None:
        baselines = segment_references(
            segments[ok],
            gamma=result.gamma[ok],
            flicker=result.flicker[ok],
            features=rows[ok],
            predicted_class=result.predicted_class[ok],
            confidence=result.probability[ok] if model.kind == "classifier" else None,
            margin=result.margin[ok] if model.kind == "classifier" else None,
            feature_names=names,
            max_segments=args.max_segments,
            seed=args.seed,
        )
        if all_held is not None and all_segments is not None:
            folded = fold_segments(all_segments, args.max_segments)
            baselines = {
                name: dataclasses.replace(
                    ref, held_tables=count_tables({k: v[folded == name] for k, v in all_held.items()})
                )
                for name, ref in baselines.items()
            }
        kept = ", ".join(f"{name} ({ref.n_events})" for name, ref in baselines.items()) or "none"
        print(f"per-segment baselines (rows): {kept}", file=sys.stderr)
    if all_held is not None:
        ref = dataclasses.replace(ref, held_tables=count_tables(all_held))
    fit = None
    if labels is not None:
        fit = labelled_fit(model, rows, held, result, labels, seed=args.seed, calibration=args.calibration)
    out = write_reference(
        Path(args.out),
        standardizer,
        ref,
        model=str(args.model),
        space=args.space,
        held_sample=None if held is None else held.take(ok),
        accuracy_estimator=None if fit is None else fit.to_dict(),
        scales=scales,
        segments=baselines,
        segment_column=args.segment_column,
    )
    print(
        f"reference of {ref.n_events} rows written to {out} (γ mean {ref.gamma_mean:.3g}, flicker mean "
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
