"""Calibrated false alarms: measured false alarms per 10⁶ stationary events vs the configured rate,
and the detection delay after a harmful shift beside it. Needs only numpy (no river).

Streams shaped like the real signals (as in tests/unit/test_drift_quality.py): γ is 0 for 30 % of events, lognormal
around 1e-3 otherwise, and a ``tail`` share of events (0.10) sits near a decision boundary (lognormal around 0.05);
flicker is k/32 (k = 1…16) for a ``rate`` share of events (0.05) and 0 otherwise. For every configured rate and
signal, REFS fresh references of 5,000 events each calibrate a CUSUM (the app's default detector: quantile 0.9, rate
ratio 2), then stationary events from the *same population* (not resampled from the reference, so the reference's
own sampling error counts) are fed and false alarms counted. A harmful shift (the boundary share tripling
0.10 → 0.30, or the flickering share 0.05 → 0.15) then gives the delay: events after the change until the alarm,
over DELAY_RUNS runs. The window tests are reported as the share of window tests that signal on stationary streams
(their stated rate is α per window test), and the per-feature test as the share of windows with any moved feature
out of 20 null features (Benjamini–Hochberg at FDR α: with no feature moved, the chance of any false discovery).

The input tests (``--inputs``) on per-segment baselines of 150–5,000 rows: for each size, fresh baselines of four
inputs (normal, skewed, heavy-tailed, bounded) and one held input; each builds a :class:`VerdictEngine` as a segment
does, and stationary events from the same population are fed; false alarms per detector are counted against its
stated share of ``drift.false_alarms_per_million_events`` — at the default budget (1 per 10⁶ for the verdict) and at
a budget large enough to measure (10⁴, the window tests' own α settings raised so that the budget binds).

Every detector on per-segment baselines (``--segments``): the baseline of a segment of 150–5,000 reference rows is
built as ``reference --segment-column`` builds it (:func:`~monitor.rolling.segment_baselines.segment_references`:
below 200 rows shrunk toward three other segments of 2,000 rows whose first input sits 0.05–0.1 σ apart), with γ,
flicker, max-probability and margin shaped like the real signals beside the inputs; stationary events of the
segment's own population are fed to its :class:`VerdictEngine` and each detector's false alarms counted against its
stated share, at a budget of 100 per 10⁶ (one per 10k, the verdict benchmark's). Beside it, the γ and flicker CUSUMs'
delay after the harmful shift above at that share, on references of 150–5,000 values: what the baseline's sampling
error costs in detection (the CUSUM is designed at its share's upper confidence bound).

Usage::

    .venv/bin/python bench/false_alarms.py            # the table in docs/BENCHMARKS.md (~4 min on 2 cores)
    .venv/bin/python bench/false_alarms.py --quick    # 10x fewer events
    .venv/bin/python bench/false_alarms.py --inputs   # the input tests on per-segment baselines only
    .venv/bin/python bench/false_alarms.py --segments # every detector on per-segment baselines of 150-5,000 rows
    .venv/bin/python bench/false_alarms.py --segments --rows 300 --baselines 40  # one size, more baselines
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from machine import machine  # bench/machine.py: the script's folder is on sys.path
from numpy.typing import NDArray

from monitor.config import DriftSettings
from monitor.drift import Cusum, FeatureDrift, KsDrift, RateTest, VerdictEngine, WindowPlan
from monitor.drift.calibrate import HORIZON, STREAMS
from monitor.drift.registry import DETECTORS
from monitor.rolling.reference import Reference

REF_EVENTS = 5000
REFS = 50
DELAY_RUNS = 200
CHUNK = 1_000_000

Draw = Callable[[np.random.Generator, int, bool], NDArray[np.float64]]


def gamma_stream(rng: np.random.Generator, n: int, shifted: bool = False) -> NDArray[np.float64]:
    g = rng.lognormal(np.log(1e-3), 1.0, n)
    g[rng.random(n) < 0.3] = 0.0
    near = rng.random(n) < (0.30 if shifted else 0.10)
    g[near] = np.minimum(rng.lognormal(np.log(0.05), 0.8, int(near.sum())), 1.0)
    return g


def flicker_stream(rng: np.random.Generator, n: int, shifted: bool = False) -> NDArray[np.float64]:
    f = np.zeros(n)
    on = rng.random(n) < (0.15 if shifted else 0.05)
    f[on] = rng.integers(1, 17, int(on.sum())) / 32
    return f


SIGNALS: dict[str, Draw] = {"gamma": gamma_stream, "flicker": flicker_stream}


def cusum_false_alarms(draw: Draw, rate: float, events: int) -> tuple[int, list[float], float]:
    """(alarms, thresholds, mean calibration seconds) over REFS references × events / REFS stationary events."""
    alarms, thresholds, seconds = 0, [], 0.0
    per_ref = events // REFS
    for r in range(REFS):
        rng = np.random.default_rng(1000 + r)
        t0 = time.perf_counter()
        det = Cusum(draw(rng, REF_EVENTS, False), false_alarms_per_million=rate)
        seconds += time.perf_counter() - t0
        thresholds.append(det.threshold)
        for start in range(0, per_ref, CHUNK):
            det.update(draw(rng, min(CHUNK, per_ref - start), False))
        alarms += det.state.alarms
    return alarms, thresholds, seconds / REFS


def cusum_delays(
    draw: Draw, rate: float, rows: int = REF_EVENTS, runs: int = DELAY_RUNS, step: int = 10, post: int = 3000
) -> NDArray[np.float64]:
    """Events from the shift to the alarm, per run on a fresh reference of ``rows`` values (inf: missed within
    ``post`` events)."""
    out = []
    for run in range(runs):
        rng = np.random.default_rng(run)
        det = Cusum(draw(rng, rows, False), false_alarms_per_million=rate)
        det.update(draw(rng, 2000, False))
        shifted = draw(rng, post, True)
        delay = float("inf")
        for i in range(0, post, step):
            if det.update(shifted[i : i + step]).drift_detected:
                delay = float(i + step)
                break
        out.append(delay)
    return np.asarray(out)


def window_share(make: Callable[[NDArray[np.float64]], KsDrift | RateTest], draw: Draw, events: int) -> tuple[int, int]:
    """(window tests that signalled, window tests) on stationary streams, over REFS references."""
    on, tests = 0, 0
    for r in range(REFS):
        rng = np.random.default_rng(2000 + r)
        det = make(draw(rng, REF_EVENTS, False))
        x = draw(rng, events // REFS, False)
        every = det.every
        det.update(x[: det.min_events - every])
        for i in range(det.min_events - every, x.size - every + 1, every):
            det.update(x[i : i + every])
            on += det.drift_detected
            tests += 1
    return on, tests


def feature_share(alpha: float, windows: int, n_features: int = 20, window: int = 500) -> tuple[int, int]:
    """(windows with any moved feature, windows) for null features, BH at FDR ``alpha``, no effect-size floor."""
    rng = np.random.default_rng(7)
    fd = FeatureDrift(
        rng.normal(size=(REF_EVENTS, n_features)),
        plan=WindowPlan(window=window, every=window),
        alpha=alpha,
        min_distance=0.0,
    )
    hits = 0
    for _ in range(windows):
        hits += bool(fd.update(rng.normal(size=(window, n_features))).moved)
    return hits, windows


def _ks(alpha: float, floor: float) -> Callable[[NDArray[np.float64]], KsDrift | RateTest]:
    return lambda r: KsDrift(r, alpha=alpha, min_distance=floor)


def _rate(alpha: float, floor: float) -> Callable[[NDArray[np.float64]], KsDrift | RateTest]:
    return lambda r: RateTest(float(r.mean()), float(r.var()), r.size, alpha=alpha, min_increase=floor)


def _rate_text(alarms: int, events: int) -> str:
    return f"{alarms / events * 1e6:.2f} ({alarms} in {events / 1e6:g}M)"


BASELINE_ROWS = (150, 300, 500, 1000, 2000, 5000)
CITIES = np.array(["paris", "oslo", "rome", "lima", "kyiv"])


def segment_rows(rng: np.random.Generator, n: int) -> tuple[NDArray[np.float64], NDArray[np.str_]]:
    """``n`` events of a segment: four inputs (normal, skewed, heavy-tailed, bounded) and one held input."""
    x = np.column_stack([rng.normal(size=n), rng.exponential(size=n), rng.standard_t(4, size=n), rng.uniform(size=n)])
    return x, rng.choice(CITIES, size=n, p=[0.4, 0.3, 0.15, 0.1, 0.05])


def input_false_alarms(rows: int, settings: DriftSettings, refs: int, events: int) -> dict[str, tuple[int, float]]:
    """Per input detector: (false alarms, stated rate per 10⁶) over ``refs`` baselines of ``rows`` rows, ``events``
    stationary events each."""
    out: dict[str, tuple[int, float]] = {}
    for r in range(refs):
        rng = np.random.default_rng(10_000 * rows + r)
        x, city = segment_rows(rng, rows)
        ref = Reference.from_arrays(gamma=np.zeros(rows), flicker=np.zeros(rows), features=x, held={"city": city})
        engine = VerdictEngine(ref, settings)
        for _ in range(events // 1000):
            y, c = segment_rows(rng, 1000)
            engine.update(features=y, held={"city": c})
        for slot in engine.slots:
            if slot.role == "input":
                alarms, _ = out.get(slot.name, (0, 0.0))
                out[slot.name] = (alarms + slot.detector.state.alarms, slot.stated_rate)
    return out


def print_input_tests(scale: float) -> None:
    refs, events = max(int(20 * scale), 4), 20_000
    loud = DriftSettings(false_alarms_per_million_events=1e4, feature_alpha=0.9, ks_alpha=0.9)
    print(
        f"\nInput tests on per-segment baselines ({refs} baselines x {events:,} stationary events per size; false "
        "alarms per 10k events, measured / stated):\n"
    )
    print("| baseline rows | budget / 10⁶ | features_ks | inputs_range | held_inputs | inputs_pca |")
    print("|---:|---:|---:|---:|---:|---:|")
    for settings in (DriftSettings(), loud):
        for rows in BASELINE_ROWS:
            got = input_false_alarms(rows, settings, refs, events)
            cells = [
                f"{got[n][0] / (refs * events) * 1e4:.3g} / {got[n][1] / 100:.3g}" if n in got else "—"
                for n in ("features_ks", "inputs_range", "held_inputs", "inputs_pca")
            ]
            print(f"| {rows} | {settings.false_alarms_per_million_events:g} | {' | '.join(cells)} |", flush=True)


def segment_signals(rng: np.random.Generator, n: int, offset: float = 0.0) -> dict[str, Any]:
    """``n`` events of a segment (its first input moved by ``offset``): inputs, held input and the model's signals."""
    x, city = segment_rows(rng, n)
    x[:, 0] += offset
    conf = np.clip(1.0 - rng.exponential(0.06, n), 0.4, 1.0)
    second = (1.0 - conf) * rng.uniform(0.5, 1.0, n)
    return {
        "features": x,
        "held": {"city": city},
        "gamma": gamma_stream(rng, n),
        "flicker": flicker_stream(rng, n),
        "confidence": conf,
        "margin": conf - second,
    }


