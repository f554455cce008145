"""``harmonic-monitor reference``: build a reference offline (standardizer + γ/flicker/feature distributions).

The JSON it writes can be given to ``run`` as the model's ``reference`` (instead of a CSV), so the sidecar starts
with a ready reference and does not re-score reference rows at start-up. For a model that holds values fixed (int,
bool and string inputs, ``--fixed-features``) it also keeps a seeded sample of the reference rows' held values
(:func:`monitor.rolling.reference_file.read_held_sample`); its feature names default to the model's
(``Signature.features``).

With ``--labels`` of a regressor (its true value per row) the file stores ``loss_estimator`` instead: the MAE/RMSE
estimator of :mod:`monitor.accuracy.regression`. With ``--labels`` (the true class of each reference row: a labelled
validation set the model did not train on) the file also stores ``accuracy_estimator``: the label-free accuracy estimators of :mod:`monitor.accuracy` fitted on
those rows (:func:`monitor.accuracy.labelled.labelled_fit`), which ``estimate`` and ``run`` (``harmonic_estimated_accuracy``) read.

With ``--scales from-reference`` σ and r are not the fixed ``--sigma``/``--radius`` but chosen on the reference rows so
that ``--target-flicker-share`` of them flicker (:func:`monitor.signals.scales.choose_scales`, r = σ); the reference
is scored at them and the file records them (``scales``), which ``run`` then scores at.

With ``--segment-column NAME`` the CSV's column ``NAME`` names each row's segment (fed to the model only when it is one
of its inputs): the file also stores one baseline per segment (:mod:`monitor.rolling.segment_baselines`), each built
from a sample of at most ``--sample-rows`` of that segment's rows, so that ``run`` and ``replay`` judge every segment
against its own.

The command is :func:`monitor.api.reference` with the flags' values; both build the reference with
:func:`monitor.offline.reference_build.build_reference`, so the same rows and options write the same file.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import sys
import tempfile
import typing
from collections.abc import Iterator
from pathlib import Path

from monitor.accuracy import CALIBRATION_KINDS
from monitor.cli.common import (
    SCORING_FLAGS,
    add_header_option,
    add_model_options,
    add_scoring_options,
    count_at_least,
    flag_values,
    load_model,
)
from monitor.cli.flags import add_setting_flag
from monitor.config import AccuracySettings, ScoringSettings, SegmentSettings, setting_default
from monitor.errors import DataError
from monitor.model.row_files import csv_rows, is_number


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "reference",
        help="build a drift reference offline from reference data (JSON usable as `run`'s reference)",
        description=(
            "Score the reference rows (a sample of at most --sample-rows) against the model and write the standardizer "
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
        help="the true class of each --data row: a file, one per row (.csv/.npy), or a column of the --data CSV named "
        "in its header (not fed to the model): the class values the model's integer label output gives (what delayed labels carry), or class indices 0..C−1 for a model without one. The reference "
        "then also stores the fitted label-free accuracy estimators (`estimate`; `run`'s "
        "harmonic_estimated_accuracy). A regressor's: its true value per row (empty or NaN: none); the reference then "
        "stores the loss estimator of its MAE and RMSE without labels. Give a validation set the model did not "
        "train on",
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
        "`segment`; fed to the model only when it is one of its inputs (a city that is both). The file then also "
        "stores a baseline per segment (each of the "
        "--max-segments most frequent; the rest together as 'other'): its own from 200 rows, shrunk toward the "
        "model-wide rows from 50, borrowed below (docs/OPERATIONS.md), and every segment is judged against it",
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
    """:func:`monitor.api.reference` with the flags' values; what was read and chosen on stderr."""
    from monitor.api import reference as build_reference

    model = load_model(args)
    names = tuple(n.strip() for n in args.feature_names.split(",")) if args.feature_names else None
    if names is not None and len(names) != model.n_features:
        raise DataError(f"--feature-names lists {len(names)} names; the model takes {model.n_features} features")
    with _label_column(args.data, args.labels, args.header) as (data, labels):
        try:
            result = build_reference(
                model,
                data,
                labels=labels,
                feature_names=names,
                sample_rows=args.sample_rows,
                **flag_values(args, *SCORING_FLAGS, "space", "scale", "channel_axis", "header", "calibration"),
                scales=args.scales,
                target_flicker_share=args.target_flicker_share,
                segment_column=args.segment_column,
                max_segments=args.max_segments,
                reference=args.reference,
                out=args.out,
            )
        except DataError as exc:
            raise DataError(str(exc).replace(data, args.data), path=args.data) from None
    for note in result.notes:
        print(note.replace(data, args.data), file=sys.stderr)
    _print_fits(result)
    return 0


@contextlib.contextmanager
def _label_column(data: str, labels: str | None, header: str) -> Iterator[tuple[str, str | None]]:
    """``--labels`` naming a column of the ``--data`` CSV's header (and no file): yields a copy of the CSV without
    that column and a file of its values, both removed on exit; otherwise ``data`` and ``labels`` unchanged."""
    source = Path(data)
    if labels is None or header == "no" or Path(labels).exists() or source.suffix.lower() != ".csv":
        yield data, labels
        return
    records = [(line, cells) for line, cells in csv_rows(source)]
    names = records[0][1] if records else []
    if labels not in names:
        raise DataError(
            f"--labels '{labels}' is neither a file nor a column of '{data}' ({_header_of(names)}); "
            "give a file of one true class per row, or the name of the --data column that holds it",
            path=labels,
        )
    at = names.index(labels)
    with tempfile.TemporaryDirectory(prefix="harmonic-labels-") as tmp:
        rows, values = Path(tmp) / source.name, Path(tmp) / f"{labels}.csv"
        with rows.open("w", encoding="utf-8", newline="") as fh, values.open("w", encoding="utf-8", newline="") as fv:
            out, out_labels = csv.writer(fh), csv.writer(fv)
            for _, cells in records:
                out.writerow(cells[:at] + cells[at + 1 :])
                out_labels.writerow(cells[at : at + 1])
        yield str(rows), str(values)


def _header_of(names: list[str]) -> str:
    if not names or all(map(is_number, names)):
        return "it has no header row"
    return f"its header: {', '.join(names[:12])}"


def _print_fits(result: typing.Any) -> None:
    """What the reference holds, and the accuracy or loss estimators fitted with ``--labels``."""
    ref, fit = result.reference, result.fit
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
        from monitor.accuracy.confidence_errors import confidence_harm

        tolerance = setting_default(AccuracySettings, "tolerance")
        print(f"confidence: {confidence_harm('auto', fit.confidence_errors, tolerance)[1]}", file=sys.stderr)
    loss = result.loss_fit
    if loss is not None:
        print(
            f"loss estimator fitted on {loss.n} labelled rows: reference MAE {loss.mae:.4g}, RMSE {loss.rmse:.4g}",
            file=sys.stderr,
        )
        if loss.n < 200:
            print(
                f"warning: {loss.n} labelled rows make a noisy fit (a few hundred or more is better)", file=sys.stderr
            )
