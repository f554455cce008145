"""Models as torch exports them: scoring speed of the default (dynamo) export against a free-batch export, and how
far a float16 export's γ stays from its float32 twin's.

The models are the committed fixtures in ``tests/fixtures/torch/`` (``bench/make_torch_fixtures.py`` wrote them with
torch 2.13.0; torch is not needed here): one small CNN on scikit-learn's 8×8 digits exported

- ``cnn_dynamo.onnx`` (+ ``.data``): torch's default ``dynamo=True`` export — external weights, batch fixed at 1,
  ``Reshape(allowzero=1)`` to ``[1, -1]``; the monitor frees the batch at load;
- ``cnn_legacy.onnx``: ``dynamo=False`` with a dynamic batch;
- ``cnn_dynamo.onnx`` with the batch kept at 1 (the rewrite refused on purpose): what a model that cannot be freed
  costs, runs of one row;
- ``cnn_dynamo_fp16.onnx``: the same weights in float16.

Speed: every model is loaded by its absolute path from a fresh temporary working directory (external data must
resolve beside the model, not in the working directory), then ``RobustnessScorer.score`` runs on ``--events``
digits (default ball, 32 flicker copies), the models interleaved (the order reversed every other run),
``--repeats`` times; the table gives the median events/s and the median of the per-run ratios to the free-batch
export run beside it (paired: a machine that other jobs load slows neighbouring runs alike).

Precision: γ of the float16 model against the float32 model's on all 1,797 digits at several radii.

Usage::

    .venv/bin/python bench/torch_exports.py                     # the tables in docs/BENCHMARKS.md
    .venv/bin/python bench/torch_exports.py --events 60 --repeats 1 --radii 0.05
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from machine import machine  # bench/machine.py: the script's folder is on sys.path
from numpy.typing import NDArray
from sklearn.datasets import load_digits

from monitor.model.onnx import OnnxModel
from monitor.model.standardize import Standardizer
from monitor.signals.scorer import RobustnessScorer, ScoringConfig

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "torch"


class _KeptBatch(OnnxModel):
    """The model with its fixed batch kept (the free-batch rewrite refused): rows run one at a time."""

    def _check_free_batch(self, *args: object) -> str | None:
        return "kept on purpose by bench/torch_exports.py"


def _digits() -> NDArray[np.float32]:
    images = np.asarray(load_digits().images, dtype=np.float64)
    rows: NDArray[np.float32] = (images / 16.0).astype(np.float32).reshape(len(images), -1)
    return rows


def speed(events: int, repeats: int) -> list[str]:
    x = _digits()
    standardizer = Standardizer.fit(x)
    rows = x[:events]
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as elsewhere:
        os.chdir(elsewhere)  # external data must resolve beside the model, wherever the sidecar runs
        try:
            models: dict[str, OnnxModel] = {}
            loads: dict[str, float] = {}
            for label, cls, name in (
                ("dynamo=False, free batch", OnnxModel, "cnn_legacy.onnx"),
                ("dynamo=True (default), batch freed at load", OnnxModel, "cnn_dynamo.onnx"),
                ("dynamo=True, batch kept at 1", _KeptBatch, "cnn_dynamo.onnx"),
                ("dynamo=True float16, batch freed at load", OnnxModel, "cnn_dynamo_fp16.onnx"),
            ):
                t0 = time.perf_counter()
                models[label] = cls(FIXTURES / name)
                loads[label] = time.perf_counter() - t0
            scorers = {label: RobustnessScorer(m, standardizer, ScoringConfig()) for label, m in models.items()}
            rates: dict[str, list[float]] = {label: [] for label in scorers}
            for i in range(repeats):
                order = list(scorers.items())
                for label, scorer in order if i % 2 == 0 else order[::-1]:  # no model always runs first
                    t0 = time.perf_counter()
                    scorer.score(rows)
                    rates[label].append(events / (time.perf_counter() - t0))
        finally:
            os.chdir(here)
    base = rates["dynamo=False, free batch"]
    lines = [
        f"{events} digits scored per run, {repeats} interleaved runs per model, loaded from another directory; "
        "'vs free batch': the median over the runs of each run's rate over the free-batch run beside it",
        "",
        "| export | load (s) | events/s (median) | vs free batch |",
        "|---|---:|---:|---:|",
    ]
    for label, values in rates.items():
        paired = statistics.median(v / b for v, b in zip(values, base, strict=True))
        lines.append(f"| {label} | {loads[label]:.2f} | {statistics.median(values):,.0f} | {paired:.2f} |")
    return lines


def precision(radii: list[float]) -> list[str]:
    x = _digits()
    standardizer = Standardizer.fit(x)
    m32 = OnnxModel(FIXTURES / "cnn_dynamo.onnx")
    m16 = OnnxModel(FIXTURES / "cnn_dynamo_fp16.onnx")
    lines = [
        f"γ of the float16 export against its float32 twin, all {len(x)} digits (no flicker copies)",
        "",
        "| radius | median γ (float32) | median abs(Δγ) | max abs(Δγ) | correlation |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in radii:
        config = ScoringConfig(radius=r, flicker_copies=0)
        g32 = RobustnessScorer(m32, standardizer, config).score(x).gamma
        g16 = RobustnessScorer(m16, standardizer, config).score(x).gamma
        diff = np.abs(g16 - g32)
        corr = float(np.corrcoef(g32, g16)[0, 1])
        lines.append(
            f"| {r:g} | {np.median(np.abs(g32)):.1e} | {np.median(diff):.1e} | {diff.max():.1e} | {corr:.2f} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, default=540)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--radii", default="0.5,0.2,0.1,0.05,0.02,0.01")
    args = p.parse_args(argv)
    print(f"machine: {machine('onnxruntime', 'numpy', load=True)}")
    print(f"command: .venv/bin/python bench/torch_exports.py {' '.join(sys.argv[1:])}".rstrip())
    print()
    print("\n".join(speed(args.events, args.repeats)))
    print()
    print("\n".join(precision([float(r) for r in args.radii.split(",")])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
