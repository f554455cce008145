"""CPU cost of the input tests against the cost of scoring, per event, on the demo model (30 inputs).

Usage: ``python bench/input_tests_cost.py [--events 20000] [--repeats 3]``

Scores ``--events`` demo events once (``RobustnessScorer.score`` at the default settings: what every scored event
costs), then feeds the same batches (100 events, the default ``drift.every``) to two :class:`VerdictEngine` on the demo
reference: one with every input test (per-input KS, the range test, the PCA reconstruction test), one with the
per-input KS alone. Reported: CPU seconds per 1,000 events of scoring, of each engine, and the added input tests'
cost as a share of scoring's. CPU time (``time.process_time``), best of ``--repeats``; building an engine (the PCA
basis, the calibrations: once per segment in the sidecar) is outside the timing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

# as the sidecar runs (``monitor.cli`` sets it before numpy loads): one OpenBLAS thread, else its idle workers spin
# between the small products and their CPU lands in this measure
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from monitor.cli.demo_data import build_demo
from monitor.config import DriftSettings, ModelSettings
from monitor.drift.verdict import VerdictEngine
from monitor.rolling.reference import Reference
from monitor.runtime.models import load_model_runtime

T = TypeVar("T")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = build_demo(Path(tmp), events=args.events, seed=0)
        rt = load_model_runtime(ModelSettings(name="demo", path=data.model_path, reference=data.reference_path))
        assert rt.scorer is not None
        x_ref = np.loadtxt(data.reference_path, delimiter=",")
        rows = np.array([json.loads(line)["features"] for lines in data.phases.values() for line in lines])
    ref_result = rt.scorer.score(x_ref)
    ref = Reference.from_arrays(
        gamma=ref_result.gamma,
        flicker=ref_result.flicker,
        features=x_ref,
        confidence=ref_result.probability,
        margin=ref_result.margin,
    )
    n = rows.shape[0]
    batches = [slice(i, min(i + 100, n)) for i in range(0, n, 100)]

    def best(f: Callable[[T], object], setup: Callable[[], T]) -> float:
        """Best CPU time of ``f(setup())`` over the repeats; ``setup`` (building the engine once, as the sidecar does
        per segment) is not timed."""
        times = []
        for _ in range(args.repeats):
            made = setup()
            t0 = time.process_time()
            f(made)
            times.append(time.process_time() - t0)
        return min(times)

    scorer = rt.scorer
    result = scorer.score(rows)
    scoring = best(lambda _: [scorer.score(rows[b]) for b in batches], lambda: None)

    def feed(settings: DriftSettings, with_range: bool) -> float:
        def build() -> VerdictEngine:
            return VerdictEngine(ref if with_range else replace(ref, feature_low=np.zeros(0)), settings)

        def run(eng: VerdictEngine) -> None:
            for b in batches:
                eng.update(gamma=result.gamma[b], flicker=result.flicker[b], features=rows[b])

        return best(run, build)

    ks_only = feed(DriftSettings(multivariate_detector=False), with_range=False)
    ranged = feed(DriftSettings(multivariate_detector=False), with_range=True)
    every = feed(DriftSettings(), with_range=True)
    per_k = 1000.0 / n
    print(f"{n} events, {x_ref.shape[1]} inputs, batches of 100 (CPU seconds per 1,000 events, best of {args.repeats})")
    print(f"scoring (RobustnessScorer.score):                {scoring * per_k:.4f}")
    print(f"detectors with per-input KS only:                {ks_only * per_k:.4f}")
    print(f"detectors with KS + range:                       {ranged * per_k:.4f}")
    print(f"detectors with KS + range + PCA reconstruction:  {every * per_k:.4f}")
    print(f"range test / scoring:                            {(ranged - ks_only) / scoring:.1%}")
    print(f"PCA reconstruction test / scoring:               {(every - ranged) / scoring:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
