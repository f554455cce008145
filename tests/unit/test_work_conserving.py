"""Stage 2: work-conserving sampling — score everything while the engine keeps up, sample
uniformly in event time above what the CPU share sustains. Simulated time, seeded, no sleeps."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from monitor.config import SamplerSettings, Settings
from monitor.errors import ConfigError
from monitor.events import InferenceEvent, LivePrediction
from monitor.runtime.service import build_sampler
from monitor.sampler.stratified import StratifiedSampler
from monitor.sampler.uniform import UniformSampler
from monitor.sampler.uniform_config import UniformSamplerConfig

FEATURES = np.zeros(2)


def make_event(i: int, timestamp: float, model: str = "m", label: int | None = None) -> InferenceEvent:
    prediction = None if label is None else LivePrediction(label=label)
    return InferenceEvent(f"e{i}", model, "1", FEATURES, timestamp, prediction=prediction)


def replay(
    sampler: UniformSampler,
    timestamps: np.ndarray,
    *,
    ingest_per_second: float,
    poll: int = 500,
    cost_seconds: float = 1e-3,
    batch: int = 256,
    start: float = 0.0,
    model: str = "m",
    pause: bool = True,
) -> np.ndarray:
    """Offer events with these event times as the pipeline does: polls of ``poll`` events read at
    ``ingest_per_second`` (wall clock), one ``sample_many`` and one ``release`` per poll (``Scoring.accept``), each
    kept batch reported to ``observe_cost`` at ``cost_seconds`` per event; with ``pause``, then one step without
    events (the stream pauses). Returns each event's weight (0 = dropped), held events' from ``release``."""
    weights = np.zeros(timestamps.shape[0])
    index: dict[str, int] = {}

    def step(now: float, events: list[InferenceEvent], offset: int) -> None:
        w = sampler.sample_many(events, now) if events else []
        weights[offset : offset + len(w)] = w
        kept = int(np.count_nonzero(np.asarray(w) > 0))
        for ev, weight in sampler.release(now):
            weights[index.pop(ev.event_id)] = weight
            kept += weight > 0
        for b in range(0, kept, batch):
            n = min(batch, kept - b)
            sampler.observe_cost(model, n, n * cost_seconds)

    now = start
    for k in range(0, timestamps.shape[0], poll):
        now = start + k / ingest_per_second
        events = [make_event(k + j, float(t), model) for j, t in enumerate(timestamps[k : k + poll])]
        index.update((ev.event_id, k + j) for j, ev in enumerate(events))
        step(now, events, k)
    if pause:
        step(now + 0.2, [], 0)
    return weights


def decile_keep_rates(times: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Share of the offered events kept in each tenth of their event-time span."""
    edges = np.quantile(times, np.linspace(0.0, 1.0, 11))
    which = np.clip(np.searchsorted(edges, times, side="right") - 1, 0, 9)
    offered = np.bincount(which, minlength=10)
    kept = np.bincount(which[weights > 0], minlength=10)
    rates: np.ndarray = kept / offered
    return rates


@pytest.mark.parametrize("cls", [UniformSampler, StratifiedSampler])
def test_work_conserving_burst_on_an_idle_engine_is_scored_whole(cls: type[UniformSampler]) -> None:
    # the old behaviour: 500 events produced at once, default settings, scored 1; the engine was idle
    sampler = cls(UniformSamplerConfig(cpus=1.0, cpu_share=0.8, burst_seconds=2.0), seed=1)
    weights = replay(sampler, np.zeros(500), ingest_per_second=1e9, poll=100, cost_seconds=2e-4)  # all at once
    assert np.all(weights == 1.0)
    assert sampler.snapshot()["m"].fraction == 1.0


def test_work_conserving_burst_after_light_traffic_is_scored_whole() -> None:
    sampler = StratifiedSampler(UniformSamplerConfig(cpus=1.0, cpu_share=0.8, burst_seconds=2.0), seed=2)
    replay(sampler, np.arange(600) / 10.0, ingest_per_second=10.0, cost_seconds=1e-3)  # 10 events/s for a minute
    burst = replay(sampler, np.full(500, 60.0), ingest_per_second=1e9, start=60.0, cost_seconds=1e-3)
    assert np.all(burst > 0)


def test_default_settings_build_a_work_conserving_sampler_that_scores_a_burst() -> None:
    settings = Settings.model_validate({"models": [{"name": "m", "path": "m.onnx", "reference": None}]})
    assert settings.sampler.events_per_second is None and settings.sampler.cpu_share == 0.8
    sampler = build_sampler(settings)
    assert isinstance(sampler, StratifiedSampler)
    weights = replay(sampler, np.zeros(500), ingest_per_second=1e9, poll=500, cost_seconds=5e-4)
    assert np.count_nonzero(weights) == 500


