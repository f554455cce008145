"""The configuration of :class:`~monitor.sampler.uniform.UniformSampler` (and of the stratified sampler built on it):
its budget, the time constants of its estimates, and the bound on the event-time reservoir's delay."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field

from monitor.errors import ConfigError


@dataclass(frozen=True, slots=True)
class UniformSamplerConfig:
    """How much scoring may take and how the sampler measures what is offered; validated on construction.

    Attributes
    ----------
    target_per_second : float
        Cap on scored events per second, all models together; 0 = no cap (only the CPU budget limits).
    model_targets : mapping of model → events per second
        Explicit per-model caps; other models share the rest of the total.
    cpus : float
        CPUs the process may use (:func:`monitor.cpus.available_cpus`).
    cpu_share : float
        Share of ``cpus`` that scoring may take (0 = no CPU limit; then only ``target_per_second`` limits).
    cost_smoothing : float in (0, 1]
        Weight of each new batch in the moving average of CPU seconds per event
        (:meth:`~monitor.sampler.uniform.UniformSampler.observe_cost`).
    burst_seconds : float
        Bucket depths, in seconds of each target and of the CPU budget.
    rate_window_seconds : float
        Time constant of the offered-rate estimates.
    horizon_seconds : float
        Sliding horizon of the sampled-fraction metric.
    reallocate_seconds : float
        How often budgets are re-divided between models (and, stratified, between classes).
    headroom : float
        The buckets refill at ``(1 + headroom) × target``: the acceptance probability aims at the target, the
        buckets only cap surges the rate estimate has not caught up with. At 0 a bucket exactly at the target
        refuses a noticeable share of the draws (a random walk against a wall) and the kept rate falls short.
    max_strata : int
        Live classes tracked per model; further classes are counted as ``"other"``.
    max_delay_seconds : float
        Bound on the event-time reservoir's delay (work-conserving mode): a poll that cannot be scored whole and
        whose offered rate is not known yet (the first poll of a backlog) is held, undecided, until the next poll
        measures the rate, or until the stream pauses, and at most this long; also the longest gap between two polls
        over which an offered rate is measured. 0: never hold.

    Raises
    ------
    ConfigError
        A negative target, share or model target, a non-positive window, horizon or period, or no CPUs.

    Examples
    --------
    >>> UniformSamplerConfig(10.0).event_cap_per_second
    10.0
    >>> UniformSamplerConfig(cpus=2.0, cpu_share=0.5).cpu_cap_per_second
    1.0
    >>> UniformSamplerConfig(cpus=2.0).cpu_cap_per_second  # no CPU share: no CPU limit
    inf
    """

    target_per_second: float = 0.0
    _: KW_ONLY
    model_targets: Mapping[str, float] = field(default_factory=dict)
    cpus: float = 1.0
    cpu_share: float = 0.0
    cost_smoothing: float = 0.2
    burst_seconds: float = 1.0
    rate_window_seconds: float = 10.0
    horizon_seconds: float = 60.0
    reallocate_seconds: float = 1.0
    headroom: float = 0.1
    max_strata: int = 32
    max_delay_seconds: float = 1.0

    def __post_init__(self) -> None:
        if not self.max_delay_seconds >= 0:
            raise ConfigError(f"max_delay_seconds must be >= 0; got {self.max_delay_seconds!r}")
        if not self.headroom >= 0:
            raise ConfigError(f"headroom must be >= 0; got {self.headroom!r}")
        for name, v in (("target_per_second", self.target_per_second), ("cpu_share", self.cpu_share)):
            if not (v >= 0 and math.isfinite(v)):
                raise ConfigError(f"{name} must be a finite number >= 0 (0: no limit); got {v!r}")
        for name, v in (
            ("cpus", self.cpus),
            ("burst_seconds", self.burst_seconds),
            ("rate_window_seconds", self.rate_window_seconds),
            ("horizon_seconds", self.horizon_seconds),
            ("reallocate_seconds", self.reallocate_seconds),
        ):
            if not v > 0:
                raise ConfigError(f"{name} must be > 0; got {v!r}")
        if not 0 < self.cost_smoothing <= 1:
            raise ConfigError(f"cost_smoothing must be in (0, 1]; got {self.cost_smoothing!r}")
        bad = {m: t for m, t in self.model_targets.items() if not t >= 0}
        if bad:
            raise ConfigError(f"model_targets must be >= 0 events/s; got {bad}")
        if self.max_strata < 1:
            raise ConfigError(f"max_strata must be >= 1; got {self.max_strata}")
        # a private copy (the caller's mapping may change later) and plain floats, as the arithmetic expects
        object.__setattr__(self, "model_targets", dict(self.model_targets))
        for name in (
            "target_per_second",
            "cpus",
            "cpu_share",
            "cost_smoothing",
            "burst_seconds",
            "rate_window_seconds",
            "horizon_seconds",
            "reallocate_seconds",
            "headroom",
            "max_delay_seconds",
        ):
            object.__setattr__(self, name, float(getattr(self, name)))

    @property
    def cpu_cap_per_second(self) -> float:
        """The configured CPU seconds per second scoring may take, at most (inf: no CPU limit)."""
        return self.cpus * self.cpu_share if self.cpu_share > 0 else math.inf

    @property
    def event_cap_per_second(self) -> float:
        """The cap on scored events per second, all models (inf: none)."""
        return self.target_per_second if self.target_per_second > 0 else math.inf
