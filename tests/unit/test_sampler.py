"""Stage 2: budgeted uniform and class-stratified sampling (monitor/sampler/), on simulated time."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from monitor.config import SamplerSettings
from monitor.errors import ConfigError
from monitor.events import InferenceEvent, LivePrediction
from monitor.sampler.base import Sampler, fraction_and_weight
from monitor.sampler.budget import CpuBucket, RateEstimator, TokenBucket, WindowCounter, water_fill
from monitor.sampler.stratified import StratifiedSampler
from monitor.sampler.uniform import UniformSampler
from monitor.sampler.uniform_config import UniformSamplerConfig

FEATURES = np.zeros(2)


def make_event(model: str = "m", label: int | None = None, i: int = 0) -> InferenceEvent:
    prediction = None if label is None else LivePrediction(label=label)
    return InferenceEvent(f"e{i}", model, "1", FEATURES, 0.0, prediction=prediction)


def run(sampler: Sampler, events: Sequence[InferenceEvent], rate: float, start: float = 0.0) -> np.ndarray:
    """Offer ``events`` evenly at ``rate`` per second; return each one's weight (0 = dropped)."""
    return np.array([sampler.sample(ev, start + i / rate) for i, ev in enumerate(events)])


def class_stream(n: int, shares: Sequence[float], seed: int = 0) -> tuple[np.ndarray, list[InferenceEvent]]:
    labels = np.random.default_rng(seed).choice(len(shares), size=n, p=shares)
    return labels, [make_event(label=int(c), i=i) for i, c in enumerate(labels)]


# ---------------------------------------------------------------------- building blocks


def test_token_bucket_refills_up_to_burst_and_forced_takes_borrow() -> None:
    bucket = TokenBucket(rate_per_second=10.0, burst=2.0)
    assert [bucket.take(0.0) for _ in range(3)] == [True, True, False]
    assert bucket.take(0.1) and not bucket.take(0.1)
    bucket.force(0.1)
    bucket.force(0.1)
    bucket.force(0.1)
    assert bucket.tokens == -2.0  # floored at -burst
    assert not bucket.available(0.35) and bucket.available(0.5)


def test_rate_estimator_tracks_a_rate_change() -> None:
    est = RateEstimator(window_seconds=5.0)
    assert est.rate(0.0) == 0.0
    for i in range(1000):  # 100/s for 10 s
        est.update(i / 100.0)
    assert est.rate(10.0) == pytest.approx(100.0, rel=0.02)
    for i in range(1000, 5000):  # then 400/s for 10 s
        est.update(10.0 + (i - 1000) / 400.0)
    assert est.rate(20.0) == pytest.approx(400.0 - 300.0 * np.exp(-2.0), rel=0.02)


def test_window_counter_forgets_beyond_the_horizon() -> None:
    window = WindowCounter(horizon_seconds=10.0, buckets=5)
    for t in range(30):
        window.add(float(t), kept=t >= 25)
    assert window.totals(29.0) == (10, 5)
    assert window.totals(100.0) == (0, 0)


def test_water_fill_shares_what_capped_keys_leave() -> None:
    assert water_fill(10.0, {"a": 1.0, "b": 100.0, "c": 100.0}) == {"a": 1.0, "b": 4.5, "c": 4.5}
    assert water_fill(10.0, {"a": 100.0, "b": 100.0}, {"a": 3.0, "b": 1.0}) == {"a": 7.5, "b": 2.5}
    assert water_fill(10.0, {"a": 2.0, "b": 3.0}) == {"a": 2.0, "b": 3.0}
    assert water_fill(10.0, {"a": 5.0, "b": 0.0}, {"a": 0.0}) == {"a": 0.0, "b": 0.0}


def test_fraction_and_weight_edge_cases() -> None:
    assert fraction_and_weight(0, 0) == (1.0, 1.0)
    assert fraction_and_weight(0, 10) == (0.0, float("inf"))
    assert fraction_and_weight(25, 100) == (0.25, 4.0)


# ---------------------------------------------------------------------- uniform


def test_uniform_sampler_respects_the_budget() -> None:
    sampler = UniformSampler(UniformSamplerConfig(target_per_second=500.0), seed=1)
    weights = run(sampler, [make_event()] * 150_000, rate=10_000.0)  # 15 s at 10 000 events/s
    kept_per_second = np.count_nonzero(weights[20_000:]) / 13.0  # after a 2 s warm-up
    assert kept_per_second == pytest.approx(500.0, rel=0.03)
    assert np.count_nonzero(weights) / 15.0 < 500.0 * 1.1  # warm-up overshoot stays within one burst