def test_work_conserving_sustained_overload_holds_the_cpu_budget_uniformly_in_event_time() -> None:
    # 1 CPU at 0.8, 1 ms per event: 800 events/s can be scored; 4000 events/s are offered for 120 s
    sampler = UniformSampler(UniformSamplerConfig(cpus=1.0, cpu_share=0.8, burst_seconds=2.0), seed=3)
    times = np.arange(480_000) / 4000.0
    weights = replay(sampler, times, ingest_per_second=4000.0, poll=40, cost_seconds=1e-3)
    kept = times[weights > 0]
    late = kept[kept >= 20.0]
    assert late.size / 100.0 == pytest.approx(800.0, rel=0.05)  # the budget holds
    assert kept.size / 120.0 <= 800.0 * 1.05
    # uniform over the event-time span (seeded; the warm-up of the rate estimate may bias the first 0.1 s only)
    result = stats.kstest(kept / 120.0, "uniform")
    assert result.statistic < 0.02, result
    late_weights = weights[(weights > 0) & (times >= 20.0)]
    np.testing.assert_allclose(late_weights.mean(), 4000.0 / 800.0, rtol=0.05)  # 1/p: scales back to the offered rate


def test_work_conserving_fair_shares_of_cpu_time_under_overload() -> None:
    # a cheap and a dear model, both overloaded: each gets half the CPU time (max-min), not half the events
    sampler = UniformSampler(UniformSamplerConfig(cpus=1.0, cpu_share=1.0), seed=4)
    kept = {"cheap": 0, "dear": 0}
    cost = {"cheap": 1e-4, "dear": 1e-3}
    for k in range(3000):  # 30 s in 10 ms polls, 100 events per model per poll (10,000 events/s each)
        now = k / 100.0
        for model in kept:
            events = [make_event(j, now, model) for j in range(100)]
            n = sum(w > 0 for w in sampler.sample_many(events, now))
            if now >= 10.0:
                kept[model] += n
            if n:
                sampler.observe_cost(model, n, n * cost[model])
    assert kept["cheap"] / 20.0 == pytest.approx(0.5 / 1e-4, rel=0.05)  # 5000 events/s
    assert kept["dear"] / 20.0 == pytest.approx(0.5 / 1e-3, rel=0.05)  # 500 events/s


