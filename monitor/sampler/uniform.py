"""Stage 2: work-conserving uniform sampling — every event is scored while the engine keeps up; under overload
every event of a model has the same chance of being scored.

What scoring can sustain is measured, not assumed: the CPU budget is ``cpu_share`` of the CPUs
the process may use (:func:`monitor.cpus.available_cpus`: affinity capped by the cgroup's CPU quota), and each
model's cost is a moving average of the CPU seconds per scored event that the pipeline reports after every
micro-batch (:meth:`UniformSampler.observe_cost`). The budget is divided between models by max-min fairness in
CPU time: a model whose offered work (offered rate × its cost) is below an equal share keeps all of its events,
and the rest is split equally between the models that offer more, re-divided every ``reallocate_seconds``. When
every model offers less than its share, the spare CPU is added to every model's share, so nothing is sampled away
while the engine keeps up — a burst (a first test, a backlog after a restart, a traffic spike) is scored whole as
long as it fits the CPU bucket (``burst_seconds`` of the CPU budget). A model's events are accepted with
probability ``share / offered rate`` (its events per second, measured over the intervals between its recent
polls), so that under overload acceptance is spread evenly over the stream; token buckets only cap surges the rate
estimate has not caught up with. Batch decisions (:meth:`UniformSampler.sample_many`) go through a delay-bounded
event-time reservoir: the first polls of a stream are held undecided until the stream pauses (a
burst: scored whole if it fits the CPU bucket) or outgrows the bucket (a backlog or an overload: all of it decided
at the measured rate), at most ``max_delay_seconds``, so that a backlog read after a restart is sampled at one
probability over its whole event-time span, not more densely in its first minutes. A model whose cost is not
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
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from monitor.events import InferenceEvent
from monitor.sampler.base import ModelSamplingStats, StratumStats, fraction_and_weight, sample_each
from monitor.sampler.budget import CpuBucket, RateEstimator, TokenBucket, WindowCounter, water_fill
from monitor.sampler.uniform_config import UniformSamplerConfig

#: smallest offered rate used as a divisor (events/s)
_MIN_RATE = 1e-9
#: the offered rate is measured over the polls of about the last second
_RATE_SPAN_SECONDS = 1.0
#: a poll is held only if its cost is at least this share of the CPU bucket (or something is held already)
_HOLD_MIN_DEPTH = 0.01
#: most events one model may hold in the event-time reservoir (a bound on memory for very cheap models)
_MAX_HELD = 50_000


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
    #: (now, events) of this model's recent polls, while they follow each other within ``max_delay_seconds``: the
    #: offered rate measured over the intervals between polls (the first poll's own interval is unknown)
    polls: deque[tuple[float, int]] = field(default_factory=deque)
    polled: int = 0  # events in ``polls``
    #: the event-time reservoir: a poll whose rate is not known yet, held (undecided) until the next poll measures it
    held: list[tuple[InferenceEvent, _Stratum]] = field(default_factory=list)
    held_since: float = 0.0
    #: this model had events since the last :meth:`UniformSampler.release`
    stepped: bool = False
    #: what was held last was decided below probability 1 (overloaded) or at 1 (steady, within its share): while
    #: the measured rate stays on the same side of the share, polls are decided at once
    overloaded: bool = False
    steady: bool = False


class UniformSampler:
    """Work-conserving, uniform-within-model sampling (stage 2).

    Subclasses that override :meth:`sample` or :meth:`_stratum` set ``_batch_path = False``, so that
    :meth:`sample_many` goes through them; ``_stratum_counts_offers`` says whether ``_stratum`` counts the event in
    the stratum's offered rate (stratified sampling does).

    Parameters
    ----------
    config : UniformSamplerConfig, optional
        The budget, time constants and delay bound (default: no event cap, no CPU share: every event is kept).
    seed : int
        Seed of the acceptance draws.

    Examples
    --------
    >>> import numpy as np
    >>> from monitor.events import InferenceEvent
    >>> s = UniformSampler(UniformSamplerConfig(target_per_second=10.0), seed=0)
    >>> ev = InferenceEvent("e", "m", "1", np.zeros(2), 0.0)
    >>> kept = sum(s.keep(ev, now=i / 1000.0) for i in range(100_000))  # 1000 events/s for 100 s
    >>> 950 < kept < 1050
    True
    >>> w = UniformSampler(UniformSamplerConfig(cpus=2.0, cpu_share=0.5), seed=0)  # 1 CPU-s/s; 1 ms per event
    >>> w.observe_cost("m", events=100, seconds=0.1)
    >>> kept = sum(w.keep(ev, now=i / 4000.0) for i in range(400_000))  # 4000 events/s for 100 s
    >>> 95_000 < kept < 105_000
    True
    """

    _batch_path = True
    _stratum_counts_offers = False

    def __init__(self, config: UniformSamplerConfig | None = None, *, seed: int = 0) -> None:
        c = self.config = config if config is not None else UniformSamplerConfig()
        self.target_per_second = c.target_per_second
        self.model_targets = c.model_targets
        self.cpus, self.cpu_share, self.cost_smoothing = c.cpus, c.cpu_share, c.cost_smoothing
        self.burst_seconds = c.burst_seconds
        self.rate_window_seconds = c.rate_window_seconds
        self.horizon_seconds = c.horizon_seconds
        self.reallocate_seconds = c.reallocate_seconds
        self.headroom = c.headroom
        self.max_strata = c.max_strata
        self.max_delay_seconds = c.max_delay_seconds
        self.seed = seed
        #: the ingest-first budget (None: the cap), :meth:`set_cpu_budget`
        self._cpu_budget: float | None = None
        self._next_reallocation: float | None = None
        self.reset()

    @property
    def cpu_cap_per_second(self) -> float:
        """The configured CPU seconds per second scoring may take, at most (inf: no CPU limit)."""
        return self.cpus * self.cpu_share if self.cpu_share > 0 else math.inf

    @property
    def cpu_per_second(self) -> float:
        """CPU seconds per second that scoring may take now: the cap, or less while :meth:`set_cpu_budget` says so
        (ingest first, :mod:`monitor.sampler.ingest_first`) (inf: no CPU limit)."""
        cap = self.cpu_cap_per_second
        return cap if self._cpu_budget is None else min(cap, self._cpu_budget)

    def set_cpu_budget(self, cpu_per_second: float, now: float) -> None:
        """Let scoring take ``cpu_per_second`` (at most the cap) from ``now`` on; the budget is re-divided between
        models at the next decision when it moved by more than 10 %. A cut to less than half empties the CPU bucket:
        what was saved at the higher budget is not spent while ingest needs the time. Ignored without a CPU cap
        (``cpu_share`` 0).

        >>> s = UniformSampler(UniformSamplerConfig(cpus=2.0, cpu_share=0.8))
        >>> s.set_cpu_budget(0.2, now=0.0)
        >>> s.cpu_per_second
        0.2
        >>> s.set_cpu_budget(5.0, now=1.0)
        >>> s.cpu_per_second
        1.6
        >>> unlimited = UniformSampler(UniformSamplerConfig(cpus=2.0))  # no CPU share: nothing to cut
        >>> unlimited.set_cpu_budget(0.2, now=0.0)
        >>> unlimited.cpu_per_second
        inf
        """
        if math.isinf(self.cpu_cap_per_second) or not cpu_per_second > 0:
            return
        before = self.cpu_per_second
        self._cpu_budget = min(self.cpu_cap_per_second, float(cpu_per_second))
        after = self.cpu_per_second
        if abs(after - before) > 0.1 * before:
            self._cpu.set_rate(after, now, empty=after < before / 2)
            self._next_reallocation = None

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
        self._next_reallocation = None
        self._now = 0.0
        #: decisions on held events taken by ``sample_many``, handed out by :meth:`release`
        self._released: list[tuple[InferenceEvent, float]] = []
        #: the events the last ``sample_many`` held (weight 0.0 there; their decision comes from :meth:`release`)
        self.last_held: list[InferenceEvent] = []

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
        model.stepped = True
        measured = self._poll_rate(model, now, 1)  # as sample_many: the rate over the intervals between polls
        offered = measured if measured is not None else model.offered.rate(now)
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
        """:meth:`sample` on each event of one poll, all at one ``now``, at the rate the polls make.

        The pipeline decides on a whole poll (thousands of events) at one clock reading. With ``now`` fixed, a
        rate estimate decays once and then only counts, and the sampled-fraction window gets one update per
        stratum, so the per-event work is a few dict lookups and one draw. ``forced[i]`` is ``sample``'s ``force``
        for ``events[i]``. The acceptance probability is the share over the offered rate measured over the
        intervals between this model's recent polls (exact for a steady stream from the second poll on), one
        probability per (model, stratum) for the whole poll, so that a poll is sampled evenly over its events.

        Work-conserving (a CPU share set, no event cap), a delay-bounded event-time reservoir: while
        a model is not known to be overloaded, its polls are *held* (weight 0 here, decided later) as long as their
        measured cost fits in the CPU bucket. When the stream pauses (:meth:`release` sees a step without the
        model's events) what was held was a burst, and it is scored whole if it fits (else uniformly, as much as the
        bucket affords); when what is held outgrows the bucket, it is a backlog or an overload, and everything held
        is decided at the measured rate's probability, and later polls at once. So a burst is scored whole, and a
        backlog read after a restart is sampled at one probability from its first event on — uniformly over its
        event-time span, not more densely in its first minutes. Nothing is held longer than ``max_delay_seconds``.
        The decisions on held events are handed out by :meth:`release`, which the caller calls once per poll step.
        """
        if not self._batch_path:
            return sample_each(self, events, now, forced)
        self._now = now
        weights = [0.0] * len(events)
        models = self._models
        count_offers = self._stratum_counts_offers
        seen: dict[tuple[str, int | None], tuple[_Model, _Stratum]] = {}
        per_model: dict[str, int] = {}
        entries: list[tuple[_Model, _Stratum]] = []
        for ev in events:
            pred = ev.prediction
            key = (ev.model, None if pred is None else pred.label)
            entry = seen.get(key)
            if entry is None:
                model = models.get(ev.model)
                if model is None:
                    model = self._add_model(ev.model, now)
                model.offered.update(now)
                stratum = self._stratum_for(model, key[1])
                if count_offers:
                    stratum.offered.update(now)
                entry = seen[key] = (model, stratum)
            else:
                entry[0].offered.count += 1.0
                if count_offers:
                    entry[1].offered.count += 1.0
            entries.append(entry)
            per_model[ev.model] = per_model.get(ev.model, 0) + 1
        if self._next_reallocation is None or now >= self._next_reallocation:
            self._reallocate(now)
        touched: dict[int, tuple[_Stratum, int, int]] = {}
        rates: dict[str, float] = {}
        hold: set[str] = set()
        absorb: set[str] = set()
        reservoir = self._reservoir
        for name, n in per_model.items():
            model = models[name]
            model.stepped = True
            measured = self._poll_rate(model, now, n)
            rate = measured if measured is not None else model.offered.rate(now)
            rates[name] = rate
            if not reservoir or model.cost_seconds <= 0:  # cost not measured yet: scored whole, to measure it
                if self._absorbs(model, n, now):
                    absorb.add(name)
                continue
            if model.held and now - model.held_since >= self.max_delay_seconds:
                self._decide_held(model, now, measured, touched)
            if measured is not None and (
                (model.overloaded and measured > model.target) or (model.steady and measured <= model.target)
            ):
                continue  # a known overload or a steady stream within its share: decided at once
            model.overloaded = model.steady = False
            if not model.held and n * model.cost_seconds < _HOLD_MIN_DEPTH * self._cpu.depth:
                # a small poll (one record re-run alone after a crash, a trickle) is decided at once: holding it
                # would move its scoring out of the step that reads it, for no gain in evenness
                if self._fits(model, n, now):
                    absorb.add(name)
                continue
            if not model.held:
                model.held_since = now
            hold.add(name)
        forced_any = bool(forced)
        self.last_held = []
        for i, (model, stratum) in enumerate(entries):
            ev = events[i]
            force = forced_any and bool(forced[i])  # type: ignore[index]
            if ev.model in hold and not force:
                model.held.append((ev, stratum))
                self.last_held.append(ev)
                continue
            if id(stratum) not in touched:
                touched[id(stratum)] = (stratum, stratum.seen_total, stratum.kept_total)
            p = min(1.0, stratum.boost * model.target / max(rates[ev.model], _MIN_RATE))
            weights[i] = self._decide(model, stratum, p, now, force=force, absorb=ev.model in absorb)
        for name in hold:
            model = models[name]
            if model.held and not self._fits(model, len(model.held), now):
                # more than the bucket holds: a backlog or an overload, not a burst — decide at the measured rate
                measured = self._poll_rate(model, now, 0)
                if measured is not None or len(model.held) >= _MAX_HELD:
                    self._decide_held(model, now, measured, touched)
        for stratum, seen_before, kept_before in touched.values():
            stratum.window.add_many(now, stratum.seen_total - seen_before, stratum.kept_total - kept_before)
        return weights

    def release(self, now: float) -> list[tuple[InferenceEvent, float]]:
        """Decisions on held events (see :meth:`sample_many`): (event, weight), weight 0.0 = dropped.

        Call it once per poll step, after ``sample_many`` on that step's events (with none, too): a model whose
        events were held and that had none since the last call has paused, so what it held was a burst; anything
        held ``max_delay_seconds`` is decided now. Returns the decisions taken since the last call.
        """
        self._now = now
        touched: dict[int, tuple[_Stratum, int, int]] = {}
        for model in self._models.values():
            if model.held and (not model.stepped or now - model.held_since >= self.max_delay_seconds):
                self._decide_held(model, now, None if not model.stepped else self._poll_rate(model, now, 0), touched)
            if not model.stepped:  # a pause: the next poll starts a new episode (its rate is not known yet)
                model.polls.clear()
                model.polled = 0
                model.overloaded = model.steady = False
            model.stepped = False
        for stratum, seen_before, kept_before in touched.values():
            stratum.window.add_many(now, stratum.seen_total - seen_before, stratum.kept_total - kept_before)
        released, self._released = self._released, []
        return released

    @property
    def holding(self) -> int:
        """Events held undecided in the event-time reservoir, all models."""
        return sum(len(m.held) for m in self._models.values())

    @property
    def _reservoir(self) -> bool:
        """Work-conserving with a delay bound: polls may be held (see :meth:`sample_many`)."""
        return self.max_delay_seconds > 0 and not math.isinf(self._cpu.cpu_per_second) and self.target_per_second <= 0

    def _decide(self, model: _Model, stratum: _Stratum, p: float, now: float, *, force: bool, absorb: bool) -> float:
        """Decide one event at acceptance probability ``p``: its weight (0.0: dropped)."""
        stratum.probability = p
        stratum.seen_total += 1
        if force:
            model.bucket.force(now)
            self._global.force(now)
            self._cpu.force(now, model.cost_seconds)
            stratum.kept_total += 1
            stratum.forced_total += 1
            return 1.0
        if absorb:
            model.bucket.force(now)
            self._global.take(now)
            self._cpu.force(now, model.cost_seconds)
            stratum.kept_total += 1
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
            return 1.0 / p
        return 0.0

    def _decide_held(
        self, model: _Model, now: float, rate: float | None, touched: dict[int, tuple[_Stratum, int, int]]
    ) -> None:
        """Decide everything ``model`` holds, into ``_released``: at ``rate``'s probability (events/s measured over
        the polls), or, with no rate (the stream paused: a burst), whole if it fits the CPU bucket, else uniformly at
        what the bucket affords. A probability below 1 marks the model overloaded."""
        held, model.held = model.held, []
        whole = False
        p_burst = 1.0
        if rate is None:
            whole = self._fits(model, len(held), now)
            work = len(held) * model.cost_seconds
            if not whole and work > 0:
                p_burst = min(1.0, max(self._cpu.balance, 0.0) / work)
        for ev, stratum in held:
            if id(stratum) not in touched:
                touched[id(stratum)] = (stratum, stratum.seen_total, stratum.kept_total)
            p = p_burst if rate is None else min(1.0, stratum.boost * model.target / max(rate, _MIN_RATE))
            if rate is not None:
                model.overloaded = model.overloaded or p < 1.0
                model.steady = not model.overloaded
            self._released.append((ev, self._decide(model, stratum, p, now, force=False, absorb=whole)))

    def _poll_rate(self, model: _Model, now: float, events: int) -> float | None:
        """Record a poll of ``events`` at ``now``; the offered rate over the intervals between the recent polls
        (None: fewer than two polls, i.e. the rate of the first poll after a pause is not known yet)."""
        polls = model.polls
        if polls and not 0.0 <= now - polls[-1][0] <= max(self.max_delay_seconds, self.reallocate_seconds):
            polls.clear()
            model.polled = 0
        if polls and polls[-1][0] == now:
            polls[-1] = (now, polls[-1][1] + events)
            model.polled += events
        elif events or polls:
            polls.append((now, events))
            model.polled += events
        while len(polls) > 2 and now - polls[1][0] >= _RATE_SPAN_SECONDS:
            model.polled -= polls.popleft()[1]
        if len(polls) < 2:
            return None
        anchor_time, anchor_events = polls[0]
        return (model.polled - anchor_events) / (now - anchor_time)

    def _fits(self, model: _Model, events: int, now: float) -> bool:
        """``events`` of ``model`` can be scored whole: the CPU bucket is at least half full and holds their cost."""
        cpu = self._cpu
        if math.isinf(cpu.cpu_per_second):
            return True
        return cpu.available(now) and cpu.balance >= cpu.depth / 2 and events * model.cost_seconds <= cpu.balance

    def _absorbs(self, model: _Model, events: int, now: float) -> bool:
        """Without a reservoir (``max_delay_seconds`` 0): whether this poll is scored whole: a CPU share is set, no
        event cap (a cap is a hard cap), and the poll fits (:meth:`_fits`)."""
        return (
            not math.isinf(self._cpu.cpu_per_second) and self.target_per_second <= 0 and self._fits(model, events, now)
        )

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

    def capacity(self, model: str) -> float | None:
        """Events/s scoring can sustain for ``model`` alone: the CPU budget over its measured cost per event, capped
        by the event cap (its explicit target first); None while neither bounds it (no cost measured yet, or no CPU
        share and no cap)."""
        m = self._models.get(model)
        if m is None:
            return None
        capacity = math.inf
        if not math.isinf(self.cpu_per_second) and m.cost_seconds > 0:
            capacity = self.cpu_per_second / m.cost_seconds
        capacity = min(capacity, self.model_targets.get(model, self.event_cap_per_second))
        return None if math.isinf(capacity) else capacity

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