def test_uniform_sampler_keeps_everything_under_budget() -> None:
    weights = run(UniformSampler(UniformSamplerConfig(target_per_second=500.0)), [make_event()] * 2000, rate=100.0)
    assert np.all(weights == 1.0)


def test_uniform_sampler_is_uniform_within_a_poll_batch() -> None:
    # Kafka hands over batches that share one ``now``: acceptance must not favour the head of a batch
    sampler = UniformSampler(UniformSamplerConfig(target_per_second=500.0), seed=2)
    positions = []
    for batch in range(200):  # 1000-event batches, 10 per second
        for j in range(1000):
            if sampler.keep(make_event(i=j), now=batch / 10.0):
                positions.append(j)
    late = np.array(positions[len(positions) // 5 :])
    assert np.mean(late) == pytest.approx(499.5, abs=15.0)
    assert np.histogram(late, bins=4, range=(0, 1000))[0].min() > 0.2 * len(late)


def test_uniform_sampler_keeps_classes_in_proportion() -> None:
    labels, events = class_stream(100_000, [0.9, 0.09, 0.01])
    weights = run(UniformSampler(UniformSamplerConfig(target_per_second=1000.0), seed=3), events, rate=10_000.0)
    kept = weights > 0
    for c, share in enumerate([0.9, 0.09, 0.01]):
        assert np.count_nonzero(kept & (labels == c)) / np.count_nonzero(kept) == pytest.approx(share, abs=0.015)


def test_uniform_sampler_shares_the_budget_between_models() -> None:
    sampler = UniformSampler(UniformSamplerConfig(target_per_second=500.0), seed=4)
    kept = {"big": 0, "small": 0}
    for i in range(100_000):  # 10 s: "big" offers 9 900/s, "small" 100/s
        model = "small" if i % 100 == 0 else "big"
        if i >= 20_000 and sampler.keep(make_event(model=model), now=i / 10_000.0):
            kept[model] += 1
        elif i < 20_000:
            sampler.keep(make_event(model=model), now=i / 10_000.0)
    assert kept["small"] / 8.0 == pytest.approx(100.0, rel=0.05)  # all of it: it asks less than a fair share
    assert kept["big"] / 8.0 == pytest.approx(400.0, rel=0.05)
    snap = sampler.snapshot()
    assert snap["small"].target_per_second == pytest.approx(100.0, rel=0.05)
    assert snap["big"].target_per_second == pytest.approx(400.0, rel=0.05)


def _two_models(
    sampler: UniformSampler, seconds: float, rate: float, models: Sequence[str], start: float = 0.0
) -> dict[str, int]:
    """Offer ``models`` alternately, ``rate`` events/s each, in 10 ms polls (``sample_many``); kept count per model."""
    kept = dict.fromkeys(models, 0)
    per_poll = int(rate / 100.0)
    for k in range(int(seconds * 100)):
        events = [make_event(model=m, i=j) for j in range(per_poll) for m in models]
        for ev, w in zip(events, sampler.sample_many(events, start + k / 100.0), strict=True):
            kept[ev.model] += w > 0
    return kept


@pytest.mark.parametrize("cls", [UniformSampler, StratifiedSampler])
def test_sampler_gives_two_overloaded_models_half_the_budget_each(cls: type[UniformSampler]) -> None:
    sampler = cls(UniformSamplerConfig(500.0), seed=14)
    _two_models(sampler, 5.0, 5000.0, ["a", "b"])  # warm-up: each offers 10x the whole budget
    kept = _two_models(sampler, 20.0, 5000.0, ["a", "b"], start=5.0)
    assert kept["a"] / 20.0 == pytest.approx(250.0, rel=0.05)
    assert kept["b"] / 20.0 == pytest.approx(250.0, rel=0.05)
    assert (kept["a"] + kept["b"]) / 20.0 <= 500.0 * 1.02  # one budget for both, not one each


@pytest.mark.parametrize("cls", [UniformSampler, StratifiedSampler])
def test_sampler_passes_an_idle_models_share_to_the_busy_one(cls: type[UniformSampler]) -> None:
    sampler = cls(UniformSamplerConfig(500.0), seed=15)
    _two_models(sampler, 20.0, 5000.0, ["a", "b"])
    _two_models(sampler, 60.0, 5000.0, ["b"], start=20.0)  # "a" goes idle: its rate estimate decays
    kept = _two_models(sampler, 20.0, 5000.0, ["b"], start=80.0)
    assert kept["b"] / 20.0 == pytest.approx(500.0, rel=0.03)
    assert sampler.snapshot()["a"].target_per_second < 5.0


@pytest.mark.parametrize("cls", [UniformSampler, StratifiedSampler])
def test_sampler_starts_a_new_models_bucket_full(cls: type[UniformSampler]) -> None:
    sampler = cls(UniformSamplerConfig(100.0, burst_seconds=1.0), seed=16)
    _two_models(sampler, 10.0, 1000.0, ["a"])  # a busy model holds the budget
    burst = [make_event(model="b", i=i) for i in range(5)]  # a newcomer's first poll: 5 events at one instant
    assert all(w > 0 for w in sampler.sample_many(burst, 10.0))  # its share's burst, not one token


def test_sampler_budget_is_described_as_one_budget_shared_by_all_models() -> None:
    # every place that explains `events_per_second` says the same thing as the code
    repo = Path(__file__).resolve().parents[2]
    texts = {
        name: (repo / name).read_text(encoding="utf-8")
        for name in ("docs/OPERATIONS.md", "docs/METRICS.md", "docs/SPEC-NOTES.md", "deploy/monitor.example.yaml")
    }
    description = str(SamplerSettings.model_fields["events_per_second"].description)
    texts["SamplerSettings.events_per_second"] = f"`events_per_second`: {description}"
    for name, text in texts.items():
        # paragraphs (or list items) about the setting; harmonic_sampler_capacity_events_per_second is a metric
        setting = re.compile(r"(?<!capacity_)events_per_second")
        paragraphs = [p for p in re.split(r"\n\s*\n|\n(?=- )", text) if setting.search(p)]
        assert paragraphs, name
        assert not [p for p in paragraphs if re.search(r"per[ -]model", p)], f"{name} calls the budget per model"
        assert "shared by all models" in text, f"{name} does not say the budget is shared by all models"


def test_uniform_sampler_explicit_model_target() -> None:
    sampler = UniformSampler(UniformSamplerConfig(target_per_second=500.0, model_targets={"a": 50.0}), seed=5)
    models = ["a" if i % 2 else "b" for i in range(100_000)]
    weights = run(sampler, [make_event(model=m) for m in models], rate=10_000.0)
    late = np.arange(100_000) >= 20_000
    a = np.array(models) == "a"
    assert np.count_nonzero((weights > 0) & a & late) / 8.0 == pytest.approx(50.0, rel=0.1)
    assert np.count_nonzero((weights > 0) & ~a & late) / 8.0 == pytest.approx(450.0, rel=0.05)


def test_uniform_sampler_forced_keeps_are_always_kept() -> None:
    sampler = UniformSampler(UniformSamplerConfig(target_per_second=1.0), seed=6)
    forced = [sampler.sample(make_event(i=i), now=i / 1000.0, force=i % 10 == 0) for i in range(10_000)]
    assert all(w == 1.0 for w in forced[::10])
    snap = sampler.snapshot()["m"]
    assert snap.forced_total == 1000 and snap.kept_total >= 1000
    assert snap.kept_total - snap.forced_total <= 2  # the forced keeps used the whole budget


def test_uniform_sampler_fraction_metric_matches_the_counts() -> None:
    sampler = UniformSampler(UniformSamplerConfig(target_per_second=200.0, horizon_seconds=60.0), seed=7)
    labels, events = class_stream(50_000, [0.7, 0.3])
    weights = run(sampler, events, rate=5000.0)  # 10 s, all inside the horizon
    snap = sampler.snapshot()["m"]
    assert snap.seen_total == snap.seen_recent == 50_000
    assert snap.kept_total == snap.kept_recent == np.count_nonzero(weights)
    assert snap.fraction == pytest.approx(snap.kept_recent / snap.seen_recent)
    assert snap.weight == pytest.approx(1.0 / snap.fraction)
    assert sum(s.seen_total for s in snap.strata.values()) == snap.seen_total
    assert snap.strata["0"].seen_total == np.count_nonzero(labels == 0)
    assert snap.weight * snap.kept_recent == pytest.approx(snap.seen_recent)  # the scale-up recovers the offered count


def test_uniform_sampler_is_deterministic_and_reset_restores_it() -> None:
    _, events = class_stream(20_000, [0.5, 0.5])
    sampler = UniformSampler(UniformSamplerConfig(target_per_second=100.0), seed=8)
    first = run(sampler, events, rate=2000.0)
    sampler.reset()
    np.testing.assert_array_equal(first, run(sampler, events, rate=2000.0))
    np.testing.assert_array_equal(
        first, run(UniformSampler(UniformSamplerConfig(target_per_second=100.0), seed=8), events, rate=2000.0)
    )
    assert not np.array_equal(
        first, run(UniformSampler(UniformSamplerConfig(target_per_second=100.0), seed=9), events, rate=2000.0)
    )


def test_uniform_sampler_folds_classes_past_max_strata() -> None:
    sampler = UniformSampler(UniformSamplerConfig(target_per_second=100.0, max_strata=3))
    for i in range(10):
        sampler.sample(make_event(label=i), now=0.0)
    sampler.sample(make_event(), now=0.0)
    assert set(sampler.snapshot()["m"].strata) == {"0", "1", "2", "other", "none"}


# ---------------------------------------------------------------------- stratified


def test_stratified_sampler_over_represents_rare_classes_with_bounded_weights() -> None:
    shares = [0.9, 0.09, 0.01]
    labels, events = class_stream(200_000, shares, seed=10)
    sampler = StratifiedSampler(UniformSamplerConfig(target_per_second=500.0), max_boost=5.0, seed=10)
    weights = run(sampler, events, rate=10_000.0)  # 20 s
    late = np.arange(len(events)) >= 50_000
    kept = (weights > 0) & late
    assert np.count_nonzero(kept) / 15.0 == pytest.approx(500.0, rel=0.03)
    kept_share = [np.count_nonzero(kept & (labels == c)) / np.count_nonzero(kept) for c in range(3)]
    assert kept_share[2] > 3 * shares[2] and kept_share[1] > 1.5 * shares[1] and kept_share[0] < shares[0]
    uniform_p = 500.0 / 10_000.0
    for c in range(3):
        w = weights[kept & (labels == c)]
        assert w.min() >= 1.0 / (5.0 * uniform_p) * 0.99  # never boosted beyond max_boost
        offered = np.count_nonzero(late & (labels == c))
        assert w.sum() == pytest.approx(offered, rel=0.1)  # Horvitz–Thompson weights recover the class counts
    strata = sampler.snapshot()["m"].strata
    assert max(s.probability for s in strata.values()) <= 5.0 * uniform_p * 1.02


def test_stratified_sampler_with_exponent_one_is_uniform() -> None:
    labels, events = class_stream(100_000, [0.95, 0.05], seed=11)
    weights = run(
        StratifiedSampler(UniformSamplerConfig(target_per_second=1000.0), exponent=1.0, seed=11), events, rate=10_000.0
    )
    kept = weights > 0
    assert np.count_nonzero(kept & (labels == 1)) / np.count_nonzero(kept) == pytest.approx(0.05, abs=0.01)


def test_stratified_sampler_without_live_predictions_is_uniform() -> None:
    weights = run(
        StratifiedSampler(UniformSamplerConfig(target_per_second=500.0), seed=12),
        [make_event()] * 100_000,
        rate=10_000.0,
    )
    assert np.count_nonzero(weights[20_000:]) / 8.0 == pytest.approx(500.0, rel=0.04)
    np.testing.assert_allclose(weights[20_000:][weights[20_000:] > 0], 20.0, rtol=0.01)  # one stratum: 1 / p


def test_stratified_sampler_forced_keeps_are_always_kept() -> None:
    labels, events = class_stream(20_000, [0.99, 0.01], seed=13)
    sampler = StratifiedSampler(UniformSamplerConfig(target_per_second=10.0), seed=13)
    weights = [sampler.sample(ev, now=i / 2000.0, force=bool(labels[i] == 1)) for i, ev in enumerate(events)]
    assert all(w == 1.0 for w, c in zip(weights, labels, strict=True) if c == 1)
    assert sampler.snapshot()["m"].strata["1"].forced_total == np.count_nonzero(labels == 1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"target_per_second": -1.0}, r"target_per_second must be a finite number >= 0"),
        ({"cpu_share": -0.5}, r"cpu_share must be a finite number >= 0"),
        ({"cpus": 0.0}, r"cpus must be > 0"),
        ({"cost_smoothing": 0.0}, r"cost_smoothing must be in \(0, 1\]"),
        ({"target_per_second": 1.0, "burst_seconds": 0.0}, r"burst_seconds must be > 0"),
        ({"target_per_second": 1.0, "model_targets": {"a": -1.0}}, r"model_targets must be >= 0"),
        ({"target_per_second": 1.0, "headroom": -0.1}, r"headroom must be >= 0"),
        ({"target_per_second": 1.0, "max_strata": 0}, r"max_strata must be >= 1"),
        ({"target_per_second": 1.0, "exponent": 1.5}, r"exponent must be in \[0, 1\]"),
        ({"target_per_second": 1.0, "max_boost": 0.5}, r"max_boost must be >= 1"),
    ],
)
def test_sampler_bad_configuration_is_refused(kwargs: dict[str, object], match: str) -> None:
    stratified = {k: v for k, v in kwargs.items() if k in ("exponent", "max_boost")}
    config = {k: v for k, v in kwargs.items() if k not in stratified}
    with pytest.raises(ConfigError, match=match):
        StratifiedSampler(UniformSamplerConfig(**config), **stratified)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: TokenBucket(-1.0, 1.0), r"rate_per_second must be a number >= 0"),
        (lambda: CpuBucket(0.0, 1.0), r"cpu_per_second must be > 0"),
        (lambda: CpuBucket(1.0, 0.0), r"depth_seconds must be > 0"),
        (lambda: TokenBucket(1.0, 0.5), r"burst must be >= 1 token"),
        (lambda: RateEstimator(0.0), r"window_seconds must be > 0"),
        (lambda: WindowCounter(0.0), r"horizon_seconds must be > 0"),
        (lambda: WindowCounter(10.0, buckets=0), r"buckets must be >= 1"),
    ],
)
def test_budget_bad_configuration_is_refused(build: object, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        build()  # type: ignore[operator]


def _mixed_stream(seed: int) -> list[tuple[float, list[InferenceEvent], list[bool]]]:
    """Polls at a non-decreasing clock (some polls share a reading): three models, labels past max_strata, no
    label, forced keeps."""
    rng = np.random.default_rng(seed)
    polls = []
    now, i = 1000.0, 0
    for _ in range(60):
        now += float(rng.choice([0.0, 0.003, 0.05, 0.4, 2.5]))
        events, forced = [], []
        for _ in range(int(rng.integers(0, 300))):
            model = str(rng.choice(["a", "b", "c"], p=[0.7, 0.25, 0.05]))
            label = None if rng.random() < 0.1 else int(rng.zipf(1.6)) % 12
            events.append(make_event(model, label, i))
            forced.append(bool(rng.random() < 0.01))
            i += 1
        polls.append((now, events, forced))
    return polls


@pytest.mark.parametrize("kind", ["uniform", "stratified"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sample_many_decides_exactly_as_sample_called_in_turn(kind: str, seed: int) -> None:
    # sample_many now counts a whole poll before deciding (one probability per poll, see the next test), so
    # the exact equivalence with ``sample`` holds poll by poll for one-event polls, which is what it checks now
    def make() -> UniformSampler:
        cls = UniformSampler if kind == "uniform" else StratifiedSampler
        return cls(UniformSamplerConfig(300.0, model_targets={"c": 5.0}, max_strata=6), seed=seed)

    one, many = make(), make()
    kept = 0
    for now, events, forced in _mixed_stream(seed):
        expected = [one.sample(ev, now, force=f) for ev, f in zip(events, forced, strict=True)]
        got = [many.sample_many([ev], now, [f])[0] for ev, f in zip(events, forced, strict=True)]
        assert got == expected
        kept += sum(w > 0 for w in got)
        assert many.snapshot() == one.snapshot()
    assert many.admission.rng.random() == one.admission.rng.random()
    assert 0 < kept < sum(len(e) for _, e, _ in _mixed_stream(seed))  # both kept and dropped events were seen


@pytest.mark.parametrize("cls", [UniformSampler, StratifiedSampler])
def test_sample_many_samples_a_large_poll_evenly(cls: type[UniformSampler]) -> None:
    # decided in turn, the first events of a large poll saw a low offered rate and were all kept (a
    # backlog was scored in its first second); counting the poll first gives every event one probability
    sampler = cls(UniformSamplerConfig(200.0, burst_seconds=100.0), seed=21)
    weights = np.array(sampler.sample_many([make_event(i=i) for i in range(20_000)], 0.0))
    first, second = np.count_nonzero(weights[:10_000]), np.count_nonzero(weights[10_000:])
    assert first > 0 and second > 0
    assert abs(first - second) < 0.25 * (first + second) / 2
    assert len(set(weights[weights > 0].tolist())) == 1


def test_sample_many_goes_through_an_overridden_sample() -> None:
    class Halving(UniformSampler):
        _batch_path = False

        def sample(self, event: InferenceEvent, now: float, *, force: bool = False) -> float:
            return 0.5 * super().sample(event, now, force=force)

    events = [make_event("m", 1, i) for i in range(50)]
    one, many = Halving(UniformSamplerConfig(30.0)), Halving(UniformSamplerConfig(30.0))
    expected = [one.sample(ev, 0.0) for ev in events]
    assert 0.5 in expected and 0.0 in expected
    assert many.sample_many(events, 0.0) == expected