def test_work_conserving_backlog_after_a_restart_covers_its_event_time_span() -> None:
    # an hour of traffic (10 events/s) read at once after a restart, at 50,000 events/s; 800 events/s can be scored
    sampler = StratifiedSampler(UniformSamplerConfig(cpus=1.0, cpu_share=0.8, burst_seconds=2.0), seed=5)
    times = np.sort(np.random.default_rng(5).uniform(0.0, 3600.0, 36_000))
    weights = replay(sampler, times, ingest_per_second=50_000.0, start=10_000.0)
    kept = times[weights > 0]
    assert 0 < kept.size < times.size  # overloaded: sampled
    buckets = np.bincount((kept // 300).astype(int), minlength=12)
    assert buckets.size == 12 and np.all(buckets > 0), buckets  # every 5-minute bucket of the hour is covered


def test_work_conserving_event_cap_still_caps() -> None:
    sampler = UniformSampler(UniformSamplerConfig(100.0, cpus=1.0, cpu_share=0.8), seed=6)
    times = np.arange(60_000) / 1000.0
    weights = replay(sampler, times, ingest_per_second=1000.0, poll=10, cost_seconds=1e-5)
    late = np.count_nonzero(weights[times >= 20.0] > 0)
    assert late / 40.0 == pytest.approx(100.0, rel=0.1)


def test_work_conserving_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="cpu_share"):
        SamplerSettings.model_validate({"cpu_share": 0.0})
    with pytest.raises(ValueError, match="cpu_share"):
        SamplerSettings.model_validate({"cpu_share": 1.5})


@pytest.mark.parametrize(("cost_seconds", "sampled"), [(1e-3, 0.016), (53e-6, 0.30)])
def test_work_conserving_backlog_after_a_restart_is_uniform_in_event_time(cost_seconds: float, sampled: float) -> None:
    # an hour of traffic (10 events/s) read after a restart at 50,000 events/s in polls of 2,000, the
    # cost per event known from the reference scored at start-up. The old sampler (offered rate estimated from the
    # first poll on, a poll that fits the CPU bucket scored whole) kept the first minutes at a different rate from
    # the rest (0 or several times the share: chi-square p < 1e-8 for both costs); the event-time reservoir holds
    # the first polls until the rate is measured and samples the whole hour at one probability
    sampler = StratifiedSampler(UniformSamplerConfig(cpus=1.0, cpu_share=0.8, burst_seconds=2.0), seed=5)
    sampler.observe_cost("m", 1000, 1000 * cost_seconds)
    times = 1e6 - 3600.0 + np.sort(np.random.default_rng(5).uniform(0.0, 3600.0, 36_000))
    weights = replay(sampler, times, ingest_per_second=50_000.0, poll=2000, start=1e6, cost_seconds=cost_seconds)
    rates = decile_keep_rates(times, weights)
    assert rates.mean() == pytest.approx(sampled, rel=0.15)  # the CPU share: 0.8 / cost events/s of 50,000/s read
    assert rates.max() / rates.min() < 1.6, rates
    kept = np.bincount(np.clip(((times[weights > 0] - times.min()) // 360).astype(int), 0, 9), minlength=10)
    assert stats.chisquare(kept).pvalue > 0.01, kept  # even over the hour's event-time deciles
    # weights scale back to the offered count (less the few draws the CPU bucket refuses at the budget's edge)
    assert weights[weights > 0].sum() == pytest.approx(times.size, rel=0.1)


def test_work_conserving_sustained_overload_is_even_over_event_time_deciles() -> None:
    sampler = StratifiedSampler(UniformSamplerConfig(cpus=1.0, cpu_share=0.8, burst_seconds=2.0), seed=7)
    sampler.observe_cost("m", 1000, 1.0)
    times = 1e6 + np.arange(240_000) / 4000.0  # 4,000 events/s for 60 s, live (event time = read time)
    weights = replay(sampler, times, ingest_per_second=4000.0, poll=40, start=1e6)
    kept = np.count_nonzero(weights)
    assert kept / 60.0 == pytest.approx(800.0, rel=0.05)  # the CPU budget holds
    counts = np.bincount(((times[weights > 0] - 1e6) // 6.0).astype(int), minlength=10)
    assert stats.chisquare(counts).pvalue > 0.01, counts


def test_work_conserving_held_poll_is_decided_within_the_delay_bound() -> None:
    sampler = UniformSampler(
        UniformSamplerConfig(cpus=1.0, cpu_share=0.8, burst_seconds=2.0, max_delay_seconds=0.5), seed=8
    )
    sampler.observe_cost("m", 100, 0.1)  # 1 ms per event: a poll of 2,000 does not fit the 1.6 CPU-s bucket
    events = [make_event(i, 0.0) for i in range(2000)]
    assert sampler.sample_many(events, 100.0) == [0.0] * 2000 and sampler.holding == 2000
    assert sampler.release(100.0) == []  # the stream has not paused: still held
    assert sampler.sample_many([make_event(9999, 1.0)], 100.6) is not None
    decided = sampler.release(100.6)
    assert len(decided) == 2000 and sampler.holding == 0
    assert 0 < sum(w > 0 for _, w in decided) < 2000


def test_max_delay_zero_never_holds() -> None:
    sampler = UniformSampler(
        UniformSamplerConfig(cpus=1.0, cpu_share=0.8, burst_seconds=2.0, max_delay_seconds=0.0), seed=9
    )
    sampler.observe_cost("m", 100, 0.1)
    weights = sampler.sample_many([make_event(i, 0.0) for i in range(2000)], 100.0)
    assert sampler.holding == 0 and sampler.release(100.0) == []
    assert 0 < sum(w > 0 for w in weights) < 2000
    with pytest.raises(ConfigError, match="max_delay_seconds"):
        UniformSampler(UniformSamplerConfig(max_delay_seconds=-1.0))


def test_capacity_is_the_cpu_budget_over_the_measured_cost_capped_by_the_event_cap() -> None:
    from monitor.sampler.uniform import UniformSampler

    sampler = UniformSampler(UniformSamplerConfig(cpus=1.0, cpu_share=0.5), seed=0)
    assert sampler.capacity("m") is None  # never seen
    sampler.observe_cost("m", 100, 0.1)  # 1 ms per event
    assert sampler.capacity("m") == pytest.approx(500.0)
    capped = UniformSampler(UniformSamplerConfig(target_per_second=200.0, cpus=1.0, cpu_share=0.5), seed=0)
    capped.observe_cost("m", 100, 0.1)
    assert capped.capacity("m") == pytest.approx(200.0)
