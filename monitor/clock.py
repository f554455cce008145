"""The clock that windows and alerts read (DECISIONS 5: one clock, injected); shared by every stage, like ``events``.

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
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Protocol, Self

from monitor.errors import ConfigError

__all__ = ["Clock", "WatermarkClock"]


class Clock(Protocol):
    """Something that tells the time, in Unix epoch seconds."""

    def now(self) -> float:
        """The current time (``-inf`` before the clock knows any)."""


class WatermarkClock:
    """Event time, optionally held within ``allowed_lag_seconds`` of the wall clock.

    Parameters
    ----------
    allowed_lag_seconds : float >= 0, or None
        None: pure event time (replays, the demo). Otherwise ``now()`` is at least ``wall() − allowed_lag_seconds``.
    wall : callable returning Unix epoch seconds
        The wall clock (injected in tests).

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

    def __init__(self, allowed_lag_seconds: float | None = None, *, wall: Callable[[], float] = time.time) -> None:
        if allowed_lag_seconds is not None and not (math.isfinite(allowed_lag_seconds) and allowed_lag_seconds >= 0):
            raise ConfigError(
                f"allowed_lag_seconds must be a finite number >= 0 (or None); got {allowed_lag_seconds!r}"
            )
        self.allowed_lag_seconds = None if allowed_lag_seconds is None else float(allowed_lag_seconds)
        self._wall = wall
        self.reset()

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
