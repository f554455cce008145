"""``harmonic-monitor reference``: build a reference offline (standardizer + γ/flicker/feature distributions).

The JSON it writes can be given to ``run`` as the model's ``reference`` (instead of a CSV), so the sidecar starts
with a ready reference and does not re-score reference rows at start-up. For a model that holds values fixed (int,
bool and string inputs, ``--fixed-features``) it also keeps a seeded sample of the reference rows' held values
(:func:`monitor.rolling.reference_file.read_held_sample`); its feature names default to the model's
(``Signature.features``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from monitor.cli.common import (
    add_header_option,
    add_model_options,
    add_scoring_options,
    build_scorer,
    count_at_least,
    load_inputs,
)
from monitor.errors import DataError
from monitor.rolling.reference import Reference
from monitor.rolling.reference_file import write_reference


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
    p.add_argument("--out", required=True, help="output JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    model, standardizer, scorer = build_scorer(args)
    rows, held = load_inputs(args.data, model, what="--data", header=args.header)
    finite = np.all(np.isfinite(rows), axis=1)
    rows = rows[finite]
    held = None if held is None else held.take(finite)
    if rows.shape[0] < 10:
        raise DataError(f"'{args.data}' has {rows.shape[0]} finite rows; a reference needs at least 10", path=args.data)
    rng = np.random.default_rng(args.seed)
    if rows.shape[0] > args.sample_rows:
        pick = rng.choice(rows.shape[0], args.sample_rows, replace=False)
        rows = rows[pick]
        held = None if held is None else held.take(pick)
    names = tuple(n.strip() for n in args.feature_names.split(",")) if args.feature_names else None
    if names is None and not model.signature.plain:
        names = model.signature.features
    if names is not None and len(names) != model.n_features:
        raise DataError(f"--feature-names lists {len(names)} names; the model takes {model.n_features} features")
    result = scorer.score(rows, held)
    ok = result.valid
    ref = Reference.from_arrays(
        gamma=result.gamma[ok],
        flicker=result.flicker[ok],
        features=rows[ok],
        predicted_class=result.predicted_class[ok],
        feature_names=names,
        seed=args.seed,
    )
    out = write_reference(
        Path(args.out),
        standardizer,
        ref,
        model=str(args.model),
        space=args.space,
        held_sample=None if held is None else held.take(ok),
    )
    print(
        f"reference of {ref.n_events} rows written to {out} (γ mean {ref.gamma_mean:.3g}, flicker mean "
        f"{ref.flicker_mean:.3g})",
        file=sys.stderr,
    )
    return 0
