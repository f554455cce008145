"""The delay-bounded event-time reservoir of the work-conserving sampler (a CPU share set, no event cap).

While a model is not known to be overloaded, its polls are *held* (undecided) as long as their measured cost fits
in the CPU bucket. When the stream pauses (a poll step without the model's events) what was held was a burst, and
it is scored whole if it fits (else uniformly, as much as the bucket affords); when what is held outgrows the
bucket, it is a backlog or an overload, and everything held is decided at the measured rate's probability, and
later polls at once. So a burst is scored whole, and a backlog read after a restart is sampled at one probability
from its first event on — uniformly over its event-time span, not more densely in its first minutes. Nothing is
held longer than ``max_delay_seconds``.
"""

from __future__ import annotations

import enum

from monitor.events import InferenceEvent
from monitor.sampler.accounts import MIN_RATE, ModelAccount, StratumAccount, StratumTally
from monitor.sampler.admission import Admission
from monitor.sampler.allocation import SamplingBudget
from monitor.sampler.uniform_config import UniformSamplerConfig

#: a poll is held only if its cost is at least this share of the CPU bucket (or something is held already)
_HOLD_MIN_DEPTH = 0.01
#: most events one model may hold (a bound on memory for very cheap models)
_MAX_HELD = 50_000


class PollMode(enum.Enum):
    """What happens to one model's events in a poll."""

    #: decided now, each at the poll's acceptance probability
    DECIDE = "decide"
    #: scored whole now: the poll fits the CPU bucket
    ABSORB = "absorb"
    #: held undecided in the reservoir
    HOLD = "hold"


class EventTimeReservoir:
    """Holds polls whose offered rate is not known yet, and decides them when it is, when the stream pauses, or when
    the delay bound is reached; the decisions are handed out by :meth:`release`."""

    def __init__(self, config: UniformSamplerConfig, budget: SamplingBudget, admission: Admission) -> None:
        self.config = config
        self.budget = budget
        self.admission = admission
        #: polls further apart than this start a new rate measurement
        self._max_gap = max(config.max_delay_seconds, config.reallocate_seconds)
        #: decisions on held events not handed out yet
        self._released: list[tuple[InferenceEvent, float]] = []
        #: the events held by the current poll (weight 0.0 there; their decision comes from :meth:`release`)
        self.last_held: list[InferenceEvent] = []

    @property
    def active(self) -> bool:
        """Work-conserving with a delay bound: polls may be held."""
        return self.config.max_delay_seconds > 0 and self.budget.work_conserving

    def measure(self, model: ModelAccount, now: float, events: int) -> float | None:
        """Record a poll of ``events`` of ``model`` at ``now``; its offered rate over the intervals between its recent
        polls (None: the rate of the first poll after a pause is not known yet)."""
        return model.polls.record(now, events, max_gap=self._max_gap)

    def begin_poll(self) -> None:
        """A new poll: nothing held by it yet."""
        self.last_held = []

    def plan(
        self, model: ModelAccount, events: int, measured: float | None, now: float, tally: StratumTally
    ) -> PollMode:
        """What to do with ``model``'s ``events`` in this poll, given the rate ``measured`` over its polls. Decides
        what the model held first when that reached the delay bound."""
        budget = self.budget
        if not self.active or model.cost_seconds <= 0:  # cost not measured yet: scored whole, to measure it
            return PollMode.ABSORB if budget.absorbs(model, events, now) else PollMode.DECIDE
        if model.held and now - model.held_since >= self.config.max_delay_seconds:
            self.decide_held(model, now, measured, tally)
        if measured is not None and (
            (model.overloaded and measured > model.target) or (model.steady and measured <= model.target)
        ):
            return PollMode.DECIDE  # a known overload or a steady stream within its share: decided at once
        model.overloaded = model.steady = False
        if not model.held and events * model.cost_seconds < _HOLD_MIN_DEPTH * budget.cpu.depth:
            # a small poll (one record re-run alone after a crash, a trickle) is decided at once: holding it
            # would move its scoring out of the step that reads it, for no gain in evenness
            return PollMode.ABSORB if budget.fits(model, events, now) else PollMode.DECIDE
        if not model.held:
            model.held_since = now
        return PollMode.HOLD

    def hold(self, model: ModelAccount, event: InferenceEvent, stratum: StratumAccount) -> None:
        """Hold ``event`` undecided."""
        model.held.append((event, stratum))
        self.last_held.append(event)

    def settle(self, model: ModelAccount, now: float, tally: StratumTally) -> None:
        """After a poll: when ``model`` holds more than the CPU bucket holds, it is a backlog or an overload, not a
        burst: decide everything it holds at the measured rate (once there is one, or at the memory bound)."""
        if model.held and not self.budget.fits(model, len(model.held), now):
            measured = self.measure(model, now, 0)
            if measured is not None or len(model.held) >= _MAX_HELD:
                self.decide_held(model, now, measured, tally)

    def decide_held(self, model: ModelAccount, now: float, rate: float | None, tally: StratumTally) -> None:
        """Decide everything ``model`` holds, for :meth:`release`: at ``rate``'s probability (events/s measured over
        the polls), or, with no rate (the stream paused: a burst), whole if it fits the CPU bucket, else uniformly at
        what the bucket affords. A probability below 1 marks the model overloaded."""
        held, model.held = model.held, []
        whole = False
        p_burst = 1.0
        if rate is None:
            whole = self.budget.fits(model, len(held), now)
            work = len(held) * model.cost_seconds
            if not whole and work > 0:
                p_burst = min(1.0, max(self.budget.cpu.balance, 0.0) / work)
        decide = self.admission.decide
        for ev, stratum in held:
            tally.note(stratum)
            p = p_burst if rate is None else min(1.0, stratum.boost * model.target / max(rate, MIN_RATE))
            if rate is not None:
                model.overloaded = model.overloaded or p < 1.0
                model.steady = not model.overloaded
            self._released.append((ev, decide(model, stratum, p, now, force=False, absorb=whole)))

    def release(self, models: dict[str, ModelAccount], now: float) -> list[tuple[InferenceEvent, float]]:
        """The decisions taken since the last call, once per poll step: a model whose events were held and that had
        none since the last call has paused, so what it held was a burst; anything held ``max_delay_seconds`` is
        decided now."""
        tally = StratumTally()
        for model in models.values():
            if model.held and (not model.stepped or now - model.held_since >= self.config.max_delay_seconds):
                self.decide_held(model, now, None if not model.stepped else self.measure(model, now, 0), tally)
            if not model.stepped:  # a pause: the next poll starts a new episode (its rate is not known yet)
                model.polls.clear()
                model.overloaded = model.steady = False
            model.stepped = False
        tally.flush(now)
        released, self._released = self._released, []
        return released
