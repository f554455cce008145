"""Stage 2 building blocks: token buckets, decayed rate estimates, sliding counts, and budget water-filling.

All take the caller's ``now`` (epoch seconds) so that simulated time drives them in tests; none does I/O.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import TypeVar

from monitor.errors import ConfigError

K = TypeVar("K", bound=Hashable)


class TokenBucket:
    """A token bucket: ``rate_per_second`` tokens accrue up to ``burst``; taking one needs one.

    Forced takes may drive the balance negative, down to ``-burst``, so that forced keeps are paid back by
    later ordinary ones instead of being refused. ``rate_per_second = inf`` is an unlimited bucket (always a token).

    Examples
    --------
    >>> b = TokenBucket(rate_per_second=2.0, burst=1.0)
    >>> b.take(0.0), b.take(0.0), b.take(0.5)
    (True, False, True)
    """

    def __init__(self, rate_per_second: float, burst: float) -> None:
        if not rate_per_second >= 0:
            raise ConfigError(f"rate_per_second must be a number >= 0 (inf: unlimited); got {rate_per_second!r}")
        if not burst >= 1:
            raise ConfigError(f"burst must be >= 1 token; got {burst!r}")
        self.rate_per_second, self.burst = float(rate_per_second), float(burst)
        self.reset()

    def reset(self) -> None:
        """Full bucket, no time seen yet."""
        self._tokens = self.burst
        self._last: float | None = None

    @property
    def tokens(self) -> float:
        return self._tokens

    def _refill(self, now: float) -> None:
        last = self._last
        if last is None or now > last:
            if last is not None:
                self._tokens = min(self.burst, self._tokens + (now - last) * self.rate_per_second)
            self._last = now

    def available(self, now: float) -> bool:
        """Whether a token could be taken at ``now``."""
        self._refill(now)
        return self._tokens >= 1.0

    def take(self, now: float) -> bool:
        """Take one token if there is one."""
        self._refill(now)
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    def force(self, now: float) -> None:
        """Take one token whatever the balance (floored at ``-burst``)."""
        self._refill(now)
        self._tokens = max(self._tokens - 1.0, -self.burst)

    def set_rate(self, rate_per_second: float, burst: float, now: float, *, fill: bool = False) -> None:
        """Change the rate and burst from ``now`` on: tokens accrued so far are kept, clipped to the new burst, or
        with ``fill`` the bucket starts full at the new burst (a newcomer's first share).

        >>> b = TokenBucket(rate_per_second=0.0, burst=1.0)
        >>> b.set_rate(10.0, 5.0, now=0.0, fill=True)
        >>> b.tokens
        5.0
        """
        self._refill(now)
        self.rate_per_second, self.burst = float(rate_per_second), max(1.0, float(burst))
        unlimited = math.isinf(self.rate_per_second)
        self._tokens = self.burst if fill or unlimited else min(self._tokens, self.burst)


class CpuBucket:
    """CPU seconds available to scoring: ``cpu_per_second`` accrues up to ``depth_seconds`` of it; an event is taken
    while the balance is positive and costs its measured CPU seconds (so one event dearer than the whole depth is
    still taken, and paid back). ``cpu_per_second = inf``: unlimited.

    Examples
    --------
    >>> b = CpuBucket(cpu_per_second=1.6, depth_seconds=2.0)
    >>> b.take(0.0, 3.0), b.take(0.0, 1.0), b.take(0.0, 0.1), b.take(1.0, 0.001)
    (True, True, False, True)
    """

    def __init__(self, cpu_per_second: float, depth_seconds: float) -> None:
        if not cpu_per_second > 0:
            raise ConfigError(f"cpu_per_second must be > 0 (inf: unlimited); got {cpu_per_second!r}")
        if not depth_seconds > 0:
            raise ConfigError(f"depth_seconds must be > 0; got {depth_seconds!r}")
        self.cpu_per_second, self.depth_seconds = float(cpu_per_second), float(depth_seconds)
        self.depth = self.cpu_per_second * self.depth_seconds
        self.reset()

    def reset(self) -> None:
        """Full bucket, no time seen yet."""
        self._balance = self.depth
        self._last: float | None = None

    @property
    def balance(self) -> float:
        return self._balance

    def _refill(self, now: float) -> None:
        last = self._last
        if last is None or now > last:
            if last is not None:
                self._balance = min(self.depth, self._balance + (now - last) * self.cpu_per_second)
            self._last = now

    def available(self, now: float) -> bool:
        """Whether an event could be taken at ``now``."""
        self._refill(now)
        return self._balance > 0.0

    def take(self, now: float, cost_seconds: float) -> bool:
        """Take one event of ``cost_seconds`` if the balance is positive."""
        if not self.available(now):
            return False
        self._balance -= cost_seconds
        return True

    def force(self, now: float, cost_seconds: float) -> None:
        """Take one event whatever the balance (floored at ``-depth``)."""
        self._refill(now)
        self._balance = max(self._balance - cost_seconds, -self.depth)

    def set_rate(self, cpu_per_second: float, now: float, *, empty: bool = False) -> None:
        """Change the rate from ``now`` on (the depth stays ``depth_seconds`` of it); the balance is kept, clipped
        to the new depth, or with ``empty`` dropped to at most 0 (what was saved at the old rate is not spent).

        >>> b = CpuBucket(cpu_per_second=1.6, depth_seconds=2.0)
        >>> b.set_rate(0.1, now=0.0)
        >>> b.balance
        0.2
        >>> b.set_rate(0.05, now=0.0, empty=True)
        >>> b.balance
        0.0
        """
        if not cpu_per_second > 0:
            raise ConfigError(f"cpu_per_second must be > 0 (inf: unlimited); got {cpu_per_second!r}")
        self._refill(now)
        self.cpu_per_second = float(cpu_per_second)
        self.depth = self.cpu_per_second * self.depth_seconds
        if math.isinf(self.depth):
            self._balance = self.depth
        else:
            self._balance = min(self._balance, 0.0 if empty else self.depth)


class RateEstimator:
    """Events per second, from an exponentially decayed count with time constant ``window_seconds``.

    Early on the decayed count is divided by the window actually observed (at least 1 % of the time constant),
    so the estimate is unbiased for a steady stream from the start.

    Examples
    --------
    >>> r = RateEstimator(window_seconds=10.0)
    >>> for i in range(2000):
    ...     r.update(i / 100.0)
    >>> round(r.rate(20.0))
    100
    """

    def __init__(self, window_seconds: float = 10.0) -> None:
        if not window_seconds > 0:
            raise ConfigError(f"window_seconds must be > 0; got {window_seconds!r}")
        self.window_seconds = float(window_seconds)
        self.reset()

    def reset(self) -> None:
        #: the decayed count at the last update (a plain attribute: see :meth:`count_at`)
        self.count = 0.0
        self._last: float | None = None
        self._start = 0.0

    def _decay(self, now: float) -> None:
        last = self._last
        if last is None:
            self._last = self._start = now
        elif now > last:
            self.count *= math.exp((last - now) / self.window_seconds)
            self._last = now

    def update(self, now: float, count: float = 1.0) -> None:
        """Record ``count`` events at ``now``."""
        self._decay(now)
        self.count += count

    def rate(self, now: float) -> float:
        """The estimated events per second at ``now`` (0.0 before any event)."""
        if self._last is None:
            return 0.0
        self._decay(now)
        tau = self.window_seconds
        observed = max(self._last - self._start, 0.01 * tau)
        return self.count / (tau * -math.expm1(-observed / tau))

    def count_at(self, now: float) -> float:
        """Record one event at ``now`` and return the divisor of :meth:`rate` at ``now``.

        While ``now`` does not move, ``rate(now)`` is the decayed count over this divisor: a caller recording many
        events at one ``now`` (``UniformSampler.sample_many``) adds to :attr:`count` and divides.
        """
        self.update(now)
        tau = self.window_seconds
        assert self._last is not None
        observed = max(self._last - self._start, 0.01 * tau)
        return tau * -math.expm1(-observed / tau)

    def observed_seconds(self, now: float) -> float:
        """How long this estimator has been watching (0.0 before any event)."""
        return 0.0 if self._last is None else max(0.0, now - self._start)


class WindowCounter:
    """Seen and kept counts over a sliding horizon, in ``buckets`` time slots (so the horizon slides in steps).

    Examples
    --------
    >>> w = WindowCounter(horizon_seconds=10.0, buckets=10)
    >>> for t in range(20):
    ...     w.add(float(t), kept=t % 2 == 0)
    >>> w.totals(19.0)
    (10, 5)
    """

    def __init__(self, horizon_seconds: float = 60.0, buckets: int = 12) -> None:
        if not horizon_seconds > 0:
            raise ConfigError(f"horizon_seconds must be > 0; got {horizon_seconds!r}")
        if buckets < 1:
            raise ConfigError(f"buckets must be >= 1; got {buckets}")
        self.horizon_seconds, self.buckets = float(horizon_seconds), buckets
        self._width = self.horizon_seconds / buckets
        self.reset()

    def reset(self) -> None:
        self._slot = [-(2**62)] * self.buckets
        self._seen = [0] * self.buckets
        self._kept = [0] * self.buckets

    def add(self, now: float, kept: bool) -> None:
        slot = int(now // self._width)
        i = slot % self.buckets
        if self._slot[i] != slot:
            self._slot[i], self._seen[i], self._kept[i] = slot, 0, 0
        self._seen[i] += 1
        if kept:
            self._kept[i] += 1

    def add_many(self, now: float, seen: int, kept: int) -> None:
        """``add`` called ``seen`` times at ``now``, ``kept`` of them kept."""
        slot = int(now // self._width)
        i = slot % self.buckets
        if self._slot[i] != slot:
            self._slot[i], self._seen[i], self._kept[i] = slot, 0, 0
        self._seen[i] += seen
        self._kept[i] += kept

    def totals(self, now: float) -> tuple[int, int]:
        """(seen, kept) over the slots inside the horizon ending at ``now``."""
        current = int(now // self._width)
        seen = kept = 0
        for slot, s, k in zip(self._slot, self._seen, self._kept, strict=True):
            if current - self.buckets < slot <= current:
                seen += s
                kept += k
        return seen, kept


def water_fill(budget: float, caps: Mapping[K, float], weights: Mapping[K, float] | None = None) -> dict[K, float]:
    """Split ``budget`` over keys in proportion to ``weights`` (equal by default), none above its cap.

    What a capped key cannot use is shared among the others (max-min fairness). The result sums to
    ``min(budget, sum(caps))``.

    Parameters
    ----------
    budget : float, >= 0
    caps : mapping key → the most that key can use (e.g. its offered rate), >= 0.
    weights : mapping key → relative share; keys missing here weigh 1, keys weighing <= 0 get nothing.

    Returns
    -------
    dict key → allocation.

    Examples
    --------
    >>> water_fill(10.0, {"a": 1.0, "b": 100.0, "c": 100.0})
    {'a': 1.0, 'b': 4.5, 'c': 4.5}
    """
    alloc = {k: 0.0 for k in caps}
    free = {k for k, c in caps.items() if c > 0 and (weights is None or weights.get(k, 1.0) > 0)}
    remaining = max(0.0, budget)
    while free and remaining > 0:
        w = {k: (weights.get(k, 1.0) if weights is not None else 1.0) for k in free}
        total_w = sum(w.values())
        capped = {k for k in free if remaining * w[k] / total_w >= caps[k]}
        if not capped:
            for k in free:
                alloc[k] = remaining * w[k] / total_w
            break
        for k in capped:
            alloc[k] = caps[k]
            remaining -= caps[k]
        free -= capped
    return alloc
