"""Stage 5b: Page–Hinkley test for an upward change in the mean of a stream (classic, generic).

    mean_t = running mean since reset,  S_t = max(0, S_{t-1} + x_t − mean_t − tolerance).

The alarm turns on when S > threshold (after ``min_events`` events) and off when S falls below
``clear_ratio``·threshold (hysteresis, so an alert does not flap around the threshold).

``threshold`` and ``tolerance`` are in the stream's units. Given a ``reference`` sample and no
``threshold``, the threshold is calibrated on it for ``false_alarms_per_million`` (false alarms per 10⁶
stationary events) by simulating bootstrap streams (:func:`~monitor.drift.calibrate.calibrate_page_hinkley`;
the result is in ``calibration``). Without a reference the threshold must be set for the signal's scale: S is a reflected random walk whose steps have the stream's spread, so the
defaults (λ = 50, δ = 0.005) suit a per-event standard deviation of about 0.1 or less; on a
unit-variance stream they false-alarm within a few thousand events. For γ and flicker the app uses the
scale-free :class:`~monitor.drift.cusum.Cusum`; Page–Hinkley is the alternative when no reference
exists yet or for signals on a known scale.
"""

from __future__ import annotations

import logging
from typing import Self

import numpy as np
from numpy.typing import ArrayLike

from monitor.drift.base import AlarmCounter, SequentialDetector, as_values, check_reference, require
from monitor.drift.calibrate import Calibration, calibrate_page_hinkley

log = logging.getLogger("monitor.drift.page_hinkley")

#: the threshold used when neither a threshold nor a usable reference is given (stream units; see above)
UNCALIBRATED_THRESHOLD = 50.0


class PageHinkley(SequentialDetector):
    """One-sided (upward) Page–Hinkley change detector.

    Parameters
    ----------
    threshold : alarm level λ on the cumulative excess (> 0), in the stream's units. None (default): calibrated on
        ``reference`` if given, else ``UNCALIBRATED_THRESHOLD`` (50).
    tolerance : δ, the per-event drift allowed before it counts (>= 0), in the stream's units.
    min_events : burn-in: no alarm before this many events (>= 1).
    clear_ratio : the alarm clears when S < clear_ratio·threshold (0 <= clear_ratio <= 1).
    reference : (m,) sample of the signal on a stationary stream, to calibrate the threshold on (optional).
    false_alarms_per_million : target false alarms per 10⁶ stationary events (0 < rate < 10⁵) of the calibration.
    name : label reported in :class:`DriftState`.

    Raises
    ------
    ConfigError
        On a parameter out of range.
    DataError
        If a reference is given with fewer than 10 finite values.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> ph = PageHinkley(threshold=5.0, tolerance=0.05)
    >>> ph.update(rng.normal(scale=0.1, size=3000)).drift_detected
    False
    >>> ph.update(rng.normal(scale=0.1, size=100) + 0.5).drift_detected
    True
    >>> cal = PageHinkley(tolerance=0.05, reference=rng.normal(scale=0.1, size=5000))
    >>> cal.calibration.method, round(cal.threshold, 1)
    ('bootstrap+tail', 1.2)
    """

    def __init__(
        self,
        threshold: float | None = None,
        tolerance: float = 0.005,
        *,
        min_events: int = 30,
        clear_ratio: float = 0.5,
        reference: ArrayLike | None = None,
        false_alarms_per_million: float = 1.0,
        name: str = "page_hinkley",
    ) -> None:
        self._check_threshold(threshold, false_alarms_per_million)
        require(tolerance >= 0.0, f"tolerance must be >= 0; got {tolerance!r}")
        require(min_events >= 1, f"min_events must be >= 1; got {min_events!r}")
        require(0.0 <= clear_ratio <= 1.0, f"clear_ratio must be in [0, 1]; got {clear_ratio!r}")
        #: how the threshold was derived (None when it was given or no reference was)
        self.calibration: Calibration | None = None
        if threshold is None and reference is not None:
            ref = check_reference(reference, name)
            self.calibration = calibrate_page_hinkley(ref, tolerance, min_events, false_alarms_per_million, name=name)
            if self.calibration is None:
                log.warning(
                    "drift threshold not calibrated: reference of %d values too small or constant; using %g",
                    ref.size,
                    UNCALIBRATED_THRESHOLD,
                    extra={"detector": name},
                )
        if threshold is None:
            threshold = UNCALIBRATED_THRESHOLD if self.calibration is None else self.calibration.threshold
        self.threshold, self.tolerance, self.min_events = threshold, tolerance, min_events
        self.clear_ratio, self.name = clear_ratio, name
        self._alarm = AlarmCounter()
        self.reset()

    def reset(self) -> None:
        """Back to no events."""
        self._events = 0
        self._mean = 0.0
        self._excess = 0.0
        self._alarm.reset()

    def update(self, values: ArrayLike) -> Self:
        """Feed per-event values. NaN (missing) and ±inf are skipped: one inf would make the running mean inf, and
        every later excess ``x − mean`` −inf or NaN, so the test would never alarm again."""
        count, mean, excess, drift = self._events, self._mean, self._excess, self._alarm.on
        v = as_values(values)
        for x in v[np.isfinite(v)].tolist():
            count += 1
            mean += (x - mean) / count
            excess = max(0.0, excess + x - mean - self.tolerance)
            if drift:
                drift = excess >= self.clear_ratio * self.threshold
            else:
                drift = count >= self.min_events and excess > self.threshold
            if drift != self._alarm.on:
                self._alarm.mark(drift, count)
        self._events, self._mean, self._excess = count, mean, excess
        return self

    @property
    def statistic(self) -> float:
        """The cumulative excess S."""
        return self._excess
