"""Whole-process ``harmonic-monitor score`` against onnxruntime alone, on a 3-class GradientBoosting (100 trees).

Builds the model (20 features, skl2onnx, no ZipMap) and ``--rows`` rows, then per repeat, interleaved:

- **bound**: in this process, onnxruntime alone on the very rows the scorer evaluates (``scorer.build_rows`` of every
  batch of ``--batch-size``, cut into the scorer's own runs, on the model's own session and threads): the time of
  the model evaluations and nothing else;
- **score**: the wall time of ``python -m monitor score --model … --data rows.npy --reference ref.csv --out …`` as a
  subprocess: interpreter start, imports, model load, reference, scoring, CSV writing;
- **startup**: the wall time of ``python -c "from monitor.cli import build_parser; build_parser()"`` (what every
  command pays before its own work).

Ratio = bound / score, per repeat. Usage::

    .venv/bin/python bench/score_process.py --rows 20000 --repeats 3
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

import numpy as np
from machine import machine  # bench/machine.py: the script's folder is on sys.path
from skl2onnx import to_onnx
from sklearn.datasets import make_classification
from sklearn.ensemble import GradientBoostingClassifier

from monitor.model.onnx import OnnxModel, OnnxRuntimeOptions
from monitor.model.standardize import Standardizer
from monitor.signals.scorer import RobustnessScorer, ScoringConfig

REPO = Path(__file__).resolve().parents[1]


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


def bound_seconds(model_path: Path, ref: Path, data: Path, batch: int) -> float:
    model = OnnxModel(model_path, OnnxRuntimeOptions())
    scorer = RobustnessScorer(model, Standardizer.fit(np.loadtxt(ref, delimiter=",")), ScoringConfig())
    x = np.load(data).astype(np.float32)
    per_event = scorer.rows_per_event()
    feeds = []
    for i in range(0, x.shape[0], batch):
        rows = scorer.build_rows(x[i : i + batch]).copy()
        if scorer._neighbourhood is not None:  # the scorer's own runs: whole events, as many as fit
            chunks = scorer._neighbourhood.chunks(rows.shape[0] // per_event)
            feeds += [rows[e0 * per_event : e1 * per_event] for e0, e1 in chunks]
        else:
            step = model.options.max_rows_per_run
            feeds += [rows[r : r + step] for r in range(0, rows.shape[0], step)]
    session, names, inp = model._session, model._run_names, model.input_name
    started = time.perf_counter()
    for rows in feeds:
        session.run(names, {inp: rows})
    return time.perf_counter() - started


def wall(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(
        argv,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=os.environ | {"PYTHONPATH": str(REPO)},
    )
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=1024, help="as `score --batch-size` (its default: 1024)")
    args = ap.parse_args(argv)
    print(f"machine: {machine('numpy', 'onnxruntime', 'sklearn')}; load average {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="hm-score-") as tmp:
        folder = Path(tmp)
        model, ref, data = build(folder, args.rows)
        score = [sys.executable, "-m", "monitor", "score", "--model", str(model), "--data", str(data)]
        score += ["--reference", str(ref), "--batch-size", str(args.batch_size), "--out", str(folder / "o.csv")]
        startup = [sys.executable, "-c", "from monitor.cli import build_parser; build_parser()"]
        ratios, starts = [], []
        for rep in range(args.repeats):
            b = bound_seconds(model, ref, data, args.batch_size)
            s = wall(score)
            st = wall(startup)
            ratios.append(b / s)
            starts.append(st)
            print(
                f"  repeat {rep}: bound {b:.2f} s, score {s:.2f} s (bound ÷ score {b / s:.2f}); startup {st:.2f} s",
                flush=True,
            )
        print(
            f"\n{args.rows:,} rows, B={args.batch_size}: bound ÷ whole-process score, per repeat: "
            + ", ".join(f"{r:.2f}" for r in ratios)
            + f" (median {statistics.median(ratios):.2f}); CLI startup median {statistics.median(starts):.2f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
