"""Where the scorer's time goes (issue 2): µs per event of each step of ``RobustnessScorer.score``, beside the bound.

For one model of ``bench/engine_throughput.py`` and one batch size, the script wraps the scorer's steps with timers
and scores the same batch repeatedly (after warm-up), reporting µs per event for: the wrapped graph's evaluation
(``NeighbourhoodEvaluator.evaluate``), the bank refresh, class indices, picking f at the class, the γ means and the
log-floor, and the whole ``score``; and, timed alone, the bound (``session.run`` on the very rows, in the scorer's
chunks). ``--pollute`` runs a single ``session.run`` of all the batch's rows before every ``score`` (what the 1-run
bound did to the scorer when it ran beside it). ``--broadcast`` also times, for 256 events of 20 features and 42
ball points, a broadcasting Add [B,1,n] + [1,m,n] against an Expand followed by an Add over rows of m·n values;
``--scalar`` times ``Sub(1, p)`` on a [N, 1] column with the constant of rank 0 and of shape [1, 1].
``--post`` times the numpy post-processing (``_score_valid`` on outputs already computed) right after the run that
produced them and again on the same outputs.
``--nodes`` runs onnxruntime's profiler on the bound's session and on the scorer's wrapped graph, and prints each node's
median kernel time per run (µs) beside the median of the whole run: where a run's time goes, node by node.
``--affine`` times, interleaved call by call in a rotating order, the bound and two scorers of the same model: with
the first affine layer on the centres only (``affine_input``, the default) and without that rewrite (every row
multiplied). ``--binary SECONDS`` does the same for a binary classifier read from p alone (``binary_positive``)
against the [1 − p, p] table.

Run with ``HARMONIC_MALLOC_TUNING=0`` to see the steps without the sidecar's malloc settings.

    .venv/bin/python bench/engine_breakdown.py --model mlp --batch 1024 --threads 1
    .venv/bin/python bench/engine_breakdown.py --model mlp --batch 1024 --threads 1 --pollute
    .venv/bin/python bench/engine_breakdown.py --model lr --batch 256 --broadcast
    .venv/bin/python bench/engine_breakdown.py --model mlp --batch 256 --scalar
    .venv/bin/python bench/engine_breakdown.py --model mlp --batch 256 --threads 1 --affine
    .venv/bin/python bench/engine_breakdown.py --model mlp --batch 256 --threads 0 --nodes
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from engine_throughput import N_FEATURES, SPECS, timed_rounds, train
from machine import machine  # bench/machine.py: the script's folder is on sys.path
from numpy.typing import NDArray
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import make_classification

import monitor.metrics.scorer as scorer_module
import monitor.model.neighbourhood as neighbourhood_module
from monitor.allocator import tune_malloc
from monitor.metrics.scorer import RobustnessScorer, ScoringConfig
from monitor.model.onnx import OnnxModel, OnnxRuntimeOptions
from monitor.model.standardize import Standardizer


def timed(target: Any, name: str, totals: dict[str, float]) -> None:
    """Replace ``target.name`` with a wrapper adding its wall time to ``totals[name]``."""
    real = getattr(target, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            totals[name] = totals.get(name, 0.0) + time.perf_counter() - t0

    setattr(target, name, wrapper)


def bound_rows(
    scorer: RobustnessScorer, batch: NDArray[np.float32]
) -> tuple[NDArray[np.float32], list[NDArray[np.float32]]]:
    """The rows ``scorer`` evaluates for ``batch`` (a copy of ``build_rows``; it draws the batch's noise as ``score``
    does) and those rows cut into the scorer's runs: what the bound runs."""
    assert scorer._neighbourhood is not None, "the breakdown times the in-graph path"
    rows = scorer.build_rows(batch).copy()
    per_event = scorer.rows_per_event()
    chunks = scorer._neighbourhood.chunks(batch.shape[0])
    return rows, [rows[e0 * per_event : e1 * per_event] for e0, e1 in chunks]


def median_us(fn: Callable[[], object], b: int, repeats: int) -> float:
    fn()
    fn()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) / b * 1e6


