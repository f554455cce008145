"""Detection delay and false alarms of the drift detectors at their default settings (seeded, 200 runs).

Synthetic streams shaped like the real signals: γ is 0 for 30 % of events, lognormal around 1e-3
otherwise, and a ``tail`` share of events sits near a decision boundary (lognormal around 0.05);
flicker is k/32 (k = 1…16) for a ``rate`` share of events and 0 otherwise. A harmful shift triples
the boundary share (0.10 → 0.30) or the flickering share (0.05 → 0.15) at a known event.

Each run builds its reference from 5000 fresh events, feeds ``PRE`` stationary events (false alarms
are counted there) and then ``POST`` shifted events (delay = first alarm after the change).
Print the figures with ``python -m tests.unit.test_drift_quality``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np
import pytest

from monitor.drift import Cusum, DriftDetector, KsDrift, RateTest, Verdict, VerdictEngine
from monitor.rolling.reference import Reference

RUNS = 200
PRE = 5000
POST = 3000
REF_EVENTS = 5000


def gamma_stream(rng: np.random.Generator, n: int, tail: float = 0.10) -> np.ndarray:
    g = rng.lognormal(np.log(1e-3), 1.0, n)
    g[rng.random(n) < 0.3] = 0.0
    near = rng.random(n) < tail
    g[near] = np.minimum(rng.lognormal(np.log(0.05), 0.8, int(near.sum())), 1.0)
    return g


def flicker_stream(rng: np.random.Generator, n: int, rate: float = 0.05) -> np.ndarray:
    f = np.zeros(n)
    on = rng.random(n) < rate
    f[on] = rng.integers(1, 17, int(on.sum())) / 32
    return f


@dataclass(frozen=True)
class Quality:
    """Figures over RUNS runs: false alarms per 10k stationary events, missed share, delay mean / p90."""

    false_alarms_per_10k: float
    missed: float
    mean_delay: float
    p90_delay: float

    def row(self, name: str) -> str:
        return (
            f"| {name} | {self.false_alarms_per_10k:.3f} | {self.mean_delay:.0f} | {self.p90_delay:.0f} "
            f"| {100 * self.missed:.1f} % |"
        )


def _summarise(false_alarms: int, delays: list[float]) -> Quality:
    d = np.asarray(delays)
    hit = d[np.isfinite(d)]
    return Quality(
        false_alarms_per_10k=false_alarms / (RUNS * PRE) * 1e4,
        missed=float(np.mean(~np.isfinite(d))),
        mean_delay=float(hit.mean()) if hit.size else float("inf"),
        p90_delay=float(np.percentile(hit, 90)) if hit.size else float("inf"),
    )


def _measure(
    make: Callable[[np.ndarray], DriftDetector],
    draw: Callable[[np.random.Generator, int, bool], np.ndarray],
    step: int = 10,
) -> Quality:
    """Alarms during PRE stationary events, then the delay (to ``step`` events) until drift is signalled."""
    false_alarms, delays = 0, []
    for run in range(RUNS):
        rng = np.random.default_rng(run)
        det = make(draw(rng, REF_EVENTS, False))
        det.update(draw(rng, PRE, False))
        false_alarms += det.state.alarms
        post = draw(rng, POST, True)
        delay = float("inf")
        for i in range(0, POST, step):
            if det.update(post[i : i + step]).drift_detected:
                delay = float(i + step)
                break
        delays.append(delay)
    return _summarise(false_alarms, delays)


def _gamma(tail_after: float) -> Callable[[np.random.Generator, int, bool], np.ndarray]:
    return lambda rng, n, shifted: gamma_stream(rng, n, tail_after if shifted else 0.10)


def _flicker(rate_after: float) -> Callable[[np.random.Generator, int, bool], np.ndarray]:
    return lambda rng, n, shifted: flicker_stream(rng, n, rate_after if shifted else 0.05)


def _rate(ref: np.ndarray) -> RateTest:
    return RateTest(float(ref.mean()), float(ref.var()), ref.size)


DETECTORS: dict[str, Callable[[], Quality]] = {
    "gamma_cusum": lambda: _measure(lambda ref: Cusum(ref), _gamma(0.30)),
    "gamma_ks": lambda: _measure(lambda ref: KsDrift(ref), _gamma(0.30)),
    "flicker_cusum": lambda: _measure(lambda ref: Cusum(ref), _flicker(0.15)),
    "flicker_rate": lambda: _measure(_rate, _flicker(0.15)),
}

#: (false alarms per 10k events, mean delay, p90 delay) bounds; measured values are in the module's output
BOUNDS = {
    "gamma_cusum": (0.01, 200, 300),
    "gamma_ks": (0.01, 800, 1000),
    "flicker_cusum": (0.01, 350, 500),
    "flicker_rate": (0.01, 700, 800),
}


@cache
def quality(name: str) -> Quality:
    return DETECTORS[name]()


@pytest.mark.parametrize("name", DETECTORS)
def test_detector_default_quality(name: str) -> None:
    q = quality(name)
    max_fa, max_mean, max_p90 = BOUNDS[name]
    assert q.false_alarms_per_10k <= max_fa, q
    assert q.missed == 0.0, q
    assert q.mean_delay <= max_mean and q.p90_delay <= max_p90, q


ENGINE_RUNS = 40


def _engine_run(seed: int, kind: str) -> tuple[int, float]:
    """Verdict false alarms before the change (and harmful-shift after it) and delay to the expected verdict after
    it: input-shift, with fragility named for a rise of γ and flicker."""
    rng = np.random.default_rng(seed)
    n_feat = 5
    ref = Reference.from_arrays(
        gamma=gamma_stream(rng, REF_EVENTS),
        flicker=flicker_stream(rng, REF_EVENTS),
        features=rng.normal(size=(REF_EVENTS, n_feat)),
    )
    eng = VerdictEngine(ref)
    step, wrong = 50, 0
    for _ in range(0, PRE, step):
        eng.update(
            gamma=gamma_stream(rng, step), flicker=flicker_stream(rng, step), features=rng.normal(size=(step, n_feat))
        )
        wrong += eng.verdict is not Verdict.STABLE
    for i in range(0, POST, step):
        x = rng.normal(size=(step, n_feat))
        if kind == "fragility":
            eng.update(gamma=gamma_stream(rng, step, 0.3), flicker=flicker_stream(rng, step, 0.15), features=x)
        else:
            eng.update(gamma=gamma_stream(rng, step), flicker=flicker_stream(rng, step), features=x + [0.5, 0, 0, 0, 0])
        report = eng.report
        wrong += report.verdict is Verdict.HARMFUL_SHIFT  # neither shift lowers confidence: no evidence of a loss
        # γ and flicker rising is fragility: input-shift naming it
        if report.verdict is Verdict.INPUT_SHIFT and (kind == "input" or report.fragility):
            return wrong, float(i + step)
    return wrong, float("inf")


@cache
def engine_quality(kind: str) -> tuple[float, float, float, float]:
    """(wrong-verdict batches per 10k events, missed share, mean delay, p90 delay) over ENGINE_RUNS runs."""
    results = [_engine_run(seed, kind) for seed in range(ENGINE_RUNS)]
    wrong = sum(w for w, _ in results)
    d = np.array([t for _, t in results])
    hit = d[np.isfinite(d)]
    return (
        wrong / (ENGINE_RUNS * PRE) * 1e4,
        float(np.mean(~np.isfinite(d))),
        float(hit.mean()),
        float(np.percentile(hit, 90)),
    )


@pytest.mark.parametrize("kind", ["fragility", "input"])
def test_verdict_engine_names_the_shift_in_bounded_events_and_is_quiet_before(kind: str) -> None:
    wrong, missed, mean_delay, p90 = engine_quality(kind)
    assert wrong == 0.0 and missed == 0.0
    assert mean_delay <= 1000 and p90 <= 1200


def main() -> None:
    print(f"Synthetic streams, {RUNS} seeded runs, {PRE} stationary + {POST} shifted events each (defaults).\n")
    print("| detector | false alarms / 10k events | mean delay | p90 delay | missed |")
    print("|---|---|---|---|---|")
    for name in DETECTORS:
        print(quality(name).row(name))
    for kind in ("fragility", "input"):
        wrong, missed, mean_delay, p90 = engine_quality(kind)
        print(
            f"| VerdictEngine → {kind} ({ENGINE_RUNS} runs, 50-event batches) | {wrong:.3f} | {mean_delay:.0f} "
            f"| {p90:.0f} | {100 * missed:.1f} % |"
        )


if __name__ == "__main__":
    main()
