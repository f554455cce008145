"""Stage 2 boundary: which decoded events get scored, and how to scale sampled counts back up.

A :class:`Sampler` sees every valid event once, in arrival order, with the pipeline's clock reading ``now``
(epoch seconds). It answers with a weight: 0.0 means "drop", anything else means "score this event" and is the
event's Horvitz–Thompson weight (1 / its inclusion probability; 1.0 for a forced keep). ``snapshot()`` reads the
counters behind the ``sampled fraction`` metric. ``release`` hands out the decisions on events a sampler held back
for a while (weight 0.0 when offered). ``observe_cost`` is told, after each scored micro-batch, what
scoring cost, so that a sampler can score everything while the engine keeps up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from monitor.events import InferenceEvent


@dataclass(frozen=True, slots=True)
class StratumStats:
    """Counts for one (model, stratum); the stratum is the live predicted class, ``"none"``, ``"other"`` or ``"all"``.

    Attributes
    ----------
    seen_total, kept_total, forced_total : monotone counters since ``reset()`` (``forced`` ⊆ ``kept``).
    seen_recent, kept_recent : the same over the sliding ``horizon_seconds``.
    fraction : kept_recent / seen_recent (1.0 before anything was seen) — the sampled-fraction metric.
    weight : 1 / fraction — multiply a sampled count or rate by it to estimate the offered one.
    probability : the current acceptance probability of a non-forced event.
    """

    seen_total: int
    kept_total: int
    forced_total: int
    seen_recent: int
    kept_recent: int
    fraction: float
    weight: float
    probability: float


@dataclass(frozen=True, slots=True)
class ModelSamplingStats:
    """One model's budget and counts; the totals and ``fraction`` sum over ``strata``."""

    model: str
    target_per_second: float
    offered_per_second: float
    seen_total: int
    kept_total: int
    forced_total: int
    seen_recent: int
    kept_recent: int
    fraction: float
    weight: float
    strata: Mapping[str, StratumStats]


class Sampler(Protocol):
    """Decides which events are scored."""

    def sample(self, event: InferenceEvent, now: float, *, force: bool = False) -> float:
        """Return 0.0 to drop ``event``, else its weight (> 0) to score it. ``force=True`` always keeps it."""

    def sample_many(
        self, events: Sequence[InferenceEvent], now: float, forced: Sequence[bool] | None = None
    ) -> list[float]:
        """``sample`` on each event in turn at one ``now`` (``forced[i]``: its ``force``); the weights, in order."""

    def release(self, now: float) -> list[tuple[InferenceEvent, float]]:
        """Decisions on events that ``sample_many`` held undecided (weight 0.0 there), as (event, weight); called
        once per poll step, after that step's ``sample_many`` calls (an event-time reservoir bounded in
        delay). Samplers that never hold return []."""

    def snapshot(self) -> Mapping[str, ModelSamplingStats]:
        """Per-model counts, read at scrape time."""

    def observe_cost(self, model: str, events: int, seconds: float) -> None:
        """Scoring ``events`` of ``model``'s events took ``seconds`` of CPU (one micro-batch): the measured cost
        that work-conserving samplers divide the CPU budget by."""


def fraction_and_weight(kept: int, seen: int) -> tuple[float, float]:
    """(kept / seen, seen / kept), with (1.0, 1.0) before anything was seen.

    Examples
    --------
    >>> fraction_and_weight(5, 100)
    (0.05, 20.0)
    """
    if seen == 0:
        return 1.0, 1.0
    if kept == 0:
        return 0.0, float("inf")
    return kept / seen, seen / kept


def sample_each(
    sampler: Sampler, events: Sequence[InferenceEvent], now: float, forced: Sequence[bool] | None = None
) -> list[float]:
    """``sampler.sample`` on each event in turn at ``now`` (``forced[i]``: its ``force``): ``sample_many``'s meaning,
    for samplers without a faster batch path."""
    return [sampler.sample(ev, now, force=bool(forced and forced[i])) for i, ev in enumerate(events)]
