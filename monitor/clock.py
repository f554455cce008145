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

Time that cannot be poisoned (``max_skew_seconds``, ``alerts.max_event_skew_seconds``):

* in ``run`` the bound is measured from the wall clock alone: an event stamped more than the skew ahead of the wall
  clock is ``future_timestamp``, whatever came before it, and the watermark never passes ``wall + skew``. The
  watermark follows a low quantile (:data:`WATERMARK_QUANTILE`) of how far recent events' timestamps lie from their
  arrival (the events of the last :data:`RECENT_SECONDS` of wall time, at most :data:`RECENT_EVENTS` of them), not the
  largest timestamp: a minority of fast or creeping producer clocks cannot drag it, and with jittered producer clocks
  it stands where nearly every event up to it has arrived. An event ahead of the watermark (a future one included)
  is *placed* at the watermark, so the windows, whose end is the watermark, hold it instead of sliding past the
  events still arriving; an event behind it keeps its time;
* in a replay the bound is measured from the watermark and the batch's median (a real gap in a recorded stream moves
  the whole batch; one producer's stray clock moves one event), and an event beyond it is placed at the watermark.

Either way such an event is counted as ``future_timestamp``; one event stamped in the year 3000 cannot move the clock
past every window. An event more than the late bound behind the watermark (``allowed_lag_seconds`` in ``run``, the
skew in a replay) is counted as ``late``; it still enters the windows that cover its time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import NamedTuple, Protocol, Self

import numpy as np
from numpy.typing import NDArray

from monitor.errors import ConfigError

__all__ = [
    "MISTIMED_REASONS",
    "RECENT_EVENTS",
    "RECENT_SECONDS",
    "WATERMARK_QUANTILE",
    "Clock",
    "Placed",
    "WatermarkClock",
]

#: the reasons of ``harmonic_events_mistimed_total`` (:meth:`WatermarkClock.place`)
MISTIMED_REASONS: tuple[str, ...] = ("future_timestamp", "late")
#: in ``run`` the watermark is where this fraction of recent events' timestamps lie behind (relative to arrival):
#: producer clocks faster than the rest move it only when they stamp more than ``1 − this`` of the events
WATERMARK_QUANTILE = 0.05
#: the recent events of that quantile: those that arrived within this many seconds of wall time …
RECENT_SECONDS = 60.0
#: … at most this many of them (a larger batch is thinned evenly)
RECENT_EVENTS = 512


class Clock(Protocol):
    """Something that tells the time, in Unix epoch seconds."""

    def now(self) -> float:
        """The current time (``-inf`` before the clock knows any)."""


class Placed(NamedTuple):
    """A batch's timestamps as windows and the watermark take them (:meth:`WatermarkClock.place`)."""

    seconds: NDArray[np.float64]
    future: int  # beyond the skew bound (placed at the watermark)
    late: int  # more than the late bound behind the watermark (kept as they are)


class _RecentOffsets:
    """How far recent events' timestamps lie from their arrival (``timestamp − wall``), with their arrival times."""

    def __init__(self) -> None:
        self._arrival = np.full(RECENT_EVENTS, -math.inf)
        self._offset = np.zeros(RECENT_EVENTS)
        self._next = 0

    def add(self, arrival: float, offsets: NDArray[np.float64]) -> None:
        if offsets.size > RECENT_EVENTS:
            offsets = offsets[np.linspace(0, offsets.size - 1, RECENT_EVENTS).astype(np.intp)]
        slots = (self._next + np.arange(offsets.size)) % RECENT_EVENTS
        self._arrival[slots] = arrival
        self._offset[slots] = offsets
        self._next = (self._next + offsets.size) % RECENT_EVENTS

    def quantile(self, since: float) -> float | None:
        """:data:`WATERMARK_QUANTILE` of the offsets of events that arrived at ``since`` or later, one of them (None:
        none did)."""
        recent = self._offset[self._arrival >= since]
        if not recent.size:
            return None
        k = int(WATERMARK_QUANTILE * (recent.size - 1))  # numpy's "lower" quantile, without its overhead
        return float(np.partition(recent, k)[k])


