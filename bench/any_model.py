"""Any model vs bound: scored events/s of :class:`RobustnessScorer` on the model zoo's kinds against
onnxruntime alone on the model's own inputs.

For each model kind a team deploys (``tests/model_zoo.py``: a ColumnTransformer classifier and regressor with three
float columns and a string column, LightGBM and XGBoost classifiers, the 8×8 digits CNN, a model with an int64 side
input, a model exported with a fixed batch of 1 that the monitor makes free), built in a temporary folder, and for
each batch size B, this script measures in ONE process, interleaved repeat by repeat as ``engine_throughput.py``
does:

- **scorer**: ``B / time(scorer.score(x, held))`` — the whole job on B events (x: their float features, held: their
  int and string values): the B·(1+m+K) rows, built in the graph or in numpy, every run, γ, flicker, P_adj;
- **bound**: ``B / time(session.run(feeds))`` — onnxruntime alone on the model file as the monitor loads it (ZipMap
  exposed as its tensor, the same outputs fetched, the same session options) and on the model's OWN inputs: per
  run, the feeds ``signature.feeds(rows, held)`` gives for the very rows the job evaluates (``scorer.build_rows``:
  centres, ball points, flicker copies) and their held values (each event's repeated for its ball points and
  copies), cut into the scorer's runs (whole events, as ``evaluate`` or the neighbourhood graph cuts them) and
  built once, outside the timing. A fixed batch the monitor made free is made free in the bound's graph the same
  way (the batch dimension symbolic, ``Reshape [1, -1]`` → ``[0, -1]``);
- **scorer / bound** twice: the ratio of the medians, and *paired* — the median over rounds of bound time / scorer
  time within a round (the steadier figure on a shared machine).

Events: B rows drawn around the model's sample inputs (``ZooModel.inputs``): float features of a random sample row
plus seeded Gaussian noise of 0.1 × the feature's spread over the samples, held values of another random sample
row. The standardizer is fitted on 2,048 such events. Default ``ScoringConfig`` (``auto`` ball, 32 flicker copies)
and ``OnnxRuntimeOptions`` but ``intra_op_threads``. The process applies the sidecar's malloc settings first.

``--runs N`` times every cell N times, the cells in turn, and judges each cell's per-run paired ratios against
``--target`` (``bench/verdict.py``). It prints a markdown table and the machine. Usage::

    .venv/bin/python bench/any_model.py                                        # every kind, B 256 and 1024
    .venv/bin/python bench/any_model.py --models cnn,lgbm --batch-sizes 256 --threads 1 --runs 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from engine_throughput import (
    add_cell_flags,
    timed_rounds,
)  # bench/engine_throughput.py: the script's folder is on sys.path
from machine import machine
from numpy.typing import NDArray
from verdict import print_cell_verdicts

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: make `tests.model_zoo` (the models the tests build) importable
    sys.path.insert(0, str(REPO))

from monitor.allocator import tune_malloc  # noqa: E402
from monitor.model.broadcast import fresh_namer  # noqa: E402
from monitor.model.canonical import free_reshapes  # noqa: E402
from monitor.model.onnx import OnnxModel, OnnxRuntimeOptions  # noqa: E402
from monitor.model.onnx_read import prepare  # noqa: E402
from monitor.model.session import session_options  # noqa: E402
from monitor.model.signature import Held  # noqa: E402
from monitor.model.standardize import Standardizer  # noqa: E402
from monitor.signals.scorer import RobustnessScorer, ScoringConfig  # noqa: E402
from tests import model_zoo  # noqa: E402

#: noise on the float features of the sample rows, as a share of each feature's spread over the samples
JITTER = 0.1
REFERENCE_EVENTS = 2048

Feed = dict[str, NDArray[Any]]


@dataclass(frozen=True)
class Kind:
    key: str
    label: str
    build: Callable[[Path], model_zoo.ZooModel]


KINDS = (
    Kind(
        "ct-clf",
        "ColumnTransformer → LogisticRegression (3 classes, ZipMap)",
        model_zoo.build_column_transformer_classifier,
    ),
    Kind("ct-reg", "ColumnTransformer → LinearRegression", model_zoo.build_column_transformer_regressor),
    Kind("lgbm", "LightGBM (10 trees, binary, ZipMap)", model_zoo.build_lightgbm_classifier),
    Kind("xgb", "XGBoost (10 trees, binary)", model_zoo.build_xgboost_classifier),
    Kind("cnn", "CNN 8×8 digits (Conv-Relu-MaxPool-Gemm)", model_zoo.build_cnn_digits),
    Kind("int64", "linear + int64 id (Gather)", model_zoo.build_int64_side_input),
    Kind("fixed1", "MLP exported with batch 1, made free", model_zoo.build_fixed_batch_one),
)


@dataclass
class Row:
    kind: Kind
    inputs: str
    rows_per_event: int
    in_graph: bool
    threads: int
    batch: int
    scorer_eps: float
    bound_eps: float
    paired_ratio: float  # median over rounds of bound time / scorer time


@dataclass
class Built:
    """A zoo model, its events and the standardizer fitted on them."""

    kind: Kind
    path: Path
    x: NDArray[np.float32]  # (max B, D) events' float features
    held: Held | None  # their held values (None: the model holds nothing)
    held_sample: Held | None
    standardizer: Standardizer


def draw_events(
    x_sample: NDArray[np.float64], held_sample: Held | None, n: int, rng: np.random.Generator
) -> tuple[NDArray[np.float32], Held | None]:
    """n events around the sample rows: a random row's floats plus noise, another random row's held values."""
    spread = x_sample.std(axis=0)
    pick = rng.integers(0, x_sample.shape[0], size=n)
    x = x_sample[pick] + JITTER * spread * rng.standard_normal((n, x_sample.shape[1]))
    held = None if held_sample is None else held_sample.take(rng.integers(0, len(held_sample), size=n))
    return np.ascontiguousarray(x, dtype=np.float32), held


def build(kind: Kind, folder: Path, events: int, seed: int) -> Built:
    zoo = kind.build(folder)
    signature = OnnxModel(zoo.path).signature
    x_sample, held_sample = signature.split(zoo.inputs)
    sample = held_sample if signature.has_held else None
    rng = np.random.default_rng(seed)
    reference, _ = draw_events(x_sample, sample, REFERENCE_EVENTS, rng)
    x, held = draw_events(x_sample, sample, events, rng)
    return Built(kind, zoo.path, x, held, sample, Standardizer.fit(reference))


def bound_session(model: OnnxModel) -> ort.InferenceSession:
    """onnxruntime on the model file as the monitor loads it (ZipMap exposed) but with its own inputs; a fixed batch
    the monitor made free is made free here the same way."""
    raw, _, _, signature = prepare(model.path.read_bytes(), "auto", str(model.path))
    fixed = signature.fixed_batch
    if fixed is not None:
        if model._run_batch is not None:
            raise SystemExit(f"{model.path.name}: the monitor kept its fixed batch of {fixed}; no bound for it here")
        proto = onnx.load_from_string(raw)
        for vi in (*proto.graph.input, *proto.graph.output):
            dims = vi.type.tensor_type.shape.dim
            if dims and dims[0].HasField("dim_value") and dims[0].dim_value == fixed:
                dims[0].dim_param = "batch"
        taken = {i.name for i in proto.graph.initializer}
        taken |= {t for n in proto.graph.node for t in (*n.input, *n.output)}
        free_reshapes(proto.graph, fixed, fresh_namer(taken))
        raw = proto.SerializeToString()
    return ort.InferenceSession(raw, sess_options=session_options(model.options), providers=model.providers)


def bound_feeds(scorer: RobustnessScorer, model: OnnxModel, x: NDArray[np.float32], held: Held | None) -> list[Feed]:
    """The model's own inputs for the rows a ``score(x, held)`` call evaluates, one feed per run of the scorer."""
    b, m, k = x.shape[0], scorer.ball_size, scorer.config.flicker_copies
    rows = scorer.build_rows(x).copy()  # centres, ball points (event-major), flicker copies
    stacked = None
    if held is not None:
        stacked = Held.concat([held, held.repeat(m)] + ([held.repeat(k)] if k else []))
    runs: list[NDArray[np.intp]] = []
    evaluator = scorer._neighbourhood
    if evaluator is not None:  # whole events per run: each run's centres, their ball points, their copies
        for e0, e1 in evaluator.chunks(b):
            runs.append(
                np.concatenate(
                    [
                        np.arange(e0, e1),
                        b + np.arange(e0 * m, e1 * m),
                        b * (1 + m) + np.arange(e0 * k, e1 * k),
                    ]
                )
            )
    else:  # OnnxModel.evaluate: runs of max_rows_per_run rows of the stacked layout
        step, total = model.options.max_rows_per_run, rows.shape[0]
        runs = [np.arange(i, min(i + step, total)) for i in range(0, total, step)]
    return [model.signature.feeds(rows[idx], None if stacked is None else stacked.take(idx)) for idx in runs]


