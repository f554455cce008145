"""Probe overhead (issue: "Probing under the budget does not reduce scored events/s by more than the stated share").

For a classifier on 20 synthetic features, this script replays the same stream of events through the whole sidecar
(:class:`monitor.runtime.service.Service`: decode → shadow check → sample everything → score → windows/drift → probe
scheduler) twice per repeat, interleaved: once with probes **off**, once **on** with a short ``interval_seconds`` so
that the scheduler wakes after almost every micro-batch and probing is limited by the budget alone
(``budget_share`` 0.1 by default). Each run starts from a fresh state dir; the timer covers ``Service.run`` only
(model loading and the one-off reference scoring are outside it).

Reported per mode (medians over the repeats): scored events/s (per wall second and per CPU second of the process),
and for the "on" runs the probe rows as a share of all rows evaluated for events and probes, the number of probe
runs, and the share of wall time the scheduler spent (``ProbeScheduler.busy_seconds``: region bookkeeping after
each batch plus the probe runs). The reduction is ``1 − on/off``; the claim holds when it is ≤ ``budget_share``.
With ``--threads 1`` the process's CPU time tracks its own work, so the CPU-time reduction stays readable on a
machine that other jobs share; the wall-clock one is the claim itself.

Usage::

    .venv/bin/python bench/probe_overhead.py --threads 1 --repeats 7   # the table in docs/BENCHMARKS.md
    .venv/bin/python bench/probe_overhead.py --models lr --events 20000 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from machine import machine  # bench/machine.py: the script's folder is on sys.path
from sklearn.datasets import make_classification
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier

from monitor.config import Settings, load_settings
from monitor.model.convert import convert_estimator
from monitor.runtime.models import load_model_runtime
from monitor.runtime.service import Service
from monitor.source.replay import ReplaySource

N_FEATURES = 20
EVALS = "harmonic_model_evaluations_total"

MODELS: dict[str, tuple[str, Callable[[], Any]]] = {
    "lr": ("LogisticRegression", lambda: LogisticRegression(max_iter=1000)),
    "mlp": ("MLP (20-64-64-2, relu)", lambda: MLPClassifier((64, 64), max_iter=300, random_state=0)),
    "gb": ("GradientBoosting (100 trees, depth 3)", lambda: GradientBoostingClassifier(random_state=0)),
}


@dataclass(frozen=True)
class RunResult:
    events_per_second: float
    cpu_events_per_second: float
    scored: int
    event_rows: float
    probe_rows: float
    probe_runs: float
    probe_seconds: float
    wall_seconds: float


def build(key: str, folder: Path, n_events: int, seed: int) -> tuple[Path, Path, list[bytes]]:
    """Train the model, write its ONNX copy and the reference CSV, and generate the raw events (JSON bytes)."""
    x, y = make_classification(
        n_samples=6000, n_features=N_FEATURES, n_informative=12, class_sep=0.8, random_state=seed
    )
    x_train, y_train = x[:4000], y[:4000]
    est = MODELS[key][1]()
    est.fit(x_train, y_train)
    model_path = convert_estimator(est, N_FEATURES, folder / f"{key}.onnx")
    reference_path = folder / "reference.csv"
    np.savetxt(reference_path, x_train, delimiter=",")
    rng = np.random.default_rng(seed)
    pool = x[4000:]
    rows = pool[rng.integers(0, pool.shape[0], n_events)] + rng.normal(0.0, 0.02, (n_events, N_FEATURES))
    live = est.predict(rows)
    t0 = 1_795_000_000_000
    lines = [
        json.dumps(
            {
                "id": f"e{i}",
                "ts": t0 + 10 * i,
                "model": "bench",
                "features": [round(float(v), 6) for v in rows[i]],
                "prediction": {"label": int(live[i])},
            }
        ).encode()
        for i in range(n_events)
    ]
    return model_path, reference_path, lines


def settings_for(args: argparse.Namespace, model: Path, reference: Path, state_dir: Path, probes: bool) -> Settings:
    return load_settings(
        None,
        {
            "models": [{"name": "bench", "path": str(model), "reference": str(reference), "threads": args.threads}],
            "state_dir": str(state_dir),
            "sampler": {"events_per_second": 0},
            "batch": {"max_events": args.batch},
            "probes": {
                "enabled": probes,
                "interval_seconds": args.interval,
                "budget_share": args.share,
                "regions_per_run": 3,
            },
        },
    )


def run_once(settings: Settings, lines: list[bytes]) -> RunResult:
    source = ReplaySource(lines)
    runtimes = [load_model_runtime(m) for m in settings.models]
    with Service(settings, source, runtimes, serve_metrics=False) as svc:
        state = svc.state
        started, cpu_started = time.perf_counter(), time.process_time()
        svc.run(threading.Event(), until_exhausted=True)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        scored = int(state.counter_sum("harmonic_events_scored_total"))  # a fresh state dir: this run's only
        return RunResult(
            events_per_second=scored / wall,
            cpu_events_per_second=scored / cpu,
            scored=scored,
            event_rows=state.counter(EVALS, ("bench", "events")) + state.counter(EVALS, ("bench", "shadow")),
            probe_rows=state.counter(EVALS, ("bench", "probe")),
            probe_runs=state.counter("harmonic_probe_runs_total", ("bench",)),
            probe_seconds=svc.probes.busy_seconds,
            wall_seconds=wall,
        )


def measure(key: str, args: argparse.Namespace) -> tuple[list[RunResult], list[RunResult]]:
    off: list[RunResult] = []
    on: list[RunResult] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        model, reference, lines = build(key, folder, args.events, args.seed)
        warm = settings_for(args, model, reference, folder / "warm", probes=True)
        run_once(warm, lines[: min(len(lines), 3000)])  # warm-up: imports, onnxruntime arenas, caches
        for rep in range(args.repeats):
            # alternate which mode goes first, so that drift in the machine hits both alike
            order = (False, True) if rep % 2 == 0 else (True, False)
            for probes in order:
                s = settings_for(args, model, reference, folder / f"state-{rep}-{int(probes)}", probes)
                result = run_once(s, lines)
                (on if probes else off).append(result)
                print(
                    f"  {key} repeat {rep + 1}/{args.repeats} probes {'on ' if probes else 'off'}: "
                    f"{result.events_per_second:,.0f} events/s ({result.scored} events, {result.wall_seconds:.1f} s, "
                    f"probe rows {result.probe_rows:,.0f}, runs {result.probe_runs:.0f})",
                    file=sys.stderr,
                    flush=True,
                )
    return off, on


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--models", default="lr,mlp", help=f"comma list of {', '.join(MODELS)} (default lr,mlp)")
    ap.add_argument("--events", type=int, default=40000, help="events per run (default 40000)")
    ap.add_argument("--repeats", type=int, default=5, help="interleaved off/on pairs (default 5)")
    ap.add_argument("--share", type=float, default=0.1, help="probes.budget_share (default 0.1)")
    ap.add_argument("--interval", type=float, default=0.05, help="probes.interval_seconds (default 0.05)")
    ap.add_argument("--batch", type=int, default=256, help="batch.max_events (default 256)")
    ap.add_argument("--threads", type=int, default=0, help="onnxruntime intra-op threads (0 = its default)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    logging.disable(logging.WARNING)  # the pipeline's info logs would time the terminal, not the monitor
    keys = [k for k in args.models.split(",") if k]
    unknown = [k for k in keys if k not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; choose from {sorted(MODELS)}")
    print(f"machine: {machine('numpy', 'onnxruntime', 'sklearn', load=True)}", flush=True)
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}", flush=True)

    rows = []
    for key in keys:
        off, on = measure(key, args)
        off_eps = statistics.median(r.events_per_second for r in off)
        on_eps = statistics.median(r.events_per_second for r in on)
        row_share = statistics.median(r.probe_rows / (r.probe_rows + r.event_rows) for r in on)
        time_share = statistics.median(r.probe_seconds / r.wall_seconds for r in on)
        runs = statistics.median(r.probe_runs for r in on)
        spread = max(r.events_per_second for r in off) / min(r.events_per_second for r in off) - 1.0
        cpu_off = statistics.median(r.cpu_events_per_second for r in off)
        cpu_on = statistics.median(r.cpu_events_per_second for r in on)
        rows.append(
            (
                MODELS[key][0],
                off_eps,
                on_eps,
                1.0 - on_eps / off_eps,
                1.0 - cpu_on / cpu_off,
                row_share,
                time_share,
                runs,
                spread,
            )
        )

    print(
        "\n| model | probes off events/s | probes on events/s | reduction | reduction (CPU time) | budget share "
        "| probe rows / all rows | wall time in scheduler | probe runs | off-run spread |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, off_eps, on_eps, reduction, cpu_reduction, row_share, time_share, runs, spread in rows:
        print(
            f"| {label} | {off_eps:,.0f} | {on_eps:,.0f} | {reduction:.1%} | {cpu_reduction:.1%} | {args.share:.0%} "
            f"| {row_share:.1%} | {time_share:.1%} | {runs:.0f} | {spread:.1%} |"
        )
    print(
        f"\n(medians of {args.repeats} interleaved off/on pairs, {args.events:,} events each, B = {args.batch}, "
        f"probes every {args.interval} s within budget_share {args.share}; reduction (CPU time) uses the process's "
        "CPU seconds instead of wall seconds, which other load on the machine disturbs less; off-run spread = "
        "max/min − 1 of the probes-off wall-clock runs, the noise floor of the reduction)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
