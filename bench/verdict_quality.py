"""Verdicts vs the confidence baselines at the same false-alarm rate, on river's synthetic streams.

For each stream and seed:

1. draw TRAIN events from the stream's *before* generator; fit the model family of ``--model`` (default
   ``GradientBoostingClassifier(n_estimators=100)``; ``mlp``: standardised inputs into a 32-32 ReLU MLP;
   ``logreg``: standardised inputs into a logistic regression; ``forest``: a random forest: :data:`MODELS`);
   convert it with skl2onnx (probabilities, no ZipMap);
2. draw REF more *before* events with their labels: ``harmonic-monitor reference --labels`` (the default scales;
   the accuracy estimators fitted on them);
3. **calibration**: a separate stationary run of CAL events (the *before* generator, another sample seed). Each
   river detector's sensitivity (ADWIN ``delta``, KSWIN ``alpha``, PageHinkley ``threshold``) is the most sensitive
   value of its grid with at most ``FA_PER_10K`` alarms per 10,000 events on it; our verdict is set to the same
   rate (``drift.false_alarms_per_million_events: 100``) and its alarms on the same run are reported;
4. **live**: PRE *before* events, then POST *after* events (an abrupt change at PRE). Our verdict: ``harmonic-monitor
   replay`` over the JSON-lines events (every event scored, micro-batches of BATCH events), the delay from the
   timeline's ``index`` (the line of the event a detector crossed at, the same 0-based line numbering as the
   baselines' alarms). Baselines: river's ADWIN, KSWIN and PageHinkley on the model's max-probability, and on
   every feature (one detector per feature, standardized by the reference; an alarm when any fires, calibrated
   jointly).

Delay = events from the change to the first alarm at or after it (ours: the first verdict change to
``harmful-shift``, and to anything not ``stable``; 0 where the verdict already said so at the change, a false alarm
before it held through it: such a run is left out of the speed target and is no call in the harm table, as a
baseline's alarm before the change counts for nothing); a miss = no alarm within HORIZON events of the change (at 1 false alarm per 10k events, a
detector alarms by chance within 2,000 events about one time in five, so later "detections" say little). False alarms = alarms on the calibration run plus alarms in the PRE part of the live
stream, per 10,000 events. Accuracy is the model's on the PRE and POST parts (the labels the generators give).

The targets, judged per stream over the seeds (a median counts a miss as infinitely late):

- on a harmful shift visible in the outputs (accuracy down > 5 points, and a max-probability baseline caught it in
  at least half the runs), the verdict's median ``harmful-shift`` delay ≤ the fastest max-probability baseline's
  median, over the runs both caught after the change;
- over every run, ``harmful-shift``'s precision ≥ 0.9 and its recall ≥ the best max-probability baseline's;
- on a harmful shift, every run a max-probability baseline catches, the verdict calls ``harmful-shift``, and every
  run a feature baseline catches (they can only say the inputs moved), the verdict leaves ``stable``;
- the verdict never ends ``stable`` on a stream whose accuracy fell by more than 5 points (there is no ``benign``
  verdict any more: ``input-shift`` says the inputs moved and harm is not judged), and on one whose accuracy fell by
  10 points or more it ends ``harmful-shift`` or a drift alert firing at the end quotes the accuracy estimate (how
  much, as far as a label-free estimate sees). A concept-only stream is reported, not judged: nothing without labels
  can see it.

Per-segment streams (``seg_*``, :mod:`verdict_segments`): one model, a reference of four segments of 150, 500,
1,500 and 5,000 rows (the 150-row one shrunk toward the others, weight 0.75); every segment stationary but the
150-row one, which changes (harm, no harm, or nothing) after PRE of its events; its baselines run on its own events.

Also reported: each of our detectors' false alarms per 10k stationary events (its crossings on the calibration run
and before the change), and ``harmful-shift``'s precision and recall against the realised accuracy change of the
population judged (harm: a fall of ≥ 5 points; no harm: within 2 points; a call: an alarm within HORIZON events of
the change), beside the max-probability baselines'.

river is not a runtime dependency: ``bench/make_river_env.sh`` installs it beside the project's environment (into
bench/.venv-river/lib, git-ignored)::

    bench/make_river_env.sh .venv/bin/python
    PYTHONPATH=$PWD:bench/.venv-river/lib .venv/bin/python bench/verdict_quality.py   # docs/BENCHMARKS.md's tables
    PYTHONPATH=$PWD:bench/.venv-river/lib .venv/bin/python bench/verdict_quality.py --seeds 1 --streams sea_boundary
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import random
import subprocess
import sys
import tempfile
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from machine import machine  # bench/machine.py: the script's folder is on sys.path
from numpy.typing import NDArray
from scipy import stats
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

try:
    from river import drift
    from river.datasets import synth
except ImportError:  # pragma: no cover - bench-only dependency
    sys.exit(
        "bench/verdict_quality.py needs river beside the project: bench/make_river_env.sh .venv/bin/python, then "
        "PYTHONPATH=$PWD:bench/.venv-river/lib .venv/bin/python bench/verdict_quality.py"
    )

TRAIN, REF, CAL, PRE, POST = 5000, 5000, 20000, 5000, 5000
#: replay micro-batch: verdicts are evaluated after a batch that turned a detector (else every drift.every events);
#: a change its detectors made names the event they crossed at (the CUSUMs update per event), whatever BATCH is
BATCH = 10
FA_PER_10K = 1.0
EVENT_SPACING_MS = 10
START_MS = 1_795_000_000_000
HARM_POINTS = 0.05
#: a run whose accuracy moved by at most this much is a no-harm run (precision's denominator)
NO_HARM_POINTS = 0.02
#: a detection counts within this many events of the change; later ones are misses. At 1 false alarm per 10k
#: events a detector alarms by chance within 2,000 events about one time in five.
HORIZON = 2000
HARMFUL, NOT_STABLE = "verdict: harmful-shift", "verdict: not stable"
#: grids, most sensitive first
GRIDS: dict[str, tuple[float, ...]] = {
    "ADWIN": (0.1, 0.03, 0.01, 3e-3, 1e-3, 3e-4, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-10),
    "KSWIN": (0.01, 1e-3, 1e-4, 1e-5, 1e-6, 1e-8, 1e-10, 1e-12),
    "PageHinkley": (0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0),
}
#: smaller grids for the per-feature detectors (one detector per feature: ~10× the cost)
FEATURE_GRIDS: dict[str, tuple[float, ...]] = {
    "ADWIN": (0.01, 1e-3, 1e-4, 1e-6, 1e-8, 1e-10),
    "KSWIN": (1e-3, 1e-5, 1e-7, 1e-10, 1e-12),
    "PageHinkley": (2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 500.0),
}
BASELINES = tuple(f"{d} on {on}" for on in ("max-prob", "features") for d in GRIDS)

Draw = Iterator[tuple[dict[Any, Any], Any]]


def _rows(
    gen: Iterable[tuple[dict[Any, Any], Any]], n: int, keep: Callable[[NDArray[np.float64]], bool] | None = None
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """``n`` (x, y) draws as arrays, keeping only rows for which ``keep`` holds (rejection sampling)."""
    xs: list[list[float]] = []
    ys: list[int] = []
    for x, y in gen:
        row = [float(v) for v in x.values()]
        if keep is None or keep(np.asarray(row)):
            xs.append(row)
            ys.append(int(y))
            if len(xs) == n:
                break
    return np.asarray(xs, dtype=np.float64), np.asarray(ys, dtype=np.int64)


@dataclass(frozen=True)
class StreamSpec:
    """A stream: the *before* generator (by sample seed) and how the *after* part is drawn from a seed."""

    title: str
    change: str
    before: Callable[[int, int], Draw]  # (seed, sample seed) -> draws
    after: Callable[[int, Draw], tuple[NDArray[np.float64], NDArray[np.int64]]]  # (seed, the before draws) -> POST
    #: only P(y|x) changes: no label-free detector can see it, and any alarm on it is a false alarm
    concept_only: bool = False


def _sea_keep(cond: Callable[[NDArray[np.float64]], bool]) -> Callable[[int, Draw], Any]:
    return lambda s, it: _rows(it, POST, cond)


def _noisy(sd: float) -> Callable[[int, Draw], Any]:
    def after(s: int, it: Draw) -> Any:
        x, y = _rows(it, POST)
        return x + np.random.default_rng(10_000 + s).normal(0.0, sd, size=x.shape), y

    return after


def _correlated(rho: float, sample_seed: int) -> Draw:
    """Two inputs N(0, 1) with correlation ``rho`` and four independent N(0, 1) ones; the class is x0 + x1 > 0.
    Flipping ``rho`` leaves every input's own distribution as it was: only a test of the inputs together sees it."""
    rng = np.random.default_rng(sample_seed)
    while True:
        z = rng.normal(size=6)
        x1 = rho * z[0] + math.sqrt(1.0 - rho * rho) * z[1]
        row = [float(z[0]), float(x1), *map(float, z[2:])]
        yield dict(enumerate(row)), int(row[0] + row[1] > 0.0)


