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
