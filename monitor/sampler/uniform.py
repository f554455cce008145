"""Stage 2: work-conserving uniform sampling — every event is scored while the engine keeps up; under overload
every event of a model has the same chance of being scored.

What scoring can sustain is measured, not assumed (DECISIONS 14): the CPU budget is ``cpu_share`` of the CPUs
the process may use (:func:`monitor.cpus.available_cpus`: affinity capped by the cgroup's CPU quota), and each
model's cost is a moving average of the CPU seconds per scored event that the pipeline reports after every
micro-batch (:meth:`UniformSampler.observe_cost`). The budget is divided between models by max-min fairness in
CPU time: a model whose offered work (offered rate × its cost) is below an equal share keeps all of its events,
and the rest is split equally between the models that offer more, re-divided every ``reallocate_seconds``. When
every model offers less than its share, the spare CPU is added to every model's share, so nothing is sampled away
while the engine keeps up — a burst (a first test, a backlog after a restart, a traffic spike) is scored whole as
long as it fits the CPU bucket (``burst_seconds`` of the CPU budget). A model's events are accepted with
probability ``share / offered rate`` (its events per second), so that under overload acceptance is spread evenly
over the stream, and a backlog read in event-time order is sampled evenly over its event-time span rather than in
its first second; token buckets only cap surges the rate estimate has not caught up with. A model whose cost is not
known yet (nothing scored) is not limited by CPU.

An optional cap ``target_per_second`` (events/s, all models together; explicit ``model_targets`` per model) is
shared by the same max-min fairness in events; 0 means no cap, only the CPU budget.

Forced keeps (``force=True``, e.g. an event whose live prediction disagrees with the ONNX copy) are always kept
and paid for from the buckets, so they crowd ordinary samples out rather than exceed the budget for long.

Counters are kept per model and per *stratum* — the live server's predicted class (``"none"`` when the event
carries no live label, ``"other"`` past ``max_strata`` classes) — so that :mod:`monitor.sampler.stratified` can
reuse this machinery and the uniform sampler still reports its class mix.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from monitor.errors import ConfigError
from monitor.events import InferenceEvent
from monitor.sampler.base import ModelSamplingStats, StratumStats, fraction_and_weight, sample_each
from monitor.sampler.budget import CpuBucket, RateEstimator, TokenBucket, WindowCounter, water_fill

#: smallest offered rate used as a divisor (events/s)
_MIN_RATE = 1e-9


@dataclass(slots=True)
class _Stratum:
    offered: RateEstimator
    window: WindowCounter
    boost: float = 1.0  # acceptance relative to the model's uniform probability (stratified sampling)
    probability: float = 1.0
    seen_total: int = 0
    kept_total: int = 0
    forced_total: int = 0


@dataclass(slots=True)
class _Model:
    offered: RateEstimator
    bucket: TokenBucket
    target: float
    strata: dict[str, _Stratum] = field(default_factory=dict)
    #: moving average of CPU seconds per scored event (0.0: not measured yet)
    cost_seconds: float = 0.0
    #: no share assigned yet: the first reallocation fills the bucket to its share's burst
    fresh: bool = True


class UniformSampler:
    """Work-conserving, uniform-within-model sampling (stage 2).

    Subclasses that override :meth:`sample` or :meth:`_stratum` set ``_batch_path = False``, so that
    :meth:`sample_many` goes through them; ``_stratum_counts_offers`` says whether ``_stratum`` counts the event in
    the stratum's offered rate (stratified sampling does).

    Parameters
    ----------
    target_per_second : float
        Cap on scored events per second, all models together; 0 = no cap (only the CPU budget limits).
    model_targets : mapping of model → events per second, optional
        Explicit per-model caps; other models share the rest of the total.
    cpus : float
        CPUs the process may use (:func:`monitor.cpus.available_cpus`).
    cpu_share : float
        Share of ``cpus`` that scoring may take (0 = no CPU limit; then only ``target_per_second`` limits).
    cost_smoothing : float in (0, 1]
        Weight of each new batch in the moving average of CPU seconds per event (:meth:`observe_cost`).
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
    seed : int
        Seed of the acceptance draws.

    Raises
    ------
    ConfigError
        A negative target, share or model target, a non-positive window, horizon or period, or no CPUs.

    Examples
    --------
    >>> import numpy as np
    >>> from monitor.events import InferenceEvent
    >>> s = UniformSampler(target_per_second=10.0, seed=0)
    >>> ev = InferenceEvent("e", "m", "1", np.zeros(2), 0.0)
    >>> kept = sum(s.keep(ev, now=i / 1000.0) for i in range(100_000))  # 1000 events/s for 100 s
    >>> 950 < kept < 1050
    True
    >>> w = UniformSampler(cpus=2.0, cpu_share=0.5, seed=0)  # 1 CPU-s/s; 1 ms per event: 1000 events/s
    >>> w.observe_cost("m", events=100, seconds=0.1)
    >>> kept = sum(w.keep(ev, now=i / 4000.0) for i in range(400_000))  # 4000 events/s for 100 s
    >>> 95_000 < kept < 105_000
    True
    """

    _batch_path = True
    _stratum_counts_offers = False

    def __init__(
        self,
        target_per_second: float = 0.0,
        *,
        model_targets: Mapping[str, float] | None = None,
        cpus: float = 1.0,
        cpu_share: float = 0.0,
        cost_smoothing: float = 0.2,
        burst_seconds: float = 1.0,
        rate_window_seconds: float = 10.0,
        horizon_seconds: float = 60.0,
        reallocate_seconds: float = 1.0,
        headroom: float = 0.1,
        max_strata: int = 32,
        seed: int = 0,
    ) -> None:
        if not headroom >= 0:
            raise ConfigError(f"headroom must be >= 0; got {headroom!r}")
        for name, v in (("target_per_second", target_per_second), ("cpu_share", cpu_share)):
            if not (v >= 0 and math.isfinite(v)):
                raise ConfigError(f"{name} must be a finite number >= 0 (0: no limit); got {v!r}")
        for name, v in (
            ("cpus", cpus),
            ("burst_seconds", burst_seconds),
            ("rate_window_seconds", rate_window_seconds),
            ("horizon_seconds", horizon_seconds),
            ("reallocate_seconds", reallocate_seconds),
        ):
            if not v > 0:
                raise ConfigError(f"{name} must be > 0; got {v!r}")
        if not 0 < cost_smoothing <= 1:
            raise ConfigError(f"cost_smoothing must be in (0, 1]; got {cost_smoothing!r}")
        bad = {m: t for m, t in (model_targets or {}).items() if not t >= 0}
        if bad:
            raise ConfigError(f"model_targets must be >= 0 events/s; got {bad}")
        if max_strata < 1:
            raise ConfigError(f"max_strata must be >= 1; got {max_strata}")
        self.target_per_second = float(target_per_second)
        self.model_targets: dict[str, float] = dict(model_targets or {})
        self.cpus, self.cpu_share, self.cost_smoothing = float(cpus), float(cpu_share), float(cost_smoothing)
        self.burst_seconds = float(burst_seconds)
        self.rate_window_seconds = float(rate_window_seconds)
        self.horizon_seconds = float(horizon_seconds)
        self.reallocate_seconds = float(reallocate_seconds)
        self.headroom = float(headroom)
        self.max_strata = max_strata
        self.seed = seed
        self.reset()

    @property
    def cpu_per_second(self) -> float:
        """CPU seconds per second that scoring may take (inf: no CPU limit)."""
        return self.cpus * self.cpu_share if self.cpu_share > 0 else math.inf

    @property
    def event_cap_per_second(self) -> float:
        """The cap on scored events per second, all models (inf: none)."""
        return self.target_per_second if self.target_per_second > 0 else math.inf

    def reset(self) -> None:
        """Forget all models, rates, costs and counters; reseed."""
        self._rng = random.Random(self.seed)
        cap = self.event_cap_per_second * (1.0 + self.headroom)
        self._global = TokenBucket(cap, max(1.0, cap * self.burst_seconds))
        self._cpu = CpuBucket(self.cpu_per_second, self.burst_seconds)
        self._models: dict[str, _Model] = {}
        self._next_reallocation: float | None = None
        self._now = 0.0

    def observe_cost(self, model: str, events: int, seconds: float) -> None:
        """Report that scoring ``events`` of ``model``'s events took ``seconds`` of CPU (one micro-batch).

        Folded into the model's moving average of CPU seconds per event; the first report of a model re-divides
        the budget at the next decision.
        """
        if events <= 0 or not (seconds >= 0 and math.isfinite(seconds)):
            return
        m = self._models.get(model)
        if m is None:
            m = self._add_model(model, self._now)
        per_event = max(seconds / events, 1e-9)
        if m.cost_seconds <= 0:
            m.cost_seconds = per_event
            self._next_reallocation = None
        else:
            m.cost_seconds += self.cost_smoothing * (per_event - m.cost_seconds)

    # ------------------------------------------------------------------ hot path

    def keep(self, event: InferenceEvent, now: float, *, force: bool = False) -> bool:
        """Whether to score ``event`` (see :meth:`sample`)."""
        return self.sample(event, now, force=force) > 0.0

    def sample(self, event: InferenceEvent, now: float, *, force: bool = False) -> float:
        """Decide on one event.

        Parameters
        ----------
        event : InferenceEvent
        now : float
            The pipeline clock, epoch seconds (non-decreasing).
        force : bool
            Keep regardless of budget and draw (weight 1.0), e.g. a live/ONNX disagreement.

        Returns
        -------
        float
            0.0 to drop; else the event's weight: 1 / acceptance probability, or 1.0 when forced.
        """
        self._now = now
        model = self._models.get(event.model)
        if model is None:
            model = self._add_model(event.model, now)
        model.offered.update(now)
        stratum = self._stratum(model, event, now)
        if self._next_reallocation is None or now >= self._next_reallocation:
            self._reallocate(now)
        offered = model.offered.rate(now)
        p = min(1.0, stratum.boost * model.target / max(offered, _MIN_RATE))
        stratum.probability = p
        stratum.seen_total += 1
        if force:
            model.bucket.force(now)
            self._global.force(now)
            self._cpu.force(now, model.cost_seconds)
            stratum.kept_total += 1
            stratum.forced_total += 1
            stratum.window.add(now, True)
            return 1.0
        if (
            (p >= 1.0 or self._rng.random() < p)
            and model.bucket.available(now)
            and self._global.available(now)
            and self._cpu.available(now)
        ):
            model.bucket.take(now)
            self._global.take(now)
            self._cpu.take(now, model.cost_seconds)
            stratum.kept_total += 1
            stratum.window.add(now, True)
            return 1.0 / p
        stratum.window.add(now, False)
        return 0.0

    def sample_many(
        self, events: Sequence[InferenceEvent], now: float, forced: Sequence[bool] | None = None
    ) -> list[float]:
        """:meth:`sample` on each event of one poll, all at one ``now``, at the rate the whole poll makes.

        The pipeline decides on a whole poll (thousands of events) at one clock reading. With ``now`` fixed, a
        rate estimate decays once and then only counts, and the sampled-fraction window gets one update per
        stratum, so the per-event work is a few dict lookups and one draw: ~0.5 µs instead of ~1.3 µs per event.
        ``forced[i]`` is ``sample``'s ``force`` for ``events[i]``.

        Work-conserving (a CPU share set, no event cap): a poll whose measured scoring cost fits in the CPU bucket while that is at
        least half full (the engine has been keeping up) is scored whole, weight 1 — a burst is not judged by the
        instantaneous rate it seems to have. This is the one place where ``sample_many`` and ``sample`` differ.
        """
        if not self._batch_path:
            return sample_each(self, events, now, forced)
        self._now = now
        absorb = self._absorbs(events, now)
        weights = [0.0] * len(events)
        models = self._models
        draw = self._rng.random
        cpu = self._cpu
        count_offers = self._stratum_counts_offers
        # per (model, live label): the model, its stratum, its offered-rate estimates and the model's rate divisor
        # at ``now`` (see RateEstimator.count_at); the stratum's seen/kept totals before this call
        seen: dict[tuple[str, int | None], tuple[_Model, _Stratum, RateEstimator, RateEstimator | None, float]] = {}
        before: dict[int, tuple[_Stratum, int, int]] = {}
        # first count the whole poll into the offered rates, then decide every event at the poll's rate: one
        # acceptance probability per (model, stratum) for the whole poll, so that a poll is sampled evenly over its
        # events (deciding in turn, the first events of a large poll saw a low rate and were all kept)
        entries: list[tuple[_Model, _Stratum, RateEstimator, RateEstimator | None, float]] = []
        for ev in events:
            pred = ev.prediction
            key = (ev.model, None if pred is None else pred.label)
            entry = seen.get(key)
            if entry is None:
                model = models.get(ev.model)
                if model is None:
                    model = self._add_model(ev.model, now)
                divisor = model.offered.count_at(now)
                stratum = self._stratum_for(model, key[1])
                stratum_rate = stratum.offered if count_offers else None
                if stratum_rate is not None:
                    stratum_rate.count_at(now)
                entry = seen[key] = (model, stratum, model.offered, stratum_rate, divisor)
                before.setdefault(id(stratum), (stratum, stratum.seen_total, stratum.kept_total))
            else:
                entry[2].count += 1.0
                if entry[3] is not None:
                    entry[3].count += 1.0
            entries.append(entry)
        for i, (model, stratum, _, _, divisor) in enumerate(entries):
            if self._next_reallocation is None or now >= self._next_reallocation:
                self._reallocate(now)
            p = min(1.0, stratum.boost * model.target / max(model.offered.count / divisor, _MIN_RATE))
            stratum.probability = p
            stratum.seen_total += 1
            if forced and forced[i]:
                model.bucket.force(now)
                self._global.force(now)
                cpu.force(now, model.cost_seconds)
                stratum.kept_total += 1
                stratum.forced_total += 1
                weights[i] = 1.0
            elif absorb:
                model.bucket.force(now)
                self._global.take(now)
                cpu.force(now, model.cost_seconds)
                stratum.kept_total += 1
                weights[i] = 1.0
            elif (
                (p >= 1.0 or draw() < p)
                and model.bucket.available(now)
                and self._global.available(now)
                and cpu.available(now)
            ):
                model.bucket.take(now)
                self._global.take(now)
                cpu.take(now, model.cost_seconds)
                stratum.kept_total += 1
                weights[i] = 1.0 / p
        for stratum, seen_before, kept_before in before.values():
            stratum.window.add_many(now, stratum.seen_total - seen_before, stratum.kept_total - kept_before)
        return weights

    def _absorbs(self, events: Sequence[InferenceEvent], now: float) -> bool:
        """Whether this poll is scored whole: a CPU share is set, the CPU bucket is at least half full and holds the
        poll's measured cost, and no event cap is set (a cap is a hard cap)."""
        cpu = self._cpu
        if (
            math.isinf(cpu.cpu_per_second)
            or self.target_per_second > 0
            or not cpu.available(now)
            or cpu.balance < cpu.depth / 2
        ):
            return False
        counts: dict[str, int] = {}
        for ev in events:
            counts[ev.model] = counts.get(ev.model, 0) + 1
        work = sum(n * m.cost_seconds for name, n in counts.items() if (m := self._models.get(name)) is not None)
        return work <= cpu.balance

    # ------------------------------------------------------------------ budget

    def _add_model(self, name: str, now: float) -> _Model:
        target = self.model_targets.get(name, 0.0)
        cap = target * (1.0 + self.headroom)
        model = _Model(
            offered=RateEstimator(self.rate_window_seconds),
            bucket=TokenBucket(cap, max(1.0, cap * self.burst_seconds)),
            target=target,
        )
        self._models[name] = model
        self._next_reallocation = None  # a newcomer gets its share at once
        return model

    def _stratum(self, model: _Model, event: InferenceEvent, now: float) -> _Stratum:
        pred = event.prediction
        return self._stratum_for(model, None if pred is None else pred.label)

    def _stratum_for(self, model: _Model, label: int | None) -> _Stratum:
        """The model's stratum for a live label (None: no live label), created on first sight."""
        key = "none" if label is None else str(label)
        stratum = model.strata.get(key)
        if stratum is None:
            if len(model.strata) >= self.max_strata and key != "none":
                key = "other"
                stratum = model.strata.get(key)
            if stratum is None:
                stratum = _Stratum(RateEstimator(self.rate_window_seconds), WindowCounter(self.horizon_seconds))
                model.strata[key] = stratum
        return stratum

    def _reallocate(self, now: float) -> None:
        """Re-divide the budget: CPU time by max-min fairness (explicit model caps first), then the event cap.

        A model watched for less than ``reallocate_seconds`` has no reliable rate yet: it is not capped at its
        estimate, and budgets are re-divided ten times as often until every model has settled. What no model can
        use (every one offers less than its share) is added to every model's share: work-conserving.
        """
        young = {name for name, m in self._models.items() if m.offered.observed_seconds(now) < self.reallocate_seconds}
        self._next_reallocation = now + (0.1 if young else 1.0) * self.reallocate_seconds
        offered = {name: (math.inf if name in young else m.offered.rate(now)) for name, m in self._models.items()}
        explicit = {name: t for name, t in self.model_targets.items() if name in self._models}
        # events/s each model may score within the CPU budget
        cpu_targets = self._divide(
            self.cpu_per_second,
            {name: min(offered[name], explicit.get(name, math.inf)) for name in self._models},
            {name: m.cost_seconds for name, m in self._models.items()},
        )
        # then the event cap (explicit model targets first, the rest max-min)
        used = sum(min(t, offered[name], cpu_targets[name]) for name, t in explicit.items())
        implicit = {name: min(offered[name], cpu_targets[name]) for name in self._models if name not in explicit}
        shares = self._divide(self.event_cap_per_second - used, implicit, {})
        for name, model in self._models.items():
            target = min(cpu_targets[name], explicit[name] if name in explicit else shares[name])
            model.target = target
            cap = target * (1.0 + self.headroom)
            model.bucket.set_rate(cap, cap * self.burst_seconds, now, fill=model.fresh)
            model.fresh = False
            self._reallocate_strata(model, now)

    @staticmethod
    def _divide(budget: float, demand: Mapping[str, float], cost: Mapping[str, float]) -> dict[str, float]:
        """Events/s per key: ``budget`` (in units of ``cost``, 1 per event where missing or unmeasured) water-filled
        over ``demand`` (events/s, inf: unknown), plus what every key leaves unused; inf where the budget is inf or the
        cost unmeasured."""
        unit = {k: (cost.get(k, 1.0) if cost.get(k, 1.0) > 0 else 0.0) for k in demand}
        if math.isinf(budget):
            return dict.fromkeys(demand, math.inf)
        budget = max(0.0, budget)
        limited = {k: d * unit[k] if d < math.inf else math.inf for k, d in demand.items() if unit[k] > 0}
        alloc = water_fill(budget, limited)
        spare = max(0.0, budget - sum(alloc.values()))
        return {k: (alloc[k] + spare) / unit[k] if unit[k] > 0 else math.inf for k in demand}

    def _reallocate_strata(self, model: _Model, now: float) -> None:
        """Uniform: every stratum at the model's probability. Overridden by stratified sampling."""

    # ------------------------------------------------------------------ read

    def snapshot(self) -> dict[str, ModelSamplingStats]:
        """Per-model budget and counts at the last ``now`` seen.

        Call it from the thread that calls :meth:`sample`, or under the same lock: it reads live dicts.
        """
        now = self._now
        out: dict[str, ModelSamplingStats] = {}
        for name, model in self._models.items():
            strata: dict[str, StratumStats] = {}
            for key, st in model.strata.items():
                seen, kept = st.window.totals(now)
                fraction, weight = fraction_and_weight(kept, seen)
                strata[key] = StratumStats(
                    st.seen_total, st.kept_total, st.forced_total, seen, kept, fraction, weight, st.probability
                )
            seen_recent = sum(s.seen_recent for s in strata.values())
            kept_recent = sum(s.kept_recent for s in strata.values())
            fraction, weight = fraction_and_weight(kept_recent, seen_recent)
            out[name] = ModelSamplingStats(
                model=name,
                target_per_second=model.target,
                offered_per_second=model.offered.rate(now),
                seen_total=sum(s.seen_total for s in strata.values()),
                kept_total=sum(s.kept_total for s in strata.values()),
                forced_total=sum(s.forced_total for s in strata.values()),
                seen_recent=seen_recent,
                kept_recent=kept_recent,
                fraction=fraction,
                weight=weight,
                strata=strata,
            )
        return out
