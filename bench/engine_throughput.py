"""Engine throughput: scored events/s of :class:`RobustnessScorer` against the onnxruntime-alone bound.

For a GradientBoosting (100 trees), an MLP and a logistic-regression classifier on 20 synthetic features, and for
each batch size B, this script measures in ONE process, interleaved repeat by repeat:

- **scorer**: ``B / time(scorer.score(batch))`` — the whole job: build the B·(1+m+K) rows, one ``evaluate``,
  γ, γ_logit, flicker, P_adj;
- **bound**: ``B / time(session.run(rows))`` — onnxruntime alone, on the very rows the job evaluates (a copy of
  ``scorer.build_rows(batch)``: centres, ball points, flicker copies), cut into the scorer's chunks (whole
  events, ``max_rows_per_run // 75`` per run; one ``run`` when they fit), on the model's own session (same
  threads, same outputs);
- **1-run bound**: the same rows in a single ``run`` call whatever their number (what chunking the rows gains),
  timed in a second loop against the bound, not beside the scorer: its large run evicts the caches for whatever
  runs next;
- **naive loops**, timed on a few events: *ORT per event* (one ``session.run`` of that event's 1+m+K rows, numpy
  per event), *ORT per point* (one ``session.run`` per evaluated row) and *sklearn per point* (the original
  estimator's ``predict_proba`` per evaluated row), all computing the same scores;
- **scorer / bound** twice: the ratio of the two medians, and *paired*: the median over rounds of (bound time /
  scorer time) of the same round — on a shared machine whose speed drifts over seconds, the paired ratio is the
  steadier one (a slow spell moves both calls of a round);
- **refresh share**: the scorer's noise-bank refresh alone — one redraw of a 1,024-row block, timed on its own and
  scaled by the share of it a batch owes, B·K/64/1,024 (the batch's noise itself is a view of the bank) — as a
  share of the scorer's time.

The scorer's model builds the ball points and flicker copies inside the graph (``rows_in_graph``, see
``monitor/model/neighbourhood.py``) and runs whole events per ``session.run`` (``max_rows_per_run // 75`` events);
the bound runs the same rows, already built, in the same chunks. ``--rows-in-graph off`` measures the numpy path.
The process applies the sidecar's malloc settings (``monitor/allocator.py``) first, as ``harmonic-monitor`` does.

It prints a markdown table and the machine. Usage::

    .venv/bin/python bench/engine_throughput.py                      # the table in docs/BENCHMARKS.md
    .venv/bin/python bench/engine_throughput.py --batch-sizes 256 --threads 1 --models lr
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np
import onnxruntime as ort
from machine import machine  # bench/machine.py: the script's folder is on sys.path
from numpy.typing import NDArray
from skl2onnx import to_onnx
from sklearn.datasets import make_classification
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier
from verdict import print_cell_verdicts

from monitor.allocator import tune_malloc
from monitor.model.onnx import OnnxModel, OnnxRuntimeOptions
from monitor.model.standardize import Standardizer
from monitor.signals.scorer import BANK_REFRESH_BLOCK, BANK_REFRESH_DIVISOR, RobustnessScorer, ScoringConfig

N_FEATURES = 20
LOG_FLOOR = 1e-7


@dataclass(frozen=True)
class Spec:
    key: str
    label: str
    zipmap: bool  # convert with skl2onnx's default ZipMap output (OnnxModel rewrites it away at load time)
    make: Callable[[], object]


SPECS = (
    Spec(
        "gb",
        "GradientBoosting (100 trees, depth 3)",
        True,
        lambda: GradientBoostingClassifier(n_estimators=100, random_state=0),
    ),
    Spec("mlp", "MLP (20-64-64-2, relu)", False, lambda: MLPClassifier((64, 64), max_iter=300, random_state=0)),
    Spec("lr", "LogisticRegression", False, lambda: LogisticRegression(max_iter=1000)),
)


def train(spec: Spec, est: object, x: NDArray[np.float64], y: NDArray[np.int64], folder: Path) -> Path:
    """Fit ``est`` and write its ONNX conversion (opset 17) to ``folder``."""
    est.fit(x, y)  # type: ignore[attr-defined]
    options = None if spec.zipmap else {id(est): {"zipmap": False}}
    onx = to_onnx(est, x[:1].astype(np.float32), options=options, target_opset=17)
    path = folder / f"{spec.key}.onnx"
    path.write_bytes(onx.SerializeToString())
    return path


def median_times(fns: list[Callable[[], object]], min_repeats: int, min_seconds: float) -> list[float]:
    """Median wall time of each fn (see :func:`timed_rounds`)."""
    return [statistics.median(s) for s in timed_rounds(fns, min_repeats, min_seconds)]


def timed_rounds(fns: list[Callable[[], object]], min_repeats: int, min_seconds: float) -> list[list[float]]:
    """Wall times of each fn, round by round, calling them interleaved (so drift in the machine hits all alike).

    The order rotates every round: each fn follows each other fn equally often, so none always runs right after
    the one that evicts the caches (the 1-run bound touches the most memory). ``samples[i][r]`` is fn i in round r.
    """
    for fn in fns:  # warm-up: allocations, onnxruntime's first-run arenas
        fn()
        fn()
    samples: list[list[float]] = [[] for _ in fns]
    start = time.perf_counter()
    rounds = 0
    while rounds < min_repeats or time.perf_counter() - start < min_seconds:
        for j in range(len(fns)):
            i = (j + rounds) % len(fns)
            t0 = time.perf_counter()
            fns[i]()
            samples[i].append(time.perf_counter() - t0)
        rounds += 1
    return samples


def run_chunks(session: ort.InferenceSession, names: list[str], feeds: list[dict[str, NDArray[np.float32]]]) -> None:
    """``session.run`` on each chunk in turn, as :meth:`OnnxModel.evaluate` does."""
    for feed in feeds:
        session.run(names, feed)


def naive_per_event(
    model: OnnxModel, scorer: RobustnessScorer, centres: NDArray[np.float32], seed: int
) -> NDArray[np.float64]:
    """One session.run per event (its 1+m+K rows), numpy per event. Returns γ per event (for a cross-check)."""
    session, names, inp = model._session, model._run_names, model.input_name  # the scorer's own session
    offsets, noise_scale, k, steps = (
        scorer.offsets,
        scorer._noise_scale,
        scorer.config.flicker_copies,
        scorer.config.steps,
    )
    m = offsets.shape[0]
    rng = np.random.default_rng(seed)
    gammas = []
    for x in centres:
        noise = rng.standard_normal((k, x.shape[0]), dtype=np.float32) * noise_scale + x
        rows = np.vstack([x[None, :], x + offsets, noise])
        labels, proba = session.run(names, {inp: rows})
        c = int(np.argmax(proba[0]))
        f = proba[:, c].astype(np.float64)
        gamma = abs(f[0] - f[1 : 1 + m].mean())
        lp = np.log(np.maximum(f[: 1 + m], LOG_FLOOR))
        p_adj = f[0] * np.exp(-steps * abs(lp[0] - lp[1:].mean()))
        flicker = float(np.mean(np.argmax(proba[1 + m :], axis=1) != c))
        gammas.append(gamma)
        del p_adj, flicker, labels
    return np.array(gammas)


def naive_per_point(model: OnnxModel, scorer: RobustnessScorer, centres: NDArray[np.float32], seed: int) -> None:
    """One session.run per evaluated row: the centre, each ball point, each flicker copy."""
    session, names, inp = model._session, model._run_names, model.input_name
    offsets, noise_scale, k, steps = (
        scorer.offsets,
        scorer._noise_scale,
        scorer.config.flicker_copies,
        scorer.config.steps,
    )
    rng = np.random.default_rng(seed)
    for x in centres:
        p0 = session.run(names, {inp: x[None, :]})[1][0]
        c = int(np.argmax(p0))
        ball = [float(session.run(names, {inp: (x + o)[None, :]})[1][0, c]) for o in offsets]
        gamma = abs(float(p0[c]) - sum(ball) / len(ball))
        lp = [np.log(max(v, LOG_FLOOR)) for v in ball]
        p_adj = float(p0[c]) * np.exp(-steps * abs(np.log(max(float(p0[c]), LOG_FLOOR)) - sum(lp) / len(lp)))
        flips = 0
        for _ in range(k):
            noisy = x + noise_scale * rng.standard_normal(x.shape[0], dtype=np.float32)
            flips += int(np.argmax(session.run(names, {inp: noisy[None, :]})[1][0]) != c)
        del gamma, p_adj, flips


def naive_sklearn_per_point(est: object, scorer: RobustnessScorer, centres: NDArray[np.float32], seed: int) -> None:
    """The loop a notebook would hold: the original scikit-learn model's predict_proba once per evaluated row."""
    predict = est.predict_proba  # type: ignore[attr-defined]
    offsets, noise_scale, k = scorer.offsets, scorer._noise_scale, scorer.config.flicker_copies
    rng = np.random.default_rng(seed)
    for x in centres:
        p0 = predict(x[None, :])[0]
        c = int(np.argmax(p0))
        ball = [float(predict((x + o)[None, :])[0, c]) for o in offsets]
        flips = sum(
            int(np.argmax(predict((x + noise_scale * rng.standard_normal(x.shape[0]))[None, :])[0]) != c)
            for _ in range(k)
        )
        del ball, flips


