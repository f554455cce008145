"""The clock that windows and alerts read (injected; one per model in ``run``, one shared in replays and the demo).

Replays and the demo run on event time: :class:`WatermarkClock` without a lag reads the *watermark*, the largest
event timestamp seen, so a replay behaves like the live traffic it recorded and stands still when it ends. ``run``
gives the clock an allowed lag and reads ``max(watermark, wall − allowed_lag_seconds)``:

* live, events arrive within the lag of their timestamps and the clock is event time;
* when the stream goes quiet the watermark stops, but the clock goes on at wall speed ``allowed_lag_seconds``
  behind, so alert conditions whose evidence went quiet can resolve;
* reading a backlog after a restart, the watermark is far behind and the clock is ``wall − allowed_lag_seconds``:
  durations (``for_seconds``, the hysteresis) run in wall time while the backlog's own events decide the conditions,
  so old timestamps alone never resolve an alert.

The clock never goes back: both terms only grow.

Time that cannot be poisoned: with ``max_skew_seconds`` (``alerts.max_event_skew_seconds``) an event's timestamp
moves the watermark only within that skew of where time is: in ``run`` of the wall clock (and the watermark), in a
replay of the watermark and the batch's median (a real gap in a recorded stream moves the whole batch; one
producer's stray clock moves one event). An event beyond it is *placed* — at arrival (the wall clock) in ``run``, at
the watermark in a replay — and counted as ``future_timestamp``; one event stamped in the year 3000 can no longer
move the clock past every window. An event more than the late bound behind the watermark (``allowed_lag_seconds``
in ``run``, the skew in a replay) is counted as ``late``; it still enters the windows that cover its time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import NamedTuple, Protocol, Self

import numpy as np
from numpy.typing import NDArray

from monitor.errors import ConfigError

__all__ = ["MISTIMED_REASONS", "Clock", "Placed", "WatermarkClock"]

#: the reasons of ``harmonic_events_mistimed_total`` (:meth:`WatermarkClock.place`)
MISTIMED_REASONS: tuple[str, ...] = ("future_timestamp", "late")


class Clock(Protocol):
    """Something that tells the time, in Unix epoch seconds."""

    def now(self) -> float:
        """The current time (``-inf`` before the clock knows any)."""


class Placed(NamedTuple):
    """A batch's timestamps as windows and the watermark take them (:meth:`WatermarkClock.place`)."""

    seconds: NDArray[np.float64]
    future: int  # beyond the skew bound: placed at arrival (run) or at the watermark (replay)
    late: int  # more than the late bound behind the watermark (kept as they are)


class WatermarkClock:
    """Event time, optionally held within ``allowed_lag_seconds`` of the wall clock.

    Parameters
    ----------
    allowed_lag_seconds : float >= 0, or None
        None: pure event time (replays, the demo). Otherwise ``now()`` is at least ``wall() − allowed_lag_seconds``.
    wall : callable returning Unix epoch seconds
        The wall clock (injected in tests).
    max_skew_seconds : float > 0, or None
        :meth:`place` bounds timestamps to this far ahead of where time is; None: no bound.

    Raises
    ------
    ConfigError
        A negative or non-finite ``allowed_lag_seconds``.

    Examples
    --------
    >>> replay = WatermarkClock()
    >>> replay.advance(100.0).advance(90.0).now()  # a late event does not move the watermark back
    100.0
    >>> live = WatermarkClock(allowed_lag_seconds=60.0, wall=lambda: 1000.0)
    >>> live.advance(990.0).now(), live.advance(100.0).watermark
    (990.0, 990.0)
    >>> WatermarkClock(allowed_lag_seconds=60.0, wall=lambda: 1000.0).advance(100.0).now()  # a backlog: wall - lag
    940.0
    """

    def __init__(
        self,
        allowed_lag_seconds: float | None = None,
        *,
        wall: Callable[[], float] = time.time,
        max_skew_seconds: float | None = None,
    ) -> None:
        if allowed_lag_seconds is not None and not (math.isfinite(allowed_lag_seconds) and allowed_lag_seconds >= 0):
            raise ConfigError(
                f"allowed_lag_seconds must be a finite number >= 0 (or None); got {allowed_lag_seconds!r}"
            )
        if max_skew_seconds is not None and not (math.isfinite(max_skew_seconds) and max_skew_seconds > 0):
            raise ConfigError(
                f"max_skew_seconds must be a finite number > 0 (or None); got {max_skew_seconds!r}: "
                "set alerts.max_event_skew_seconds to e.g. 300"
            )
        self.allowed_lag_seconds = None if allowed_lag_seconds is None else float(allowed_lag_seconds)
        self.max_skew_seconds = None if max_skew_seconds is None else float(max_skew_seconds)
        self._wall = wall
        self.reset()

    def place(self, seconds: NDArray[np.float64]) -> Placed:
        """``seconds`` (one batch's event timestamps) bounded to ``max_skew_seconds`` ahead of where time is.

        Examples
        --------
        >>> live = WatermarkClock(60.0, wall=lambda: 1000.0, max_skew_seconds=300.0)
        >>> placed = live.place(np.array([995.0, 1200.0, 32503680000.0]))  # one stamped in the year 3000
        >>> placed.seconds.tolist(), placed.future
        ([995.0, 1200.0, 1000.0], 1)
        >>> replay = WatermarkClock(max_skew_seconds=300.0).advance(5000.0)
        >>> replay.place(np.array([5001.0, 5002.0, 9999.0, 4000.0]))[1:]  # (future, late)
        (1, 1)
        >>> replay.place(np.array([9000.0, 9001.0, 9002.0])).future  # a gap in the recording: the batch moved
        0
        """
        if self.max_skew_seconds is None or seconds.size == 0:
            return Placed(seconds, 0, 0)
        finite = np.isfinite(seconds)
        late_bound = self.allowed_lag_seconds if self.allowed_lag_seconds is not None else self.max_skew_seconds
        late = int(np.count_nonzero(finite & (seconds < self._watermark - late_bound)))
        if self.allowed_lag_seconds is not None:  # run: arrival is the wall clock
            arrival = self._wall()
            limit = max(self._watermark, arrival) + self.max_skew_seconds
        else:  # a replay: where the recording's time is (the watermark, or most of this batch after a gap)
            median = float(np.median(seconds[finite])) if finite.any() else -math.inf
            anchor = max(self._watermark, median)
            limit = anchor + self.max_skew_seconds
            arrival = self._watermark if math.isfinite(self._watermark) else anchor
        future = finite & (seconds > limit)
        n = int(np.count_nonzero(future))
        if n:
            seconds = np.where(future, arrival, seconds)
        return Placed(seconds, n, late)

    def reset(self) -> None:
        """No event seen yet."""
        self._watermark = -math.inf

    def advance(self, event_seconds: float) -> Self:
        """Raise the watermark to ``event_seconds`` (a late or non-finite timestamp leaves it where it is)."""
        if math.isfinite(event_seconds) and event_seconds > self._watermark:
            self._watermark = float(event_seconds)
        return self

    @property
    def watermark(self) -> float:
        """The largest event timestamp seen (``-inf`` before the first)."""
        return self._watermark

    def now(self) -> float:
        """``watermark``, or ``max(watermark, wall − allowed_lag_seconds)`` with a lag."""
        if self.allowed_lag_seconds is None:
            return self._watermark
        return max(self._watermark, self._wall() - self.allowed_lag_seconds)
