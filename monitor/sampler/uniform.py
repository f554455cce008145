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

The sampler composes its parts: :class:`~monitor.sampler.allocation.SamplingBudget` (the CPU budget, the event cap and
their division between models), :class:`~monitor.sampler.accounts.ModelAccounts` (per-model and per-stratum state and
counters), :class:`~monitor.sampler.admission.Admission` (the draw and the payment per event) and
:class:`~monitor.sampler.reservoir.EventTimeReservoir` (held polls).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from monitor.events import InferenceEvent
from monitor.sampler.accounts import MIN_RATE, ModelAccount, ModelAccounts, StratumAccount, StratumTally
from monitor.sampler.admission import Admission, random_floats
from monitor.sampler.allocation import SamplingBudget
from monitor.sampler.base import ModelSamplingStats, sample_each
from monitor.sampler.reservoir import EventTimeReservoir, PollMode
from monitor.sampler.uniform_config import UniformSamplerConfig


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

    def __init__(
        self,
        config: UniformSamplerConfig | None = None,
        *,
        seed: int = 0,  # not a setting: the admission draws' seed; run never seeds it from scoring.seed
    ) -> None:
        self.config = config if config is not None else UniformSamplerConfig()
        self.seed = seed
        self.budget = SamplingBudget(self.config)
        self.reset()

    @property
    def cpu_cap_per_second(self) -> float:
        """The configured CPU seconds per second scoring may take, at most (inf: no CPU limit)."""
        return self.config.cpu_cap_per_second

    @property
    def cpu_per_second(self) -> float:
        """CPU seconds per second that scoring may take now: the cap, or less while :meth:`set_cpu_budget` says so
        (ingest first, :mod:`monitor.sampler.ingest_first`) (inf: no CPU limit)."""
        return self.budget.cpu_per_second

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
        self.budget.set_cpu_budget(cpu_per_second, now)

    def cpu_for(self, events_per_second: float) -> float | None:
        """CPU seconds per second that let every model score ``events_per_second`` under the max-min division of the
        CPU budget: the models × the dearest measured cost per event × ``events_per_second``; None while no model's
        cost is measured.

        >>> s = UniformSampler(UniformSamplerConfig(cpus=2.0, cpu_share=0.8))
        >>> s.observe_cost("a", events=100, seconds=0.01)  # 0.1 ms per event
        >>> s.observe_cost("b", events=100, seconds=0.03)  # 0.3 ms per event
        >>> round(s.cpu_for(20.0), 6)  # 2 models × 0.3 ms × 20 events/s
        0.012
        """
        costs = [m.cost_seconds for m in self.accounts.models.values()]
        dearest = max((c for c in costs if c > 0), default=0.0)
        return len(costs) * dearest * events_per_second if dearest > 0 else None

    @property
    def event_cap_per_second(self) -> float:
        """The cap on scored events per second, all models (inf: none)."""
        return self.config.event_cap_per_second

    def reset(self) -> None:
        """Forget all models, rates, costs and counters; reseed. An ingest-first CPU budget stays."""
        self.budget.reset()
        self.accounts = ModelAccounts(self.config)
        self.admission = Admission(self.budget, self.seed)
        self.reservoir = EventTimeReservoir(self.config, self.budget, self.admission)
        self._now = 0.0

    @property
    def last_held(self) -> list[InferenceEvent]:
        """The events the last ``sample_many`` held (weight 0.0 there; their decision comes from :meth:`release`)."""
        return self.reservoir.last_held

    def observe_cost(self, model: str, events: int, seconds: float) -> None:
        """Report that scoring ``events`` of ``model``'s events took ``seconds`` of CPU (one micro-batch).

        Folded into the model's moving average of CPU seconds per event; the first report of a model re-divides
        the budget at the next decision.
        """
        if events <= 0 or not (seconds >= 0 and math.isfinite(seconds)):
            return
        if self._model(model).observe_cost(events, seconds, self.config.cost_smoothing):
            self.budget.divide_soon()

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
        model = self._model(event.model)
        model.offered.update(now)
        stratum = self._stratum(model, event, now)
        if self.budget.due(now):
            self._reallocate(now)
        model.stepped = True
        measured = self.reservoir.measure(model, now, 1)  # as sample_many: the rate over the intervals between polls
        offered = measured if measured is not None else model.offered.rate(now)
        p = min(1.0, stratum.boost * model.target / max(offered, MIN_RATE))
        weight = self.admission.decide(model, stratum, p, now, force=force, absorb=False)
        stratum.window.add(now, weight > 0.0)
        return weight

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
        models = self.accounts.models
        entries, per_model = self._offered(events, now)
        if self.budget.due(now):
            self._reallocate(now)
        reservoir = self.reservoir
        tally = StratumTally()
        rates, modes = self._plan_poll(per_model, now, tally)
        forced_any = bool(forced)
        reservoir.begin_poll()
        decide, draw = self.admission.decide, self.admission.rng.random
        # per stratum, noted in the tally at its first decision: the poll's acceptance probability, and how many of
        # its events were drawn and dropped here (counted once after the loop: the common case costs one draw)
        decided: dict[int, tuple[StratumAccount, float]] = {}
        dropped: dict[int, int] = {}
        for i, (model, stratum) in enumerate(entries):
            ev = events[i]
            force = forced_any and bool(forced[i])  # type: ignore[index]
            mode = modes[ev.model]
            if mode is PollMode.HOLD and not force:
                reservoir.hold(model, ev, stratum)
                continue
            known = decided.get(id(stratum))
            if known is None:
                tally.note(stratum)
                p = min(1.0, stratum.boost * model.target / max(rates[ev.model], MIN_RATE))
                decided[id(stratum)] = (stratum, p)
            else:
                p = known[1]
            if mode is PollMode.DECIDE and not force and p < 1.0:
                if draw() >= p:  # Admission.decide's draw, the same one in the same order
                    dropped[id(stratum)] = dropped.get(id(stratum), 0) + 1
                    continue
                weights[i] = decide(model, stratum, p, now, force=False, absorb=False, drawn=True)
                continue
            weights[i] = decide(model, stratum, p, now, force=force, absorb=mode is PollMode.ABSORB)
        for ident, n in dropped.items():
            stratum, p = decided[ident]
            stratum.probability = p
            stratum.seen_total += n
        for name in {name for name, mode in modes.items() if mode is PollMode.HOLD}:
            reservoir.settle(models[name], now, tally)
        tally.flush(now)
        return weights

    def sample_columns(
        self,
        model: str,
        labels: Sequence[int | None],
        forced: NDArray[np.bool_],
        now: float,
        event_at: Callable[[int], InferenceEvent],
        label_array: tuple[NDArray[np.int64], NDArray[np.bool_]] | None = None,
    ) -> NDArray[np.float64]:
        """:meth:`sample_many` on one model's events of one poll given as columns: their live labels (None: none)
        and forced keeps; the same decisions, draws and counts, event for event.

        Only the events it holds (the reservoir), keeps or decides one at a time (forced, absorbed, or drawn and
        then paid for from the buckets) are asked for as objects (``event_at(i)``, only for the held ones); the
        draws of the rest are the seeded generator's next draws, taken in one call (:func:`random_floats`), and a
        comparison over the poll. ``label_array``: the same labels as an int64 array and whether each row has one
        (the strata are then found over the arrays, :func:`first_sight`).
        """
        n = len(labels)
        if not self._batch_path:
            return np.asarray(sample_each(self, [event_at(i) for i in range(n)], now, forced.tolist()))
        self._now = now
        weights = np.zeros(n, dtype=np.float64)
        counted: dict[tuple[str, int | None], int]
        if label_array is None:
            keys = [(model, label) for label in labels]
            counted = Counter(keys)
        else:
            distinct, counts, codes = first_sight(*label_array)
            counted = dict(zip([(model, label) for label in distinct], counts, strict=True))
        seen, per_model = self._offered_counts(counted, now)
        if self.budget.due(now):
            self._reallocate(now)
        tally = StratumTally()
        rates, modes = self._plan_poll(per_model, now, tally)
        self.reservoir.begin_poll()
        mode, rate = modes[model], rates[model]
        if label_array is None:
            code_of = {key: k for k, key in enumerate(seen)}
            codes = np.fromiter(map(code_of.__getitem__, keys), np.intp, n)
        accounts = list(seen.values())
        p_of = np.array([min(1.0, st.boost * acct.target / max(rate, MIN_RATE)) for acct, st in accounts])
        p = p_of[codes]
        decide = self.admission.decide
        missed = np.zeros(len(accounts), dtype=np.intp)
        if mode is PollMode.HOLD:
            for i in np.flatnonzero(~forced).tolist():
                self.reservoir.hold(accounts[codes[i]][0], event_at(i), accounts[codes[i]][1])
            decided = np.flatnonzero(forced)
            drawn_kept = np.zeros(0, dtype=np.intp)
        else:
            need = ~forced & (p < 1.0) if mode is PollMode.DECIDE else np.zeros(n, dtype=np.bool_)
            need_at = np.flatnonzero(need)
            hit = random_floats(self.admission.rng, need_at.size) < p[need_at]
            drawn_kept = need_at[hit]
            decided = np.union1d(np.flatnonzero(~need), drawn_kept)
            missed = np.bincount(codes[need_at[~hit]], minlength=len(accounts))
        # the strata decided on, noted before their first decision (as sample_many: held events are the reservoir's)
        for k in set(codes[decided].tolist()) | set(np.flatnonzero(missed).tolist()):
            tally.note(accounts[k][1])
        absorb = mode is PollMode.ABSORB
        drawn = set(drawn_kept.tolist())
        for i in decided.tolist():
            acct, stratum = accounts[codes[i]]
            weights[i] = decide(acct, stratum, float(p[i]), now, force=bool(forced[i]), absorb=absorb, drawn=i in drawn)
        for k in np.flatnonzero(missed).tolist():
            stratum = accounts[k][1]
            stratum.probability = float(p_of[k])
            stratum.seen_total += int(missed[k])
        if mode is PollMode.HOLD:
            self.reservoir.settle(self.accounts.models[model], now, tally)
        tally.flush(now)
        return weights

    def _offered(
        self, events: Sequence[InferenceEvent], now: float
    ) -> tuple[list[tuple[ModelAccount, StratumAccount]], dict[str, int]]:
        """The poll's events counted as offered: each event's (model, stratum) accounts, and events per model."""
        keys = [(ev.model, None if ev.prediction is None else ev.prediction.label) for ev in events]
        seen, per_model = self._offered_counts(Counter(keys), now)
        return [seen[key] for key in keys], per_model

    def _offered_counts(
        self, counted: dict[tuple[str, int | None], int], now: float
    ) -> tuple[dict[tuple[str, int | None], tuple[ModelAccount, StratumAccount]], dict[str, int]]:
        """Events of these (model, live label) keys, counted (in the order of first sight), as offered: each distinct
        key's (model, stratum) accounts, and events per model.

        The keys are counted in C (``Counter``) or over arrays (:func:`first_sight`); the accounts are then updated
        once per distinct key, in the order of first sight (a stratum is made on first sight)."""
        models = self.accounts.models
        count_offers = self._stratum_counts_offers
        seen: dict[tuple[str, int | None], tuple[ModelAccount, StratumAccount]] = {}
        per_model: dict[str, int] = {}
        for key, n in counted.items():
            model = models.get(key[0])
            if model is None:
                model = self._add_model(key[0])
            model.offered.update(now, n)
            stratum = self._stratum_for(model, key[1])
            if count_offers:
                stratum.offered.update(now, n)
            seen[key] = (model, stratum)
            per_model[key[0]] = per_model.get(key[0], 0) + n
        return seen, per_model

    def _plan_poll(
        self, per_model: dict[str, int], now: float, tally: StratumTally
    ) -> tuple[dict[str, float], dict[str, PollMode]]:
        """Per model in the poll: the offered rate its probability is taken over (measured between its polls, else
        its rate estimate), and what the reservoir does with its events (:class:`PollMode`)."""
        models, reservoir = self.accounts.models, self.reservoir
        rates: dict[str, float] = {}
        modes: dict[str, PollMode] = {}
        for name, n in per_model.items():
            model = models[name]
            model.stepped = True
            measured = reservoir.measure(model, now, n)
            rates[name] = measured if measured is not None else model.offered.rate(now)
            modes[name] = reservoir.plan(model, n, measured, now, tally)
        return rates, modes

    def release(self, now: float) -> list[tuple[InferenceEvent, float]]:
        """Decisions on held events (see :meth:`sample_many`): (event, weight), weight 0.0 = dropped.

        Call it once per poll step, after ``sample_many`` on that step's events (with none, too): a model whose
        events were held and that had none since the last call has paused, so what it held was a burst; anything
        held ``max_delay_seconds`` is decided now. Returns the decisions taken since the last call.
        """
        self._now = now
        return self.reservoir.release(self.accounts.models, now)

    @property
    def holding(self) -> int:
        """Events held undecided in the event-time reservoir, all models."""
        return self.accounts.holding

    # ------------------------------------------------------------------ models and strata

    def _model(self, name: str) -> ModelAccount:
        """The model's account, added on first sight."""
        model = self.accounts.models.get(name)
        return model if model is not None else self._add_model(name)

    def _add_model(self, name: str) -> ModelAccount:
        model = self.accounts.add(name)
        self.budget.divide_soon()  # a newcomer gets its share at once
        return model

    def _stratum(self, model: ModelAccount, event: InferenceEvent, now: float) -> StratumAccount:
        pred = event.prediction
        return self._stratum_for(model, None if pred is None else pred.label)

    def _stratum_for(self, model: ModelAccount, label: int | None) -> StratumAccount:
        """The model's stratum for a live label (None: no live label), created on first sight."""
        return self.accounts.stratum(model, label)

    def _reallocate(self, now: float) -> None:
        """Re-divide the budget between models (:meth:`SamplingBudget.reallocate`), then each model's between its
        strata."""
        models = self.accounts.models
        self.budget.reallocate(models, now)
        for model in models.values():
            self._reallocate_strata(model, now)

    def _reallocate_strata(self, model: ModelAccount, now: float) -> None:
        """Uniform: every stratum at the model's probability. Overridden by stratified sampling."""

    # ------------------------------------------------------------------ read

    def capacity(self, model: str) -> float | None:
        """Events/s scoring can sustain for ``model`` alone: the CPU budget over its measured cost per event, capped
        by the event cap (its explicit target first); None while neither bounds it (no cost measured yet, or no CPU
        share and no cap)."""
        m = self.accounts.models.get(model)
        return None if m is None else self.budget.capacity(m, model)

    def snapshot(self) -> dict[str, ModelSamplingStats]:
        """Per-model budget and counts at the last ``now`` seen.

        Call it from the thread that calls :meth:`sample`, or under the same lock: it reads live dicts.
        """
        return self.accounts.snapshot(self._now)


