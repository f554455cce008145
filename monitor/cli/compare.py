"""``harmonic-monitor compare``: two or more ONNX models on the same rows, pair by pair, without a composite score."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from monitor.cli.common import SCORING_FLAGS, add_header_option, count_at_least
from monitor.cli.flags import add_setting_flag
from monitor.config import ModelSettings, ScoringSettings
from monitor.errors import DataError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "compare",
        help="compare two or more models on the same rows: paired differences, disagreement, Pareto statement",
        description=(
            "Score every --model on the same --data rows at the same scales (each model reads its inputs from the "
            "data's columns by name, standardized by the same --reference rows) and compare them pair by pair: "
            "per model (and per --segment-column segment) γ, flicker, P_adj, confidence, the label-free accuracy "
            "estimate (with --reference-labels) and the realized accuracy (with --labels); per pair the paired "
            "differences with paired-bootstrap intervals, the share of rows where they predict different classes "
            "and the inputs those rows share, the more fragile model, a Pareto statement (one dominates on every "
            "measured axis, or they are incomparable and each wins somewhere) and the ε* fragilities every model "
            "shares versus those specific to some. The first --model is the one in place: the verdict of each "
            "later one beside it is candidate-better, candidate-worse, no-difference or incomparable."
        ),
    )
    p.add_argument(
        "--model",
        action="append",
        required=True,
        metavar="[NAME=]PATH",
        help="an ONNX model (give two or more; named by the file's stem unless NAME= is given)",
    )
    p.add_argument(
        "--data",
        required=True,
        help="the rows all models score: a .csv whose header names the columns, a .parquet, a .npy (unnamed "
        "columns: only for models of one unnamed input of that width), or a .jsonl event log (decoded for each model "
        "as `run` decodes events; --segment-column segment: the events' segment)",
    )
    p.add_argument("--reference", help="reference rows for the shared standardization (same columns); default --data")
    p.add_argument("--labels", help="the true class per --data row: a column of --data, or a .csv/.npy file")
    p.add_argument(
        "--reference-labels",
        help="the true class per --reference row (a column or a file): fits the label-free accuracy estimators",
    )
    p.add_argument("--segment-column", help="a column of --data naming each row's segment (reported per segment)")
    p.add_argument(
        "--feature-names",
        action="append",
        default=[],
        metavar="NAME=a,b,…",
        help="the data columns a model of one unnamed [N, D] input reads, in its order (repeat per model)",
    )
    add_header_option(p)
    add_setting_flag(p, ModelSettings, "model_kind", "--model-kind")
    add_setting_flag(p, ScoringSettings, "radius", "--radius")
    add_setting_flag(p, ScoringSettings, "space", "--space", after=" Here: the units of --radius/--sigma and ε*.")
    for name in SCORING_FLAGS[1:]:
        add_setting_flag(p, ScoringSettings, name, "--" + name.replace("_", "-"))
    p.add_argument("--bootstrap", type=count_at_least(1), default=1000, help="paired-bootstrap replicates (1000)")
    p.add_argument("--level", type=float, default=0.9, help="the intervals' coverage (default 0.9)")
    p.add_argument(
        "--probe-points",
        type=count_at_least(0),
        default=20,
        help="rows the ε* profile of each model is probed on (default 20; 0 skips the fragility split)",
    )
    p.add_argument("--batch-size", type=count_at_least(1), default=1024, help="rows per scorer call (1024)")
    p.add_argument("--json", dest="json_out", help="also write every table as JSON here")
    p.set_defaults(func=run)


def _pairs(values: list[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        name, sep, rest = v.partition("=")
        if not sep or not name.strip() or not rest.strip():
            raise DataError(f"{flag} expects NAME=VALUE; got {v!r}")
        out[name.strip()] = rest.strip()
    return out


def _models(values: list[str]) -> dict[str, str]:
    """``--model`` values by name: ``NAME=PATH``, or a path named by its stem (a second of one stem gets ``-2``)."""
    out: dict[str, str] = {}
    for v in values:
        name, sep, rest = v.partition("=")
        if sep and not Path(v).is_file():
            key, path = name.strip(), rest.strip()
        else:
            key = path = v
            key = Path(v).stem
        base, k = key, 2
        while key in out:
            key, k = f"{base}-{k}", k + 1
        out[key] = path
    return out


def run(args: argparse.Namespace) -> int:
    """:func:`monitor.api.compare` with the flags' values; the table on stdout, the JSON to ``--json``."""
    from monitor.api import compare

    if not 0 < args.level < 1:
        raise DataError(f"--level must be in (0, 1); got {args.level}")
    models = _models(args.model)
    if len(models) < 2:
        raise DataError(f"compare needs two or more --model; got {len(models)}")
    names = {k: [n.strip() for n in v.split(",")] for k, v in _pairs(args.feature_names, "--feature-names").items()}
    result = compare(
        models,
        args.data,
        args.reference,
        labels=args.labels,
        reference_labels=args.reference_labels,
        segment_column=args.segment_column,
        feature_names=names,
        replicates=args.bootstrap,
        level=args.level,
        probe_points=args.probe_points,
        header=args.header,
        model_kind=args.model_kind,
        batch_rows=args.batch_size,
        space=args.space,
        **{name: getattr(args, name) for name in SCORING_FLAGS},
    )
    print(result.summary())
    if args.json_out:
        out = Path(args.json_out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result.document(), indent=1, allow_nan=False) + "\n", encoding="utf-8")
        print(f"-> {out}", file=sys.stderr)
    return 0
