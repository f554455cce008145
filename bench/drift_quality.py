"""Drift detection quality (issue 5): our γ/flicker detectors vs a plain per-feature KS, on river's drift streams.

The streams are river's synthetic generators (``river.datasets.synth``), wrapped in river's
``ConceptDriftStream`` so the drift position is known. For each stream and seed:

1. draw TRAIN events before the drift, fit a scikit-learn ``HistGradientBoostingClassifier`` on them
   (standardized with the training mean/std; that is also the unit of the radii below);
2. draw REF more pre-drift events and compute, with plain numpy around ``predict_proba``,
   γ(x) = |p_c(x) − mean_i p_c(x + r·v_i)| (c = class predicted at x, v_i = ``simplex+anti`` ball,
   r = 0.05) and flicker(x) = share of 32 copies x + 0.05·N(0, I) whose predicted class differs from c;
   they make the :class:`Reference`;
3. stream PRE pre-drift then POST post-drift events through the detectors in batches of BATCH events.
   river switches streams along a sigmoid of width WIDTH centred on the position, so alarms in the
   first PRE − WIDTH events are false alarms, and the delay is the first alarm onset after that,
   counted from the position (to BATCH events).

Detectors: ours at their defaults (``VerdictEngine``: γ CUSUM, γ KS, flicker CUSUM, flicker rate test,
``harmful`` = any of those four, and our per-feature KS ``FeatureDrift``), and a plain per-feature KS:
``scipy.stats.ks_2samp`` on each feature of the last 1000 events every 100 events against the
reference rows, Bonferroni-corrected at 0.01, no effect size.

river is a bench-only dependency (``pip install river``). Usage::

    .venv/bin/python bench/drift_quality.py               # the table in docs/BENCHMARKS.md
    .venv/bin/python bench/drift_quality.py --seeds 2 --streams sea rbf_move
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice

import numpy as np
from machine import machine  # bench/machine.py: the script's folder is on sys.path
from numpy.typing import NDArray
from scipy import stats
from sklearn.ensemble import HistGradientBoostingClassifier

from monitor.drift import VerdictEngine
from monitor.metrics.balls import ball_directions
from monitor.rolling.reference import Reference

try:
    from river.datasets import synth
except ImportError:  # pragma: no cover - bench-only dependency
    sys.exit("bench/drift_quality.py needs river: .venv/bin/pip install river")

TRAIN, REF, PRE, POST = 5000, 5000, 10000, 10000
BATCH = 25
#: river's sigmoid switch: about 2 % of draws come from the new stream WIDTH events before the position
WIDTH = 200
RADIUS, SIGMA, COPIES = 0.05, 0.05, 32
OURS = ("gamma_cusum", "gamma_ks", "flicker_cusum", "flicker_rate", "harmful (any of the 4)", "features_ks (ours)")
BASELINE = "plain per-feature KS"


@dataclass(frozen=True)
class StreamSpec:
    """A river drift stream: what changes at the drift, and how to build it for a seed."""

    title: str
    change: str
    build: Callable[[int, int], Iterable[tuple[dict[object, object], object]]]


def _cds(before: object, after: object, position: int, seed: int) -> Iterable[tuple[dict[object, object], object]]:
    stream: Iterable[tuple[dict[object, object], object]] = synth.ConceptDriftStream(
        stream=before, drift_stream=after, position=position, width=WIDTH, seed=seed
    )
    return stream


STREAMS: dict[str, StreamSpec] = {
    "sea": StreamSpec(
        "SEA variant 0 → 2",
        "concept only: the class threshold moves, inputs do not",
        lambda s, p: _cds(synth.SEA(variant=0, seed=s), synth.SEA(variant=2, seed=s + 1), p, s),
    ),
    "stagger": StreamSpec(
        "STAGGER function 0 → 2",
        "concept only: the labelling rule changes, inputs do not",
        lambda s, p: _cds(synth.STAGGER(0, seed=s), synth.STAGGER(2, seed=s + 1), p, s),
    ),
    "agrawal": StreamSpec(
        "Agrawal function 0 → 2",
        "concept only: the labelling rule changes, inputs do not",
        lambda s, p: _cds(synth.Agrawal(0, seed=s), synth.Agrawal(2, seed=s + 1), p, s),
    ),
    "agrawal_noise": StreamSpec(
        "Agrawal f0, perturbation 0 → 0.5",
        "inputs get noisier (numeric features jittered by up to ±50 % of their range)",
        lambda s, p: _cds(synth.Agrawal(0, seed=s), synth.Agrawal(0, seed=s + 1, perturbation=0.5), p, s),
    ),
    "rbf_move": StreamSpec(
        "RandomRBF → RandomRBFDrift (speed 0.001)",
        "inputs move: the same 50 centroids (labels attached) start drifting, 0.001 per event",
        lambda s, p: _cds(
            synth.RandomRBF(seed_model=s, seed_sample=s, n_features=10),
            synth.RandomRBFDrift(seed_model=s, seed_sample=s + 1, n_features=10, change_speed=0.001),
            p,
            s,
        ),
    ),
    "rbf_new": StreamSpec(
        "RandomRBF model seed s → s+1000",
        "inputs and concept both replaced (new centroids, new labels)",
        lambda s, p: _cds(
            synth.RandomRBF(seed_model=s, seed_sample=s, n_features=10),
            synth.RandomRBF(seed_model=s + 1000, seed_sample=s + 1, n_features=10),
            p,
            s,
        ),
    ),
}


def _arrays(
    stream: Iterable[tuple[dict[object, object], object]], n: int
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    xs, ys = [], []
    for x, y in islice(stream, n):
        xs.append([float(v) for v in x.values()])  # type: ignore[arg-type]
        ys.append(int(y))  # type: ignore[call-overload]
    return np.asarray(xs, dtype=np.float64), np.asarray(ys, dtype=np.int64)


@dataclass
class Scorer:
    """γ and flicker of a fitted classifier, in the training data's standardized units."""

    model: HistGradientBoostingClassifier
    mean: NDArray[np.float64]
    scale: NDArray[np.float64]
    rng: np.random.Generator
    ball: NDArray[np.float64] = field(init=False)

    def __post_init__(self) -> None:
        self.ball = ball_directions("simplex+anti", self.mean.size)

    def score(self, x_raw: NDArray[np.float64], chunk: int = 2000) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        gammas, flickers = [], []
        for i in range(0, x_raw.shape[0], chunk):
            x = (x_raw[i : i + chunk] - self.mean) / self.scale
            b, n = x.shape
            m = self.ball.shape[0]
            around = (x[:, None, :] + RADIUS * self.ball[None, :, :]).reshape(-1, n)
            copies = (x[:, None, :] + SIGMA * self.rng.standard_normal((b, COPIES, n))).reshape(-1, n)
            proba = self.model.predict_proba(np.vstack([x, around, copies]))
            p0 = proba[:b]
            c = p0.argmax(axis=1)
            p_ball = proba[b : b + b * m].reshape(b, m, -1)[np.arange(b), :, c]
            gammas.append(np.abs(p0[np.arange(b), c] - p_ball.mean(axis=1)))
            cls = proba[b + b * m :].argmax(axis=1).reshape(b, COPIES)
            flickers.append((cls != c[:, None]).mean(axis=1))
        return np.concatenate(gammas), np.concatenate(flickers)


