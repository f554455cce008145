"""``harmonic-monitor score``: offline γ / flicker / P_adj for rows in a CSV or .npy file."""

from __future__ import annotations

import argparse
import csv
import logging
import sys
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from monitor.cli.common import (
    add_header_option,
    add_model_options,
    add_scoring_options,
    build_scorer,
    load_inputs,
)
from monitor.errors import MonitorError

log = logging.getLogger("monitor.score")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "score",
        help="score rows offline: gamma, flicker, p_adj, predicted_class (+ probability, margin) per row",
        description=(
            "Re-evaluate every row of --data against the ONNX model and write one CSV row per input row, "
            "in input order, with columns gamma, flicker, p_adj, predicted_class (and probability and margin "
            "for classifiers). Rows with NaN/inf are reported on stderr and get NaN scores."
        ),
    )
    add_model_options(p)
    p.add_argument(
        "--data",
        required=True,
        help="rows to score: .csv (a header row is detected: see --header), .npy, .npz (one array per input "
        "name), .parquet (columns by input or feature name), or a .jsonl event log (decoded as `run` decodes events; "
        "invalid lines counted by reason); for a model of several inputs, a CSV header names its inputs or features",
    )
    add_header_option(p)
    add_scoring_options(p)
    p.add_argument(
        "--batch-size",
        type=int,
        default=1024,
        help="events per model call (default 1024); flicker noise is drawn per call, so keep it fixed to reproduce "
        "a run bit for bit",
    )
    p.add_argument("--out", required=True, help="output CSV path")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    model, standardizer, scorer = build_scorer(args)
    rows, held = load_inputs(args.data, model, what="--data", header=args.header)
    out_path = Path(args.out)
    classifier = model.kind == "classifier"
    header = ["gamma", "flicker", "p_adj", "predicted_class"] + (["probability", "margin"] if classifier else [])
    if args.batch_size < 1:
        raise MonitorError(f"--batch-size must be >= 1; got {args.batch_size}")
    invalid: list[int] = []
    live: dict[str, list[NDArray[np.float64]]] = {"gamma": [], "flicker": [], "confidence": []}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with out_path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        for start in range(0, rows.shape[0], args.batch_size):
            part = slice(start, start + args.batch_size)
            res = scorer.score(rows[part], None if held is None else held.take(part))
            invalid.extend(int(i) + start for i in np.flatnonzero(~res.valid))
            live["gamma"].append(res.gamma)
            live["flicker"].append(res.flicker)
            live["confidence"].append(res.probability)
            cols = [res.gamma, res.flicker, res.p_adj, res.predicted_class.astype(np.float64)]
            if classifier:
                cols.append(res.probability)
                cols.append(res.margin)
            block = np.column_stack(cols)
            block[~res.valid, 3] = np.nan
            fh.write(_format_block(block))
    if invalid:
        shown = ", ".join(str(i + 1) for i in invalid[:20]) + (" …" if len(invalid) > 20 else "")
        print(
            f"warning: {len(invalid)} of {rows.shape[0]} rows contain NaN or infinite values and were not scored "
            f"(data rows {shown}); their output rows are NaN",
            file=sys.stderr,
        )
    print(f"scored {rows.shape[0] - len(invalid)} of {rows.shape[0]} rows -> {out_path}", file=sys.stderr)
    for line in yardstick_lines(args.reference, model.n_features, live):
        print(line, file=sys.stderr)
    return 0


def yardstick_lines(reference: str | None, n_features: int, live: dict[str, list[NDArray[np.float64]]]) -> list[str]:
    """Each signal's mean beside the reference JSON's (ratio and percentile); one line saying why not otherwise."""
    if not reference or not str(reference).lower().endswith(".json"):
        return ["signals beside their reference: give --reference REF.json (`harmonic-monitor reference`) to compare"]
    from monitor.api import yardsticks
    from monitor.rolling.reference_file import read_reference

    _, ref = read_reference(reference, n_features)
    values = {k: np.concatenate(v) for k, v in live.items() if v}
    return [f"  {y.describe()}" for y in yardsticks(values, ref)]


def _format_block(block: NDArray[np.float64]) -> str:
    """CSV lines (``csv.writer``'s ``\\r\\n`` ends) of ``block``'s rows, each value as :func:`_fmt` writes it: one
    ``%`` format per row (7× faster than a call per value); a row holding a value that ``%.9g`` writes otherwise
    (an integer of 10 to 15 digits, ``-0.0``) goes through :func:`_fmt`.

    >>> _format_block(np.array([[0.5, float("nan"), 2.0], [-0.0, 1234567890.0, 1e-3]]))
    '0.5,nan,2\\r\\n0,1234567890,0.001\\r\\n'
    """
    if block.size == 0:
        return ""
    size = np.abs(block)
    special = np.any(
        ((size >= 1e9) & (size < 1e15) & (block == np.round(block))) | ((block == 0) & np.signbit(block)), axis=1
    )
    line = ",".join(["%.9g"] * block.shape[1]) + "\r\n"
    values = block.tolist()
    return "".join(
        ",".join(_fmt(v) for v in row) + "\r\n" if odd else line % tuple(row)
        for row, odd in zip(values, special.tolist(), strict=True)
    )


def _fmt(v: float) -> str:
    if np.isnan(v):
        return "nan"
    if float(v).is_integer() and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.9g}"
