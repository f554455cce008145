"""Ingest first (monitor/sampler/ingest_first.py): the scoring CPU budget from the consumer lag and its trend.

The controller's rules one by one, then a fluid simulation of the pipeline's loop in simulated time (seeded input,
no sleeps): a loop that decodes ``1 / INGEST_COST`` records per second with scoring off, scoring at
``SCORE_COST`` seconds per scored event through the sampler's CPU bucket, polls of up to ``POLL`` records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pytest

from monitor.errors import ConfigError
from monitor.sampler.budget import CpuBucket
from monitor.sampler.ingest_first import IngestFirst

POLL = 2000
INGEST_COST = 1 / 50_000  # seconds of the loop per record decoded: 50,000 records/s with scoring off
SCORE_COST = 1 / 20_000  # seconds of the loop (and of CPU) per event scored
CAP = 1.6  # cpu_share 0.8 of 2 CPUs


def controller(**kw: float) -> IngestFirst:
    return IngestFirst(kw.pop("cap", CAP), backlog_records=5 * POLL, caught_up_records=POLL, **kw)


def step(c: IngestFirst, now: float, lag: float | None, *, full: bool = False, wall: float = 0.1, cpu: float = 0.1):
    c.observe(now, lag_records=lag, full_poll=full, scoring_wall=wall, scoring_cpu=cpu)


def test_a_backlog_gets_the_behind_share_of_the_loop_in_cpu_seconds() -> None:
    c = controller()
    for i in range(30):  # scoring runs on two threads: 2 CPU seconds per second of the loop spent scoring
        step(c, i * 0.1, 60_000.0, wall=0.05, cpu=0.1)
    assert c.state == "behind"
    assert c.cpu_per_scoring_second == pytest.approx(2.0, rel=0.01)
    assert c.budget == pytest.approx(0.1 * 2.0, rel=0.01)


def test_caught_up_the_budget_doubles_to_half_the_budget_the_backlog_formed_at_then_grows_to_the_cap() -> None:
    """As TCP's window: doubling every ``adjust_seconds`` up to half the budget at which the lag last grew, then a
    sixteenth of the cap per ``adjust_seconds`` (doubling all the way overshot into waves of lag at a steady rate)."""
    c = controller()
    step(c, 0.0, 60_000.0)  # the backlog formed at the cap, 1.6
    assert c.budget == pytest.approx(0.1) and c.ceiling == pytest.approx(CAP)
    budgets = []
    for t in range(1, 14):
        step(c, float(t), 0.0)
        budgets.append(c.budget)
    assert budgets[:5] == pytest.approx([0.2, 0.4, 0.8, 0.9, 1.0])
    assert budgets[-2:] == pytest.approx([1.6, 1.6])
    assert c.state == "caught_up"


def test_between_the_thresholds_a_growing_lag_halves_the_budget_and_a_falling_one_holds_it() -> None:
    c = controller()
    lag = 3000.0
    step(c, 0.0, lag)
    assert c.state == "catching_up" and c.budget == CAP
    for t in range(1, 3):  # lag growing by 500 records/s: the trend turns positive, the budget halves each second
        lag += 500.0
        step(c, float(t), lag)
    assert c.state == "catching_up" and c.trend > 0
    assert c.budget < CAP / 2
    held = []
    for t in range(3, 12):  # falling (still above caught-up): once the trend turns, held where it is
        lag -= 200.0
        step(c, float(t), lag)
        assert c.state == "catching_up"
        if c.trend < 0:
            held.append(c.budget)
    assert len(held) >= 5 and max(held) == min(held) > c.floor


def test_without_a_lag_a_full_poll_stands_for_a_backlog() -> None:
    c = controller()
    step(c, 0.0, None, full=True)
    assert c.state == "behind" and c.budget == pytest.approx(0.1)
    step(c, 1.0, None, full=False)
    assert c.state == "caught_up" and c.budget == pytest.approx(0.2)


def test_the_budget_is_never_above_the_cap_nor_below_the_floor() -> None:
    c = controller(cap=0.05)  # a cap below the behind share: the cap wins
    step(c, 0.0, 60_000.0)
    assert c.budget == pytest.approx(0.05)
    c = controller(cap=math.inf)
    step(c, 0.0, 0.0)
    assert math.isinf(c.budget)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"cap": 0.0}, "cap_cpu_per_second must be > 0"),
        ({"behind_share": 1.0}, "behind_share must be in"),
        ({"adjust_seconds": 0.0}, "adjust_seconds must be > 0"),
    ],
)
def test_bad_settings_are_refused_with_what_was_expected(kw: dict[str, float], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        controller(**kw)
    with pytest.raises(ConfigError, match="caught_up_records must be >= 0 and below backlog_records"):
        IngestFirst(1.0, backlog_records=10, caught_up_records=10)


# ---------------------------------------------------------------------- the loop, simulated


@dataclass
class Loop:
    """The pipeline's loop as a fluid model: records arrive at ``rate(t)``; each step polls up to ``POLL``, decodes
    them, scores what the CPU bucket affords (a uniform sample: the sampler's acceptance), and takes the time of both.
    ``ingest_first`` False: the budget stays at the cap (the old behaviour)."""

    ingest_first: bool = True
    backlog: float = 0.0
    seed: int = 0
    now: float = 0.0
    read: float = 0.0
    scored: float = 0.0
    lags: list[float] = field(default_factory=list)
    shares: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.c = controller()
        self.bucket = CpuBucket(CAP, 2.0)
        self.rng = np.random.default_rng(self.seed)
        self.arrived = self.backlog

    def run(self, seconds: float, rate: float) -> None:
        end = self.now + seconds
        while self.now < end:
            available = self.arrived - self.read
            if available < 1:  # caught up: the poll waits for the next records
                wait = 0.05
                self.arrived += self.rng.poisson(rate * wait)
                self.now += wait
                self._observe(0, 0.0)
                continue
            n = min(available, POLL)
            affordable = max(0.0, self.bucket.balance) / SCORE_COST if self.bucket.available(self.now) else 0.0
            k = min(n, math.ceil(affordable))
            self.bucket.force(self.now, k * SCORE_COST)
            dt = n * INGEST_COST + k * SCORE_COST
            self.read += n
            self.scored += k
            self.shares.append(k / n)
            self.arrived += self.rng.poisson(rate * dt)
            self.now += dt
            self._observe(n, k * SCORE_COST)

    def _observe(self, n: float, scoring: float) -> None:
        lag = self.arrived - self.read
        self.lags.append(lag)
        if self.ingest_first:
            self.c.observe(self.now, lag_records=lag, full_poll=n >= POLL, scoring_wall=scoring, scoring_cpu=scoring)
            before = self.bucket.cpu_per_second
            self.bucket.set_rate(self.c.budget, self.now, empty=self.c.budget < before / 2)  # as the sampler does


def drain_rate(ingest_first: bool, backlog: float = 60_000) -> float:
    loop = Loop(ingest_first=ingest_first, backlog=backlog)
    while loop.read < backlog:
        loop.run(0.01, 0.0)
    return loop.read / loop.now


def test_a_backlog_drains_at_080_of_the_scoring_off_rate_with_ingest_first_not_without() -> None:
    scoring_off = 1 / INGEST_COST
    assert drain_rate(True) / scoring_off >= 0.8
    assert drain_rate(False) / scoring_off < 0.6  # the fixed CPU share: scoring takes most of the loop


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_lag_stays_bounded_at_a_steady_half_of_capacity_and_scoring_takes_what_ingest_leaves(seed: int) -> None:
    loop = Loop(seed=seed)
    loop.run(120.0, 0.5 / INGEST_COST)
    late = loop.lags[len(loop.lags) // 2 :]
    assert max(late) <= 5 * POLL + 2 * POLL  # never far past the backlog threshold
    assert loop.read >= 0.99 * (loop.arrived - max(late))
    # half the loop is free: scoring gets a good part of it (well above the 10 % floor)
    assert loop.scored / loop.read > 0.2


def test_full_scoring_resumes_when_caught_up() -> None:
    loop = Loop(backlog=60_000)
    loop.run(14.0, 1000.0)  # drained in about 1.3 s, three doublings to half the cap, eight steps of a sixteenth
    assert loop.c.state == "caught_up" and loop.c.budget == pytest.approx(CAP)
    before = len(loop.shares)
    loop.run(10.0, 1000.0)  # 1,000 events/s costs 0.05 CPU s/s: everything is scored
    assert min(loop.shares[before:]) == 1.0


# ---------------------------------------------------------------------- the floor: a minimum of scored events


def test_behind_the_budget_falls_to_the_minimum_budget_where_it_is_below_the_behind_share() -> None:
    c = controller()
    c.min_budget = 0.004  # e.g. 20 events/s at 0.2 ms each
    step(c, 0.0, 60_000.0)
    assert c.state == "behind" and c.budget == pytest.approx(0.004) and c.floor == pytest.approx(0.004)
    c.min_budget = 0.5  # a dear model: the minimum would take more than the behind share; the share bounds it
    step(c, 0.1, 60_000.0)
    assert c.budget == pytest.approx(c.share) == pytest.approx(0.1)


def test_caught_up_after_a_drain_at_the_minimum_the_budget_doubles_from_it_without_a_jump() -> None:
    """The same rule as without a minimum (doubling every ``adjust_seconds`` up to half the budget the backlog formed
    at, then a sixteenth of the cap a second), from the minimum: the last polls of a backlog, read within a fraction
    of a second of catching up, are sampled at about the floor's rate, not many times it."""
    c = controller()
    c.min_budget = 0.002
    step(c, 0.0, 60_000.0)
    assert c.budget == pytest.approx(0.002)
    step(c, 0.04, 2_000.0)  # the last poll's worth: caught up, 40 ms later
    assert c.state == "caught_up" and c.budget == pytest.approx(0.002 * 2**0.04)
    budgets = []
    for t in range(1, 24):
        step(c, 0.04 + t, 0.0)
        budgets.append(c.budget)
    assert budgets[:3] == pytest.approx([0.002 * 2 ** (1.04), 0.002 * 2 ** (2.04), 0.002 * 2 ** (3.04)])
    assert budgets[-1] == pytest.approx(CAP) and c.state == "caught_up"


def test_between_the_thresholds_a_growing_lag_may_halve_the_budget_down_to_the_minimum() -> None:
    c = controller()
    c.min_budget = 0.003
    lag = 3000.0
    step(c, 0.0, lag)
    for t in range(1, 20):
        lag += 300.0  # growing, still below the backlog threshold
        step(c, float(t), lag)
    assert c.state == "catching_up" and c.budget == pytest.approx(0.003)


def drain_with_minimum(min_events_per_second: float | None, backlog: float = 60_000) -> Loop:
    """A drain where the controller sees the backlog before the first poll is scored (the sampler's reservoir holds
    a first poll until the budget is cut), the minimum set each step as the pipeline sets it."""
    loop = Loop(backlog=backlog)
    if min_events_per_second is not None:
        loop.c.min_budget = min_events_per_second * SCORE_COST
    loop._observe(0, 0.0)
    while loop.read < backlog:
        loop.run(0.01, 0.0)
    return loop


def test_a_drain_at_the_minimum_reads_at_nearly_the_scoring_off_rate_and_still_scores_its_minimum() -> None:
    scoring_off = 1 / INGEST_COST
    at_minimum = drain_with_minimum(20.0)
    at_share = drain_with_minimum(None)
    assert at_minimum.read / at_minimum.now / scoring_off >= 0.99
    assert at_share.read / at_share.now / scoring_off < 0.93  # the behind share alone: 10 % of the loop scoring
    # the windows stay fed: about 20 events/s over the drain (the CPU bucket's depth at the floor is 2 s of it)
    assert 0.8 * 20.0 * at_minimum.now <= at_minimum.scored <= 20.0 * at_minimum.now + 2 * 20.0 + 1
    assert at_share.scored > 50 * at_minimum.scored


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_with_the_minimum_the_lag_stays_bounded_at_a_steady_half_of_capacity_and_full_scoring_returns(
    seed: int,
) -> None:
    loop = Loop(seed=seed, backlog=60_000)
    loop.c.min_budget = 20.0 * SCORE_COST
    loop.run(120.0, 0.5 / INGEST_COST)
    late = loop.lags[len(loop.lags) // 2 :]
    assert max(late) <= 5 * POLL + 2 * POLL
    assert loop.scored / loop.read > 0.2  # scoring gets what ingest leaves, far above the minimum


def test_the_default_sampler_draining_at_the_floor_scores_its_minimum_over_every_class_and_segment() -> None:
    """The stratified sampler fed a 300,000-event backlog in polls, its budget set each step as the pipeline sets it:
    the minimum of scored events per second is met over the drain, and every live class and every segment of 5 % or
    more of the stream is among them (a uniform draw within each class; weights 1/p for the windows)."""
    from monitor.events import InferenceEvent, LivePrediction
    from monitor.runtime.scoring_budget import BEHIND_EVENTS_PER_SECOND
    from monitor.sampler.stratified import StratifiedSampler
    from monitor.sampler.uniform_config import UniformSamplerConfig

    sampler = StratifiedSampler(UniformSamplerConfig(cpus=2.0, cpu_share=0.8), seed=5)
    cost = 2e-4  # CPU seconds per scored event, as measured when the reference is scored
    sampler.observe_cost("m", events=100, seconds=100 * cost)
    c = controller()
    rng = np.random.default_rng(5)
    total = 300_000  # about 6 s of the loop: about 120 events scored
    segments = rng.choice(["a", "b", "c", "d"], size=total, p=[0.6, 0.25, 0.1, 0.05])
    labels = rng.choice(3, size=total, p=[0.7, 0.25, 0.05])
    now, read, scored = 0.0, 0, []
    while read < total:
        poll = [
            InferenceEvent(f"e{i}", "m", "1", [0.0], 0.0, str(segments[i]), LivePrediction(int(labels[i])))
            for i in range(read, read + POLL)
        ]
        kept = [ev for ev, w in zip(poll, sampler.sample_many(poll, now), strict=True) if w > 0]
        kept += [ev for ev, w in sampler.release(now) if w > 0]
        read += POLL
        now += POLL * INGEST_COST + len(kept) * cost
        scored += kept
        c.min_budget = sampler.cpu_for(BEHIND_EVENTS_PER_SECOND)
        busy = len(kept) * cost
        c.observe(now, lag_records=total - read, full_poll=True, scoring_wall=busy, scoring_cpu=busy)
        sampler.set_cpu_budget(c.budget, now)
    assert c.min_budget == pytest.approx(BEHIND_EVENTS_PER_SECOND * cost)
    drained = now
    assert total * INGEST_COST / drained >= 0.95  # the loop spent ≥ 95 % of its time reading
    assert len(scored) >= 0.8 * BEHIND_EVENTS_PER_SECOND * drained
    assert {ev.prediction.label for ev in scored if ev.prediction} == {0, 1, 2}
    assert {ev.segment for ev in scored} == {"a", "b", "c", "d"}