STREAMS: dict[str, StreamSpec] = {
    "rbf_new": StreamSpec(
        "RandomRBF, model seed s → s+1000",
        "new centroids and labels: inputs and concept replaced",
        lambda s, ss: iter(synth.RandomRBF(seed_model=s, seed_sample=ss, n_features=10)),
        lambda s, it: _rows(iter(synth.RandomRBF(seed_model=s + 1000, seed_sample=s + 1, n_features=10)), POST),
    ),
    "rbf_drift": StreamSpec(
        "RandomRBF → RandomRBFDrift (speed 0.001)",
        "the same centroids start moving, 0.001 per event",
        lambda s, ss: iter(synth.RandomRBF(seed_model=s, seed_sample=ss, n_features=10)),
        lambda s, it: _rows(
            iter(synth.RandomRBFDrift(seed_model=s, seed_sample=s + 1, n_features=10, change_speed=0.001)), POST
        ),
    ),
    "sea_boundary": StreamSpec(
        "SEA f0, selection near the boundary",
        "covariate shift: only events with abs(x0 + x1 − 8) < 0.5 (the class boundary)",
        lambda s, ss: iter(synth.SEA(variant=0, seed=ss)),
        _sea_keep(lambda r: abs(r[0] + r[1] - 8.0) < 0.5),
    ),
    "sea_select": StreamSpec(
        "SEA f0, selection on a feature",
        "covariate shift: only events with x0 > 7 (a relevant feature)",
        lambda s, ss: iter(synth.SEA(variant=0, seed=ss)),
        _sea_keep(lambda r: r[0] > 7.0),
    ),
    "sea_irrelevant": StreamSpec(
        "SEA f0, selection on the irrelevant feature",
        "covariate shift on x2, which the label ignores: the benign case",
        lambda s, ss: iter(synth.SEA(variant=0, seed=ss)),
        _sea_keep(lambda r: r[2] > 7.0),
    ),
    "agrawal_noise": StreamSpec(
        "Agrawal f0, perturbation 0 → 0.5",
        "numeric inputs jittered by up to ±50 % of their range; labels from the clean values",
        lambda s, ss: iter(synth.Agrawal(0, seed=ss)),
        lambda s, it: _rows(iter(synth.Agrawal(0, seed=s + 1, perturbation=0.5)), POST),
    ),
    "hyperplane_noise": StreamSpec(
        "Hyperplane (10 features) + N(0, 0.2²) input noise",
        "input noise on every feature; labels from the clean values",
        lambda s, ss: iter(synth.Hyperplane(seed=ss, n_features=10)),
        _noisy(0.2),
    ),
    "agrawal_category": StreamSpec(
        "Agrawal f0, selection on coded categories",
        "categorical shift: only cars of make 1–4 and zipcodes 0–2 (codes, as the model takes them); the class "
        "depends on age alone",
        lambda s, ss: iter(synth.Agrawal(0, seed=ss)),
        lambda s, it: _rows(it, POST, lambda r: r[4] <= 4.0 and r[5] <= 2.0),
    ),
    "correlation_flip": StreamSpec(
        "Two inputs' correlation +0.9 → −0.9",
        "each input's own distribution unchanged (every per-feature test is blind); x0 + x1 crowds the class boundary",
        lambda s, ss: _correlated(0.9, ss),
        lambda s, it: _rows(_correlated(-0.9, 20_000 + s), POST),
    ),
    "sea_concept": StreamSpec(
        "SEA f0 → f2",
        "concept only: the class threshold moves from 8 to 7, inputs do not",
        lambda s, ss: iter(synth.SEA(variant=0, seed=ss)),
        lambda s, it: _rows(iter(synth.SEA(variant=2, seed=s + 1)), POST),
        concept_only=True,
    ),
}