class PlainFeatureKs:
    """Baseline: scipy ks_2samp per feature, window 1000 every 100 events, Bonferroni at 0.01, no effect size."""

    def __init__(self, reference: NDArray[np.float64], window: int = 1000, every: int = 100, alpha: float = 0.01):
        self.reference, self.window, self.every, self.alpha = reference, window, every, alpha
        self.rows: list[NDArray[np.float64]] = []
        self.seen = 0
        self.alarms = 0
        self.on = False

    def update(self, x: NDArray[np.float64]) -> None:
        for row in x:
            self.rows.append(row)
            self.seen += 1
            if self.seen >= self.window and self.seen % self.every == 0:
                w = np.asarray(self.rows[-self.window :])
                self.rows = self.rows[-self.window :]
                p = stats.ks_2samp(w, self.reference, axis=0).pvalue * w.shape[1]
                on = bool(np.any(p < self.alpha))
                self.alarms += on and not self.on
                self.on = on


@dataclass
class Outcome:
    false_alarms: int = 0
    pre_events: int = 0
    delays: list[float] = field(default_factory=list)


def run_one(spec: StreamSpec, seed: int, results: dict[str, Outcome]) -> str:
    """One seed of one stream; adds to ``results`` and returns the engine's verdict at the end."""
    position = TRAIN + REF + PRE
    stream: Iterator[tuple[dict[object, object], object]] = iter(spec.build(seed, position))
    x_train, y_train = _arrays(stream, TRAIN)
    mean, scale = x_train.mean(axis=0), x_train.std(axis=0)
    scale = np.where(scale > 1e-12, scale, 1.0)
    model = HistGradientBoostingClassifier(max_iter=100, random_state=seed).fit((x_train - mean) / scale, y_train)
    scorer = Scorer(model, mean, scale, np.random.default_rng(seed))
    x_ref, _ = _arrays(stream, REF)
    g_ref, f_ref = scorer.score(x_ref)
    reference = Reference.from_arrays(gamma=g_ref, flicker=f_ref, features=x_ref, seed=seed)
    engine = VerdictEngine(reference)
    plain = PlainFeatureKs(reference.feature_sample)
    x_live, _ = _arrays(stream, PRE + POST)
    g_live, f_live = scorer.score(x_live)

    def alarms() -> dict[str, int]:
        s = {st.name: st.alarms for st in engine.states}
        return {
            "gamma_cusum": s["gamma_cusum"],
            "gamma_ks": s["gamma_ks"],
            "flicker_cusum": s["flicker_cusum"],
            "flicker_rate": s["flicker_rate"],
            "features_ks (ours)": s["features_ks"],
            BASELINE: plain.alarms,
        }

    harmful_on, harmful_alarms = False, 0
    before = alarms()
    onsets: dict[str, list[int]] = {k: [] for k in (*OURS, BASELINE)}
    for i in range(0, PRE + POST, BATCH):
        sl = slice(i, i + BATCH)
        engine.update(gamma=g_live[sl], flicker=f_live[sl], features=x_live[sl])
        plain.update(x_live[sl])
        now = alarms()
        for k, v in now.items():
            if v > before[k]:
                onsets[k].append(i + BATCH)
        before = now
        on = engine.report.verdict.value == "harmful-shift"
        if on and not harmful_on:
            harmful_alarms += 1
            onsets["harmful (any of the 4)"].append(i + BATCH)
        harmful_on = on
    for k, times in onsets.items():
        r = results.setdefault(k, Outcome())
        r.pre_events += PRE - WIDTH
        r.false_alarms += sum(t <= PRE - WIDTH for t in times)
        after = [t - PRE for t in times if t > PRE - WIDTH]
        r.delays.append(float(after[0]) if after else float("inf"))
    return engine.report.verdict.value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="runs per stream (seeds 0..N-1)")
    parser.add_argument("--streams", nargs="*", default=list(STREAMS), choices=list(STREAMS))
    args = parser.parse_args()
    t0 = time.perf_counter()
    print(f"command: .venv/bin/python bench/drift_quality.py {' '.join(sys.argv[1:])}".rstrip())
    print(f"machine: {machine('numpy', 'scipy', 'sklearn', 'river')}")
    print(
        f"setup: {args.seeds} seeds per stream; train {TRAIN}, reference {REF}, then {PRE} pre-drift + {POST} "
        f"post-drift events; batches of {BATCH}; HistGradientBoostingClassifier(max_iter=100); r = {RADIUS}, "
        f"{COPIES} flicker copies at σ = {SIGMA}\n"
    )
    names = (*OURS, BASELINE)
    header = "| stream | " + " | ".join(names) + " |"
    rule = "|---|" + "---:|" * len(names)
    verdicts, delays, alarms = [], [], []
    for key in args.streams:
        spec = STREAMS[key]
        results: dict[str, Outcome] = {}
        final = [run_one(spec, seed, results) for seed in range(args.seeds)]
        verdicts.append(
            f"| `{key}` | {spec.title} | {spec.change} | "
            + ", ".join(f"{v} {final.count(v)}/{len(final)}" for v in sorted(set(final)))
            + " |"
        )
        cells, fas = [], []
        for name in names:
            r = results[name]
            d = np.asarray(r.delays)
            hit = d[np.isfinite(d)]
            cells.append(f"{np.median(hit):.0f} ({hit.size}/{d.size})" if hit.size else f"— (0/{d.size})")
            fas.append(f"{r.false_alarms / r.pre_events * 1e4:.2f}")
        delays.append(f"| `{key}` | " + " | ".join(cells) + " |")
        alarms.append(f"| `{key}` | " + " | ".join(fas) + " |")
    print("| stream | river generators | what changes at the drift | verdict at the end of the stream |")
    print("|---|---|---|---|")
    print("\n".join(verdicts))
    print("\nMedian detection delay in events after the drift position (runs that alarmed after it / runs):\n")
    print(header, rule, *delays, sep="\n")
    print(f"\nFalse alarms per 10k pre-drift events ({args.seeds} × {PRE - WIDTH} events per stream):\n")
    print(header, rule, *alarms, sep="\n")
    print(f"\n(total {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
