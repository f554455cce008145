"""What does a live candidate (``models[].compare_with``) cost the sidecar, against scoring the second model alone?

The target (issue: two models on the same traffic): the candidate costs no more than scoring the second model — one
draw, decoded once, one batch per model. Each round runs the same events through the in-process pipeline (keep-all
sampler, micro-batches of ``--batch`` events) three ways, side by side so that a slow spell of the machine moves all
three: (a) the served model alone, (b) the served model with its candidate, (c) the candidate's scorer alone on the
same rows in the same batches. The ratio is the CPU seconds spent on the candidate inside (b) (its scoring, the
pairing and the paired comparisons: everything ``Scoring`` does for it) over (c); 1.0 means the candidate costs
exactly its scoring. (b) − (a) is printed too: the same thing measured as a difference of two runs, noisier.

(a) and (b) run again with onnxruntime's intra-op threads spinning while they wait for work (its default,
``OnnxRuntimeOptions.spin``; the product sets ``session.intra_op.allow_spinning`` 0): the served model's own CPU and
wall seconds both ways, and the candidate's part with spinning threads over (c).

Usage::

    .venv/bin/python bench/live_candidate.py                  # the figure in docs/BENCHMARKS.md
    .venv/bin/python bench/live_candidate.py --events 2000 --rounds 2   # seconds
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from machine import machine  # bench/machine.py: the script's folder is on sys.path
from sklearn.datasets import make_classification
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.neural_network import MLPClassifier
from verdict import median_ci

import monitor.model.onnx as onnx_module
from monitor.config import Settings, load_settings
from monitor.exporters.prometheus import MetricsState
from monitor.model.convert import convert_estimator
from monitor.runtime.candidate import Candidate
from monitor.runtime.models import load_model_runtime
from monitor.runtime.pipeline import Pipeline
from monitor.runtime.scoring import Scoring
from monitor.runtime.service import build_sampler
from monitor.source.replay import ReplaySource


def _models(tmp: Path, n_features: int) -> tuple[Path, Path, Path, np.ndarray]:
    x, y = make_classification(4000, n_features, n_informative=8, n_classes=3, random_state=0)
    served = convert_estimator(
        GradientBoostingClassifier(n_estimators=50, max_depth=3).fit(x, y), n_features, tmp / "gbdt.onnx"
    )
    cand = convert_estimator(MLPClassifier((64,), max_iter=300, random_state=0).fit(x, y), n_features, tmp / "mlp.onnx")
    ref = tmp / "ref.csv"
    np.savetxt(ref, x[:1000], delimiter=",")
    return Path(served), Path(cand), ref, x


def _settings(tmp: Path, served: Path, cand: Path | None, ref: Path, batch: int) -> Settings:
    models: list[dict[str, object]] = [{"name": "served", "path": str(served), "reference": str(ref)}]
    if cand is not None:
        models.append({"name": "candidate", "path": str(cand), "compare_with": "served"})
    return load_settings(
        None,
        {
            "models": models,
            "sampler": {"events_per_second": 0},
            "batch": {"max_events": batch},
            "probes": {"enabled": False},
            "state_dir": str(tmp / f"state-{time.monotonic_ns()}"),
            "checkpoint_seconds": 3600,
        },
    )


#: CPU seconds spent in the candidates' comparisons (the paired bootstraps), summed over a run
COMPARING = [0.0]
_compare = Candidate.compare


def _timed_compare(self: Candidate) -> None:
    started = time.process_time()
    _compare(self)
    COMPARING[0] += time.process_time() - started


Candidate.compare = _timed_compare  # type: ignore[method-assign]

#: CPU seconds spent on the candidates inside the pipeline (scoring, pairing, comparisons), summed over a run
CANDIDATE = [0.0]
_score_candidate = Scoring._score_candidate


def _timed_score_candidate(self: Scoring, *args: Any) -> None:
    started = time.process_time()
    _score_candidate(self, *args)
    CANDIDATE[0] += time.process_time() - started


Scoring._score_candidate = _timed_score_candidate  # type: ignore[method-assign, assignment]


_session_options = onnx_module.session_options  # type: ignore[attr-defined]


@contextlib.contextmanager
def _spinning() -> Any:
    """The models loaded inside run with onnxruntime's intra-op threads spinning while they wait (its default)."""
    onnx_module.session_options = lambda options: _session_options(dataclasses.replace(options, spin=True))  # type: ignore[attr-defined]
    try:
        yield
    finally:
        onnx_module.session_options = _session_options  # type: ignore[attr-defined]


def _pipeline_cpu(settings: Settings, lines: list[bytes], wall: list[float] | None = None) -> float:
    """CPU seconds of the pipeline over ``lines`` (``wall``: its wall seconds appended)."""
    runtimes = [load_model_runtime(m) for m in settings.models]
    pipeline = Pipeline(settings, ReplaySource(lines), runtimes, build_sampler(settings), state=MetricsState())
    started, wall_started = time.process_time(), time.perf_counter()
    while pipeline.step(0.0):
        pass
    pipeline.flush()
    cpu = time.process_time() - started
    if wall is not None:
        wall.append(time.perf_counter() - wall_started)
    pipeline.close()
    return cpu