# -- river baselines ---------------------------------------------------------------------------------------------
class TabledKSWIN:
    """river's ``KSWIN`` (window 100, statistic over 30) step for step, with the KS p-value looked up.

    river's update runs ``scipy.stats.ks_2samp`` on two samples of 30 per event (0.5 ms; a calibration on ten
    features' 20,000 events would take minutes per grid value). With n = m = 30 the statistic is k/30 for an integer
    k, and scipy's exact p-value depends on k alone, so a table of scipy's own p-values for k = 0..30 gives the same
    answer. The same ``random.Random(seed)`` draws and the same reset rule make the alarms identical to river's
    (checked by ``--check-kswin``).
    """

    WINDOW, STAT = 100, 30

    def __init__(self, alpha: float, seed: int) -> None:
        self.alpha, self.seed = alpha, seed
        self._reset()
        self.drift_detected = False

    def _reset(self) -> None:
        self.window: deque[float] = deque(maxlen=self.WINDOW)
        self._rng = random.Random(self.seed)

    def update(self, x: float) -> None:
        if self.drift_detected:
            self._reset()
        self.window.append(x)
        self.drift_detected = False
        if len(self.window) < self.WINDOW:
            return
        old = self.WINDOW - self.STAT
        w = np.fromiter(self.window, dtype=np.float64, count=self.WINDOW)
        sample = np.sort(w[self._rng.sample(range(old), self.STAT)])
        recent = np.sort(w[old:])
        both = np.concatenate([sample, recent])
        k = int(np.max(np.abs(np.searchsorted(sample, both, "right") - np.searchsorted(recent, both, "right"))))
        if _KS_P[k] <= self.alpha and k / self.STAT > 0.1:
            self.drift_detected = True


#: scipy's exact two-sample KS p-value for n = m = 30 at statistic k/30 (samples 0..29 against 0..29 shifted by k)
with warnings.catch_warnings():  # scipy switches to the asymptotic p-value for the largest k, as it does in river
    warnings.simplefilter("ignore", RuntimeWarning)
    _KS_P = [float(stats.ks_2samp(np.arange(30.0), np.arange(30.0) + k, method="auto").pvalue) for k in range(31)]


def _detector(kind: str, value: float, seed: int) -> Any:
    if kind == "ADWIN":
        return drift.ADWIN(delta=value)
    if kind == "KSWIN":
        return TabledKSWIN(value, seed)
    return drift.PageHinkley(threshold=value)


def check_kswin(n: int = 3000) -> None:
    """TabledKSWIN against river's KSWIN on a stream with two shifts and ties: the same alarms, or exit 1."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(size=n), rng.normal(1.0, size=n), rng.integers(0, 5, size=n).astype(float)])
    for alpha in (1e-2, 1e-4, 1e-6):
        ours, theirs = TabledKSWIN(alpha, 3), drift.KSWIN(alpha=alpha, window_size=100, stat_size=30, seed=3)
        a, b = [], []
        for i, v in enumerate(x.tolist()):
            ours.update(v)
            theirs.update(v)
            if ours.drift_detected:
                a.append(i)
            if theirs.drift_detected:
                b.append(i)
        print(f"KSWIN alpha {alpha:g}: river {len(b)} alarms, tabled {len(a)}, identical: {a == b}")
        if a != b:
            sys.exit(1)


def alarms(kind: str, value: float, signals: NDArray[np.float64], seed: int) -> list[int]:
    """Indices at which any of the columns' detectors (one per column of ``signals``, shape (n, k)) signals drift."""
    dets = [_detector(kind, value, seed + j) for j in range(signals.shape[1])]
    out: list[int] = []
    for i, row in enumerate(signals.tolist()):
        hit = False
        for d, v in zip(dets, row, strict=True):
            d.update(v)
            hit |= d.drift_detected
        if hit:
            out.append(i)
    return out


def calibrate(kind: str, grid: Sequence[float], signals: NDArray[np.float64], seed: int) -> tuple[float, int]:
    """The most sensitive grid value with at most FA_PER_10K alarms per 10k events on ``signals`` (and its alarm
    count); the grid is searched from the strict end, stopping at the first value over the budget."""
    budget = FA_PER_10K * signals.shape[0] / 10_000
    chosen, count = grid[-1], len(alarms(kind, grid[-1], signals, seed))
    for value in reversed(grid[:-1]):
        n = len(alarms(kind, value, signals, seed))
        if n > budget:
            break
        chosen, count = value, n
    return chosen, count


def sweep(
    kind: str, grid: Sequence[float], cal_x: NDArray[np.float64], live_x: NDArray[np.float64], pre: int, seed: int
) -> list[list[float]]:
    """Every grid value's [value, false alarms (calibration run and the ``pre`` events before the change), delay]: the
    baseline at each setting, for its recall at our no-harm call count (:func:`matched_table`)."""
    out = []
    for value in grid:
        hits = alarms(kind, value, live_x, seed)
        stationary = len(alarms(kind, value, cal_x, seed)) + sum(i < pre for i in hits)
        out.append([value, float(stationary), _first_after(hits, pre)])
    return out


