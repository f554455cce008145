"""Stage 2: work-conserving sampling (issue 25, DECISIONS 14) — score everything while the engine keeps up, sample
uniformly in event time above what the CPU share sustains. Simulated time, seeded, no sleeps."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from monitor.config import SamplerSettings, Settings
from monitor.events import InferenceEvent, LivePrediction
from monitor.runtime.service import build_sampler
from monitor.sampler.stratified import StratifiedSampler
from monitor.sampler.uniform import UniformSampler

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
) -> np.ndarray:
    """Offer events with these event times as the pipeline does: polls of ``poll`` events read at
    ``ingest_per_second`` (wall clock), each kept batch reported to ``observe_cost`` at ``cost_seconds`` per event.
    Returns each event's weight (0 = dropped)."""
    weights = np.zeros(timestamps.shape[0])
    for k in range(0, timestamps.shape[0], poll):
        now = start + k / ingest_per_second
        events = [make_event(k + j, float(t), model) for j, t in enumerate(timestamps[k : k + poll])]
        w = sampler.sample_many(events, now)
        weights[k : k + len(w)] = w
        kept = int(np.count_nonzero(np.asarray(w) > 0))
        for b in range(0, kept, batch):
            n = min(batch, kept - b)
            sampler.observe_cost(model, n, n * cost_seconds)
    return weights


@pytest.mark.parametrize("cls", [UniformSampler, StratifiedSampler])
def test_work_conserving_burst_on_an_idle_engine_is_scored_whole(cls: type[UniformSampler]) -> None:
    # issue 25's finding: 500 events produced at once, default settings, scored 1; the engine was idle
    sampler = cls(cpus=1.0, cpu_share=0.8, burst_seconds=2.0, seed=1)
    weights = replay(sampler, np.zeros(500), ingest_per_second=1e9, poll=100, cost_seconds=2e-4)  # all at once
    assert np.all(weights == 1.0)
    assert sampler.snapshot()["m"].fraction == 1.0


def test_work_conserving_burst_after_light_traffic_is_scored_whole() -> None:
    sampler = StratifiedSampler(cpus=1.0, cpu_share=0.8, burst_seconds=2.0, seed=2)
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
    sampler = UniformSampler(cpus=1.0, cpu_share=0.8, burst_seconds=2.0, seed=3)
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
    sampler = UniformSampler(cpus=1.0, cpu_share=1.0, seed=4)
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
    sampler = StratifiedSampler(cpus=1.0, cpu_share=0.8, burst_seconds=2.0, seed=5)
    times = np.sort(np.random.default_rng(5).uniform(0.0, 3600.0, 36_000))
    weights = replay(sampler, times, ingest_per_second=50_000.0, start=10_000.0)
    kept = times[weights > 0]
    assert 0 < kept.size < times.size  # overloaded: sampled
    buckets = np.bincount((kept // 300).astype(int), minlength=12)
    assert buckets.size == 12 and np.all(buckets > 0), buckets  # every 5-minute bucket of the hour is covered


def test_work_conserving_event_cap_still_caps() -> None:
    sampler = UniformSampler(100.0, cpus=1.0, cpu_share=0.8, seed=6)
    times = np.arange(60_000) / 1000.0
    weights = replay(sampler, times, ingest_per_second=1000.0, poll=10, cost_seconds=1e-5)
    late = np.count_nonzero(weights[times >= 20.0] > 0)
    assert late / 40.0 == pytest.approx(100.0, rel=0.1)


def test_work_conserving_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="cpu_share"):
        SamplerSettings.model_validate({"cpu_share": 0.0})
    with pytest.raises(ValueError, match="cpu_share"):
        SamplerSettings.model_validate({"cpu_share": 1.5})
