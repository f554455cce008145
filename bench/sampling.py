"""Sampling under bursts and backlogs (issue 25 part 1): the rate-budget sampler of the last commit against the
work-conserving one, on simulated time.

The old sampler is the one in ``git show HEAD:monitor/sampler/...`` (read with ``git show``, copied into a
temporary package; nothing in the checkout changes); ``--old-ref`` picks another commit. Both are driven exactly as
the pipeline drives them: one ``sample_many`` per poll (``kafka.max_poll_records`` = 2000 events), the kept events
scored in micro-batches of 256 whose cost is reported to ``observe_cost`` (the new sampler only), at a fixed,
simulated scoring cost per event, so the figures do not depend on this machine's speed. Scenarios:

- **burst**: N events produced at once (the clock does not move while they are read), default settings: the old
  default budget (200 events/s, 2 s burst) against the new default (no cap, ``cpu_share`` 0.8 of ``--cpus``);
- **backlog**: an hour of traffic (10 events/s) read at once after a restart at 50,000 events/s, a dear model
  (1 ms per event: 1 CPU at 0.8 scores 800 events/s): the old budget at 200 events/s, the new one at its CPU share;
  how the kept events cover the hour (5-minute buckets) and a KS statistic of their event times against uniform.
- **overload**: 4,000 events/s for 120 s at 1 ms per event: kept events/s after the first 20 s against the budget.

Usage::

    .venv/bin/python bench/sampling.py [--cpus 1] [--burst 500] [--old-ref HEAD]
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Protocol

import numpy as np
from scipy import stats

from monitor.events import InferenceEvent
from monitor.sampler.stratified import StratifiedSampler

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import machine  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
POLL = 2000
BATCH = 256


class _Sampler(Protocol):
    def sample_many(self, events: list[InferenceEvent], now: float) -> list[float]: ...


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


def replay(sampler: _Sampler, times: np.ndarray, ingest_per_second: float, cost_seconds: float) -> np.ndarray:
    """Weights of events with these event times, read in polls at ``ingest_per_second`` (inf: all at once)."""
    observe = getattr(sampler, "observe_cost", None)
    weights = np.zeros(times.shape[0])
    features = np.zeros(2)
    for k in range(0, times.shape[0], POLL):
        now = 1e6 + (0.0 if np.isinf(ingest_per_second) else k / ingest_per_second)
        events = [InferenceEvent(f"e{k + j}", "m", "1", features, float(t)) for j, t in enumerate(times[k : k + POLL])]
        w = sampler.sample_many(events, now)
        weights[k : k + len(w)] = w
        kept = int(np.count_nonzero(np.asarray(w) > 0))
        for b in range(0, kept, BATCH):
            n = min(BATCH, kept - b)
            if observe is not None:
                observe("m", n, n * cost_seconds)
    return weights


def coverage(
    times: np.ndarray, weights: np.ndarray, span: float, bucket: float
) -> tuple[int, int, int, int, float, int]:
    """(kept, buckets covered, fewest and most kept per bucket, KS statistic against uniform over the span, kept in
    the first bucket)."""
    kept = times[weights > 0]
    counts = np.bincount((kept // bucket).astype(int), minlength=int(span // bucket))
    ks = float(stats.kstest(kept / span, "uniform").statistic) if kept.size else 1.0
    return kept.size, int(np.count_nonzero(counts)), int(counts.min()), int(counts.max()), ks, int(counts[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpus", type=float, default=1.0, help="CPUs the new sampler may use (default 1)")
    ap.add_argument("--burst", type=int, default=500, help="events in the burst (default 500)")
    ap.add_argument(
        "--burst-cost-us",
        type=float,
        default=53.0,
        help="µs per event in the burst (default 53: 100 boosted trees, n = 20, BENCHMARKS.md engine vs bound)",
    )
    ap.add_argument("--old-ref", default="HEAD", help="commit of the old sampler (default HEAD)")
    args = ap.parse_args()
    old = load_old(args.old_ref)

    def before(rate: float) -> _Sampler:
        sampler: _Sampler = old.StratifiedSampler(rate, burst_seconds=2.0)
        return sampler

    def after(cost_seconds: float) -> StratifiedSampler:
        sampler = StratifiedSampler(cpus=args.cpus, cpu_share=0.8, burst_seconds=2.0)
        sampler.observe_cost("m", 1000, 1000 * cost_seconds)  # the cost measured on the reference at start-up
        return sampler

    rows = []
    burst = np.full(args.burst, 1e6)
    cost = args.burst_cost_us * 1e-6
    for name, sampler in (("before (200 events/s budget)", before(200.0)), ("after (cpu_share 0.8)", after(cost))):
        w = replay(sampler, burst, np.inf, cost)
        rows.append(f"| burst of {args.burst} at once | {name} | {np.count_nonzero(w)} of {args.burst} scored | |")
    fresh = StratifiedSampler(cpus=args.cpus, cpu_share=0.8, burst_seconds=2.0)  # no reference scored: cost unknown
    w = replay(fresh, burst, np.inf, cost)
    rows.append(
        f"| burst of {args.burst} at once | after, cost not yet measured | {np.count_nonzero(w)} of {args.burst} scored | |"
    )

    hour = 1e6 - 3600.0 + np.sort(np.random.default_rng(0).uniform(0.0, 3600.0, 36_000))
    for name, sampler in (("before (200 events/s budget)", before(200.0)), ("after (cpu_share 0.8)", after(1e-3))):
        w = replay(sampler, hour, 50_000.0, 1e-3)
        kept, covered, lo, hi, ks, first = coverage(hour - hour.min(), w, 3600.0, 300.0)
        rows.append(
            f"| 1 h backlog, 36,000 events at once | {name} | {kept} scored; {covered}/12 five-minute buckets, "
            f"{lo}–{hi} per bucket, {first} in the first | KS {ks:.3f} |"
        )

    times = np.arange(480_000) / 4000.0
    for name, sampler in (("before (200 events/s budget)", before(200.0)), ("after (cpu_share 0.8)", after(1e-3))):
        w = replay(sampler, times, 4000.0, 1e-3)
        late = np.count_nonzero(w[times >= 20.0]) / 100.0
        ks = coverage(times, w, 120.0, 10.0)[4]
        rows.append(f"| 4,000 events/s for 120 s, 1 ms/event | {name} | {late:.0f} events/s scored | KS {ks:.3f} |")

    print("| scenario | sampler | scored | event-time uniformity |")
    print("|---|---|---|---|")
    print("\n".join(rows))
    print(f"\nmachine: {machine('numpy', 'scipy')}; new sampler at {args.cpus:g} CPU × 0.8")


if __name__ == "__main__":
    main()
