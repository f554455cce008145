"""The sampler's budget: the CPU budget and the event cap, their buckets, and their division between models.

The CPU budget is ``cpu_share`` of the CPUs the process may use, or less while the ingest-first controller
(:mod:`monitor.sampler.ingest_first`) says so. It is divided between models by max-min fairness in CPU time: a model
whose offered work (offered rate × its measured cost per event) is below an equal share keeps all of its events, and
the rest is split equally between the models that offer more; what no model can use is added to every model's share
(work-conserving). The event cap (``target_per_second``, explicit ``model_targets`` first) is shared by the same
max-min fairness in events. Budgets are re-divided every ``reallocate_seconds``, and at the next decision when a model
appears, a model's cost is first measured, or the CPU budget moves.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from monitor.sampler.accounts import ModelAccount
from monitor.sampler.budget import CpuBucket, TokenBucket, water_fill
from monitor.sampler.uniform_config import UniformSamplerConfig


class SamplingBudget:
    """The CPU and event buckets shared by all models, and each model's share of them.

    Examples
    --------
    >>> b = SamplingBudget(UniformSamplerConfig(cpus=2.0, cpu_share=0.8))
    >>> b.set_cpu_budget(0.2, now=0.0)
    >>> b.cpu_per_second
    0.2
    >>> b.set_cpu_budget(5.0, now=1.0)  # at most the cap
    >>> b.cpu_per_second
    1.6
    """

    def __init__(self, config: UniformSamplerConfig) -> None:
        self.config = config
        #: the ingest-first budget (None: the cap), :meth:`set_cpu_budget`; kept across :meth:`reset`
        self._cpu_budget: float | None = None
        self._next_reallocation: float | None = None
        self.reset()

    def reset(self) -> None:
        """Full buckets; the budget is divided at the next decision."""
        c = self.config
        cap = c.event_cap_per_second * (1.0 + c.headroom)
        #: the event cap's bucket, all models
        self.events = TokenBucket(cap, max(1.0, cap * c.burst_seconds))
        #: the CPU budget's bucket, all models
        self.cpu = CpuBucket(self.cpu_per_second, c.burst_seconds)
        self._next_reallocation = None

    @property
    def cpu_per_second(self) -> float:
        """CPU seconds per second that scoring may take now: the cap, or less while :meth:`set_cpu_budget` says so
        (inf: no CPU limit)."""
        cap = self.config.cpu_cap_per_second
        return cap if self._cpu_budget is None else min(cap, self._cpu_budget)

    def set_cpu_budget(self, cpu_per_second: float, now: float) -> None:
        """Let scoring take ``cpu_per_second`` (at most the cap) from ``now`` on; the budget is re-divided between
        models at the next decision when it moved by more than 10 %. A cut to less than half empties the CPU bucket:
        what was saved at the higher budget is not spent while ingest needs the time. Ignored without a CPU cap
        (``cpu_share`` 0)."""
        cap = self.config.cpu_cap_per_second
        if math.isinf(cap) or not cpu_per_second > 0:
            return
        before = self.cpu_per_second
        self._cpu_budget = min(cap, float(cpu_per_second))
        after = self.cpu_per_second
        if abs(after - before) > 0.1 * before:
            self.cpu.set_rate(after, now, empty=after < before / 2)
            self._next_reallocation = None

    def divide_soon(self) -> None:
        """Re-divide the budget at the next decision (a newcomer gets its share at once)."""
        self._next_reallocation = None

    def due(self, now: float) -> bool:
        """Whether the budget is to be re-divided at ``now``."""
        return self._next_reallocation is None or now >= self._next_reallocation

    def reallocate(self, models: Mapping[str, ModelAccount], now: float) -> None:
        """Set each model's target and bucket: CPU time by max-min fairness (explicit model caps first), then the
        event cap.

        A model watched for less than ``reallocate_seconds`` has no reliable rate yet: it is not capped at its
        estimate, and budgets are re-divided ten times as often until every model has settled. What no model can
        use (every one offers less than its share) is added to every model's share: work-conserving.
        """
        c = self.config
        young = {name for name, m in models.items() if m.offered.observed_seconds(now) < c.reallocate_seconds}
        self._next_reallocation = now + (0.1 if young else 1.0) * c.reallocate_seconds
        offered = {name: (math.inf if name in young else m.offered.rate(now)) for name, m in models.items()}
        explicit = {name: t for name, t in c.model_targets.items() if name in models}
        # events/s each model may score within the CPU budget
        cpu_targets = self.divide(
            self.cpu_per_second,
            {name: min(offered[name], explicit.get(name, math.inf)) for name in models},
            {name: m.cost_seconds for name, m in models.items()},
        )
        # then the event cap (explicit model targets first, the rest max-min)
        used = sum(min(t, offered[name], cpu_targets[name]) for name, t in explicit.items())
        implicit = {name: min(offered[name], cpu_targets[name]) for name in models if name not in explicit}
        shares = self.divide(c.event_cap_per_second - used, implicit, {})
        for name, model in models.items():
            target = min(cpu_targets[name], explicit[name] if name in explicit else shares[name])
            model.target = target
            cap = target * (1.0 + c.headroom)
            model.bucket.set_rate(cap, cap * c.burst_seconds, now, fill=model.fresh)
            model.fresh = False

    @staticmethod
    def divide(budget: float, demand: Mapping[str, float], cost: Mapping[str, float]) -> dict[str, float]:
        """Events/s per key: ``budget`` (in units of ``cost``, 1 per event where missing or unmeasured) water-filled
        over ``demand`` (events/s, inf: unknown), plus what every key leaves unused; inf where the budget is inf or the
        cost unmeasured.

        >>> SamplingBudget.divide(10.0, {"a": 2.0, "b": 100.0}, {})  # "a" keeps its 2; "b" gets the other 8
        {'a': 2.0, 'b': 8.0}
        """
        unit = {k: (cost.get(k, 1.0) if cost.get(k, 1.0) > 0 else 0.0) for k in demand}
        if math.isinf(budget):
            return dict.fromkeys(demand, math.inf)
        budget = max(0.0, budget)
        limited = {k: d * unit[k] if d < math.inf else math.inf for k, d in demand.items() if unit[k] > 0}
        alloc = water_fill(budget, limited)
        spare = max(0.0, budget - sum(alloc.values()))
        return {k: (alloc[k] + spare) / unit[k] if unit[k] > 0 else math.inf for k in demand}

    @property
    def work_conserving(self) -> bool:
        """A CPU budget and no event cap: polls that fit the CPU bucket are scored whole (a cap is a hard cap)."""
        return not math.isinf(self.cpu.cpu_per_second) and self.config.target_per_second <= 0

    def fits(self, model: ModelAccount, events: int, now: float) -> bool:
        """``events`` of ``model`` can be scored whole: the CPU bucket is at least half full and holds their cost."""
        cpu = self.cpu
        if math.isinf(cpu.cpu_per_second):
            return True
        return cpu.available(now) and cpu.balance >= cpu.depth / 2 and events * model.cost_seconds <= cpu.balance

    def absorbs(self, model: ModelAccount, events: int, now: float) -> bool:
        """Without a reservoir: whether this poll is scored whole: work-conserving and the poll fits (:meth:`fits`)."""
        return self.work_conserving and self.fits(model, events, now)

    def capacity(self, model: ModelAccount, name: str) -> float | None:
        """Events/s scoring can sustain for ``model`` alone: the CPU budget over its measured cost per event, capped
        by the event cap (its explicit target first); None while neither bounds it."""
        capacity = math.inf
        if not math.isinf(self.cpu_per_second) and model.cost_seconds > 0:
            capacity = self.cpu_per_second / model.cost_seconds
        capacity = min(capacity, self.config.model_targets.get(name, self.config.event_cap_per_second))
        return None if math.isinf(capacity) else capacity
