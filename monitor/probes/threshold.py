"""Probes: adversarial threshold search (*The Robustness Surface*, §10.4).

P(ε) is the agreement rate under a perturbation at intensity ε; the threshold is

    ε* = inf{ε > 0 : P(ε) < P(0) − δ},

found by bisection on [0, ε_max] to resolution η (seed 000 §10.4.4). When P(ε_max) ≥ P(0) − δ the threshold is not
crossed within the range and is reported as None ("> ε_max").

The range grows to fit the data: with ``eps_start`` below ε_max, P is evaluated on the ladder ε_start, 2·ε_start,
4·ε_start, … (the last rung is ε_max, the cap) until it crosses, and bisection then works on the bracket between the
last two rungs; a feature whose boundary lies at 5 standardized units is found without paying for a range of 8 on
every feature that crosses at 0.3. :func:`growth_ladder` lists the rungs. :func:`bisect_threshold` works on any callable
P(ε) — a model-backed curve from :meth:`monitor.probes.perturbations.ProbeSession.curve`, or a table of measured
values interpolated by the caller. Bisection assumes P is (roughly) non-increasing in ε; where it is not
(``quantize``) the result is *a* crossing point within η, not necessarily the infimum.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from monitor.errors import ProbeError
from monitor.probes.perturbations import ProbeSession, ProbeTarget


@dataclass(frozen=True, slots=True)
class ThresholdResult:
    """The outcome of one bisection.

    Attributes
    ----------
    eps_star : the threshold, (eps_low + eps_high)/2; None when not crossed within [0, eps_max].
    eps_low : the largest ε evaluated that was not crossed (0 when none was).
    eps_high : the smallest ε evaluated that was crossed; None when none was.
    eps_max : the search range's upper end (the cap when the range grew).
    p0 : P(0), the baseline.
    limit : P(0) − δ; crossing means P(ε) < limit.
    calls : how many times P was evaluated (P(0) included when it was computed here, a hint excluded).
    trace : every (ε, P(ε)) evaluated, in order (a hint first when one was used).
    """

    eps_star: float | None
    eps_low: float
    eps_high: float | None
    eps_max: float
    p0: float
    limit: float
    calls: int
    trace: tuple[tuple[float, float], ...]

    @property
    def crossed(self) -> bool:
        return self.eps_star is not None

    @property
    def searched_to(self) -> float:
        """The largest ε evaluated (a hint included): the search covered [0, searched_to]."""
        return max((e for e, _ in self.trace), default=0.0)


def growth_ladder(eps_start: float | None, eps_max: float) -> tuple[float, ...]:
    """The rungs at which a growing range evaluates P: ε_start·2^k below ε_max, then ε_max itself.

    >>> growth_ladder(1.0, 8.0), growth_ladder(1.0, 6.0), growth_ladder(None, 8.0), growth_ladder(2.0, 1.0)
    ((1.0, 2.0, 4.0, 8.0), (1.0, 2.0, 4.0, 6.0), (8.0,), (1.0,))
    """
    if eps_start is None or eps_start >= eps_max:
        return (eps_max,)
    rungs: list[float] = []
    eps = eps_start
    while eps < eps_max * (1 - 1e-12):
        rungs.append(eps)
        eps *= 2.0
    rungs.append(eps_max)
    return tuple(rungs)


def search_depth(eps_start: float | None, eps_max: float, eta: float) -> tuple[int, int]:
    """(most, fewest) evaluations of P one search can take, P(0) excluded: every rung plus the bisection of the
    widest bracket, and every rung with no crossing.

    >>> search_depth(None, 1.0, 0.01), search_depth(1.0, 8.0, 0.01)
    ((8, 1), (13, 4))
    """
    ladder = growth_ladder(eps_start, eps_max)
    lows = (0.0, *ladder[:-1])
    widest = max(high - low for low, high in zip(lows, ladder, strict=True))
    return len(ladder) + bisection_steps(widest, eta), len(ladder)


def bisection_steps(width: float, eta: float) -> int:
    """Halvings needed to shrink a bracket of ``width`` to at most ``eta``.

    >>> bisection_steps(1.0, 0.01), bisection_steps(0.1, 0.01), bisection_steps(0.005, 0.01)
    (7, 4, 0)
    """
    if width <= eta:
        return 0
    return max(0, math.ceil(math.log2(width / eta) - 1e-12))


def check_search(delta: float, eps_max: float, eta: float) -> None:
    """Raise :class:`ProbeError` unless 0 < δ, 0 < η < ε_max (all finite)."""
    if not (math.isfinite(delta) and delta > 0):
        raise ProbeError(f"δ (degradation tolerance) must be a finite number > 0; got {delta!r}")
    if not (math.isfinite(eps_max) and eps_max > 0):
        raise ProbeError(f"ε_max must be a finite number > 0; got {eps_max!r}")
    if not (math.isfinite(eta) and 0 < eta < eps_max):
        raise ProbeError(f"η (resolution) must be > 0 and below ε_max = {eps_max}; got {eta!r}")


def bisect_threshold(
    curve: Callable[[float], float],
    *,
    delta: float,
    eps_max: float,
    eta: float,
    p0: float | None = None,
    hint: tuple[float, float] | None = None,
    eps_start: float | None = None,
) -> ThresholdResult:
    """Find ε* = inf{ε > 0 : P(ε) < P(0) − δ} on [0, ε_max] by bisection.

    Parameters
    ----------
    curve : P(ε), any callable; it is called at 0 (unless ``p0`` is given), at ε_max (unless ``hint`` already
        brackets the crossing) and at the bisection midpoints.
    delta : degradation tolerance δ > 0 (same units as P).
    eps_max : upper end of the search range.
    eta : resolution: the final bracket is at most η wide, so ε* is within η/2 of the crossing.
    p0 : P(0) when already known (saves one call).
    hint : a known (ε_h, P(ε_h)) with 0 < ε_h ≤ ε_max, e.g. from the MRI scan. When it is crossed, the search
        brackets [0, ε_h] and skips evaluating P(ε_max).
    eps_start : grow the range from here (see the module docstring); None or ≥ ε_max searches [0, ε_max] at once.

    Returns
    -------
    ThresholdResult; ``eps_star`` is None ("> ε_max") when P(ε_max) ≥ P(0) − δ.

    Raises
    ------
    ProbeError
        δ, ε_max or η out of range, or a hint outside (0, ε_max].

    Examples
    --------
    >>> r = bisect_threshold(lambda e: 1.0 - e, delta=0.25, eps_max=1.0, eta=0.01)
    >>> abs(r.eps_star - 0.25) <= 0.01, r.calls
    (True, 9)
    >>> bisect_threshold(lambda e: 1.0, delta=0.25, eps_max=1.0, eta=0.01).eps_star is None
    True
    >>> r = bisect_threshold(lambda e: 1.0 if e < 5.0 else 0.0, delta=0.25, eps_max=8.0, eta=0.01, eps_start=1.0)
    >>> abs(r.eps_star - 5.0) <= 0.01, [e for e, _ in r.trace][:5]
    (True, [0.0, 1.0, 2.0, 4.0, 8.0])
    """
    check_search(delta, eps_max, eta)
    if eps_start is not None and not (math.isfinite(eps_start) and eps_start > 0):
        raise ProbeError(f"ε_start (where the range starts growing) must be a finite number > 0; got {eps_start!r}")
    p_at = _Traced(curve)
    trace = p_at.trace
    base = p_at(0.0) if p0 is None else float(p0)
    limit = base - delta
    high: float | None = None
    if hint is not None:
        eps_h, p_h = hint
        if not 0 < eps_h <= eps_max:
            raise ProbeError(f"threshold hint ε = {eps_h!r} is outside (0, ε_max = {eps_max}]")
        trace.append((float(eps_h), float(p_h)))
        if p_h < limit:
            high = float(eps_h)
    low = 0.0
    if high is None:
        for rung in growth_ladder(eps_start, eps_max):
            if p_at(rung) < limit:
                high = rung
                break
            low = rung
        if high is None:
            return ThresholdResult(None, eps_max, None, eps_max, base, limit, p_at.calls, tuple(trace))
    while high - low > eta:
        mid = 0.5 * (low + high)
        if p_at(mid) < limit:
            high = mid
        else:
            low = mid
    return ThresholdResult(0.5 * (low + high), low, high, eps_max, base, limit, p_at.calls, tuple(trace))


class _Traced:
    """P(ε) as a search evaluates it: each call counted, each (ε, P(ε)) noted in order; a value that is not finite
    refused."""

    def __init__(self, curve: Callable[[float], float]) -> None:
        self.curve = curve
        self.trace: list[tuple[float, float]] = []
        self.calls = 0

    def __call__(self, eps: float) -> float:
        self.calls += 1
        value = float(self.curve(eps))
        if not math.isfinite(value):
            raise ProbeError(f"P(ε) must be finite; P({eps!r}) = {value!r}")
        self.trace.append((eps, value))
        return value


@dataclass(frozen=True, slots=True)
class TargetThreshold:
    """The threshold of one probe target (a τ, or one feature of ``shift``).

    Attributes
    ----------
    perturbation : τ name.
    feature : feature index for ``shift``, else None.
    result : the bisection outcome (ε in the session's standardized units).
    rows : model rows this search evaluated.
    method : ``bisection``, or ``exact_tree`` (:mod:`monitor.probes.trees`: the step positions of a tree ensemble).
    """

    perturbation: str
    feature: int | None
    result: ThresholdResult
    rows: int
    method: str = "bisection"

    @property
    def key(self) -> str:
        return self.perturbation if self.feature is None else f"{self.perturbation}[{self.feature}]"


def threshold_profile(
    session: ProbeSession,
    targets: Sequence[ProbeTarget],
    *,
    delta: float,
    eps_max: float,
    eta: float,
    hints: Mapping[str, tuple[float, float]] | None = None,
    eps_start: float | None = None,
) -> list[TargetThreshold]:
    """Threshold search on each target of a session (the threshold profile).

    Parameters
    ----------
    session : the region's points and model.
    targets : what to search, in order (put the most fragile first when a budget may run out).
    delta, eps_max, eta, eps_start : as for :func:`bisect_threshold`; ε in standardized units.
    hints : target key -> a known (ε, P(ε)), e.g. the MRI scan's.

    Returns
    -------
    One :class:`TargetThreshold` per target, in order. P(0) = 1 costs nothing (ε = 0 is the clean output);
    each later evaluation costs B rows per target member (2B for a shift).

    Raises
    ------
    ProbeError
        Bad δ/ε_max/η; :class:`~monitor.probes.counting.BudgetExhaustedError` when the session's budget
        runs out (thresholds finished before it are lost; the funnel catches it per target).
    """
    check_search(delta, eps_max, eta)
    out: list[TargetThreshold] = []
    for target in targets:
        out.append(
            search_target(session, target, delta=delta, eps_max=eps_max, eta=eta, hints=hints, eps_start=eps_start)
        )
    return out


def search_target(
    session: ProbeSession,
    target: ProbeTarget,
    *,
    delta: float,
    eps_max: float,
    eta: float,
    hints: Mapping[str, tuple[float, float]] | None = None,
    eps_start: float | None = None,
) -> TargetThreshold:
    """Threshold search for one target; see :func:`threshold_profile`."""
    before = session.evaluations
    hint = None if hints is None else hints.get(target.key)
    if hint is not None and hint[0] > eps_max:
        hint = None
    result = bisect_threshold(
        session.curve(target), delta=delta, eps_max=eps_max, eta=eta, hint=hint, eps_start=eps_start
    )
    return TargetThreshold(target.name, target.feature, result, session.evaluations - before)