def first_sight(
    labels: NDArray[np.int64], has_label: NDArray[np.bool_]
) -> tuple[list[int | None], list[int], NDArray[np.intp]]:
    """The distinct live labels (None: no label) in the order first seen, how many rows have each, and each row's
    index among them: what ``Counter`` over the rows' labels says, found over the arrays.

    >>> first_sight(np.array([4, 0, 4, 7, 0]), np.array([True, False, True, True, False]))
    ([4, None, 7], [2, 2, 1], array([0, 1, 0, 2, 1]))
    """
    n = len(labels)
    at = np.flatnonzero(has_label)
    values, first, inverse, counts = np.unique(labels[at], return_index=True, return_inverse=True, return_counts=True)
    distinct: list[int | None] = values.tolist()
    how_many: list[int] = counts.tolist()
    firsts: list[int] = at[first].tolist()
    group = np.empty(n, dtype=np.intp)
    group[at] = inverse.reshape(-1)
    if at.size < n:
        distinct.append(None)
        how_many.append(n - at.size)
        firsts.append(int(np.argmin(has_label)))  # the first row without a label
        group[~has_label] = len(distinct) - 1
    order = np.argsort(np.asarray(firsts, dtype=np.intp), kind="stable")
    rank = np.empty(len(order), dtype=np.intp)
    rank[order] = np.arange(len(order), dtype=np.intp)
    picked = order.tolist()
    return [distinct[k] for k in picked], [how_many[k] for k in picked], rank[group]
