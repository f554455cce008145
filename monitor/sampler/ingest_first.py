"""Ingest first: scoring takes the CPU that consuming leaves.

Scoring runs in the pipeline's loop, between polls: every second it spends scoring is a second the loop does not
decode. A CPU budget fixed at a share of the machine (``sampler.cpu_share``) lets scoring take most of the loop
while a backlog waits, so the backlog drains at a fraction of the rate the loop reaches with scoring off. This
controller sets the sampler's CPU budget step by step from what it measures:

- the consumer lag in records (the partitions' log-end offsets minus the pipeline's positions, as the source reports
  them; a source that cannot report them counts a full poll as a backlog) and its trend;
- the CPU seconds scoring takes per second of the loop's wall time spent scoring (onnxruntime may use several
  threads), so that a share of the loop's time converts into the sampler's unit, CPU seconds per second.

While a backlog exists (lag above ``backlog_records``) the budget falls at once to its floor: the least of the cap,
``behind_share`` of the loop's time and :attr:`IngestFirst.min_budget`, the CPU that keeps a minimum of scored events
per second per model (set by the caller from the measured cost per event, :mod:`monitor.runtime.scoring_budget`), so
that the windows and verdicts stay fed while the loop decodes at nearly its scoring-off rate; the sampler scores a
uniform sample at what that budget affords. Between ``caught_up_records`` and ``backlog_records`` the budget shrinks
while the lag grows (halving every ``adjust_seconds``, down to the floor) and holds while it falls, so that at a
steady input rate below the loop's capacity the lag stays bounded. At or below ``caught_up_records`` the budget grows back up to the cap, the configured
CPU share: full scoring resumes once caught up. It grows from where it is (the floor, after a backlog: no jump, so
the backlog's last polls are not sampled more densely than the rest) as TCP's congestion window does: doubling every
``adjust_seconds`` up to half the budget at which the lag last grew, then by a sixteenth of the cap per
``adjust_seconds``. Doubling all the way overshot at a steady input rate: scoring took the loop back, a backlog formed,
the budget fell to the floor, and the lag came in waves of several seconds (docs/BENCHMARKS.md, backlog drain).

All methods take the caller's ``now`` (seconds); nothing here reads a clock or does I/O.
"""

from __future__ import annotations

import math

from monitor.errors import ConfigError


