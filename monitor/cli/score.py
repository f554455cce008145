"""``harmonic-monitor score``: offline γ / flicker / P_adj for rows in a CSV or .npy file."""

from __future__ import annotations

import argparse
import csv
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from monitor.cli.common import add_header_option, add_model_options, add_scoring_options, load_model
from monitor.errors import MonitorError
from monitor.model.onnx import OnnxModel
from monitor.model.signature import default_held

if TYPE_CHECKING:
    from monitor.signals.scorer import ScoreResult

log = logging.getLogger("monitor.score")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "score",
        help="score rows offline: gamma, flicker, p_adj, predicted_class (+ probability, margin; a regressor's "
        "predicted_value) per row",
        description=(
            "Re-evaluate every row of --data against the ONNX model and write one CSV row per input row, "
            "in input order, with columns gamma, flicker, p_adj, predicted_class (and probability and margin "
            "for classifiers; predicted_value, the model's output, for a regressor of one output). Rows with NaN/inf "
            "are reported on stderr and get NaN scores."
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
    """:func:`monitor.api.score` with the flags' values; the CSV and the summary on stderr."""
    # the scoring module itself, not monitor.api: the API imports every command's module (drift tests, reports)
    from monitor.offline.results import ScoreTable
    from monitor.offline.scoring import score as score_rows

    model = load_model(args)
    if args.batch_size < 1:
        raise MonitorError(f"--batch-size must be >= 1; got {args.batch_size}")
    table = score_rows(
        model,
        args.data,
        reference=args.reference,
        radius=args.radius,
        sigma=args.sigma,
        flicker_copies=args.flicker_copies,
        steps=args.steps,
        seed=args.seed,
        ball=args.ball,
        output=args.output,
        space=args.space,
        batch_rows=args.batch_size,
        header=args.header,
        scale=args.scale,
        channel_axis=args.channel_axis,
        regression_tolerance=args.regression_tolerance,
        as_frame=False,
    )
    assert isinstance(table, ScoreTable) and table.result is not None
    for flag, text in (("--reference", table.sources.get("reference")), ("--data", table.sources["data"])):
        if text is not None:
            line = f"{flag}: {text}"
            if flag == "--data" and table.invalid:
                line += (
                    " (invalid lines by reason: "
                    + ", ".join(f"{k}: {v}" for k, v in sorted(table.invalid.items()))
                    + ")"
                )
            print(line, file=sys.stderr)
    res = table.result
    n = len(table)
    out_path = _write_csv(Path(args.out), res, model.kind == "classifier")
    invalid = np.flatnonzero(~res.valid)
    if invalid.size:
        shown = ", ".join(str(int(i) + 1) for i in invalid[:20]) + (" …" if invalid.size > 20 else "")
        print(
            f"warning: {invalid.size} of {n} rows contain NaN or infinite values and were not scored "
            f"(data rows {shown}); their output rows are NaN",
            file=sys.stderr,
        )
    print(f"scored {n - invalid.size} of {n} rows -> {out_path}", file=sys.stderr)
    note = _read_as_regressor_note(model)
    if note:
        print(note, file=sys.stderr)
    if table.yardstick:
        print("signals beside their reference:", file=sys.stderr)
        for y in table.yardstick:
            print(f"  {y.describe()}", file=sys.stderr)
    else:
        print(
            "signals beside their reference: give --reference REF.json (`harmonic-monitor reference`) or reference "
            "rows to compare",
            file=sys.stderr,
        )
    return 0


def _write_csv(out_path: Path, res: ScoreResult, classifier: bool) -> Path:
    """The score CSV: γ, flicker, P_adj and the class per row (a classifier's probability and margin, a one-output
    regressor's predicted value, γ's standard error where the ball was sampled); NaN rows where a row was invalid."""
    from monitor.offline.scoring import predicted_values

    header = ["gamma", "flicker", "p_adj", "predicted_class"] + (["probability", "margin"] if classifier else [])
    cols = [res.gamma, res.flicker, res.p_adj, res.predicted_class.astype(np.float64)]
    if classifier:
        cols += [res.probability, res.margin]
    elif (value := predicted_values(res)) is not None:  # a regressor's prediction at the row (one output)
        header.append("predicted_value")
        cols.append(value)
    if res.gamma_se is not None:  # γ's standard error against the full ball (0 for a ball evaluated whole)
        header.append("gamma_se")
        cols.append(res.gamma_se)
    block = np.column_stack(cols)
    block[~res.valid, 3] = np.nan
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with out_path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        fh.write(_format_block(block))
    return out_path


def _read_as_regressor_note(model: OnnxModel) -> str:
    """For a model read as a regressor (not by ``--model-kind``) whose one output has several columns: that its
    ``p_adj`` and ``predicted_class`` are NaN and -1, and that a classifier's logits need ``--model-kind classifier``."""
    decision = model.decision
    if decision.kind != "regressor" or len(decision.values) != 1 or "set in the configuration" in decision.reason:
        return ""
    out = model.evaluate(np.zeros((1, model.n_features), dtype=np.float32), default_held(model.signature, 1))
    columns = 1 if out.value is None or out.value.ndim < 2 else int(out.value.shape[1])
    if columns < 2:
        return ""
    return (
        f"note: '{decision.values[0]}' gives {columns} values per row and the graph does not mark them as class "
        "scores (no Softmax, ArgMax or label output), so the model is read as a regressor: p_adj is nan and "
        "predicted_class -1 (classifier signals). If these are a classifier's logits, pass --model-kind classifier: "
        "the class is then their argmax and the probability their softmax"
    )


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