# -- our verdict through `harmonic-monitor replay` ---------------------------------------------------------------
def _events(path: Path, x: NDArray[np.float64], segments: Sequence[str] | None = None) -> None:
    with path.open("w", encoding="utf-8") as f:
        for i, row in enumerate(x.tolist()):
            doc: dict[str, Any] = {"id": f"e{i}", "ts": START_MS + i * EVENT_SPACING_MS, "model": "m", "features": row}
            if segments is not None:
                doc["segment"] = segments[i]
            f.write(json.dumps(doc) + "\n")


def _cli(*args: str) -> None:
    cmd = [sys.executable, "-m", "monitor", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-3000:]}")


def replay(
    tmp: Path,
    name: str,
    x: NDArray[np.float64],
    model: Path,
    reference: Path,
    config: Path,
    segments: Sequence[str] | None = None,
) -> dict[str, Any]:
    events, timeline = tmp / f"{name}.jsonl", tmp / f"{name}.timeline.json"
    _events(events, x, segments)
    _cli(
        "replay",
        "--model",
        str(model),
        "--model-name",
        "m",
        "--reference",
        str(reference),
        "--config",
        str(config),
        "--events",
        str(events),
        "--timeline",
        str(timeline),
    )
    doc: dict[str, Any] = json.loads(timeline.read_text(encoding="utf-8"))
    return doc


@dataclass
class Run:
    """One stream × seed: what every detector did."""

    stream: str
    seed: int
    acc_pre: float
    acc_post: float
    conf_pre: float
    conf_post: float
    delays: dict[str, float] = field(default_factory=dict)  # detector → delay (inf: missed)
    false_alarms: dict[str, int] = field(default_factory=dict)  # detector → alarms on CAL + PRE
    settings: dict[str, float] = field(default_factory=dict)  # baseline → calibrated value
    final: str = "stable"
    fired: list[str] = field(default_factory=list)  # detectors behind the first harmful-shift after the change
    seconds: float = 0.0
    detector_alarms: dict[str, int] = field(default_factory=dict)  # our detector → turned on, CAL + PRE
    stationary_events: int = CAL + PRE  # the events false alarms are counted over
    events_for: dict[str, int] = field(default_factory=dict)  # a detector counted over other events: how many
    #: our verdicts already in that state at the change (a false alarm before it, held): delay 0 in the tables, left
    #: out of the speed target, where a baseline's alarm before the change does not count either
    held: list[str] = field(default_factory=list)
    #: whether the labelled reference made a fall in confidence harm evidence (``drift.confidence_harm: auto``)
    confidence_harm: bool = True
    #: max-probability baseline → [value, false alarms, delay] at every grid value (:func:`sweep`)
    sweep: dict[str, list[list[float]]] = field(default_factory=dict)
    #: a drift alert firing at the end quotes the accuracy estimate (how much, as the alert says it)
    quoted: bool = False


def confidence_is_harm_evidence(reference: Path) -> bool:
    """What ``drift.confidence_harm: auto`` decides for the reference file's model (its labelled fit, at the
    default ``accuracy.tolerance``)."""
    from monitor.accuracy import EstimatorFit
    from monitor.accuracy.confidence_errors import confidence_harm
    from monitor.config import AccuracySettings, setting_default
    from monitor.rolling.reference_file import read_accuracy_estimator

    doc = read_accuracy_estimator(reference)
    errors = None if doc is None else EstimatorFit.from_dict(doc).confidence_errors
    return confidence_harm("auto", errors, setting_default(AccuracySettings, "tolerance"))[0]


def estimate_quoted(alerts: list[dict[str, Any]]) -> bool:
    """Whether a drift alert (HarmonicHarmfulShift, HarmonicInputDrift) firing at the end of a replay quoted the
    accuracy estimate when it fired (the timeline's alert transitions, each with its description)."""
    last: dict[str, dict[str, Any]] = {}
    for a in alerts:
        if a["alertname"] in ("HarmonicHarmfulShift", "HarmonicInputDrift"):
            last[a["alertname"]] = a
    return any(a["state"] == "firing" and "accuracy_estimate estimate" in a["detail"] for a in last.values())


def _first_after(indices: Iterable[int], start: int) -> float:
    """Events from ``start`` to the first index at or after it, within HORIZON events (else inf: a miss)."""
    after = [i - start for i in indices if i >= start]
    return float(after[0]) if after and after[0] < HORIZON else math.inf


def _verdict_alarms(timeline: dict[str, Any], harmful_only: bool) -> list[int]:
    """Indices where the verdict became harmful-shift (or left stable), from stable or input-shift."""
    out = []
    for c in timeline["changes"]:
        if harmful_only:
            if c["verdict"] == "harmful-shift":
                out.append(int(c["index"]))
        elif c["previous"] == "stable" and c["verdict"] != "stable":
            out.append(int(c["index"]))
    return out


def _state_at(timeline: dict[str, Any], index: int) -> str:
    state = "stable"
    for c in timeline["changes"]:
        if c["index"] < index:
            state = c["verdict"]
    return str(state)


def detector_alarms(*crossings: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Per detector, the times it turned on in the timelines' ``crossings``."""
    out: dict[str, int] = {}
    for c in (c for part in crossings for c in part):
        out[c["detector"]] = out.get(c["detector"], 0) + (c["state"] == "on")
    return out


#: the model families ``--model`` trains (each a fresh estimator for a seed)
MODELS: dict[str, Callable[[int], Any]] = {
    "gbdt": lambda seed: GradientBoostingClassifier(n_estimators=100, random_state=seed),
    "mlp": lambda seed: make_pipeline(
        StandardScaler(), MLPClassifier((32, 32), max_iter=300, early_stopping=True, random_state=seed)
    ),
    "logreg": lambda seed: make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)),
    "forest": lambda seed: RandomForestClassifier(n_estimators=100, min_samples_leaf=5, random_state=seed),
}