def _alone_cpu(settings: Settings, rows: np.ndarray, batch: int, *, after_served: bool) -> float:
    """CPU seconds of the candidate's scorer on ``rows`` in batches (its construction included, as in the pipeline);
    with ``after_served`` each batch is scored on the served model first, untimed, as the pipeline orders them (the
    served session's onnxruntime threads then still spin while the candidate runs)."""
    served, cand = (load_model_runtime(m) for m in settings.models)
    assert served.scorer is not None
    from monitor.signals.scorer import RobustnessScorer

    started = time.process_time()
    scorer = RobustnessScorer(cand.model, served.scorer.standardizer, served.scorer.config)
    spent = time.process_time() - started
    for i in range(0, rows.shape[0], batch):
        if after_served:
            served.scorer.score(rows[i : i + batch])
        started = time.process_time()
        scorer.score(rows[i : i + batch])
        spent += time.process_time() - started
    return spent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--events", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--features", type=int, default=20)
    args = p.parse_args()
    print(f"machine: {machine('onnxruntime', 'sklearn', load=True)}")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        served, cand, ref, x = _models(tmp, args.features)
        rng = np.random.default_rng(1)
        rows = x[rng.integers(0, x.shape[0], args.events)] + rng.normal(0, 0.3, (args.events, args.features))
        now = int(time.time() * 1000)
        lines = [
            json.dumps({"id": f"e{i}", "ts": now + i, "model": "served", "features": rows[i].tolist()}).encode()
            for i in range(args.events)
        ]
        ratios, extra, alone, comparing, inside, beside = [], [], [], [], [], []
        spin_cpu, spin_wall, spun = [], [], []  # the served model's CPU and wall ratios, spinning / not; (b) spinning
        for _ in range(args.rounds):
            walls: list[float] = []
            a = _pipeline_cpu(_settings(tmp, served, None, ref, args.batch), lines, walls)
            with _spinning():
                a_spin = _pipeline_cpu(_settings(tmp, served, None, ref, args.batch), lines, walls)
                CANDIDATE[0] = 0.0
                _pipeline_cpu(_settings(tmp, served, cand, ref, args.batch), lines)
                inside_spin = CANDIDATE[0]
            COMPARING[0] = CANDIDATE[0] = 0.0
            b = _pipeline_cpu(_settings(tmp, served, cand, ref, args.batch), lines)
            comparing.append(COMPARING[0])
            inside.append(CANDIDATE[0])
            c = _alone_cpu(_settings(tmp, served, cand, ref, args.batch), rows, args.batch, after_served=False)
            after = _alone_cpu(_settings(tmp, served, cand, ref, args.batch), rows, args.batch, after_served=True)
            beside.append(inside[-1] / after)
            extra.append(b - a)
            alone.append(c)
            ratios.append(inside[-1] / c)
            spin_cpu.append(a_spin / a)
            spin_wall.append(walls[1] / walls[0])
            spun.append(inside_spin / c)
            print(
                f"served {a:.2f} s ({walls[0]:.2f} s wall; spinning {a_spin:.2f} s, {walls[1]:.2f} s wall), with "
                f"candidate {b:.2f} s (the candidate's part {inside[-1]:.2f} s, comparisons {comparing[-1]:.3f} s; "
                f"spinning {inside_spin:.2f} s), candidate scored alone {c:.2f} s (after the served model "
                f"{after:.2f} s): ratio {inside[-1] / c:.2f} ({inside[-1] / after:.2f})"
            )
        med, lo, hi = np.median(ratios), *median_ci(ratios)
        med2, lo2, hi2 = np.median(beside), *median_ci(beside)
        print(f"{args.events} events, batches of {args.batch}, {args.rounds} rounds")
        print(
            f"the candidate's CPU in the pipeline / its scoring alone: median {med:.2f} [{lo:.2f}, {hi:.2f}] (95 % CI of the median); "
            f"against its scoring after the served model's: {med2:.2f} [{lo2:.2f}, {hi2:.2f}]"
        )
        print(
            f"medians: with − without {np.median(extra):.2f} s; the candidate's part {np.median(inside):.2f} s, of "
            f"which comparisons {np.median(comparing):.3f} s; "
            f"candidate alone {np.median(alone):.2f} s"
        )
        for what, got in (
            ("the served model alone, CPU, spinning / not", spin_cpu),
            ("the served model alone, wall, spinning / not", spin_wall),
            ("the candidate's CPU in the pipeline, spinning, / its scoring alone", spun),
        ):
            print(f"{what}: median {np.median(got):.2f} [{median_ci(got)[0]:.2f}, {median_ci(got)[1]:.2f}]")


if __name__ == "__main__":
    main()
