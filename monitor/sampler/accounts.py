"""Per-model and per-stratum sampling state: offered rates, the measured cost per scored event, the polls' rate, the
events held in the event-time reservoir, and the counters that :meth:`ModelAccounts.snapshot` turns into
:class:`~monitor.sampler.base.ModelSamplingStats`.

A *stratum* is the live server's predicted class (``"none"`` when the event carries no live label, ``"other"`` past
``max_strata`` classes), so that the stratified sampler can reuse this state and the uniform sampler still reports
its class mix.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from monitor.events import InferenceEvent
from monitor.sampler.base import ModelSamplingStats, StratumStats, fraction_and_weight
from monitor.sampler.budget import RateEstimator, TokenBucket, WindowCounter
from monitor.sampler.uniform_config import UniformSamplerConfig

#: smallest offered rate used as a divisor (events/s)
MIN_RATE = 1e-9
#: the offered rate is measured over the polls of about the last second
_RATE_SPAN_SECONDS = 1.0


@dataclass(slots=True)
class StratumAccount:
    """One (model, stratum): its offered rate, acceptance and counters."""

    offered: RateEstimator
    window: WindowCounter
    boost: float = 1.0  # acceptance relative to the model's uniform probability (stratified sampling)
    probability: float = 1.0
    seen_total: int = 0
    kept_total: int = 0
    forced_total: int = 0

    def stats(self, now: float) -> StratumStats:
        """The counters at ``now``, with the sampled fraction over the sliding horizon."""
        seen, kept = self.window.totals(now)
        fraction, weight = fraction_and_weight(kept, seen)
        return StratumStats(
            self.seen_total, self.kept_total, self.forced_total, seen, kept, fraction, weight, self.probability
        )


class PollRate:
    """A model's offered rate measured over the intervals between its recent polls, while they follow each other
    closely (the first poll's own interval is unknown).

    >>> r = PollRate()
    >>> r.record(0.0, 100, max_gap=1.0) is None  # one poll: no interval yet
    True
    >>> r.record(0.5, 100, max_gap=1.0)
    200.0
    """

    __slots__ = ("_events", "_polls")

    def __init__(self) -> None:
        #: (now, events) of the recent polls
        self._polls: deque[tuple[float, int]] = deque()
        self._events = 0  # events in ``_polls``

    def clear(self) -> None:
        """Forget the polls: the next one starts a new episode (its rate is not known yet)."""
        self._polls.clear()
        self._events = 0

    def record(self, now: float, events: int, *, max_gap: float) -> float | None:
        """Record a poll of ``events`` at ``now``; the offered rate over the intervals between the recent polls
        (None: fewer than two polls, i.e. the rate of the first poll after a pause is not known yet). Polls more than
        ``max_gap`` seconds apart (or a clock going back) start over."""
        polls = self._polls
        if polls and not 0.0 <= now - polls[-1][0] <= max_gap:
            self.clear()
        if polls and polls[-1][0] == now:
            polls[-1] = (now, polls[-1][1] + events)
            self._events += events
        elif events or polls:
            polls.append((now, events))
            self._events += events
        while len(polls) > 2 and now - polls[1][0] >= _RATE_SPAN_SECONDS:
            self._events -= polls.popleft()[1]
        if len(polls) < 2:
            return None
        anchor_time, anchor_events = polls[0]
        return (self._events - anchor_events) / (now - anchor_time)


@dataclass(slots=True)
class ModelAccount:
    """One model: its share of the budget, measured cost, strata, and what it holds in the event-time reservoir."""

    offered: RateEstimator
    bucket: TokenBucket
    target: float
    strata: dict[str, StratumAccount] = field(default_factory=dict)
    #: moving average of CPU seconds per scored event (0.0: not measured yet)
    cost_seconds: float = 0.0
    #: no share assigned yet: the first reallocation fills the bucket to its share's burst
    fresh: bool = True
    #: the offered rate over the intervals between this model's polls
    polls: PollRate = field(default_factory=PollRate)
    #: the event-time reservoir: a poll whose rate is not known yet, held (undecided) until the next poll measures it
    held: list[tuple[InferenceEvent, StratumAccount]] = field(default_factory=list)
    held_since: float = 0.0
    #: this model had events since the last :meth:`~monitor.sampler.uniform.UniformSampler.release`
    stepped: bool = False
    #: what was held last was decided below probability 1 (overloaded) or at 1 (steady, within its share): while
    #: the measured rate stays on the same side of the share, polls are decided at once
    overloaded: bool = False
    steady: bool = False

    def observe_cost(self, events: int, seconds: float, smoothing: float) -> bool:
        """Fold ``seconds`` of CPU for ``events`` scored events (``events`` > 0) into the moving average of the cost
        per event; True when it is the model's first measured cost."""
        per_event = max(seconds / events, 1e-9)
        if self.cost_seconds <= 0:
            self.cost_seconds = per_event
            return True
        self.cost_seconds += smoothing * (per_event - self.cost_seconds)
        return False

    def stats(self, name: str, now: float) -> ModelSamplingStats:
        """The model's budget and counts at ``now``, summed over its strata."""
        strata = {key: st.stats(now) for key, st in self.strata.items()}
        seen_recent = sum(s.seen_recent for s in strata.values())
        kept_recent = sum(s.kept_recent for s in strata.values())
        fraction, weight = fraction_and_weight(kept_recent, seen_recent)
        return ModelSamplingStats(
            model=name,
            target_per_second=self.target,
            offered_per_second=self.offered.rate(now),
            seen_total=sum(s.seen_total for s in strata.values()),
            kept_total=sum(s.kept_total for s in strata.values()),
            forced_total=sum(s.forced_total for s in strata.values()),
            seen_recent=seen_recent,
            kept_recent=kept_recent,
            fraction=fraction,
            weight=weight,
            strata=strata,
        )


class ModelAccounts:
    """The models seen so far, each with its strata, created on first sight."""

    def __init__(self, config: UniformSamplerConfig) -> None:
        self.config = config
        self.models: dict[str, ModelAccount] = {}

    def add(self, name: str) -> ModelAccount:
        """A new model: its explicit target if it has one (else 0 until the budget is divided), its bucket sized to
        that target."""
        c = self.config
        target = c.model_targets.get(name, 0.0)
        cap = target * (1.0 + c.headroom)
        model = ModelAccount(
            offered=RateEstimator(c.rate_window_seconds),
            bucket=TokenBucket(cap, max(1.0, cap * c.burst_seconds)),
            target=target,
        )
        self.models[name] = model
        return model

    def stratum(self, model: ModelAccount, label: int | None) -> StratumAccount:
        """The model's stratum for a live label (None: no live label), created on first sight."""
        key = "none" if label is None else str(label)
        stratum = model.strata.get(key)
        if stratum is None:
            if len(model.strata) >= self.config.max_strata and key != "none":
                key = "other"
                stratum = model.strata.get(key)
            if stratum is None:
                c = self.config
                stratum = StratumAccount(RateEstimator(c.rate_window_seconds), WindowCounter(c.horizon_seconds))
                model.strata[key] = stratum
        return stratum

    @property
    def holding(self) -> int:
        """Events held undecided in the event-time reservoir, all models."""
        return sum(len(m.held) for m in self.models.values())

    def snapshot(self, now: float) -> dict[str, ModelSamplingStats]:
        """Per-model budget and counts at ``now``."""
        return {name: model.stats(name, now) for name, model in self.models.items()}


@dataclass(slots=True)
class _Before:
    stratum: StratumAccount
    seen: int
    kept: int


class StratumTally:
    """The sampled-fraction windows of one batch of decisions at one ``now``: each stratum decided on is noted before
    its first decision, and :meth:`flush` adds what was seen and kept since, one window update per stratum.

    >>> st = StratumAccount(RateEstimator(), WindowCounter())
    >>> tally = StratumTally()
    >>> tally.note(st)
    >>> st.seen_total, st.kept_total = 3, 1
    >>> tally.flush(0.0)
    >>> st.window.totals(0.0)
    (3, 1)
    """

    __slots__ = ("_before",)

    def __init__(self) -> None:
        self._before: dict[int, _Before] = {}

    def note(self, stratum: StratumAccount) -> None:
        """Remember ``stratum``'s counters unless it was noted already."""
        if id(stratum) not in self._before:
            self._before[id(stratum)] = _Before(stratum, stratum.seen_total, stratum.kept_total)

    def flush(self, now: float) -> None:
        """Add each noted stratum's decisions since it was noted to its window at ``now``."""
        for b in self._before.values():
            b.stratum.window.add_many(now, b.stratum.seen_total - b.seen, b.stratum.kept_total - b.kept)
