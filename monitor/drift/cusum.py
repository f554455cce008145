"""Stage 5b: one-sided (upward) CUSUM on the rate of high values, the default sequential detector.

γ is mostly near 0 with a heavy right tail, and flicker is mostly exactly 0, so a CUSUM on the raw
values is ruled by a few tail events and its threshold depends on the model's scale. A harmful shift
moves events toward decision boundaries, i.e. *more events land in the tail*. This detector turns
each event into an exceedance indicator b = [x > c], with c the reference's ``quantile`` (for γ the
reference q90; ties handled: when most reference values are 0, c = 0 and the share is the share above 0), and runs
Page's Bernoulli CUSUM for the rate rising from p₀ to p₁:

    S_t = min(cap, max(0, S_{t-1} + b·ln(p₁/p₀) + (1 − b)·ln((1 − p₁)/(1 − p₀)))).

p₀ is not the reference's share p̂ itself but its upper confidence bound
(:func:`~monitor.drift.calibrate.share_upper_bound`, 99 %): the share a new draw from the reference's population
has above c differs from p̂ by about √(p̂(1 − p̂)/n) for n reference values, and the run length is exponential in
that error: designed at p̂ on a few hundred values, a CUSUM holds its rate only on average over the baselines it
could have been built from, an unusual one alarming at many times it. Designed at the bound, it holds its rate on
every baseline whose true share lies below the bound (99 % of them, whatever their size). p₁ is the rise
to detect, ``rate_ratio``·p̂, or √``rate_ratio``·p₀ where the bound comes that close to it (a small reference cannot
tell a smaller rise from its own sampling error).

The alarm turns on when S > h and off when S < ``clear_ratio``·h (hysteresis, so an alert does not
flap while S wanders around h).

It is scale-free (only ranks against the reference matter), and h is in log-likelihood-ratio units:
the in-control run length grows like e^h. By default h is not set by hand: it is derived from
``false_alarms_per_million`` (false alarms per 10⁶ stationary events) by simulating streams whose share of
exceedances is p₀ (:func:`~monitor.drift.calibrate.calibrate_cusum`; the result is in ``calibration``). A
``threshold`` given explicitly pins h instead. S is capped at ``cap_ratio``·h so that an alarm clears
within a bounded number of events, (cap_ratio − clear_ratio)·h / |ln((1 − p₁)/(1 − p₀))|, once the
rate returns to p₀.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Self

import numpy as np
from numpy.typing import ArrayLike

from monitor.drift.base import AlarmCounter, SequentialDetector, as_values, check_reference, require
from monitor.drift.calibrate import Calibration, calibrate_cusum, share_upper_bound


@dataclass(frozen=True, slots=True)
class CusumBounds:
    """The bounds that keep a :class:`Cusum` usable and its alarm steady (checked by the Cusum that takes them).

    Attributes
    ----------
    min_rate : floor on p̂ and p₀ (0 < min_rate < 0.5).
    cap_ratio : S is capped at cap_ratio·h (>= 1).
    clear_ratio : the alarm clears when S < clear_ratio·h (0 <= clear_ratio <= 1).
    """

    min_rate: float = 1e-3
    cap_ratio: float = 2.0
    clear_ratio: float = 0.5


class Cusum(SequentialDetector):
    """Bernoulli CUSUM on exceedances of a reference quantile (one-sided, upward).

    Parameters
    ----------
    reference : (m,) reference sample of the signal (γ or flicker), m >= 10.
    quantile : reference quantile that defines a "high" value (0 < quantile < 1).
    rate_ratio : the rise of the exceedance rate to detect, p₁/p̂ (> 1).
    threshold : h, alarm level in log-likelihood units (> 0); None (default): calibrated on the reference for
        ``false_alarms_per_million``.
    false_alarms_per_million : target false alarms per 10⁶ stationary events (0 < rate < 10⁵), used when
        ``threshold`` is None; the expected run length between false alarms is 10⁶ / rate events.
    bounds : the floor on p₀, S's cap and the alarm's clear level (default :class:`CusumBounds`'s).
    name : label reported in :class:`DriftState`.

    Raises
    ------
    ConfigError
        On a parameter out of range.
    DataError
        If the reference has fewer than 10 finite values.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> det = Cusum(rng.exponential(size=5000))
    >>> det.update(rng.exponential(size=2000)).drift_detected
    False
    >>> det.update(rng.exponential(size=500) * 3.0).drift_detected
    True
    """

    def __init__(
        self,
        reference: ArrayLike,
        *,
        quantile: float = 0.9,
        rate_ratio: float = 2.0,
        threshold: float | None = None,
        false_alarms_per_million: float = 1.0,
        bounds: CusumBounds | None = None,
        name: str = "cusum",
    ) -> None:
        b = bounds or CusumBounds()
        min_rate, cap_ratio, clear_ratio = b.min_rate, b.cap_ratio, b.clear_ratio
        require(0.0 < quantile < 1.0, f"quantile must be in (0, 1); got {quantile!r}")
        require(rate_ratio > 1.0, f"rate_ratio must be > 1 (the detector looks for a rising rate); got {rate_ratio!r}")
        self._check_threshold(threshold, false_alarms_per_million)
        require(0.0 < min_rate < 0.5, f"min_rate must be in (0, 0.5); got {min_rate!r}")
        require(cap_ratio >= 1.0, f"cap_ratio must be >= 1; got {cap_ratio!r}")
        require(0.0 <= clear_ratio <= 1.0, f"clear_ratio must be in [0, 1]; got {clear_ratio!r}")
        ref = check_reference(reference, name)
        self.quantile, self.rate_ratio = quantile, rate_ratio
        self.min_rate, self.cap_ratio, self.clear_ratio, self.name = min_rate, cap_ratio, clear_ratio, name
        self.cutoff = float(np.quantile(ref, quantile))
        above = int(np.count_nonzero(ref > self.cutoff))
        #: the reference's share above the cutoff (floored at ``min_rate``): what an alert compares a window with
        self.null_rate = max(min_rate, above / ref.size)
        #: the share the CUSUM is designed for: the reference share's upper confidence bound (floored at ``min_rate``)
        self.design_rate = max(min_rate, share_upper_bound(above, ref.size))
        wanted = max(rate_ratio * self.null_rate, math.sqrt(rate_ratio) * self.design_rate)
        self.alt_rate = min(wanted, 0.5 * (1.0 + self.design_rate))
        self._up = math.log(self.alt_rate / self.design_rate)
        self._down = math.log((1.0 - self.alt_rate) / (1.0 - self.design_rate))
        #: how the threshold was derived (None when ``threshold`` was given)
        self.calibration: Calibration | None = None
        if threshold is None:
            self.calibration = calibrate_cusum(
                self.design_rate, self._up, self._down, false_alarms_per_million, reference_size=ref.size, name=name
            )
            threshold = self.calibration.threshold
        self.threshold = threshold
        self._cap = cap_ratio * threshold
        self._clear = clear_ratio * threshold
        self._alarm = AlarmCounter()
        self.reset()

    def reset(self) -> None:
        """Back to S = 0 and no events."""
        self._s = 0.0
        self._events = 0
        self._alarm.reset()

    def update(self, values: ArrayLike) -> Self:
        """Feed per-event values (NaN = missing, skipped)."""
        s, h, clear, cap, up, down = self._s, self.threshold, self._clear, self._cap, self._up, self._down
        alarm, event = self._alarm, self._events
        for hit in (as_values(values) > self.cutoff).tolist():
            s = min(cap, max(0.0, s + (up if hit else down)))
            event += 1
            if (not alarm.on and s > h) or (alarm.on and s < clear):
                alarm.mark(not alarm.on, event)
        self._s, self._events = s, event
        return self

    @property
    def statistic(self) -> float:
        """The CUSUM sum S (log-likelihood ratio units)."""
        return self._s