def segment_baseline(rng: np.random.Generator, rows: int) -> Reference | None:
    """The baseline of a segment of ``rows`` reference rows beside three others (None: it would warm up)."""
    from monitor.rolling.segment_baselines import segment_references

    parts = [("s", segment_signals(rng, rows))]
    parts += [(f"o{i}", segment_signals(rng, 2000, off)) for i, off in enumerate((0.1, -0.1, 0.05))]
    segs = np.concatenate([np.full(p["gamma"].size, name) for name, p in parts])

    def joined(key: str) -> NDArray[np.float64]:
        return np.concatenate([p[key] for _, p in parts])

    refs = segment_references(
        segs,
        gamma=joined("gamma"),
        flicker=joined("flicker"),
        features=joined("features"),
        confidence=joined("confidence"),
        margin=joined("margin"),
        held={"city": np.concatenate([p["held"]["city"] for _, p in parts])},
    )
    return refs.get("s")


def segment_false_alarms(rows: int, settings: DriftSettings, refs: int, events: int) -> tuple[dict[str, Any], str]:
    """Per detector: [false alarms, stated rate per 10⁶, events, the most from one baseline] over ``refs`` baselines
    of a ``rows``-row segment, ``events`` stationary events each; and what the baselines were (own, shrunk)."""
    out: dict[str, Any] = {}
    kinds: list[str] = []
    for r in range(refs):
        rng = np.random.default_rng(20_000 * rows + r)
        ref = segment_baseline(rng, rows)
        if ref is None:
            kinds.append("warms up")
            continue
        kinds.append("own" if ref.basis is None else ref.basis.kind)
        engine = VerdictEngine(ref, settings)
        for _ in range(events // 1000):
            engine.update(**segment_signals(rng, 1000))
        for slot in engine.slots:
            got = out.setdefault(slot.name, [0, slot.stated_rate, 0, 0])
            got[0] += slot.detector.state.alarms
            got[2] += events
            got[3] = max(got[3], slot.detector.state.alarms)
    said = ", ".join(f"{kinds.count(k)} {k}" for k in sorted(set(kinds)))
    return out, said


def print_segment_tests(scale: float, sizes: tuple[int, ...] = BASELINE_ROWS, baselines: int = 10) -> None:
    refs, events = max(int(baselines * scale), 2), 50_000
    settings = DriftSettings(false_alarms_per_million_events=100.0)
    print(
        f"\nEvery detector on per-segment baselines ({refs} baselines x {events:,} stationary events per size, budget "
        f"{settings.false_alarms_per_million_events:g} per 10⁶; false alarms per 10k events, measured / stated):\n"
    )
    names = [spec.name for spec in DETECTORS]
    print("| baseline rows | baselines | " + " | ".join(names) + " | all |")
    print("|---:|---|" + "---:|" * (len(names) + 1))
    over: list[str] = []
    for rows in sizes:
        got, said = segment_false_alarms(rows, settings, refs, events)
        over += [
            f"{n} at {rows} rows: {v[0]} alarms, {v[3]} from one baseline"
            for n, v in got.items()
            if v[0] / v[2] * 1e6 > 2 * v[1]
        ]
        cells = [f"{got[n][0] / got[n][2] * 1e4:.2g} / {got[n][1] / 100:.2g}" if n in got else "—" for n in names]
        total = sum(v[0] for v in got.values()) / max(1, max((v[2] for v in got.values()), default=1)) * 1e4
        print(
            f"| {rows} | {said} | {' | '.join(cells)} | {total:.2g} / {settings.false_alarms_per_million_events / 100:g} |",
            flush=True,
        )
    print(f"\nOver 2x the stated share: {'; '.join(over) or 'none'}")
    print_segment_delays(scale, settings.false_alarms_per_million_events / len(DETECTORS), sizes)


def print_segment_delays(scale: float, share: float, sizes: tuple[int, ...] = BASELINE_ROWS) -> None:
    """The γ and flicker CUSUMs' delay after the harmful shift at ``share`` (per 10⁶), per reference size."""
    runs = max(int(50 * scale), 5)
    print(
        f"\nDelay after a harmful shift (γ boundary share 0.10 → 0.30, flicker share 0.05 → 0.15) at a CUSUM's share "
        f"({share:g} per 10⁶), events after the shift, median / p90 over {runs} baselines of each size:\n"
    )
    print("| baseline rows | gamma_cusum | flicker_cusum |")
    print("|---:|---:|---:|")
    for rows in sizes:
        cells = []
        for draw in (gamma_stream, flicker_stream):
            d = cusum_delays(draw, share, rows=rows, runs=runs)
            hit = d[np.isfinite(d)]
            missed = f" ({np.mean(~np.isfinite(d)):.0%} missed)" if hit.size < d.size else ""
            cells.append(f"{np.median(hit):.0f} / {np.percentile(hit, 90):.0f}{missed}" if hit.size else "missed")
        print(f"| {rows} | {' | '.join(cells)} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rates", type=float, nargs="*", default=[1.0, 10.0, 100.0], help="per 10^6 events")
    parser.add_argument("--quick", action="store_true", help="10x fewer events")
    parser.add_argument("--inputs", action="store_true", help="only the input tests on per-segment baselines")
    parser.add_argument("--segments", action="store_true", help="only every detector on per-segment baselines")
    parser.add_argument("--rows", type=int, nargs="*", default=list(BASELINE_ROWS), help="--segments: baseline sizes")
    parser.add_argument("--baselines", type=int, default=10, help="--segments: baselines per size")
    args = parser.parse_args()
    scale = 0.1 if args.quick else 1.0
    t_start = time.perf_counter()
    print(f"command: .venv/bin/python bench/false_alarms.py {' '.join(sys.argv[1:])}".rstrip())
    print(f"machine: {machine('numpy', 'scipy')}")
    if args.segments:
        print_segment_tests(scale, tuple(args.rows), args.baselines)
        print(f"\n(total {time.perf_counter() - t_start:.0f} s)")
        return
    if args.inputs:
        print_input_tests(scale)
        print(f"\n(total {time.perf_counter() - t_start:.0f} s)")
        return
    print(
        f"setup: {REFS} references of {REF_EVENTS} events per cell; calibration {STREAMS} x {HORIZON} bootstrap "
        f"events; delay over {DELAY_RUNS} runs (shift after 2,000 stationary events, 10-event steps)\n"
    )
    print(
        "| detector | configured / 10⁶ events | measured / 10⁶ events | ratio | threshold h (mean) "
        "| calibration | mean delay | p90 delay | missed |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for rate in args.rates:
        events = int(max(2e7, 100 / rate * 1e6) * scale)  # about 100 alarms expected at the configured rate
        for name, draw in SIGNALS.items():
            alarms, hs, secs = cusum_false_alarms(draw, rate, events)
            d = cusum_delays(draw, rate)
            hit = d[np.isfinite(d)]
            measured = alarms / events * 1e6
            print(
                f"| {name}_cusum | {rate:g} | {_rate_text(alarms, events)} | {measured / rate:.2f} "
                f"| {np.mean(hs):.2f} | {secs * 1e3:.0f} ms | {hit.mean():.0f} | {np.percentile(hit, 90):.0f} "
                f"| {100 * np.mean(~np.isfinite(d)):.1f} % |",
                flush=True,
            )
    events = int(2e7 * scale)
    print("\nWindow tests on stationary streams (share of window tests that signal; the stated rate is α per test):\n")
    print("| detector | α per window test | effect-size floor | signalled / tests | share |")
    print("|---|---:|---:|---:|---:|")
    cases: list[tuple[str, float, float, Callable[[NDArray[np.float64]], KsDrift | RateTest], Draw]] = []
    for alpha in (1e-4, 1e-2):
        for floor in (0.1, 0.0) if alpha == 1e-4 else (0.0,):
            cases.append(("gamma_ks", alpha, floor, _ks(alpha, floor), gamma_stream))
            cases.append(("flicker_rate", alpha, floor / 10, _rate(alpha, floor / 10), flicker_stream))
    for name, alpha, floor, make, draw in cases:
        on, tests = window_share(make, draw, events if alpha < 1e-3 else events // 10)
        print(f"| {name} | {alpha:g} | {floor:g} | {on} / {tests} | {on / tests:.2e} |", flush=True)
    print("\nPer-feature KS, 20 null features, Benjamini–Hochberg, no effect-size floor (windows of 500 rows):\n")
    print("| FDR α | windows with any moved feature / windows | share |")
    print("|---:|---:|---:|")
    for alpha in (0.01, 0.05):
        hits, windows = feature_share(alpha, int(2000 * scale))
        print(f"| {alpha:g} | {hits} / {windows} | {hits / windows:.3f} |", flush=True)
    print_input_tests(scale)
    print(f"\n(total {time.perf_counter() - t_start:.0f} s)")


if __name__ == "__main__":
    main()
