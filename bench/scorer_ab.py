"""A/B of the scorer's post-processing: another checkout's ``monitor/metrics/scorer.py`` against this one's.

Loads the other checkout's scorer module beside this one's (every other module — the model wrapper, the wrapped
graph — is this checkout's, so only what the scorer does around ``session.run`` differs), checks that both give
bit-identical results on a few batches, then times both and the bound (``session.run`` on the very rows, in the
scorer's chunks) interleaved round by round (``engine_throughput.timed_rounds``). µs per event, ratio of medians
and the paired ratio, as in ``bench/engine_throughput.py``. Changes outside scorer.py (e.g. ``argmax_rows`` in
monitor/model/onnx.py) are in both sides, so they do not show here.

    git worktree add /tmp/old <commit>
    .venv/bin/python bench/scorer_ab.py --old /tmp/old --models mlp,lr,gb --batch 256 --threads 1
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
from functools import partial
from pathlib import Path

import numpy as np
from engine_throughput import N_FEATURES, SPECS, run_chunks, timed_rounds, train
from machine import machine  # bench/machine.py: the script's folder is on sys.path
from sklearn.datasets import make_classification

from monitor.allocator import tune_malloc
from monitor.metrics import scorer as new_scorer
from monitor.model.onnx import OnnxModel, OnnxRuntimeOptions
from monitor.model.standardize import Standardizer

FIELDS = ("gamma", "gamma_logit", "p_adj", "flicker", "probability", "predicted_class", "valid")


def load_old(checkout: Path) -> object:
    spec = importlib.util.spec_from_file_location("old_scorer", checkout / "monitor" / "metrics" / "scorer.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_scorer"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--old", type=Path, required=True, help="the other checkout (a git worktree)")
    ap.add_argument("--models", default="mlp,lr,gb")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=15.0, help="minimum timing per model")
    args = ap.parse_args()
    tune_malloc()
    old = load_old(args.old)
    print(f"machine: {machine('numpy', 'onnxruntime')}")
    print(f"command: .venv/bin/python bench/scorer_ab.py {' '.join(sys.argv[1:])}")
    x, y = make_classification(n_samples=6000, n_features=N_FEATURES, n_informative=10, random_state=0)
    standardizer = Standardizer.fit(x[:4000])
    pool = x[4000:]  # float64, as the pipeline hands the scorer its rows
    b = args.batch
    print(
        "\n| model | B | old µs/event | new µs/event | bound µs/event | old ÷ bound (paired) | new ÷ bound (paired) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for key in args.models.split(","):
            spec = next(s for s in SPECS if s.key == key)
            path = train(spec, spec.make(), x[:4000], y[:4000], Path(tmp))
            options = OnnxRuntimeOptions(intra_op_threads=args.threads)
            a = old.RobustnessScorer(OnnxModel(path, options), standardizer, old.ScoringConfig())  # type: ignore[attr-defined]
            n = new_scorer.RobustnessScorer(OnnxModel(path, options), standardizer, new_scorer.ScoringConfig())
            for i in range(5):
                rows = pool[i * b : (i + 1) * b]
                ra, rn = a.score(rows), n.score(rows)
                for field in FIELDS:
                    assert np.array_equal(getattr(ra, field), getattr(rn, field), equal_nan=True), (key, field)
            batch = pool[:b]
            per = n.rows_per_event()
            built = n.build_rows(batch.astype(np.float32)).copy()
            assert n._neighbourhood is not None
            model = n.model
            assert isinstance(model, OnnxModel)
            feeds = [{model.input_name: built[e0 * per : e1 * per]} for e0, e1 in n._neighbourhood.chunks(b)]
            bound = partial(run_chunks, model._session, model._run_names, feeds)
            s_old, s_new, s_bound = timed_rounds(
                [partial(a.score, batch), partial(n.score, batch), bound], 20, args.seconds
            )
            t_bound = statistics.median(s_bound)

            def cell(samples: list[float], t_bound: float = t_bound, s_bound: list[float] = s_bound) -> str:
                paired = statistics.median(tb / ts for ts, tb in zip(samples, s_bound, strict=True))
                return f"{t_bound / statistics.median(samples):.3f} ({paired:.3f})"

            us = [statistics.median(s) / b * 1e6 for s in (s_old, s_new, s_bound)]
            print(f"| {spec.label} | {b} | {us[0]:.3f} | {us[1]:.3f} | {us[2]:.3f} | {cell(s_old)} | {cell(s_new)} |")
    print("\n(results checked bit-identical on 5 batches before timing)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