@dataclass
class Row:
    label: str
    threads: int
    batch: int
    scorer_eps: float
    bound_eps: float
    one_run_eps: float
    noise_share: float
    paired_ratio: float  # median over rounds of bound time / scorer time


def measure(
    spec: Spec,
    est: object,
    path: Path,
    threads: int,
    data: tuple[Standardizer, NDArray[np.float32]],
    args: argparse.Namespace,
    extras: bool = True,
) -> tuple[list[Row], tuple[float, float, float, float] | None]:
    """Table rows for one (model, threads) pair, and the naive loops' events/s plus the scorer's at the largest B.

    ``extras=False`` (the repeat runs of ``--runs``) times the scorer against the bound only: no 1-run bound (NaN),
    no naive loops (None).
    """
    standardizer, pool = data
    options = OnnxRuntimeOptions(intra_op_threads=threads)
    if args.max_rows is not None:
        options = replace(options, max_rows_per_run=args.max_rows)
    options = replace(options, rows_in_graph=args.rows_in_graph == "on")
    model = OnnxModel(path, options)
    scorer = RobustnessScorer(model, standardizer, ScoringConfig())  # simplex+anti (42 points), K = 32
    session, names, inp = model._session, model._run_names, model.input_name  # the scorer's own session
    n, k = model.n_features, scorer.config.flicker_copies
    rows: list[Row] = []
    per_event = scorer.rows_per_event()
    del n
    for b in args.batch_sizes:
        batch = pool[:b]
        x = scorer.build_rows(batch).copy()  # the very rows the job evaluates
        if scorer._neighbourhood is not None:  # the scorer's runs: whole events, as many as fit, of equal size
            bounds = [(e0 * per_event, e1 * per_event) for e0, e1 in scorer._neighbourhood.chunks(b)]
        else:
            step = model.options.max_rows_per_run
            bounds = [(i, min(i + step, x.shape[0])) for i in range(0, x.shape[0], step)]
        feeds = [{inp: x[r0:r1]} for r0, r1 in bounds]  # the scorer's chunks
        s_score, s_bound, s_noise = timed_rounds(
            [
                partial(scorer.score, batch),
                partial(run_chunks, session, names, feeds),
                partial(scorer._refresh_bank, BANK_REFRESH_BLOCK),  # the scorer's bank refresh, alone
            ],
            args.min_repeats,
            args.min_seconds,
        )
        t_score, t_bound, t_noise = map(statistics.median, (s_score, s_bound, s_noise))
        # the same ratio round by round (the scorer and the bound a few ms apart): a slow spell of the machine
        # longer than a round moves both sides of a pair, not one median
        paired = statistics.median(b_ / s_ for s_, b_ in zip(s_score, s_bound, strict=True))
        # the 1-run bound in a loop of its own: its single run of B·75 rows evicts the caches for whatever runs
        # next, so it would slow the scorer down if it ran beside it
        t_one = math.nan
        if extras:
            _, t_one = median_times(
                [partial(run_chunks, session, names, feeds), partial(session.run, names, {inp: x})],
                args.min_repeats,
                args.min_seconds / 2,
            )
        share = t_noise * (b * k / BANK_REFRESH_DIVISOR / BANK_REFRESH_BLOCK) / t_score  # amortised per batch
        rows.append(Row(spec.label, threads, b, b / t_score, b / t_bound, b / t_one, share, paired))
        print(
            f"  {spec.key} threads={threads} B={b}: {rows[-1].scorer_eps:,.0f} vs {rows[-1].bound_eps:,.0f} "
            f"(paired {paired:.3f})",
            flush=True,
        )
    if not extras:
        return rows, None

    ev, pts = pool[: args.naive_events], pool[: args.naive_point_events]
    (t_event,) = median_times([lambda: naive_per_event(model, scorer, ev, 1)], 3, 0.0)
    (t_point,) = median_times([lambda: naive_per_point(model, scorer, pts, 1)], 1, 0.0)
    (t_skl,) = median_times([lambda: naive_sklearn_per_point(est, scorer, pts, 1)], 1, 0.0)
    # cross-check: the naive loop computes the same γ as the scorer (the ball is deterministic)
    gap = float(np.max(np.abs(naive_per_event(model, scorer, ev, 1) - scorer.score(ev).gamma)))
    assert gap < 1e-5, f"naive loop and scorer disagree on gamma by {gap}"
    return rows, (len(ev) / t_event, len(pts) / t_point, len(pts) / t_skl, rows[-1].scorer_eps)