def rewrite_ab(
    path: Path,
    fitted: Standardizer,
    threads: int,
    batch: NDArray[np.float32],
    seconds: float,
    *,
    target: Any,
    name: str,
    labels: tuple[str, str],
) -> list[str]:
    """The scorer with and without one of the wrapped graph's rewrites (``target.name`` returning None turns it off:
    ``affine_input`` for the first-layer rewrite, ``OnnxModel._binary_positive`` for the binary p), against the
    bound, interleaved call by call in an order that rotates every round."""
    options = OnnxRuntimeOptions(intra_op_threads=threads)
    with_rewrite = RobustnessScorer(OnnxModel(path, options), fitted, ScoringConfig())
    real = getattr(target, name)
    setattr(target, name, lambda *args: None)
    try:
        plain_model = OnnxModel(path, options)
        without = RobustnessScorer(plain_model, fitted, ScoringConfig())
    finally:
        setattr(target, name, real)
    assert with_rewrite._neighbourhood is not None and without._neighbourhood is not None
    lines = [
        f"noise as the graphs take it: {with_rewrite._neighbourhood.noise_width or 'raw'} wide (rewrite), "
        f"{without._neighbourhood.noise_width or 'raw'} (none)",
        "",
        f"| scorer with or without the rewrite: {labels[0]} (default) or {labels[1]} | µs/event | ÷ bound | paired |",
        "|---|---:|---:|---:|",
    ]
    b = batch.shape[0]
    # a scorer of the same model of its own draws the rows, so that ``without``'s noise stream is left as it was
    _, feeds = bound_rows(RobustnessScorer(plain_model, fitted, ScoringConfig()), batch)
    session, names, inp = plain_model._session, plain_model._run_names, plain_model.input_name
    calls: dict[str, Callable[[], object]] = {
        "bound (session.run on the rows)": lambda: [session.run(names, {inp: chunk}) for chunk in feeds],
        f"scorer, {labels[0]} (default)": lambda: with_rewrite.score(batch),
        f"scorer, {labels[1]}": lambda: without.score(batch),
    }
    # the order rotates round by round (timed_rounds): a fixed order would always run the same scorer right after
    # the bound, whose session's threads and caches it inherits
    samples = dict(zip(calls, timed_rounds(list(calls.values()), 11, seconds), strict=True))
    bound = samples["bound (session.run on the rows)"]
    for key, times in samples.items():
        paired = statistics.median(x / y for x, y in zip(bound, times, strict=True))
        lines.append(
            f"| {key} | {statistics.median(times) / b * 1e6:.2f} | "
            f"{statistics.median(bound) / statistics.median(times):.3f} | {paired:.3f} |"
        )
    return lines


def post_processing(scorer: RobustnessScorer, batch: NDArray[np.float32], repeats: int) -> list[str]:
    """The numpy work after the wrapped graph's run (``_score_valid`` on outputs already computed), timed right after
    the run that produced them and then again on the same outputs: what the caches left by the run cost it."""
    nb = scorer._neighbourhood
    assert nb is not None, "the breakdown times the in-graph path"
    real_evaluate, real_after = nb.evaluate, scorer._after_batch
    b = batch.shape[0]
    cold: list[float] = []
    warm: list[float] = []
    try:
        scorer._after_batch = lambda b: None  # type: ignore[method-assign]  # the refresh is timed on its own
        for i in range(repeats + 3):
            out = real_evaluate(batch, scorer_module._take(scorer._bank_fed, scorer._noise_pick(b)))
            nb.evaluate = lambda *_args, _out=out: _out  # type: ignore[method-assign]
            t0 = time.perf_counter()
            scorer._score_valid(batch)
            t1 = time.perf_counter()
            scorer._score_valid(batch)
            t2 = time.perf_counter()
            nb.evaluate = real_evaluate  # type: ignore[method-assign]
            if i >= 3:  # warm-up
                cold.append(t1 - t0)
                warm.append(t2 - t1)
    finally:
        nb.evaluate, scorer._after_batch = real_evaluate, real_after  # type: ignore[method-assign]
    return [
        f"| post-processing right after the run | {statistics.median(cold) / b * 1e6:.3f} |",
        f"| the same, again on the same outputs | {statistics.median(warm) / b * 1e6:.3f} |",
    ]


