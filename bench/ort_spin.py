"""onnxruntime's spinning threads after a run, on and off (``OnnxRuntimeOptions.spin_after_run``; issue 2).

onnxruntime gives every session its own intra-op thread pool, and by default the pool's threads keep spinning for a
while after ``session.run`` returns. The sidecar runs two sessions per model back to back — the shadow check on the
model's own session (the poll's events with a live prediction, centres only), then the scorer on the wrapped
session — so with two or more intra-op threads the first pool's spinning threads hold cores that the second run
needs. ``session.force_spinning_stop`` (``spin_after_run=False``, the default) stops them when a run returns.

For one model of ``bench/engine_throughput.py``, two copies loaded side by side — spinning after runs (onnxruntime's
default) and stopped (the sidecar's default) — each timed on:

- *sidecar batch*: ``model.evaluate`` of a poll's rows (the shadow check, ``--poll`` rows), then ``scorer.score`` of
  a micro-batch (``--batch`` events) — what ``Pipeline`` does per poll and batch;
- *score*: ``scorer.score`` of the micro-batch alone;
- *bound*: ``session.run`` of the very rows the scorer evaluates, in its chunks, on the model's own session (the
  bound of ``engine_throughput.py``).

Every call is preceded by a ``--gap`` ms sleep, so that what the previous call left spinning has mostly stopped
and each call pays mainly for its own sessions; the process CPU time spent during that sleep
(``time.process_time``, all threads) is the *idle CPU* the previous call left behind: what spinning takes from the
model server beside the sidecar between batches. Idle CPU equal to the whole gap means the spinning may have gone
on into the next call, whichever it was (so it can slow a "stopped" call too). Calls are interleaved, the order
rotating every round; medians.

    .venv/bin/python bench/ort_spin.py --model mlp --threads 0
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
from engine_throughput import N_FEATURES, SPECS, run_chunks, train
from machine import machine  # bench/machine.py: the script's folder is on sys.path
from numpy.typing import NDArray
from sklearn.datasets import make_classification

from monitor.allocator import tune_malloc
from monitor.metrics.scorer import RobustnessScorer, ScoringConfig
from monitor.model.onnx import OnnxModel, OnnxRuntimeOptions
from monitor.model.standardize import Standardizer


def sidecar_batch(
    model: OnnxModel, scorer: RobustnessScorer, poll: NDArray[np.float32], batch: NDArray[np.float32]
) -> object:
    """What the sidecar runs per batch: the shadow check's evaluation of the poll, then the score of the batch."""
    return model.evaluate(poll), scorer.score(batch)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--model", choices=[s.key for s in SPECS], default="mlp")
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads (0 = onnxruntime's default)")
    ap.add_argument("--batch", type=int, default=256, help="events per scorer micro-batch")
    ap.add_argument("--poll", type=int, default=2000, help="rows of the shadow check (the sidecar's max_poll_records)")
    ap.add_argument(
        "--gap",
        type=float,
        default=60.0,
        help="ms of sleep before each call (long enough for spinning threads to stop)",
    )
    ap.add_argument("--rounds", type=int, default=60)
    args = ap.parse_args()
    tune_malloc()
    print(f"machine: {machine('numpy', 'onnxruntime', 'sklearn')}", flush=True)
    spec = next(s for s in SPECS if s.key == args.model)
    x, y = make_classification(n_samples=6000, n_features=N_FEATURES, n_informative=12, random_state=0)
    pool = x[4000:].astype(np.float32)
    batch, poll = pool[: args.batch], np.resize(pool, (args.poll, N_FEATURES))
    calls: dict[str, Callable[[], object]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = train(spec, spec.make(), x[:4000], y[:4000], Path(tmp))
        base = OnnxRuntimeOptions(intra_op_threads=args.threads)
        for label, spin in (("spinning after runs (onnxruntime's default)", True), ("stopped after runs", False)):
            model = OnnxModel(path, replace(base, spin_after_run=spin))
            scorer = RobustnessScorer(model, Standardizer.fit(x[:4000]), ScoringConfig())
            rows, per_event = scorer.build_rows(batch).copy(), scorer.rows_per_event()
            assert scorer._neighbourhood is not None, "the script times the in-graph path"
            feeds = [
                {model.input_name: rows[e0 * per_event : e1 * per_event]}
                for e0, e1 in scorer._neighbourhood.chunks(args.batch)
            ]
            calls[f"sidecar batch, {label}"] = partial(sidecar_batch, model, scorer, poll, batch)
            calls[f"score, {label}"] = partial(scorer.score, batch)
            calls[f"bound, {label}"] = partial(run_chunks, model._session, model._run_names, feeds)
        names = list(calls)
        wall: dict[str, list[float]] = {n: [] for n in names}
        idle: dict[str, list[float]] = {n: [] for n in names}
        for fn in calls.values():  # warm-up
            fn()
            fn()
        previous: str | None = None
        for r in range(args.rounds):
            for j in range(len(names)):
                name = names[(j + r) % len(names)]
                c0 = time.process_time()
                time.sleep(args.gap / 1000)
                if previous is not None:
                    idle[previous].append(time.process_time() - c0)
                t0 = time.perf_counter()
                calls[name]()
                wall[name].append(time.perf_counter() - t0)
                previous = name
    b = args.batch
    print(
        f"\n{spec.label}, intra-op threads {args.threads or 'default'}, B = {b}, shadow check of {args.poll} rows, "
        f"{args.gap:g} ms before each call, {args.rounds} rounds:\n"
    )
    print(
        "| call | onnxruntime threads after a run | ms per call (median) | µs per scored event | idle CPU ms in the next gap |"
    )
    print("|---|---|---:|---:|---:|")
    for name in names:
        what, label = name.split(", ", 1)
        t = statistics.median(wall[name])
        print(f"| {what} | {label} | {t * 1e3:.3f} | {t / b * 1e6:.2f} | {statistics.median(idle[name]) * 1e3:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
