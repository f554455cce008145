"""Stage 6 (exporters): the ``/metrics`` body, rendered at most once per interval, one render at a time: every scraper in
an interval gets the same bytes (:class:`~monitor.exporters.http.MetricsServer` serves them).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["RenderCache"]


class RenderCache:
    """The rendered ``/metrics`` body, re-rendered at most once per ``min_interval_seconds``, one render at a time.

    The interval runs from the end of the last render, so however slow a render is and however many scrapers ask,
    rendering takes at most ``render / (render + interval)`` of a core. A render that raises is not cached.

    Parameters
    ----------
    render : callable
        Produces the body (``generate_latest`` over the state's collector).
    min_interval_seconds : float
        How long a body is served before the next request renders again.
    clock : callable
        Monotonic seconds; injected so tests need no sleep.

    Examples
    --------
    >>> now = [0.0]
    >>> cache = RenderCache(lambda: f"t={now[0]}".encode(), min_interval_seconds=1.0, clock=lambda: now[0])
    >>> cache.get(), cache.fresh()
    (b't=0.0', b't=0.0')
    >>> now[0] = 0.5; cache.get(), cache.renders
    (b't=0.0', 1)
    >>> now[0] = 1.0; cache.fresh() is None, cache.get(), cache.renders
    (True, b't=1.0', 2)
    """

    def __init__(
        self, render: Callable[[], bytes], *, min_interval_seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not min_interval_seconds > 0:
            raise ValueError(f"min_interval_seconds must be > 0; got {min_interval_seconds!r}")
        self._render = render
        self._interval = min_interval_seconds
        self._clock = clock
        self._lock = threading.Lock()
        #: (body, end of its render); one attribute, so a reader without the lock sees a consistent pair
        self._last: tuple[bytes, float] | None = None
        self.renders = 0

    def fresh(self) -> bytes | None:
        """The cached body if it is younger than the interval, else None; never renders, never blocks."""
        last = self._last
        if last is not None and self._clock() - last[1] < self._interval:
            return last[0]
        return None

    def expires_in(self) -> float:
        """Seconds until the cached body turns stale (0 when there is none or it is stale)."""
        last = self._last
        return 0.0 if last is None else max(0.0, last[1] + self._interval - self._clock())

    def get(self) -> bytes:
        """The cached body, rendered first if it is stale. Callers that queue on the lock behind a render get its
        bytes without rendering again."""
        with self._lock:
            body = self.fresh()
            if body is None:
                body = self._render()
                self._last = (body, self._clock())
                self.renders += 1
            return body
