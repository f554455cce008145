"""Ingest first, fed once per step: the sampler's CPU budget from the consumer lag and what scoring took.

:class:`ScoringBudget` wraps :class:`~monitor.sampler.ingest_first.IngestFirst` for the pipeline: each step it passes
the lag, whether the poll was full and the wall and CPU seconds scoring took since the step before, and the floor
of the budget while behind: the CPU that keeps :data:`BEHIND_EVENTS_PER_SECOND` scored events per second per model
(from the sampler's measured cost per event, :meth:`~monitor.sampler.uniform.UniformSampler.cpu_for`); and it hands
the budget it arrives at to the sampler. A sampler without a CPU cap is not budgeted (:attr:`ScoringBudget.control`
is None).
"""

from __future__ import annotations

import math

from monitor.config import Settings
from monitor.sampler.base import Sampler
from monitor.sampler.ingest_first import IngestFirst

#: scored events per second per model while behind (a backlog): the smallest time window (60 s) still holds 1,200
#: scored events, above the drift detectors' 1,000-event window and the accuracy estimate's 100-event minimum
BEHIND_EVENTS_PER_SECOND = 20.0


class ScoringBudget:
    """The ingest-first controller between the loop and a sampler with a CPU cap."""

    def __init__(self, settings: Settings, sampler: Sampler) -> None:
        self.sampler = sampler
        cap = getattr(sampler, "cpu_cap_per_second", math.inf)
        self.max_poll_records = settings.kafka.max_poll_records
        poll = self.max_poll_records
        #: ingest first (a sampler with a CPU cap): the CPU budget follows the consumer lag; None: scoring is not
        #: budgeted (every event scored, or only an event cap)
        self.control = (
            IngestFirst(cap, backlog_records=5 * poll, caught_up_records=poll) if math.isfinite(cap) else None
        )
        self._seen = (0.0, 0.0)
        #: the share of events with a live label the shadow check takes: 1.0 unless the budget is below its cap
        self.shadow_share = 1.0

    def step(self, now: float, lag: float | None, polled: int, busy_wall: float, busy_cpu: float) -> None:
        """One loop step: ``polled`` records read, ``busy_wall``/``busy_cpu`` seconds scoring took so far in all."""
        control = self.control
        if control is None:
            return
        cpu_for = getattr(self.sampler, "cpu_for", None)
        control.min_budget = cpu_for(BEHIND_EVENTS_PER_SECOND) if cpu_for is not None else None
        control.observe(
            now,
            lag_records=lag,
            full_poll=polled >= self.max_poll_records,
            scoring_wall=busy_wall - self._seen[0],
            scoring_cpu=busy_cpu - self._seen[1],
        )
        self._seen = (busy_wall, busy_cpu)
        set_budget = getattr(self.sampler, "set_cpu_budget", None)
        # the shadow check runs a model row for every event with a live label, sampled or not: while the budget is
        # cut it takes the same fraction of them as the budget is of its cap
        self.shadow_share = min(1.0, control.budget / control.cap) if math.isfinite(control.cap) else 1.0
        if set_budget is not None:
            set_budget(control.budget, now)
