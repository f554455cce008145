"""Every registered detector through the same checks (river's ``check_estimator`` idea).

The checks enumerate :data:`monitor.drift.registry.DETECTORS`, so a detector registered there is covered without a
line here — unless it reads a signal the population below does not draw, which fails the first test. Each check
builds the detector as the verdict engine does (a slot of a :class:`VerdictEngine` on one seeded reference) and
feeds it batches of 100 events of a seeded population:

- the detectors share one stated budget: their stated rates add up to ``drift.false_alarms_per_million_events``;
- a stationary stream (new draws from the reference's population) stays quiet at the slot's stated rate, on this
  reference and on small baselines (150 and 500 rows: the null is a new draw's, whatever the baseline's size);
- a clear shift (every signal moves in the direction that is evidence) is seen;
- missing values (NaN, rows with NaN) neither crash nor fire: they are skipped, the detector's state is as if they
  had not been fed;
- state round-trip: detector state is not persisted — a restart rebuilds the detectors on the persisted reference
  (``Reference.to_dict``, JSON) — so a detector built on the round-tripped reference, and one ``reset`` after use,
  behave exactly as a fresh one on the same stream.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from scipy.stats import poisson

from monitor.config import DriftSettings
from monitor.drift import DETECTORS, DetectorSlot, DetectorSpec, VerdictEngine
from monitor.rolling.reference import Reference

BATCH = 100
QUIET_EVENTS = 20_000
CITIES = np.array(["paris", "oslo", "rome", "lima"])
SETTINGS = DriftSettings()


def population(rng: np.random.Generator, n: int, *, shifted: bool = False) -> dict[str, Any]:
    """``n`` events of every signal the engine is fed: a three-class classifier with two inputs that go together,
    two that do not, and one held input; ``shifted``: each signal moved in the direction that is evidence (γ and
    flicker up, confidence and margin down, the inputs spread out, the held input's categories reversed)."""
    z = rng.normal(size=(n, 1))
    x = np.hstack([z + 0.3 * rng.normal(size=(n, 1)), z + 0.3 * rng.normal(size=(n, 1)), rng.normal(size=(n, 2))])
    top = 1.0 - 0.6 * rng.beta(3.0 if shifted else 1.0, 3.0 if shifted else 6.0, n)  # max-probability in (0.4, 1]
    second = (1.0 - top) * rng.uniform(0.5, 1.0, n)  # the runner-up: a margin above 2·top − 1 (three classes)
    return {
        "gamma": rng.exponential(5e-3 if shifted else 1e-3, n),
        "flicker": np.where(rng.random(n) < (0.3 if shifted else 0.05), rng.integers(1, 17, n) / 32, 0.0),
        "confidence": top,
        "margin": top - second,
        "features": 3.0 * x + 2.0 if shifted else x,
        "held": {"city": rng.choice(CITIES, size=n, p=[0.1, 0.1, 0.3, 0.5] if shifted else [0.5, 0.3, 0.1, 0.1])},
    }


def reference() -> Reference:
    d = population(np.random.default_rng(0), 10_000)
    return Reference.from_arrays(
        gamma=d["gamma"],
        flicker=d["flicker"],
        features=d["features"],
        feature_names=["a", "b", "c", "d"],
        confidence=d["confidence"],
        margin=d["margin"],
        held=d["held"],
    )


REFERENCE = reference()


def slot(spec: DetectorSpec[Any, Any], ref: Reference = REFERENCE) -> DetectorSlot[Any, Any]:
    """``spec``'s slot as the verdict engine builds it on ``ref`` (with the other registered detectors: the CUSUMs
    share the stated rate)."""
    return next(s for s in VerdictEngine(ref, SETTINGS).slots if s.spec is spec)


def batches(seed: int, events: int, *, shifted: bool = False) -> Iterator[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    for _ in range(events // BATCH):
        yield population(rng, BATCH, shifted=shifted)


def with_missing(signals: dict[str, Any]) -> dict[str, Any]:
    """The batch with a missing value before each event: NaN values, rows of NaN (held inputs' values are
    categories, strings, with no missing value: unchanged)."""
    out = dict(signals)
    for name in ("gamma", "flicker", "confidence", "margin", "features"):
        v = np.asarray(signals[name], dtype=np.float64)
        both = np.full((2 * v.shape[0], *v.shape[1:]), np.nan)
        both[1::2] = v
        out[name] = both
    return out


def only_missing(n: int) -> dict[str, Any]:
    """``n`` events of nothing but missing values (held inputs: an empty batch)."""
    nan = np.full(n, np.nan)
    return {
        "gamma": nan,
        "flicker": nan,
        "confidence": nan,
        "margin": nan,
        "features": np.full((n, 4), np.nan),
        "held": {"city": np.zeros(0, dtype=str)},
    }


def run(s: DetectorSlot[Any, Any], stream: Iterator[dict[str, Any]]) -> list[str]:
    """Feed ``stream``; the detector's state after each batch (repr: NaN compares equal)."""
    out = []
    for signals in stream:
        s.feed(signals)
        out.append(repr(s.detector.state))
    return out


def mixed(seed: int) -> Iterator[dict[str, Any]]:
    """2,000 stationary events, then 3,000 shifted ones."""
    yield from batches(seed, 2_000)
    yield from batches(seed + 1, 3_000, shifted=True)


SPECS = pytest.mark.parametrize("spec", DETECTORS, ids=[spec.name for spec in DETECTORS])


def test_the_reference_gives_every_registered_detector_something_to_watch() -> None:
    engine = VerdictEngine(REFERENCE, SETTINGS)
    assert engine.detector_names == tuple(spec.name for spec in DETECTORS)
    assert len({spec.name for spec in DETECTORS}) == len(DETECTORS)
    drawn = population(np.random.default_rng(1), 1)
    for s in engine.slots:
        assert s.spec.signal in drawn, f"population() draws no {s.spec.signal!r} for {s.name}"
        assert s.detector.state.name == s.name
        assert s.stated_rate > 0.0


@SPECS
def test_a_stationary_stream_stays_quiet_at_the_stated_rate(spec: DetectorSpec[Any, Any]) -> None:
    s = slot(spec)
    run(s, batches(10, QUIET_EVENTS))
    expected = s.stated_rate * QUIET_EVENTS / 1e6
    assert s.detector.state.alarms <= poisson.ppf(0.999, expected), (s.detector.state, expected)


@SPECS
def test_a_clear_shift_is_seen(spec: DetectorSpec[Any, Any]) -> None:
    s = slot(spec)
    run(s, batches(20, 2_000))
    assert s.detector.state.alarms == 0
    run(s, batches(21, 3_000, shifted=True))
    assert s.detector.state.alarms >= 1 and s.detector.drift_detected


@SPECS
def test_missing_values_neither_crash_nor_fire(spec: DetectorSpec[Any, Any]) -> None:
    fresh, s = slot(spec), slot(spec)
    for _ in range(30):
        s.feed(only_missing(BATCH))
    assert not s.detector.drift_detected
    assert repr(s.detector.state) == repr(fresh.detector.state)  # nothing was counted
    assert run(s, (with_missing(b) for b in mixed(30))) == run(fresh, mixed(30))


@SPECS
def test_a_detector_rebuilt_on_the_persisted_reference_or_reset_behaves_as_a_fresh_one(
    spec: DetectorSpec[Any, Any],
) -> None:
    fresh = run(slot(spec), mixed(40))
    restored = Reference.from_dict(json.loads(json.dumps(REFERENCE.to_dict())))
    assert run(slot(spec, restored), mixed(40)) == fresh
    used = slot(spec)
    run(used, mixed(41))
    used.detector.reset()
    assert run(used, mixed(40)) == fresh


def test_every_detector_takes_an_even_share_of_one_stated_budget() -> None:
    for budget in (1.0, 50.0):
        engine = VerdictEngine(REFERENCE, DriftSettings(false_alarms_per_million_events=budget))
        rates = [s.stated_rate for s in engine.slots]
        assert sum(rates) <= budget * (1 + 1e-9) and max(rates) == pytest.approx(budget / len(rates))


def small_reference(rows: int, seed: int) -> Reference:
    d = population(np.random.default_rng(seed), rows)
    return Reference.from_arrays(
        gamma=d["gamma"],
        flicker=d["flicker"],
        features=d["features"],
        feature_names=["a", "b", "c", "d"],
        confidence=d["confidence"],
        margin=d["margin"],
        held=d["held"],
    )


@SPECS
@pytest.mark.parametrize("rows", [150, 500])
def test_a_small_baseline_stays_quiet_at_the_stated_rate(spec: DetectorSpec[Any, Any], rows: int) -> None:
    alarms, expected = 0, 0.0
    for seed in range(3):
        s = next((s for s in VerdictEngine(small_reference(rows, 50 + seed), SETTINGS).slots if s.spec is spec), None)
        if s is None:
            continue  # nothing to watch on so few rows (a CUSUM's calibration needs its minimum)
        run(s, batches(60 + seed, 10_000))
        alarms += s.detector.state.alarms
        expected += s.stated_rate * 10_000 / 1e6
    assert alarms <= poisson.ppf(0.999, expected), (spec.name, rows, alarms, expected)