class WatermarkClock:
    """Event time, optionally held within ``allowed_lag_seconds`` of the wall clock.

    Parameters
    ----------
    allowed_lag_seconds : float >= 0, or None
        None: pure event time (replays, the demo). Otherwise ``now()`` is at least ``wall() − allowed_lag_seconds``.
    wall : callable returning Unix epoch seconds
        The wall clock (injected in tests).
    max_skew_seconds : float > 0, or None
        :meth:`place` bounds timestamps to this far ahead of where time is (with a lag: of the wall clock, and the
        watermark follows a low quantile of recent events, see the module); None: no bound.

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

    _watermark: float
    _recent: _RecentOffsets

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

        With a lag (``run``) this also moves the watermark (:meth:`_place_live`).

        Examples
        --------
        >>> live = WatermarkClock(60.0, wall=lambda: 1000.0, max_skew_seconds=300.0)
        >>> batch = np.r_[np.arange(990.0, 1000.0), 1200.0, 32503680000.0]  # ten honest, one fast, one in 3000
        >>> placed = live.place(batch)
        >>> placed.future, live.watermark, float(placed.seconds.max())  # all ahead of the watermark: placed at it
        (1, 990.0, 990.0)
        >>> replay = WatermarkClock(max_skew_seconds=300.0).advance(5000.0)
        >>> replay.place(np.array([5001.0, 5002.0, 9999.0, 4000.0]))[1:]  # (future, late)
        (1, 1)
        >>> replay.place(np.array([9000.0, 9001.0, 9002.0])).future  # a gap in the recording: the batch moved
        0
        """
        if self.max_skew_seconds is None or seconds.size == 0:
            return Placed(seconds, 0, 0)
        if self.allowed_lag_seconds is not None:
            return self._place_live(seconds, self.allowed_lag_seconds, self.max_skew_seconds)
        finite = np.isfinite(seconds)
        late = int(np.count_nonzero(finite & (seconds < self._watermark - self.max_skew_seconds)))
        # where the recording's time is: the watermark, or most of this batch after a gap
        median = float(np.median(seconds[finite])) if finite.any() else -math.inf
        anchor = max(self._watermark, median)
        future = finite & (seconds > anchor + self.max_skew_seconds)
        n = int(np.count_nonzero(future))
        if n:
            seconds = np.where(future, self._watermark if math.isfinite(self._watermark) else anchor, seconds)
        return Placed(seconds, n, late)

    def _place_live(self, seconds: NDArray[np.float64], lag: float, skew: float) -> Placed:
        """``run``: beyond ``wall + skew`` is future; the watermark moves to the low quantile of recent events'
        offsets from their arrival (never past ``wall + skew``, never back); every timestamp ahead of it is placed
        at it; one more than ``lag`` behind it is late."""
        arrival = self._wall()
        finite = np.isfinite(seconds)
        future = finite & (seconds > arrival + skew)
        self._recent.add(arrival, seconds[finite & ~future] - arrival)
        offset = self._recent.quantile(arrival - RECENT_SECONDS)
        if offset is not None:
            self._watermark = max(self._watermark, arrival + offset)
        at = self._watermark if math.isfinite(self._watermark) else arrival
        late = int(np.count_nonzero(finite & (seconds < at - lag)))
        ahead = finite & (seconds > at)
        if ahead.any():
            seconds = np.where(ahead, at, seconds)
        return Placed(seconds, int(np.count_nonzero(future)), late)

    def reset(self) -> None:
        """No event seen yet."""
        self._watermark = -math.inf
        self._recent = _RecentOffsets()

    def advance(self, event_seconds: float) -> Self:
        """Raise the watermark to ``event_seconds`` (a late or non-finite timestamp leaves it where it is); with a lag
        and a skew bound never past ``wall + max_skew_seconds``."""
        if self.allowed_lag_seconds is not None and self.max_skew_seconds is not None:
            event_seconds = min(event_seconds, self._wall() + self.max_skew_seconds)
        if math.isfinite(event_seconds) and event_seconds > self._watermark:
            self._watermark = float(event_seconds)
        return self

    @property
    def watermark(self) -> float:
        """Event time: the largest timestamp seen, or with a lag and a skew bound the low quantile of recent
        events that :meth:`place` keeps (``-inf`` before the first)."""
        return self._watermark

    def now(self) -> float:
        """``watermark``, or ``max(watermark, wall − allowed_lag_seconds)`` with a lag."""
        if self.allowed_lag_seconds is None:
            return self._watermark
        return max(self._watermark, self._wall() - self.allowed_lag_seconds)