class ProfiledModel(OnnxModel):
    """An :class:`OnnxModel` whose sessions — the model's own and the wrapped graph ``neighbourhood`` builds — write
    onnxruntime's profile (JSON) under ``prefix``; otherwise the options the scorer runs with."""

    def __init__(self, path: Path, options: OnnxRuntimeOptions, prefix: str) -> None:
        self.prefix = prefix  # before the sessions: OnnxModel.__init__ creates the model's own
        super().__init__(path, options)

    def _session_options(self) -> ort.SessionOptions:
        options = super()._session_options()
        options.enable_profiling = True
        options.profile_file_prefix = self.prefix
        return options


def node_times(profile: str, skip: int) -> tuple[float, dict[tuple[str, str], float]]:
    """The median ``model_run`` (µs) and each node's median kernel time per run (µs) of an onnxruntime profile,
    leaving out the first ``skip`` runs (warm-up)."""
    with open(profile, encoding="utf-8") as fh:
        events = json.load(fh)
    runs = [e["dur"] for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
    per_node: dict[tuple[str, str], list[float]] = {}
    for e in events:
        if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
            key = (str(e.get("args", {}).get("op_name", "?")), e["name"][: -len("_kernel_time")])
            per_node.setdefault(key, []).append(e["dur"])
    # a node runs once per model_run: its i-th time belongs to the i-th run
    medians = {key: statistics.median(times[skip:] or times) for key, times in per_node.items()}
    return statistics.median(runs[skip:] or runs), medians


def nodes(path: Path, threads: int, fitted: Standardizer, batch: NDArray[np.float32], repeats: int) -> list[str]:
    """onnxruntime's profiler on the bound (the model's session, on the rows in the scorer's chunks) and on the
    scorer's wrapped graph (``score`` calls), each node's median kernel time per run."""
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        model = ProfiledModel(path, OnnxRuntimeOptions(intra_op_threads=threads), str(Path(tmp) / "ort"))
        scorer = RobustnessScorer(model, fitted, ScoringConfig())
        assert scorer._neighbourhood is not None, "the breakdown times the in-graph path"
        chunks = scorer._neighbourhood.chunks(batch.shape[0])
        _, feeds = bound_rows(scorer, batch)
        session, names, inp = model._session, model._run_names, model.input_name
        warm_up = 3
        for _ in range(warm_up + repeats):
            for chunk in feeds:
                session.run(names, {inp: chunk})
            scorer.score(batch)
        wrapped = scorer._neighbourhood._runner._session
        sizes = sorted({e1 - e0 for e0, e1 in chunks})
        size = "/".join(str(s) for s in sizes)
        for label, sess in (("bound: the model on the rows", session), ("the scorer's wrapped graph", wrapped)):
            # the first run of each is OnnxModel.neighbourhood's check of the wrapped graph against the model
            run, per_node = node_times(sess.end_profiling(), 1 + warm_up * len(chunks))
            lines += [
                "",
                f"{label}: {len(per_node)} nodes, run of {size} events: {run:.0f} µs (median); "
                f"node kernel times sum to {sum(per_node.values()):.0f} µs",
                "",
                "| node | op | µs per run (median) |",
                "|---|---|---:|",
            ]
            for (op, name), us in sorted(per_node.items(), key=lambda item: -item[1]):
                lines.append(f"| {name} | {op} | {us:.0f} |")
    return lines


def broadcast(threads: int, repeats: int) -> None:
    b, m, n = 256, 42, N_FEATURES
    rng = np.random.default_rng(0)
    centres = rng.random((b, n), dtype=np.float32)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    x = helper.make_tensor_value_info("C", TensorProto.FLOAT, [b, n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    axis = numpy_helper.from_array(np.array([1], np.int64), "axis")
    offsets3 = numpy_helper.from_array(rng.random((1, m, n), dtype=np.float32), "offsets3")
    offsets2 = numpy_helper.from_array(rng.random((1, m * n), dtype=np.float32), "offsets2")
    shape = numpy_helper.from_array(np.array([1, m, n], np.int64), "shape")
    flat = numpy_helper.from_array(np.array([-1, m * n], np.int64), "flat")
    graphs = {
        "broadcast Add [B,1,n] + [1,m,n]": (
            [helper.make_node("Unsqueeze", ["C", "axis"], ["c3"]), helper.make_node("Add", ["c3", "offsets3"], ["y"])],
            [axis, offsets3],
        ),
        "Expand, then Add over m·n-value rows": (
            [
                helper.make_node("Unsqueeze", ["C", "axis"], ["c3"]),
                helper.make_node("Expand", ["c3", "shape"], ["e"]),
                helper.make_node("Reshape", ["e", "flat"], ["e2"]),
                helper.make_node("Add", ["e2", "offsets2"], ["y"]),
            ],
            [axis, offsets2, shape, flat],
        ),
    }
    for label, (nodes, inits) in graphs.items():
        model = helper.make_model(
            helper.make_graph(nodes, "g", [x], [y], initializer=inits),
            opset_imports=[helper.make_opsetid("", 17)],
            ir_version=8,
        )
        session = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        per_call = median_us(partial(session.run, ["y"], {"C": centres}), 1, repeats)
        print(f"| {label} | {per_call:.1f} µs per call of {b} events |")


def scalar(threads: int, repeats: int) -> None:
    """``Sub(1, p)`` on a [N, 1] column (skl2onnx's negative-class probability) with the 1 of rank 0 and of rank 2."""
    n = 218 * 42  # one chunk of ball points of the MLP
    p = np.random.default_rng(0).random((n, 1), dtype=np.float32)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    for label, value in (("rank 0 (as skl2onnx writes it)", np.float32(1.0)), ("rank 2, [1, 1]", np.ones((1, 1)))):
        graph = helper.make_graph(
            [helper.make_node("Sub", ["one", "p"], ["y"])],
            "g",
            [helper.make_tensor_value_info("p", TensorProto.FLOAT, ["N", 1])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])],
            initializer=[numpy_helper.from_array(np.asarray(value, dtype=np.float32), "one")],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        session = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        per_call = median_us(partial(session.run, ["y"], {"p": p}), 1, repeats)
        print(
            f"| Sub(1, p), the 1 of {label} | {per_call:.1f} µs per call of {n} rows ({per_call / n * 1e3:.2f} ns/row) |"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--model", choices=[s.key for s in SPECS], default="mlp")
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads (0 = onnxruntime's default)")
    ap.add_argument("--repeats", type=int, default=60)
    ap.add_argument("--pollute", action="store_true", help="one session.run of all the rows before every score")
    ap.add_argument("--broadcast", action="store_true", help="also time broadcast Add against Expand + Add")
    ap.add_argument("--scalar", action="store_true", help="also time Sub(1, p) with a rank-0 and a [1, 1] constant")
    ap.add_argument("--affine", action="store_true", help="also time the scorer with and without the affine rewrite")
    ap.add_argument(
        "--binary",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="also time the scorer with and without the binary-classifier rewrite (p alone), for SECONDS",
    )
    ap.add_argument(
        "--post",
        action="store_true",
        help="also time the numpy post-processing right after the run and again on the same outputs",
    )
    ap.add_argument(
        "--nodes",
        action="store_true",
        help="also print each node's median kernel time per run (onnxruntime's profiler), bound and wrapped graph",
    )
    args = ap.parse_args()
    malloc = tune_malloc()
    print(f"machine: {machine('numpy', 'onnxruntime', 'sklearn')}; malloc settings applied: {malloc}")
    spec = next(s for s in SPECS if s.key == args.model)
    x, y = make_classification(n_samples=6000, n_features=N_FEATURES, n_informative=12, random_state=0)
    with tempfile.TemporaryDirectory() as tmp:
        path = train(spec, spec.make(), x[:4000], y[:4000], Path(tmp))
        model = OnnxModel(path, OnnxRuntimeOptions(intra_op_threads=args.threads))
        fitted = Standardizer.fit(x[:4000])
        scorer = RobustnessScorer(model, fitted, ScoringConfig())
        batch = x[4000 : 4000 + args.batch].astype(np.float32)
        b = batch.shape[0]
        rows, feeds = bound_rows(scorer, batch)
        session, names, inp = model._session, model._run_names, model.input_name
        bound = median_us(lambda: [session.run(names, {inp: chunk}) for chunk in feeds], b, args.repeats)
        totals: dict[str, float] = {}
        if scorer._neighbourhood is not None:
            timed(scorer._neighbourhood, "evaluate", totals)
        timed(scorer, "_after_batch", totals)
        timed(scorer, "_binary_results", totals)  # a binary classifier whose graph exposes p alone: all of the rest
        for name in ("_centre_classes", "_flips", "_target_pair", "gamma_from_values", "_log_floor"):
            timed(scorer_module, name, totals)
        for _ in range(3):
            scorer.score(batch)
        totals.clear()
        whole = 0.0
        for _ in range(args.repeats):
            if args.pollute:
                session.run(names, {inp: rows})
            t0 = time.perf_counter()
            scorer.score(batch)
            whole += time.perf_counter() - t0
        # (what to turn off: object and attribute, the two sides' labels, seconds) for each A/B asked for
        rewrites: list[tuple[Any, str, tuple[str, str], float]] = []
        if args.affine:
            rewrites.append(
                (neighbourhood_module, "affine_input", ("first layer on the centres", "every row multiplied"), 6.0)
            )
        if args.binary:
            rewrites.append(
                (OnnxModel, "_binary_positive", ("binary classifier read from p", "the [1 − p, p] table"), args.binary)
            )
        rewrite_lines: list[str] = []
        for target, attribute, sides, seconds in rewrites:
            if rewrite_lines:
                rewrite_lines.append("")
            rewrite_lines += rewrite_ab(
                path, fitted, args.threads, batch, seconds, target=target, name=attribute, labels=sides
            )
        post_lines = []
        if args.post:  # a scorer of its own: none of the timers above wrap it
            post_lines = post_processing(RobustnessScorer(model, fitted, ScoringConfig()), batch, args.repeats)
        node_lines = nodes(path, args.threads, fitted, batch, args.repeats) if args.nodes else []
    per = {k: v / args.repeats / b * 1e6 for k, v in totals.items()}
    print(
        f"\n{spec.label}, B = {b}, intra-op threads {args.threads or 'default'}, "
        f"{'after a 1-run of all rows each time' if args.pollute else 'nothing between calls'}; µs per event:\n"
    )
    print("| step | µs/event |\n|---|---:|")
    print(f"| bound: session.run on the rows, same chunks (timed alone) | {bound:.2f} |")
    print(f"| score (whole) | {whole / args.repeats / b * 1e6:.2f} |")
    labels = {
        "evaluate": "wrapped graph (NeighbourhoodEvaluator.evaluate)",
        "_after_batch": "noise-bank refresh",
        "_binary_results": "a binary classifier's scores from P(class 1) (all the steps below, in one)",
        "_centre_classes": "class indices at the centres",
        "_flips": "flicker copies' class flips",
        "_target_pair": "f at the class",
        "gamma_from_values": "γ and γ_logit means",
        "_log_floor": "log-floor",
    }
    for key, label in labels.items():
        if key in per:
            print(f"| {label} | {per[key]:.3f} |")
    if args.broadcast:
        print("\n| row building in onnxruntime | time |\n|---|---:|")
        broadcast(args.threads, args.repeats)
    if args.scalar:
        print("\n| scalar operand (monitor/model/broadcast.py) | time |\n|---|---:|")
        scalar(args.threads, args.repeats)
    if post_lines:
        print("\n| the scorer's numpy work after the run, same batch | µs/event |\n|---|---:|")
        print("\n".join(post_lines))
    if rewrite_lines:
        print("\n" + "\n".join(rewrite_lines))
    if node_lines:
        print("\n".join(node_lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