def times(ratio: float) -> str:
    return f"{ratio:.1f}×" if ratio < 10 else f"{ratio:,.0f}×"


def add_cell_flags(ap: argparse.ArgumentParser, *, batch_sizes: str) -> None:
    """``--batch-sizes`` (default ``batch_sizes``) and ``--threads``: the (intra-op threads, B) cells a scorer
    benchmark times against its bound."""
    ap.add_argument("--batch-sizes", default=batch_sizes, type=lambda v: [int(b) for b in v.split(",")])
    ap.add_argument(
        "--threads",
        default="1,0",
        type=lambda v: [int(t) for t in v.split(",")],
        help="intra_op_threads values, applied to the scorer and the bound alike (0 = onnxruntime's default)",
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--models", default="gb,mlp,lr", help="comma list of gb, mlp, lr")
    add_cell_flags(ap, batch_sizes="64,256,1024")
    ap.add_argument(
        "--max-rows",
        type=int,
        default=None,
        help="max_rows_per_run of the scorer's model (default: OnnxRuntimeOptions')",
    )
    ap.add_argument(
        "--rows-in-graph",
        choices=("on", "off"),
        default="on",
        help="rows_in_graph of the scorer's model: onnxruntime builds ball points and flicker copies (on), or "
        "the scorer builds them in numpy (off)",
    )
    ap.add_argument("--min-seconds", type=float, default=2.0, help="minimum timing per (model, threads, B) cell")
    ap.add_argument("--min-repeats", type=int, default=11)
    ap.add_argument("--naive-events", type=int, default=64, help="events timed in the one-run-per-event loop")
    ap.add_argument("--naive-point-events", type=int, default=4, help="events timed in the one-run-per-point loops")
    ap.add_argument(
        "--runs",
        type=int,
        default=1,
        help="time every (model, threads, B) cell this many times, the cells in turn; runs after the first time the "
        "scorer against the bound only, and a verdict table judges each cell's paired ratios against --target "
        "(bench/verdict.py)",
    )
    ap.add_argument("--target", type=float, default=0.85, help="the scorer / bound target the verdict judges")
    args = ap.parse_args(argv)
    for flag, value in (("--naive-events", args.naive_events), ("--naive-point-events", args.naive_point_events)):
        if value < 1:
            ap.error(f"{flag} must be at least 1 (the naive loops are timed and cross-checked on them); got {value}")
    if args.runs < 1:
        ap.error(f"--runs must be at least 1 (the first run is the table); got {args.runs}")
    tune_malloc()
    specs = [s for s in SPECS if s.key in args.models.split(",")]

    x, y = make_classification(n_samples=6000, n_features=N_FEATURES, n_informative=12, random_state=0)
    x_train, y_train, pool = x[:4000], y[:4000], x[4000:].astype(np.float32)
    data = (Standardizer.fit(x_train), pool)
    print(f"machine: {machine('numpy', 'onnxruntime', 'sklearn')}", flush=True)

    table: list[Row] = []
    naive: list[tuple[str, int, tuple[float, float, float, float]]] = []
    repeats: list[Row] = []  # the --runs after the first
    with tempfile.TemporaryDirectory() as tmp:
        trained = []
        for spec in specs:
            est = spec.make()
            trained.append((spec, est, train(spec, est, x_train, y_train, Path(tmp))))
        for run in range(args.runs):
            if run:
                print(f"run {run + 1} of {args.runs}", flush=True)
            for spec, est, path in trained:
                for threads in args.threads:
                    rows, loops = measure(spec, est, path, threads, data, args, extras=run == 0)
                    (repeats if run else table).extend(rows)
                    if loops is not None:
                        naive.append((spec.label, threads, loops))

    thr = {0: "default"}
    print(
        "\n| model | intra-op threads | B | scorer events/s | bound events/s | scorer / bound "
        "| scorer / bound, paired | 1-run bound events/s | scorer / 1-run bound | refresh share |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in table:
        print(
            f"| {r.label} | {thr.get(r.threads, r.threads)} | {r.batch} | {r.scorer_eps:,.0f} | {r.bound_eps:,.0f} "
            f"| {r.scorer_eps / r.bound_eps:.2f} | {r.paired_ratio:.2f} | {r.one_run_eps:,.0f} "
            f"| {r.scorer_eps / r.one_run_eps:.2f} "
            f"| {r.noise_share:.0%} |"
        )
    big = args.batch_sizes[-1]
    print(
        f"\n| model | intra-op threads | naive ORT 1 run/event | naive ORT 1 run/point | naive sklearn 1 call/point "
        f"| scorer, B={big} | × ORT/event | × ORT/point | × sklearn/point |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, threads, (per_event, per_point, skl, best) in naive:
        print(
            f"| {label} | {thr.get(threads, threads)} | {per_event:,.0f} | {per_point:,.0f} | {skl:,.0f} | {best:,.0f} "
            f"| {times(best / per_event)} | {times(best / per_point)} | {times(best / skl)} |"
        )
    if args.runs > 1:
        cells = ((r.label, r.threads, r.batch, r.paired_ratio) for r in table + repeats)
        print_cell_verdicts(cells, args.target, args.runs)
    chunk = args.max_rows if args.max_rows is not None else OnnxRuntimeOptions().max_rows_per_run
    print(
        "\n(events/s; 75 model rows per event: 1 centre + 42 ball points + 32 flicker copies; "
        f"max_rows_per_run {chunk:,}; rows_in_graph {args.rows_in_graph})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