MODEL_TEXT = {
    "gbdt": "GradientBoostingClassifier(n_estimators=100)",
    "mlp": "StandardScaler + MLPClassifier((32, 32), early stopping)",
    "logreg": "StandardScaler + LogisticRegression",
    "forest": "RandomForestClassifier(n_estimators=100, min_samples_leaf=5)",
}


def to_onnx_model(model: Any, x_train: NDArray[np.float64]) -> bytes:
    """``model`` (one of :data:`MODELS`) as ONNX with probabilities as a plain tensor (no ZipMap)."""
    from skl2onnx import to_onnx

    last = model.steps[-1][1] if hasattr(model, "steps") else model
    onx = to_onnx(model, x_train[:1].astype(np.float32), options={id(last): {"zipmap": False}})
    return bytes(onx.SerializeToString())


def run_one(
    key: str,
    seed: int,
    drift_extra: Sequence[str] = (),
    ours_only: bool = False,
    ours_rate: float | None = None,
    feature_baselines: bool = True,
    cal: int = CAL,
    family: str = "gbdt",
) -> Run:
    """One stream × seed. ``drift_extra``: more ``drift`` settings for our verdict (``name: value`` YAML lines,
    e.g. ``confidence_detector: false``); ``ours_only``: skip the river baselines; ``ours_rate``: our verdict's
    false alarms per 10⁶ events (default: the baselines' budget, FA_PER_10K per 10k); ``feature_baselines``: also
    the river detectors on every feature; ``cal``: events of the calibration run."""
    if key not in STREAMS:
        from verdict_segments import run_segments  # the per-segment streams

        return run_segments(key, seed, drift_extra, ours_only, ours_rate, cal, family)
    rate = FA_PER_10K * 100 if ours_rate is None else ours_rate
    t0 = time.perf_counter()
    spec = STREAMS[key]
    it = spec.before(seed, seed)
    x_train, y_train = _rows(it, TRAIN)
    model = MODELS[family](seed).fit(x_train, y_train)
    x_ref, y_ref = _rows(it, REF)
    x_pre, y_pre = _rows(it, PRE)
    x_post, y_post = spec.after(seed, it)
    x_cal, _ = _rows(spec.before(seed, 7_000 + seed), cal)
    x_live = np.vstack([x_pre, x_post])

    def conf(x: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray(model.predict_proba(x).max(axis=1), dtype=np.float64)

    run = Run(
        key,
        seed,
        float((model.predict(x_pre) == y_pre).mean()),
        float((model.predict(x_post) == y_post).mean()),
        float(conf(x_pre).mean()),
        float(conf(x_post).mean()),
        stationary_events=cal + PRE,
    )
    with tempfile.TemporaryDirectory(prefix="verdict-quality-") as name:
        tmp = Path(name)
        model_path = tmp / "model.onnx"
        model_path.write_bytes(to_onnx_model(model, x_train))
        np.savetxt(tmp / "ref.csv", x_ref, delimiter=",")
        np.savetxt(tmp / "labels.csv", y_ref, fmt="%d")
        reference = tmp / "reference.json"
        _cli(
            "reference",
            "--model",
            str(model_path),
            "--data",
            str(tmp / "ref.csv"),
            "--header",
            "no",
            "--labels",
            str(tmp / "labels.csv"),
            "--out",
            str(reference),
        )
        run.confidence_harm = confidence_is_harm_evidence(reference)
        config = tmp / "monitor.yaml"
        config.write_text(
            f"drift:\n  false_alarms_per_million_events: {rate:g}\n"
            + "".join(f"  {line}\n" for line in drift_extra)
            + f"batch:\n  max_events: {BATCH}\n",
            encoding="utf-8",
        )
        cal_tl = replay(tmp, "cal", x_cal, model_path, reference, config)
        live_tl = replay(tmp, "live", x_live, model_path, reference, config)
    for label, harmful_only in ((HARMFUL, True), (NOT_STABLE, False)):
        live = _verdict_alarms(live_tl, harmful_only)
        run.false_alarms[label] = len(_verdict_alarms(cal_tl, harmful_only)) + sum(i < PRE for i in live)
        state = _state_at(live_tl, PRE)
        already = state == "harmful-shift" if harmful_only else state != "stable"
        run.delays[label] = 0.0 if already else _first_after(live, PRE)
        if already:  # a false alarm before the change, held through it
            run.held.append(label)
    run.final = _state_at(live_tl, PRE + POST + 1)
    run.quoted = estimate_quoted(live_tl["alerts"])
    for c in live_tl["changes"]:
        if c["index"] >= PRE and c["verdict"] == "harmful-shift":
            run.fired = list(c["detectors"])
            break
    run.detector_alarms = detector_alarms(cal_tl["crossings"], [c for c in live_tl["crossings"] if c["index"] < PRE])

    if ours_only:
        run.seconds = time.perf_counter() - t0
        return run
    # baselines: the same model's max-probability, and the features standardized by the reference
    mean, sd = x_ref.mean(axis=0), x_ref.std(axis=0)
    sd = np.where(sd > 1e-12, sd, 1.0)
    for on, cal_x, live_x, grids in (
        ("max-prob", conf(x_cal)[:, None], conf(x_live)[:, None], GRIDS),
        ("features", (x_cal - mean) / sd, (x_live - mean) / sd, FEATURE_GRIDS if feature_baselines else {}),
    ):
        for kind, grid in grids.items():
            label = f"{kind} on {on}"
            value, cal_alarms = calibrate(kind, grid, cal_x, seed)
            hits = alarms(kind, value, live_x, seed)
            run.settings[label] = value
            run.false_alarms[label] = cal_alarms + sum(i < PRE for i in hits)
            run.delays[label] = _first_after(hits, PRE)
            if on == "max-prob":
                run.sweep[label] = sweep(kind, grid, cal_x, live_x, PRE, seed)
    run.seconds = time.perf_counter() - t0
    return run


# -- the report --------------------------------------------------------------------------------------------------
def _median(values: Sequence[float]) -> float:
    """The median over every run, a miss counting as infinitely late (so a detector that catches one run in three
    has an infinite median, not that run's delay)."""
    return float(np.median(np.asarray(values, dtype=np.float64)))


def _stream_table_head(title: str, names: Sequence[str]) -> list[str]:
    """The title and the header of a markdown table with a row per stream and a column per detector ``names``."""
    return ["", title, "", "| stream | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]


def _cell(values: Sequence[float]) -> str:
    hit = [v for v in values if math.isfinite(v)]
    return f"{np.median(hit):.0f} ({len(hit)}/{len(values)})" if hit else f"— (0/{len(values)})"


def report(runs: list[Run], seeds: int) -> list[str]:
    lines: list[str] = []
    names = tuple(n for n in (HARMFUL, NOT_STABLE, *BASELINES) if any(n in r.delays for r in runs))
    by_stream: dict[str, list[Run]] = {}
    for r in runs:
        by_stream.setdefault(r.stream, []).append(r)
    lines += [
        "| stream | what changes | accuracy before → after | mean max-prob before → after | confidence is harm "
        "evidence | final verdicts | detectors behind the first harmful-shift (any time after the change) |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, rs in by_stream.items():
        finals = [r.final for r in rs]
        fired = sorted({d for r in rs for d in r.fired})
        lines.append(
            f"| `{key}` | {_title(key)} | {np.mean([r.acc_pre for r in rs]):.2f} → "
            f"{np.mean([r.acc_post for r in rs]):.2f} | {np.mean([r.conf_pre for r in rs]):.2f} → "
            f"{np.mean([r.conf_post for r in rs]):.2f} | {sum(r.confidence_harm for r in rs)}/{len(rs)} | "
            + ", ".join(f"{v} {finals.count(v)}/{len(finals)}" for v in sorted(set(finals)))
            + f" | {', '.join(fired) or '—'} |"
        )
    lines += _stream_table_head(
        f"Median detection delay in events after the change (runs that alarmed within {HORIZON} events / runs):", names
    )
    for key, rs in by_stream.items():
        lines.append(f"| `{key}` | " + " | ".join(_cell([r.delays.get(n, math.inf) for r in rs]) for n in names) + " |")
    lines += _stream_table_head(
        f"False alarms per 10k stationary events ({seeds} seeds × the calibration run and the events before the "
        "change, of every segment):",
        names,
    )
    for key, rs in by_stream.items():
        cells = [_per_10k(rs, n) for n in names]
        lines.append(f"| `{key}` | " + " | ".join(cells) + " |")
    detectors = sorted({d for r in runs for d in r.detector_alarms})
    if detectors:
        lines += _stream_table_head(
            "Our detectors' false alarms per 10k stationary events (each turning on):", detectors
        )
        for key, rs in by_stream.items():
            cells = [_per_10k(rs, d, ours=True) for d in detectors]
            lines.append(f"| `{key}` | " + " | ".join(cells) + " |")
    if len(names) > 2:  # with the baselines
        lines += harm_table(runs, names)
        lines += matched_table(runs)
        lines += ["", "Targets (per stream, medians over seeds):", ""]
        lines += targets(by_stream)
    else:
        lines += ["", "A fall of 10 points or more ends harmful-shift or with the estimate quoted:", ""]
        lines += [f"- `{key}`: {said}" for key, rs in by_stream.items() if (said := _quoted(rs))]
    return lines


def _title(key: str) -> str:
    if key in STREAMS:
        return f"{STREAMS[key].title}: {STREAMS[key].change}"
    from verdict_segments import SEGMENT_STREAMS

    return SEGMENT_STREAMS[key]


def _per_10k(rs: list[Run], name: str, ours: bool = False) -> str:
    """``name``'s alarms per 10k stationary events (``ours``: one of our detectors, else a verdict or baseline)."""
    alarms = sum((r.detector_alarms if ours else r.false_alarms).get(name, 0) for r in rs)
    return f"{alarms / sum(r.events_for.get(name, r.stationary_events) for r in rs) * 1e4:.2f}"


def harm_table(runs: list[Run], names: Sequence[str]) -> list[str]:
    """``harmful-shift`` and the max-probability baselines as harm calls: precision and recall against the realised
    accuracy change (harm: a fall ≥ HARM_POINTS; no harm: within NO_HARM_POINTS; a call: an alarm within HORIZON
    events of the change), recall less the no-harm runs' call rate (informedness: 0 for a detector that calls at
    random), recall over the harm runs whose mean max-probability fell by ≥ NO_HARM_POINTS (the harm any label-free
    signal of the outputs can see), and the median delay over the harm runs caught. A ``harmful-shift`` held from a
    false alarm before the change is no call, as a baseline's alarm before the change counts for nothing."""
    harm = [r for r in runs if r.acc_pre - r.acc_post >= HARM_POINTS - 1e-12]
    calm = [r for r in runs if abs(r.acc_pre - r.acc_post) <= NO_HARM_POINTS]
    seen = [r for r in harm if r.conf_pre - r.conf_post >= NO_HARM_POINTS]
    out = [
        "",
        f"Harm calls over every stream and seed: {len(harm)} runs with harm (accuracy down ≥ {HARM_POINTS * 100:g} "
        f"points; {len(seen)} of them with mean max-probability down ≥ {NO_HARM_POINTS * 100:g} points), {len(calm)} "
        f"without (within {NO_HARM_POINTS * 100:g} points); a call = an alarm within {HORIZON} events of the change:",
        "",
        "| detector | harm runs caught | no-harm runs called | precision | recall | recall − no-harm call rate "
        "| recall, max-probability fell | median delay (caught) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    scores: dict[str, tuple[float, float]] = {}
    for n in (HARMFUL, *(n for n in names if n.endswith("on max-prob"))):
        caught = [_delay(r, n) for r in harm if math.isfinite(_delay(r, n))]
        called = sum(math.isfinite(_delay(r, n)) for r in calm)
        visible = sum(math.isfinite(_delay(r, n)) for r in seen)
        precision = len(caught) / (len(caught) + called) if caught or called else float("nan")
        recall = len(caught) / len(harm) if harm else float("nan")
        informed = recall - (called / len(calm) if calm else 0.0)
        delay = _median_caught(caught)
        out.append(
            f"| {n} | {len(caught)}/{len(harm)} | {called}/{len(calm)} | {precision:.2f} | {recall:.2f} "
            f"| {informed:.2f} | {visible}/{len(seen)} | {delay} |"
        )
        scores[n] = (precision, recall)
    ours, best = scores.pop(HARMFUL), max((r for _, r in scores.values()), default=0.0)
    precise = [r for p, r in scores.values() if p >= 0.9]
    met = ours[0] >= 0.9 and ours[1] >= best
    line = f"Target: precision ≥ 0.9 and recall ≥ the best baseline's ({best:.2f}): {'met' if met else 'NOT met'}"
    if not precise:
        line += " (no baseline reaches precision 0.9)"
    held = [sum(HARMFUL in r.held for r in rs) for rs in (harm, calm)]
    if any(held):
        line += (
            f". Left out as no call: harmful-shift held from a false alarm before the change in {held[0]} harm and "
            f"{held[1]} no-harm runs"
        )
    out += ["", line]
    return out


def matched_table(runs: list[Run]) -> list[str]:
    """Each max-probability baseline at the most sensitive grid setting that calls harm on no more no-harm runs than
    ``harmful-shift`` does, chosen on these very runs (an oracle's choice, which favours the baseline): its recall at
    our precision, the question ``harm_table`` cannot answer when the baselines buy recall with false calls."""
    harm = [r for r in runs if r.acc_pre - r.acc_post >= HARM_POINTS - 1e-12]
    calm = [r for r in runs if abs(r.acc_pre - r.acc_post) <= NO_HARM_POINTS]
    labels = sorted({k for r in runs for k in r.sweep})
    if not labels or not all(k in r.sweep for r in harm + calm for k in labels):
        return []
    ours_calls = sum(math.isfinite(_delay(r, HARMFUL)) for r in calm)
    ours_caught = sum(math.isfinite(_delay(r, HARMFUL)) for r in harm)
    out = [
        "",
        f"The baselines at our no-harm call count ({ours_calls}/{len(calm)}): each at the most sensitive setting that "
        "calls no more no-harm runs, chosen on these runs (favouring it):",
        "",
        "| detector | setting | harm runs caught | no-harm runs called | recall | false alarms per 10k stationary "
        "| median delay (caught) |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| verdict: harmful-shift | — | {ours_caught}/{len(harm)} | {ours_calls}/{len(calm)} | "
        f"{ours_caught / len(harm) if harm else float('nan'):.2f} | {_per_10k(runs, HARMFUL)} | "
        f"{_median_caught([_delay(r, HARMFUL) for r in harm])} |",
    ]
    events = sum(r.events_for.get(labels[0], r.stationary_events) for r in runs)
    for label in labels:
        best: tuple[int, int, float, list[float]] | None = None
        for i, row in enumerate(runs[0].sweep[label]):
            delays = [r.sweep[label][i][2] for r in harm]
            caught = sum(math.isfinite(d) for d in delays)
            called = sum(math.isfinite(r.sweep[label][i][2]) for r in calm)
            if called <= ours_calls and (best is None or caught > best[0]):
                stationary = sum(r.sweep[label][i][1] for r in runs)
                best = (caught, called, row[0], [stationary, *delays])
        if best is None:
            out.append(f"| {label} | — | — | — | — | — | — |")
            continue
        caught, called, value, (stationary, *delays) = best
        out.append(
            f"| {label} | {value:g} | {caught}/{len(harm)} | {called}/{len(calm)} | "
            f"{caught / len(harm) if harm else float('nan'):.2f} | {stationary / events * 1e4:.2f} | "
            f"{_median_caught(delays)} |"
        )
    return out


def _median_caught(delays: Sequence[float]) -> str:
    hit = [d for d in delays if math.isfinite(d)]
    return f"{np.median(hit):.0f}" if hit else "—"


def _delay(run: Run, name: str) -> float:
    """``name``'s delay in ``run`` as a call: inf (none) for our verdict held from a false alarm before the change."""
    return math.inf if name in run.held else run.delays.get(name, math.inf)


def _caught(rs: list[Run], name: str) -> list[bool]:
    return [math.isfinite(r.delays.get(name, math.inf)) for r in rs]


def _quoted(rs: list[Run]) -> str:
    """On a stream whose accuracy fell by 10 points or more: whether every run ended harmful-shift or with the
    accuracy estimate quoted by a drift alert; empty on any other stream."""
    if float(np.mean([r.acc_pre - r.acc_post for r in rs])) < 0.10:
        return ""
    silent = sum(r.final != "harmful-shift" and not r.quoted for r in rs)
    return "harmful-shift or the estimate quoted: " + ("met" if not silent else f"NOT met ({silent}/{len(rs)} runs)")


def targets(by_stream: dict[str, list[Run]]) -> list[str]:
    """The issue's three targets per stream, judged as the module docstring says."""
    out = []
    for key, rs in by_stream.items():
        prob = [f"{d} on max-prob" for d in GRIDS if any(f"{d} on max-prob" in r.delays for r in rs)]
        feat = [f"{d} on features" for d in GRIDS if any(f"{d} on features" in r.delays for r in rs)]
        drop = float(np.mean([r.acc_pre - r.acc_post for r in rs]))
        harmful = drop > HARM_POINTS
        parts = [f"accuracy {'fell' if harmful else 'held'} ({-drop * 100:+.1f} points)"]
        if key in STREAMS and STREAMS[key].concept_only:
            parts.append("concept only: invisible without labels (every alarm here is a false alarm)")
            out.append(f"- `{key}`: " + "; ".join(parts))
            continue
        half = (len(rs) + 1) // 2
        visible = harmful and any(sum(_caught(rs, n)) >= half for n in prob)
        if visible:
            base = {n: _median([r.delays[n] for r in rs]) for n in prob}
            name = min(base, key=lambda n: base[n])
            # the runs both caught after the change: a verdict held from a false alarm before it is no detection, as
            # a baseline's alarm before it is none
            held = sum(HARMFUL in r.held for r in rs)
            both = [
                r
                for r in rs
                if math.isfinite(r.delays[HARMFUL]) and HARMFUL not in r.held and math.isfinite(r.delays[name])
            ]
            if both:  # the medians over the runs both caught
                ours, theirs = _median([r.delays[HARMFUL] for r in both]), _median([r.delays[name] for r in both])
                ok = ours <= theirs
                parts.append(
                    f"speed {'met' if ok else 'NOT met'} (harmful-shift {ours:.0f} vs {theirs:.0f}, {name}, over the "
                    f"{len(both)} runs both caught after the change"
                    + (f"; {held} held harmful-shift from a false alarm before it" if held else "")
                    + ")"
                )
            else:
                parts.append(f"speed: no run caught by both harmful-shift and {name}")
        if harmful:
            # a max-prob baseline's catch must be a harmful-shift; a feature baseline's, at least an input-shift
            missed = sum(
                any(c and not math.isfinite(r.delays[HARMFUL]) for c, r in zip(_caught(rs, n), rs, strict=True))
                for n in prob
            ) + sum(
                any(c and not math.isfinite(r.delays[NOT_STABLE]) for c, r in zip(_caught(rs, n), rs, strict=True))
                for n in feat
            )
            parts.append("catches what the baselines catch: " + ("met" if not missed else f"NOT met ({missed})"))
            finals = [r.final for r in rs]
            stable = finals.count("stable")
            parts.append(f"never ends stable: {'met' if not stable else f'NOT met ({stable}/{len(rs)} runs)'}")
            if quoted := _quoted(rs):
                parts.append(quoted)
        else:
            calls = sum(r.final == "harmful-shift" for r in rs)
            parts.append(f"ends harmful-shift in {calls}/{len(rs)} runs")
        out.append(f"- `{key}`: " + "; ".join(parts))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    from verdict_segments import SEGMENT_STREAMS

    every = [*STREAMS, *SEGMENT_STREAMS]
    parser.add_argument("--seeds", type=int, default=5, help="runs per stream (seeds 0..N-1)")
    parser.add_argument("--streams", nargs="*", default=every, choices=every)
    parser.add_argument(
        "--no-feature-baselines", action="store_true", help="the river detectors on max-probability only"
    )
    parser.add_argument("--model", choices=sorted(MODELS), default="gbdt", help="the model family (default gbdt)")
    parser.add_argument("--cal", type=int, default=CAL, help=f"events of the calibration run (default {CAL})")
    parser.add_argument("--jobs", type=int, default=2, help="runs in parallel (processes)")
    parser.add_argument("--json", help="also write every run's figures here")
    parser.add_argument(
        "--drift",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="one more drift setting for our verdict (repeatable), e.g. 'confidence_detector: false'",
    )
    parser.add_argument("--ours-only", action="store_true", help="our verdict only, no river baselines")
    parser.add_argument(
        "--ours-rate",
        type=float,
        metavar="PER_MILLION",
        help=f"our verdict's drift.false_alarms_per_million_events (default {FA_PER_10K * 100:g}: the baselines' budget)",
    )
    parser.add_argument("--report", metavar="JSON", help="print the tables from a --json file of an earlier run")
    parser.add_argument("--check-kswin", action="store_true", help="check the tabled KSWIN against river's; exit")
    args = parser.parse_args()
    if args.check_kswin:
        check_kswin()
        return
    t0 = time.perf_counter()
    print(
        f"command: PYTHONPATH=$PWD:bench/.venv-river/lib python bench/verdict_quality.py {' '.join(sys.argv[1:])}".rstrip()
    )
    print(f"machine: {machine('numpy', 'sklearn', 'onnxruntime', 'river')}")
    print(
        f"setup: {args.seeds} seeds per stream; train {TRAIN}, labelled reference {REF}, calibration run {args.cal}, "
        f"then {PRE} before + {POST} after the change (seg_*: bench/verdict_segments.py); "
        f"model {args.model} ({MODEL_TEXT[args.model]}); our defaults "
        f"but drift.false_alarms_per_million_events = {args.ours_rate or FA_PER_10K * 100:g} and replay batches of "
        f"{BATCH}; baselines "
        f"calibrated to ≤ {FA_PER_10K:g} alarm per 10k calibration events\n"
    )
    if args.report:  # the tables again from a --json file, without running anything
        runs = [Run(**r) for r in json.loads(Path(args.report).read_text(encoding="utf-8"))]
        for r in runs:
            r.delays = {k: float(v) if float(v) < HORIZON else math.inf for k, v in r.delays.items()}
            r.sweep = {
                k: [[v, n, float(d) if float(d) < HORIZON else math.inf] for v, n, d in rows]
                for k, rows in r.sweep.items()
            }
        print("\n".join(report(runs, len({r.seed for r in runs}))))
        return
    jobs = [(k, s) for s in range(args.seeds) for k in args.streams]  # seed by seed: a run cut short has every stream
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        work = functools.partial(
            run_one,
            drift_extra=tuple(args.drift),
            ours_only=args.ours_only,
            ours_rate=args.ours_rate,
            feature_baselines=not args.no_feature_baselines,
            cal=args.cal,
            family=args.model,
        )
        runs = []
        for run in pool.map(work, *zip(*jobs, strict=True)):  # in order, each as it is done
            runs.append(run)
            if args.json:  # every run so far: --report prints the tables of a run cut short
                text = json.dumps([r.__dict__ for r in runs], indent=1, default=str)
                Path(args.json).write_text(text, encoding="utf-8")
    print("\n".join(report(runs, args.seeds)))
    print(f"\n(total {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
