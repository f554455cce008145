"""Bursts and backlogs: events scored and event-time coverage, for the sampler in
the tree (work-conserving, with the delay-bounded event-time reservoir) and for the old behaviour.

*old* is the sampler of commit 7a02537 (``--old-ref``): work-conserving, but its acceptance probability divides the
share by an offered rate estimated from the first poll on, and a poll that fits the CPU bucket is scored whole. It
is read with ``git show`` into a temporary package (:func:`load_old`); nothing in the checkout
changes. *new* is ``monitor.sampler`` as it is now. Both are driven as the pipeline drives them, in simulated time
(no Kafka, figures independent of this machine's speed): one ``sample_many`` per poll of up to 2,000 events
(``kafka.max_poll_records``), then one ``release`` (``Scoring.accept``; the old sampler holds nothing), kept events
reported to ``observe_cost`` in batches of 256 at a fixed cost per event, a step without events after the last poll
(the stream pauses). Defaults: 1 CPU, ``cpu_share`` 0.8, 2 s bucket; the cost per event known from the reference
scored at start-up.

Scenarios:

- **burst**: 500 events at once (one poll; and five polls of 100, 1 ms apart), 53 µs per event;
- **backlog**: an hour of traffic (10 events/s, 36,000 events, uniform event times) read after a restart at
  50,000 events/s, at 1 ms per event (800 events/s sustainable) and at 53 µs (~15,000 events/s);
- **overload**: 4,000 events/s for 60 s, live (event time = read time), 1 ms per event;
- **drain, ingest first**: an hour at 100 events/s (360,000 events) read at 50,000 events/s, 53 µs per event, with
  the ingest-first controller fed after every poll as the pipeline feeds it (``runtime/scoring_budget.py``: the lag,
  the scoring time, the floor of ``BEHIND_EVENTS_PER_SECOND`` per model), so the budget sits at the floor while
  behind (new sampler only).

Coverage: the offered events' event-time span cut in deciles (equal counts); *deciles hit* = share of deciles
holding a kept event; *max/min* = the largest over the smallest per-decile keep rate (1 = even; inf: a decile
without any); *first/mean* = the first decile's keep rate over the mean; *χ² p* = chi-square test of the kept
counts per decile against even (small = uneven).

Usage::

    .venv/bin/python bench/burst.py [--old-ref 7a02537] [--seed 5]
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from scipy import stats

from monitor.events import InferenceEvent
from monitor.runtime.scoring_budget import BEHIND_EVENTS_PER_SECOND
from monitor.sampler.ingest_first import IngestFirst
from monitor.sampler.stratified import StratifiedSampler
from monitor.sampler.uniform_config import UniformSamplerConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import machine  # noqa: E402

POLL = 2000
BATCH = 256
START = 1e6
REPO = Path(__file__).resolve().parents[1]


def load_old(ref: str) -> ModuleType:
    """The stratified sampler module as committed at ``ref``, imported from a temporary package."""
    root = Path(tempfile.mkdtemp(prefix="oldsampler-"))
    pkg = root / "oldsampler"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    for name in ("base", "budget", "uniform", "stratified"):
        text = subprocess.run(
            ["git", "show", f"{ref}:monitor/sampler/{name}.py"], cwd=REPO, check=True, capture_output=True, text=True
        ).stdout
        (pkg / f"{name}.py").write_text(text.replace("monitor.sampler.", "oldsampler."), encoding="utf-8")
    sys.path.insert(0, str(root))
    return importlib.import_module("oldsampler.stratified")


def replay(
    sampler: Any, times: np.ndarray, ingest_per_second: float, cost: float, poll: int = POLL, ingest_first: bool = False
) -> np.ndarray:
    """Each event's weight (0: dropped), events with these event times read in polls at ``ingest_per_second``;
    ``ingest_first``: the controller sets the sampler's CPU budget after every step, as the pipeline's does."""
    weights = np.zeros(times.shape[0])
    index: dict[str, int] = {}
    release = getattr(sampler, "release", None)
    features = np.zeros(2)
    control = (
        IngestFirst(sampler.cpu_cap_per_second, backlog_records=5 * poll, caught_up_records=poll)
        if ingest_first
        else None
    )
    read = 0

    def step(now: float, events: list[InferenceEvent], offset: int) -> None:
        w = sampler.sample_many(events, now) if events else []
        weights[offset : offset + len(w)] = w
        kept = int(np.count_nonzero(np.asarray(w) > 0))
        for ev, weight in release(now) if release is not None else []:
            weights[index.pop(ev.event_id)] = weight
            kept += weight > 0
        for b in range(0, kept, BATCH):
            n = min(BATCH, kept - b)
            sampler.observe_cost("m", n, n * cost)
        if control is not None:
            control.min_budget = sampler.cpu_for(BEHIND_EVENTS_PER_SECOND)
            busy = kept * cost
            lag = times.shape[0] - read
            control.observe(now, lag_records=lag, full_poll=len(events) >= poll, scoring_wall=busy, scoring_cpu=busy)
            sampler.set_cpu_budget(control.budget, now)

    now = START
    for k in range(0, times.shape[0], poll):
        now = START + k / ingest_per_second
        events = [InferenceEvent(f"e{k + j}", "m", "1", features, float(t)) for j, t in enumerate(times[k : k + poll])]
        index.update((ev.event_id, k + j) for j, ev in enumerate(events))
        read = k + len(events)
        step(now, events, k)
    step(now + 0.2, [], 0)  # the stream pauses
    return weights


def coverage(times: np.ndarray, weights: np.ndarray) -> str:
    """Deciles hit, max/min and first/mean keep rate, chi-square p (see the module docstring)."""
    edges = np.quantile(times, np.linspace(0.0, 1.0, 11))
    which = np.clip(np.searchsorted(edges, times, side="right") - 1, 0, 9)
    offered = np.bincount(which, minlength=10)
    kept = np.bincount(which[weights > 0], minlength=10)
    rates = kept / offered
    ratio = rates.max() / rates.min() if rates.min() > 0 else float("inf")
    p = float(stats.chisquare(kept, offered * kept.sum() / offered.sum()).pvalue) if kept.sum() else 0.0
    first = rates[0] / rates.mean() if rates.mean() > 0 else float("nan")
    return f"{np.count_nonzero(kept) * 10} % | {ratio:.2f} | {first:.2f} | {p:.2g}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old-ref", default="7a02537", help="commit of the old sampler (default 7a02537)")
    ap.add_argument("--seed", type=int, default=5, help="seed of the samplers and of the backlog's event times")
    args = ap.parse_args()
    started = time.perf_counter()
    old = load_old(args.old_ref)

    def make(kind: str, cost: float) -> Any:
        if kind == "old":  # the old sampler takes its configuration as keyword arguments
            sampler = old.StratifiedSampler(cpus=1.0, cpu_share=0.8, burst_seconds=2.0, seed=args.seed)
        else:
            sampler = StratifiedSampler(
                UniformSamplerConfig(cpus=1.0, cpu_share=0.8, burst_seconds=2.0), seed=args.seed
            )
        sampler.observe_cost("m", 1000, 1000 * cost)  # measured on the reference at start-up
        return sampler

    label = {"old": f"old (offered-rate division, {args.old_ref})", "new": "new (event-time reservoir)"}
    rows: list[str] = []

    def row(scenario: str, kind: str, times: np.ndarray, run: Callable[[Any], np.ndarray], cost: float) -> None:
        w = run(make(kind, cost))
        scored = int(np.count_nonzero(w > 0))
        share = f"{scored:,} of {times.size:,}"
        cov = coverage(times, w) if np.ptp(times) > 0 else "– | – | – | –"
        rows.append(f"| {scenario} | {label[kind]} | {share} | {cov} |")

    burst = np.full(500, START)
    hour = START - 3600.0 + np.sort(np.random.default_rng(args.seed).uniform(0.0, 3600.0, 36_000))
    live = START + np.arange(240_000) / 4000.0
    for kind in ("old", "new"):
        row("burst, 500 at once, 53 µs", kind, burst, lambda s: replay(s, burst, np.inf, 53e-6), 53e-6)
    for kind in ("old", "new"):
        row("burst, 5 polls of 100, 53 µs", kind, burst, lambda s: replay(s, burst, 1e5, 53e-6, 100), 53e-6)

    def backlog(cost: float) -> Callable[[Any], np.ndarray]:
        return lambda s: replay(s, hour, 5e4, cost)

    for cost, name in ((1e-3, "1 ms"), (53e-6, "53 µs")):
        for kind in ("old", "new"):
            row(f"1 h backlog at 50,000/s, {name}", kind, hour, backlog(cost), cost)
    for kind in ("old", "new"):
        row("4,000/s for 60 s, 1 ms", kind, live, lambda s: replay(s, live, 4000.0, 1e-3, 40), 1e-3)
    label["floor"] = f"new, ingest first (floor {BEHIND_EVENTS_PER_SECOND:g}/s)"
    drain = START - 3600.0 + np.sort(np.random.default_rng(args.seed).uniform(0.0, 3600.0, 360_000))
    row(
        "drain: 1 h at 100/s read at 50,000/s, 53 µs",
        "floor",
        drain,
        lambda s: replay(s, drain, 5e4, 53e-6, ingest_first=True),
        53e-6,
    )

    print("| scenario | sampler | scored | deciles hit | max/min | first/mean | χ² p |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"\nmachine: {machine('numpy', 'scipy')}; {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
