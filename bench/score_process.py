"""Whole-process ``harmonic-monitor score`` against onnxruntime alone on the same rows, with every core.

A 3-class GradientBoosting (100 trees, 20 features, skl2onnx, no ZipMap), ``--rows`` rows scored against 1,000
reference rows at ``--ball simplex+anti`` and 32 flicker copies: 75 model rows per event. Per repeat, interleaved:

- **bound**: in this process, onnxruntime alone on every row the command evaluates — the rows
  ``scorer.build_rows`` makes of each ``--batch-size`` batch of the data, then of the reference rows the yardstick
  scores — cut into the scorer's own runs, on a session of the model with one intra-op thread per CPU this process
  may use (onnxruntime's default SessionOptions otherwise): the model evaluations and nothing else;
- **bound, split**: the same runs, each cut into a part per CPU run at once with one intra-op thread each
  (:class:`monitor.model.split_runs.SplitSession`, how the offline commands now run them);
- **score**: the wall time of ``python -m monitor score …`` as a subprocess: interpreter start, imports, model
  load, reference, scoring, yardstick, CSV writing. Its ``.pyc`` files are written once, before the first repeat, to
  a temporary ``PYTHONPYCACHEPREFIX`` (as an installed package has them; the benchmark's environment may set
  ``PYTHONDONTWRITEBYTECODE``);
- **score, one run at a time**: the same command with ``--threads`` = the CPUs (each run on that many intra-op
  threads, not split: the offline commands before they split their runs);
- **startup**: ``python -c "from monitor.cli import build_parser; build_parser()"`` (what every command pays first).

Ratio = bound ÷ score per repeat, judged against 0.8 (issue 59) by ``bench/verdict.py``: met when the 95 % bootstrap
interval of the median is at or above it (with 3 repeats: every repeat). Usage::

    .venv/bin/python bench/score_process.py --rows 15000 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from machine import machine  # bench/machine.py: the script's folder is on sys.path
from numpy.typing import NDArray
from skl2onnx import to_onnx
from sklearn.datasets import make_classification
from sklearn.ensemble import GradientBoostingClassifier
from verdict import verdict

from monitor.cpus import available_cpus
from monitor.model.split_runs import SplitSession
from monitor.offline.baseline import load_baseline
from monitor.offline.keywords import SEED, scoring_config
from monitor.offline.rows import load_model, read_rows
from monitor.offline.scoring import YARDSTICK_ROWS, robustness_scorer

REPO = Path(__file__).resolve().parents[1]
BALL, COPIES, TARGET = "simplex+anti", 32, 0.8


def build(folder: Path, rows: int) -> tuple[Path, Path, Path]:
    x, y = make_classification(n_samples=rows + 4000, n_features=20, n_informative=10, n_classes=3, random_state=0)
    est = GradientBoostingClassifier(n_estimators=100, random_state=0).fit(x[:3000], y[:3000])
    onx = to_onnx(est, x[:1].astype(np.float32), options={id(est): {"zipmap": False}}, target_opset=17)
    model = folder / "gb3.onnx"
    model.write_bytes(onx.SerializeToString())
    ref, data = folder / "ref.csv", folder / "rows.npy"
    np.savetxt(ref, x[3000:4000], delimiter=",")
    np.save(data, x[4000:])
    return model, ref, data


def runs_of(model_path: Path, ref: Path, data: Path, batch: int) -> tuple[Any, list[NDArray[np.float32]]]:
    """The model and every run of rows ``score`` evaluates: the data's batches, then the yardstick's."""
    model = load_model(model_path)
    base = load_baseline(str(ref), model, None)
    scorer = robustness_scorer(model, base, scoring_config({"ball": BALL, "flicker_copies": COPIES}, base.scales))
    per_event = scorer.rows_per_event()
    assert base.rows is not None and scorer._neighbourhood is not None
    pick = np.random.default_rng(SEED).permutation(len(base.rows))[:YARDSTICK_ROWS]
    feeds = []
    for x in (read_rows(str(data), model).x, base.rows.x[pick]):
        x32 = x.astype(np.float32)
        for i in range(0, x32.shape[0], batch):
            rows = scorer.build_rows(x32[i : i + batch]).copy()
            chunks = scorer._neighbourhood.chunks(rows.shape[0] // per_event)  # the scorer's own runs
            feeds += [rows[e0 * per_event : e1 * per_event] for e0, e1 in chunks]
    return model, feeds


def onnx_seconds(model: Any, feeds: list[NDArray[np.float32]], *, split: bool) -> float:
    """onnxruntime alone on ``feeds``: one intra-op thread per CPU, or a part per CPU on one thread each."""
    cpus = available_cpus()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1 if split else cpus
    session: Any = ort.InferenceSession(model._model_bytes, options, providers=["CPUExecutionProvider"])
    if split and cpus > 1:
        session = SplitSession(session, cpus)
    names, inp = model._run_names, model.input_name
    session.run(names, {inp: feeds[0]})  # first-run allocations outside the time
    started = time.perf_counter()
    for rows in feeds:
        session.run(names, {inp: rows})
    return time.perf_counter() - started


def wall(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--rows", type=int, default=15_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=1024, help="as `score --batch-size` (its default: 1024)")
    args = ap.parse_args(argv)
    cpus = available_cpus()
    print(f"machine: {machine('numpy', 'onnxruntime', 'sklearn', load=True)}; {cpus} CPUs for onnxruntime", flush=True)
    with tempfile.TemporaryDirectory(prefix="hm-score-") as tmp:
        folder = Path(tmp)
        model_path, ref, data = build(folder, args.rows)
        model, feeds = runs_of(model_path, ref, data, args.batch_size)
        rows = sum(f.shape[0] for f in feeds)
        print(f"{args.rows:,} events + yardstick: {rows:,} model rows in {len(feeds)} runs", flush=True)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env |= {"PYTHONPATH": str(REPO), "PYTHONPYCACHEPREFIX": str(folder / "pycache")}
        score = [sys.executable, "-m", "monitor", "score", "--model", str(model_path), "--data", str(data)]
        score += ["--reference", str(ref), "--batch-size", str(args.batch_size), "--out", str(folder / "o.csv")]
        score += ["--ball", BALL, "--flicker-copies", str(COPIES)]
        startup = [sys.executable, "-c", "from monitor.cli import build_parser; build_parser()"]
        wall(startup, env)  # writes the .pyc files
        ratios, split_ratios, starts, before = [], [], [], []
        for rep in range(args.repeats):
            b = onnx_seconds(model, feeds, split=False)
            s = wall(score, env)
            bs = onnx_seconds(model, feeds, split=True)
            s1 = wall([*score, "--threads", str(cpus)], env)
            st = wall(startup, env)
            ratios.append(b / s)
            split_ratios.append(bs / s)
            before.append(b / s1)
            starts.append(st)
            print(
                f"  repeat {rep}: onnxruntime alone {b:.2f} s ({cpus} intra-op threads), {bs:.2f} s (split in "
                f"{cpus}); score {s:.2f} s, one run at a time {s1:.2f} s; bound ÷ score {b / s:.2f} ({bs / s:.2f} "
                f"split; {b / s1:.2f} one run at a time); startup {st:.2f} s; load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        print(
            f"\n{args.rows:,} events, B={args.batch_size}: onnxruntime alone ({cpus} intra-op threads) ÷ whole-process "
            "score, per repeat: " + ", ".join(f"{r:.2f}" for r in ratios) + "; against "
            f"onnxruntime split in {cpus} parts: "
            + ", ".join(f"{r:.2f}" for r in split_ratios)
            + "; one run at a time "
            f"(--threads {cpus}): " + ", ".join(f"{r:.2f}" for r in before) + f"; CLI startup median "
            f"{statistics.median(starts):.2f} s"
        )
        print(f"verdict (bench/verdict.py), onnxruntime alone with {cpus} intra-op threads: {verdict(ratios, TARGET)}")
        print(f"verdict against onnxruntime split in {cpus} parts: {verdict(split_ratios, TARGET)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