def run_feeds(session: ort.InferenceSession, names: list[str], feeds: list[Feed]) -> None:
    for feed in feeds:
        session.run(names, feed)


def measure(built: Built, threads: int, args: argparse.Namespace) -> list[Row]:
    options = replace(OnnxRuntimeOptions(), intra_op_threads=threads)
    model = OnnxModel(built.path, options)
    scorer = RobustnessScorer(model, built.standardizer, ScoringConfig(), held_sample=built.held_sample)
    session, names = bound_session(model), model._run_names
    rows: list[Row] = []
    for b in args.batch_sizes:
        x = built.x[:b]
        held = None if built.held is None else built.held.take(slice(0, b))
        scorer.score(x, held)  # a model with held values checks its neighbourhood graph on the first batch
        feeds = bound_feeds(scorer, model, x, held)
        s_score, s_bound = timed_rounds(
            [partial(scorer.score, x, held), partial(run_feeds, session, names, feeds)],
            args.min_repeats,
            args.min_seconds,
        )
        t_score, t_bound = statistics.median(s_score), statistics.median(s_bound)
        paired = statistics.median(b_ / s_ for s_, b_ in zip(s_score, s_bound, strict=True))
        rows.append(
            Row(
                built.kind,
                model.signature.describe(),
                scorer.rows_per_event(),
                scorer.rows_built_in_graph,
                threads,
                b,
                b / t_score,
                b / t_bound,
                paired,
            )
        )
        print(
            f"  {built.kind.key} threads={threads} B={b}: {b / t_score:,.0f} vs {b / t_bound:,.0f} "
            f"(paired {paired:.3f}, rows in graph {scorer.rows_built_in_graph})",
            flush=True,
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    keys = ",".join(k.key for k in KINDS)
    ap.add_argument("--models", default=keys, help=f"comma list of {keys}")
    add_cell_flags(ap, batch_sizes="256,1024")
    ap.add_argument("--min-seconds", type=float, default=2.0, help="minimum timing per (model, threads, B) cell")
    ap.add_argument("--min-repeats", type=int, default=11)
    ap.add_argument(
        "--runs",
        type=int,
        default=1,
        help="time every (model, threads, B) cell this many times, the cells in turn; with 2 or more a verdict "
        "table judges each cell's paired ratios against --target (bench/verdict.py)",
    )
    ap.add_argument("--target", type=float, default=0.8, help="the scorer / bound target the verdict judges")
    ap.add_argument("--seed", type=int, default=0, help="seed of the events drawn around the sample inputs")
    args = ap.parse_args(argv)
    chosen = args.models.split(",")
    unknown = [k for k in chosen if k not in {kind.key for kind in KINDS}]
    if unknown:
        ap.error(f"unknown model kinds {unknown}; choose from {keys}")
    if args.runs < 1:
        ap.error(f"--runs must be at least 1; got {args.runs}")
    tune_malloc()
    print(f"machine: {machine('numpy', 'onnxruntime', 'sklearn', 'lightgbm', 'xgboost', 'onnxmltools')}", flush=True)

    table: list[Row] = []
    repeats: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        built = [build(k, Path(tmp), max(args.batch_sizes), args.seed) for k in KINDS if k.key in chosen]
        for run in range(args.runs):
            if run:
                print(f"run {run + 1} of {args.runs}", flush=True)
            for b in built:
                for threads in args.threads:
                    (repeats if run else table).extend(measure(b, threads, args))

    thr = {0: "default"}
    print(
        "\n| model | inputs | rows / event | rows in graph | intra-op threads | B | scorer events/s | bound events/s "
        "| scorer / bound | scorer / bound, paired |"
    )
    print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in table:
        print(
            f"| {r.kind.label} | {r.inputs} | {r.rows_per_event} | {'yes' if r.in_graph else 'no'} "
            f"| {thr.get(r.threads, r.threads)} | {r.batch} | {r.scorer_eps:,.0f} | {r.bound_eps:,.0f} "
            f"| {r.scorer_eps / r.bound_eps:.2f} | {r.paired_ratio:.2f} |"
        )
    if args.runs > 1:
        cells = ((r.kind.label, r.threads, r.batch, r.paired_ratio) for r in table + repeats)
        print_cell_verdicts(cells, args.target, args.runs)
    print(
        f"\n(events/s; rows / event = 1 centre + m ball points + 32 flicker copies; max_rows_per_run "
        f"{OnnxRuntimeOptions().max_rows_per_run:,}; the bound on the model's own inputs, fed as signature.feeds builds "
        "them)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
