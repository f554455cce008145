"""Stage 5b: detector thresholds from a stated false-alarm rate, calibrated on the reference by simulation.

A sequential detector (CUSUM, Page–Hinkley) on a stationary stream false-alarms at some rate per event; its
threshold h sets that rate. Instead of a hand-set h, :func:`threshold_for_rate` derives h from a target rate
(``false_alarms_per_million`` events, i.e. an expected run length of 10⁶ / rate events between false alarms):

1. simulate K streams of T events from the stationary null (resampled from the reference for Page–Hinkley;
   Bernoulli at the designed share for the CUSUM, see below), run the detector's recursion on each from its reset
   state and keep each stream's maximum statistic M_k (over events at which an alarm is allowed);
2. a detector with threshold h alarms within T events iff M_k > h, and its run length is close to geometric, so
   P(M > h) = 1 − (1 − r)^T for a per-event rate r. Where K·P is large enough (>= ``TAIL`` streams), h is the
   empirical (1 − P)-quantile of M;
3. for smaller rates (the usual case: 1 per 10⁶ events is beyond 4·10⁶ simulated events' reach with any precision)
   the tail of M is extended from that quantile with an exponential tail, P(M > h) ∝ e^{−θh} (Siegmund; the
   CUSUM's maximum has an exponential tail). θ is the Cramér–Lundberg exponent of the per-event increment,
   E[e^{θX}] = 1, computed exactly where the increment has a closed form (the Bernoulli
   CUSUM's two steps), else fitted to the simulated tail (peaks over threshold, exponential MLE).

This is Alibi Detect's ERT calibration (bootstrap streams from the reference, thresholds from quantiles of the
statistic) with a constant threshold and an analytic tail. Cost: K·T recursion steps vectorized over K streams,
about 50 ms for the defaults; results are cached by the detector's parameters (every segment's detectors share
one calibration). Assumptions, stated: events are independent draws from the reference's distribution; real
traffic with serial correlation (bursts of similar events) alarms more often than the simulation says.

The Bernoulli CUSUM's in-control parameter, the share of events above the cutoff, is estimated from the baseline's n
values; a new draw's true share differs from the estimate by about √(p(1 − p)/n), and the run length is exponential
in that error (it moves θ). So the CUSUM is designed for the share's upper confidence bound
(:func:`share_upper_bound`, Clopper–Pearson at :data:`BASELINE_CONFIDENCE`) and its threshold calibrated there: a
baseline holds its share of the budget unless its true share lies above that bound (guaranteed conditional
performance, Gandy & Kvaløy 2013), whatever its size — a small baseline gets a higher bound (a wider allowance), not
a tail of baselines that alarm at many times the stated rate.

Per-feature tests use :func:`benjamini_hochberg` (false discovery rate across features).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

log = logging.getLogger("monitor.drift.calibrate")

#: bootstrap streams and events per stream of a calibration (4·10⁶ simulated events)
STREAMS, HORIZON = 2000, 2000
#: the empirical quantile is used where at least this many streams exceed it; beyond, the exponential tail
TAIL = 40
#: below this many reference values a calibration is not attempted (the detector falls back, with a warning)
MIN_REFERENCE = 200
#: a CUSUM is calibrated from this many reference values (below, Lorden's bound at the share's upper bound)
MIN_CUSUM_REFERENCE = 50
#: a CUSUM holds its share of the false-alarm budget for this share of the baselines it could have been built from:
#: its in-control exceedance share is designed at this upper confidence bound of the baseline's share
BASELINE_CONFIDENCE = 0.99


@dataclass(frozen=True, slots=True)
class Calibration:
    """How a threshold was derived.

    Attributes
    ----------
    threshold : the derived threshold.
    false_alarms_per_million : the target rate (false alarms per 10⁶ stationary events).
    method : ``"bootstrap"`` (empirical quantile), ``"bootstrap+tail"`` (extended by the exponential tail) or
        ``"fallback"`` (no usable simulation; see ``detail``).
    streams, horizon : bootstrap streams × events per stream simulated (0 for a fallback).
    theta : exponent of the tail used (NaN where not used).
    seconds : wall time of the calibration.
    detail : a sentence for the log.
    """

    threshold: float
    false_alarms_per_million: float
    method: str
    streams: int = 0
    horizon: int = 0
    theta: float = float("nan")
    seconds: float = 0.0
    detail: str = ""

    @property
    def expected_run_length(self) -> float:
        """Expected events between false alarms on a stationary stream, 10⁶ / rate."""
        return 1e6 / self.false_alarms_per_million


def rate_per_event(false_alarms_per_million: float) -> float:
    """Per-event false-alarm probability of a rate stated per 10⁶ events.

    >>> rate_per_event(1.0)
    1e-06
    """
    return false_alarms_per_million / 1e6


def threshold_for_rate(
    maxima: NDArray[np.float64], horizon: int, rate: float, theta: float | None = None
) -> tuple[float, str, float] | None:
    """The threshold h at which the first-alarm hazard is ``rate`` per event, from bootstrap streams' maxima.

    The hazard is r(h) = −ln(P(M > h)ᶜ) / T with P the share of the streams whose maximum exceeds h, up to the anchor
    quantile that ``TAIL`` streams exceed, and beyond it r(anchor)·e^{−θ(h − anchor)}; h solves r(h) = rate
    (bisection).

    Parameters
    ----------
    maxima : (K,) maximum statistic of each bootstrap stream of ``horizon`` events.
    horizon : events per stream.
    rate : target false alarms per event (0 < rate < 1).
    theta : the tail exponent; None: fitted to the maxima above the anchor (exponential MLE).

    Returns
    -------
    (threshold, method, θ) or None when the maxima carry no information (the statistic never moves).

    >>> m = -np.log((np.arange(20_000) + 0.5) / 20_000)  # exact quantiles of P(M > h) = e^{-h}: hazard ≈ e^{-h} / T
    >>> h, method, _ = threshold_for_rate(m, 100, 1e-6, theta=1.0)
    >>> round(h, 1), method  # ln(1 / (1e-6 · 100)) = 9.2
    (9.2, 'bootstrap+tail')
    """
    m = np.sort(np.asarray(maxima, dtype=np.float64).reshape(-1))
    k = m.size
    if k < 2 * TAIL or m[-1] <= m[0]:
        return None
    anchor_p = TAIL / k
    anchor = float(np.quantile(m, 1.0 - anchor_p))
    if theta is None:
        excess = m[m > anchor] - anchor
        if excess.size < 3 or float(excess.mean()) <= 0.0:
            return None
        theta = 1.0 / float(excess.mean())
    th = float(theta)
    floor = 0.5 / k  # a share of 0 or 1 streams is not a probability

    def hazard(h: float) -> float:
        if h > anchor:
            return -math.log1p(-anchor_p) / horizon * math.exp(-th * (h - anchor))
        share = min(1.0 - floor, max(floor, 1.0 - np.searchsorted(m, h, side="right") / k))
        return -math.log1p(-share) / horizon

    lo = float(m[0])
    hi = anchor + math.log(max(1.0, 1.0 / (rate * horizon))) / th + 1.0
    if hazard(lo) <= rate:
        return lo, "bootstrap", th
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if hazard(mid) > rate else (lo, mid)
        if hi - lo < 1e-6 * max(1.0, abs(hi)):
            break
    return hi, "bootstrap+tail" if hi > anchor else "bootstrap", th


def lundberg_exponent(p: float, up: float, down: float) -> float | None:
    """θ > 0 with p·e^{θ·up} + (1 − p)·e^{θ·down} = 1 (the CUSUM maximum's tail exponent), or None if the
    increment's mean is not negative (the statistic drifts up on the reference itself).

    >>> up, down = math.log(0.2 / 0.1), math.log(0.8 / 0.9)  # the LLR steps for a rate 0.1 → 0.2
    >>> lundberg_exponent(0.1, up, down)  # the stream's rate is the LLR's null rate: θ = 1
    1.0
    >>> round(lundberg_exponent(0.12, up, down), 2)  # 20 % more exceedances: θ about halves (run length ≈ its square root)
    0.53
    """
    if not (0.0 < p < 1.0) or p * up + (1.0 - p) * down >= 0.0:
        return None

    def f(t: float) -> float:
        return p * math.exp(t * up) + (1.0 - p) * math.exp(t * down) - 1.0

    hi = math.log(1.0 / p) / up + 1.0
    while f(hi) <= 0.0:
        hi *= 2.0
    lo = 1e-9
    while f(lo) >= 0.0 and lo < hi:  # f < 0 just right of 0 (negative mean)
        lo *= 10.0
    from scipy.optimize import brentq  # on use: scipy.optimize and scipy.stats cost ~0.5 s at every command start

    root = float(brentq(f, lo, hi, xtol=1e-12))
    return round(root, 9)


_CACHE: dict[tuple[object, ...], Calibration] = {}
_CACHE_MAX = 256


def cached(key: tuple[object, ...], compute: Callable[[], Calibration]) -> Calibration:
    """The calibration for ``key``, computed once (bounded cache: the oldest entry goes first)."""
    hit = _CACHE.get(key)
    if hit is None:
        hit = compute()
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = hit
    return hit


def share_upper_bound(above: int, size: int, confidence: float = BASELINE_CONFIDENCE) -> float:
    """Upper ``confidence`` bound of the share of new events above a cutoff that ``above`` of ``size`` baseline values
    exceed: the ``confidence`` quantile of Beta(above + 1, size − above).

    It is the Clopper–Pearson bound for a binomial share (a cutoff that ties, e.g. flicker's 0), and exact where the
    cutoff is an order statistic of a continuous baseline: the share of new draws above its k-th largest value is
    Beta(k, size + 1 − k), so the bound holds for ``confidence`` of the baselines whatever their size.

    >>> round(share_upper_bound(500, 5000), 4), round(share_upper_bound(30, 300), 4)
    (0.1103, 0.1474)
    >>> round(share_upper_bound(0, 5000), 5)  # no value above: about 4.6 / size
    0.00092
    """
    if above >= size:
        return 1.0
    from scipy.special import betaincinv  # on use (see brentq above)

    return float(betaincinv(above + 1, size - above, confidence))


def calibrate_cusum(
    p: float,
    up: float,
    down: float,
    false_alarms_per_million: float,
    *,
    reference_size: int,
    streams: int = STREAMS,
    horizon: int = HORIZON,
    seed: int = 0,  # not a setting: the bootstrap's own seed, fixed so that a threshold is reproducible
    name: str = "cusum",
) -> Calibration:
    """Threshold of the Bernoulli CUSUM S_t = max(0, S_{t−1} + (up if hit else down)) for a stated false-alarm rate,
    for streams whose share of hits is ``p``.

    ``p`` is the share the CUSUM is designed for (its LLR's null): the baseline's share's upper confidence bound
    (:func:`share_upper_bound`), so a stream from any baseline whose true share lies below it alarms at most at the
    rate (the run length falls as the share rises). The streams are Bernoulli(p), the tail exponent is the exact
    Lundberg θ of the increment at p. Falls back to Lorden's bound h = ln(ARL) (the LLR CUSUM's run length is at
    least e^h when the stream's share is at most its null; conservative) when the reference has fewer than
    ``MIN_CUSUM_REFERENCE`` values, with a logged warning.
    """
    rate = rate_per_event(false_alarms_per_million)
    small = reference_size < MIN_CUSUM_REFERENCE
    key = ("cusum", round(p, 12), round(up, 12), round(down, 12), rate, streams, horizon, seed, small)

    def compute() -> Calibration:
        t0 = time.perf_counter()
        bound = math.log(1.0 / rate)
        why = ""
        if small:
            why = f"the reference has {reference_size} values (< {MIN_CUSUM_REFERENCE})"
        elif not 0.0 < p < 1.0:
            why = f"the designed share of hits is {p:g}"
        if not why:
            rng = np.random.default_rng(seed)
            s = np.zeros(streams)
            mx = np.zeros(streams)
            for t0_ in range(0, horizon, 500):
                inc = np.where(rng.random((min(500, horizon - t0_), streams)) < p, up, down)
                for row in inc:
                    s += row
                    np.maximum(s, 0.0, out=s)
                    np.maximum(mx, s, out=mx)
            found = threshold_for_rate(mx, horizon, rate, lundberg_exponent(p, up, down))
            if found is not None:
                return _calibrated(name, f"h = {found[0]:.2f}", found, false_alarms_per_million, streams, horizon, t0)
            why = "the simulated statistic never moved"
        log.warning(
            "drift threshold not calibrated: %s; using Lorden's bound h = ln(1e6 / rate) = %.2f (conservative)",
            why,
            bound,
            extra={"detector": name},
        )
        return Calibration(
            bound, false_alarms_per_million, "fallback", seconds=time.perf_counter() - t0, detail=f"{name}: {why}"
        )

    return cached(key, compute)


def _calibrated(
    name: str,
    what: str,
    found: tuple[float, str, float],
    false_alarms_per_million: float,
    streams: int,
    horizon: int,
    t0: float,
) -> Calibration:
    """The :class:`Calibration` of a threshold ``threshold_for_rate`` found (h, method, θ), logged."""
    h, method, theta = found
    cal = Calibration(
        h,
        false_alarms_per_million,
        method,
        streams,
        horizon,
        theta,
        time.perf_counter() - t0,
        f"{name}: {what} for {false_alarms_per_million:g} false alarms per 10^6 events "
        f"({streams} x {horizon} bootstrap events, {method})",
    )
    log.info("drift threshold calibrated: %s in %.3f s", cal.detail, cal.seconds, extra={"detector": name})
    return cal


def calibrate_page_hinkley(
    reference: NDArray[np.float64],
    tolerance: float,
    min_events: int,
    false_alarms_per_million: float,
    *,
    streams: int = STREAMS,
    horizon: int = HORIZON,
    seed: int = 0,  # not a setting: the bootstrap's own seed, fixed so that a threshold is reproducible
    name: str = "page_hinkley",
) -> Calibration | None:
    """Threshold of the Page–Hinkley test (running mean since reset, tolerance δ) for a stated false-alarm rate,
    from bootstrap streams resampled from ``reference``; the tail exponent is fitted to the simulated maxima.

    Returns None (the caller falls back, with a warning) when the reference is too small or the statistic never
    moves on it.
    """
    ref = np.asarray(reference, dtype=np.float64)
    if ref.size < MIN_REFERENCE:
        return None
    horizon = max(horizon, 4 * min_events)
    rate = rate_per_event(false_alarms_per_million)
    digest = hash(ref.tobytes())
    key = ("ph", digest, tolerance, min_events, rate, streams, horizon, seed)

    def compute() -> Calibration:
        t0 = time.perf_counter()
        rng = np.random.default_rng(seed)
        mean = np.zeros(streams)
        s = np.zeros(streams)
        mx = np.zeros(streams)
        for start in range(0, horizon, 500):
            block = ref[rng.integers(0, ref.size, (min(500, horizon - start), streams))]
            for i, x in enumerate(block):
                count = start + i + 1
                mean += (x - mean) / count
                s += x - mean - tolerance
                np.maximum(s, 0.0, out=s)
                if count >= min_events:
                    np.maximum(mx, s, out=mx)
        found = threshold_for_rate(mx, horizon, rate)
        if found is None:
            return Calibration(float("nan"), false_alarms_per_million, "fallback", detail=f"{name}: no movement")
        return _calibrated(name, f"threshold = {found[0]:.4g}", found, false_alarms_per_million, streams, horizon, t0)

    cal = cached(key, compute)
    return cal if math.isfinite(cal.threshold) else None


def benjamini_hochberg(p_values: NDArray[np.float64]) -> NDArray[np.float64]:
    """Benjamini–Hochberg adjusted p-values (q-values): reject where q <= the FDR level. NaN stays NaN.

    Under independence (or positive dependence) of the tests, rejecting q <= α keeps the expected share of false
    discoveries among the discoveries at most α; when no feature moved it is the chance of any false discovery.

    >>> benjamini_hochberg(np.array([0.01, 0.04, 0.03, 0.5])).round(3).tolist()
    [0.04, 0.053, 0.053, 0.5]
    """
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    n = ok.size
    if n == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    scaled = p[order] * n / np.arange(1, n + 1)
    q = np.minimum(1.0, np.minimum.accumulate(scaled[::-1])[::-1])
    out[order] = q
    return out