class IngestFirst:
    """The CPU budget (CPU seconds per second) scoring may take, from the measured lag and scoring cost.

    Parameters
    ----------
    cap_cpu_per_second : float
        The most scoring may take (the configured CPU share × the available CPUs); inf: no cap.
    backlog_records : float
        Lag above this is a backlog: scoring gets ``behind_share`` of the loop.
    caught_up_records : float
        Lag at or below this is caught up: the budget grows back to the cap.
    behind_share : float in (0, 1)
        Share of the loop's wall time scoring may take while behind.
    adjust_seconds : float
        The budget halves (lag growing) or doubles (caught up, below half the budget at which the lag last grew;
        above it, it grows by a sixteenth of the cap) every this many seconds.
    trend_seconds : float
        Time constant of the lag trend's moving average.

    Examples
    --------
    >>> c = IngestFirst(1.6, backlog_records=10_000, caught_up_records=2_000)
    >>> c.observe(0.0, lag_records=60_000, full_poll=True, scoring_wall=0.0, scoring_cpu=0.0)
    >>> c.state, round(c.budget, 3)
    ('behind', 0.1)
    >>> for i in range(1, 11):
    ...     c.observe(float(i), lag_records=0, full_poll=False, scoring_wall=0.1, scoring_cpu=0.1)
    >>> c.state, round(c.budget, 3)  # doubled to 0.8 (half the budget the backlog formed at), then + 0.1 per second
    ('caught_up', 1.5)
    >>> c.min_budget = 0.005  # 20 events/s of 0.25 ms each
    >>> c.observe(11.0, lag_records=60_000, full_poll=True, scoring_wall=0.0, scoring_cpu=0.0)
    >>> c.state, c.budget
    ('behind', 0.005)
    >>> c.observe(12.0, lag_records=0, full_poll=False, scoring_wall=0.0, scoring_cpu=0.0)
    >>> c.state, round(c.budget, 3)  # recovery doubles from the floor
    ('caught_up', 0.01)
    """

    def __init__(
        self,
        cap_cpu_per_second: float,
        *,
        backlog_records: float = 10_000,
        caught_up_records: float = 2_000,
        behind_share: float = 0.1,
        adjust_seconds: float = 1.0,
        trend_seconds: float = 2.0,
    ) -> None:
        if not cap_cpu_per_second > 0:
            raise ConfigError(f"cap_cpu_per_second must be > 0 (inf: no cap); got {cap_cpu_per_second!r}")
        if not 0 <= caught_up_records < backlog_records:
            raise ConfigError(
                f"caught_up_records must be >= 0 and below backlog_records; got {caught_up_records!r} and "
                f"{backlog_records!r}"
            )
        if not 0 < behind_share < 1:
            raise ConfigError(f"behind_share must be in (0, 1); got {behind_share!r}")
        for name, v in (("adjust_seconds", adjust_seconds), ("trend_seconds", trend_seconds)):
            if not v > 0:
                raise ConfigError(f"{name} must be > 0; got {v!r}")
        self.cap = float(cap_cpu_per_second)
        self.backlog_records, self.caught_up_records = float(backlog_records), float(caught_up_records)
        self.behind_share = float(behind_share)
        self.adjust_seconds, self.trend_seconds = float(adjust_seconds), float(trend_seconds)
        #: CPU seconds scoring takes per second of the loop's wall time spent scoring (moving average)
        self.cpu_per_scoring_second = 1.0
        #: the current budget, CPU seconds per second (the cap until a backlog is seen)
        self.budget = self.cap
        #: "caught_up", "behind" (a backlog), or "catching_up" (between the two thresholds)
        self.state = "caught_up"
        #: the last lag seen, records (None: the source cannot tell)
        self.lag: float | None = None
        #: moving average of the lag's change, records per second
        self.trend = 0.0
        #: the budget at which the lag last grew (a backlog formed, or it grew between the thresholds); inf: never
        self.ceiling = math.inf
        #: CPU seconds per second that keep the minimum of scored events per model while behind (the caller sets it
        #: from the measured cost per event); None: not known, the floor is the behind share alone
        self.min_budget: float | None = None
        self._last: float | None = None

    @property
    def share(self) -> float:
        """``behind_share`` of the loop's time, in CPU seconds per second (at most the cap)."""
        return min(self.cap, self.behind_share * self.cpu_per_scoring_second)

    @property
    def floor(self) -> float:
        """The budget while behind: the behind share, or less where :attr:`min_budget` (> 0) is less."""
        share, least = self.share, self.min_budget
        return share if least is None or not least > 0 else min(share, least)

    def observe(
        self, now: float, *, lag_records: float | None, full_poll: bool, scoring_wall: float, scoring_cpu: float
    ) -> None:
        """One step of the loop at ``now``: the lag after it (None: unknown, then ``full_poll`` — the poll returned
        as many records as it may — stands for a backlog), and the wall and CPU seconds scoring took since the last
        call. Updates :attr:`budget`."""
        if scoring_wall > 0.001 and scoring_cpu >= 0:
            ratio = max(0.1, scoring_cpu / scoring_wall)
            self.cpu_per_scoring_second += 0.2 * (ratio - self.cpu_per_scoring_second)
        lag = lag_records
        if lag is None:
            lag = self.backlog_records + 1 if full_poll else 0.0
        last, self._last = self._last, now
        dt = 0.0 if last is None else max(0.0, now - last)
        if self.lag is not None and dt > 0:
            w = -math.expm1(-dt / self.trend_seconds)
            self.trend += w * ((lag - self.lag) / dt - self.trend)
        self.lag = lag
        floor = self.floor
        if lag > self.backlog_records:
            if self.state != "behind":
                self.ceiling = max(floor, self.budget)
            self.state, self.budget = "behind", floor
        elif lag <= self.caught_up_records:
            self.state = "caught_up"
            budget, steps = max(floor, self.budget), dt / self.adjust_seconds
            if budget < self.ceiling / 2:
                budget = min(self.ceiling / 2, budget * 2.0**steps)
            else:
                budget += self.cap / 16 * steps if math.isfinite(self.cap) else budget * (2.0**steps - 1)
            self.budget = min(self.cap, budget)
        else:
            self.state = "catching_up"
            if self.trend > 0:
                self.ceiling = min(self.ceiling, max(floor, self.budget))
                self.budget = max(floor, self.budget * 0.5 ** (dt / self.adjust_seconds))
            self.budget = min(self.cap, max(floor, self.budget))
