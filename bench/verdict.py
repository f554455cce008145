"""A verdict on a ratio target from paired measurements taken on a machine whose speed drifts.

The benchmarks compare two paths timed side by side (the scorer and onnxruntime alone; decode+sample and raw
kafka-python), one pair per round or repeat, so that a slow spell of the machine moves both sides of a pair. One
pair is still noisy, and one run's median moves with the machine (docs/BENCHMARKS.md, its introduction: the
machine's speed drifts within minutes). So a target is judged on many pairs, by the median of their ratios and a
bootstrap confidence interval of that median:

- **met**: the interval's lower end is at or above the target;
- **not met**: its upper end is below the target;
- **undecided**: the interval holds the target — the pairs cannot tell, however their median falls.

The interval is a percentile bootstrap of the median (resampling the pairs with replacement), seeded, so the same
pairs always give the same verdict.

    >>> verdict([0.9, 0.92, 0.95, 0.91, 0.93, 0.94, 0.9, 0.96], 0.85).word
    'met'
    >>> verdict([0.7, 0.72, 0.69, 0.71, 0.74, 0.7, 0.73, 0.68], 0.85).word
    'not met'
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

#: bootstrap resamples: the interval's ends move by < 0.005 between seeds at this count for the ratios here
RESAMPLES = 10_000
LEVEL = 0.95


def median_ci(
    values: Sequence[float], level: float = LEVEL, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float]:
    """Percentile-bootstrap ``level`` interval of the median of ``values`` (at least 2 finite values)."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size < 2 or not np.all(np.isfinite(x)):
        raise ValueError(f"need at least 2 finite values for an interval; got {list(values)!r}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1); got {level}")
    rng = np.random.default_rng(seed)
    medians = np.median(x[rng.integers(0, x.size, size=(resamples, x.size))], axis=1)
    lo, hi = np.quantile(medians, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return float(lo), float(hi)


@dataclass(frozen=True)
class Verdict:
    target: float
    n: int
    median: float
    low: float
    high: float
    at_target: int  # pairs whose ratio is >= target

    @property
    def word(self) -> str:
        if self.low >= self.target:
            return "met"
        if self.high < self.target:
            return "not met"
        return "undecided"

    def __str__(self) -> str:
        return (
            f"{self.median:.2f} [{self.low:.2f}, {self.high:.2f}], {self.at_target}/{self.n} ≥ {self.target:g}: "
            f"{self.word}"
        )


def verdict(ratios: Sequence[float], target: float, seed: int = 0) -> Verdict:
    """Judge paired ratios (higher is better) against ``target``; see the module docstring."""
    lo, hi = median_ci(ratios, seed=seed)
    x = np.asarray(ratios, dtype=np.float64)
    return Verdict(target, int(x.size), float(np.median(x)), lo, hi, int(np.count_nonzero(x >= target)))


def print_cell_verdicts(runs_ratios: Iterable[tuple[str, int, int, float]], target: float, runs: int) -> None:
    """The scorer benchmarks' verdict table: per (model, intra-op threads, B) cell, its runs' paired ratios
    (scorer / bound; one ``(model, threads, B, ratio)`` per run and cell) judged against ``target``."""
    cells: dict[tuple[str, int, int], list[float]] = {}
    for label, threads, batch, ratio in runs_ratios:
        cells.setdefault((label, threads, batch), []).append(ratio)
    print(
        f"\n{runs} runs; per cell the paired ratio of each run (scorer / bound, median over its rounds), judged "
        f"against {target:g}: median [95 % bootstrap interval of the median], runs at or above the target, verdict\n"
    )
    print("| model | intra-op threads | B | paired scorer / bound, per run: min – max | median [95 % CI], verdict |")
    print("|---|---:|---:|---:|---|")
    for (label, threads, batch), ratios in cells.items():
        print(
            f"| {label} | {threads or 'default'} | {batch} | {min(ratios):.2f} – {max(ratios):.2f} "
            f"| {verdict(ratios, target)} |"
        )
